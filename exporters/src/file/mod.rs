//! Exporter `file`, as the Collector's `fileexporter` (v0.161.0): every
//! batch written as an OTLP `ExportProfilesServiceRequest` (see
//! [`record`] for the framing), to one file or, with `group_by`, to one
//! file per resource attribute value ([`group`]); each file plain and
//! buffered for `flush_interval`, or rotated by size ([`rotate`]).
//! `profcol test` reads what it writes back as input ([`read`]).

mod config;
mod group;
mod record;
mod rotate;
mod sink;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::File;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use profcol_model::dictionary::subsets;
use profcol_model::proto::any_value;
use profcol_model::proto::metrics::{point_count, ExportMetricsServiceRequest};
use profcol_model::{profile_sample_count, ProfileBatch};
use profcol_pipeline::component::{
    DropReason, ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory,
    ExporterSettings, Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{CompressionParams, FileExporterConfig, Format, GroupBy, Rotation};
pub use profcol_otlp::file::{read_requests, ZSTD_MAGIC};

use group::Groups;
use record::{Encoder, Source};
use sink::Sink;

/// Samples of a resource without the `group_by` attribute (or with a value
/// that is not a string): dropped, as the Collector drops them.
pub const MISSING_GROUP_ATTRIBUTE: DropReason = "missing_group_by_attribute";

/// The shortest flush period: the Collector's `flush_interval: 5` is 5ns.
const MIN_FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1);

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(FileExporterFactory)
}

struct FileExporterFactory;

impl ExporterFactory for FileExporterFactory {
    fn type_name(&self) -> &'static str {
        "file"
    }

    fn default_settings(&self) -> Option<ExporterSettings> {
        // A local file either takes the write or will not soon: the
        // Collector's fileexporter does not retry either.
        let mut s = ExporterSettings::with_timeout(std::time::Duration::from_secs(30));
        s.retry_on_failure.enabled = false;
        Some(s)
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        _settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &FileExporterConfig| {
            // What start-up would refuse, so that `validate` reports it too.
            // A group_by path names no file until a batch comes.
            let usable = match c.path.trim() {
                "" => Ok(()),
                _ if c.grouping().is_some() => Ok(()),
                path => check_path(Path::new(path)).map_err(|e| cfg.error("path", e)),
            };
            ConfigErrors::both(c.validate(&cfg.path()), usable).map(drop)
        })?;
        Ok(Arc::new(FileExporter {
            inner: Arc::new(Inner {
                cfg: c,
                state: Mutex::new(State::Idle),
                flusher: Mutex::new(None),
            }),
        }))
    }
}

pub struct FileExporter {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: FileExporterConfig,
    /// One batch is written under the lock, so records never interleave.
    state: Mutex<State>,
    /// Writes the buffers every `flush_interval`.
    flusher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

enum State {
    Idle,
    Open(Box<Writer>),
    Closed,
}

struct Writer {
    encoder: Encoder,
    files: Files,
}

enum Files {
    One(Sink),
    Grouped { groups: Groups, attribute: String },
}

/// What [`Sink::open`] at start-up would refuse, found without creating,
/// truncating or writing anything: a path that is a directory, an existing
/// file that cannot be opened for writing, or a path that cannot be looked
/// at (a parent that is a file, say). A missing file and missing parent
/// directories are fine: start-up creates them.
fn check_path(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(format!("{} is a directory", path.display())),
        // Only a regular file is opened here: opening a FIFO for writing
        // would wait for a reader.
        Ok(m) if m.is_file() => File::options()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| format!("cannot open {} for writing: {e}", path.display())),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot use {}: {e}", path.display())),
    }
}

