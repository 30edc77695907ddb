use serde::{Deserialize, Serialize};

use profcol_pipeline::component::ExporterSettings;
use profcol_pipeline::config::{ConfigErrors, Duration, QueueSettings, RetrySettings};

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
    pub timeout: Duration,
    pub retry_on_failure: RetrySettings,
    pub sending_queue: QueueSettings,
}

impl Default for FileExporterConfig {
    fn default() -> Self {
        Self {
            path: String::new(),
            format: Format::Json,
            append: false,
            timeout: Duration::from_secs(30),
            // A local file either takes the write or will not soon: the
            // Collector's fileexporter does not retry either.
            retry_on_failure: RetrySettings {
                enabled: false,
                ..RetrySettings::default()
            },
            sending_queue: QueueSettings::default(),
        }
    }
}

impl FileExporterConfig {
    pub fn settings(&self) -> ExporterSettings {
        ExporterSettings {
            timeout: self.timeout.get(),
            retry_on_failure: self.retry_on_failure.clone(),
            sending_queue: self.sending_queue.clone(),
        }
    }

    pub fn validate(&self, path: &str) -> Result<(), ConfigErrors> {
        let key = |k: &str| format!("{path}::{k}");
        let mut errs = ConfigErrors::default();
        if self.path.trim().is_empty() {
            errs.push(key("path"), "is required");
        }
        if self.timeout.get().is_zero() {
            errs.push(key("timeout"), "must be greater than 0");
        }
        self.retry_on_failure
            .validate(&key("retry_on_failure"), &mut errs);
        self.sending_queue
            .validate(&key("sending_queue"), &mut errs);
        errs.into_result(())
    }
}
