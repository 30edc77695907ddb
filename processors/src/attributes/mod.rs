//! Processor `attributes`: the Collector's processor of that name
//! (`processor/attributesprocessor`, which at v0.161.0 takes no profiles)
//! for profiles. Its `actions` (`attraction`, shared with `resource`) run
//! on each profile's attributes, which live in the batch's dictionary: a
//! changed or new attribute is interned and this profile re-pointed, so a
//! profile sharing the old entry keeps it. `include`/`exclude` choose the
//! profiles by service, resource, scope and profile attributes.

mod config;
mod matcher;

#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::sync::Arc;

use profcol_model::dictionary::resolve_references;
use profcol_model::ProfileBatch;
use profcol_ottl::{for_each, Client, Level};
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::attraction::{self, Action};

pub use config::AttributesConfig;
use matcher::Matcher;

pub struct AttributesFactory;

impl ProcessorFactory for AttributesFactory {
    fn type_name(&self) -> &'static str {
        "attributes"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, c) = cfg.decode_checked(|c: &AttributesConfig| c.compile(cfg))?;
        Ok(Box::new(AttributesProcessor {
            id: cfg.id.to_string(),
            actions: c.actions,
            include: c.include,
            exclude: c.exclude,
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(AttributesFactory)
}

pub struct AttributesProcessor {
    id: String,
    actions: Vec<Action>,
    include: Option<Matcher>,
    exclude: Option<Matcher>,
}

impl Processor for AttributesProcessor {
    fn process(&mut self, batch: &mut ProfileBatch, _ctx: &mut ProcessContext) -> Verdict {
        // Taken out for `from_context` while the data is borrowed.
        let meta = std::mem::take(&mut batch.meta);
        let data = batch.data_mut();
        resolve_references(data);
        let mut failed = None;
        let _ = for_each(
            data,
            Level::Profile,
            &Client::default(),
            |item| -> Result<(), Infallible> {
                // Include is checked before exclude, as `NewSkipExpr` does.
                let skip = self.include.as_ref().is_some_and(|m| !m.matches(item))
                    || self.exclude.as_ref().is_some_and(|m| m.matches(item));
                if skip {
                    return Ok(());
                }
                let r = item.profile_attrs().and_then(|mut attrs| {
                    attraction::apply_all(&self.actions, &mut attrs, &meta);
                    item.replace_profile_attrs(&attrs)
                });
                // A validated batch has every index in range; a profile whose
                // attributes cannot be read passes on as it is.
                if let Err(e) = r {
                    failed.get_or_insert(e);
                }
                Ok(())
            },
        );
        if let Some(e) = failed {
            profcol_model::warn_limited!(processor = %self.id, error = %e.0, "profile attributes left as they are");
        }
        batch.meta = meta;
        Verdict::Keep
    }
}
