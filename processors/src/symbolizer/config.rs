//! The `symbolizer` section. profcol's own processor (the Collector has
//! none); keys follow the Collector's naming (`timeout`, `*_directories`)
//! and debuginfod's (`urls`, its client's `DEBUGINFOD_*` settings).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SymbolizerConfig {
    /// Where debug information is looked for, in this order.
    pub sources: Vec<SourceKind>,
    /// Directories (and their subtrees) whose files a mapping may name and
    /// profcol may open. Empty: mapping file names are never opened.
    pub allow_mapping_paths: Vec<String>,
    /// Trees in the `/usr/lib/debug` layout: `.build-id/xx/rest.debug`,
    /// and `<dir>/<path of the binary>/<debuglink>` for `.gnu_debuglink`.
    pub debug_directories: Vec<String>,
    pub debuginfod: DebuginfodConfig,
    /// How long a batch waits for what is not cached yet; the rest passes
    /// unsymbolized and is resolved for later batches.
    pub timeout: Duration,
    /// Threads loading debug files and resolving addresses.
    pub workers: usize,
    /// Larger debug files (local or downloaded) are refused.
    pub max_file_size_mib: u64,
    /// Resolved (build id, address) results kept.
    pub cache_entries: usize,
    /// Parsed debug files kept in memory, in MiB of their sections.
    pub max_debug_info_mib: u64,
    /// How long a binary without debug information is not looked for again.
    pub negative_cache_ttl: Duration,
    /// Symbolize locations without `profile.frame.type` whose mapping has
    /// a GNU build id (pprof-converted and other producers): their
    /// addresses are process addresses.
    pub untyped_locations: bool,
    /// Name kernel frames that come as addresses by the host's kallsyms.
    pub kernel_symbols: bool,
    /// Where the host's kallsyms is (a container mounts the host's
    /// `/proc` elsewhere).
    pub kallsyms_path: String,
    /// Look for a mapping's file in the processes its samples came from
    /// (`process.pid`): the path in `/proc/<pid>/maps`, opened through
    /// `/proc/<pid>/root` (a container's own files). Needs the host's PID
    /// namespace.
    pub process_files: bool,
    /// The host's `/proc` as profcol sees it.
    pub proc_path: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// The file the mapping names, inside `allow_mapping_paths`.
    Mapping,
    DebugDirectories,
    Debuglink,
    Debuginfod,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebuginfodConfig {
    /// Server base URLs, tried in order (`DEBUGINFOD_URLS`).
    pub urls: Vec<String>,
    /// Per request, body included (`DEBUGINFOD_TIMEOUT`).
    pub timeout: Duration,
    /// Requests in flight at once, over all servers.
    pub max_concurrency: usize,
    /// Further attempts after a connection error or a 5xx.
    pub retries: u32,
    /// Downloaded files; empty: `<temp dir>/profcol-debuginfod`.
    pub cache_directory: String,
    /// The cache directory's size bound: least recently used files go.
    pub max_cache_size_mib: u64,
}

impl Default for SymbolizerConfig {
    fn default() -> Self {
        Self {
            sources: vec![
                SourceKind::Mapping,
                SourceKind::DebugDirectories,
                SourceKind::Debuglink,
                SourceKind::Debuginfod,
            ],
            allow_mapping_paths: Vec::new(),
            debug_directories: vec!["/usr/lib/debug".into()],
            debuginfod: DebuginfodConfig::default(),
            timeout: Duration(std::time::Duration::from_millis(200)),
            workers: 2,
            max_file_size_mib: 1024,
            cache_entries: 200_000,
            max_debug_info_mib: 512,
            negative_cache_ttl: Duration::from_secs(600),
            untyped_locations: true,
            kernel_symbols: false,
            kallsyms_path: "/proc/kallsyms".into(),
            process_files: false,
            proc_path: "/proc".into(),
        }
    }
}

impl Default for DebuginfodConfig {
    fn default() -> Self {
        Self {
            urls: Vec::new(),
            timeout: Duration::from_secs(30),
            max_concurrency: 4,
            retries: 2,
            cache_directory: String::new(),
            max_cache_size_mib: 2048,
        }
    }
}

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sources: Vec<SourceKind>,
    /// Canonical directories.
    pub allow_mapping_paths: Vec<PathBuf>,
    pub debug_directories: Vec<PathBuf>,
    pub debuginfod_urls: Vec<String>,
    pub debuginfod_timeout: std::time::Duration,
    pub debuginfod_concurrency: usize,
    pub debuginfod_retries: u32,
    pub cache_directory: PathBuf,
    pub max_cache_bytes: u64,
    pub timeout: std::time::Duration,
    pub workers: usize,
    pub max_file_bytes: u64,
    pub cache_entries: usize,
    pub max_debug_info_bytes: usize,
    pub negative_ttl: std::time::Duration,
    pub untyped_locations: bool,
    /// With `kernel_symbols`.
    pub kallsyms: Option<PathBuf>,
    /// With `process_files`: the host's `/proc`.
    pub proc: Option<PathBuf>,
}

