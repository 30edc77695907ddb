//! Extension `file_storage`, with otelcol-contrib's keys: where exporters'
//! persistent sending queues live (`sending_queue: {storage:
//! file_storage}`). Each exporter gets a directory of its own under
//! `directory`, named as the Collector names its files
//! (`exporter_<type>_<name>_profiles`).
//!
//! The Collector's bbolt files need compaction to give disk space back;
//! our queues are segment logs whose settled segments are deleted, so the
//! `compaction` keys are accepted (configs copied from the Collector keep
//! working) and have nothing to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use profcol_model::memory::MemoryBudget;
use profcol_pipeline::component::{Extension, ExtensionFactory, Storage};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, QueueSettings};
use profcol_pipeline::runtime::ExtensionContext;
use profcol_pipeline::telemetry::Telemetry;
use profcol_queue::{BlobLog, DiskQueue, DiskQueueOptions, OnCorrupt, Queue, RecoveredBlobs};

/// The Collector's default on Linux.
const DEFAULT_DIRECTORY: &str = "/var/lib/otelcol/file_storage";

/// A segment file takes no more appends past this size; a settled one is
/// deleted whole, so this is also the disk a drained queue may keep.
const SEGMENT_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileStorageConfig {
    pub directory: String,
    /// `fdatasync` each queued request before its client is answered (and
    /// each settled one): what was acknowledged survives a power loss, not
    /// only a crash.
    pub fsync: bool,
    /// Create `directory` (and its parents) if missing.
    pub create_directory: bool,
    /// Octal mode for a created directory.
    pub directory_permissions: String,
    /// The Collector's lock timeout for its database; accepted.
    pub timeout: Duration,
    /// The Collector's: move an unreadable store aside and start empty.
    /// profcol always does (and counts what it could not read).
    pub recreate: bool,
    /// The Collector's compaction settings; accepted, see the module doc.
    pub compaction: Compaction,
    /// The Collector's cap on each database file, in bytes; `0` is none.
    /// A cap is refused: a queue is bounded by its `sending_queue`.
    #[serde(deserialize_with = "go_int")]
    pub max_size: Option<i64>,
}

impl Default for FileStorageConfig {
    fn default() -> Self {
        Self {
            directory: DEFAULT_DIRECTORY.into(),
            fsync: false,
            create_directory: false,
            directory_permissions: "0750".into(),
            timeout: Duration::from_secs(1),
            recreate: false,
            compaction: Compaction::default(),
            max_size: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Compaction {
    pub directory: Option<String>,
    pub on_start: bool,
    pub on_rebound: bool,
    #[serde(deserialize_with = "go_int")]
    pub rebound_needed_threshold_mib: Option<i64>,
    #[serde(deserialize_with = "go_int")]
    pub rebound_trigger_threshold_mib: Option<i64>,
    #[serde(deserialize_with = "go_int")]
    pub max_transaction_size: Option<i64>,
    pub check_interval: Option<Duration>,
    pub cleanup_on_start: bool,
}

/// An integer as the Collector decodes one: a YAML integer, or text Go's
/// `strconv.ParseInt(s, 0, 64)` reads (`65_536`, `0x10`, `0o17`, `010`
/// octal), as the extension's README writes `max_transaction_size: 65_536`.
fn go_int<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{n} is not an integer"))),
        serde_json::Value::String(s) => parse_go_int(&s)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{s:?} is not an integer"))),
        other => Err(D::Error::custom(format!(
            "expected an integer, got {other}"
        ))),
    }
}

/// `strconv.ParseInt(s, 0, 64)`: a sign, a base prefix, and `_` only
/// between digits (or after the prefix).
fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_owned())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_owned())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_owned())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_owned())
    } else {
        (10, lower)
    };
    let underscores_ok = !digits.ends_with('_')
        && !digits.contains("__")
        && (radix != 10 || !digits.starts_with('_'));
    if digits.is_empty() || !underscores_ok {
        return None;
    }
    let v = i64::from_str_radix(&digits.replace('_', ""), radix).ok()?;
    Some(if neg { -v } else { v })
}

