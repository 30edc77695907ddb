//! The debuginfod client: `GET <url>/buildid/<hex>/debuginfo`, then
//! `/executable`, into an on-disk cache bounded in size (least recently
//! used files go first; a hit refreshes the file's mtime). A download is
//! bounded in time (`timeout`, body included: a never-ending answer is cut)
//! and in size (`max_file_size_mib`), written to a temporary file and only
//! renamed into the cache once complete, so a truncated answer never
//! poisons it. What no server has is remembered for `negative_cache_ttl`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::config::Plan;

/// Outcome of one fetch, for the metrics and the negative cache.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fetched {
    /// In the cache (downloaded now or before).
    File(PathBuf),
    /// Every server answered 404 (or refused the file).
    NotFound,
    /// A server failed (timeout, 5xx after retries, too large, truncated).
    Failed(String),
}

pub(super) struct Debuginfod {
    client: reqwest::Client,
    urls: Vec<String>,
    retries: u32,
    max_file_bytes: u64,
    dir: PathBuf,
    max_cache_bytes: u64,
    permits: tokio::sync::Semaphore,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Debuginfod {
    pub(super) fn new(plan: &Plan) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(plan.debuginfod_timeout)
            .connect_timeout(plan.debuginfod_timeout)
            .user_agent(concat!("profcol/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        // The workers are plain threads: each call blocks one on this
        // runtime's reactor, never the pipeline's.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("symbolizer-debuginfod")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            urls: plan.debuginfod_urls.clone(),
            retries: plan.debuginfod_retries,
            max_file_bytes: plan.max_file_bytes,
            dir: plan.cache_directory.clone(),
            max_cache_bytes: plan.max_cache_bytes,
            permits: tokio::sync::Semaphore::new(plan.debuginfod_concurrency),
            runtime: Some(runtime),
        })
    }

    fn cached(&self, hex: &str, kind: &str) -> PathBuf {
        self.dir.join(format!("{hex}.{kind}"))
    }

    /// The file of `hex` (a GNU build id, hex), from the cache or a server.
    pub(super) fn fetch(&self, hex: &str, kind: &str) -> Fetched {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Fetched::NotFound;
        }
        let path = self.cached(hex, kind);
        if path.is_file() {
            let _ = std::fs::File::options()
                .append(true)
                .open(&path)
                .and_then(|f| f.set_modified(SystemTime::now()));
            return Fetched::File(path);
        }
        let mut failure = None;
        for url in &self.urls {
            let url = format!("{url}/buildid/{hex}/{kind}");
            let Some(rt) = &self.runtime else { break };
            match rt.block_on(self.download(&url, &path)) {
                Ok(true) => {
                    self.evict();
                    return Fetched::File(path);
                }
                Ok(false) => {}
                Err(e) => failure = Some(format!("{url}: {e}")),
            }
        }
        match failure {
            Some(e) => Fetched::Failed(e),
            None => Fetched::NotFound,
        }
    }

    /// `Ok(false)`: the server does not have it.
    async fn download(&self, url: &str, dest: &Path) -> Result<bool, String> {
        let _permit = self.permits.acquire().await.map_err(|e| e.to_string())?;
        let mut attempt = 0;
        loop {
            match self.try_download(url, dest).await {
                Err((e, true)) if attempt < self.retries => {
                    attempt += 1;
                    tracing::debug!(url, error = %e, attempt, "debuginfod retry");
                    tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                }
                Err((e, _)) => return Err(e),
                Ok(found) => return Ok(found),
            }
        }
    }

    /// Errors say whether a retry may help.
    async fn try_download(&self, url: &str, dest: &Path) -> Result<bool, (String, bool)> {
        let mut resp = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| (e.to_string(), true))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(false);
        }
        if !status.is_success() {
            return Err((format!("HTTP {status}"), status.is_server_error()));
        }
        if resp
            .content_length()
            .is_some_and(|n| n > self.max_file_bytes)
        {
            return Err(("larger than max_file_size_mib".into(), false));
        }
        let expected = resp.content_length();
        std::fs::create_dir_all(&self.dir).map_err(|e| (e.to_string(), false))?;
        let tmp = dest.with_extension(format!("part{}", std::process::id()));
        let mut file = std::fs::File::create(&tmp).map_err(|e| (e.to_string(), false))?;
        let mut written = 0u64;
        let result = async {
            while let Some(chunk) = resp.chunk().await.map_err(|e| (e.to_string(), true))? {
                written += chunk.len() as u64;
                if written > self.max_file_bytes {
                    return Err(("larger than max_file_size_mib".into(), false));
                }
                file.write_all(&chunk).map_err(|e| (e.to_string(), false))?;
            }
            if expected.is_some_and(|n| n != written) {
                return Err((format!("truncated: {written} of {expected:?} bytes"), true));
            }
            Ok(())
        }
        .await;
        drop(file);
        match result {
            Ok(()) => {
                std::fs::rename(&tmp, dest).map_err(|e| (e.to_string(), false))?;
                Ok(true)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Removes the least recently used files until the cache fits.
    fn evict(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                let modified = m.modified().ok()?;
                m.is_file().then(|| (modified, m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_cache_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        // The processor may go on a pipeline's runtime thread, where a
        // blocking shutdown would panic.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Build ids no source had, until their TTL; bounded (oldest go first).
pub(super) struct NegativeCache {
    until: hashbrown::HashMap<String, Instant>,
    ttl: Duration,
    cap: usize,
}

impl NegativeCache {
    pub(super) fn new(ttl: Duration, cap: usize) -> Self {
        Self {
            until: hashbrown::HashMap::new(),
            ttl,
            cap,
        }
    }

    pub(super) fn contains(&mut self, key: &str, now: Instant) -> bool {
        match self.until.get(key) {
            Some(t) if *t > now => true,
            Some(_) => {
                self.until.remove(key);
                false
            }
            None => false,
        }
    }

    pub(super) fn insert(&mut self, key: String, now: Instant) {
        if self.until.len() >= self.cap {
            self.until.retain(|_, t| *t > now);
            if self.until.len() >= self.cap {
                if let Some(k) = self
                    .until
                    .iter()
                    .min_by_key(|(_, t)| **t)
                    .map(|(k, _)| k.clone())
                {
                    self.until.remove(&k);
                }
            }
        }
        self.until.insert(key, now + self.ttl);
    }

    pub(super) fn bytes(&self) -> usize {
        self.until.len() * 96
    }
}
