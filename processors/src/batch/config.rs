//! The `batch` section, with the Collector's keys, defaults and checks
//! (opentelemetry-collector, `processor/batchprocessor/config.go`), in
//! profile samples.

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchConfig {
    /// How long data waits at most before it is sent, whatever the size;
    /// 0 sends every batch at once (split by `send_batch_max_size`).
    pub timeout: Duration,
    /// Samples that make a batch go out; 0 ignores the size (time only).
    pub send_batch_size: u32,
    /// The most samples a batch may have; 0 means no cap. Larger inputs are
    /// split between their profiles.
    pub send_batch_max_size: u32,
    /// Client metadata keys (request headers, with the receiver's
    /// `include_metadata`) whose values make separate batches.
    pub metadata_keys: Vec<String>,
    /// The most distinct combinations of those values held at once.
    pub metadata_cardinality_limit: u32,
    /// What the sizes count. Not a key of the Collector's `batch`: only the
    /// batch an exporter's `sending_queue.batch` becomes takes it, from
    /// that section's `sizer`. Unset, items.
    pub sizer: Option<Sizer>,
}

/// exporterhelper's batch sizers for profiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sizer {
    /// Samples.
    #[default]
    Items,
    /// Bytes of the encoded request; a batch is the sum of its inputs, as
    /// exporterhelper adds them up.
    Bytes,
}

/// The name prefix of the `batch` an exporter's `sending_queue.batch`
/// becomes (`batch/sending_queue_<exporter>`).
const SENDING_QUEUE: &str = "sending_queue_";

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            timeout: Duration(std::time::Duration::from_millis(200)),
            send_batch_size: 8192,
            send_batch_max_size: 0,
            metadata_keys: Vec::new(),
            metadata_cardinality_limit: 1000,
            sizer: None,
        }
    }
}

impl BatchConfig {
    /// The Collector's checks, each at its key.
    pub(crate) fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let queue_batch = cfg
            .id
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with(SENDING_QUEUE));
        if self.sizer.is_some() && !queue_batch {
            errs.push(
                cfg.key_path("sizer"),
                "unknown field: the batch processor counts samples; sizer is a key of an exporter's sending_queue.batch",
            );
        }
        if self.send_batch_max_size > 0 && self.send_batch_max_size < self.send_batch_size {
            errs.push(
                cfg.key_path("send_batch_max_size"),
                "send_batch_max_size must be greater or equal to send_batch_size",
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, k) in self.metadata_keys.iter().enumerate() {
            let l = k.to_ascii_lowercase();
            if !seen.insert(l.clone()) {
                errs.push(
                    cfg.key_path(&format!("metadata_keys::{i}")),
                    format!("duplicate entry in metadata_keys: {l:?} (case-insensitive)"),
                );
            }
        }
        if !self.metadata_keys.is_empty() && self.metadata_cardinality_limit == 0 {
            errs.push(
                cfg.key_path("metadata_cardinality_limit"),
                "must be greater than 0 when metadata_keys are set",
            );
        }
        errs.into_result(())
    }
}
