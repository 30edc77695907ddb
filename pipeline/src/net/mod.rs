//! Serving clients over TCP with limits that hold against hostile ones:
//! one accept loop and connection model for every listener (receivers,
//! `health_check`, the metrics endpoint).
//!
//! - [`conns`]: every open connection, the per-listener cap (the oldest
//!   idle connection is closed to admit a new one), idle and age timeouts,
//!   and shedding when the process is out of file descriptors;
//! - [`stream`]: a TCP stream that can be closed from outside;
//! - [`endpoint`]: `host:port` as the Collector reads it, and binding it;
//! - [`body`]: request bodies that must keep arriving;
//! - [`serve`]: the accept loop and hyper's HTTP/1.1 and HTTP/2 settings;
//! - [`listeners`]: where each listener is bound (port 0 picks one);
//! - [`http_server`]: the listener keys of the HTTP receivers, and opening
//!   a listener (bind, TLS) before serving it.

pub mod body;
pub mod conns;
pub mod endpoint;
mod http_server;
pub mod listeners;
mod serve;
mod stream;
pub mod tls;

pub use body::{is_body_timeout, BodyLimits, BodyTimeout};
pub use http_server::{open, HttpServerConfig, ListenerDefaults, Opened};
pub use listeners::{Bound, Listeners};
pub use serve::{spawn, ServerSettings, CONTENT_ENCODINGS};

/// An error with its causes: HTTP clients hide the one that matters
/// (connection refused, DNS, a certificate) in `source()`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
