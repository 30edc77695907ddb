//! Receiver `pprof`: scrapes Go's `net/http/pprof` endpoints (`/profile`
//! for CPU, `/heap`, `/allocs`, `/goroutine`, `/mutex`, `/block`) of static
//! targets and of targets listed in files (Prometheus' `file_sd` format),
//! every `collection_interval`, as Pyroscope's and Grafana Alloy's scrape
//! do, and hands each pprof to the pipelines as OTLP.

mod config;
mod delta;
mod scrape;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Semaphore;

use profcol_pipeline::component::{AuthConfig, Receiver, ReceiverContext, ReceiverFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::ingest::{Ingest, OnInvalid};
pub use config::{PprofReceiverConfig, ProfileKind};
use profcol_exporters::http_client::header_map;
use profcol_pipeline::config::scrape_targets::{Target, TargetFiles};
use scrape::Scraper;

pub struct PprofReceiverFactory;

impl ReceiverFactory for PprofReceiverFactory {
    fn type_name(&self) -> &'static str {
        "pprof"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors> {
        let (c, statics) = cfg.decode_checked(|c: &PprofReceiverConfig| c.validate(cfg))?;
        let client = http_client(&c, cfg)?;
        Ok(Box::new(PprofReceiver {
            cfg: c,
            statics,
            client,
        }))
    }
}

pub fn factory() -> Arc<dyn ReceiverFactory> {
    Arc::new(PprofReceiverFactory)
}

pub struct PprofReceiver {
    cfg: PprofReceiverConfig,
    statics: Vec<Target>,
    client: reqwest::Client,
}

/// The scrapes' client: the `tls` files read (each problem reported at
/// its key), `headers` on every request.
fn http_client(
    cfg: &PprofReceiverConfig,
    section: &ComponentConfig,
) -> Result<reqwest::Client, ConfigErrors> {
    let mut errs = ConfigErrors::default();
    let builder = reqwest::Client::builder()
        .user_agent(concat!("profcol/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(cfg.timeout())
        .redirect(reqwest::redirect::Policy::limited(3))
        .default_headers(header_map(&cfg.headers));
    let client = cfg
        .tls
        .configure(builder, &section.key_path("tls"), &mut errs)
        .build()
        .map_err(|e| errs.push(section.key_path("tls"), e.to_string()))
        .ok();
    match client {
        Some(c) if errs.is_empty() => Ok(c),
        _ => Err(errs),
    }
}

#[async_trait]
impl Receiver for PprofReceiver {
    fn authenticators(&self) -> Vec<(String, String)> {
        AuthConfig::references(&self.cfg.auth)
    }

    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let auth = ctx
            .authenticators
            .resolve(self.cfg.auth.as_ref(), &format!("receivers::{}", ctx.id))?;
        let job = match self.cfg.job.as_str() {
            "" => ctx.id.clone(),
            j => j.to_owned(),
        };
        tracing::info!(receiver = %ctx.id, targets = self.statics.len(), target_files = ?self.cfg.target_files, interval = ?self.cfg.collection_interval.0, "pprof receiver scraping");
        let scraper = Arc::new(Scraper {
            // What profcol converted itself is refused when invalid: there
            // is no producer mistake to repair.
            ingest: Ingest::new(
                ctx.id.clone(),
                ctx.output.clone(),
                ctx.telemetry.clone(),
                OnInvalid::Refuse,
            ),
            client: self.client,
            auth,
            job,
            permits: Semaphore::new(self.cfg.max_concurrent_scrapes),
            deltas: self
                .cfg
                .delta
                .then(|| delta::Deltas::new(ctx.output.budget().clone())),
            cfg: self.cfg.clone(),
        });
        let files = TargetFiles::new(&self.cfg.target_files);
        Ok(tokio::spawn(run(
            scraper,
            self.statics,
            files,
            ctx.shutdown.clone(),
        )))
    }
}

/// Every interval, each target not still being scraped from the last one
/// is scraped; the target files are read again first if they changed.
async fn run(
    scraper: Arc<Scraper>,
    statics: Vec<Target>,
    mut files: TargetFiles,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let cfg = &scraper.cfg;
    let id = scraper.ingest.id.clone();
    tokio::select! {
        _ = shutdown.cancelled() => return,
        _ = tokio::time::sleep(cfg.initial_delay.0) => {}
    }
    let mut tick = tokio::time::interval(cfg.collection_interval.0);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        while tasks.try_join_next().is_some() {}
        for e in files.refresh() {
            scraper
                .ingest
                .telemetry
                .receiver_item(&id, "target_file", "invalid");
            tracing::warn!(receiver = %id, file = %e.path.display(), error = %e.message, "target file");
        }
        let mut seen = HashSet::new();
        for t in statics.iter().chain(files.targets()) {
            let key = t.key();
            if !seen.insert(key.clone()) {
                continue;
            }
            if !busy
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone())
            {
                // Its last scrape still runs (a slow target): this one is
                // skipped rather than piled up.
                scraper
                    .ingest
                    .telemetry
                    .receiver_item(&id, "scrape", "skipped_busy");
                continue;
            }
            let (s, t, busy, stop) = (scraper.clone(), t.clone(), busy.clone(), shutdown.clone());
            tasks.spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = s.target(&t) => {}
                }
                busy.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
            });
        }
        // The baselines of targets gone from the files go with them.
        if let Some(d) = &scraper.deltas {
            d.retain(&seen);
        }
    }
    tasks.shutdown().await;
}
