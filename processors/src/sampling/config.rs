//! The `sampling` section.

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingConfig {
    /// Percentage kept, 0 to 100 (float, as in the Collector). Required:
    /// a forgotten percentage must not silently keep or drop everything.
    pub sampling_percentage: Option<f32>,
    /// Seed of the hash; instances (and Collectors) with the same seed and
    /// percentage decide the same way.
    pub hash_seed: u32,
    pub mode: SamplingMode,
    /// Drop what has no identity to hash (a sample without a trace link in
    /// `trace` mode, a profile without `profile_id` in `profile` mode), as
    /// the Collector's `fail_closed` (default true) does; false keeps it.
    pub fail_closed: bool,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        Self {
            sampling_percentage: None,
            hash_seed: 0,
            mode: SamplingMode::Session,
            fail_closed: true,
        }
    }
}

/// What one decision covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SamplingMode {
    /// A whole profiler session: `sentry.profiler_id`, else the resource's
    /// `service.instance.id`, else the resource attributes.
    #[default]
    Session,
    /// Each profile, by `profile_id`.
    Profile,
    /// Each sample, by the trace id of its link, as the Collector samples
    /// that trace.
    Trace,
}

impl SamplingConfig {
    /// The percentage, once validated.
    pub(crate) fn validate(&self, cfg: &ComponentConfig) -> Result<f32, ConfigErrors> {
        match self.sampling_percentage {
            None => Err(cfg.error(
                "sampling_percentage",
                "required: the percentage of profiles to keep, between 0 and 100",
            )),
            Some(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(p),
            Some(_) => Err(cfg.error("sampling_percentage", "must be between 0 and 100")),
        }
    }
}
