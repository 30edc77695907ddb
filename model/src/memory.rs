//! The collector's memory budget (`--memory-limit-mib`), counted in bytes a
//! batch really holds: request bodies as they are read and decompressed,
//! decoded batches by their heap size (see `model::footprint`), and the
//! working space of processors and exporters while they run.
//!
//! - Admission ([`MemoryBudget::admit`], [`MemoryBudget::try_admit`],
//!   [`Reservation::try_grow_to`]): receivers reserve before they read,
//!   decode or convert, so nothing accepted is ever dropped for memory.
//!   What does not fit now waits its turn, first come first served (a
//!   large request is not starved by small ones that keep the budget
//!   nearly full), for a while, then is told to retry, and the room it
//!   needs is kept for it until it comes back ([`Claim`]); what could not
//!   fit even in an idle collector (the limit less the least resident
//!   memory seen beside reservations, [`MemoryBudget::room`]) is refused
//!   for good.
//! - Work ([`MemoryBudget::for_work`]): processing and exporting a batch
//!   that was accepted must go on. Work waits while the budget is full, but
//!   one piece of work may always run, so the pipeline cannot deadlock on
//!   the memory its own queued batches hold. What is in use thus stays
//!   under the limit plus at most one piece of work.
//! - The process's resident memory ([`spawn_guard`]): what the budget does
//!   not see (the program itself, buffers, memory the allocator keeps after
//!   it was freed) is read from `/proc` ten times a second and counted
//!   against the limit too; near the limit the allocator is asked to give
//!   freed memory back at once, and once the collector is idle it gives
//!   back what it kept, so that resident memory follows the data in flight.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    state: Mutex<State>,
    freed: Notify,
    /// Resident memory the reservations do not account for, as last read.
    untracked: AtomicUsize,
    /// The least of `untracked` seen: what the process holds when nothing
    /// is in flight (`usize::MAX` until first read).
    floor: AtomicUsize,
    /// Admissions so far, to tell when the collector is idle.
    admissions: AtomicUsize,
    /// What a request's body is seen to need per byte on the wire.
    expansion: [Expansion; 2],
    /// See [`CLAIM_TTL`].
    claim_ttl: Duration,
}

#[derive(Debug, Default)]
struct State {
    used: usize,
    /// Work reservations outstanding.
    working: usize,
    /// Tickets of the admissions waiting for room, in arrival order.
    waiting: VecDeque<u64>,
    next_ticket: u64,
    /// The largest request refused lately for want of room, which its
    /// client will retry: the room it needs is kept free for it.
    claim: Option<Claim>,
}

/// Room kept for a request that was refused and will be retried: smaller
/// requests are admitted only if they leave it free, so that the budget
/// drains until it fits (a large request is not starved by small ones
/// that keep the budget nearly full and always come back first).
#[derive(Debug, Clone, Copy)]
struct Claim {
    bytes: usize,
    /// Dropped then if its request has not come back (its client gave up).
    until: Instant,
}

impl Claim {
    /// Whether a request of `bytes` may be the one the claim is for (its
    /// expected need may have moved a little since), or as large: such a
    /// request takes the room and ends the claim.
    fn taken_by(&self, bytes: usize) -> bool {
        bytes >= self.bytes - self.bytes / 4
    }
}

/// Admissions waiting for room at once; past it, requests are refused at
/// once. Each waiter is a request whose body waits unread, up to an HTTP/2
/// stream's window of it in its connection's buffers (1 MiB), memory the
/// budget sees only as resident memory; the servers' connection windows
/// leave room for this many (see `pipeline::net::serve`).
pub const MAX_WAITING: usize = 16;

/// How long the room of a refused request is kept for it after its last
/// refusal: longer than its client's wait before it retries (a Collector's
/// or an SDK's OTLP exporter: the `RetryInfo` delay of 1 s, or its own
/// backoff, 5 s at first, up to half as long again with jitter).
pub const CLAIM_TTL: Duration = Duration::from_secs(10);

