//! Exporter `loadbalancing`: the Collector's `loadbalancingexporter`, for
//! profiles. Each profile has a routing key (`routing_key`); a consistent
//! hash ring over the backends the resolver found picks its backend; a
//! batch is cut into one self-contained request per backend, each sent
//! through an `otlp` exporter built from `protocol::otlp` with that
//! backend's address.
//!
//! Retries are the exporter's own (`retry_on_failure` at the top level):
//! an attempt records which profiles were settled, and the next one routes
//! only the rest, on the ring of that moment. So a part for a backend that
//! died is re-routed to its new owner once the resolver drops it, and parts
//! already delivered are never sent twice.
//!
//! - [`config`]: the keys and their checks.
//! - [`ring`]: the consistent-hash ring.
//! - [`resolver`]: static list or DNS, and the lookup tests replace.
//! - [`routing`]: keys, assignment, the split, what a retry resumes from.

mod config;
pub mod resolver;
pub mod ring;
pub mod routing;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Progress, Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::lookup::{Lookup, SystemLookup};
use crate::settled::Settled;
pub use config::{normalise_endpoint, Decoded, Resolver, RoutingKey, DEFAULT_PORT};
use ring::HashRing;

/// Its key in a request's `resume`.
const KEY: &str = "loadbalancing";

use crate::otlp::{Body, OtlpExporter, OtlpExporterConfig};

pub struct LoadBalancingExporterFactory {
    lookup: Arc<dyn Lookup>,
}

impl ExporterFactory for LoadBalancingExporterFactory {
    fn type_name(&self) -> &'static str {
        "loadbalancing"
    }

    /// The Collector's name for it since v0.161.0.
    fn aliases(&self) -> &'static [&'static str] {
        &["load_balancing"]
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let decoded = config::decode(cfg)?;
        Ok(Arc::new(LoadBalancingExporter::new(
            decoded,
            cfg.clone(),
            settings.timeout,
            self.lookup.clone(),
        )))
    }
}

/// The factory, resolving names with the system resolver.
pub fn factory() -> Arc<dyn ExporterFactory> {
    factory_with_lookup(Arc::new(SystemLookup))
}

/// The factory with another name lookup (tests: a DNS answer that changes).
pub fn factory_with_lookup(lookup: Arc<dyn Lookup>) -> Arc<dyn ExporterFactory> {
    Arc::new(LoadBalancingExporterFactory { lookup })
}

pub struct LoadBalancingExporter {
    inner: Arc<Inner>,
    stop: CancellationToken,
    resolving: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Inner {
    routing_key: RoutingKey,
    /// `protocol::otlp`, its endpoint empty.
    otlp: OtlpExporterConfig,
    /// For the key paths of errors building a backend's exporter.
    section: ComponentConfig,
    /// One call to one backend.
    backend_timeout: Duration,
    resolver: Resolver,
    lookup: Arc<dyn Lookup>,
    /// Swapped whole when the resolver finds another set: an export works
    /// on the set of the moment it started.
    backends: RwLock<Arc<Backends>>,
    ctx: OnceLock<ExporterContext>,
}

/// The ring and an exporter per endpoint, by ring number.
#[derive(Default)]
struct Backends {
    ring: HashRing,
    exporters: Vec<Result<Arc<OtlpExporter>, String>>,
}

impl LoadBalancingExporter {
    pub fn new(
        d: Decoded,
        section: ComponentConfig,
        timeout: Duration,
        lookup: Arc<dyn Lookup>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                routing_key: d.routing_key,
                otlp: d.otlp,
                section,
                backend_timeout: d.backend_timeout.unwrap_or(timeout),
                resolver: d.resolver,
                lookup,
                backends: RwLock::default(),
                ctx: OnceLock::new(),
            }),
            stop: CancellationToken::new(),
            resolving: Mutex::new(None),
        }
    }

    /// The endpoints in use now, sorted.
    pub fn endpoints(&self) -> Vec<String> {
        self.inner.current().ring.endpoints().to_vec()
    }
}

