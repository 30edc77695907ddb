//! Exporter `file`, as the Collector's `fileexporter`: every batch appended
//! to one file as an OTLP `ExportProfilesServiceRequest`, JSON lines
//! (`format: json`) or protobuf with a 4-byte big-endian length before each
//! message (`format: proto`). `profcol test` reads either back as input.

mod config;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use prost::Message;

use profcol_pipeline::component::{
    ExportError, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::formats::otlp_json;
use profcol_pipeline::proto::ProfilesData;
use profcol_pipeline::ProfileBatch;

pub use config::{FileExporterConfig, Format};

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(FileExporterFactory)
}

struct FileExporterFactory;

impl ExporterFactory for FileExporterFactory {
    fn type_name(&self) -> &'static str {
        "file"
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
    ) -> Result<(Arc<dyn Exporter>, ExporterSettings), ConfigErrors> {
        let c: FileExporterConfig = cfg.decode()?;
        c.validate(&cfg.path())?;
        let settings = c.settings();
        Ok((
            Arc::new(FileExporter {
                path: PathBuf::from(&c.path),
                format: c.format,
                append: c.append,
                file: Mutex::new(None),
            }),
            settings,
        ))
    }
}

pub struct FileExporter {
    path: PathBuf,
    format: Format,
    append: bool,
    /// Opened at start; writes of one batch happen under the lock so
    /// records never interleave.
    file: Mutex<Option<std::fs::File>>,
}

#[async_trait]
impl Exporter for FileExporter {
    async fn start(&self, _ctx: &ExporterContext) -> anyhow::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
        }
        // As the Collector: truncated at start unless `append`.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .truncate(false)
            .open(&self.path)
            .and_then(|f| {
                if !self.append {
                    f.set_len(0)?;
                }
                Ok(f)
            })
            .map_err(|e| anyhow::anyhow!("opening {}: {e}", self.path.display()))?;
        *self.file.lock().unwrap() = Some(file);
        Ok(())
    }

    async fn export(
        &self,
        batch: Arc<ProfileBatch>,
        _ctx: &ExporterContext,
    ) -> Result<u64, ExportError> {
        let record = match self.format {
            Format::Json => {
                let mut line = otlp_json::encode(batch.data());
                line.push(b'\n');
                line
            }
            Format::Proto => {
                let body = batch.encode_to_bytes();
                let len = u32::try_from(body.len())
                    .map_err(|_| ExportError::permanent("batch larger than 4 GiB"))?;
                let mut out = Vec::with_capacity(4 + body.len());
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&body);
                out
            }
        };
        let path = self.path.clone();
        let write = |f: &mut std::fs::File| f.write_all(&record).and_then(|_| f.flush());
        let mut guard = self.file.lock().unwrap();
        let file = guard
            .as_mut()
            .ok_or_else(|| ExportError::permanent("file exporter used before start"))?;
        write(file).map_err(|e| {
            let msg = format!("file exporter: writing {}: {e}", path.display());
            use std::io::ErrorKind::*;
            match e.kind() {
                PermissionDenied | ReadOnlyFilesystem => ExportError::permanent(msg),
                _ => ExportError::retryable(msg),
            }
        })?;
        Ok(0)
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