/// The budget cannot hold `wanted` bytes now; `limit` is the most it could
/// ever hold ([`MemoryBudget::room`]): over it, never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    pub wanted: usize,
    pub limit: usize,
}

impl Exhausted {
    /// Whether no wait could make room for it.
    pub fn never(&self) -> bool {
        self.wanted > self.limit
    }
}

/// Whether a body arrives compressed: how much it expands differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Plain = 0,
    Compressed = 1,
}

/// What a request needs (body and decoded data) per byte on the wire, as
/// recent requests needed it (fixed point, 1/16): reserved before a body
/// of known length is read, so that one that will not fit is refused
/// before any work. Starts low (a first request reserves little and
/// grows), then follows the requests seen, rising at once and falling
/// slowly, so that a steady stream reserves what it needs up front.
#[derive(Debug)]
struct Expansion(AtomicUsize);

impl Expansion {
    const ONE: usize = 16;

    fn new(start: usize) -> Self {
        Self(AtomicUsize::new(start * Self::ONE))
    }

    fn expect(&self, wire: usize) -> usize {
        wire.saturating_mul(self.0.load(Ordering::Relaxed)) / Self::ONE
    }

    fn saw(&self, wire: usize, needed: usize) {
        if wire == 0 {
            return;
        }
        let seen = (needed.saturating_mul(Self::ONE) / wire).clamp(Self::ONE, 256 * Self::ONE);
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if seen >= old {
                    seen
                } else {
                    old - (old - seen) / 8
                })
            });
    }
}

