//! Exporter `file`, as the Collector's `fileexporter`: every batch appended
//! to one file as an OTLP `ExportProfilesServiceRequest`, JSON lines
//! (`format: json`) or protobuf with a 4-byte big-endian length before each
//! message (`format: proto`). `profcol test` reads either back as input.

mod config;
#[cfg(test)]
mod tests;

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_otlp::json as otlp_json;
use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{FileExporterConfig, Format};

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
            let usable = match c.path.trim() {
                "" => Ok(()),
                path => check_path(Path::new(path)).map_err(|e| cfg.error("path", e)),
            };
            ConfigErrors::both(c.validate(&cfg.path()), usable).map(drop)
        })?;
        Ok(Arc::new(FileExporter {
            inner: Arc::new(Inner {
                path: PathBuf::from(&c.path),
                format: c.format,
                append: c.append,
                file: Mutex::new(None),
            }),
        }))
    }
}

pub struct FileExporter {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    format: Format,
    append: bool,
    /// Opened at start; one batch is written under the lock so records
    /// never interleave.
    file: Mutex<Option<File>>,
}

/// What [`Inner::open`] at start-up would refuse, found without creating,
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

impl Inner {
    fn open(&self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        // As the Collector: truncated at start unless `append`.
        if !self.append {
            file.set_len(0)?;
        }
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
        Ok(())
    }

    fn record(&self, batch: &ProfileBatch) -> Result<Vec<u8>, ExportError> {
        Ok(match self.format {
            Format::Json => {
                let mut line = otlp_json::encode(batch.data());
                line.push(b'\n');
                line
            }
            Format::Proto => {
                let body = batch.encode_to_bytes();
                let len = u32::try_from(body.len()).map_err(|_| {
                    ExportError::permanent("file exporter: batch larger than 4 GiB")
                })?;
                let mut out = Vec::with_capacity(4 + body.len());
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&body);
                out
            }
        })
    }

    fn write(&self, batch: &ProfileBatch) -> Result<(), ExportError> {
        let record = self.record(batch)?;
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let file = guard
            .as_mut()
            .ok_or_else(|| ExportError::permanent("file exporter: used before start"))?;
        let classify = |e: std::io::Error| {
            let msg = format!("file exporter: writing {}: {e}", self.path.display());
            match e.kind() {
                ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
                    ExportError::permanent(msg)
                }
                _ => ExportError::retryable(msg),
            }
        };
        let before = file.metadata().map_err(classify)?.len();
        if let Err(e) = file.write_all(&record).and_then(|_| file.flush()) {
            // Cut a half-written record off, so a retry or the next batch
            // does not follow torn bytes.
            let _ = file.set_len(before);
            return Err(classify(e));
        }
        Ok(())
    }
}

#[async_trait]
impl Exporter for FileExporter {
    /// Creates the parent directories and opens the file; a path that
    /// cannot be written fails start-up, where it is easiest to see.
    async fn start(&self, _ctx: &ExporterContext) -> anyhow::Result<()> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            inner.open().map_err(|e| {
                anyhow::anyhow!("file exporter: opening {}: {e}", inner.path.display())
            })
        })
        .await?
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
            })??;
        Ok(ExportOutcome::delivered())
    }

    /// Closes the file once the queue has drained.
    async fn shutdown(&self) {
        let inner = self.inner.clone();
        let _ = tokio::task::spawn_blocking(move || {
            inner.file.lock().unwrap_or_else(|e| e.into_inner()).take()
        })
        .await;
    }
}

/// Every request of a file the `file` exporter wrote, in either format (a
/// JSON file starts with `{`).
pub fn read_requests(bytes: &[u8]) -> Result<Vec<ProfilesData>, String> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        return bytes
            .split(|b| *b == b'\n')
            .enumerate()
            .filter(|(_, l)| l.iter().any(|b| !b.is_ascii_whitespace()))
            .map(|(i, l)| otlp_json::decode(l).map_err(|e| format!("line {}: {e}", i + 1)))
            .collect();
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let offset = bytes.len() - rest.len();
        let (len, body) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("truncated length prefix at byte {offset}"))?;
        let len = u32::from_be_bytes(*len) as usize;
        if body.len() < len {
            return Err(format!(
                "record at byte {offset} declares {len} bytes but only {} remain",
                body.len()
            ));
        }
        let data = ProfilesData::decode(&body[..len])
            .map_err(|e| format!("record at byte {offset}: {e}"))?;
        out.push(data);
        rest = &body[len..];
    }
    Ok(out)
}
