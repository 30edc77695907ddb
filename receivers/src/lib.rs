//! profcol's receivers, one folder per YAML type.

pub mod body;
pub mod endpoint;
pub mod ingest;
pub mod otlp;
pub mod pyroscope;
pub mod record;
pub mod sentry;
