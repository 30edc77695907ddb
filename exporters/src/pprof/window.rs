//! `aggregate_window`: one file per service and sample type set per window
//! of wall-clock time, instead of one per batch.
//!
//! A batch is not held in memory until its window closes: `export` stages
//! it on disk (`<directory>/.profcol-window/<window start>-<uuid>.otlp`, the
//! OTLP protobuf of the batch, fsynced and renamed into place) and only then
//! answers delivered, so what the queue handed over survives a crash. When
//! a window has closed (and at shutdown, the open one too), its staged
//! batches are decoded one by one into one linear merge (equal dictionary
//! entries, resources and scopes shared, see
//! [`profcol_model::dictionary::Merger`]), the resources of one
//! `service.name` are folded into one (keeping the attributes they all
//! share), and the result is written as the exporter writes a batch. The
//! staged files are removed once every file of the window is published: a
//! crash in between writes the window again at the next start (at least
//! once, as the exporter helper's retries are).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use profcol_model::dictionary::Merger;
use profcol_model::proto::{any_value::Value, KeyValue, ProfilesData, ResourceProfiles};
use profcol_pipeline::component::ExportError;
use profcol_pprof::keys;

use super::files::{export_error, TEMP_PREFIX};

/// Under the exporter's directory; no `file_name` template can produce it
/// (templates name files, not directories) and retention skips directories.
pub(super) const STAGING_DIR: &str = ".profcol-window";
const STAGED_SUFFIX: &str = ".otlp";

/// The staged batches of one window, in the order they arrived.
pub(super) struct Closed {
    pub start_unix_nano: u64,
    pub files: Vec<PathBuf>,
}

pub(super) struct Windows {
    dir: PathBuf,
    window: Duration,
}

fn now_unix_nano() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Windows {
    pub(super) fn new(directory: &Path, window: Duration) -> Self {
        Self {
            dir: directory.join(STAGING_DIR),
            window,
        }
    }

    pub(super) fn window(&self) -> Duration {
        self.window
    }

    fn start_of(&self, unix_nano: u64) -> u64 {
        let w = (self.window.as_nanos() as u64).max(1);
        unix_nano - unix_nano % w
    }

    /// How long until the open window closes.
    pub(super) fn until_close(&self) -> Duration {
        let now = now_unix_nano();
        let end = self.start_of(now) + self.window.as_nanos() as u64;
        Duration::from_nanos(end.saturating_sub(now))
    }

    /// Stages `encoded` (a batch's OTLP protobuf) in the open window.
    pub(super) fn stage(&self, encoded: &[u8]) -> Result<(), ExportError> {
        fs::create_dir_all(&self.dir)
            .map_err(|e| export_error("creating directory", &self.dir, &e))?;
        let name = format!(
            "{:020}-{}",
            self.start_of(now_unix_nano()),
            uuid::Uuid::new_v4().simple()
        );
        let tmp = self.dir.join(format!("{TEMP_PREFIX}{name}"));
        let done = self.dir.join(format!("{name}{STAGED_SUFFIX}"));
        let written = fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(encoded).and_then(|()| f.sync_all()))
            .and_then(|()| fs::rename(&tmp, &done))
            .and_then(|()| fs::File::open(&self.dir)?.sync_all());
        written.map_err(|e| {
            let _ = fs::remove_file(&tmp);
            export_error("staging a batch in", &self.dir, &e)
        })
    }

    /// Windows whose staged batches are due: those closed by now, or all
    /// of them with `all` (shutdown, or the start after a crash). Leftover
    /// temporary files of a crashed `stage` are removed.
    pub(super) fn due(&self, all: bool) -> io::Result<Vec<Closed>> {
        let open = self.start_of(now_unix_nano());
        let mut windows: BTreeMap<u64, Vec<(String, PathBuf)>> = BTreeMap::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(TEMP_PREFIX) {
                if all {
                    let _ = fs::remove_file(entry.path());
                }
                continue;
            }
            let Some(start) = name
                .strip_suffix(STAGED_SUFFIX)
                .and_then(|n| n.split('-').next())
                .and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            if all || start < open {
                windows.entry(start).or_default().push((name, entry.path()));
            }
        }
        Ok(windows
            .into_iter()
            .map(|(start_unix_nano, mut files)| {
                // Names start with the window, then a random id: order by
                // modification time, which is arrival order.
                files.sort_by_key(|(name, path)| {
                    (
                        fs::metadata(path).and_then(|m| m.modified()).ok(),
                        name.clone(),
                    )
                });
                Closed {
                    start_unix_nano,
                    files: files.into_iter().map(|(_, p)| p).collect(),
                }
            })
            .collect())
    }
}

/// What a window's staged batches merge into; `corrupt` names staged files
/// that did not decode (they are removed with the rest, and counted).
pub(super) struct Merged {
    pub data: ProfilesData,
    pub corrupt: Vec<PathBuf>,
}

/// Decodes the window's batches one at a time into one merge.
pub(super) fn merge(window: &Closed) -> Result<Merged, ExportError> {
    let mut merger: Option<Merger> = None;
    let mut corrupt = Vec::new();
    for path in &window.files {
        let bytes = fs::read(path).map_err(|e| export_error("reading", path, &e))?;
        let data = match profcol_model::codec::decode(&bytes) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(file = %path.display(), error = %e, "pprof exporter: a staged batch does not decode; dropping it");
                corrupt.push(path.clone());
                continue;
            }
        };
        match &mut merger {
            None => merger = Some(Merger::grouping(data)),
            Some(m) => m.push(data),
        }
    }
    let data = merger.map(Merger::finish).unwrap_or_default();
    Ok(Merged {
        data: fold_services(data),
        corrupt,
    })
}

fn service_name(rp: &ResourceProfiles) -> Option<&str> {
    rp.resource.as_ref()?.attributes.iter().find_map(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) if kv.key == keys::SERVICE_NAME => Some(s.as_str()),
            _ => None,
        }
    })
}

/// Folds resources with one `service.name` (instances of a service: other
/// hosts, pids, versions) into the first of them, keeping only the
/// attributes all of them have with equal values, so that one file holds
/// the service. A resource without `service.name` stays as it is.
pub(super) fn fold_services(mut data: ProfilesData) -> ProfilesData {
    // Where each service's resource is in `kept`: a map, as a batch past
    // `max_files_per_batch` may hold thousands of services.
    let mut by_service: std::collections::HashMap<String, usize> = Default::default();
    let mut kept: Vec<ResourceProfiles> = Vec::with_capacity(data.resource_profiles.len());
    for mut rp in std::mem::take(&mut data.resource_profiles) {
        let Some(name) = service_name(&rp).map(str::to_owned) else {
            kept.push(rp);
            continue;
        };
        match by_service.get(&name) {
            None => {
                by_service.insert(name, kept.len());
                kept.push(rp);
            }
            Some(&at) => {
                let into = &mut kept[at];
                let theirs: &[KeyValue] = rp.resource.as_ref().map_or(&[], |r| &r.attributes);
                if let Some(res) = into.resource.as_mut() {
                    res.attributes.retain(|kv| theirs.contains(kv));
                }
                into.scope_profiles.append(&mut rp.scope_profiles);
            }
        }
    }
    data.resource_profiles = kept;
    data
}

/// Removes a window's staged files once its output is published.
pub(super) fn remove(files: &[PathBuf]) {
    for f in files {
        if let Err(e) = fs::remove_file(f) {
            tracing::warn!(file = %f.display(), error = %e, "pprof exporter: cannot remove a staged batch; its window may be written again");
        }
    }
}
