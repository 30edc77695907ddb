//! profcol's extensions, one folder per YAML type: `health_check`,
//! `bearertokenauth` (an authenticator receivers and exporters name),
//! `file_storage` (where persistent sending queues live, on
//! `profcol-queue`) and `profilez` (pages and flame graphs of what the
//! pipelines carry).

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod bearertokenauth;
pub mod file_storage;
pub mod health_check;
pub mod profilez;