impl Inner {
    fn current(&self) -> Arc<Backends> {
        self.backends
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts `endpoints` (sorted, unique) in use; whether they differ from
    /// the set in use. Exporters of endpoints that stay are kept (and their
    /// connections with them).
    async fn update(&self, endpoints: Vec<String>) -> bool {
        let old = self.current();
        if old.ring.endpoints() == endpoints.as_slice() {
            return false;
        }
        let ring = HashRing::new(endpoints);
        let mut exporters = Vec::with_capacity(ring.endpoints().len());
        for e in ring.endpoints() {
            let kept = old
                .ring
                .endpoints()
                .binary_search(e)
                .ok()
                .map(|i| old.exporters[i].clone());
            let exporter = match kept {
                Some(x) => x,
                None => self.backend(e).await,
            };
            exporters.push(exporter);
        }
        *self.backends.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(Backends { ring, exporters });
        true
    }

    /// The `otlp` exporter of one backend.
    async fn backend(&self, endpoint: &str) -> Result<Arc<OtlpExporter>, String> {
        let cfg = OtlpExporterConfig {
            endpoint: endpoint.to_owned(),
            ..self.otlp.clone()
        };
        let exporter = OtlpExporter::new(
            &cfg,
            &self.section,
            self.backend_timeout,
            self.lookup.clone(),
        )
        .map_err(|e| format!("backend {endpoint}: {e}"))?;
        if let Some(ctx) = self.ctx.get() {
            exporter
                .start(ctx)
                .await
                .map_err(|e| format!("backend {endpoint}: {e:#}"))?;
        }
        Ok(Arc::new(exporter))
    }

    /// One resolution, counted, and the set put in use when it succeeded.
    async fn resolve(&self) {
        let found = match &self.resolver {
            Resolver::Static(list) => Ok(list.clone()),
            Resolver::Dns {
                hostname,
                port,
                timeout,
                ..
            } => resolver::resolve(&*self.lookup, hostname, *port, *timeout).await,
        };
        let Some(ctx) = self.ctx.get() else { return };
        let kind = self.resolver.kind();
        match found {
            Ok(endpoints) => {
                let n = endpoints.len();
                let changed = self.update(endpoints).await;
                ctx.telemetry.lb_resolution(&ctx.id, kind, Ok((n, changed)));
            }
            Err(e) => ctx.telemetry.lb_resolution(&ctx.id, kind, Err(&e)),
        }
    }
}

/// One backend's share of a request, ready to send.
struct Share {
    endpoint: u32,
    body: Body,
    /// Positions of its profiles in the request.
    profiles: Vec<u32>,
    /// Profiles and samples.
    counts: (u64, u64),
}

#[async_trait]
impl Exporter for LoadBalancingExporter {
    fn authenticators(&self) -> Vec<(String, String)> {
        self.inner
            .otlp
            .auth
            .iter()
            .map(|a| {
                (
                    "protocol::otlp::auth::authenticator".to_owned(),
                    a.authenticator.clone(),
                )
            })
            .collect()
    }