const MIB: u64 = 1 << 20;

impl SymbolizerConfig {
    pub fn compile(&self, cfg: &ComponentConfig) -> Result<Plan, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let mut seen = Vec::new();
        for (i, s) in self.sources.iter().enumerate() {
            if seen.contains(s) {
                errs.push(cfg.key_path(&format!("sources::{i}")), "listed twice");
            }
            seen.push(*s);
        }
        let allow = dirs(
            &self.allow_mapping_paths,
            "allow_mapping_paths",
            cfg,
            &mut errs,
        );
        for (i, d) in allow.iter().enumerate() {
            if d == std::path::Path::new("/") {
                errs.push(
                    cfg.key_path(&format!("allow_mapping_paths::{i}")),
                    "`/` would let a profile name any file on the host; list the directories binaries are in",
                );
            }
        }
        for (i, d) in self.debug_directories.iter().enumerate() {
            if !d.starts_with('/') {
                errs.push(
                    cfg.key_path(&format!("debug_directories::{i}")),
                    format!("must be an absolute path, got {d:?}"),
                );
            }
        }
        for (i, u) in self.debuginfod.urls.iter().enumerate() {
            match reqwest::Url::parse(u) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                Ok(url) => errs.push(
                    cfg.key_path(&format!("debuginfod::urls::{i}")),
                    format!("scheme must be http or https, got {:?}", url.scheme()),
                ),
                Err(e) => errs.push(
                    cfg.key_path(&format!("debuginfod::urls::{i}")),
                    format!("not a URL: {e}"),
                ),
            }
        }
        let positive = [
            ("workers", self.workers as u64),
            ("max_file_size_mib", self.max_file_size_mib),
            ("cache_entries", self.cache_entries as u64),
            ("max_debug_info_mib", self.max_debug_info_mib),
            (
                "debuginfod::max_concurrency",
                self.debuginfod.max_concurrency as u64,
            ),
            (
                "debuginfod::max_cache_size_mib",
                self.debuginfod.max_cache_size_mib,
            ),
        ];
        for (key, v) in positive {
            if v == 0 {
                errs.push(cfg.key_path(key), "must be at least 1");
            }
        }
        if self.workers > 64 {
            errs.push(cfg.key_path("workers"), "must be at most 64");
        }
        for (key, path) in [
            ("kallsyms_path", &self.kallsyms_path),
            ("proc_path", &self.proc_path),
        ] {
            if !path.starts_with('/') {
                errs.push(
                    cfg.key_path(key),
                    format!("must be an absolute path, got {path:?}"),
                );
            }
        }
        if self.debuginfod.timeout.0.is_zero() {
            errs.push(cfg.key_path("debuginfod::timeout"), "must be positive");
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let cache_directory = if self.debuginfod.cache_directory.is_empty() {
            std::env::temp_dir().join("profcol-debuginfod")
        } else {
            PathBuf::from(&self.debuginfod.cache_directory)
        };
        Ok(Plan {
            sources: self.sources.clone(),
            allow_mapping_paths: allow,
            debug_directories: self.debug_directories.iter().map(PathBuf::from).collect(),
            debuginfod_urls: self
                .debuginfod
                .urls
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            debuginfod_timeout: self.debuginfod.timeout.0,
            debuginfod_concurrency: self.debuginfod.max_concurrency,
            debuginfod_retries: self.debuginfod.retries,
            cache_directory,
            max_cache_bytes: self.debuginfod.max_cache_size_mib.saturating_mul(MIB),
            timeout: self.timeout.0,
            workers: self.workers,
            max_file_bytes: self.max_file_size_mib.saturating_mul(MIB),
            cache_entries: self.cache_entries,
            max_debug_info_bytes: usize::try_from(self.max_debug_info_mib.saturating_mul(MIB))
                .unwrap_or(usize::MAX),
            negative_ttl: self.negative_cache_ttl.0,
            untyped_locations: self.untyped_locations,
            kallsyms: self
                .kernel_symbols
                .then(|| PathBuf::from(&self.kallsyms_path)),
            proc: self.process_files.then(|| PathBuf::from(&self.proc_path)),
        })
    }
}

/// Absolute directories, canonical when they exist (a symlinked prefix
/// must not let `..` or a link escape the check).
fn dirs(
    list: &[String],
    key: &str,
    cfg: &ComponentConfig,
    errs: &mut ConfigErrors,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, d) in list.iter().enumerate() {
        if !d.starts_with('/') {
            errs.push(
                cfg.key_path(&format!("{key}::{i}")),
                format!("must be an absolute path, got {d:?}"),
            );
            continue;
        }
        out.push(std::fs::canonicalize(d).unwrap_or_else(|_| PathBuf::from(d)));
    }
    out
}
