//! `rotation`: the file rotated by size, as the Collector's timberjack
//! (v1.4.7) does it. The file at `path` is always the current one; when a
//! record would take it past the size limit it is renamed
//! `<stem>-<time>-size<ext>` (`time` as `2006-01-02T15-04-05.000` in UTC or
//! local time, `ext` from the last `.` of the name) and a new one started.
//! After each rotation, and on the first write, backups beyond
//! `max_backups` (newest kept, by the time in their names) and older than
//! `max_days` are removed.
//!
//! Where timberjack would lose data, this does not: a record larger than
//! the limit goes alone into a file of its own instead of being refused,
//! and two rotations within one millisecond name the second a millisecond
//! later instead of overwriting the first.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Local, NaiveDateTime, TimeZone, Utc};

use super::config::Rotation;

const TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S%.3f";
/// Timberjack's file mode, which the Collector passes.
const FILE_MODE: u32 = 0o644;

pub(super) struct Rotator {
    path: PathBuf,
    max_bytes: u64,
    max_days: u64,
    max_backups: u64,
    localtime: bool,
    /// Opened on the first write, as timberjack does.
    file: Option<File>,
    size: u64,
    /// The time in the last backup's name: the next is later, so that
    /// names sort as the backups were made.
    last_backup: Option<DateTime<Utc>>,
}

impl Rotator {
    pub(super) fn new(path: PathBuf, rotation: &Rotation) -> Self {
        Self::with_max_bytes(path, rotation, rotation.max_bytes())
    }

    /// With a limit in bytes (tests rotate without writing megabytes).
    pub(super) fn with_max_bytes(path: PathBuf, rotation: &Rotation, max_bytes: u64) -> Self {
        Self {
            path,
            max_bytes: max_bytes.max(1),
            max_days: rotation.max_days,
            max_backups: rotation.max_backups,
            localtime: rotation.localtime,
            file: None,
            size: 0,
            last_backup: None,
        }
    }