    async fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        let _ = self.inner.ctx.set(ctx.clone());
        // The first resolution before the first export; a failing DNS
        // leaves no backends yet, and exports are retried until it answers.
        self.inner.resolve().await;
        if let Resolver::Dns { interval, .. } = self.inner.resolver {
            let (inner, stop) = (self.inner.clone(), self.stop.clone());
            let task = tokio::spawn(async move {
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => inner.resolve().await,
                        _ = stop.cancelled() => return,
                    }
                }
            });
            *self.resolving.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        }
        Ok(())
    }

    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let inner = &*self.inner;
        let data = req.batch.data();
        let profiles = req.batch.profile_count() as usize;
        if profiles == 0 {
            return Ok(ExportOutcome::delivered());
        }
        let mut progress = req.progress();
        let mut settled = Settled::from_progress(&progress, KEY, profiles);
        let backends = inner.current();
        let mut keys = Vec::with_capacity(profiles);
        routing::profile_keys(data, inner.routing_key, &mut keys);
        let mut owner = Vec::new();
        if routing::assign(&keys, &settled, &backends.ring, &mut owner).is_none() {
            return Err(ExportError::retryable(format!(
                "no backends: the {} resolver has found none yet",
                inner.resolver.kind()
            )));
        }
        let shares = shares(&req.batch, &owner, &settled, &backends);

        let timeout = inner.backend_timeout;
        let mut calls: FuturesUnordered<_> = shares
            .into_iter()
            .map(|share| {
                let exporter = &backends.exporters[share.endpoint as usize];
                async move {
                    let started = Instant::now();
                    let result = match exporter {
                        Ok(e) => {
                            tokio::time::timeout(timeout, e.send(share.body.clone(), share.counts))
                                .await
                                .unwrap_or_else(|_| {
                                    Err(ExportError::retryable(format!(
                                        "timed out after {timeout:?}"
                                    )))
                                })
                        }
                        Err(e) => Err(ExportError::retryable(e.clone())),
                    };
                    (share, result, started.elapsed())
                }
            })
            .collect();

        let mut retry: Vec<String> = Vec::new();
        let mut retry_after: Option<Duration> = None;
        let mut refused: Vec<String> = Vec::new();
        while let Some((share, result, latency)) = calls.next().await {
            let endpoint = &backends.ring.endpoints()[share.endpoint as usize];
            ctx.telemetry
                .lb_backend_outcome(&ctx.id, endpoint, result.is_ok(), latency);
            let rejected = match result {
                Ok(outcome) => outcome.rejected.min(share.counts.1),
                Err(ExportError::Permanent { message }) => {
                    refused.push(format!("{endpoint}: {message}"));
                    share.counts.1
                }
                Err(ExportError::Retryable {
                    message,
                    retry_after: after,
                }) => {
                    retry.push(format!("{endpoint}: {message}"));
                    retry_after = retry_after.max(after);
                    continue;
                }
            };
            for &p in &share.profiles {
                settled.set(p as usize);
            }
            progress.delivered += share.counts.1 - rejected;
            progress.rejected += rejected;
            progress.resume = Some(settled.to_resume());
            // At once: an attempt cut short by the timeout keeps it.
            req.record(progress.clone());
        }
        finish(progress, retry, retry_after, refused)
    }

    async fn shutdown(&self) {
        self.stop.cancel();
        let task = self
            .resolving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for LoadBalancingExporter {
    // An exporter built and started but never shut down (a start-up that
    // failed further on) must not leave its resolver running.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The request cut by `owner`. When every profile goes to one backend and
/// none is settled, the request itself (its received bytes kept for
/// pass-through); otherwise each part encoded straight from it, or built
/// as a batch of its own for a peer on an older proto revision.
fn shares(
    batch: &Arc<ProfileBatch>,
    owner: &[u32],
    settled: &Settled,
    backends: &Backends,
) -> Vec<Share> {
    let first = owner[0];
    if first != routing::SETTLED && !settled.any() && owner.iter().all(|&o| o == first) {
        return vec![Share {
            endpoint: first,
            body: Body::Batch(batch.clone()),
            profiles: (0..owner.len() as u32).collect(),
            counts: (batch.profile_count(), batch.sample_count()),
        }];
    }
    let data = batch.data();
    routing::split(data, owner, backends.ring.endpoints().len())
        .into_iter()
        .map(|p| {
            let encoded = backends.exporters[p.endpoint as usize]
                .as_ref()
                .is_ok_and(|e| e.sends_encoded());
            let body = if encoded {
                Body::Encoded(p.subset.encode(data).into())
            } else {
                // Sent and dropped within the attempt: no memory
                // reservation of its own (the request's covers it).
                let meta = profcol_model::BatchMeta {
                    memory: None,
                    ..batch.meta.clone()
                };
                Body::Batch(Arc::new(
                    ProfileBatch::new(p.subset.to_data(data)).with_meta(meta),
                ))
            };
            let profiles = p.subset.profiles().to_vec();
            Share {
                endpoint: p.endpoint,
                body,
                counts: (profiles.len() as u64, p.subset.samples()),
                profiles,
            }
        })
        .collect()
}

/// The attempt's result from what its calls did: retried while a backend
/// failed retryably; a refusal for good fails the request only when
/// nothing of it was delivered.
fn finish(
    progress: Progress,
    retry: Vec<String>,
    retry_after: Option<Duration>,
    refused: Vec<String>,
) -> Result<ExportOutcome, ExportError> {
    if !retry.is_empty() {
        return Err(ExportError::retry_after(retry.join("; "), retry_after));
    }
    if !refused.is_empty() {
        if progress.delivered == 0 {
            return Err(ExportError::permanent(refused.join("; ")));
        }
        tracing::warn!(errors = %refused.join("; "), "backends refused part of a batch for good");
    }
    Ok(ExportOutcome::rejected(progress.rejected))
}
