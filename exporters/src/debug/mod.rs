//! Exporter `debug`, as in the Collector: what a user first sees.
//! `basic` logs one line per batch, `normal` one line per profile,
//! `detailed` every profile as folded stacks with values.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::ProfileBatch;

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
    /// Through the collector's log (true) or straight to stdout (false).
    pub use_internal_logger: bool,
}

impl Default for DebugConfig {
    fn default() -> Self {
        Self {
            verbosity: Verbosity::Basic,
            sampling_initial: 2,
            sampling_thereafter: 1,
            use_internal_logger: true,
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
        errs.into_result(())
    }
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
                            profcol_pipeline::model::profile_sample_count(p),
                            p.duration_nano / 1_000_000,
                        ));
                    }
                }
            }
        }
        Verbosity::Detailed => {
            out.push('\n');
            out.push_str(
                &profcol_pipeline::model::resolved::resolve(data, Default::default()).to_text(),
            );
        }
    }
    out
}

#[async_trait]
impl Exporter for DebugExporter {
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
                println!("{text}");
            }
        }
        Ok(ExportOutcome::delivered())
    }
}

#[cfg(test)]
mod tests;
