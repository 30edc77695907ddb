use std::net::SocketAddr;
use std::sync::Arc;

use axum::{extract::State, http::header, response::IntoResponse, routing::get, Router};
use tokio_util::sync::CancellationToken;

use super::Telemetry;
use crate::config::MetricsLevel;

/// Serves `GET /metrics` in Prometheus text format, the families of `level`,
/// until `shutdown`.
pub async fn serve_metrics(
    addr: SocketAddr,
    level: MetricsLevel,
    telemetry: Arc<Telemetry>,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("service::telemetry::metrics: cannot listen on {addr}: {e}")
    })?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state((telemetry, level));
    Ok(crate::net::spawn(
        "service::telemetry::metrics",
        listener,
        app,
        crate::net::ServerSettings::small(),
        shutdown,
    ))
}

async fn metrics(State((t, level)): State<(Arc<Telemetry>, MetricsLevel)>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        t.encode_text_at(level),
    )
}