impl MemoryBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            state: Mutex::new(State::default()),
            freed: Notify::new(),
            untracked: AtomicUsize::new(0),
            floor: AtomicUsize::new(usize::MAX),
            admissions: AtomicUsize::new(0),
            expansion: [Expansion::new(2), Expansion::new(4)],
            claim_ttl: CLAIM_TTL,
        })
    }

    /// As [`MemoryBudget::new`], a claim kept `ttl`: for tests.
    pub fn with_claim_ttl(limit: usize, ttl: Duration) -> Arc<Self> {
        let mut b = Self::new(limit);
        Arc::get_mut(&mut b).expect("just made").claim_ttl = ttl;
        b
    }

    /// The most one reservation could ever get: the limit less what the
    /// process held with nothing in flight (the least seen).
    pub fn room(&self) -> usize {
        match self.floor.load(Ordering::Relaxed) {
            usize::MAX => self.limit,
            floor => self.limit.saturating_sub(floor),
        }
    }

    fn exhausted(&self, wanted: usize) -> Exhausted {
        Exhausted {
            wanted,
            limit: self.room(),
        }
    }

    /// What an admission of `bytes` must leave free besides: the room kept
    /// for a claim it is smaller than (none once the claim has lapsed).
    fn kept_for_claim(&self, s: &mut State, bytes: usize) -> usize {
        match s.claim {
            Some(c) if c.until <= Instant::now() => {
                s.claim = None;
                0
            }
            Some(c) if bytes > 0 && !c.taken_by(bytes) => c.bytes,
            _ => 0,
        }
    }

    /// Admits `bytes` (checked to fit): a request as large as the claim
    /// takes its room and ends it.
    fn take(self: &Arc<Self>, s: &mut State, bytes: usize) -> Reservation {
        if s.claim.is_some_and(|c| bytes > 0 && c.taken_by(bytes)) {
            s.claim = None;
        }
        s.used += bytes;
        Reservation {
            budget: self.clone(),
            bytes,
            work: false,
            wire: None,
        }
    }

    /// `bytes` do not fit now; their client is told to retry. The largest
    /// request so refused claims its room until it comes back (see
    /// [`Claim`]); the same one refused again keeps its claim longer.
    fn refused(&self, s: &mut State, bytes: usize) -> Exhausted {
        let e = self.exhausted(bytes);
        if bytes > 0 && !e.never() {
            let until = Instant::now() + self.claim_ttl;
            s.claim = match s.claim {
                Some(c) if c.until > Instant::now() && c.bytes >= bytes => Some(Claim {
                    until: if c.taken_by(bytes) { until } else { c.until },
                    ..c
                }),
                _ => Some(Claim { bytes, until }),
            };
        }
        e
    }

    /// Records what resident memory holds besides the `used` bytes
    /// reserved, and wakes the admissions waiting: it may have left room.
    /// The floor is read only with nothing reserved: a reservation is made
    /// before its memory is touched, so resident memory less reservations
    /// would understate it.
    pub fn set_untracked(&self, bytes: usize, used: usize) {
        self.untracked.store(bytes, Ordering::Relaxed);
        if used == 0 {
            self.floor.fetch_min(bytes, Ordering::Relaxed);
        }
        self.freed.notify_waiters();
    }

    /// What a body of `wire` bytes on the wire is expected to need in all
    /// (its bytes and what decoding them takes), from the requests seen;
    /// never more than half of [`MemoryBudget::room`], so that a guess
    /// alone neither refuses for good nor waits for a room that resident
    /// memory a little over its floor never leaves (the exact need, known
    /// once the body is read, decides).
    pub fn expected(&self, wire: usize, how: Wire) -> usize {
        self.expansion[how as usize]
            .expect(wire)
            .min(self.room() / 2)
    }

    /// A body of `wire` bytes turned out to need `needed` bytes.
    pub fn saw(&self, wire: usize, how: Wire, needed: usize) {
        self.expansion[how as usize].saw(wire, needed);
    }

    /// Whether `more` bytes fit on top of `used` and what resident memory
    /// holds besides the reservations.
    fn fits(&self, used: usize, more: usize) -> bool {
        used.saturating_add(more)
            .saturating_add(self.untracked.load(Ordering::Relaxed))
            <= self.limit
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.lock().used
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves `bytes` if they fit under the limit, leaving the room a
    /// larger request refused before claimed (see [`Claim`]).
    /// Others waiting for room come first: then only 0 bytes are admitted.
    /// Not for a client's request, which would retry: see
    /// [`MemoryBudget::admit`].
    pub fn try_admit(self: &Arc<Self>, bytes: usize) -> Result<Reservation, Exhausted> {
        self.admissions.fetch_add(1, Ordering::Relaxed);
        let mut s = self.lock();
        if bytes > self.room() {
            return Err(self.exhausted(bytes));
        }
        let queued = bytes > 0 && !s.waiting.is_empty();
        let kept = self.kept_for_claim(&mut s, bytes);
        if queued || !self.fits(s.used, bytes.saturating_add(kept)) {
            return Err(self.exhausted(bytes));
        }
        Ok(self.take(&mut s, bytes))
    }

    /// Reserves `bytes` for a client's request, waiting up to `patience`
    /// for room in arrival order: while one waits, those that came after it
    /// wait behind it even if they would fit. Refused at once if the bytes
    /// could never fit. Refused for now (the client will retry), the room
    /// it needs is claimed for it (see [`Claim`]).
    pub async fn admit(
        self: &Arc<Self>,
        bytes: usize,
        patience: Duration,
    ) -> Result<Reservation, Exhausted> {
        self.admissions.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + patience;
        // Leaves the line when done, admitted or not (or dropped while
        // waiting, its client gone), letting the next one look.
        struct InLine<'a>(&'a MemoryBudget, Option<u64>);
        impl Drop for InLine<'_> {
            fn drop(&mut self) {
                if let Some(t) = self.1 {
                    let mut s = self.0.lock();
                    if let Some(at) = s.waiting.iter().position(|&w| w == t) {
                        s.waiting.remove(at);
                    }
                    let more = !s.waiting.is_empty();
                    drop(s);
                    if more {
                        self.0.freed.notify_waiters();
                    }
                }
            }
        }
        let mut line = InLine(self, None);
        loop {
            let freed = self.freed.notified();
            {
                let mut s = self.lock();
                if bytes > self.room() {
                    return Err(self.exhausted(bytes));
                }
                let kept = self.kept_for_claim(&mut s, bytes);
                // The request a claim is for (back after its refusal)
                // comes before those waiting: they wait for its room.
                let claimed = match s.claim {
                    Some(c) if bytes > 0 && c.taken_by(bytes) => Some(c.bytes),
                    _ => None,
                };
                // It gets in once all it was seen to need fits (what it
                // expects now may be less).
                let kept = kept.max(claimed.map_or(0, |c| c.saturating_sub(bytes)));
                let first = claimed.is_some()
                    || match line.1 {
                        None => s.waiting.is_empty(),
                        Some(t) => s.waiting.front() == Some(&t),
                    };
                if first && self.fits(s.used, bytes.saturating_add(kept)) {
                    return Ok(self.take(&mut s, bytes));
                }
                if patience.is_zero() {
                    return Err(self.refused(&mut s, bytes));
                }
                if line.1.is_none() {
                    if s.waiting.len() >= MAX_WAITING {
                        return Err(self.refused(&mut s, bytes));
                    }
                    let t = s.next_ticket;
                    s.next_ticket += 1;
                    s.waiting.push_back(t);
                    line.1 = Some(t);
                }
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(self.refused(&mut self.lock(), bytes));
            }
        }
    }

    /// Reserves `bytes` for work on data already accepted: waits while they
    /// do not fit, unless no other work holds a reservation (then it goes
    /// ahead over the limit, so work always progresses).
    pub async fn for_work(self: &Arc<Self>, bytes: usize) -> Reservation {
        loop {
            let freed = self.freed.notified();
            {
                let mut s = self.lock();
                if s.working == 0 || self.fits(s.used, bytes) {
                    s.used = s.used.saturating_add(bytes);
                    s.working += 1;
                    return Reservation {
                        budget: self.clone(),
                        bytes,
                        work: true,
                        wire: None,
                    };
                }
            }
            freed.await;
        }
    }

    fn release(&self, bytes: usize, work: bool) {
        {
            let mut s = self.lock();
            s.used = s.used.saturating_sub(bytes);
            if work {
                s.working -= 1;
            }
        }
        self.freed.notify_waiters();
    }
}

