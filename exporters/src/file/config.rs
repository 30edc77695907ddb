use serde::{Deserialize, Serialize};

use profcol_pipeline::config::ConfigErrors;

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
}

impl Default for FileExporterConfig {
    fn default() -> Self {
        Self {
            path: String::new(),
            format: Format::Json,
            append: false,
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
        errs.into_result(())
    }
}
