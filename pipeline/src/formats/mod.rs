//! Conversions between OTLP profiles and other formats. Pure: no I/O.

pub mod otlp_json;
pub mod pprof;
pub mod sentry;
