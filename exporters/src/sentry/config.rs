use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};
use profcol_sentry::MAX_CHUNK_DURATION_NS;

use crate::http_client::HttpTls;
use profcol_sentry::Dsn;

/// `exporters: sentry:`. Queue, retry and timeout keys have the
/// Collector's names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryExporterConfig {
    /// `http(s)://PUBLIC_KEY@host[:port][/path]/PROJECT_ID`.
    pub dsn: String,
    pub compression: Compression,
    /// Sentry platform for profiles whose data names none (no
    /// `sentry.platform`, `telemetry.sdk.language` or frame type); else `native`.
    pub platform: Option<String>,
    /// Replaces the environment of every chunk.
    pub environment: Option<String>,
    /// Replaces the release of every chunk.
    pub release: Option<String>,
    /// Longest time window of one chunk; at most 66 s (Relay's limit).
    pub max_chunk_duration: Duration,
    /// Most samples in one chunk; expansion of aggregated samples beyond
    /// it is thinned evenly and counted as dropped.
    pub max_samples_per_chunk: usize,
    /// Most chunks (requests to Sentry) one incoming batch may become; the
    /// chunks past it are dropped and counted (`max_chunks_per_request`).
    pub max_chunks_per_request: usize,
    /// Chunks per second to this DSN, for every exporter that sends to it;
    /// more wait (0: no limit).
    pub max_chunks_per_second: f64,
    /// How the Sentry server is trusted: `ca_file` (a self-hosted Sentry
    /// behind a private CA), `cert_file`/`key_file`, `insecure_skip_verify`.
    pub tls: HttpTls,
}

impl Default for SentryExporterConfig {
    fn default() -> Self {
        Self {
            dsn: String::new(),
            compression: Compression::Gzip,
            platform: None,
            environment: None,
            release: None,
            max_chunk_duration: Duration::from_secs(60),
            max_samples_per_chunk: 100_000,
            max_chunks_per_request: 1000,
            max_chunks_per_second: 100.0,
            tls: HttpTls::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
    /// `none` or an empty string, as in the Collector.
    #[serde(alias = "")]
    None,
}

impl SentryExporterConfig {
    /// Checks every key, reporting all problems at once; returns the parsed DSN.
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<Dsn, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let dsn = if self.dsn.is_empty() {
            errs.push(cfg.key_path("dsn"), "is required");
            None
        } else {
            Dsn::parse(&self.dsn)
                .map_err(|e| errs.push(cfg.key_path("dsn"), e))
                .ok()
        };
        let window = self.max_chunk_duration.get();
        if window.is_zero() || window.as_nanos() > u128::from(MAX_CHUNK_DURATION_NS) {
            errs.push(
                cfg.key_path("max_chunk_duration"),
                "must be greater than 0 and at most 66s (Relay refuses longer chunks)",
            );
        }
        if self.max_samples_per_chunk == 0 {
            errs.push(
                cfg.key_path("max_samples_per_chunk"),
                "must be greater than 0",
            );
        }
        if self.max_chunks_per_request == 0 {
            errs.push(
                cfg.key_path("max_chunks_per_request"),
                "must be greater than 0",
            );
        }
        if !(self.max_chunks_per_second.is_finite() && self.max_chunks_per_second >= 0.0) {
            errs.push(
                cfg.key_path("max_chunks_per_second"),
                format!(
                    "must be 0 (no limit) or more, got {}",
                    self.max_chunks_per_second
                ),
            );
        }
        self.tls.validate(&cfg.key_path("tls"), &mut errs);
        if let Some(p) = &self.platform {
            if let Err(e) = check_platform(p) {
                errs.push(cfg.key_path("platform"), e);
            }
        }
        if let Some(e) = &self.environment {
            if let Err(m) = check_environment(e) {
                errs.push(cfg.key_path("environment"), m);
            }
        }
        if let Some(r) = &self.release {
            if let Err(m) = check_release(r) {
                errs.push(cfg.key_path("release"), m);
            }
        }
        match dsn {
            Some(d) if errs.is_empty() => Ok(d),
            _ => Err(errs),
        }
    }
}

/// Sentry platform names are short lowercase identifiers (`python`, `node`).
fn check_platform(p: &str) -> Result<(), String> {
    if p.is_empty()
        || !p
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(format!(
            "{p:?} is not a Sentry platform (lowercase letters, digits and '-')"
        ));
    }
    if p == "android" {
        // Relay reads `android` chunks in another (Android trace) format.
        return Err("\"android\" chunks use another format; use \"java\"".into());
    }
    Ok(())
}

/// Sentry's rules for an environment name.
fn check_environment(e: &str) -> Result<(), String> {
    if e.is_empty() || e.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if e == "None" || e.contains(['\n', '\r', ' ', '/']) {
        return Err(format!(
            "{e:?} is not a valid Sentry environment (no spaces, newlines or '/', not \"None\")"
        ));
    }
    Ok(())
}

/// Sentry's rules for a release name.
fn check_release(r: &str) -> Result<(), String> {
    if r.is_empty() || r.len() > 200 {
        return Err("must be 1 to 200 characters".into());
    }
    if matches!(r, "." | ".." | " ") || r.contains(['\n', '\r', '\t', '/', '\\']) {
        return Err(format!(
            "{r:?} is not a valid Sentry release (no newlines, tabs or slashes)"
        ));
    }
    Ok(())
}
