//! CPU time of the process and of the calling thread, for the tap's CPU
//! budget: `clock_gettime` on the CPU-time clocks, the one call here that
//! needs `unsafe` (std has no CPU clocks).
#![allow(unsafe_code)]

use std::time::Duration;

/// CPU time of the whole process so far (every thread).
pub fn process() -> Duration {
    cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread so far.
pub fn thread() -> Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Zero if the clock cannot be read (the budget then stays as it is).
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a CPU clock of this process or thread, and a pointer to a
    // live timespec that the call fills.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}
