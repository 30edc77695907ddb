//! profcol's receivers, one folder per YAML type.

pub mod body;
pub mod endpoint;
pub mod ingest;
pub mod otlp;
pub mod record;
pub mod sentry;
