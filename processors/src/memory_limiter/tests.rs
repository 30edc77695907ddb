use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use profcol_pipeline::config::{ComponentConfig, Kind};

use super::*;

const MIB: usize = 1 << 20;

fn limits(yaml: &str, total: Option<usize>) -> Result<Limits, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "memory_limiter", yaml)
        .map_err(|e| e.to_string())?;
    cfg.decode_checked(|c: &MemoryLimiterConfig| c.validate(&cfg, total))
        .map(|(_, l)| l)
        .map_err(|e| e.to_string())
}

#[test]
fn limits_as_the_collector_computes_them() {
    // The Collector's README example.
    let l = limits(
        "check_interval: 1s\nlimit_mib: 4000\nspike_limit_mib: 800",
        None,
    )
    .unwrap();
    assert_eq!(l.check_interval, Duration::from_secs(1));
    assert_eq!((l.hard, l.soft), (4000 * MIB, 3200 * MIB));
    // Spike defaults to 20 % of the limit.
    let l = limits("check_interval: 5s\nlimit_mib: 1000", None).unwrap();
    assert_eq!((l.hard, l.soft), (1000 * MIB, 800 * MIB));
    // Percentages of the memory the process may use.
    let l = limits(
        "check_interval: 1s\nlimit_percentage: 75\nspike_limit_percentage: 15",
        Some(1000 * MIB),
    )
    .unwrap();
    assert_eq!((l.hard, l.soft), (750 * MIB, 600 * MIB));
    // A share that would leave less than profcol's 64 MiB of overhead below
    // the container's limit is capped there: 80 % of 256 MiB is 204.8 MiB,
    // and 204.8 + 64 would not fit.
    let l = limits(
        "check_interval: 1s\nlimit_percentage: 80\nspike_limit_percentage: 15",
        Some(256 * MIB),
    )
    .unwrap();
    assert_eq!(l.hard, 192 * MIB);
    assert!(l.hard + 64 * MIB <= 256 * MIB && l.soft < l.hard);
    // Above 320 MiB, 80 % leaves room enough and is kept.
    let l = limits(
        "check_interval: 1s\nlimit_percentage: 80\nspike_limit_percentage: 15",
        Some(1000 * MIB),
    )
    .unwrap();
    assert_eq!(l.hard, 800 * MIB);
    // Fixed limits win over percentages.
    let l = limits(
        "check_interval: 1s\nlimit_mib: 100\nlimit_percentage: 75",
        Some(1000 * MIB),
    )
    .unwrap();
    assert_eq!(l.hard, 100 * MIB);
    // Go GC knobs load (no effect: no garbage collector here).
    limits(
        "check_interval: 1s\nlimit_mib: 100\nmin_gc_interval_when_soft_limited: 10s\nmax_gc_interval_when_hard_limited: 30s",
        None,
    )
    .unwrap();
}

#[test]
fn the_collectors_checks_at_their_keys() {
    let p = "processors::memory_limiter";
    for (yaml, want) in [
        ("limit_mib: 100", format!("{p}::check_interval: 'check_interval' must be greater than zero")),
        ("check_interval: 1s", format!("{p}::limit_mib: 'limit_mib' or 'limit_percentage' must be greater than zero")),
        ("check_interval: 1s\nlimit_mib: 100\nspike_limit_mib: 100", format!("{p}::spike_limit_mib: 'spike_limit_mib' must be smaller than 'limit_mib'")),
        ("check_interval: 1s\nlimit_percentage: 50\nspike_limit_percentage: 60", format!("{p}::spike_limit_percentage: 'spike_limit_percentage' must be smaller than 'limit_percentage'")),
        ("check_interval: 1s\nlimit_percentage: 150", format!("{p}::limit_percentage: 'limit_percentage' and 'spike_limit_percentage' must be greater than zero and less than or equal to hundred")),
        ("check_interval: 1s\nlimit_mib: 100\nlimitmib: 3", format!("{p}: unknown field \"limitmib\"")),
    ] {
        let err = limits(yaml, Some(1 << 30)).unwrap_err();
        assert!(err.contains(&want), "{yaml}: {err}");
    }
    let err = limits("check_interval: 1s\nlimit_percentage: 50", None).unwrap_err();
    assert!(
        err.contains("failed to get total memory, use fixed memory settings (limit_mib)"),
        "{err}"
    );
}

static RSS: AtomicUsize = AtomicUsize::new(0);
static READS: AtomicUsize = AtomicUsize::new(0);

fn fake_rss() -> Option<usize> {
    READS.fetch_add(1, Ordering::SeqCst);
    Some(RSS.load(Ordering::SeqCst))
}

/// Refuses above the soft limit, measured at most every check_interval,
/// retryably and with the `memory_limiter` reason; accepts again once
/// memory is back under it.
#[test]
fn refuses_above_the_soft_limit_and_recovers() {
    let gate = MemoryGate::new(
        Limits {
            check_interval: Duration::from_millis(50),
            hard: 100 * MIB,
            soft: 80 * MIB,
        },
        fake_rss,
    );
    assert_eq!(gate.memory_limit(), Some(100 * MIB));
    RSS.store(70 * MIB, Ordering::SeqCst);
    assert!(gate.admit().is_ok());
    // Within check_interval the reading is reused: no refusal yet.
    RSS.store(90 * MIB, Ordering::SeqCst);
    let reads = READS.load(Ordering::SeqCst);
    assert!(gate.admit().is_ok());
    assert_eq!(READS.load(Ordering::SeqCst), reads);
    std::thread::sleep(Duration::from_millis(60));
    let refusal = gate.admit().unwrap_err();
    assert_eq!(refusal.reason, REFUSED);
    assert!(
        refusal.detail.contains("soft limit of 80 MiB"),
        "{refusal:?}"
    );
    // Load stops, memory comes down: accepted again at the next reading.
    RSS.store(60 * MIB, Ordering::SeqCst);
    assert!(gate.admit().is_err());
    std::thread::sleep(Duration::from_millis(60));
    assert!(gate.admit().is_ok());
}
