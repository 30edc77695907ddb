//! Processor `dictionary_dedup`: rebuilds the batch's dictionary by value
//! (strings, then mappings, functions, locations, stacks, attributes, links),
//! so equal entries share one index and, with `gc`, unreferenced entries go;
//! resolves reference-based attributes; with `merge_samples`, combines samples
//! of one identity. The resolved view never changes and the encoded size
//! never grows (beyond the strings that resolving references copies).
//!
//! Events: `entries_removed`, `samples_merged`, `references_resolved`;
//! at metrics level `detailed`, `bytes_before` and `bytes_after` too (the
//! encoded size of a rebuilt batch costs a walk of every message, which
//! the Collector spends on its batch sizes only at that level).

mod config;
mod dedup;
#[cfg(test)]
#[cfg(test)]
pub(crate) mod testdata;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{
    ProcessContext, Processor, ProcessorFactory, ProcessorStart, Verdict,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::merge::SampleMerger;

pub use config::DictionaryDedupConfig;
pub use dedup::{dedup_batch, dedup_data, Outcome};

pub struct DictionaryDedupFactory;

impl ProcessorFactory for DictionaryDedupFactory {
    fn type_name(&self) -> &'static str {
        "dictionary_dedup"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let c: DictionaryDedupConfig = cfg.decode()?;
        Ok(Box::new(DictionaryDedup::new(c)))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(DictionaryDedupFactory)
}

pub struct DictionaryDedup {
    cfg: DictionaryDedupConfig,
    /// Buffers reused from batch to batch.
    merger: SampleMerger,
    /// Encoded sizes are measured (metrics level `detailed`).
    measure: bool,
}

impl DictionaryDedup {
    pub fn new(cfg: DictionaryDedupConfig) -> Self {
        Self {
            cfg,
            merger: SampleMerger::default(),
            measure: false,
        }
    }
}

impl Processor for DictionaryDedup {
    fn start(&mut self, ctx: &ProcessorStart<'_>) {
        self.measure = ctx.telemetry.detailed();
    }

    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        let out = dedup::dedup_batch_with(batch, &self.cfg, &mut self.merger, self.measure);
        if let Some((before, after)) = out.bytes {
            ctx.event("bytes_before", before);
            ctx.event("bytes_after", after);
        }
        for (event, n) in [
            ("entries_removed", out.entries_removed()),
            ("samples_merged", out.samples_merged),
            ("references_resolved", out.references_resolved),
        ] {
            if n > 0 {
                ctx.event(event, n);
            }
        }
        Verdict::Keep
    }

    fn release_buffers(&mut self) {
        self.merger = SampleMerger::default();
    }
}
