//! Host names resolved to addresses, by the system or (tests) by hand:
//! the `loadbalancing` exporter's `dns` resolver and the `otlp`
//! exporter's `round_robin` both look names up through it.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

/// Resolves a host name to the addresses of its backends.
#[async_trait]
pub trait Lookup: Send + Sync + 'static {
    /// Every address of `hostname`, with `port`.
    async fn lookup(&self, hostname: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system resolver (getaddrinfo, through Tokio's blocking pool).
pub struct SystemLookup;

#[async_trait]
impl Lookup for SystemLookup {
    async fn lookup(&self, hostname: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((hostname, port)).await?.collect())
    }
}

/// An answer set by hand, for tests: every lookup returns it, whatever
/// the name, until it is changed.
pub struct ScriptedLookup {
    answer: Mutex<Result<Vec<SocketAddr>, String>>,
}

impl ScriptedLookup {
    pub fn new(addrs: Vec<SocketAddr>) -> Self {
        Self {
            answer: Mutex::new(Ok(addrs)),
        }
    }

    /// From now on, lookups return `addrs`.
    pub fn set(&self, addrs: Vec<SocketAddr>) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Ok(addrs);
    }

    /// From now on, lookups fail with `message`.
    pub fn fail(&self, message: &str) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Err(message.to_owned());
    }
}

#[async_trait]
impl Lookup for ScriptedLookup {
    async fn lookup(&self, _: &str, _: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.answer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .map_err(std::io::Error::other)
    }
}

/// One lookup of `hostname` within `timeout`: its addresses, sorted and
/// without duplicates, or why there are none.
pub async fn resolve(
    lookup: &dyn Lookup,
    hostname: &str,
    port: u16,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, String> {
    let mut addrs = match tokio::time::timeout(timeout, lookup.lookup(hostname, port)).await {
        Ok(Ok(addrs)) => addrs,
        Ok(Err(e)) => return Err(format!("resolving {hostname}: {e}")),
        Err(_) => return Err(format!("resolving {hostname}: timed out after {timeout:?}")),
    };
    addrs.sort_unstable();
    addrs.dedup();
    Ok(addrs)
}