impl FileStorageConfig {
    fn mode(&self) -> Option<u32> {
        u32::from_str_radix(&self.directory_permissions, 8)
            .ok()
            .filter(|m| *m <= 0o7777)
    }

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let dir = Path::new(&self.directory);
        if self.directory.is_empty() {
            errs.push(cfg.key_path("directory"), "is required");
        } else if dir.exists() {
            if !dir.is_dir() {
                errs.push(
                    cfg.key_path("directory"),
                    format!("{} is not a directory", self.directory),
                );
            }
        } else if !self.create_directory {
            errs.push(
                cfg.key_path("directory"),
                format!(
                    "{} does not exist (create it, or set create_directory: true)",
                    self.directory
                ),
            );
        }
        match self.max_size {
            Some(n) if n < 0 => errs.push(cfg.key_path("max_size"), "max size cannot be less than 0"),
            Some(n) if n > 0 => errs.push(
                cfg.key_path("max_size"),
                "is not supported: profcol's persistent queue is bounded by its exporter's sending_queue (queue_size, in bytes with sizer: bytes), not by the storage; set max_size: 0 or leave it out",
            ),
            _ => {}
        }
        if self.compaction.max_transaction_size.is_some_and(|n| n < 0) {
            errs.push(
                cfg.key_path("compaction::max_transaction_size"),
                "max transaction size for compaction cannot be less than 0",
            );
        }
        if self.mode().is_none() {
            errs.push(
                cfg.key_path("directory_permissions"),
                format!("{:?} is not an octal mode", self.directory_permissions),
            );
        }
        errs.into_result(())
    }
}

pub struct FileStorageFactory;

impl ExtensionFactory for FileStorageFactory {
    fn type_name(&self) -> &'static str {
        "file_storage"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Extension>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &FileStorageConfig| c.validate(cfg))?;
        Ok(Box::new(FileStorageExtension(Arc::new(FileStorage {
            directory: PathBuf::from(&c.directory),
            mode: c.mode().unwrap_or(0o750),
            create_directory: c.create_directory,
            fsync: c.fsync,
        }))))
    }
}

pub fn factory() -> Arc<dyn ExtensionFactory> {
    Arc::new(FileStorageFactory)
}

pub struct FileStorage {
    directory: PathBuf,
    mode: u32,
    create_directory: bool,
    fsync: bool,
}

impl FileStorage {
    /// The directory of `owner`'s queue (`otlp/gw` → `exporter_otlp_gw_profiles`).
    fn queue_directory(&self, owner: &str) -> PathBuf {
        self.directory
            .join(format!("exporter_{}_profiles", file_name(owner)))
    }

    fn create_directory(&self) -> anyhow::Result<()> {
        if self.create_directory && !self.directory.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(self.mode)
                .create(&self.directory)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", self.directory.display()))?;
        }
        Ok(())
    }
}

/// A component id as part of a file name.
fn file_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[async_trait]
impl Storage for FileStorage {
    async fn open_queue(
        &self,
        owner: &str,
        settings: &QueueSettings,
        budget: Arc<MemoryBudget>,
        telemetry: Arc<Telemetry>,
    ) -> anyhow::Result<Arc<dyn Queue>> {
        self.create_directory()?;
        let opts = DiskQueueOptions {
            directory: self.queue_directory(owner),
            fsync: self.fsync,
            capacity: settings.queue_size,
            sizer: settings.sizer,
            // What the consumers take next stays decoded in memory, so a
            // queue that keeps up never reads back what it wrote.
            resident: 2 * settings.num_consumers,
            segment_bytes: SEGMENT_BYTES,
        };
        let exporter = owner.to_owned();
        let on_corrupt: OnCorrupt =
            Arc::new(move |records| telemetry.exporter_queue_corrupt(&exporter, records));
        Ok(Arc::new(
            DiskQueue::open(opts, owner, budget, on_corrupt).await?,
        ))
    }

    /// `receiver_<name>_forward`: the Sentry receiver's forwarding queue.
    fn open_log(&self, owner: &str) -> anyhow::Result<(BlobLog, RecoveredBlobs)> {
        self.create_directory()?;
        let dir = self
            .directory
            .join(format!("receiver_{}_forward", file_name(owner)));
        BlobLog::open(&dir, self.fsync, owner)
    }
}

