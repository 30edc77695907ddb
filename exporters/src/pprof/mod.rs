//! Exporter `pprof`: writes each batch as gzip-compressed pprof files that
//! `go tool pprof`, Pyroscope or any pprof tool can open, whatever receiver
//! the profiles came through.
//!
//! One file per resource and sample type (or per resource with
//! `merge_sample_types`), see [`profcol_pipeline::formats::pprof`]. Files
//! appear atomically (see [`files`]); `max_files` / `max_total_size_mib`
//! delete the oldest (see [`retention`]). Encoding and file I/O run on the
//! blocking pool, several batches at a time; only choosing the final name,
//! the rename and retention are serialised.
//!
//! ```yaml
//! exporters:
//!   pprof:
//!     directory: /var/lib/profcol/pprof
//!     file_name: "{service.name}-{time}-{sample_type}.pb.gz"
//!     max_files: 1000
//!     max_total_size_mib: 512
//! ```

mod config;
mod file_name;
mod files;
mod retention;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::formats::pprof::{plan_files, write_pprof_gzip, PprofError, ToPprofOptions};
use profcol_pipeline::model::{Origin, ProfileBatch};

pub use config::{PprofExporterConfig, DEFAULT_FILE_NAME};
pub use file_name::{FileNameTemplate, NameValues};
pub use files::is_retryable;

/// Names taken by earlier files are skipped with `-1`, `-2`, ... up to this.
const MAX_NAME_ATTEMPTS: u32 = 10_000;

pub struct PprofExporterFactory;

impl ExporterFactory for PprofExporterFactory {
    fn type_name(&self) -> &'static str {
        "pprof"
    }

    /// A local disk takes milliseconds; leave room for a slow or network
    /// file system before calling an attempt failed.
    fn default_settings(&self) -> Option<ExporterSettings> {
        Some(ExporterSettings::with_timeout(
            std::time::Duration::from_secs(30),
        ))
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        _settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (_, exporter) = cfg
            .decode_checked(|c: &PprofExporterConfig| PprofExporter::new(c.clone(), &cfg.path()))?;
        Ok(Arc::new(exporter))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(PprofExporterFactory)
}

/// Counters of what the exporter did, since it was created.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PprofStats {
    pub files_written: u64,
    pub bytes_written: u64,
    /// Files deleted by `max_files` / `max_total_size_mib`.
    pub files_removed: u64,
    pub bytes_removed: u64,
}

#[derive(Default)]
struct Counters {
    files_written: AtomicU64,
    bytes_written: AtomicU64,
    files_removed: AtomicU64,
    bytes_removed: AtomicU64,
}

struct Inner {
    cfg: PprofExporterConfig,
    directory: PathBuf,
    template: FileNameTemplate,
    limits: retention::Limits,
    /// Held while picking a final name, renaming and enforcing retention.
    publish: Mutex<()>,
    counters: Counters,
}

pub struct PprofExporter {
    inner: Arc<Inner>,
}

impl PprofExporter {
    /// Validates `cfg` (errors under `path`, e.g. `exporters::pprof`), and
    /// checks `directory` as start-up will, without creating it: a missing
    /// one with `create_directory: false`, or a path that is not a
    /// directory, is an error here already.
    pub fn new(cfg: PprofExporterConfig, path: &str) -> Result<Self, ConfigErrors> {
        let usable = match cfg.directory.trim() {
            "" => Ok(()),
            dir => files::check_directory(Path::new(dir), cfg.create_directory)
                .map_err(|e| ConfigErrors::one(format!("{path}::directory"), e)),
        };
        let (template, ()) = ConfigErrors::both(cfg.validate(path), usable)?;
        let limits = retention::Limits {
            max_files: cfg.max_files,
            max_bytes: cfg.max_total_bytes(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                directory: PathBuf::from(&cfg.directory),
                cfg,
                template,
                limits,
                publish: Mutex::new(()),
                counters: Counters::default(),
            }),
        })
    }

    pub fn directory(&self) -> &Path {
        &self.inner.directory
    }

    pub fn stats(&self) -> PprofStats {
        let c = &self.inner.counters;
        PprofStats {
            files_written: c.files_written.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            files_removed: c.files_removed.load(Ordering::Relaxed),
            bytes_removed: c.bytes_removed.load(Ordering::Relaxed),
        }
    }

    /// Writes `batch` on the calling thread; returns the paths written.
    /// [`Exporter::export`] runs this on the blocking pool.
    pub fn write_batch(&self, batch: &ProfileBatch) -> Result<Vec<PathBuf>, ExportError> {
        self.inner.write_batch(batch, None)
    }
}

/// Comment lines naming where a batch came from.
fn source_comments(batch: &ProfileBatch) -> Vec<String> {
    let mut out = Vec::new();
    if !batch.meta.receiver.is_empty() {
        out.push(format!("profcol: received by {}", batch.meta.receiver));
    }
    match &batch.meta.origin {
        Origin::Sentry { project_id, .. } => {
            out.push(format!("profcol: Sentry project {project_id}"))
        }
        Origin::Pprof => out.push("profcol: received as pprof".to_owned()),
        Origin::Otlp => {}
    }
    out
}

