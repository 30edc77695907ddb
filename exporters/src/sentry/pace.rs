//! `max_chunks_per_second`: one token bucket per DSN, shared by every
//! exporter of the process that sends to it (the smallest rate configured
//! wins), so that fan-out from any number of pipelines stays under it.
//! A chunk past the rate waits its turn; nothing is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

pub(super) struct Pace {
    state: Mutex<Bucket>,
}

struct Bucket {
    rate: f64,
    /// Tokens left; below 0 when turns are reserved ahead.
    tokens: f64,
    at: Instant,
}

/// The bucket of `dsn`, made or joined; `None` for no limit (`rate` 0).
pub(super) fn for_dsn(dsn: &str, rate: f64) -> Option<Arc<Pace>> {
    if rate <= 0.0 || !rate.is_finite() {
        return None;
    }
    static ALL: OnceLock<Mutex<HashMap<String, Weak<Pace>>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Default::default).lock().unwrap();
    all.retain(|_, p| p.strong_count() > 0);
    if let Some(p) = all.get(dsn).and_then(Weak::upgrade) {
        let mut b = p.state.lock().unwrap();
        b.rate = b.rate.min(rate);
        drop(b);
        return Some(p);
    }
    let p = Arc::new(Pace {
        state: Mutex::new(Bucket {
            rate,
            tokens: burst(rate),
            at: Instant::now(),
        }),
    });
    all.insert(dsn.to_owned(), Arc::downgrade(&p));
    Some(p)
}

/// One second's worth, at least one chunk.
fn burst(rate: f64) -> f64 {
    rate.max(1.0)
}

impl Pace {
    /// Takes a turn: how long to wait before sending.
    pub(super) fn take(&self) -> Duration {
        let mut b = self.state.lock().unwrap();
        let now = Instant::now();
        let refill = now.duration_since(b.at).as_secs_f64() * b.rate;
        b.tokens = (b.tokens + refill).min(burst(b.rate));
        b.at = now;
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / b.rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_past_the_rate_wait_and_exporters_of_one_dsn_share_it() {
        let a = for_dsn("https://k@pace.test/1", 10.0).unwrap();
        let b = for_dsn("https://k@pace.test/1", 20.0).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let waits: Vec<Duration> = (0..12).map(|_| a.take()).collect();
        // A second's burst, then a turn every 100 ms.
        assert!(waits[..10].iter().all(|w| w.is_zero()), "{waits:?}");
        assert!(waits[10] > Duration::from_millis(80), "{waits:?}");
        assert!(waits[11] > Duration::from_millis(180), "{waits:?}");
        assert!(for_dsn("https://k@pace.test/2", 0.0).is_none());
    }
}
