//! Conversions between OTLP profiles and other formats. Pure: no I/O.

pub mod otlp_json;
pub mod otlp_revisions;
