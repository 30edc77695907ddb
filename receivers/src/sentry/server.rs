use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderName, Method, Request, Uri};
use axum::routing::post;
use axum::Router;
use tower::ServiceExt;
use tower_http::cors::{Any, CorsLayer};

use profcol_pipeline::component::{AuthConfig, Receiver, ReceiverContext};

use super::config::SentryReceiverConfig;
use super::forward::Forwarder;
use super::handler::{Handler, Reply};

pub(super) struct SentryReceiver {
    cfg: SentryReceiverConfig,
}

impl SentryReceiver {
    pub(super) fn new(cfg: SentryReceiverConfig) -> Self {
        Self { cfg }
    }
}

/// The routes, separate from the listener so tests can drive them directly.
///
/// As in Relay, runs of slashes in the path are folded into one before
/// routing (`//api/42//envelope/` is `/api/42/envelope/`), and browsers may
/// post from any origin (CORS, with the preflight answered).
pub(super) fn router(handler: Arc<Handler>) -> Router {
    let routes = Router::new()
        .route("/api/{project_id}/envelope/", post(envelope))
        .route("/api/{project_id}/envelope", post(envelope))
        // The body is read (and limited) by the handler while decompressing.
        .layer(DefaultBodyLimit::disable())
        .layer(cors())
        .with_state(handler);
    Router::new().fallback_service(routes.map_request(|mut req: Request<axum::body::Body>| {
        fold_duplicate_slashes(req.uri_mut());
        req
    }))
}

/// Relay's CORS policy for its store endpoints (`middlewares/cors.rs`):
/// any origin, `POST`, the headers SDKs send, and the answers' rate-limit
/// headers exposed so a browser SDK can read them and back off.
fn cors() -> CorsLayer {
    let names = |names: &[&'static str]| -> Vec<HeaderName> {
        names.iter().map(|n| HeaderName::from_static(n)).collect()
    };
    CorsLayer::new()
        .allow_methods(Method::POST)
        .allow_headers(names(&[
            "x-sentry-auth",
            "x-requested-with",
            "x-forwarded-for",
            "origin",
            "referer",
            "accept",
            "content-type",
            "authentication",
            "authorization",
            "content-encoding",
            "transfer-encoding",
        ]))
        .allow_origin(Any)
        .expose_headers(names(&[
            "x-sentry-error",
            "x-sentry-rate-limits",
            "retry-after",
        ]))
        .max_age(Duration::from_secs(3600))
}

/// Folds every run of `/` in the path (not the query) into one, as Relay's
/// `NormalizePath` does.
fn fold_duplicate_slashes(uri: &mut Uri) {
    let path = uri.path();
    if !path.contains("//") {
        return;
    }
    let mut folded = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && folded.ends_with('/')) {
            folded.push(c);
        }
    }
    if let Some(q) = uri.query() {
        folded.push('?');
        folded.push_str(q);
    }
    let mut parts = uri.clone().into_parts();
    if let Ok(pq) = folded.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(u) = Uri::from_parts(parts) {
            *uri = u;
        }
    }
}

async fn envelope(
    State(h): State<Arc<Handler>>,
    Path(project_id): Path<String>,
    RawQuery(query): RawQuery,
    version: axum::http::Version,
    headers: HeaderMap,
    extensions: http::Extensions,
    body: axum::body::Body,
) -> Reply {
    let peer = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0);
    h.handle(&project_id, query.as_deref(), &headers, version, body, peer)
        .await
}

#[async_trait]
impl Receiver for SentryReceiver {
    fn endpoints(&self) -> Vec<String> {
        vec![self.cfg.server.endpoint.clone()]
    }

    fn authenticators(&self) -> Vec<(String, String)> {
        AuthConfig::references(&self.cfg.server.auth)
    }

    fn storages(&self) -> Vec<(String, String)> {
        self.cfg
            .forwarding
            .sending_queue
            .storage
            .iter()
            .map(|s| ("forwarding::sending_queue::storage".to_owned(), s.clone()))
            .collect()
    }

    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let name = format!("receivers::{}", ctx.id);
        let opened = self.cfg.server.open(&name, &ctx.shutdown).await?;
        tracing::info!(receiver = %ctx.id, endpoint = %self.cfg.server.endpoint, "Sentry envelope receiver listening");
        let recorder = crate::record::Recorder::for_config(
            self.cfg.record_to.as_deref(),
            self.cfg.record_max_files,
            &ctx.id,
        )?;
        let auth = ctx
            .authenticators
            .resolve(self.cfg.server.auth.as_ref(), &name)?;
        let log = match &self.cfg.forwarding.sending_queue.storage {
            Some(storage) if !self.cfg.forward_to.is_empty() => {
                let path = format!("{name}::forwarding::sending_queue::storage");
                let storage = ctx.storages.get(storage).cloned().ok_or_else(|| {
                    anyhow::anyhow!("{path}: no storage extension {storage:?} is running")
                })?;
                let owner = ctx.id.clone();
                let opened = tokio::task::spawn_blocking(move || storage.open_log(&owner)).await?;
                Some(opened.map_err(|e| anyhow::anyhow!("{path}: {e:#}"))?)
            }
            _ => None,
        };
        let forwarder = Forwarder::new(
            &self.cfg,
            &ctx.id,
            ctx.telemetry.clone(),
            ctx.output.budget().clone(),
            log,
        )
        .map_err(|e| anyhow::anyhow!("{name}::forwarding: {e:#}"))?;
        if let Some(f) = &forwarder {
            f.start();
            tracing::info!(receiver = %ctx.id, upstream = %self.cfg.forward_to, "forwarding what the pipeline does not consume");
        }
        let handler = Arc::new(
            Handler::new(
                self.cfg,
                ctx.id.clone(),
                ctx.output.clone(),
                ctx.telemetry.clone(),
            )
            .with_recorder(recorder)
            .with_auth(auth)
            .with_forwarder(forwarder.clone()),
        );
        let server = opened.serve(router(handler), ctx.shutdown.clone());
        let Some(forwarder) = forwarder else {
            return Ok(server);
        };
        // After the last request, the forwarding queue drains; cut off at
        // the shutdown deadline, what is left is counted as dropped.
        Ok(tokio::spawn(async move {
            let stop = StopGuard {
                server: server.abort_handle(),
                forwarder: forwarder.clone(),
                done: false,
            };
            let _ = server.await;
            forwarder.drain().await;
            stop.done();
        }))
    }
}

/// Dropped when the receiver's task is aborted at the shutdown deadline:
/// stops the server and counts what forwarding still held.
struct StopGuard {
    server: tokio::task::AbortHandle,
    forwarder: Arc<Forwarder>,
    done: bool,
}

impl StopGuard {
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        if !self.done {
            self.server.abort();
            self.forwarder.abandon();
        }
    }
}
