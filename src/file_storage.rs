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

use profcol_pipeline::component::{Extension, ExtensionFactory, Storage};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, QueueSettings};
use profcol_pipeline::memory::MemoryBudget;
use profcol_pipeline::runtime::queue::{
    BlobLog, DiskQueue, DiskQueueOptions, Queue, RecoveredBlobs,
};
use profcol_pipeline::runtime::ExtensionContext;
use profcol_pipeline::telemetry::Telemetry;

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
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Compaction {
    pub directory: Option<String>,
    pub on_start: bool,
    pub on_rebound: bool,
    pub rebound_needed_threshold_mib: Option<u64>,
    pub rebound_trigger_threshold_mib: Option<u64>,
    pub max_transaction_size: Option<u64>,
    pub check_interval: Option<Duration>,
    pub cleanup_on_start: bool,
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
        Ok(Arc::new(
            DiskQueue::open(opts, owner, budget, telemetry).await?,
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
