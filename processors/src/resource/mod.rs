//! Processor `resource`: the Collector's processor of that name
//! (`processor/resourceprocessor`), the `attraction` actions on each
//! resource's attributes.

mod config;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::attraction::{self, Action};

pub use config::ResourceConfig;

pub struct ResourceFactory;

impl ProcessorFactory for ResourceFactory {
    fn type_name(&self) -> &'static str {
        "resource"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, actions) = cfg.decode_checked(|c: &ResourceConfig| {
            attraction::compile(&c.attributes, cfg, "attributes")
        })?;
        Ok(Box::new(ResourceProcessor { actions }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(ResourceFactory)
}

pub struct ResourceProcessor {
    actions: Vec<Action>,
}

impl Processor for ResourceProcessor {
    fn process(&mut self, batch: &mut ProfileBatch, _ctx: &mut ProcessContext) -> Verdict {
        let meta = batch.meta.clone();
        batch.edit_resources(|r, _| attraction::apply_all(&self.actions, &mut r.attributes, &meta));
        Verdict::Keep
    }

    /// Edits resources only.
    fn decodes_batches(&self) -> bool {
        false
    }
}
