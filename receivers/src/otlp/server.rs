use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response};
use http::{Request, StatusCode};

use profcol_pipeline::component::{Receiver, ReceiverContext};
use profcol_pipeline::proto::{ExportProfilesServiceResponse, EXPORT_PATH};

use super::config::OtlpReceiverConfig;
use super::grpc;
use crate::ingest::{Ingest, Origin, Refusal};

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
        let service = Arc::new(GrpcService {
            ingest: Ingest {
                id: ctx.id.clone(),
                output: ctx.output.clone(),
                telemetry: ctx.telemetry.clone(),
            },
            recorder,
            max_recv_bytes: (g.max_recv_msg_size_mib as usize) << 20,
        });
        let app = axum::Router::new().fallback(export).with_state(service);
        Ok(profcol_pipeline::net::spawn(
            &format!("receivers::{}", ctx.id),
            listener,
            app,
            g.server_settings(),
            ctx.shutdown.clone(),
        ))
    }
}

/// `ProfilesService/Export` over gRPC.
struct GrpcService {
    ingest: Ingest,
    recorder: Option<crate::record::Recorder>,
    max_recv_bytes: usize,
}

async fn export(
    State(svc): State<Arc<GrpcService>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    req: Request<Body>,
) -> Response {
    if !grpc::is_grpc(req.headers()) {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "this endpoint takes gRPC (content-type application/grpc)",
        )
            .into_response();
    }
    if req.uri().path() != EXPORT_PATH {
        return grpc::error(tonic::Status::unimplemented(format!(
            "unknown method {}",
            req.uri().path()
        )));
    }
    let origin = Origin {
        transport: "grpc",
        client: Some(peer),
    };
    let (parts, body) = req.into_parts();
    let budget = svc.ingest.output.budget().clone();
    let (bytes, memory) =
        match grpc::read_message(&parts.headers, body, svc.max_recv_bytes, &budget).await {
            Ok(m) => m,
            Err(r) => return refused(&svc, origin, r),
        };
    match svc.ingest.otlp(bytes.clone(), memory, origin).await {
        Ok(accepted) => {
            if let Some(r) = &svc.recorder {
                r.record(crate::record::Recording {
                    method: "POST",
                    path: EXPORT_PATH.to_owned(),
                    query: String::new(),
                    http_version: "HTTP/2.0".to_owned(),
                    headers: crate::record::headers(&parts.headers),
                    transport: "grpc",
                    body: bytes,
                    ext: "binpb",
                });
            }
            grpc::ok(&ExportProfilesServiceResponse {
                partial_success: accepted.partial,
            })
        }
        Err(r) => grpc::error(r.grpc_status()),
    }
}

/// A request refused before it reached the ingest path: counted there.
fn refused(svc: &GrpcService, origin: Origin, r: Refusal) -> Response {
    svc.ingest.refused(origin, 0, &r);
    grpc::error(r.grpc_status())
}
