//! Loading a config and running the collector, shared by the binary and by
//! in-process tests.

use std::path::PathBuf;
use std::sync::Arc;

use profcol_pipeline::config::{self, Config, ConfigErrors};
use profcol_pipeline::runtime::{self, Graph, RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

/// Loads the files (later wins) and builds every component without binding,
/// as for a run ([`check_sources`] is what `profcol validate` checks).
/// Every error is listed at once: the components are built even when the
/// file's structure has errors, so a bad duration is reported together with
/// a dangling pipeline reference.
pub fn load(paths: &[PathBuf]) -> Result<(Config, Graph), ConfigErrors> {
    build(config::load_partial(paths)?, runtime::build)
}

/// [`load`] from `--config` and `--set` sources, in order (later wins).
pub fn load_sources(sources: &[config::Source]) -> Result<(Config, Graph), ConfigErrors> {
    build(config::load_sources_partial(sources)?, runtime::build)
}

/// What `profcol validate` checks of the sources: [`load_sources`] with
/// no processor doing what only a running one does.
pub fn check_sources(sources: &[config::Source]) -> Result<(Config, Graph), ConfigErrors> {
    build(config::load_sources_partial(sources)?, runtime::check)
}

/// Same as [`load`] for a config held in memory.
pub fn load_str(yaml: &str) -> Result<(Config, Graph), ConfigErrors> {
    build(config::load_str_partial(yaml)?, runtime::build)
}

type Builder = fn(&Config, &runtime::Registry) -> Result<Graph, ConfigErrors>;

fn build(
    (cfg, mut errs): (Config, ConfigErrors),
    builder: Builder,
) -> Result<(Config, Graph), ConfigErrors> {
    match builder(&cfg, &crate::components::registry()) {
        Ok(graph) => errs.into_result((cfg, graph)),
        Err(more) => {
            // A section the loader already faulted (an `${env:...}` that did
            // not expand, say) is not reported a second time.
            let seen: Vec<String> = errs.0.iter().map(|e| e.path.clone()).collect();
            errs.0.extend(
                more.0
                    .into_iter()
                    .filter(|e| !seen.iter().any(|p| !p.is_empty() && e.is_at_or_under(p))),
            );
            Err(errs)
        }
    }
}

/// Starts a collector from YAML held in memory, for tests.
pub async fn start_str(yaml: &str, opts: RuntimeOptions) -> anyhow::Result<RunningService> {
    let (_, graph) = load_str(yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    RunningService::start(graph, opts, Arc::new(Telemetry::new())).await
}
