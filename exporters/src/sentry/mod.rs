//! Exporter `sentry`: profiles as Sentry `profile_chunk`s (continuous
//! profiling, sample format v2), POSTed in envelopes to the project's
//! envelope endpoint, as the Sentry SDKs send them.
//!
//! - [`encode`]: OTLP -> chunks that pass Relay's rules -> one gzip'd
//!   envelope per chunk (on the blocking pool).
//! - [`client`]: the HTTP request and what each answer means.
//! - [`rate_limits`]: `X-Sentry-Rate-Limits` / `Retry-After`, per category.
//! - [`resume`]: what a retry of a part-delivered batch may skip.
//!
//! Outcomes: 2xx delivered; 429 retried once the limit has passed (no
//! request goes out meanwhile); 400 and 413 refuse that chunk for good
//! (counted as failed, the other chunks still go); other 4xx fail the rest
//! of the batch; 5xx and connection errors are retried with backoff, and
//! a retry resends only the chunks not yet delivered.
//!
//! Accounting: the exporter counts nothing itself. The attempt that settles
//! a batch returns what Sentry refused and what the conversion left out
//! (by reason) in its [`ExportOutcome`], and the runtime counts those and
//! the rest as sent; a batch that fails as a whole is counted whole.
//!
//! ```yaml
//! exporters:
//!   sentry:
//!     dsn: https://abc123@o1.ingest.sentry.io/4507
//!     platform: go
//!     environment: production
//! ```

pub mod client;
mod config;
pub mod encode;
#[cfg(any(test, feature = "testing"))]
pub mod mock;
mod pace;
pub mod rate_limits;
pub mod resume;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Progress, Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use client::Reply;
pub use config::{Compression, SentryExporterConfig};
pub use encode::{encode, EncodeOptions, Encoded, Envelope};
pub use profcol_sentry::Dsn;
pub use rate_limits::RateLimits;

use client::Client;
use rate_limits::{PROFILE_CHUNK, PROFILE_CHUNK_UI};
use resume::Resume;

pub struct SentryExporterFactory;

impl ExporterFactory for SentryExporterFactory {
    fn type_name(&self) -> &'static str {
        "sentry"
    }

    /// `timeout` bounds one export of a batch (all of its envelopes).
    fn default_settings(&self) -> Option<ExporterSettings> {
        Some(ExporterSettings::with_timeout(
            std::time::Duration::from_secs(30),
        ))
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (c, dsn) = cfg.decode_checked(|c: &SentryExporterConfig| c.validate(cfg))?;
        let exporter = SentryExporter::new(&c, dsn, settings.timeout, &cfg.path())?;
        Ok(Arc::new(exporter))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(SentryExporterFactory)
}

/// What the exporter did since it was created.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SentryStats {
    /// Envelopes Sentry accepted (2xx).
    pub envelopes_delivered: u64,
    /// Envelopes Sentry refused for good (4xx).
    pub envelopes_refused: u64,
    /// Request bytes of delivered envelopes (after compression).
    pub bytes_delivered: u64,
}

#[derive(Default)]
struct Counters {
    envelopes_delivered: AtomicU64,
    envelopes_refused: AtomicU64,
    bytes_delivered: AtomicU64,
}

pub struct SentryExporter {
    client: Client,
    opts: Arc<EncodeOptions>,
    limits: Mutex<RateLimits>,
    counters: Counters,
    /// `max_chunks_per_second`, shared per DSN.
    pace: Option<Arc<pace::Pace>>,
}

impl SentryExporter {
    /// `dsn` is `cfg.dsn` parsed (see [`SentryExporterConfig::validate`]);
    /// `section` the exporter's key path, where errors are reported.
    pub fn new(
        cfg: &SentryExporterConfig,
        dsn: Dsn,
        timeout: Duration,
        section: &str,
    ) -> Result<Self, ConfigErrors> {
        let tls_path = format!("{section}::tls");
        let client = Client::new(&dsn, cfg.compression, timeout, &cfg.tls, &tls_path)?;
        let opts = EncodeOptions {
            max_samples_per_chunk: cfg.max_samples_per_chunk,
            max_chunk_duration_ns: u64::try_from(cfg.max_chunk_duration.get().as_nanos())
                .unwrap_or(u64::MAX),
            max_chunks: cfg.max_chunks_per_request,
            compression: cfg.compression,
            dsn: Some(dsn.to_string()),
            platform: cfg.platform.clone(),
            environment: cfg.environment.clone(),
            release: cfg.release.clone(),
            // Made once per exporter, stable while it runs.
            instance_id: profcol_sentry::ids::random_uuid(),
        };
        let pace = pace::for_dsn(&dsn.to_string(), cfg.max_chunks_per_second);
        Ok(Self {
            pace,
            client,
            opts: Arc::new(opts),
            limits: Mutex::new(RateLimits::default()),
            counters: Counters::default(),
        })
    }

    pub fn stats(&self) -> SentryStats {
        let c = &self.counters;
        SentryStats {
            envelopes_delivered: c.envelopes_delivered.load(Ordering::Relaxed),
            envelopes_refused: c.envelopes_refused.load(Ordering::Relaxed),
            bytes_delivered: c.bytes_delivered.load(Ordering::Relaxed),
        }
    }

