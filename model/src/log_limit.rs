//! Rate-limited log lines: under overload one event (a refused batch, a
//! failed export) can happen thousands of times a second, and a line for
//! each would flood the log and cost more than the work. Each call site of
//! [`warn_limited!`](crate::warn_limited) logs at most [`BURST`] lines per
//! [`WINDOW`]; the first line after a quiet spell says how many were left
//! out (`suppressed`). Metrics still count every event.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines one call site may log per window.
pub const BURST: u32 = 10;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// The state of one call site.
pub struct LogLimit(Mutex<State>);

struct State {
    window_start: Option<Instant>,
    logged: u32,
    suppressed: u64,
}

impl LogLimit {
    pub const fn new() -> Self {
        Self(Mutex::new(State {
            window_start: None,
            logged: 0,
            suppressed: 0,
        }))
    }

    /// Whether to log now: `Some(n)` with the lines left out since the last
    /// one logged, `None` to leave this one out.
    pub fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if s.window_start
            .is_none_or(|t| now.duration_since(t) >= WINDOW)
        {
            s.window_start = Some(now);
            s.logged = 0;
        }
        if s.logged < BURST {
            s.logged += 1;
            Some(std::mem::take(&mut s.suppressed))
        } else {
            s.suppressed += 1;
            None
        }
    }
}

impl Default for LogLimit {
    fn default() -> Self {
        Self::new()
    }
}

/// `tracing::warn!` limited per call site (see [`LogLimit`]); a line after
/// left-out ones carries `suppressed = N`.
#[macro_export]
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::log_limit::LogLimit = $crate::log_limit::LogLimit::new();
        match LIMIT.admit() {
            Some(0) => ::tracing::warn!($($arg)+),
            Some(suppressed) => ::tracing::warn!(suppressed, $($arg)+),
            None => {}
        }
    }};
}

/// [`warn_limited!`] at `info` level.
#[macro_export]
macro_rules! info_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::log_limit::LogLimit = $crate::log_limit::LogLimit::new();
        match LIMIT.admit() {
            Some(0) => ::tracing::info!($($arg)+),
            Some(suppressed) => ::tracing::info!(suppressed, $($arg)+),
            None => {}
        }
    }};
}

/// [`warn_limited!`] at `error` level.
#[macro_export]
macro_rules! error_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::log_limit::LogLimit = $crate::log_limit::LogLimit::new();
        match LIMIT.admit() {
            Some(0) => ::tracing::error!($($arg)+),
            Some(suppressed) => ::tracing::error!(suppressed, $($arg)+),
            None => {}
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_per_window_then_the_count_of_what_was_left_out() {
        let l = LogLimit::new();
        let t0 = Instant::now();
        for _ in 0..BURST {
            assert_eq!(l.admit_at(t0), Some(0));
        }
        for _ in 0..25 {
            assert_eq!(l.admit_at(t0 + Duration::from_secs(1)), None);
        }
        assert_eq!(
            l.admit_at(t0 + WINDOW),
            Some(25),
            "the next window says how many"
        );
        assert_eq!(l.admit_at(t0 + WINDOW), Some(0));
    }
}