/// Bytes held in the budget until dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: usize,
    work: bool,
    /// The body's size on the wire, when it was reserved for one.
    wire: Option<(usize, Wire)>,
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Made for a body of `wire` bytes on the wire: see
    /// [`Reservation::needed`].
    pub fn for_wire(&mut self, wire: usize, how: Wire) {
        self.wire = Some((wire, how));
    }

    /// The body this reservation was made for turned out to need `needed`
    /// bytes in all: the next ones reserve as much up front.
    pub fn needed(&self, needed: usize) {
        if let Some((wire, how)) = self.wire {
            self.budget.saw(wire, how, needed);
        }
    }

    /// Grows the reservation to `total` bytes if that fits under the limit.
    pub fn try_grow_to(&mut self, total: usize) -> Result<(), Exhausted> {
        if total <= self.bytes {
            return Ok(());
        }
        let more = total - self.bytes;
        let mut s = self.budget.lock();
        // Over the room, never, even if resident memory read while other
        // reservations were not yet touched says it would fit now.
        if total > self.budget.room() || !self.budget.fits(s.used, more) {
            // A client's request, which will come back needing as much.
            return Err(self.budget.refused(&mut s, total));
        }
        s.used += more;
        self.bytes = total;
        Ok(())
    }

    /// Sets the reservation to `total` bytes: gives back what is over it,
    /// or grows to it if that fits ([`Reservation::try_grow_to`]).
    pub fn try_resize_to(&mut self, total: usize) -> Result<(), Exhausted> {
        if total < self.bytes {
            self.set(total);
            return Ok(());
        }
        self.try_grow_to(total)
    }

    /// Sets the reservation to `total` bytes whether or not they fit: for
    /// the true size of something already in memory.
    pub fn set(&mut self, total: usize) {
        if total > self.bytes {
            self.budget.lock().used += total - self.bytes;
        } else if total < self.bytes {
            let less = self.bytes - total;
            {
                let mut s = self.budget.lock();
                s.used = s.used.saturating_sub(less);
            }
            self.budget.freed.notify_waiters();
        }
        self.bytes = total;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes, self.work);
    }
}

