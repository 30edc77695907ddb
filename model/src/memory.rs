//! The collector's memory budget (`--memory-limit-mib`), counted in bytes a
//! batch really holds: request bodies as they are read and decompressed,
//! decoded batches by their heap size (see `model::footprint`), and the
//! working space of processors and exporters while they run.
//!
//! - Admission ([`MemoryBudget::try_admit`], [`Reservation::try_grow`]):
//!   receivers reserve before they read, decode or convert; past the limit
//!   the client is asked to retry, so nothing accepted is ever dropped for
//!   memory.
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
    /// Admissions so far, to tell when the collector is idle.
    admissions: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    used: usize,
    /// Work reservations outstanding.
    working: usize,
}

/// The budget is full: retry later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    pub wanted: usize,
    pub limit: usize,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            state: Mutex::new(State::default()),
            freed: Notify::new(),
            untracked: AtomicUsize::new(0),
            admissions: AtomicUsize::new(0),
        })
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

    /// Reserves `bytes` if they fit under the limit.
    pub fn try_admit(self: &Arc<Self>, bytes: usize) -> Result<Reservation, Exhausted> {
        self.admissions.fetch_add(1, Ordering::Relaxed);
        let mut s = self.lock();
        if !self.fits(s.used, bytes) {
            return Err(Exhausted {
                wanted: bytes,
                limit: self.limit,
            });
        }
        s.used += bytes;
        Ok(Reservation {
            budget: self.clone(),
            bytes,
            work: false,
        })
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
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grows the reservation to `total` bytes if that fits under the limit.
    pub fn try_grow_to(&mut self, total: usize) -> Result<(), Exhausted> {
        if total <= self.bytes {
            return Ok(());
        }
        let more = total - self.bytes;
        let mut s = self.budget.lock();
        if !self.budget.fits(s.used, more) {
            return Err(Exhausted {
                wanted: total,
                limit: self.budget.limit,
            });
        }
        s.used += more;
        self.bytes = total;
        Ok(())
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
/// Idle this long (no admission), the allocator gives back what it kept.
const IDLE: Duration = Duration::from_secs(2);

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
        let (mut pressure, mut collected) = (false, false);
        let mut last = (budget.admissions.load(Ordering::Relaxed), Instant::now());
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let Some(rss) = resident_bytes() else { return };
            let used = budget.used();
            budget
                .untracked
                .store(rss.saturating_sub(used), Ordering::Relaxed);
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
            let admissions = budget.admissions.load(Ordering::Relaxed);
            if admissions != last.0 {
                last = (admissions, Instant::now());
                collected = false;
            } else if !collected && last.1.elapsed() >= IDLE {
                collect_everywhere(alloc);
                collected = true;
            }
        }
    })
}

#[cfg(test)]
mod tests {
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

    #[tokio::test]
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
