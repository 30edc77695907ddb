use serde::{Deserialize, Serialize};

use super::{ConfigErrors, Duration};

/// What `queue_size` counts: the queue's own type, read here.
pub use profcol_queue::Sizer;

/// `retry_on_failure`, with the Collector's names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrySettings {
    pub enabled: bool,
    pub initial_interval: Duration,
    pub max_interval: Duration,
    /// Give up after this long in total; `0` retries forever.
    pub max_elapsed_time: Duration,
    pub multiplier: f64,
    pub randomization_factor: f64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_interval: Duration::from_secs(5),
            max_interval: Duration::from_secs(30),
            max_elapsed_time: Duration::from_secs(300),
            multiplier: 1.5,
            randomization_factor: 0.5,
        }
    }
}

impl RetrySettings {
    pub fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        if self.multiplier < 1.0 || !self.multiplier.is_finite() {
            errs.push(
                format!("{path}::multiplier"),
                format!("must be at least 1, got {}", self.multiplier),
            );
        }
        if !(0.0..=1.0).contains(&self.randomization_factor) {
            errs.push(
                format!("{path}::randomization_factor"),
                format!("must be between 0 and 1, got {}", self.randomization_factor),
            );
        }
        if self.enabled && self.initial_interval.get().is_zero() {
            errs.push(
                format!("{path}::initial_interval"),
                "must be greater than 0",
            );
        }
        if self.max_interval < self.initial_interval {
            errs.push(
                format!("{path}::max_interval"),
                "must not be less than initial_interval",
            );
        }
    }
}

/// `sending_queue`, with the Collector's names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueSettings {
    pub enabled: bool,
    pub num_consumers: usize,
    /// Capacity, in the unit `sizer` names.
    pub queue_size: usize,
    pub sizer: Sizer,
    /// Wait for room instead of refusing when the queue is full.
    pub block_on_overflow: bool,
    /// A storage extension (`file_storage`) that keeps the queue on disk.
    pub storage: Option<String>,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            num_consumers: 10,
            queue_size: 1000,
            sizer: Sizer::Requests,
            block_on_overflow: false,
            storage: None,
        }
    }
}

/// Most consumers one sending queue may have: more only add idle tasks and
/// memory (a million cost 745 MiB), never throughput.
pub const MAX_CONSUMERS: usize = 1024;

impl QueueSettings {
    pub fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        if self.enabled && !(1..=MAX_CONSUMERS).contains(&self.num_consumers) {
            errs.push(
                format!("{path}::num_consumers"),
                format!(
                    "must be between 1 and {MAX_CONSUMERS}, got {} (each consumer is a task with its own buffers)",
                    self.num_consumers
                ),
            );
        }
        if self.enabled && self.queue_size == 0 {
            errs.push(format!("{path}::queue_size"), "must be greater than 0");
        }
        if self.storage.is_some() && self.sizer == Sizer::Items {
            errs.push(
                format!("{path}::sizer"),
                "\"items\" is not supported with storage: a persistent queue would have to decode every stored request at start to count its samples; use sizer: requests or sizer: bytes",
            );
        }
        if !self.enabled && self.storage.is_some() {
            errs.push(
                format!("{path}::storage"),
                "needs the queue: set sending_queue::enabled to true",
            );
        }
    }
}

/// The keys of an exporter's section the runtime decodes for it.
pub const EXPORTER_SETTINGS_KEYS: [&str; 3] = ["timeout", "retry_on_failure", "sending_queue"];

/// Those keys as written; absent ones take the exporter type's defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExporterSettingsKeys {
    pub timeout: Option<Duration>,
    pub retry_on_failure: Option<RetrySettings>,
    pub sending_queue: Option<QueueSettings>,
}
