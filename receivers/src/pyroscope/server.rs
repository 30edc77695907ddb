use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use axum::Router;

use profcol_pipeline::component::{AuthConfig, Receiver, ReceiverContext};

use super::config::PyroscopeReceiverConfig;
use super::handler::{error, Handler};
use crate::ingest::{Ingest, OnInvalid, Refusal};

pub(super) struct PyroscopeReceiver {
    cfg: PyroscopeReceiverConfig,
}

impl PyroscopeReceiver {
    pub(super) fn new(cfg: PyroscopeReceiverConfig) -> Self {
        Self { cfg }
    }
}

/// The routes, separate from the listener so tests can drive them
/// directly: `/ingest` where the Pyroscope server has it (also under
/// `/pyroscope/`), and the `PusherService` (other methods of it are
/// Connect's `unimplemented`). Other methods than POST get 405.
pub(super) fn router(handler: Arc<Handler>) -> Router {
    Router::new()
        .route("/ingest", post(ingest))
        .route("/pyroscope/ingest", post(ingest))
        .route("/push.v1.PusherService/Push", post(push))
        .route("/push.v1.PusherService/{method}", post(unknown_method))
        // The body is read (and limited) by the handler while decompressing.
        .layer(DefaultBodyLimit::disable())
        .with_state(handler)
}

fn peer(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
}

async fn ingest(
    State(h): State<Arc<Handler>>,
    uri: Uri,
    RawQuery(query): RawQuery,
    version: http::Version,
    headers: HeaderMap,
    extensions: http::Extensions,
    body: axum::body::Body,
) -> Response {
    h.ingest(
        uri.path(),
        query.as_deref(),
        &headers,
        version,
        body,
        peer(&extensions),
    )
    .await
}

async fn push(
    State(h): State<Arc<Handler>>,
    version: http::Version,
    headers: HeaderMap,
    extensions: http::Extensions,
    body: axum::body::Body,
) -> Response {
    h.push(&headers, version, body, peer(&extensions)).await
}

async fn unknown_method(
    State(h): State<Arc<Handler>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    extensions: http::Extensions,
) -> Response {
    let origin = Handler::origin(peer(&extensions));
    if let Err(r) = h.authenticate(&headers, &origin) {
        return error(&r);
    }
    let r = Refusal {
        http: Some(StatusCode::NOT_FOUND),
        ..Refusal::invalid(
            "unknown_method",
            format!("push.v1.PusherService has no method {method:?}"),
        )
    };
    error(&h.refuse(&origin, r))
}

#[async_trait]
impl Receiver for PyroscopeReceiver {
    fn endpoints(&self) -> Vec<String> {
        vec![self.cfg.server.endpoint.clone()]
    }

    fn authenticators(&self) -> Vec<(String, String)> {
        AuthConfig::references(&self.cfg.server.auth)
    }

    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let name = format!("receivers::{}", ctx.id);
        let opened = self.cfg.server.open(&name, &ctx.shutdown).await?;
        tracing::info!(receiver = %ctx.id, endpoint = %self.cfg.server.endpoint, "Pyroscope receiver listening");
        let recorder = crate::record::Recorder::for_config(
            self.cfg.record_to.as_deref(),
            self.cfg.record_max_files,
            &ctx.id,
        )?;
        let auth = ctx
            .authenticators
            .resolve(self.cfg.server.auth.as_ref(), &name)?;
        let handler = Arc::new(Handler {
            // What profcol converted itself is refused when invalid, as
            // before `on_invalid`: there is no producer mistake to repair.
            ingest: Ingest::new(
                ctx.id.clone(),
                ctx.output.clone(),
                ctx.telemetry.clone(),
                OnInvalid::Refuse,
            ),
            cfg: self.cfg,
            recorder,
            auth,
        });
        Ok(opened.serve(router(handler), ctx.shutdown.clone()))
    }
}