/// What the binary's allocator can do to give memory back; set once at
/// start ([`set_allocator`]). Without it the guard only measures.
#[derive(Clone, Copy)]
pub struct Allocator {
    /// Near the limit (`true`): return freed memory at once, trading CPU
    /// for memory; `false` when there is room again.
    pub pressure: fn(bool),
    /// Give back what the allocator keeps of freed memory.
    pub collect: fn(),
    /// Bytes the allocator has committed for the heap now (live objects
    /// and freed pages it keeps), for the process metrics.
    pub committed: fn() -> usize,
}

static ALLOCATOR: OnceLock<Allocator> = OnceLock::new();

/// Bytes the binary's allocator has committed now; `None` without one.
pub fn allocator_committed() -> Option<usize> {
    ALLOCATOR.get().map(|a| (a.committed)())
}

pub fn set_allocator(a: Allocator) {
    let _ = ALLOCATOR.set(a);
}

/// Bumped when every thread should give back what its allocator heap keeps.
static COLLECT_EPOCH: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COLLECTED_EPOCH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Each thread's allocator heap keeps the memory freed on it: asks every
/// thread to give it back, now (this thread, the CPU pool) or when it next
/// parks ([`on_thread_park`], for the async runtime's threads).
fn collect_everywhere(a: Allocator) {
    COLLECT_EPOCH.fetch_add(1, Ordering::Relaxed);
    (a.collect)();
    crate::cpu::on_every_thread(a.collect);
}

/// Woken when the collector has been idle a while (see [`spawn_guard`]).
fn idle_signal() -> &'static Notify {
    static IDLE: OnceLock<Notify> = OnceLock::new();
    IDLE.get_or_init(Notify::new)
}

/// Resolves the next time the memory guard finds the collector idle: the
/// moment for components to give back buffers they keep for reuse (then to
/// call [`release_freed_memory`]).
pub async fn idle() {
    idle_signal().notified().await
}

/// To be called by the async runtime's threads when they park
/// (`tokio::runtime::Builder::on_thread_park`): collects once per request.
pub fn on_thread_park() {
    let epoch = COLLECT_EPOCH.load(Ordering::Relaxed);
    if COLLECTED_EPOCH.with(|c| c.replace(epoch)) != epoch {
        if let Some(a) = ALLOCATOR.get() {
            (a.collect)();
        }
    }
}

/// Has every thread's allocator heap give back the freed memory it keeps
/// (what a Go program's forced GC does for the `memory_limiter`); nothing
/// without an allocator that can.
pub fn release_freed_memory() {
    if let Some(a) = ALLOCATOR.get() {
        collect_everywhere(*a);
    }
}

/// The memory this process may use: its cgroup's limit (v2 `memory.max`,
/// v1 `memory.limit_in_bytes`) when one is set, else the machine's
/// (`MemTotal`), as the Collector's `memory_limiter` reads it for its
/// percentages.
pub fn total_memory() -> Option<usize> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let machine = read("/proc/meminfo").and_then(|m| {
        let kb: usize = m
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    });
    let cgroup = read("/sys/fs/cgroup/memory.max")
        .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    match (cgroup, machine) {
        // "max", or v1's "no limit" (a huge number), mean the machine's.
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    }
}

/// Resident memory of this process, from `/proc/self/statm`.
#[allow(unsafe_code)]
pub fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * usize::try_from(page).ok()?)
}