    /// How long `category` stays rate limited.
    pub fn rate_limited_for(&self, category: &str) -> Option<Duration> {
        self.limits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remaining(category, Instant::now())
    }

    /// Settles a batch: what Sentry refused is returned as rejected and
    /// what the conversion left out as dropped (the runtime counts both, and
    /// the rest as sent), unless nothing was delivered at all, which fails
    /// the batch as a whole.
    fn settle(
        progress: &Progress,
        refusal: Option<String>,
        dropped: Vec<(&'static str, u64)>,
    ) -> Result<ExportOutcome, ExportError> {
        match refusal {
            Some(message) if progress.delivered == 0 => Err(ExportError::permanent(message)),
            _ => Ok(ExportOutcome {
                rejected: progress.rejected,
                dropped,
            }),
        }
    }
}

fn unix_nanos_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[async_trait]
impl Exporter for SentryExporter {
    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let batch = req.batch.clone();
        // While every chunk category is limited nothing can go out: do not
        // even convert.
        if let (Some(a), Some(b)) = (
            self.rate_limited_for(PROFILE_CHUNK),
            self.rate_limited_for(PROFILE_CHUNK_UI),
        ) {
            return Err(ExportError::Retryable {
                message: "Sentry rate limit in effect".into(),
                retry_after: Some(a.min(b)),
            });
        }
        // Chunks done by earlier attempts are skipped; each one done now is
        // recorded at once, so that a cut-short attempt keeps it too.
        let earlier = req.progress();
        let mut resume = Resume::of(&earlier, unix_nanos_now());
        let (mut delivered, mut rejected) = (earlier.delivered, earlier.rejected);
        let skip = resume.done;
        let (opts, now) = (self.opts.clone(), resume.now_unix_nano);
        let data = batch.clone();
        let encoded = profcol_model::cpu::run(move || {
            encode(data.data(), &opts, now, SystemTime::now(), skip)
        })
        .await;

        // The conversion's drops are the same on every attempt (the same
        // `now`, the same chunks): they are reported once, by the attempt
        // that settles the batch, and counted by the runtime with the rest.
        let (mut envelopes, dropped) = (encoded.envelopes, encoded.dropped);
        if encoded.over_limit > 0 && skip == 0 {
            ctx.telemetry
                .exporter_event(&ctx.id, "chunk_over_request_limit", encoded.over_limit);
            profcol_model::warn_limited!(exporter = %ctx.id, chunks = encoded.over_limit, "a batch would become more chunks than max_chunks_per_request; the rest are dropped");
        }
        let mut refusal = None;
        for i in skip..envelopes.len() {
            let Some(body) = envelopes[i].body.take() else {
                continue;
            };
            let env = &envelopes[i];
            if let Some(wait) = self.rate_limited_for(env.category) {
                return Err(ExportError::Retryable {
                    message: format!("Sentry rate limit on {} in effect", env.category),
                    retry_after: Some(wait),
                });
            }
            if let Some(wait) = self.pace.as_ref().map(|p| p.take()) {
                if !wait.is_zero() {
                    ctx.telemetry.exporter_event(&ctx.id, "chunk_paced", 1);
                    tokio::time::sleep(wait).await;
                }
            }
            let size = body.len() as u64;
            match self.client.send(body, &self.limits).await {
                Reply::Delivered => {
                    self.counters
                        .envelopes_delivered
                        .fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .bytes_delivered
                        .fetch_add(size, Ordering::Relaxed);
                    delivered += env.samples;
                }
                Reply::Refused { detail, .. } => {
                    self.counters
                        .envelopes_refused
                        .fetch_add(1, Ordering::Relaxed);
                    profcol_model::warn_limited!(exporter = %ctx.id, chunk_id = %env.chunk_id, samples = env.samples, error = %detail, "Sentry refused a profile chunk");
                    rejected += env.samples;
                    refusal = Some(detail);
                }
                Reply::Fatal { detail, .. } => {
                    // Every remaining chunk would get the same answer.
                    self.counters
                        .envelopes_refused
                        .fetch_add(1, Ordering::Relaxed);
                    let rest: u64 = envelopes[i..].iter().map(|e| e.samples).sum();
                    tracing::error!(exporter = %ctx.id, samples = rest, error = %detail, "Sentry refused the profile chunks; check the DSN and project");
                    resume.done = envelopes.len();
                    let progress = resume.to_progress(delivered, rejected + rest);
                    req.record(progress.clone());
                    return Self::settle(&progress, Some(detail), dropped);
                }
                Reply::Throttled { detail } => {
                    return Err(ExportError::Retryable {
                        message: detail,
                        retry_after: self.rate_limited_for(env.category),
                    });
                }
                Reply::Retry { message } => {
                    return Err(ExportError::Retryable {
                        message,
                        retry_after: None,
                    })
                }
            }
            resume.done = i + 1;
            req.record(resume.to_progress(delivered, rejected));
        }
        Self::settle(&resume.to_progress(delivered, rejected), refusal, dropped)
    }
}
