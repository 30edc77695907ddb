//! Exporter `debug`, as in the Collector: what a user first sees.
//! `basic` logs one line per batch, `normal` one line per profile,
//! `detailed` every profile as folded stacks with values.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use profcol_model::proto::metrics::{
    point_count, ExportMetricsServiceRequest, ResourceMetrics, ScopeMetrics,
};
use serde::{Deserialize, Serialize};

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verbosity {
    Basic,
    Normal,
    Detailed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebugConfig {
    pub verbosity: Verbosity,
    /// Batches logged before sampling starts.
    pub sampling_initial: u64,
    /// After that, one batch in this many is logged.
    pub sampling_thereafter: u64,
    /// Through the collector's log (true) or straight to `output_paths`
    /// (false).
    pub use_internal_logger: bool,
    /// Where the text goes without the internal logger, as in the
    /// Collector: `stdout`, `stderr` or file paths (appended to); unset,
    /// stdout.
    pub output_paths: Option<Vec<String>>,
}

impl Default for DebugConfig {
    fn default() -> Self {
        Self {
            verbosity: Verbosity::Basic,
            sampling_initial: 2,
            sampling_thereafter: 1,
            use_internal_logger: true,
            output_paths: None,
        }
    }
}

impl DebugConfig {
    /// Checks every key, reporting all problems at once.
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if self.sampling_thereafter == 0 {
            errs.push(cfg.key_path("sampling_thereafter"), "must be at least 1");
        }
        // The Collector's two checks, with its words.
        match (&self.output_paths, self.use_internal_logger) {
            (Some(_), true) => errs.push(
                cfg.key_path("output_paths"),
                "output_paths is not supported when use_internal_logger is true",
            ),
            (Some(p), false) if p.is_empty() => errs.push(
                cfg.key_path("output_paths"),
                "output_paths must not be empty when use_internal_logger is false",
            ),
            (Some(paths), false) => {
                for (i, p) in paths.iter().enumerate() {
                    if let Err(e) = check_output(p) {
                        errs.push(cfg.key_path(&format!("output_paths::{i}")), e);
                    }
                }
            }
            (None, _) => {}
        }
        errs.into_result(())
    }

    /// Where the text goes when the internal logger is not used.
    fn outputs(&self) -> Vec<Output> {
        let paths = match &self.output_paths {
            Some(p) => p.clone(),
            None => vec!["stdout".to_owned()],
        };
        paths
            .into_iter()
            .map(|p| match p.as_str() {
                "stdout" => Output::Stdout,
                "stderr" => Output::Stderr,
                _ => Output::File(PathBuf::from(p), Mutex::new(None)),
            })
            .collect()
    }
}

/// What opening `path` for appending at start would refuse, found without
/// creating it: a directory, or a parent directory that does not exist.
fn check_output(path: &str) -> Result<(), String> {
    if matches!(path, "stdout" | "stderr") {
        return Ok(());
    }
    let p = Path::new(path);
    if p.is_dir() {
        return Err(format!("{path} is a directory"));
    }
    match p.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => Err(format!("{} does not exist", dir.display())),
        _ => Ok(()),
    }
}

/// One of `output_paths`; a file is opened at start.
enum Output {
    Stdout,
    Stderr,
    File(PathBuf, Mutex<Option<std::fs::File>>),
}

pub struct DebugExporterFactory;

impl ExporterFactory for DebugExporterFactory {
    fn type_name(&self) -> &'static str {
        "debug"
    }

    /// The Collector's debug exporter has no queue and no retries.
    fn default_settings(&self) -> Option<ExporterSettings> {
        None
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        _settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &DebugConfig| c.validate(cfg))?;
        Ok(Arc::new(DebugExporter {
            outputs: c.outputs(),
            cfg: c,
            seen: AtomicU64::new(0),
        }))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(DebugExporterFactory)
}

pub struct DebugExporter {
    cfg: DebugConfig,
    seen: AtomicU64,
    /// Used without the internal logger.
    outputs: Vec<Output>,
}

impl DebugExporter {
    fn sampled(&self) -> bool {
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        n < self.cfg.sampling_initial
            || (n - self.cfg.sampling_initial).is_multiple_of(self.cfg.sampling_thereafter)
    }

    /// The text logged for a batch at the configured verbosity.
    pub fn render(&self, batch: &ProfileBatch) -> String {
        render(batch, self.cfg.verbosity)
    }
}

