//! Processor `thread_pruning`: thread metadata hygiene and thread cardinality
//! control.
//!
//! - Removes entries of the thread table (`sentry.thread_metadata`) that no
//!   sample names by `thread.id`, as Sentry asks SDKs to do and Relay does.
//! - `drop_attributes`: sample attribute keys to remove (`thread.id`).
//! - `rename_threads`: `{pattern, replacement}` rules on `thread.name`, in
//!   order, first match wins (`worker-\d+` -> `worker-*`); the thread table's
//!   names are renamed too.
//! - `drop_threads` / `keep_threads`: drop samples by thread name.
//! - `min_samples_per_thread`: drop threads with fewer non-idle samples.
//!
//! Every pattern must match the whole name (`^(?:pattern)$`). Thread rules
//! see the attributes as received, before renaming or dropping. Samples that
//! became identical are combined and orphaned dictionary entries removed.
//! Dropped samples are counted as `thread_dropped` or
//! `min_samples_per_thread`; a batch left without samples is dropped.

mod compaction;
mod config;
mod prune;
mod thread_table;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{RenameRule, ThreadPruningConfig};
pub use prune::{MIN_SAMPLES_PER_THREAD, THREAD_DROPPED};

use config::Rules;

pub struct ThreadPruningFactory;

impl ProcessorFactory for ThreadPruningFactory {
    fn type_name(&self) -> &'static str {
        "thread_pruning"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, rules) = cfg.decode_checked(|c: &ThreadPruningConfig| Rules::compile(c, cfg))?;
        Ok(Box::new(ThreadPruning {
            rules,
            scratch: prune::Scratch::default(),
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(ThreadPruningFactory)
}

pub struct ThreadPruning {
    rules: Rules,
    scratch: prune::Scratch,
}

impl Processor for ThreadPruning {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        prune::prune(batch, &self.rules, &mut self.scratch, ctx)
    }

    fn release_buffers(&mut self) {
        self.scratch = prune::Scratch::default();
    }
}
