//! Processor `sampling`: keeps a percentage of profiler sessions, profiles or
//! traces, deciding by a hash of their identity so every instance with the
//! same `hash_seed` decides the same way.
//!
//! The hash and threshold are the Collector `probabilistic_sampler`'s
//! `hash_seed` mode ([`hash`]); in `trace` mode a sample is kept exactly when
//! that Collector, with the same `sampling_percentage` and `hash_seed`, keeps
//! the trace its link names, so profiles follow sampled traces. Dropped
//! samples are counted as `sampled_out` (or `missing_randomness` for
//! `fail_closed` drops); emptied profiles are removed, the dictionary is
//! garbage-collected, and a batch left empty is dropped.

mod config;
mod hash;
mod identity;
mod sample;

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{SamplingConfig, SamplingMode};
pub use hash::{compute_hash, HashSampler};
pub use sample::{MISSING_RANDOMNESS, SAMPLED_OUT};

pub(crate) use sample::Sampling;

pub struct SamplingFactory;

impl ProcessorFactory for SamplingFactory {
    fn type_name(&self) -> &'static str {
        "sampling"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (c, percentage) = cfg.decode_checked(|c: &SamplingConfig| c.validate(cfg))?;
        let sampler = HashSampler::new(percentage, c.hash_seed);
        if percentage > 0.0 && sampler.keeps_nothing() {
            // As the Collector does: below 1/16384 the rate truncates to 0.
            tracing::warn!(
                processor = %cfg.id,
                percentage,
                "sampling_percentage rounds to zero hash buckets: nothing will be kept"
            );
        }
        Ok(Box::new(SamplingProcessor {
            sampling: Sampling {
                sampler,
                mode: c.mode,
                fail_closed: c.fail_closed,
            },
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(SamplingFactory)
}

pub struct SamplingProcessor {
    sampling: Sampling,
}

impl Processor for SamplingProcessor {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        self.sampling.process(batch, ctx)
    }
}