/// A write error: permission and read-only errors are permanent, others
/// may pass.
fn classify(path: &Path, e: std::io::Error) -> ExportError {
    let msg = format!("file exporter: writing {}: {e}", path.display());
    match e.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => ExportError::permanent(msg),
        _ => ExportError::retryable(msg),
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open(&self) -> std::io::Result<()> {
        let c = &self.cfg;
        let encoder = Encoder::new(c.format, c.zstd_level())?;
        let files = match c.grouping() {
            Some(g) => Files::Grouped {
                groups: Groups::new(
                    &c.path,
                    usize::try_from(g.max_open_files).unwrap_or(usize::MAX),
                    c.append,
                    c.rotation.clone(),
                ),
                attribute: g.resource_attribute.clone(),
            },
            None => Files::One(Sink::open(
                Path::new(&c.path),
                c.append,
                c.rotation.as_ref(),
            )?),
        };
        *self.lock() = State::Open(Box::new(Writer { encoder, files }));
        Ok(())
    }

    fn write(&self, batch: &ProfileBatch) -> Result<ExportOutcome, ExportError> {
        let mut state = self.lock();
        let w = match &mut *state {
            State::Open(w) => w,
            State::Idle => return Err(ExportError::permanent("file exporter: used before start")),
            State::Closed => {
                return Err(ExportError::permanent("file exporter: used after shutdown"))
            }
        };
        match &mut w.files {
            Files::One(sink) => {
                let record = w.encoder.record(Source::Batch(batch))?;
                sink.write(&record).map_err(|e| classify(sink.path(), e))?;
                Ok(ExportOutcome::delivered())
            }
            Files::Grouped { groups, attribute } => {
                write_groups(&mut w.encoder, groups, attribute, batch)
            }
        }
    }

    /// Writes a metrics request: one record, or with `group_by` one per
    /// file its resources name (those without the attribute are left out,
    /// counted as rejected points, as the Collector drops them).
    fn write_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
    ) -> Result<ExportOutcome, ExportError> {
        let mut state = self.lock();
        let w = match &mut *state {
            State::Open(w) => w,
            State::Idle => return Err(ExportError::permanent("file exporter: used before start")),
            State::Closed => {
                return Err(ExportError::permanent("file exporter: used after shutdown"))
            }
        };
        match &mut w.files {
            Files::One(sink) => {
                let record = w.encoder.record(Source::Metrics(req))?;
                sink.write(&record).map_err(|e| classify(sink.path(), e))?;
                Ok(ExportOutcome::delivered())
            }
            Files::Grouped { groups, attribute } => {
                let mut parts: Vec<(&str, ExportMetricsServiceRequest)> = Vec::new();
                let mut missing = 0u64;
                for rm in &req.resource_metrics {
                    let segment = rm
                        .resource
                        .as_ref()
                        .and_then(|res| res.attributes.iter().find(|kv| kv.key == *attribute))
                        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                            any_value::Value::StringValue(s) => Some(s.as_str()),
                            _ => None,
                        });
                    let Some(segment) = segment else {
                        missing += point_count(&ExportMetricsServiceRequest {
                            resource_metrics: vec![rm.clone()],
                        });
                        continue;
                    };
                    match parts.iter_mut().find(|(s, _)| *s == segment) {
                        Some((_, part)) => part.resource_metrics.push(rm.clone()),
                        None => parts.push((
                            segment,
                            ExportMetricsServiceRequest {
                                resource_metrics: vec![rm.clone()],
                            },
                        )),
                    }
                }
                let mut outcome = ExportOutcome::rejected(missing);
                let mut first_error = None;
                let mut written = 0usize;
                for (segment, part) in &parts {
                    let record = w.encoder.record(Source::Metrics(part))?;
                    let result = match groups.sink(segment) {
                        Ok(sink) => sink.write(&record).map_err(|e| classify(sink.path(), e)),
                        Err((path, e)) => Err(classify(&path, e)),
                    };
                    match result {
                        Ok(()) => written += 1,
                        Err(e) => {
                            outcome.rejected += point_count(part);
                            first_error.get_or_insert(e);
                        }
                    }
                }
                match first_error {
                    Some(e) if written == 0 => Err(e),
                    _ => Ok(outcome),
                }
            }
        }
    }

    /// Writes every buffer; one that fails keeps its records for the next
    /// flush.
    fn flush(&self) {
        let mut state = self.lock();
        let State::Open(w) = &mut *state else { return };
        let each = |sink: &mut Sink| {
            if let Err(e) = sink.flush() {
                tracing::warn!(path = %sink.path().display(), error = %e, buffered = sink.buffered(), "file exporter: flush failed; kept for the next one");
            }
        };
        match &mut w.files {
            Files::One(sink) => each(sink),
            Files::Grouped { groups, .. } => groups.sinks().for_each(each),
        }
    }

    /// Flushes and closes every file.
    fn close(&self) {
        let old = std::mem::replace(&mut *self.lock(), State::Closed);
        let State::Open(w) = old else { return };
        let failed = match w.files {
            Files::One(sink) => {
                let (path, pending) = (sink.path().to_owned(), sink.buffered());
                match sink.close() {
                    Ok(()) => Vec::new(),
                    Err(e) => vec![(path, e, pending)],
                }
            }
            Files::Grouped { mut groups, .. } => groups.close_all(),
        };
        for (path, e, lost) in failed {
            tracing::error!(path = %path.display(), error = %e, lost_bytes = lost, "file exporter: the last records could not be written at shutdown");
        }
    }
}