    /// Writes `record` whole into one file: the current one, or a new one
    /// when it would take the current past the limit.
    pub(super) fn write(&mut self, record: &[u8]) -> io::Result<()> {
        let len = record.len() as u64;
        if self.file.is_none() {
            self.open_existing_or_new(len)?;
        } else if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate()?;
        }
        let file = self.file.as_mut().expect("opened above");
        if let Err(e) = file.write_all(record) {
            // Cut a half-written record off, so the next one does not
            // follow torn bytes.
            let _ = file.set_len(self.size);
            return Err(e);
        }
        self.size += len;
        Ok(())
    }

    pub(super) fn close(&mut self) {
        self.file = None;
    }

    /// Timberjack's first write: clean up, then append to the file when
    /// the record fits, else rotate it.
    fn open_existing_or_new(&mut self, len: u64) -> io::Result<()> {
        self.mill();
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.open_new(),
            Err(e) => Err(e),
            Ok(m) if m.len() > 0 && m.len() + len >= self.max_bytes => self.rotate(),
            Ok(m) => {
                let file = OpenOptions::new().append(true).open(&self.path)?;
                self.file = Some(file);
                self.size = m.len();
                Ok(())
            }
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        if self.path.exists() {
            let (backup, at) = self.free_backup_name(Utc::now());
            std::fs::rename(&self.path, &backup)?;
            self.last_backup = Some(at);
        }
        self.open_new()?;
        self.mill();
        Ok(())
    }

    fn open_new(&mut self) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut opts = OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, FILE_MODE);
        self.file = Some(opts.open(&self.path)?);
        self.size = 0;
        Ok(())
    }

    /// The backup name for a rotation at `now` and its time: a millisecond
    /// after the last backup's at least, and later still while a backup
    /// of that name exists.
    fn free_backup_name(&self, now: DateTime<Utc>) -> (PathBuf, DateTime<Utc>) {
        let ms = chrono::Duration::milliseconds(1);
        let mut t = match self.last_backup {
            Some(last) if last + ms > now => last + ms,
            _ => now,
        };
        loop {
            let name = backup_name(&self.path, &self.format_time(t), "size");
            if !name.exists() {
                return (name, t);
            }
            t += ms;
        }
    }

    fn format_time(&self, t: DateTime<Utc>) -> String {
        if self.localtime {
            t.with_timezone(&Local).format(TIME_FORMAT).to_string()
        } else {
            t.format(TIME_FORMAT).to_string()
        }
    }

    fn parse_time(&self, s: &str) -> Option<DateTime<Utc>> {
        let naive = NaiveDateTime::parse_from_str(s, TIME_FORMAT).ok()?;
        if self.localtime {
            Some(Local.from_local_datetime(&naive).earliest()?.to_utc())
        } else {
            Some(Utc.from_utc_datetime(&naive))
        }
    }

    /// Removes backups beyond `max_backups` and older than `max_days`;
    /// failures are logged, as timberjack prints them.
    fn mill(&self) {
        if self.max_backups == 0 && self.max_days == 0 {
            return;
        }
        let mut backups = match self.backups() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "file exporter: listing backups");
                return;
            }
        };
        // Newest first.
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        let cutoff = (self.max_days > 0)
            .then(|| Utc::now() - chrono::Duration::hours(24 * self.max_days.min(1 << 40) as i64));
        let mut kept_times = 0u64;
        let mut last = None;
        for (t, path) in backups {
            if last != Some(t) {
                kept_times += 1;
                last = Some(t);
            }
            let too_many = self.max_backups > 0 && kept_times > self.max_backups;
            let too_old = cutoff.is_some_and(|c| t < c);
            if too_many || too_old {
                if let Err(e) = std::fs::remove_file(&path) {
                    if e.kind() != io::ErrorKind::NotFound {
                        tracing::warn!(path = %path.display(), error = %e, "file exporter: removing an old backup");
                    }
                }
            }
        }
    }

    /// Backups of this file and the times in their names, with the
    /// `.gz`/`.zst` timberjack's own compression would add.
    fn backups(&self) -> io::Result<Vec<(DateTime<Utc>, PathBuf)>> {
        let (dir, stem, ext) = split_name(&self.path);
        let prefix = format!("{stem}-");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(middle) = name.strip_prefix(&prefix).and_then(|rest| {
                [ext.to_owned(), format!("{ext}.gz"), format!("{ext}.zst")]
                    .iter()
                    .find_map(|e| rest.strip_suffix(e.as_str()))
            }) else {
                continue;
            };
            // `<time>-<reason>`; the reason has no `-`.
            let Some((time, _reason)) = middle.rsplit_once('-') else {
                continue;
            };
            if let Some(t) = self.parse_time(time) {
                if entry.file_type()?.is_file() {
                    out.push((t, entry.path()));
                }
            }
        }
        Ok(out)
    }

    /// The Collector's start-up migration: backups lumberjack named
    /// `<stem>-<time><ext>` (before v0.150) get timberjack's `-size`, so
    /// that retention sees them.
    pub(super) fn migrate_legacy_backups(&self) -> io::Result<()> {
        let (dir, stem, ext) = split_name(&self.path);
        let prefix = format!("{stem}-");
        let entries = match std::fs::read_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            other => other?,
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(time) = name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(ext)) else {
                continue;
            };
            if self.parse_time(time).is_none() || !entry.file_type()?.is_file() {
                continue;
            }
            let target = backup_name(&self.path, time, "size");
            let result = if target.exists() {
                std::fs::remove_file(entry.path())
            } else {
                std::fs::rename(entry.path(), &target)
            };
            if let Err(e) = result {
                tracing::warn!(path = %entry.path().display(), error = %e, "file exporter: migrating a lumberjack backup");
            }
        }
        Ok(())
    }
}

/// The directory, the name before its extension, and the extension (from
/// the last `.`, as Go's `filepath.Ext`).
fn split_name(path: &Path) -> (&Path, &str, &str) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (stem, ext) = match name.rfind('.') {
        Some(i) => name.split_at(i),
        None => (name, ""),
    };
    (dir, stem, ext)
}

/// `<dir>/<stem>-<time>-<reason><ext>`.
pub(super) fn backup_name(path: &Path, time: &str, reason: &str) -> PathBuf {
    let (dir, stem, ext) = split_name(path);
    dir.join(format!("{stem}-{time}-{reason}{ext}"))
}
