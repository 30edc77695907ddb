//! The profcol collector: command line, the registry of every component, and
//! the `health_check` extension.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod allocator;
pub mod app;
pub mod bearertokenauth;
pub mod cli;
pub mod components;
pub mod file_storage;
pub mod harness;
pub mod health_check;
pub mod health_probe;