/// `group_by`: each resource's profiles go to the file its attribute
/// names, one record per file per batch, with only the dictionary entries
/// they use. A group whose file fails is counted as failed; the others
/// are written.
fn write_groups(
    encoder: &mut Encoder,
    groups: &mut Groups,
    attribute: &str,
    batch: &ProfileBatch,
) -> Result<ExportOutcome, ExportError> {
    let data = batch.data();
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut segments: Vec<&str> = Vec::new();
    // The group of each profile, in order; u32::MAX: none.
    let mut group: Vec<u32> = Vec::new();
    let mut missing = 0u64;
    for r in &data.resource_profiles {
        let segment = r
            .resource
            .as_ref()
            .and_then(|res| res.attributes.iter().find(|kv| kv.key == attribute))
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.as_str()),
                _ => None,
            });
        let g = match segment {
            Some(s) => *ids.entry(s).or_insert_with(|| {
                segments.push(s);
                (segments.len() - 1) as u32
            }),
            None => u32::MAX,
        };
        for p in r.scope_profiles.iter().flat_map(|s| &s.profiles) {
            group.push(g);
            if g == u32::MAX {
                missing += profile_sample_count(p);
            }
        }
    }
    let mut outcome = ExportOutcome::delivered();
    if missing > 0 {
        tracing::debug!(
            attribute,
            samples = missing,
            "file exporter: resources without the group_by attribute dropped"
        );
        outcome.dropped.push((MISSING_GROUP_ATTRIBUTE, missing));
    }
    let mut written = 0usize;
    let mut failed: Vec<ExportError> = Vec::new();
    for (segment, part) in segments.iter().zip(subsets(data, &group, segments.len())) {
        let Some(part) = part else { continue };
        let record = encoder.record(Source::Part(&part, data))?;
        let result = match groups.sink(segment) {
            Ok(sink) => sink.write(&record).map_err(|e| classify(sink.path(), e)),
            Err((path, e)) => Err(classify(&path, e)),
        };
        match result {
            Ok(()) => written += 1,
            Err(e) => {
                outcome.rejected += part.samples();
                failed.push(e);
            }
        }
    }
    if failed.is_empty() {
        return Ok(outcome);
    }
    if written == 0 {
        // Nothing written: the whole batch fails (and may be retried).
        return Err(failed.swap_remove(0));
    }
    for e in &failed {
        tracing::warn!(error = %e, "file exporter: a group_by file failed; its samples are counted as failed");
    }
    Ok(outcome)
}

#[async_trait]
impl Exporter for FileExporter {
    /// Opens the file (creating its parent directories; a `group_by` file
    /// opens with its first batch); a path that cannot be written fails
    /// start-up, where it is easiest to see. Starts the flusher.
    async fn start(&self, _ctx: &ExporterContext) -> anyhow::Result<()> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            inner
                .open()
                .map_err(|e| anyhow::anyhow!("file exporter: opening {}: {e}", inner.cfg.path))
        })
        .await??;
        // Rotated files are written through: nothing to flush.
        if self.inner.cfg.rotation.is_none() {
            let every = self.inner.cfg.flush_interval().max(MIN_FLUSH_INTERVAL);
            let weak = Arc::downgrade(&self.inner);
            let task = tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let Some(inner) = weak.upgrade() else { return };
                    let _ = tokio::task::spawn_blocking(move || inner.flush()).await;
                }
            });
            *self.inner.flusher.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        }
        Ok(())
    }

    async fn export(
        &self,
        req: &Request,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let batch = req.batch.clone();
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.write(&batch))
            .await
            .map_err(|e| {
                ExportError::permanent(format!("file exporter: writer task failed: {e}"))
            })?
    }

    fn exports_metrics(&self) -> bool {
        true
    }

    async fn export_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let req = req.clone();
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.write_metrics(&req))
            .await
            .map_err(|e| {
                ExportError::permanent(format!("file exporter: writer task failed: {e}"))
            })?
    }

    /// Once the queue has drained: stops the flusher, writes what is
    /// buffered and closes the files.
    async fn shutdown(&self) {
        if let Some(task) = self
            .inner
            .flusher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
        let inner = self.inner.clone();
        let _ = tokio::task::spawn_blocking(move || inner.close()).await;
    }
}
