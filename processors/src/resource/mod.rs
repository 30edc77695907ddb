//! Processor `resource`: the Collector's processor of that name
//! (`processor/resourceprocessor`), the `attraction` actions on each
//! resource's attributes.

mod config;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_model::dictionary::resolve_references;
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
        let data = batch.data_mut();
        resolve_references(data);
        for rp in &mut data.resource_profiles {
            let attrs = &mut rp.resource.get_or_insert_with(Default::default).attributes;
            attraction::apply_all(&self.actions, attrs, &meta);
        }
        Verdict::Keep
    }
}
