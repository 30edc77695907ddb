//! Processor `probabilistic_sampler`: the Collector's processor of that
//! name, with its keys, for profiles. Its `hash_seed` mode (the mode an
//! unset `mode` means) is the `sampling` processor's `trace` mode: each
//! sample is kept exactly when that Collector, with the same
//! `sampling_percentage` and `hash_seed`, keeps the trace the sample's link
//! names, so profiles follow the traces a Collector keeps. A sample without
//! a trace has no randomness: dropped with `fail_closed` (the default) as
//! `missing_randomness`, kept without it.
//!
//! What profiles cannot do is refused at its key: the consistent modes
//! (`proportional`, `equalizing`) adjust the threshold a span carries in
//! its tracestate, which profiles do not have, and the log-record keys
//! (`attribute_source: record`, `from_attribute`, `sampling_priority`) have
//! no record to read.

mod config;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::ProbabilisticSamplerConfig;

use crate::sampling::{HashSampler, Sampling, SamplingMode};

pub struct ProbabilisticSamplerFactory;

impl ProcessorFactory for ProbabilisticSamplerFactory {
    fn type_name(&self) -> &'static str {
        "probabilistic_sampler"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &ProbabilisticSamplerConfig| c.validate(cfg))?;
        // Above 100 means 100, as the Collector's README says.
        let sampler = HashSampler::new(c.sampling_percentage.min(100.0), c.hash_seed);
        if sampler.keeps_nothing() {
            tracing::warn!(
                processor = %cfg.id,
                percentage = c.sampling_percentage,
                "sampling_percentage keeps no hash bucket (0, or below 1/16384): nothing will be kept"
            );
        }
        Ok(Box::new(ProbabilisticSampler {
            sampling: Sampling {
                sampler,
                mode: SamplingMode::Trace,
                fail_closed: c.fail_closed,
            },
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(ProbabilisticSamplerFactory)
}

pub struct ProbabilisticSampler {
    sampling: Sampling,
}

impl Processor for ProbabilisticSampler {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        self.sampling.process(batch, ctx)
    }
}
