//! profcol's receivers, one folder per YAML type.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod body;
mod compressed_copy;
mod gunzip;
pub mod ingest;
pub mod kafka;
pub mod otlp;
pub mod pprof;
pub mod pyroscope;
pub mod record;
pub mod sentry;
