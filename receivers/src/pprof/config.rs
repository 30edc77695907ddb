use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use profcol_exporters::http_client::{validate_headers, HttpTls};
use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use profcol_pipeline::config::scrape_targets::{self, Target};

/// `receivers: pprof:` — scrapes Go's `net/http/pprof` endpoints (or any
/// server answering the same paths with pprof) of every target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PprofReceiverConfig {
    /// How often every target is scraped (the contrib receiver's key).
    pub collection_interval: Duration,
    /// How long to wait before the first scrape (the contrib receiver's).
    pub initial_delay: Duration,
    /// The longest one scrape of one profile may take; 0: the interval.
    /// The CPU profile asks for `min(interval, timeout) - 1s` seconds.
    pub timeout: Duration,
    /// The job every target belongs to (`service.name`), as Prometheus'
    /// `job_name`; empty: the receiver's id.
    pub job: String,
    /// Static targets: `host:port` (http) or a URL with a scheme and an
    /// optional path prefix.
    pub targets: Vec<String>,
    /// Labels of the static targets (resource attributes).
    pub labels: BTreeMap<String, String>,
    /// Files listing targets as Prometheus' `file_sd` does (YAML or JSON:
    /// a list of `{targets: [...], labels: {...}}`), read again when they
    /// change.
    pub target_files: Vec<String>,
    /// The profiles scraped from every target.
    pub profiles: Vec<ProfileKind>,
    /// Where the pprof handlers are on a target without a path of its own.
    pub path_prefix: String,
    /// Largest response accepted, after decompression, in bytes; also the
    /// largest pprof once a gzip'd one is inflated.
    pub max_response_body_size: u64,
    /// Requests in flight at once, over every target.
    pub max_concurrent_scrapes: usize,
    /// Cumulative profiles (heap and allocs `alloc_*`, mutex, block) sent
    /// as their change since the previous scrape, as Alloy's `delta`;
    /// `false`: as the target answers, counted from its start.
    pub delta: bool,
    /// Sent with every scrape (`confighttp`'s client `headers`).
    pub headers: BTreeMap<String, String>,
    /// HTTPS to the targets: their CA, a client certificate
    /// (`confighttp`'s client `tls`, read as the `otlphttp` exporter reads it).
    pub tls: HttpTls,
    /// An extension whose credentials go with every scrape
    /// (`bearertokenauth`'s `Authorization` header).
    pub auth: Option<AuthConfig>,
}

/// The profiles `net/http/pprof` serves, by the name of their path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// `/profile?seconds=N`.
    Cpu,
    Heap,
    Allocs,
    Goroutine,
    Mutex,
    Block,
}

impl ProfileKind {
    pub const ALL: [ProfileKind; 6] = [
        Self::Cpu,
        Self::Heap,
        Self::Allocs,
        Self::Goroutine,
        Self::Mutex,
        Self::Block,
    ];

    /// The name in the config and the metrics' `scraper` label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Heap => "heap",
            Self::Allocs => "allocs",
            Self::Goroutine => "goroutine",
            Self::Mutex => "mutex",
            Self::Block => "block",
        }
    }

    /// The handler's path below the prefix, with its query.
    pub fn path(self, cpu_seconds: u64) -> String {
        match self {
            Self::Cpu => format!("profile?seconds={cpu_seconds}"),
            k => k.name().to_owned(),
        }
    }
}

impl Default for PprofReceiverConfig {
    fn default() -> Self {
        Self {
            collection_interval: Duration::from_secs(60),
            initial_delay: Duration::from_secs(1),
            timeout: Duration::from_secs(0),
            job: String::new(),
            targets: Vec::new(),
            labels: BTreeMap::new(),
            target_files: Vec::new(),
            profiles: ProfileKind::ALL.to_vec(),
            path_prefix: "/debug/pprof".into(),
            max_response_body_size: 64 << 20,
            max_concurrent_scrapes: 8,
            delta: true,
            headers: BTreeMap::new(),
            tls: HttpTls::default(),
            auth: None,
        }
    }
}

impl PprofReceiverConfig {
    /// The longest a scrape may take.
    pub fn timeout(&self) -> std::time::Duration {
        if self.timeout.0.is_zero() {
            self.collection_interval.0
        } else {
            self.timeout.0
        }
    }

    /// The seconds of CPU profile asked for: as much of the interval as
    /// the timeout leaves room for, one second kept for the answer.
    pub fn cpu_seconds(&self) -> u64 {
        let span = self.collection_interval.0.min(self.timeout());
        span.as_secs().saturating_sub(1).max(1)
    }

    /// Checks the keys; the static targets, parsed.
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<Vec<Target>, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if self.collection_interval.0 < std::time::Duration::from_secs(1) {
            errs.push(cfg.key_path("collection_interval"), "must be at least 1s");
        }
        if self.profiles.contains(&ProfileKind::Cpu)
            && self.timeout() < std::time::Duration::from_secs(2)
        {
            errs.push(
                cfg.key_path("timeout"),
                "must be at least 2s to scrape the cpu profile (1s of profile and 1s to answer)",
            );
        }
        if self.targets.is_empty() && self.target_files.is_empty() {
            errs.push(
                cfg.key_path("targets"),
                "no targets: list some in targets or target_files",
            );
        }
        if self.profiles.is_empty() {
            errs.push(cfg.key_path("profiles"), "lists no profile to scrape");
        }
        for (i, k) in self.profiles.iter().enumerate() {
            if self.profiles[..i].contains(k) {
                errs.push(
                    cfg.key_path(&format!("profiles::{i}")),
                    format!("{} is listed twice", k.name()),
                );
            }
        }
        if !self.path_prefix.starts_with('/') {
            errs.push(cfg.key_path("path_prefix"), "must start with '/'");
        }
        if self.max_response_body_size == 0 {
            errs.push(
                cfg.key_path("max_response_body_size"),
                "must be greater than 0",
            );
        }
        if self.max_concurrent_scrapes == 0 {
            errs.push(
                cfg.key_path("max_concurrent_scrapes"),
                "must be greater than 0",
            );
        }
        for k in self.labels.keys() {
            if let Err(e) = scrape_targets::check_label(k) {
                errs.push(cfg.key_path(&format!("labels::{k}")), e);
            }
        }
        let mut targets = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            match Target::parse(t, &self.labels) {
                Ok(t) => targets.push(t),
                Err(e) => errs.push(cfg.key_path(&format!("targets::{i}")), e),
            }
        }
        for (i, f) in self.target_files.iter().enumerate() {
            if f.is_empty() {
                errs.push(cfg.key_path(&format!("target_files::{i}")), "is empty");
            }
        }
        self.tls.validate(&cfg.key_path("tls"), &mut errs);
        validate_headers(&self.headers, cfg, &mut errs);
        errs.into_result(targets)
    }
}
