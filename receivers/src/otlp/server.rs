use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use tonic::codec::CompressionEncoding;
use tonic::server::{NamedService, UnaryService};
use tonic::{Request, Response, Status};

use profcol_pipeline::component::{ConsumeError, Output, Receiver, ReceiverContext};
use profcol_pipeline::model::dictionary::retain_profiles;
use profcol_pipeline::model::{invalid_profiles, profile_sample_count, Problem, ValidationError};
use profcol_pipeline::proto::{
    ExportProfilesPartialSuccess, ExportProfilesServiceResponse, EXPORT_PATH,
};
use profcol_pipeline::telemetry::Telemetry;
use profcol_pipeline::ProfileBatch;

use super::codec::{ExportCodec, Received};
use super::config::OtlpReceiverConfig;

pub struct OtlpReceiver {
    cfg: OtlpReceiverConfig,
}

impl OtlpReceiver {
    pub fn new(cfg: OtlpReceiverConfig) -> Self {
        Self { cfg }
    }
}

#[async_trait]
impl Receiver for OtlpReceiver {
    fn endpoints(&self) -> Vec<String> {
        vec![self.cfg.grpc().endpoint]
    }

    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let g = self.cfg.grpc();
        let listener =
            crate::endpoint::bind(&g.endpoint, &format!("receivers::{}", ctx.id)).await?;
        tracing::info!(receiver = %ctx.id, endpoint = %g.endpoint, "OTLP gRPC receiver listening");
        let recorder = crate::record::Recorder::for_config(
            self.cfg.record_to.as_deref(),
            self.cfg.record_max_files,
            &ctx.id,
        )?;
        let svc = ProfilesService {
            handler: Arc::new(Handler {
                id: ctx.id.clone(),
                output: ctx.output.clone(),
                telemetry: ctx.telemetry.clone(),
                recorder,
            }),
            max_recv_bytes: (g.max_recv_msg_size_mib as usize) << 20,
        };
        let settings = g.server_settings();
        let app = axum::Router::new().fallback_service(svc);
        Ok(profcol_pipeline::net::spawn(
            &format!("receivers::{}", ctx.id),
            listener,
            app,
            settings,
            ctx.shutdown.clone(),
        ))
    }
}

/// profiles/v1development still changes its field numbers between
/// opentelemetry-proto releases, so a sender built on another release
/// produces requests that decode into broken indices: say which one we speak.
const REVISION_HINT: &str =
    " (profcol reads profiles/v1development as in opentelemetry-proto v1.10.0; \
     a sender built on another release of this unstable proto encodes it differently)";

/// Turns one request into a batch for the pipelines.
struct Handler {
    id: String,
    output: Output,
    telemetry: Arc<Telemetry>,
    recorder: Option<crate::record::Recorder>,
}

impl Handler {
    /// Counts a refused request: its samples (0 when it could not be read)
    /// and the request itself, both with the reason.
    fn refused(&self, samples: u64, reason: &str) {
        self.telemetry
            .receiver_refused(&self.id, "grpc", samples, reason);
        self.telemetry.receiver_item(&self.id, "request", reason);
    }

