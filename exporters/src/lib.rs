//! profcol's exporters, one folder per YAML type.

pub mod debug;
pub mod file;
pub mod otlp;
pub mod pprof;
pub mod sentry;
