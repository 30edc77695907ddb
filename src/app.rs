//! Loading a config and running the collector, shared by the binary and by
//! in-process tests.

use std::path::PathBuf;
use std::sync::Arc;

use profcol_pipeline::config::{self, Config, ConfigErrors};
use profcol_pipeline::runtime::{self, Graph, RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

/// Loads the files (later wins) and builds every component without binding:
/// what `profcol validate` checks.
pub fn load(paths: &[PathBuf]) -> Result<(Config, Graph), ConfigErrors> {
    let cfg = config::load(paths)?;
    let graph = runtime::build(&cfg, &crate::components::registry())?;
    Ok((cfg, graph))
}

/// Same as [`load`] for a config held in memory.
pub fn load_str(yaml: &str) -> Result<(Config, Graph), ConfigErrors> {
    let cfg = config::load_str(yaml)?;
    let graph = runtime::build(&cfg, &crate::components::registry())?;
    Ok((cfg, graph))
}

/// Starts a collector from YAML held in memory, for tests.
pub async fn start_str(yaml: &str, opts: RuntimeOptions) -> anyhow::Result<RunningService> {
    let (_, graph) = load_str(yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    RunningService::start(graph, opts, Arc::new(Telemetry::new())).await
}