impl Inner {
    /// `ctx`, when given, receives the file events as metrics.
    fn write_batch(
        &self,
        batch: &ProfileBatch,
        ctx: Option<&ExporterContext>,
    ) -> Result<Vec<PathBuf>, ExportError> {
        let opts = ToPprofOptions {
            resource_attributes_as_labels: self.cfg.resource_attributes_as_labels.clone(),
            merge_sample_types: self.cfg.merge_sample_types,
            comments: source_comments(batch),
        };
        let data = batch.data();
        let plans = plan_files(data, &opts)
            .map_err(|e| ExportError::permanent(format!("pprof exporter: {e}")))?;
        if plans.is_empty() {
            return Ok(Vec::new());
        }
        files::ensure_directory(&self.directory, self.cfg.create_directory)?;

        // Every file of the batch is written before any is published, so a
        // failed attempt leaves nothing behind and a retry duplicates nothing.
        let mut staged = Vec::with_capacity(plans.len());
        for plan in &plans {
            let level = self.cfg.compression_level;
            let file = files::Staged::write(&self.directory, |f| {
                write_pprof_gzip(data, plan, &opts, level, f).map_err(|e| match e {
                    PprofError::Io(io) => files::export_error("writing into", &self.directory, &io),
                    other => ExportError::permanent(format!("pprof exporter: {other}")),
                })
            })?;
            let values = NameValues {
                service_name: plan.service_name.clone(),
                sample_type: plan.sample_type_name(),
                profile_id: plan.profile_id.clone(),
                time_unix_nano: plan.time_unix_nano,
            };
            staged.push((file, values));
        }

        let _guard = self.publish.lock().unwrap_or_else(|e| e.into_inner());
        let mut written = Vec::with_capacity(staged.len());
        for (file, values) in &staged {
            let target = self.publish(file, values)?;
            self.counters.files_written.fetch_add(1, Ordering::Relaxed);
            self.counters
                .bytes_written
                .fetch_add(file.size, Ordering::Relaxed);
            tracing::debug!(file = %target.display(), bytes = file.size, "pprof exporter: wrote file");
            written.push(target);
        }
        files::sync_directory(&self.directory)?;
        if let Some(ctx) = ctx {
            ctx.telemetry
                .exporter_event(&ctx.id, "file_written", written.len() as u64);
        }
        match retention::enforce(&self.directory, &self.template, &self.limits) {
            Ok(r) => {
                if r.files > 0 {
                    if let Some(ctx) = ctx {
                        ctx.telemetry
                            .exporter_event(&ctx.id, "file_removed_by_retention", r.files);
                    }
                    self.counters
                        .files_removed
                        .fetch_add(r.files, Ordering::Relaxed);
                    self.counters
                        .bytes_removed
                        .fetch_add(r.bytes, Ordering::Relaxed);
                    tracing::info!(
                        directory = %self.directory.display(),
                        files = r.files,
                        bytes = r.bytes,
                        "pprof exporter: removed oldest files to stay within max_files / max_total_size_mib"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(directory = %self.directory.display(), error = %e, "pprof exporter: retention failed")
            }
        }
        Ok(written)
    }

    /// Renames `file` to the first free name the template gives.
    fn publish(&self, file: &files::Staged, values: &NameValues) -> Result<PathBuf, ExportError> {
        for attempt in 0..MAX_NAME_ATTEMPTS {
            let target = self.directory.join(self.template.render(values, attempt));
            if file.publish(&target)? {
                return Ok(target);
            }
        }
        Err(ExportError::permanent(format!(
            "pprof exporter: no free file name for {:?} after {MAX_NAME_ATTEMPTS} attempts",
            self.template.render(values, 0)
        )))
    }
}

#[async_trait]
impl Exporter for PprofExporter {
    /// Creates or checks the directory and removes temporary files a crash
    /// left behind. A directory that cannot be used fails start-up, where a
    /// wrong path is easiest to see.
    async fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        let inner = self.inner.clone();
        let id = ctx.id.clone();
        tokio::task::spawn_blocking(move || {
            files::ensure_directory(&inner.directory, inner.cfg.create_directory).map_err(|e| anyhow::anyhow!("{e}"))?;
            let removed = files::remove_stale_temp_files(&inner.directory)
                .map_err(|e| anyhow::anyhow!("pprof exporter: reading {}: {e}", inner.directory.display()))?;
            if removed > 0 {
                tracing::info!(exporter = %id, removed, "pprof exporter: removed temporary files of an earlier run");
            }
            Ok(())
        })
        .await?
    }

    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let batch = req.batch.clone();
        let inner = self.inner.clone();
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || inner.write_batch(&batch, Some(&ctx)))
            .await
            .map_err(|e| {
                ExportError::permanent(format!("pprof exporter: writer task failed: {e}"))
            })??;
        Ok(ExportOutcome::delivered())
    }
}
