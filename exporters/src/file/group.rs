//! `group_by`: one file per value of a resource attribute, the value put in
//! place of the `*` in `path` (kept below the part before the `*`, as the
//! Collector sanitizes it), at most `max_open_files` open at once: opening
//! one more closes the least recently used (flushed first).
//!
//! Unlike the Collector, a file closed that way and opened again in the
//! same run is appended to, not truncated: the Collector's reopen with
//! `append: false` throws away what the file held.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::PathBuf;

use super::config::Rotation;
use super::sink::Sink;

pub(super) struct Groups {
    prefix: String,
    suffix: String,
    max_open: usize,
    append: bool,
    rotation: Option<Rotation>,
    /// Open files and when each was last used.
    open: HashMap<PathBuf, (Sink, u64)>,
    by_use: BTreeMap<u64, PathBuf>,
    tick: u64,
    /// Files opened in this run: opened again, they are appended to.
    opened: HashSet<PathBuf>,
}

impl Groups {
    /// `path` holds exactly one `*`, not first (checked by the config).
    pub(super) fn new(
        path: &str,
        max_open: usize,
        append: bool,
        rotation: Option<Rotation>,
    ) -> Self {
        let (prefix, suffix) = path.split_once('*').unwrap_or((path, ""));
        Self {
            prefix: clean_prefix(prefix),
            suffix: suffix.to_owned(),
            max_open: max_open.max(1),
            append,
            rotation,
            open: HashMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
            opened: HashSet::new(),
        }
    }

    /// The file for `segment`, opened if need be; else its path and why
    /// not.
    pub(super) fn sink(&mut self, segment: &str) -> Result<&mut Sink, (PathBuf, io::Error)> {
        let path = PathBuf::from(full_path(&self.prefix, segment, &self.suffix));
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, used)) = self.open.get_mut(&path) {
            let last = std::mem::replace(used, tick);
            self.by_use.remove(&last);
        } else {
            while self.open.len() >= self.max_open {
                self.close_least_recent()?;
            }
            let append = self.append || self.opened.contains(&path);
            let sink = match Sink::open(&path, append, self.rotation.as_ref()) {
                Ok(sink) => sink,
                Err(e) => return Err((path, e)),
            };
            self.opened.insert(path.clone());
            self.open.insert(path.clone(), (sink, tick));
        }
        self.by_use.insert(tick, path.clone());
        Ok(&mut self.open.get_mut(&path).expect("present").0)
    }

    /// Closes the least recently used file. When its buffer cannot be
    /// written it stays open (nothing accepted is dropped) and the error
    /// is returned.
    fn close_least_recent(&mut self) -> Result<(), (PathBuf, io::Error)> {
        let Some((&tick, path)) = self.by_use.iter().next() else {
            return Ok(());
        };
        let path = path.clone();
        let (sink, _) = self.open.get_mut(&path).expect("in both maps");
        if let Err(e) = sink.flush() {
            return Err((path, e));
        }
        self.by_use.remove(&tick);
        let (sink, _) = self.open.remove(&path).expect("in both maps");
        // Flushed above: closing has nothing left to lose.
        sink.close().map_err(|e| (path, e))
    }

    /// Every open file.
    pub(super) fn sinks(&mut self) -> impl Iterator<Item = &mut Sink> {
        self.open.values_mut().map(|(s, _)| s)
    }

    #[cfg(test)]
    pub(super) fn open_files(&self) -> usize {
        self.open.len()
    }

    /// Closes every file; the ones whose buffer could not be written, with
    /// the error and the bytes lost.
    pub(super) fn close_all(&mut self) -> Vec<(PathBuf, io::Error, usize)> {
        self.by_use.clear();
        let mut failed = Vec::new();
        for (path, (sink, _)) in self.open.drain() {
            let pending = sink.buffered();
            if let Err(e) = sink.close() {
                failed.push((path, e, pending));
            }
        }
        failed
    }
}

/// Go's `path.Clean` of the part before the `*`, keeping a trailing `/`.
fn clean_prefix(prefix: &str) -> String {
    let cleaned = clean(prefix);
    if prefix.ends_with('/') && !cleaned.ends_with('/') {
        cleaned + "/"
    } else {
        cleaned
    }
}

/// The Collector's `fullPath`: the segment in place of the `*`, and a path
/// that would leave the prefix put back under it.
pub(super) fn full_path(prefix: &str, segment: &str, suffix: &str) -> String {
    let segment = if let Some(rest) = segment.strip_prefix("./") {
        &segment[segment.len() - rest.len() - 1..]
    } else if let Some(rest) = segment.strip_prefix("../") {
        &segment[segment.len() - rest.len() - 1..]
    } else {
        segment
    };
    let full = clean(&format!("{prefix}{segment}{suffix}"));
    if full.starts_with(prefix) {
        return full;
    }
    let rooted = clean(&format!("/{segment}{suffix}"));
    clean(&format!("{prefix}/{rooted}"))
}

/// Go's `path.Clean`: lexical, `/`-separated.
pub(super) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}
