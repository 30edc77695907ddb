//! The `memory_limiter` section, with the Collector's keys and checks
//! (opentelemetry-collector, `internal/memorylimiter/config.go`).

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryLimiterConfig {
    /// How often resident memory is measured; required, > 0.
    pub check_interval: Option<Duration>,
    /// The hard limit, in MiB; takes precedence over `limit_percentage`.
    pub limit_mib: u32,
    /// Headroom below the hard limit: data is refused above
    /// `limit - spike` (the soft limit). Default 20 % of the limit.
    pub spike_limit_mib: u32,
    /// The hard limit as a percentage of the memory the process may use
    /// (its cgroup's limit, else the machine's).
    pub limit_percentage: u32,
    pub spike_limit_percentage: u32,
    // The Go runtime's garbage collection knobs: profcol has no garbage
    // collector (freed memory is returned by the allocator); accepted so
    // that a Collector config loads, with no effect.
    pub min_gc_interval_when_soft_limited: Option<Duration>,
    pub min_gc_interval_when_hard_limited: Option<Duration>,
    pub max_gc_interval_when_soft_limited: Option<Duration>,
    pub max_gc_interval_when_hard_limited: Option<Duration>,
}

/// The limits, resolved to bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub check_interval: std::time::Duration,
    /// Hard limit: the collector's memory budget, unless
    /// `--memory-limit-mib` is given.
    pub hard: usize,
    /// Above this much resident memory, data is refused.
    pub soft: usize,
}

const MIB: u64 = 1 << 20;

/// What profcol may hold above its limit (docs/operations.md "Memory").
const OVERHEAD: u64 = 64 * MIB;

impl MemoryLimiterConfig {
    /// The Collector's checks, each at its key, then the limits in bytes;
    /// `total` is the memory the percentages are of (`None`: unknown).
    pub(crate) fn validate(
        &self,
        cfg: &ComponentConfig,
        total: Option<usize>,
    ) -> Result<Limits, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let interval = self.check_interval.map(|d| d.get()).unwrap_or_default();
        if interval.is_zero() {
            errs.push(
                cfg.key_path("check_interval"),
                "'check_interval' must be greater than zero",
            );
        }
        if self.limit_mib == 0 && self.limit_percentage == 0 {
            errs.push(
                cfg.key_path("limit_mib"),
                "'limit_mib' or 'limit_percentage' must be greater than zero",
            );
        }
        if self.limit_percentage > 100 || self.spike_limit_percentage > 100 {
            let key = if self.limit_percentage > 100 {
                "limit_percentage"
            } else {
                "spike_limit_percentage"
            };
            errs.push(
                cfg.key_path(key),
                "'limit_percentage' and 'spike_limit_percentage' must be greater than zero and less than or equal to hundred",
            );
        }
        if self.limit_mib > 0 && self.limit_mib <= self.spike_limit_mib {
            errs.push(
                cfg.key_path("spike_limit_mib"),
                "'spike_limit_mib' must be smaller than 'limit_mib'",
            );
        }
        if self.limit_percentage > 0 && self.limit_percentage <= self.spike_limit_percentage {
            errs.push(
                cfg.key_path("spike_limit_percentage"),
                "'spike_limit_percentage' must be smaller than 'limit_percentage'",
            );
        }
        if let (Some(soft), Some(hard)) = (
            self.min_gc_interval_when_soft_limited,
            self.min_gc_interval_when_hard_limited,
        ) {
            if soft.get() < hard.get() {
                errs.push(
                    cfg.key_path("min_gc_interval_when_soft_limited"),
                    "'min_gc_interval_when_soft_limited' should be larger than 'min_gc_interval_when_hard_limited'",
                );
            }
        }
        let (hard, spike) = if self.limit_mib > 0 {
            // Fixed limits win over percentages, as in the Collector.
            let hard = u64::from(self.limit_mib) * MIB;
            let spike = match self.spike_limit_mib {
                0 => hard / 5,
                s => u64::from(s) * MIB,
            };
            (hard, spike)
        } else if self.limit_percentage > 0 {
            match total {
                Some(total) => {
                    let total = total as u64;
                    let share = u64::from(self.limit_percentage) * total / 100;
                    let spike = u64::from(self.spike_limit_percentage) * total / 100;
                    // profcol stays within its limit + 64 MiB: a share that
                    // leaves less than that below the container's limit
                    // (80 % of anything under 320 MiB) would be OOM-killed
                    // before it refused anything. A floor of a quarter keeps
                    // a tiny container usable.
                    let hard = share.min(total.saturating_sub(OVERHEAD).max(total / 4));
                    (hard, spike.min(hard / 2))
                }
                None => {
                    errs.push(
                        cfg.key_path("limit_percentage"),
                        "failed to get total memory, use fixed memory settings (limit_mib)",
                    );
                    (0, 0)
                }
            }
        } else {
            (0, 0)
        };
        errs.into_result(Limits {
            check_interval: interval,
            hard: usize::try_from(hard).unwrap_or(usize::MAX),
            soft: usize::try_from(hard.saturating_sub(spike)).unwrap_or(usize::MAX),
        })
    }
}
