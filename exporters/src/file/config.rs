use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ConfigErrors, Duration};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Proto,
}

/// `exporters: file:`; names and defaults of the Collector's `fileexporter`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileExporterConfig {
    pub path: String,
    pub format: Format,
    /// Keep what the file holds at start instead of truncating it.
    pub append: bool,
    /// The Collector's flush period; accepted, no effect: every batch is
    /// written through to the file before its export returns.
    pub flush_interval: Option<Duration>,
    /// The Collector's keys this exporter does not implement, read so that
    /// each is refused with its reason.
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub rotation: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub compression_params: Option<serde_json::Value>,
    pub group_by: Option<GroupBy>,
}

/// `group_by`: one file per value of a resource attribute (refused when
/// enabled).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupBy {
    pub enabled: bool,
    pub resource_attribute: Option<String>,
    pub max_open_files: Option<u64>,
}

/// `Some` for a key that is present, even empty: `rotation:` alone turns
/// rotation on in the Collector.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    Ok(Some(serde_json::Value::deserialize(d)?))
}

impl Default for FileExporterConfig {
    fn default() -> Self {
        Self {
            path: String::new(),
            format: Format::Json,
            append: false,
            flush_interval: None,
            rotation: None,
            compression: None,
            compression_params: None,
            group_by: None,
        }
    }
}

impl FileExporterConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigErrors> {
        let key = |k: &str| format!("{path}::{k}");
        let mut errs = ConfigErrors::default();
        if self.path.trim().is_empty() {
            errs.push(key("path"), "is required");
        }
        if self.rotation.is_some() {
            errs.push(
                key("rotation"),
                "rotation is not supported: this exporter writes one file, opened for appending (rotate it outside, e.g. logrotate with copytruncate)",
            );
        }
        match self.compression.as_deref() {
            None | Some("") => {}
            Some("zstd") => errs.push(
                key("compression"),
                "zstd is not supported: this exporter writes plain records (as profcol test reads them); compress the file once written",
            ),
            Some(_) => errs.push(key("compression"), "compression is not supported"),
        }
        if self.group_by.as_ref().is_some_and(|g| g.enabled) {
            errs.push(
                key("group_by"),
                "group_by is not supported: this exporter writes every batch to its one path",
            );
        }
        errs.into_result(())
    }
}
