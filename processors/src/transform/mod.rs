//! Processor `transform`: the Collector's processor of that name for
//! profiles. OTTL statements (`profcol-ottl`) compiled at load run in
//! order on each resource, scope or profile of a batch; a statement that
//! fails on an item follows `error_mode`.

mod config;

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use profcol_model::dictionary::resolve_references;
use profcol_model::ProfileBatch;
use profcol_ottl::{for_each, with_resource, Client, Ctx, Level};
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub(crate) use config::ottl_error;
pub use config::{config_any, ErrorMode, Group, TransformConfig};

/// Samples of a batch a statement failed on with `error_mode: propagate`.
pub const STATEMENT_ERROR: &str = "statement_error";

pub struct TransformFactory;

impl ProcessorFactory for TransformFactory {
    fn type_name(&self) -> &'static str {
        "transform"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (c, (_, groups)) = cfg.decode_checked(|c: &TransformConfig| c.compile(cfg))?;
        if !c.trace_statements.is_empty()
            || !c.metric_statements.is_empty()
            || !c.log_statements.is_empty()
        {
            tracing::info!(processor = %cfg.id, "trace, metric and log statements never run: profcol carries profiles only");
        }
        Ok(Box::new(Transform {
            id: cfg.id.to_string(),
            resources_only: groups.iter().all(|g| g.level == Level::Resource),
            groups,
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(TransformFactory)
}

pub struct Transform {
    id: String,
    groups: Vec<Group>,
    /// Every group runs on resources: a batch held as bytes is edited
    /// there, not decoded.
    resources_only: bool,
}

/// Why a group stopped: an error under `propagate`.
struct Stop(String);

impl Processor for Transform {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        if self.groups.is_empty() {
            return Verdict::Keep;
        }
        let samples = batch.sample_count();
        let (groups, id) = (&self.groups, &self.id);
        let mut errors = 0u64;
        let client = Client::of(&batch.meta);
        let result = if self.resources_only {
            // Each resource through every group; the groups of a level
            // never see another item, so the order is the Collector's.
            let mut result = Ok(());
            batch.edit_resources(|resource, url| {
                if result.is_ok() {
                    let mut r = Some(std::mem::take(resource));
                    result = with_resource(&mut r, url, &client, |item| {
                        groups
                            .iter()
                            .try_for_each(|g| run(g, id, item, &mut errors))
                    });
                    *resource = r.unwrap_or_default();
                }
            });
            result
        } else {
            let data = batch.data_mut();
            // Paths read plain keys and strings, as the Collector's
            // receiver resolves references before a processor sees them.
            resolve_references(data);
            groups.iter().try_for_each(|g| {
                for_each(data, g.level, &client, |item| run(g, id, item, &mut errors))
            })
        };
        ctx.event("statement_errors", errors);
        if let Err(Stop(msg)) = result {
            profcol_model::warn_limited!(processor = %self.id, error = %msg, "failed processing profiles");
            ctx.dropped(samples, STATEMENT_ERROR);
            return Verdict::Drop;
        }
        Verdict::Keep
    }

    fn decodes_batches(&self) -> bool {
        !self.resources_only
    }
}

/// Runs group `g` on one item: its statements, if a condition holds (or
/// it has none).
fn run(g: &Group, id: &str, item: &mut Ctx, errors: &mut u64) -> Result<(), Stop> {
    let mut run = g.conditions.is_empty();
    for c in &g.conditions {
        match c.eval(item) {
            Ok(true) => {
                run = true;
                break;
            }
            Ok(false) => {}
            Err(e) => {
                *errors += 1;
                fail(g.error_mode, id, "failed to eval condition", &c.text, &e.0)?;
            }
        }
    }
    if !run {
        return Ok(());
    }
    for s in &g.statements {
        if let Err(e) = s.run(item) {
            *errors += 1;
            fail(
                g.error_mode,
                id,
                "failed to execute statement",
                &s.text,
                &e.0,
            )?;
        }
    }
    Ok(())
}

fn fail(mode: ErrorMode, id: &str, what: &str, text: &str, err: &str) -> Result<(), Stop> {
    match mode {
        ErrorMode::Ignore => {
            profcol_model::warn_limited!(processor = %id, error = %err, statement = %text, "{what}");
            Ok(())
        }
        ErrorMode::Silent => Ok(()),
        ErrorMode::Propagate => Err(Stop(format!("{what}: {text}, {err}"))),
    }
}
