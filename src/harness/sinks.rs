//! Exporters replaced for a test run: every batch is kept for the checks,
//! and `sentry` / `pprof` exporters still do their real work against a local
//! envelope sink or a scratch directory so their output can be counted.

use std::io::Read;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ExportError, ExportOutcome, Exporter, ExporterContext, Request};
use tokio_util::sync::CancellationToken;

/// Keeps every batch, then hands it to the real exporter when there is one.
pub(super) struct Capture {
    pub id: String,
    pub batches: Arc<Mutex<Vec<Arc<ProfileBatch>>>>,
    pub inner: Option<Arc<dyn Exporter>>,
    /// Failed exports, which fail the test.
    pub errors: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Exporter for Capture {
    async fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        match &self.inner {
            Some(e) => e.start(ctx).await,
            None => Ok(()),
        }
    }

    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let r = match &self.inner {
            Some(e) => e.export(req, ctx).await,
            None => Ok(ExportOutcome::delivered()),
        };
        if let Err(e) = &r {
            self.errors
                .lock()
                .unwrap()
                .push(format!("exporter {}: export failed: {e}", self.id));
        }
        // Kept once per attempt; retries are off in tests.
        self.batches.lock().unwrap().push(req.batch.clone());
        r
    }

    async fn shutdown(&self) {
        if let Some(e) = &self.inner {
            e.shutdown().await;
        }
    }
}

/// A stand-in for Sentry: accepts every envelope and counts its
/// `profile_chunk` items.
pub(super) struct SentrySink {
    pub port: u16,
    pub chunks: Arc<Mutex<u64>>,
    pub errors: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
}

impl SentrySink {
    pub(super) async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let chunks = Arc::new(Mutex::new(0u64));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (c, e) = (chunks.clone(), errors.clone());
        let app = axum::Router::new().route(
            "/api/{project}/envelope/",
            post(move |headers: HeaderMap, body: Bytes| {
                let (c, e) = (c.clone(), e.clone());
                async move {
                    match count_chunks(&headers, &body) {
                        Ok(n) => *c.lock().unwrap() += n,
                        Err(msg) => e.lock().unwrap().push(msg),
                    }
                    r#"{"id":"00000000000000000000000000000000"}"#
                }
            }),
        );
        let stop = CancellationToken::new();
        let s = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(s.cancelled_owned())
                .await;
        });
        Ok(Self {
            port,
            chunks,
            errors,
            stop,
        })
    }

    pub(super) fn chunks(&self) -> u64 {
        *self.chunks.lock().unwrap()
    }
}

impl Drop for SentrySink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn count_chunks(headers: &HeaderMap, body: &[u8]) -> Result<u64, String> {
    let encoding = headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity");
    let decoded;
    let bytes = match encoding {
        "gzip" => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .map_err(|e| format!("bad gzip body: {e}"))?;
            decoded = out;
            &decoded[..]
        }
        "identity" | "" => body,
        other => return Err(format!("unexpected content-encoding {other}")),
    };
    let env = profcol_sentry::envelope::parse(bytes)
        .map_err(|e| format!("the exporter sent a broken envelope: {e}"))?;
    Ok(env
        .items
        .iter()
        .filter(|i| i.item_type() == "profile_chunk")
        .count() as u64)
}
