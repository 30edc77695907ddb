use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;

use profcol_pipeline::component::{Receiver, ReceiverContext};

use super::config::SentryReceiverConfig;
use super::handler::{Handler, Reply};

pub struct SentryReceiver {
    cfg: SentryReceiverConfig,
}

impl SentryReceiver {
    pub fn new(cfg: SentryReceiverConfig) -> Self {
        Self { cfg }
    }
}

/// The routes, separate from the listener so tests can drive them directly.
pub fn router(handler: Arc<Handler>) -> Router {
    Router::new()
        .route("/api/{project_id}/envelope/", post(envelope))
        .route("/api/{project_id}/envelope", post(envelope))
        // The body is read (and limited) by the handler while decompressing.
        .layer(DefaultBodyLimit::disable())
        .with_state(handler)
}

async fn envelope(
    State(h): State<Arc<Handler>>,
    Path(project_id): Path<String>,
    RawQuery(query): RawQuery,
    version: axum::http::Version,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Reply {
    h.handle(&project_id, query.as_deref(), &headers, version, body)
        .await
}

#[async_trait]
impl Receiver for SentryReceiver {
    fn endpoints(&self) -> Vec<String> {
        vec![self.cfg.endpoint.clone()]
    }

    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let listener =
            crate::endpoint::bind(&self.cfg.endpoint, &format!("receivers::{}", ctx.id)).await?;
        tracing::info!(receiver = %ctx.id, endpoint = %self.cfg.endpoint, "Sentry envelope receiver listening");
        let recorder = crate::record::Recorder::for_config(
            self.cfg.record_to.as_deref(),
            self.cfg.record_max_files,
            &ctx.id,
        )?;
        let handler = Arc::new(
            Handler::new(
                self.cfg,
                ctx.id.clone(),
                ctx.output.clone(),
                ctx.telemetry.clone(),
            )
            .with_recorder(recorder),
        );
        let app = router(handler);
        Ok(tokio::spawn(async move {
            let r = axum::serve(listener, app)
                .with_graceful_shutdown(ctx.shutdown.cancelled_owned())
                .await;
            if let Err(e) = r {
                tracing::error!(receiver = %ctx.id, error = %e, "Sentry receiver failed");
            }
        }))
    }
}
