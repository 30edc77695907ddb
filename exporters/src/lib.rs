//! profcol's exporters, one folder per YAML type.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

mod client_auth;
pub mod debug;
pub mod file;
pub mod http_client;
mod http_common;
pub mod kafka;
pub mod loadbalancing;
pub mod lookup;
pub mod otlp;
pub mod otlphttp;
mod parts;
pub mod pprof;
pub mod prometheus;
pub mod sentry;
pub mod settled;
