//! The `probabilistic_sampler` section, with the Collector's keys and
//! defaults (opentelemetry-collector-contrib,
//! `processor/probabilisticsamplerprocessor/config.go`).

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

/// `sampling.MinSamplingProbability`: 2^-56.
const MIN_SAMPLING_PROBABILITY: f64 = 1.0 / (1u64 << 56) as f64;
/// `sampling.NumHexDigits`: the most `sampling_precision` can be.
const MAX_PRECISION: i64 = 14;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbabilisticSamplerConfig {
    /// Percentage kept; 0 (the Collector's default) keeps nothing, 100 and
    /// above keep everything.
    pub sampling_percentage: f32,
    pub hash_seed: u32,
    /// `hash_seed` (what an unset mode means), `proportional` or
    /// `equalizing`; only `hash_seed` applies to profiles.
    pub mode: String,
    pub fail_closed: bool,
    /// Hex digits of the threshold a consistent mode writes; checked as
    /// the Collector does, unused by `hash_seed`.
    pub sampling_precision: i64,
    /// Logs only in the Collector: `traceID` (the default, which is what
    /// profiles are sampled by) or `record`.
    pub attribute_source: String,
    /// Logs only.
    pub from_attribute: String,
    /// Logs only.
    pub sampling_priority: String,
}

impl Default for ProbabilisticSamplerConfig {
    fn default() -> Self {
        Self {
            sampling_percentage: 0.0,
            hash_seed: 0,
            mode: String::new(),
            fail_closed: true,
            sampling_precision: 4,
            attribute_source: "traceID".into(),
            from_attribute: String::new(),
            sampling_priority: String::new(),
        }
    }
}

impl ProbabilisticSamplerConfig {
    /// The Collector's checks, plus what profiles cannot do; every problem
    /// at its key.
    pub(crate) fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let pct = f64::from(self.sampling_percentage);
        if !pct.is_finite() {
            errs.push(
                cfg.key_path("sampling_percentage"),
                format!("sampling rate is invalid: {pct}%"),
            );
        } else if pct < 0.0 {
            errs.push(
                cfg.key_path("sampling_percentage"),
                format!("sampling rate is negative: {pct}%"),
            );
        } else if pct > 0.0 && pct / 100.0 < MIN_SAMPLING_PROBABILITY {
            errs.push(
                cfg.key_path("sampling_percentage"),
                format!("sampling rate is too small: {pct}%"),
            );
        }
        match self.mode.as_str() {
            "" | "hash_seed" => {}
            m @ ("proportional" | "equalizing") => errs.push(
                cfg.key_path("mode"),
                format!(
                    "{m:?} is not supported for profiles: it adjusts the sampling threshold a span \
                     carries in its tracestate (OTEP 235), and profiles carry none; use \
                     mode: hash_seed (the default), which keeps the traces a Collector in hash_seed \
                     mode keeps"
                ),
            ),
            m => errs.push(
                cfg.key_path("mode"),
                format!("unsupported sampler mode {m:?} (expected hash_seed, proportional or equalizing)"),
            ),
        }
        if self.sampling_precision == 0 {
            errs.push(
                cfg.key_path("sampling_precision"),
                "invalid sampling precision: 0",
            );
        } else if !(1..=MAX_PRECISION).contains(&self.sampling_precision) {
            errs.push(
                cfg.key_path("sampling_precision"),
                format!(
                    "sampling precision is out of range, should be 1 to {MAX_PRECISION}: {}",
                    self.sampling_precision
                ),
            );
        }
        match self.attribute_source.as_str() {
            "traceID" => {}
            "record" => errs.push(
                cfg.key_path("attribute_source"),
                "\"record\" applies to log records only; profiles are sampled by the trace id of \
                 each sample's link (attribute_source: traceID)",
            ),
            other => errs.push(
                cfg.key_path("attribute_source"),
                format!("invalid attribute source: {other}. Expected: traceID or record"),
            ),
        }
        for (key, value) in [
            ("from_attribute", &self.from_attribute),
            ("sampling_priority", &self.sampling_priority),
        ] {
            if !value.is_empty() {
                errs.push(
                    cfg.key_path(key),
                    "applies to log records only; profiles are sampled by the trace id of each \
                     sample's link",
                );
            }
        }
        errs.into_result(())
    }
}
