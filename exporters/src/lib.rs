//! profcol's exporters, one folder per YAML type.

mod client_auth;
pub mod debug;
pub mod file;
mod http_common;
pub mod otlp;
pub mod otlphttp;
pub mod pprof;
pub mod sentry;
