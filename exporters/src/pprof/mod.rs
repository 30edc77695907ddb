//! Exporter `pprof`: writes each batch as gzip-compressed pprof files that
//! `go tool pprof`, Pyroscope or any pprof tool can open, whatever receiver
//! the profiles came through.
//!
//! One file per resource with every sample type that lines up
//! (`merge_sample_types`, the default), else per resource and sample type,
//! see [`profcol_pprof`]. Files
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
//!     aggregate_window: 60s   # one file per service per minute
//! ```
//!
//! With `aggregate_window`, batches are staged on disk and merged per
//! window (see [`window`]).

mod config;
mod file_name;
mod files;
mod retention;
mod window;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use async_trait::async_trait;

use profcol_model::proto::ProfilesData;
use profcol_model::{Origin, ProfileBatch};
use profcol_pipeline::component::{
    DropReason, ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory,
    ExporterSettings, Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pprof::{plan_files, write_pprof_gzip, PprofError, ToPprofOptions};

pub use config::{PprofExporterConfig, DEFAULT_FILE_NAME};
pub use file_name::{FileNameTemplate, NameValues};
pub use files::is_retryable;

/// The drop reason of files past `max_files_per_batch`.
pub const MAX_FILES_PER_BATCH: DropReason = "max_files_per_batch";

/// What one batch (or window) became.
#[derive(Default)]
struct Written {
    paths: Vec<PathBuf>,
    /// OTLP samples of the files past `max_files_per_batch`.
    dropped: u64,
}

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
    /// Set by `aggregate_window`.
    windows: Option<window::Windows>,
}

struct Closer {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    ctx: ExporterContext,
}

pub struct PprofExporter {
    inner: Arc<Inner>,
    /// The task that writes windows as they close, and how to stop it.
    closer: Mutex<Option<Closer>>,
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
        let directory = PathBuf::from(&cfg.directory);
        let windows = cfg
            .aggregate_window
            .nonzero()
            .map(|w| window::Windows::new(&directory, w));
        Ok(Self {
            inner: Arc::new(Inner {
                directory,
                cfg,
                template,
                limits,
                publish: Mutex::new(()),
                counters: Counters::default(),
                windows,
            }),
            closer: Mutex::new(None),
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
        self.inner
            .write_data(batch.data(), source_comments(batch), None)
            .map(|w| w.paths)
    }

    /// Writes the windows that are due (all with `all`) on the calling
    /// thread; returns the paths written.
    pub fn write_windows(&self, all: bool) -> Vec<PathBuf> {
        self.inner.write_windows(all, None)
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
    fn options(&self, comments: Vec<String>) -> ToPprofOptions {
        ToPprofOptions {
            resource_attributes_as_labels: self.cfg.resource_attributes_as_labels.clone(),
            merge_sample_types: self.cfg.merge_sample_types,
            comments,
        }
    }

    /// Stages `batch` in the open window, after checking it can be written
    /// (what cannot is refused now, not when its window closes).
    fn stage(&self, windows: &window::Windows, batch: &ProfileBatch) -> Result<(), ExportError> {
        profcol_model::validate::validate(batch.data())
            .map_err(|e| ExportError::permanent(format!("pprof exporter: {e}")))?;
        plan_files(batch.data(), &self.options(Vec::new()))
            .map_err(|e| ExportError::permanent(format!("pprof exporter: {e}")))?;
        windows.stage(&batch.encode_to_bytes())
    }

    /// Writes each due window; a window that fails retryably stays staged
    /// for the next try, one that fails permanently is dropped (logged and
    /// counted).
    fn write_windows(&self, all: bool, ctx: Option<&ExporterContext>) -> Vec<PathBuf> {
        let Some(windows) = &self.windows else {
            return Vec::new();
        };
        let event = |what: &str, n: u64| {
            if let Some(ctx) = ctx {
                ctx.telemetry.exporter_event(&ctx.id, what, n);
            }
        };
        let due = match windows.due(all) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(directory = %self.directory.display(), error = %e, "pprof exporter: cannot list staged batches; will retry");
                event("window_failed", 1);
                return Vec::new();
            }
        };
        let mut written = Vec::new();
        for w in due {
            let comments = vec![format!(
                "profcol: {} batches aggregated over a {} window from {}",
                w.files.len(),
                profcol_pipeline::config::Duration(windows.window()),
                humantime::format_rfc3339_millis(
                    std::time::UNIX_EPOCH + std::time::Duration::from_nanos(w.start_unix_nano)
                ),
            )];
            let result = window::merge(&w).and_then(|m| {
                if !m.corrupt.is_empty() {
                    event("staged_batch_corrupt", m.corrupt.len() as u64);
                }
                self.write_data(&m.data, comments, ctx)
            });
            match result {
                Ok(out) => {
                    window::remove(&w.files);
                    written.extend(out.paths);
                }
                Err(e @ ExportError::Retryable { .. }) => {
                    tracing::warn!(error = %e, "pprof exporter: writing a window failed; it stays staged and is tried again");
                    event("window_failed", 1);
                }
                Err(e) => {
                    tracing::error!(error = %e, batches = w.files.len(), "pprof exporter: dropping a window that cannot be written");
                    event("window_dropped", 1);
                    window::remove(&w.files);
                }
            }
        }
        written
    }

