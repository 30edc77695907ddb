//! profcol's core: the data model, dictionary, formats, config and runtime.
//! Knows no concrete component; receivers, processors and exporters plug in
//! through the traits in [`component`].

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod component;
pub mod config;
pub mod cpu;
pub mod formats;
pub mod memory;
pub mod model;
pub mod net;
pub mod proto;
pub mod runtime;
pub mod telemetry;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use model::{BatchMeta, ProfileBatch};
