//! The profcol collector: command line, the registry of every component, and
//! the `health_check` extension.

pub mod allocator;
pub mod app;
pub mod bearertokenauth;
pub mod cli;
pub mod components;
pub mod file_storage;
pub mod harness;
pub mod health_check;
