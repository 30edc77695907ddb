//! Processor `unit_normalization`: one vocabulary for the units of
//! `sample_type`, `period_type` and attribute entries (`target: ucum` or
//! `pprof`), recognizing the spellings of pprof, Sentry and UCUM; optionally
//! values scaled to the base unit (`scale_to_base`) and `samples`/`count`
//! profiles turned into time profiles (`samples_to_time`), except those whose
//! scope already holds that time over the same window (event
//! `profile_to_time_skipped`). Unknown units pass unchanged and are counted
//! as the `unknown_unit` event.

mod config;
mod normalize;
#[cfg(test)]
mod tests;
pub mod units;

use std::sync::Arc;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::UnitNormalizationConfig;
pub use normalize::{normalize, normalize_batch, Options, Outcome};
pub use units::Target;

pub struct UnitNormalizationFactory;

impl ProcessorFactory for UnitNormalizationFactory {
    fn type_name(&self) -> &'static str {
        "unit_normalization"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let c: UnitNormalizationConfig = cfg.decode()?;
        Ok(Box::new(UnitNormalization::new(&c)))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(UnitNormalizationFactory)
}

pub struct UnitNormalization {
    opts: Options,
}

impl UnitNormalization {
    pub fn new(c: &UnitNormalizationConfig) -> Self {
        Self {
            opts: Options {
                target: c.target,
                scale_to_base: c.scale_to_base,
                samples_to_time: c.samples_to_time,
            },
        }
    }
}

impl Processor for UnitNormalization {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        let out = normalize_batch(batch, &self.opts);
        for (event, n) in [
            ("unknown_unit", out.unknown_units),
            ("unit_rewritten", out.units_rewritten),
            ("profile_scaled", out.profiles_scaled),
            ("attribute_scaled", out.attributes_scaled),
            ("profile_to_time", out.profiles_to_time),
            ("profile_to_time_skipped", out.to_time_skipped),
            ("value_saturated", out.saturated),
        ] {
            if n > 0 {
                ctx.event(event, n);
            }
        }
        Verdict::Keep
    }
}
