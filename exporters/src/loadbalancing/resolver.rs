//! Where the backends come from: a fixed list, or a host name resolved
//! again every `interval`. The name lookup ([`crate::lookup`]) is a trait
//! so that a test can change the answer and watch keys move.

use std::net::SocketAddr;
use std::time::Duration;

use crate::lookup::Lookup;

/// One resolution: the backends as `ip:port`, sorted as text and without
/// duplicates (so that an answer in another order is no change), or why
/// there are none this time.
pub async fn resolve(
    lookup: &dyn Lookup,
    hostname: &str,
    port: u16,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let addrs = crate::lookup::resolve(lookup, hostname, port, timeout).await?;
    let mut endpoints: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    endpoints.sort_unstable();
    Ok(endpoints)
}
