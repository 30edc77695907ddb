//! `max_files` / `max_total_size_mib`: after each write, the oldest files
//! the template could have made are deleted until both limits hold. Other
//! files in the directory are never touched, and the newest file is always
//! kept, even if it alone is over the size limit.

use std::fs;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use super::file_name::FileNameTemplate;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Removed {
    pub files: u64,
    pub bytes: u64,
}

pub(super) struct Limits {
    pub max_files: usize,
    pub max_bytes: Option<u64>,
}

impl Limits {
    pub(super) fn is_unlimited(&self) -> bool {
        self.max_files == 0 && self.max_bytes.is_none()
    }
}

/// Deletes the oldest matching files of `dir` until `limits` hold. A file
/// that cannot be deleted is logged and skipped: retention must not fail an
/// export that already succeeded.
pub(super) fn enforce(
    dir: &Path,
    template: &FileNameTemplate,
    limits: &Limits,
) -> io::Result<Removed> {
    let mut removed = Removed::default();
    if limits.is_unlimited() {
        return Ok(removed);
    }
    let mut files: Vec<(SystemTime, String, u64)> = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !template.matches(&name) {
            continue;
        }
        // Gone meanwhile or unreadable: not ours to judge.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_file() {
            files.push((
                meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                name,
                meta.len(),
            ));
        }
    }
    // Oldest first; names break ties between files of one write.
    files.sort();
    let mut count = files.len();
    let mut total: u64 = files.iter().map(|f| f.2).sum();
    let over = |count: usize, total: u64| {
        (limits.max_files > 0 && count > limits.max_files)
            || limits.max_bytes.is_some_and(|max| total > max)
    };
    for (_, name, size) in &files[..files.len().saturating_sub(1)] {
        if !over(count, total) {
            break;
        }
        let path = dir.join(name);
        match fs::remove_file(&path) {
            Ok(()) => {
                count -= 1;
                total -= size;
                removed.files += 1;
                removed.bytes += size;
                tracing::debug!(file = %path.display(), bytes = size, "pprof exporter: retention removed file");
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                count -= 1;
                total -= size;
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "pprof exporter: cannot remove old file")
            }
        }
    }
    Ok(removed)
}
