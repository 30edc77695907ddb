//! `balancer_name: round_robin`, the Collector's default: one connection
//! per address the endpoint's host name resolves to, calls taken by each
//! in turn, as gRPC-Go's `dns` resolver and `round_robin` policy do. A
//! gateway behind a headless Service (or any name with several records)
//! then gets the load spread over all its replicas, not sent to the first.
//!
//! An address whose connection fails is left out for a while (1 s, doubled
//! at each failure up to 120 s, gRPC's connection backoff without the
//! jitter), and a call that could not connect goes to the next address at
//! once: it never left this process. The name is resolved again every
//! 30 s (gRPC-Go only on a connection failure, at most every 30 s): new
//! replicas are used without waiting for one to fail. An answer that
//! fails or is empty keeps the addresses in use, as gRPC-Go does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};

use crate::lookup::{self, Lookup};

/// How often the name is resolved again.
const REFRESH: Duration = Duration::from_secs(30);
/// How long a lookup may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(120);

/// Makes the endpoint of one address (the configured settings, TLS
/// verifying the host name).
pub(crate) type MakeEndpoint = Box<dyn Fn(SocketAddr) -> Result<Endpoint, String> + Send + Sync>;

pub(crate) struct Spread {
    host: String,
    port: u16,
    lookup: Arc<dyn Lookup>,
    make: MakeEndpoint,
    state: Mutex<State>,
    resolving: AtomicBool,
}

#[derive(Default)]
struct State {
    conns: Vec<Conn>,
    /// Where the next call starts.
    next: usize,
    resolved: Option<Instant>,
}

struct Conn {
    addr: SocketAddr,
    channel: Channel,
    failures: u32,
    down_until: Option<Instant>,
}

impl Spread {
    pub(crate) fn new(host: &str, port: u16, lookup: Arc<dyn Lookup>, make: MakeEndpoint) -> Self {
        Self {
            host: host.to_owned(),
            port,
            lookup,
            make,
            state: Mutex::default(),
            resolving: AtomicBool::new(false),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connections to try for one call, in order: the next in turn
    /// first, those left out after a failure last. Resolves the name
    /// first while no address is known; again in the background when the
    /// last answer is old.
    pub(crate) async fn candidates(self: &Arc<Self>) -> Result<Vec<(SocketAddr, Channel)>, String> {
        let (empty, stale) = {
            let s = self.state();
            let stale = s.resolved.is_none_or(|t| t.elapsed() >= REFRESH);
            (s.conns.is_empty(), stale)
        };
        if empty {
            // Nothing to call yet: every call asks (retries space them).
            self.resolve().await?;
        } else if stale && !self.resolving.swap(true, Ordering::AcqRel) {
            let me = self.clone();
            tokio::spawn(async move {
                // A failure keeps the addresses in use (logged there).
                let _ = me.resolve().await;
                me.resolving.store(false, Ordering::Release);
            });
        }
        let mut s = self.state();
        let n = s.conns.len();
        if n == 0 {
            return Err(format!("resolving {}: no addresses", self.host));
        }
        let start = s.next % n;
        s.next = s.next.wrapping_add(1);
        let now = Instant::now();
        let (mut up, mut down) = (Vec::with_capacity(n), Vec::new());
        for c in s.conns[start..].iter().chain(&s.conns[..start]) {
            let pair = (c.addr, c.channel.clone());
            match c.down_until {
                Some(t) if t > now => down.push(pair),
                _ => up.push(pair),
            }
        }
        up.extend(down);
        Ok(up)
    }

    /// A call through `addr` could not connect: it is left out a while.
    pub(crate) fn failed(&self, addr: SocketAddr) {
        let mut s = self.state();
        if let Some(c) = s.conns.iter_mut().find(|c| c.addr == addr) {
            let wait = BACKOFF_START
                .saturating_mul(1 << c.failures.min(7))
                .min(BACKOFF_MAX);
            c.failures = c.failures.saturating_add(1);
            c.down_until = Some(Instant::now() + wait);
        }
    }

    /// A call through `addr` was answered.
    pub(crate) fn answered(&self, addr: SocketAddr) {
        let mut s = self.state();
        if let Some(c) = s.conns.iter_mut().find(|c| c.addr == addr) {
            c.failures = 0;
            c.down_until = None;
        }
    }

    /// One lookup: addresses that stay keep their connection, new ones get
    /// one, gone ones are dropped. A failed or empty answer changes
    /// nothing (the error is returned when no address is known).
    async fn resolve(&self) -> Result<(), String> {
        let answer = lookup::resolve(&*self.lookup, &self.host, self.port, LOOKUP_TIMEOUT).await;
        let addrs = match answer {
            Ok(a) if !a.is_empty() => a,
            other => {
                let why = other
                    .err()
                    .unwrap_or_else(|| format!("resolving {}: no addresses", self.host));
                let mut s = self.state();
                s.resolved = Some(Instant::now());
                if s.conns.is_empty() {
                    return Err(why);
                }
                tracing::warn!(error = %why, "resolving the endpoint again failed; the addresses in use are kept");
                return Ok(());
            }
        };
        let mut s = self.state();
        let mut old = std::mem::take(&mut s.conns);
        let mut conns = Vec::with_capacity(addrs.len());
        for addr in addrs {
            if let Some(i) = old.iter().position(|c| c.addr == addr) {
                conns.push(old.swap_remove(i));
                continue;
            }
            match (self.make)(addr) {
                Ok(ep) => conns.push(Conn {
                    addr,
                    channel: ep.connect_lazy(),
                    failures: 0,
                    down_until: None,
                }),
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "cannot connect to an address of the endpoint")
                }
            }
        }
        if conns.is_empty() {
            // Nothing usable in the answer: keep what was in use.
            conns = old;
        }
        s.conns = conns;
        s.resolved = Some(Instant::now());
        Ok(())
    }
}

/// Whether a failed call never reached the peer: its connection could not
/// be made (TCP, TLS or the connect timeout), so another address may take
/// it at once.
pub(crate) fn not_connected(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut e = Some(error);
    while let Some(x) = e {
        if x.is::<tonic::ConnectError>() {
            return true;
        }
        e = x.source();
    }
    false
}
