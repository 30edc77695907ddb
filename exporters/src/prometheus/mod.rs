//! Exporter `prometheus`, as the Collector's (contrib): metrics served on
//! `GET /metrics` in the Prometheus text format 0.0.4 for a Prometheus to
//! scrape. Points are folded into series ([`store`]): gauges and
//! cumulative points replace, deltas add up, so what signaltometrics
//! makes of each request becomes a counter. Names and labels are the
//! Collector's ([`naming`]). Metrics pipelines only.

mod config;
mod naming;
mod store;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use axum::{extract::State, http::header, response::IntoResponse, routing::get, Router};
use tokio_util::sync::CancellationToken;

use profcol_model::proto::metrics::ExportMetricsServiceRequest;
use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{PrometheusConfig, ResourceToTelemetry, DEFAULT_MAX_SERIES};
pub use naming::{go_float, label_name, metric_name, NameType};
pub use store::{Folded, Settings, Store};

pub struct PrometheusExporterFactory;

impl ExporterFactory for PrometheusExporterFactory {
    fn type_name(&self) -> &'static str {
        "prometheus"
    }

    /// Folding a request into the series is immediate: no queue, no
    /// retries, as the Collector's (its queue is off by default).
    fn default_settings(&self) -> Option<ExporterSettings> {
        None
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        _settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &PrometheusConfig| c.validate(cfg))?;
        Ok(Arc::new(PrometheusExporter::new(c)))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(PrometheusExporterFactory)
}

pub struct PrometheusExporter {
    cfg: PrometheusConfig,
    store: Arc<Mutex<Store>>,
    stop: CancellationToken,
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl PrometheusExporter {
    pub fn new(cfg: PrometheusConfig) -> Self {
        let store = Store::new(Settings {
            namespace: cfg.namespace.clone(),
            suffixes: cfg.suffixes(),
            const_labels: cfg
                .const_labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            resource_to_telemetry: cfg.resource_to_telemetry_conversion.enabled,
            send_timestamps: cfg.send_timestamps,
            expiration: cfg.metric_expiration.0,
            max_series: cfg.max_series,
        });
        Self {
            cfg,
            store: Arc::new(Mutex::new(store)),
            stop: CancellationToken::new(),
            server: Mutex::new(None),
        }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `/metrics` serves now.
    pub fn render(&self) -> String {
        self.store().render(Instant::now())
    }

    /// Folds a request into the series (what `export_metrics` does).
    pub fn fold(&self, req: &ExportMetricsServiceRequest) -> Folded {
        self.store().fold(req, Instant::now())
    }
}

async fn scrape(State(store): State<Arc<Mutex<Store>>>) -> impl IntoResponse {
    let text = store
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .render(Instant::now());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}

#[async_trait]
impl Exporter for PrometheusExporter {
    async fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        let name = format!("exporters::{}", ctx.id);
        // What the series hold is reserved in the collector's budget.
        if let Ok(r) = ctx.budget.try_admit(0) {
            self.store().attach(r);
        }
        let opened = profcol_pipeline::net::open(
            &name,
            &self.cfg.endpoint,
            self.cfg.tls.as_ref(),
            profcol_pipeline::net::ServerSettings::small(),
            &self.stop,
        )
        .await?;
        let app = Router::new()
            .route("/metrics", get(scrape))
            .with_state(self.store.clone());
        let task = opened.serve(app, self.stop.clone());
        *self.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        Ok(())
    }

    async fn export(
        &self,
        _req: &Request,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        Err(ExportError::permanent(
            "the prometheus exporter takes metrics, not profiles",
        ))
    }

    fn exports_profiles(&self) -> bool {
        false
    }

    fn exports_metrics(&self) -> bool {
        true
    }

    async fn export_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let f = self.fold(req);
        if f.refused > 0 {
            tracing::warn!(
                exporter = %ctx.id,
                refused = f.refused,
                max_series = self.cfg.max_series,
                "prometheus: data points refused (over max_series or the memory budget, or not servable); counted in otelcol_exporter_send_failed_metric_points"
            );
        }
        Ok(ExportOutcome::rejected(f.refused))
    }

    async fn shutdown(&self) {
        self.stop.cancel();
        let task = self.server.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
mod tests;
