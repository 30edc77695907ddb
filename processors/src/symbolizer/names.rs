//! Files under `allow_mapping_paths` by file name. The eBPF profiler names
//! a mapping's file by its base name alone (`libc.so.6`, `app`), so the
//! file is found by that name within the allowed directories and then
//! proven by its build id. One walk builds the index; a name it lacks
//! walks again once the index is older than [`RESCAN`] (a binary deployed
//! since), so a name never found costs a walk a minute at most.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How old the index may be before a name it lacks walks again.
pub(super) const RESCAN: Duration = Duration::from_secs(60);

/// Files indexed at most; the walk stops there (logged once per walk).
pub(super) const MAX_FILES: usize = 200_000;

/// Kernel-made trees under `/` hold no binaries and never end.
const SKIPPED: &[&str] = &["/proc", "/sys", "/dev"];

#[derive(Default)]
pub(super) struct Names {
    by_name: HashMap<OsString, Vec<PathBuf>>,
    built: Option<Instant>,
    bytes: usize,
}

impl Names {
    /// Paths of the regular files named `name` under `roots` (canonical
    /// directories), walking them first if the index is missing `name`
    /// and old enough.
    pub(super) fn find(&mut self, roots: &[PathBuf], name: &str, now: Instant) -> Vec<PathBuf> {
        let stale = self
            .built
            .is_none_or(|t| now.saturating_duration_since(t) >= RESCAN);
        if !self.by_name.contains_key(std::ffi::OsStr::new(name)) && stale {
            self.rebuild(roots, now);
        }
        self.by_name
            .get(std::ffi::OsStr::new(name))
            .cloned()
            .unwrap_or_default()
    }

    /// Bytes the index holds, for the memory budget.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    fn rebuild(&mut self, roots: &[PathBuf], now: Instant) {
        self.by_name.clear();
        self.bytes = 0;
        self.built = Some(now);
        let mut files = 0usize;
        let mut dirs: Vec<PathBuf> = roots.to_vec();
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                // Not followed: a symlinked directory would loop or leave
                // the allowed tree, and the kernel names a mapped file by
                // its own name, not a link's.
                let Ok(kind) = e.file_type() else { continue };
                let path = e.path();
                if kind.is_dir() {
                    if !SKIPPED.iter().any(|s| path == Path::new(s)) {
                        dirs.push(path);
                    }
                } else if kind.is_file() {
                    if files == MAX_FILES {
                        tracing::warn!(
                            files,
                            "symbolizer: allow_mapping_paths hold more files than are indexed by name; list narrower directories"
                        );
                        return;
                    }
                    files += 1;
                    let name = e.file_name();
                    self.bytes += path.as_os_str().len() + name.len() + 64;
                    self.by_name.entry(name).or_default().push(path);
                }
            }
        }
    }
}
