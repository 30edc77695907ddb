//! The profcol collector: command line and the registry of every component.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod allocator;
pub mod app;
pub mod cli;
pub mod components;
pub mod harness;
pub mod health_probe;
