//! Every open connection of every listener, so that limits hold across
//! them: a listener at its cap closes its oldest idle connection to admit a
//! new one, an idle connection is closed after its listener's idle timeout,
//! and when the process runs out of file descriptors the oldest idle
//! connection of any listener goes, so that no port stops answering.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use tokio::sync::Notify;

/// Start of the clock connections keep their idle times on.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

/// Every connection, by id.
static OPEN: LazyLock<Mutex<HashMap<u64, Arc<Conn>>>> = LazyLock::new(Default::default);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn open() -> std::sync::MutexGuard<'static, HashMap<u64, Arc<Conn>>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The connections one listener may hold.
pub struct Slots {
    pub name: String,
    max: usize,
    count: AtomicUsize,
    freed: Notify,
}

impl Slots {
    pub fn new(name: impl Into<String>, max: usize) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            max: max.max(1),
            count: AtomicUsize::new(0),
            freed: Notify::new(),
        })
    }

    pub fn open(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Returns once the listener may accept one more connection: at its cap
    /// it closes its oldest idle connection, or, with none idle, waits for
    /// one to end (new clients wait in the kernel's backlog meanwhile).
    pub async fn wait_for_room(self: &Arc<Self>) {
        loop {
            let freed = self.freed.notified();
            if self.open() < self.max {
                return;
            }
            if let Some(c) = oldest_idle(Some(self)) {
                crate::info_limited!(listener = %self.name, peer = %c.remote, max = self.max, "connection limit reached; closing the oldest idle connection");
                c.close();
            }
            // A closed connection frees its slot once its task has ended.
            let _ = tokio::time::timeout(Duration::from_millis(100), freed).await;
        }
    }

    /// Registers a new connection; the slot is freed when the guard drops.
    pub fn register(self: &Arc<Self>, remote: SocketAddr) -> ConnGuard {
        self.count.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            slots: self.clone(),
            remote,
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(now_ms()),
            closed: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            retire: Notify::new(),
        });
        open().insert(conn.id, conn.clone());
        ConnGuard(conn)
    }

    /// Closes this listener's connections idle for longer than `idle`, and
    /// asks those older than `max_age` to close gracefully.
    pub fn sweep(self: &Arc<Self>, idle: Option<Duration>, max_age: Option<Duration>) {
        let now = now_ms();
        let mine: Vec<Arc<Conn>> = open()
            .values()
            .filter(|c| Arc::ptr_eq(&c.slots, self))
            .cloned()
            .collect();
        for c in mine {
            if let (Some(idle), Some(for_ms)) = (idle, c.idle_for_ms(now)) {
                if for_ms >= idle.as_millis() as u64 {
                    tracing::debug!(listener = %self.name, peer = %c.remote, "closing an idle connection");
                    c.close();
                    continue;
                }
            }
            if max_age.is_some_and(|age| c.opened.elapsed() >= age) {
                c.retire.notify_one();
            }
        }
    }
}

/// One connection's state, shared by its stream, its requests and the
/// sweeper.
pub struct Conn {
    id: u64,
    slots: Arc<Slots>,
    pub remote: SocketAddr,
    opened: Instant,
    in_flight: AtomicUsize,
    /// When (ms after `EPOCH`) the last request ended, or the connection
    /// opened.
    idle_since_ms: AtomicU64,
    closed: AtomicBool,
    /// The task reading the connection, woken to see it closed.
    pub(super) waker: AtomicWaker,
    retire: Notify,
}

impl Conn {
    /// Marks a request in flight until the guard drops: a connection with
    /// one is never idle.
    pub fn begin_request(self: &Arc<Self>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        RequestGuard(self.clone())
    }

    /// How long the connection has had no request in flight, if none is.
    fn idle_for_ms(&self, now: u64) -> Option<u64> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| now.saturating_sub(self.idle_since_ms.load(Ordering::Relaxed)))
    }

    /// Closes the connection at once: its reads see the end of the stream
    /// and its writes fail, so the server drops it.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waker.wake();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Completes when the connection has lived past its maximum age.
    pub async fn retired(&self) {
        self.retire.notified().await
    }
}

/// A request in flight on a connection.
pub struct RequestGuard(Arc<Conn>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.idle_since_ms.store(now_ms(), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An open connection; dropping it frees its slot.
pub struct ConnGuard(Arc<Conn>);

impl std::ops::Deref for ConnGuard {
    type Target = Arc<Conn>;
    fn deref(&self) -> &Arc<Conn> {
        &self.0
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        open().remove(&self.0.id);
        self.0.slots.count.fetch_sub(1, Ordering::Relaxed);
        self.0.slots.freed.notify_waiters();
    }
}

/// The connection idle the longest, of one listener or of all.
fn oldest_idle(of: Option<&Arc<Slots>>) -> Option<Arc<Conn>> {
    let now = now_ms();
    open()
        .values()
        .filter(|c| of.is_none_or(|s| Arc::ptr_eq(&c.slots, s)) && !c.is_closed())
        .filter_map(|c| c.idle_for_ms(now).map(|t| (t, c)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, c)| c.clone())
}

/// Out of file descriptors: closes the oldest idle connection of any
/// listener so that accepting can go on. Returns whether one was closed.
pub fn shed_oldest_idle() -> bool {
    match oldest_idle(None) {
        Some(c) => {
            crate::warn_limited!(listener = %c.slots.name, peer = %c.remote, "out of file descriptors; closing the oldest idle connection");
            c.close();
            true
        }
        None => false,
    }
}
