use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ConfigErrors, Duration};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Proto,
}

/// `exporters: file:`; names and defaults of the Collector's `fileexporter`
/// (v0.161.0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileExporterConfig {
    pub path: String,
    pub format: Format,
    /// Keep what the file holds at start instead of truncating it.
    pub append: bool,
    /// How long written records may wait in memory before they reach the
    /// file; unset or 0 is the Collector's 1s. No effect with `rotation`,
    /// which writes every record through, as the Collector does.
    pub flush_interval: Option<Duration>,
    /// Present, even empty (`rotation:`), turns rotation on with the
    /// defaults, as in the Collector.
    #[serde(
        deserialize_with = "present_rotation",
        skip_serializing_if = "Option::is_none"
    )]
    pub rotation: Option<Rotation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression_params: Option<CompressionParams>,
    pub group_by: Option<GroupBy>,
}

/// `rotation`: the Collector's timberjack settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rotation {
    /// Size in MiB past which the file is rotated; 0 is 100.
    pub max_megabytes: u64,
    /// Backups whose name's timestamp is older than this many days are
    /// removed; 0 keeps them whatever their age.
    pub max_days: u64,
    /// How many backups are kept; 0 keeps all.
    pub max_backups: u64,
    /// Backup names in local time instead of UTC.
    pub localtime: bool,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            max_megabytes: 0,
            max_days: 0,
            max_backups: DEFAULT_MAX_BACKUPS,
            localtime: false,
        }
    }
}

impl Rotation {
    /// The size limit in bytes.
    pub fn max_bytes(&self) -> u64 {
        let mb = if self.max_megabytes == 0 {
            DEFAULT_MAX_MEGABYTES
        } else {
            self.max_megabytes
        };
        mb.saturating_mul(1024 * 1024)
    }
}

/// `compression_params` (configcompression's): the zstd level.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionParams {
    pub level: i32,
}

/// `group_by`: one file per value of a resource attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupBy {
    pub enabled: bool,
    pub resource_attribute: String,
    pub max_open_files: u64,
}

impl Default for GroupBy {
    fn default() -> Self {
        Self {
            enabled: false,
            resource_attribute: DEFAULT_RESOURCE_ATTRIBUTE.into(),
            max_open_files: DEFAULT_MAX_OPEN_FILES,
        }
    }
}

pub(super) const DEFAULT_MAX_MEGABYTES: u64 = 100;
pub(super) const DEFAULT_MAX_BACKUPS: u64 = 100;
pub(super) const DEFAULT_RESOURCE_ATTRIBUTE: &str = "fileexporter.path_segment";
pub(super) const DEFAULT_MAX_OPEN_FILES: u64 = 100;
pub(super) const DEFAULT_FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// `Some` for a key that is present, even empty: `rotation:` alone turns
/// rotation on in the Collector.
fn present_rotation<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Rotation>, D::Error> {
    Ok(Some(
        Option::<Rotation>::deserialize(d)?.unwrap_or_default(),
    ))
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
    /// The zstd level when records are compressed: any level loads, as in
    /// the Collector, and is brought into the range zstd has (0 is its
    /// default, 3).
    pub fn zstd_level(&self) -> Option<i32> {
        match self.compression.as_deref() {
            Some("zstd") => {
                let level = self.compression_params.as_ref().map_or(0, |p| p.level);
                let range = zstd::compression_level_range();
                Some(level.clamp(*range.start(), *range.end()))
            }
            _ => None,
        }
    }

    pub fn flush_interval(&self) -> std::time::Duration {
        match self.flush_interval {
            Some(d) if !d.0.is_zero() => d.0,
            _ => DEFAULT_FLUSH_INTERVAL,
        }
    }

    /// `group_by` when enabled.
    pub fn grouping(&self) -> Option<&GroupBy> {
        self.group_by.as_ref().filter(|g| g.enabled)
    }

    /// The Collector's checks (`Config.Validate`, and what its `Start`
    /// refuses), each at its key.
    pub fn validate(&self, path: &str) -> Result<(), ConfigErrors> {
        let key = |k: &str| format!("{path}::{k}");
        let mut errs = ConfigErrors::default();
        if self.path.trim().is_empty() {
            errs.push(key("path"), "is required");
        }
        if self.append && self.rotation.is_some() {
            errs.push(
                key("rotation"),
                "append and rotation enabled at the same time is not supported",
            );
        }
        match self.compression.as_deref() {
            None | Some("") | Some("zstd") => {}
            Some(other) => errs.push(
                key("compression"),
                format!("compression {other:?} is not supported (only zstd is)"),
            ),
        }
        if let Some(g) = self.grouping() {
            let stars = self.path.matches('*').count();
            if stars != 1 {
                errs.push(
                    key("path"),
                    "path must contain exactly one * when group_by is enabled",
                );
            } else if self.path.starts_with('*') {
                errs.push(
                    key("path"),
                    "path must not start with * when group_by is enabled",
                );
            }
            if g.resource_attribute.is_empty() {
                errs.push(
                    key("group_by::resource_attribute"),
                    "resource_attribute must not be empty when group_by is enabled",
                );
            }
            if g.max_open_files == 0 {
                errs.push(
                    key("group_by::max_open_files"),
                    "must be at least 1 (the Collector refuses 0 at start)",
                );
            }
        }
        errs.into_result(())
    }
}