struct FileStorageExtension(Arc<FileStorage>);

#[async_trait]
impl Extension for FileStorageExtension {
    fn storage(&self) -> Option<Arc<dyn Storage>> {
        Some(self.0.clone())
    }

    async fn start(
        self: Box<Self>,
        ctx: ExtensionContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        Ok(tokio::spawn(async move { ctx.shutdown.cancelled().await }))
    }
}

#[cfg(test)]
mod tests {
    use profcol_pipeline::config::Kind;

    use super::*;

    fn create(yaml: &str) -> Result<Box<dyn Extension>, String> {
        let cfg = ComponentConfig::from_yaml(Kind::Extension, "file_storage", yaml)
            .map_err(|e| e.to_string())?;
        FileStorageFactory.create(&cfg).map_err(|e| e.to_string())
    }

    #[test]
    fn a_config_from_the_collectors_docs_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "directory: {}\ntimeout: 1s\nfsync: true\ncompaction:\n  on_start: true\n  \
             directory: /tmp/\n  max_transaction_size: 65536\n",
            dir.path().display()
        );
        assert!(create(&yaml).unwrap().storage().is_some());
    }

    /// Integers as the Collector reads them (its README writes
    /// `max_transaction_size: 65_536`); a size cap is refused with why.
    #[test]
    fn the_collectors_integers_and_max_size() {
        for (s, want) in [
            ("65_536", Some(65536)),
            ("0x10", Some(16)),
            ("0o17", Some(15)),
            ("010", Some(8)),
            ("-5", Some(-5)),
            ("0", Some(0)),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("12ab", None),
            ("", None),
        ] {
            assert_eq!(parse_go_int(s), want, "{s:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "directory: {}\nmax_size: 0\ncompaction: {{max_transaction_size: 65_536, rebound_needed_threshold_mib: '100'}}",
            dir.path().display()
        );
        assert!(create(&yaml).is_ok());
        let err = create(&yaml.replace("max_size: 0", "max_size: 268435456"))
            .err()
            .unwrap();
        assert!(
            err.starts_with("extensions::file_storage::max_size: is not supported: profcol's persistent queue is bounded by its exporter's sending_queue"),
            "{err}"
        );
        let err = create(&yaml.replace("65_536", "many")).err().unwrap();
        assert!(
            err.contains("extensions::file_storage::compaction::max_transaction_size: \"many\" is not an integer"),
            "{err}"
        );
    }

    #[test]
    fn errors_name_their_key() {
        for (yaml, want) in [
            (
                "directory: /nonexistent/q".to_owned(),
                "extensions::file_storage::directory: /nonexistent/q does not exist",
            ),
            (
                "directory: /etc/hostname".to_owned(),
                "extensions::file_storage::directory: /etc/hostname is not a directory",
            ),
            (
                "{directory: /tmp, directory_permissions: rwx}".to_owned(),
                "extensions::file_storage::directory_permissions",
            ),
            (
                "{directory: /tmp, compaction: {on_startup: true}}".to_owned(),
                "extensions::file_storage::compaction: unknown field \"on_startup\"",
            ),
        ] {
            let err = create(&yaml).err().unwrap();
            assert!(err.contains(want), "{yaml}: {err}");
        }
        // create_directory: made at start, with its parents.
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        assert!(create(&format!(
            "{{directory: {}, create_directory: true}}",
            nested.display()
        ))
        .is_ok());
    }

    #[tokio::test]
    async fn each_exporter_gets_a_directory_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("q");
        let ext = create(&format!(
            "{{directory: {}, create_directory: true}}",
            nested.display()
        ))
        .unwrap();
        let storage = ext.storage().unwrap();
        let settings = QueueSettings::default();
        let telemetry = Arc::new(Telemetry::new());
        let budget = MemoryBudget::new(64 << 20);
        for owner in ["otlp/gw", "sentry"] {
            storage
                .open_queue(owner, &settings, budget.clone(), telemetry.clone())
                .await
                .unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(&nested)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["exporter_otlp_gw_profiles", "exporter_sentry_profiles"]
        );
    }
}
