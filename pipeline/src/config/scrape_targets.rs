//! Targets a scraping receiver (`pprof`) reads: static ones from its
//! config, and files listing them as Prometheus' `file_sd` does, read again
//! when their modification time or length changes. Here, apart from the
//! receiver, so that the file parser is fuzzed without the receivers'
//! dependencies.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Deserialize;

/// A target file larger than this is refused (a list of a few thousand
/// targets is a few hundred KiB).
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// Targets one file may list.
pub const MAX_TARGETS_PER_FILE: usize = 10_000;

/// One endpoint serving `net/http/pprof`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: String,
    /// As written in the URL (`[::1]` for IPv6).
    pub host: String,
    pub port: u16,
    /// The path of the target's URL, when it names one: used instead of
    /// the receiver's `path_prefix`.
    pub path: Option<String>,
    pub labels: BTreeMap<String, String>,
}

impl Target {
    /// `host:port` (http) or `scheme://host[:port][/prefix]`, with labels.
    pub fn parse(s: &str, labels: &BTreeMap<String, String>) -> Result<Target, String> {
        let s = s.trim();
        let with_scheme = if s.contains("://") {
            s.to_owned()
        } else {
            format!("http://{s}")
        };
        let url = url::Url::parse(&with_scheme).map_err(|e| format!("target {s:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "target {s:?}: the scheme must be http or https, not {:?}",
                url.scheme()
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "target {s:?}: a query or fragment is not allowed (each profile has its own)"
            ));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("target {s:?}: no host"))?
            .to_owned();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("target {s:?}: no port"))?;
        let path = Some(url.path().trim_end_matches('/'))
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        Ok(Target {
            scheme: url.scheme().to_owned(),
            host,
            port,
            path,
            labels: labels.clone(),
        })
    }

    /// `host:port`, Prometheus' `instance`.
    pub fn instance(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The URL of `path` (after the target's own path, else `prefix`).
    pub fn url(&self, prefix: &str, path: &str) -> String {
        let prefix = self.path.as_deref().unwrap_or(prefix).trim_end_matches('/');
        format!("{}://{}{}/{}", self.scheme, self.instance(), prefix, path)
    }

    /// What tells two targets apart (one scrape at a time for each).
    pub fn key(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme,
            self.instance(),
            self.path.as_deref().unwrap_or("")
        )
    }
}

/// A label key: letters, digits, `_` and `.`, not starting with a digit.
pub fn check_label(k: &str) -> Result<(), String> {
    let ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "label {k:?}: a key is letters, digits, '_' and '.', not starting with a digit"
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// A target file's text, YAML or JSON (a YAML document): a list of groups
/// of targets sharing labels. Labels starting with `__` are Prometheus'
/// own and left out. The error names the group and target at fault.
pub fn parse_file(text: &[u8]) -> Result<Vec<Target>, String> {
    let groups: Vec<Group> = serde_yaml_ng::from_slice(text).map_err(|e| {
        format!("not a list of {{targets: [...], labels: {{...}}}} (YAML or JSON): {e}")
    })?;
    let mut out = Vec::new();
    for (g, group) in groups.into_iter().enumerate() {
        let mut labels = BTreeMap::new();
        for (k, v) in group.labels {
            if k.starts_with("__") {
                continue;
            }
            check_label(&k).map_err(|e| format!("[{g}].labels: {e}"))?;
            labels.insert(k, v);
        }
        for (i, t) in group.targets.iter().enumerate() {
            if out.len() == MAX_TARGETS_PER_FILE {
                return Err(format!(
                    "more than {MAX_TARGETS_PER_FILE} targets: split the list"
                ));
            }
            out.push(Target::parse(t, &labels).map_err(|e| format!("[{g}].targets[{i}]: {e}"))?);
        }
    }
    Ok(out)
}

/// What tells a file's versions apart.
type Stamp = (SystemTime, u64);

struct Watched {
    path: PathBuf,
    /// Of the version read, or last seen broken; `None`: not seen yet or
    /// absent.
    stamp: Option<Stamp>,
    targets: Vec<Target>,
    /// Whether its absence was told since it was last read.
    told_missing: bool,
}

/// The target files, read again when they change.
pub struct TargetFiles {
    files: Vec<Watched>,
}

/// What a refresh found wrong with one file.
#[derive(Debug)]
pub struct FileError {
    pub path: PathBuf,
    pub message: String,
}

impl TargetFiles {
    pub fn new(paths: &[String]) -> Self {
        Self {
            files: paths
                .iter()
                .map(|p| Watched {
                    path: PathBuf::from(p),
                    stamp: None,
                    targets: Vec::new(),
                    told_missing: false,
                })
                .collect(),
        }
    }

    /// Reads the files that changed since the last call. A file that
    /// disappeared lists no target; one that cannot be read or parsed
    /// keeps the targets of its last good version. Each problem is
    /// returned once per version of the file.
    pub fn refresh(&mut self) -> Vec<FileError> {
        let mut errors = Vec::new();
        for w in &mut self.files {
            let err = |message: String| FileError {
                path: w.path.clone(),
                message,
            };
            let meta = match std::fs::metadata(&w.path) {
                Ok(m) => m,
                Err(e) => {
                    // Told once each time the file goes away (or is not
                    // there at the start); its targets go with it.
                    if w.stamp.take().is_some() || !w.told_missing {
                        errors.push(err(format!(
                            "cannot be read ({e}): it lists no target until it can"
                        )));
                    }
                    w.told_missing = true;
                    w.targets.clear();
                    continue;
                }
            };
            let stamp = (
                meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                meta.len(),
            );
            if w.stamp == Some(stamp) {
                continue;
            }
            w.stamp = Some(stamp);
            w.told_missing = false;
            if meta.len() > MAX_FILE_BYTES {
                errors.push(err(format!(
                    "is {} bytes, more than {MAX_FILE_BYTES}: its last good targets are kept",
                    meta.len()
                )));
                continue;
            }
            match std::fs::read(&w.path)
                .map_err(|e| format!("cannot be read: {e}"))
                .and_then(|text| parse_file(&text))
            {
                Ok(t) => w.targets = t,
                Err(e) => errors.push(err(format!("{e}: its last good targets are kept"))),
            }
        }
        errors
    }

    /// The targets of every file, in order.
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.files.iter().flat_map(|w| &w.targets)
    }
}
