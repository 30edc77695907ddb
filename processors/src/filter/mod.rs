//! Processor `filter`: the Collector's processor of that name for
//! profiles. An item for which a condition holds is dropped: a resource
//! with everything in it, a scope, a profile. As in the Collector, a
//! scope or resource left without profiles goes too, and the dropped
//! samples are counted (`otelcol_processor_filter_profiles_filtered`).

mod config;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_model::dictionary::resolve_references;
use profcol_model::proto::{KeyValue, ResourceProfiles, ScopeProfiles};
use profcol_model::{profile_sample_count, ProfileBatch};
use profcol_ottl::{with_resource, Client, Condition, Ctx, Dict};
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{FilterConfig, Rules};

use crate::transform::ErrorMode;

/// Samples a condition dropped: counted as the Collector's
/// `otelcol_processor_filter_profiles.filtered` too.
pub const FILTERED: &str = "filtered";
/// Samples of a batch a condition failed on with `error_mode: propagate`.
pub const CONDITION_ERROR: &str = "condition_error";

pub struct FilterFactory;

impl ProcessorFactory for FilterFactory {
    fn type_name(&self) -> &'static str {
        "filter"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, rules) = cfg.decode_checked(|c: &FilterConfig| c.compile(cfg))?;
        Ok(Box::new(Filter {
            id: cfg.id.to_string(),
            resources_only: rules
                .iter()
                .all(|r| r.scope.is_empty() && r.profile.is_empty()),
            rules,
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(FilterFactory)
}

pub struct Filter {
    id: String,
    rules: Vec<Rules>,
    /// Every condition is on resources: a batch held as bytes is filtered
    /// there, not decoded.
    resources_only: bool,
}

struct Stop(String);

/// Whether one of `conds` holds; a failing condition counts as not
/// holding unless the mode propagates it.
fn any(
    conds: &[Condition],
    ctx: &Ctx,
    mode: ErrorMode,
    id: &str,
    errors: &mut u64,
) -> Result<bool, Stop> {
    for c in conds {
        match c.eval(ctx) {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) => {
                *errors += 1;
                match mode {
                    ErrorMode::Ignore => {
                        profcol_model::warn_limited!(processor = %id, error = %e, condition = %c.text, "failed to eval condition")
                    }
                    ErrorMode::Silent => {}
                    ErrorMode::Propagate => {
                        return Err(Stop(format!("failed to eval condition: {}, {e}", c.text)))
                    }
                }
            }
        }
    }
    Ok(false)
}

impl Filter {
    /// The decoded path of [`Processor::process`]: each set of rules over
    /// every item of its levels in turn. Returns the condition errors, the
    /// samples dropped and why the batch must go.
    fn decoded(&self, batch: &mut ProfileBatch) -> (u64, u64, Option<Stop>) {
        let client = Client::of(&batch.meta);
        let data = batch.data_mut();
        resolve_references(data);
        let mut dict = Dict::take(&mut data.dictionary);
        // Counted as profiles go, not as a count before and after: that
        // would walk every sample of the batch once more.
        let (mut errors, mut dropped) = (0, 0);
        let mut stop = None;
        for r in &self.rules {
            let result = self.apply(
                r,
                &client,
                &mut data.resource_profiles,
                &mut dict,
                &mut errors,
                &mut dropped,
            );
            if let Err(s) = result {
                stop = Some(s);
                break;
            }
        }
        dict.restore(&mut data.dictionary);
        (errors, dropped, stop)
    }

    /// [`Processor::process`] for conditions on resources only: each
    /// resource through every set of rules, as a resource never sees
    /// another item (`ProfileBatch::retain_resources`). Returns the
    /// condition errors, the samples dropped and why the batch must go.
    fn retain_resources(&self, batch: &mut ProfileBatch) -> (u64, u64, Option<Stop>) {
        let id = self.id.as_str();
        let (mut errors, mut stop) = (0, None);
        let client = Client::of(&batch.meta);
        let dropped = batch.retain_resources(|resource, url, scopes| {
            if stop.is_some() {
                return true;
            }
            let mut r = Some(std::mem::take(resource));
            let keep = with_resource(&mut r, url, &client, |ctx| {
                for rules in &self.rules {
                    match any(&rules.resource, ctx, rules.error_mode, id, &mut errors) {
                        Ok(true) => return false,
                        Ok(false) => {}
                        Err(s) => {
                            stop = Some(s);
                            return true;
                        }
                    }
                }
                // As the Collector: a resource without scopes goes.
                scopes > 0
            });
            *resource = r.unwrap_or_default();
            keep
        });
        (errors, dropped, stop)
    }

    fn apply(
        &self,
        r: &Rules,
        client: &Client,
        rps: &mut Vec<ResourceProfiles>,
        dict: &mut Dict,
        errors: &mut u64,
        dropped: &mut u64,
    ) -> Result<(), Stop> {
        let mut cache: Vec<KeyValue> = Vec::new();
        let mut stop = None;
        let id = self.id.as_str();
        let mode = r.error_mode;
        rps.retain_mut(|rp| {
            if stop.is_some() {
                return true;
            }
            let ResourceProfiles {
                resource,
                scope_profiles,
                schema_url,
            } = rp;
            if !r.resource.is_empty() {
                cache.clear();
                let ctx = Ctx {
                    client,
                    resource: &mut *resource,
                    resource_schema_url: &mut *schema_url,
                    scope: None,
                    scope_schema_url: None,
                    profile: None,
                    dict: &mut *dict,
                    cache: &mut cache,
                };
                match any(&r.resource, &ctx, mode, id, errors) {
                    Ok(true) => {
                        *dropped += scope_profiles
                            .iter()
                            .flat_map(|sp| &sp.profiles)
                            .map(profile_sample_count)
                            .sum::<u64>();
                        return false;
                    }
                    Ok(false) => {}
                    Err(s) => {
                        stop = Some(s);
                        return true;
                    }
                }
            }
            if r.scope.is_empty() && r.profile.is_empty() {
                return !scope_profiles.is_empty();
            }
            scope_profiles.retain_mut(|sp| {
                if stop.is_some() {
                    return true;
                }
                let ScopeProfiles {
                    scope,
                    profiles,
                    schema_url: scope_url,
                } = sp;
                if !r.scope.is_empty() {
                    cache.clear();
                    let ctx = Ctx {
                        client,
                        resource: &mut *resource,
                        resource_schema_url: &mut *schema_url,
                        scope: Some(&mut *scope),
                        scope_schema_url: Some(&mut *scope_url),
                        profile: None,
                        dict: &mut *dict,
                        cache: &mut cache,
                    };
                    match any(&r.scope, &ctx, mode, id, errors) {
                        Ok(true) => {
                            *dropped += profiles.iter().map(profile_sample_count).sum::<u64>();
                            return false;
                        }
                        Ok(false) => {}
                        Err(s) => {
                            stop = Some(s);
                            return true;
                        }
                    }
                }
                if !r.profile.is_empty() {
                    profiles.retain_mut(|p| {
                        if stop.is_some() {
                            return true;
                        }
                        cache.clear();
                        let ctx = Ctx {
                            client,
                            resource: &mut *resource,
                            resource_schema_url: &mut *schema_url,
                            scope: Some(&mut *scope),
                            scope_schema_url: Some(&mut *scope_url),
                            profile: Some(p),
                            dict: &mut *dict,
                            cache: &mut cache,
                        };
                        match any(&r.profile, &ctx, mode, id, errors) {
                            Ok(true) => {
                                *dropped += profile_sample_count(p);
                                false
                            }
                            Ok(false) => true,
                            Err(s) => {
                                stop = Some(s);
                                true
                            }
                        }
                    });
                }
                !profiles.is_empty()
            });
            !scope_profiles.is_empty()
        });
        stop.map_or(Ok(()), Err)
    }
}

impl Processor for Filter {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        if self.rules.is_empty() {
            return Verdict::Keep;
        }
        let (errors, dropped, stop) = if self.resources_only {
            self.retain_resources(batch)
        } else {
            self.decoded(batch)
        };
        ctx.event("condition_errors", errors);
        if let Some(Stop(msg)) = stop {
            profcol_model::warn_limited!(processor = %self.id, error = %msg, "failed processing profiles");
            ctx.dropped(dropped + batch.sample_count(), CONDITION_ERROR);
            return Verdict::Drop;
        }
        ctx.dropped(dropped, FILTERED);
        if batch.is_empty() {
            Verdict::Drop
        } else {
            Verdict::Keep
        }
    }

    fn decodes_batches(&self) -> bool {
        !self.resources_only
    }
}