/// User plus system CPU time of this process so far, in seconds.
#[allow(unsafe_code)]
pub fn cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the whole rusage it points at on success,
    // and only then is it read.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// How close to the limit the allocator is put under pressure, and how far
/// below it the pressure is lifted.
const PRESSURE_ON: usize = 16 << 20;
const PRESSURE_OFF: usize = 64 << 20;
/// Idle this long (no admission, or none since the last reservation went),
/// the allocator gives back what it kept.
pub const IDLE: Duration = Duration::from_secs(2);
/// When, idle, the allocator is collected: at [`IDLE`], and after blocking
/// threads idle for [`IDLE`] have ended (the runtime's `thread_keep_alive`).
const IDLE_COLLECTIONS: [Duration; 2] = [IDLE, Duration::from_secs(5)];

/// Reads resident memory ten times a second until `stop`: counts what the
/// reservations do not explain against the limit, puts the allocator under
/// pressure near the limit, and has it give memory back once idle.
pub fn spawn_guard(
    budget: Arc<MemoryBudget>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let alloc = ALLOCATOR.get().copied();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut pressure, mut collected, mut held) = (false, 0, 0);
        let mut last = (budget.admissions.load(Ordering::Relaxed), Instant::now());
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let Some(rss) = resident_bytes() else { return };
            let used = budget.used();
            budget.set_untracked(rss.saturating_sub(used), used);
            let Some(alloc) = alloc else { continue };
            // Near the limit, or with freed memory kept by the allocator
            // taking a quarter of the budget: give it back at once.
            let limit = budget.limit;
            let near = rss + PRESSURE_ON >= limit || rss.saturating_sub(used) >= limit / 4;
            let clear = rss + PRESSURE_OFF < limit && rss.saturating_sub(used) < limit / 8;
            if near && !pressure {
                pressure = true;
                (alloc.pressure)(true);
                collect_everywhere(alloc);
            } else if clear && pressure {
                pressure = false;
                (alloc.pressure)(false);
            }
            // Idle: no admission for a while, counted again from when the
            // last reservation went (exporters may work on after the last
            // request; a queue for a peer that is down may hold data for
            // long). Collected then, and again once the runtime's blocking
            // threads, idle as long, have ended and left their heaps' free
            // pages to be returned.
            let admissions = budget.admissions.load(Ordering::Relaxed);
            let drained = used == 0 && held > 0;
            held = used;
            if admissions != last.0 || drained {
                last = (admissions, Instant::now());
                collected = 0;
            } else if collected < IDLE_COLLECTIONS.len()
                && last.1.elapsed() >= IDLE_COLLECTIONS[collected]
            {
                if collected == 0 {
                    idle_signal().notify_waiters();
                }
                collect_everywhere(alloc);
                collected += 1;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    //! Tests that order tasks with short waits run on tokio's paused
    //! clock: a wait ends only once every task is idle, so the spawned
    //! requests are in line by then however loaded the machine. (Claims
    //! lapse by the wall clock, so their test waits for real.)
    use super::*;
    use std::time::Duration;

    #[test]
    fn admission_stops_at_the_limit_and_reopens_when_released() {
        let b = MemoryBudget::new(100);
        let a = b.try_admit(60).unwrap();
        assert!(b.try_admit(50).is_err());
        let mut c = b.try_admit(40).unwrap();
        assert!(c.try_grow_to(41).is_err());
        drop(a);
        c.try_grow_to(90).unwrap();
        assert_eq!(b.used(), 90);
        c.set(10);
        assert_eq!(b.used(), 10);
        drop(c);
        assert_eq!(b.used(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn what_could_never_fit_is_told_so_and_what_could_waits_its_turn() {
        let b = MemoryBudget::new(100);
        // Resident memory less reservations made before their memory is
        // touched understates what the process holds: not a floor.
        let early = b.try_admit(50).unwrap();
        b.set_untracked(10, 50);
        drop(early);
        assert_eq!(b.room(), 100);
        // The process holds 60 with nothing in flight: 40 is all there is.
        b.set_untracked(60, 0);
        b.set_untracked(70, 0);
        assert_eq!(b.room(), 40);
        let never = b.admit(50, Duration::from_secs(5)).await.unwrap_err();
        assert!(never.never(), "{never:?}");
        let mut r = b.try_admit(10).unwrap();
        let e = r.try_grow_to(41).unwrap_err();
        assert!(e.never(), "{e:?}");
        // 25 fits once the 10 held goes back (at 70 untracked, 30 is free):
        // it waits, then gets it; a short patience gives up retryably.
        let e = b.admit(25, Duration::from_millis(20)).await.unwrap_err();
        assert!(!e.never());
        let b2 = b.clone();
        let waiting = tokio::spawn(async move { b2.admit(25, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(r);
        let got = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!((got.bytes(), b.used()), (25, 25));
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_request_is_not_starved_by_small_ones() {
        let b = MemoryBudget::new(100);
        let mut small: Vec<_> = (0..9).map(|_| b.try_admit(10).unwrap()).collect();
        let b2 = b.clone();
        let large = tokio::spawn(async move { b2.admit(60, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        // Small ones keep coming as others finish: they would fit, but
        // the large one came first.
        let mut behind = Vec::new();
        for _ in 0..9 {
            small.remove(0);
            assert!(b.try_admit(10).is_err(), "jumped the line");
            let b3 = b.clone();
            let next = tokio::spawn(async move { b3.admit(10, Duration::from_millis(50)).await });
            tokio::time::sleep(Duration::from_millis(5)).await;
            if large.is_finished() {
                behind.push(next);
                break;
            }
            assert!(!next.is_finished(), "jumped the line");
            behind.push(next);
        }
        for t in behind {
            drop(t.await.unwrap());
        }
        let large = tokio::time::timeout(Duration::from_secs(1), large)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(large.bytes(), 60);
        // The line is empty again: small ones go straight in.
        drop(small);
        assert!(b.try_admit(10).is_ok());
    }

    /// Small requests keep the budget nearly full: each time one ends,
    /// another (its client retrying at once) takes its room. A large one
    /// that fits the limit, but not the room the small ones leave, is
    /// refused and retried later, as an OTLP client told `UNAVAILABLE`
    /// does: it gets in on its next retry once the small ones have drained
    /// the room it claimed, and small ones go on in what is left meanwhile.
    #[tokio::test]
    async fn a_refused_large_request_gets_in_when_retried_among_small_ones() {
        let b = MemoryBudget::new(100);
        let mut small: VecDeque<Reservation> = (0..9).map(|_| b.try_admit(10).unwrap()).collect();
        let (mut large, mut small_admitted) = (None, 0);
        for round in 1..=40 {
            small.pop_front();
            while let Ok(r) = b.try_admit(10) {
                small.push_back(r);
                small_admitted += 1;
            }
            // The large client retries every 8 rounds.
            if round % 8 == 0 {
                match b.admit(60, Duration::ZERO).await {
                    Ok(r) => {
                        large = Some((round, r));
                        break;
                    }
                    Err(e) => assert!(!e.never()),
                }
            }
        }
        let (round, large) = large.expect("the large request was starved");
        assert_eq!((round, large.bytes()), (16, 60), "on its first retry");
        assert!(small_admitted >= 8, "small ones went on: {small_admitted}");
        // Its room was taken: small ones fill what is left, as before.
        while let Ok(r) = b.try_admit(10) {
            small.push_back(r);
        }
        assert_eq!(b.used(), 100);
    }

    /// A claim whose request never comes back lapses: the room goes back to
    /// everyone.
    #[tokio::test]
    async fn a_claim_lapses_when_its_request_does_not_come_back() {
        let b = MemoryBudget::with_claim_ttl(100, Duration::from_millis(50));
        let held = b.try_admit(50).unwrap();
        // Refused to no client (not through `admit`): no claim.
        assert!(b.try_admit(60).is_err());
        assert!(b.try_admit(10).is_ok());
        assert!(b.admit(60, Duration::ZERO).await.is_err());
        // 50 are free, but 60 are kept for the large one.
        assert!(b.try_admit(10).is_err());
        assert!(b.admit(10, Duration::ZERO).await.is_err());
        tokio::time::sleep(Duration::from_millis(60)).await;
        let r = b.try_admit(10).unwrap();
        drop((held, r));
        // A request as large (its need may have moved) takes the claim,
        // even past others waiting in line, once all the claim fits.
        let mut held = b.try_admit(45).unwrap();
        assert!(b.admit(60, Duration::ZERO).await.is_err());
        let b2 = b.clone();
        let small = tokio::spawn(async move { b2.admit(5, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!small.is_finished(), "waits for the claimed room");
        assert!(b.admit(48, Duration::ZERO).await.is_err(), "60 do not fit");
        held.set(40);
        let big = b.admit(48, Duration::ZERO).await.unwrap();
        let small = small.await.unwrap().unwrap();
        assert_eq!(b.used(), 40 + 48 + 5, "the claim ended");
        drop((held, big, small));
    }

    #[test]
    fn the_expected_need_follows_the_requests_seen() {
        let b = MemoryBudget::new(1 << 30);
        assert_eq!(b.expected(1000, Wire::Plain), 2000);
        b.saw(1000, Wire::Plain, 6000);
        assert_eq!(b.expected(1000, Wire::Plain), 6000, "rises at once");
        assert_eq!(b.expected(1000, Wire::Compressed), 4000, "apart");
        b.saw(1000, Wire::Plain, 2000);
        let e = b.expected(1000, Wire::Plain);
        assert!(e < 6000 && e > 5000, "falls slowly: {e}");
        // Never more than the budget could hold.
        assert_eq!(MemoryBudget::new(100).expected(1000, Wire::Plain), 50);
    }

    #[tokio::test(start_paused = true)]
    async fn one_piece_of_work_always_runs_and_others_wait_for_room() {
        let b = MemoryBudget::new(100);
        let _held = b.try_admit(100).unwrap();
        // Over the limit, but nothing else works: it runs.
        let first = b.for_work(50).await;
        // A second waits until the first is done.
        let b2 = b.clone();
        let second = tokio::spawn(async move { b2.for_work(50).await.bytes() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished());
        drop(first);
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(1), second)
                .await
                .unwrap()
                .unwrap(),
            50
        );
    }
}

impl MemoryBudget {
    /// Reserves `bytes` whatever the limit: for memory already in use that
    /// must be counted (a copy of a shared batch a processor had to make).
    pub fn force(self: &Arc<Self>, bytes: usize) -> Reservation {
        self.lock().used += bytes;
        Reservation {
            budget: self.clone(),
            bytes,
            work: false,
            wire: None,
        }
    }
}

/// A batch's reservation, behind the batch's `Arc`s: resized when a
/// processor changes the batch, released when its last copy is dropped.
#[derive(Debug)]
pub struct Held(Mutex<Reservation>);

impl Held {
    pub fn new(r: Reservation) -> Arc<Self> {
        Arc::new(Self(Mutex::new(r)))
    }

    pub fn bytes(&self) -> usize {
        self.lock().bytes()
    }

    pub fn set(&self, bytes: usize) {
        self.lock().set(bytes)
    }

    /// The reservation of a batch made of others (`batch` merges them):
    /// `bytes` on the budget the inputs' `shares` are counted in, whatever
    /// the limit (the memory is in use). The caller drops the shares once
    /// the merged batch exists, so that the inputs' reservations give way
    /// to the merged one's. `None` when no input had a reservation.
    pub fn merge(shares: &[Arc<Held>], bytes: usize) -> Option<Arc<Held>> {
        let budget = shares.first()?.lock().budget.clone();
        Some(Held::new(budget.force(bytes)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reservation> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