    fn export(
        &self,
        req: Request<Received>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        let client_addr = req.remote_addr();
        // gRPC metadata as HTTP/2 headers, for `record_to`.
        let headers = self
            .recorder
            .as_ref()
            .map(|_| req.metadata().clone().into_headers());
        let Received { data, bytes } = req.into_inner();
        let data = data.map_err(|msg| {
            self.refused(0, "malformed");
            Status::invalid_argument(format!("{msg}{REVISION_HINT}"))
        })?;
        let mut batch = ProfileBatch::from_encoded(data, bytes.clone());
        batch.meta.transport = "grpc";
        batch.meta.client_addr = client_addr;
        let invalid = |e: &ValidationError| {
            // Broken indices and zero values are what another revision's
            // encoding decodes into; an empty sample is the sender's own.
            let hint = match e.problem {
                Problem::OutOfRange { .. } | Problem::NotZeroValue { .. } => REVISION_HINT,
                Problem::ValueCountMismatch { .. }
                | Problem::EmptySample
                | Problem::TimeOutOfRange { .. } => "",
            };
            format!("invalid profiles data: {e}{hint}")
        };
        let refuse = |samples: u64, e: &ValidationError| {
            self.refused(samples, "invalid");
            Err(Status::invalid_argument(invalid(e)))
        };
        // Invalid Profiles are left out and the rest accepted (OTLP's
        // partial success), unless nothing valid is left.
        let mut partial = None;
        match invalid_profiles(batch.data()) {
            Err(e) => return refuse(batch.sample_count(), &e),
            Ok(bad) if bad.is_empty() => {}
            Ok(bad) if bad.len() as u64 == batch.profile_count() => {
                return refuse(batch.sample_count(), &bad[0].1)
            }
            Ok(bad) => {
                let meta = std::mem::take(&mut batch.meta);
                let mut data = std::mem::take(batch.data_mut());
                let mut bad_at = bad.iter().map(|(at, _)| *at).peekable();
                let mut removed = 0;
                retain_profiles(&mut data, |at, p| {
                    let gone = bad_at.next_if_eq(&at).is_some();
                    removed += if gone { profile_sample_count(p) } else { 0 };
                    !gone
                });
                self.telemetry
                    .receiver_refused(&self.id, "grpc", removed, "invalid");
                partial = Some(ExportProfilesPartialSuccess {
                    rejected_profiles: bad.len() as i64,
                    error_message: invalid(&bad[0].1),
                });
                batch = ProfileBatch::new(data).with_meta(meta);
            }
        }
        match self.output.consume(batch) {
            Ok(()) => {
                if let (Some(r), Some(h)) = (&self.recorder, headers) {
                    r.record(crate::record::Recording {
                        method: "POST",
                        path: EXPORT_PATH.to_owned(),
                        query: String::new(),
                        http_version: "HTTP/2.0".to_owned(),
                        headers: crate::record::headers(&h),
                        transport: "grpc",
                        body: bytes,
                        ext: "binpb",
                    });
                }
                Ok(Response::new(ExportProfilesServiceResponse {
                    partial_success: partial,
                }))
            }
            // The samples were counted as refused by `consume`; the request
            // is counted by `oversize_is_resource_exhausted`, which sees
            // every RESOURCE_EXHAUSTED answer.
            Err(e @ ConsumeError::TooLarge { .. }) => {
                Err(Status::resource_exhausted(e.to_string()))
            }
            Err(e @ (ConsumeError::Full { .. } | ConsumeError::ShuttingDown)) => {
                self.telemetry
                    .receiver_item(&self.id, "request", e.reason());
                Err(Status::unavailable(e.to_string()))
            }
        }
    }
}

struct ExportMethod(Arc<Handler>);

impl UnaryService<Received> for ExportMethod {
    type Response = ExportProfilesServiceResponse;
    type Future = std::future::Ready<Result<Response<Self::Response>, Status>>;

    fn call(&mut self, req: Request<Received>) -> Self::Future {
        std::future::ready(self.0.export(req))
    }
}

/// `ProfilesService` with our codec; written out instead of generated so the
/// request bytes survive decoding.
#[derive(Clone)]
struct ProfilesService {
    handler: Arc<Handler>,
    max_recv_bytes: usize,
}

impl NamedService for ProfilesService {
    const NAME: &'static str =
        "opentelemetry.proto.collector.profiles.v1development.ProfilesService";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

impl<B> tower::Service<http::Request<B>> for ProfilesService
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != EXPORT_PATH {
            let status = Status::unimplemented(format!("unknown method {}", req.uri().path()));
            return Box::pin(async move { Ok(status.into_http()) });
        }
        let handler = self.handler.clone();
        let max = self.max_recv_bytes;
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ExportCodec::default())
                .apply_compression_config(
                    [CompressionEncoding::Gzip, CompressionEncoding::Zstd]
                        .into_iter()
                        .fold(
                            Default::default(),
                            |mut e: tonic::codec::EnabledCompressionEncodings, c| {
                                e.enable(c);
                                e
                            },
                        ),
                    Default::default(),
                )
                .apply_max_message_size_config(Some(max), None);
            let resp = grpc.unary(ExportMethod(handler.clone()), req).await;
            Ok(oversize_is_resource_exhausted(resp, &handler))
        })
    }
}

/// tonic answers `OUT_OF_RANGE` for a message over the size limit (checked
/// on the length prefix, before the body is read); OTLP clients and the
/// Collector expect `RESOURCE_EXHAUSTED`, which is not retryable for them.
fn oversize_is_resource_exhausted(
    mut resp: http::Response<tonic::body::Body>,
    handler: &Handler,
) -> http::Response<tonic::body::Body> {
    let h = resp.headers_mut();
    let oversize = h.get("grpc-status").is_some_and(|v| v == "11")
        && h.get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| {
                m.contains("message%20length%20too%20large")
                    || m.contains("message length too large")
            });
    let bomb = h.get("grpc-status").is_some_and(|v| v == "8");
    if oversize {
        h.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    if oversize || bomb {
        handler.refused(0, "too_large");
    }
    resp
}