    /// Writes `data` as pprof files; `ctx`, when given, receives the file
    /// events as metrics.
    fn write_data(
        &self,
        data: &ProfilesData,
        comments: Vec<String>,
        ctx: Option<&ExporterContext>,
    ) -> Result<Written, ExportError> {
        let opts = self.options(comments);
        let plan = |d: &ProfilesData| {
            plan_files(d, &opts).map_err(|e| ExportError::permanent(format!("pprof exporter: {e}")))
        };
        let mut plans = plan(data)?;
        // A file per resource grows with the request's structure (a request
        // of 50,000 one-profile resources). Past the bound, the instances of
        // a service share its file, as a window's do; what is still past it
        // is left out and counted.
        let max = self.cfg.max_files_per_batch;
        let folded;
        let mut data = data;
        if plans.len() > max {
            folded = window::fold_services(data.clone());
            data = &folded;
            plans = plan(data)?;
        }
        let mut dropped = 0;
        if plans.len() > max {
            let over = plans.split_off(max);
            dropped = over.iter().map(|p| p.otlp_samples).sum();
            if let Some(ctx) = ctx {
                ctx.telemetry
                    .exporter_event(&ctx.id, "file_over_batch_limit", over.len() as u64);
            }
            profcol_model::warn_limited!(files = over.len(), samples = dropped, "pprof exporter: a batch would become more files than max_files_per_batch, even with the resources of each service.name in one; the rest are dropped");
        }
        if plans.is_empty() {
            return Ok(Written::default());
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
        Ok(Written {
            paths: written,
            dropped,
        })
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
            Ok::<_, anyhow::Error>(())
        })
        .await??;
        if let Some(windows) = &self.inner.windows {
            // Windows an earlier run staged are written now, then each
            // window as it closes.
            let (stop, mut stopped) = watch::channel(false);
            let inner = self.inner.clone();
            let ctx = ctx.clone();
            let first = tokio::task::spawn_blocking({
                let (inner, ctx) = (inner.clone(), ctx.clone());
                move || inner.write_windows(true, Some(&ctx))
            });
            first.await?;
            let mut next = windows.until_close();
            let task = tokio::spawn({
                let ctx = ctx.clone();
                async move {
                    loop {
                        // A little past the boundary, so the window has closed.
                        let wait = next + std::time::Duration::from_millis(20);
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = stopped.changed() => return,
                        }
                        let (i, c) = (inner.clone(), ctx.clone());
                        let _ =
                            tokio::task::spawn_blocking(move || i.write_windows(false, Some(&c)))
                                .await;
                        next = inner.windows.as_ref().map_or(wait, |w| w.until_close());
                    }
                }
            });
            *self.closer.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Closer { stop, task, ctx });
        }
        Ok(())
    }

    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let batch = req.batch.clone();
        let inner = self.inner.clone();
        let ctx = ctx.clone();
        let dropped = tokio::task::spawn_blocking(move || match &inner.windows {
            Some(w) => inner.stage(w, &batch).map(|()| 0),
            None => inner
                .write_data(batch.data(), source_comments(&batch), Some(&ctx))
                .map(|w| w.dropped),
        })
        .await
        .map_err(|e| {
            ExportError::permanent(format!("pprof exporter: writer task failed: {e}"))
        })??;
        let mut outcome = ExportOutcome::delivered();
        if dropped > 0 {
            outcome.dropped.push((MAX_FILES_PER_BATCH, dropped));
        }
        Ok(outcome)
    }

    /// Writes every staged window, the open one too.
    async fn shutdown(&self) {
        let closer = self.closer.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(Closer { stop, task, ctx }) = closer else {
            return;
        };
        let _ = stop.send(true);
        let _ = task.await;
        let inner = self.inner.clone();
        let _ = tokio::task::spawn_blocking(move || inner.write_windows(true, Some(&ctx))).await;
    }
}
