//! Atomic file writes and what a failed one means.
//!
//! A file is written under a temporary name (`.profcol-<uuid>.tmp`, which no
//! `file_name` template can match), fsynced, renamed to its final name and
//! the directory fsynced: a reader, or the machine after a crash, sees the
//! whole file or none of it. Temporary files of a crashed process are
//! removed when the exporter starts.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use profcol_pipeline::component::ExportError;

pub(super) const TEMP_PREFIX: &str = ".profcol-";
pub(super) const TEMP_SUFFIX: &str = ".tmp";

/// Whether a failed file operation is worth retrying.
///
/// Retried: a full disk or quota (space may be freed, old files rotate
/// out), I/O errors and busy or stale (network) file systems, and anything
/// unrecognised, since `retry_on_failure` bounds the time spent anyway.
/// Not retried: permission and read-only errors, a path that is not a
/// directory, a name the file system refuses: they need someone to change
/// the config or the machine, and retrying would only hold up the queue.
pub fn is_retryable(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    match e.kind() {
        PermissionDenied | ReadOnlyFilesystem | NotADirectory | IsADirectory | InvalidFilename
        | InvalidInput | Unsupported | AlreadyExists => false,
        StorageFull
        | QuotaExceeded
        | Interrupted
        | WouldBlock
        | TimedOut
        | ResourceBusy
        | StaleNetworkFileHandle => true,
        _ => true,
    }
}

/// An [`ExportError`] naming what was being done, where, and what the OS
/// said, with a hint for the errors users most often hit.
pub(super) fn export_error(action: &str, path: &Path, e: &io::Error) -> ExportError {
    let hint = match e.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "; free space or lower max_total_size_mib / max_files, will retry"
        }
        io::ErrorKind::PermissionDenied => "; the collector's user cannot write there",
        io::ErrorKind::ReadOnlyFilesystem => "; the file system is read-only",
        _ => "",
    };
    let message = format!("pprof exporter: {action} {}: {e}{hint}", path.display());
    if is_retryable(e) {
        ExportError::retryable(message)
    } else {
        ExportError::permanent(message)
    }
}

/// Makes sure `dir` is a directory, creating it when allowed.
pub(super) fn ensure_directory(dir: &Path, create: bool) -> Result<(), ExportError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(ExportError::permanent(format!(
            "pprof exporter: directory {} exists but is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound && !create => {
            Err(ExportError::permanent(format!(
                "pprof exporter: directory {} does not exist and create_directory is false",
                dir.display()
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|e| export_error("creating directory", dir, &e))
        }
        Err(e) => Err(export_error("checking directory", dir, &e)),
    }
}

/// What [`ensure_directory`] and the clean-up at start-up would refuse,
/// found without creating anything: `dir` exists but is not a directory or
/// cannot be read, is missing while `create` is false, or cannot be looked
/// at (a parent that is a file, say).
pub(super) fn check_directory(dir: &Path, create: bool) -> Result<(), String> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => fs::read_dir(dir)
            .map(drop)
            .map_err(|e| format!("cannot read {}: {e}", dir.display())),
        Ok(_) => Err(format!("{} exists but is not a directory", dir.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(format!(
            "{} does not exist and create_directory is false",
            dir.display()
        )),
        Err(e) => Err(format!("cannot use {}: {e}", dir.display())),
    }
}

/// A written, fsynced file under its temporary name; removed on drop unless
/// published.
pub(super) struct Staged {
    pub path: PathBuf,
    pub size: u64,
    file: Option<File>,
}

impl Staged {
    /// Creates a new temporary file in `dir`, lets `write` fill it, fsyncs it.
    pub(super) fn write(
        dir: &Path,
        write: impl FnOnce(File) -> Result<File, ExportError>,
    ) -> Result<Self, ExportError> {
        let path = dir.join(format!(
            "{TEMP_PREFIX}{}{TEMP_SUFFIX}",
            uuid::Uuid::new_v4().simple()
        ));
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| export_error("creating file in", dir, &e))?;
        // From here on, dropping `staged` removes the temporary file.
        let mut staged = Self {
            path,
            size: 0,
            file: None,
        };
        let file = write(file)?;
        file.sync_all()
            .map_err(|e| export_error("syncing", &staged.path, &e))?;
        staged.size = file
            .metadata()
            .map_err(|e| export_error("reading", &staged.path, &e))?
            .len();
        staged.file = Some(file);
        Ok(staged)
    }

    /// Renames the file to `target` unless that name is taken (`Ok(false)`).
    /// The caller serialises publishing, so the check cannot race another
    /// write of this exporter.
    pub(super) fn publish(&self, target: &Path) -> Result<bool, ExportError> {
        match fs::symlink_metadata(target) {
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(export_error("checking", target, &e)),
        }
        // Retention orders files by modification time. The kernel stamps
        // writes with a clock that ticks every few milliseconds; stamping
        // the precise time here, in publishing order, keeps files written
        // in quick succession in the order they appeared.
        if let Some(f) = &self.file {
            f.set_modified(std::time::SystemTime::now())
                .map_err(|e| export_error("stamping", &self.path, &e))?;
        }
        fs::rename(&self.path, target).map_err(|e| export_error("renaming into", target, &e))?;
        Ok(true)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Gone already once published; otherwise nothing half-done stays.
        let _ = fs::remove_file(&self.path);
    }
}

/// Makes renames in `dir` durable.
pub(super) fn sync_directory(dir: &Path) -> Result<(), ExportError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| export_error("syncing directory", dir, &e))
}

/// Removes temporary files a crashed writer left in `dir`; returns how many.
pub(super) fn remove_stale_temp_files(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(TEMP_PREFIX)
            && name.ends_with(TEMP_SUFFIX)
            && entry.file_type()?.is_file()
        {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}
