//! The CPU work of the data path (decoding, validation, conversion,
//! processors, compression) runs on one pool of threads, one per core, not
//! on the threads that serve connections and not on tokio's blocking pool,
//! which grows a thread per concurrent job: on a 2-core sidecar more
//! threads than cores only add context switches, and each thread's
//! allocator heap keeps freed memory of its own (four threads kept 45 MB
//! more after a burst than two).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();

/// Jobs given to the pool and not finished (queued or running).
static PENDING: AtomicUsize = AtomicUsize::new(0);

fn pool() -> &'static rayon::ThreadPool {
    POOL.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("profcol-cpu-{i}"))
            .build()
            .expect("the CPU pool starts")
    })
}

/// Requests up to this size (protobuf bytes) are checked, decoded and
/// processed on the task that holds them, not the pool: for a small
/// request the hop to the pool and back (two thread wake-ups) costs more
/// than the work (4–8% of a 1k-sample pass-through, about as much as four
/// processors), while 256 KiB takes well under a millisecond to check.
pub const INLINE: usize = 256 * 1024;

/// Runs `f` on the CPU pool and waits for it without blocking the async
/// thread. A panic in `f` is resumed here, as `spawn_blocking` would report
/// it.
pub async fn run<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = tokio::sync::oneshot::channel();
    PENDING.fetch_add(1, Ordering::Relaxed);
    pool().spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        PENDING.fetch_sub(1, Ordering::Relaxed);
        let _ = tx.send(r);
    });
    match rx.await.expect("the CPU pool runs every job") {
        Ok(r) => r,
        Err(panic) => resume_unwind(panic),
    }
}

/// Runs `f` on the task that calls it when its input is `len` bytes of
/// up to [`INLINE`] (the hop to the pool and back costs more than the
/// work), else on the pool as [`run`] does.
pub async fn run_sized<R: Send + 'static>(len: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
    if len <= INLINE {
        return f();
    }
    run(f).await
}

/// How many of the pool's threads no job is waiting for now.
pub fn spare_threads() -> usize {
    pool()
        .current_num_threads()
        .saturating_sub(PENDING.load(Ordering::Relaxed))
}

/// Runs `f` once on every thread of the pool (to have each thread's
/// allocator heap give back what it keeps).
pub fn on_every_thread(f: fn()) {
    pool().broadcast(|_| f());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn small_work_runs_in_place_and_large_work_on_the_pool() {
        let name = || std::thread::current().name().map(str::to_owned);
        let here = name();
        assert_eq!(run_sized(INLINE, name).await, here);
        let there = run_sized(INLINE + 1, name).await.unwrap();
        assert!(there.starts_with("profcol-cpu-"), "{there}");
    }

    #[tokio::test]
    async fn a_job_takes_a_spare_thread_until_it_ends() {
        let threads = pool().current_num_threads();
        let (started, is_started) = tokio::sync::oneshot::channel();
        let (end, ended) = std::sync::mpsc::channel::<()>();
        let job = tokio::spawn(run(move || {
            let _ = started.send(());
            let _ = ended.recv();
        }));
        is_started.await.unwrap();
        // Other tests' jobs only take more.
        assert!(spare_threads() < threads);
        end.send(()).unwrap();
        job.await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while spare_threads() < threads {
            assert!(std::time::Instant::now() < deadline, "a thread stays taken");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}
