//! profcol's core: config, the component traits and the runtime. Knows no
//! concrete component; receivers, processors and exporters plug in through
//! the traits in [`component`]. The data model is `profcol-model`,
//! re-exported here under its old paths.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod component;
pub mod config;
pub mod net;
pub mod runtime;
pub mod telemetry;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use profcol_model as model;
pub use profcol_model::{cpu, memory, proto};
pub use profcol_model::{error_limited, info_limited, warn_limited};
pub use profcol_model::{BatchMeta, ProfileBatch};