pub fn render(batch: &ProfileBatch, verbosity: Verbosity) -> String {
    let data = batch.data();
    let mut out = format!(
        "Profiles: resource profiles: {}, profiles: {}, samples: {}",
        data.resource_profiles.len(),
        batch.profile_count(),
        batch.sample_count()
    );
    match verbosity {
        Verbosity::Basic => {}
        Verbosity::Normal => {
            let strings = &batch.dictionary().string_table;
            let s = |i: i32| strings.get(i as usize).map(String::as_str).unwrap_or("");
            for (r, rp) in data.resource_profiles.iter().enumerate() {
                for sp in &rp.scope_profiles {
                    for p in &sp.profiles {
                        let st = p.sample_type.unwrap_or_default();
                        out.push_str(&format!(
                            "\n  resource #{r} profile {} {}/{}: {} samples, duration {}ms",
                            hex::encode(&p.profile_id),
                            s(st.type_strindex),
                            s(st.unit_strindex),
                            // Observations, the unit of `basic` and the metrics.
                            profcol_model::profile_sample_count(p),
                            p.duration_nano / 1_000_000,
                        ));
                    }
                }
            }
        }
        Verbosity::Detailed => {
            out.push('\n');
            out.push_str(&profcol_model::resolved::resolve(data, Default::default()).to_text());
        }
    }
    out
}

/// The text logged for a metrics request: the Collector's counts line
/// (`Metrics {"resource metrics": n, "metrics": n, "data points": n}`),
/// then at `normal` one line per metric and at `detailed` the request as
/// OTLP/JSON.
pub fn render_metrics(req: &ExportMetricsServiceRequest, verbosity: Verbosity) -> String {
    let metrics: usize = req
        .resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .map(|s| s.metrics.len())
        .sum();
    let mut out = format!(
        "Metrics: resource metrics: {}, metrics: {metrics}, data points: {}",
        req.resource_metrics.len(),
        point_count(req)
    );
    match verbosity {
        Verbosity::Basic => {}
        Verbosity::Normal => {
            for (r, rm) in req.resource_metrics.iter().enumerate() {
                for m in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                    let points = point_count(&ExportMetricsServiceRequest {
                        resource_metrics: vec![ResourceMetrics {
                            scope_metrics: vec![ScopeMetrics {
                                metrics: vec![m.clone()],
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                    });
                    out.push_str(&format!(
                        "\n  resource #{r} metric {} ({}): {points} data points",
                        m.name, m.unit
                    ));
                }
            }
        }
        Verbosity::Detailed => {
            out.push('\n');
            out.push_str(&serde_json::to_string_pretty(req).unwrap_or_default());
        }
    }
    out
}

impl DebugExporter {
    /// `text` to every output; a file that fails is logged, as a failed
    /// write to zap's output is in the Collector, and the batch still
    /// counts as exported.
    fn write(&self, text: &str) {
        use std::io::Write;
        for out in &self.outputs {
            match out {
                Output::Stdout => println!("{text}"),
                Output::Stderr => eprintln!("{text}"),
                Output::File(path, file) => {
                    let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(f) = f.as_mut() {
                        if let Err(e) = writeln!(f, "{text}") {
                            tracing::warn!(path = %path.display(), "debug exporter: cannot write: {e}");
                        }
                    }
                }
            }
        }
    }
}

#[async_trait]
impl Exporter for DebugExporter {
    /// Opens the files of `output_paths` for appending.
    async fn start(&self, _ctx: &ExporterContext) -> anyhow::Result<()> {
        if self.cfg.use_internal_logger {
            return Ok(());
        }
        for out in &self.outputs {
            if let Output::File(path, file) = out {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| {
                        anyhow::anyhow!("debug exporter: opening {}: {e}", path.display())
                    })?;
                *file.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
            }
        }
        Ok(())
    }

    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let batch = req.batch.clone();
        if self.sampled() {
            let text = self.render(&batch);
            if self.cfg.use_internal_logger {
                tracing::info!(exporter = %ctx.id, "{text}");
            } else {
                self.write(&text);
            }
        }
        Ok(ExportOutcome::delivered())
    }

    fn exports_metrics(&self) -> bool {
        true
    }

    async fn export_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        if self.sampled() {
            let text = render_metrics(req, self.cfg.verbosity);
            if self.cfg.use_internal_logger {
                tracing::info!(exporter = %ctx.id, "{text}");
            } else {
                self.write(&text);
            }
        }
        Ok(ExportOutcome::delivered())
    }
}

#[cfg(test)]
mod tests;
