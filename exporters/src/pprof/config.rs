use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ConfigErrors, Duration};
use profcol_pprof::{keys, DEFAULT_GZIP_LEVEL};

use super::file_name::FileNameTemplate;

/// `exporters: pprof:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PprofExporterConfig {
    /// Where files are written. Required.
    pub directory: String,
    /// Name of each file; `{service.name}`, `{sample_type}`, `{profile_id}`
    /// and `{time}` are replaced. A name already taken gets `-1`, `-2`, ...
    /// after the last placeholder.
    pub file_name: String,
    /// Keep at most this many files (0: no limit); the oldest go first.
    pub max_files: usize,
    /// Keep at most this many MiB of files (0: no limit); the oldest go first.
    pub max_total_size_mib: f64,
    /// Create `directory` (and its parents) when missing.
    pub create_directory: bool,
    /// One file with every sample type when a resource's profiles line up
    /// (one pprof upload's types always do); `false` splits them, one file
    /// per sample type.
    pub merge_sample_types: bool,
    /// Resource attributes copied onto every sample as labels.
    pub resource_attributes_as_labels: Vec<String>,
    /// gzip level, 0-9.
    pub compression_level: u32,
    /// With a length (`60s`), one file per service and sample type set per
    /// window of that length instead of one per batch; 0 (default): off.
    pub aggregate_window: Duration,
    /// Most files one batch (or window) may become. Past it, the resources
    /// of one `service.name` share a file, as `aggregate_window` merges
    /// them; files still past it are not written, their samples counted
    /// dropped (`max_files_per_batch`).
    pub max_files_per_batch: usize,
}

pub const DEFAULT_FILE_NAME: &str = "{service.name}-{time}-{sample_type}.pb.gz";

impl Default for PprofExporterConfig {
    fn default() -> Self {
        Self {
            directory: String::new(),
            file_name: DEFAULT_FILE_NAME.to_owned(),
            max_files: 0,
            max_total_size_mib: 0.0,
            create_directory: true,
            merge_sample_types: true,
            resource_attributes_as_labels: vec![keys::SERVICE_NAME.to_owned()],
            compression_level: DEFAULT_GZIP_LEVEL,
            aggregate_window: Duration(std::time::Duration::ZERO),
            max_files_per_batch: 1000,
        }
    }
}

impl PprofExporterConfig {
    /// Checks every key; `path` is the section's otelcol-style path
    /// (`exporters::pprof/local`).
    pub fn validate(&self, path: &str) -> Result<FileNameTemplate, ConfigErrors> {
        let key = |k: &str| format!("{path}::{k}");
        let mut errs = ConfigErrors::default();
        if self.directory.trim().is_empty() {
            errs.push(key("directory"), "is required");
        }
        let template = FileNameTemplate::parse(&self.file_name);
        if let Err(e) = &template {
            errs.push(key("file_name"), e.clone());
        }
        if !(self.max_total_size_mib.is_finite() && self.max_total_size_mib >= 0.0) {
            errs.push(
                key("max_total_size_mib"),
                format!("must be 0 or more, got {}", self.max_total_size_mib),
            );
        }
        if self.max_files_per_batch == 0 {
            errs.push(key("max_files_per_batch"), "must be greater than 0");
        }
        if self.compression_level > 9 {
            errs.push(
                key("compression_level"),
                format!("must be between 0 and 9, got {}", self.compression_level),
            );
        }
        if !self.aggregate_window.0.is_zero() && self.aggregate_window.0.as_millis() < 100 {
            errs.push(
                key("aggregate_window"),
                format!(
                    "must be 0 (off) or at least 100ms, got {:?}",
                    self.aggregate_window.0
                ),
            );
        }
        match template {
            Ok(t) if errs.is_empty() => Ok(t),
            _ => Err(errs),
        }
    }

    /// `max_total_size_mib` in bytes; `None` for no limit.
    pub fn max_total_bytes(&self) -> Option<u64> {
        (self.max_total_size_mib > 0.0)
            .then_some((self.max_total_size_mib * 1024.0 * 1024.0) as u64)
    }
}
