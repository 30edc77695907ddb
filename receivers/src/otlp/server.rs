use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response};
use http::{Request, StatusCode};

use profcol_model::proto::{ExportProfilesServiceResponse, EXPORT_PATH};
use profcol_pipeline::component::{Authenticator, Receiver, ReceiverContext};

use super::config::OtlpReceiverConfig;
use super::{grpc, http as otlp_http};
use crate::ingest::{self, Ingest, Origin, Refusal};

pub(super) struct OtlpReceiver {
    cfg: OtlpReceiverConfig,
}

impl OtlpReceiver {
    pub(super) fn new(cfg: OtlpReceiverConfig) -> Self {
        Self { cfg }
    }
}

#[async_trait]
impl Receiver for OtlpReceiver {
    fn endpoints(&self) -> Vec<String> {
        let g = self.cfg.grpc().map(|g| g.endpoint);
        let h = self.cfg.http().map(|h| h.server.endpoint);
        g.into_iter().chain(h).collect()
    }

    fn authenticators(&self) -> Vec<(String, String)> {
        self.cfg.authenticators()
    }

    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let name = format!("receivers::{}", ctx.id);
        let recorder = crate::record::Recorder::for_config(
            self.cfg.record_to.as_deref(),
            self.cfg.record_max_files,
            &ctx.id,
        )?
        .map(Arc::new);
        let ingest = Arc::new(Ingest::new(
            ctx.id.clone(),
            ctx.output.clone(),
            ctx.telemetry.clone(),
            self.cfg.on_invalid,
        ));
        let mut servers = Vec::new();
        if let Some(g) = self.cfg.grpc() {
            let grpc = format!("{name}::protocols::grpc");
            let opened = profcol_pipeline::net::open(
                &grpc,
                &g.endpoint,
                g.tls.as_ref(),
                g.server_settings(),
                &ctx.shutdown,
            )
            .await?;
            let auth = ctx.authenticators.resolve(g.auth.as_ref(), &grpc)?;
            tracing::info!(receiver = %ctx.id, endpoint = %g.endpoint, tls = g.tls.is_some(), "OTLP gRPC receiver listening");
            let service = Arc::new(GrpcService {
                ingest: ingest.clone(),
                recorder: recorder.clone(),
                max_recv_bytes: (g.max_recv_msg_size_mib as usize) << 20,
                include_metadata: g.include_metadata,
                auth,
            });
            let app = axum::Router::new().fallback(export).with_state(service);
            servers.push(opened.serve(app, ctx.shutdown.clone()));
        }
        if let Some(h) = self.cfg.http() {
            let http = format!("{name}::protocols::http");
            let opened = h.server.open(&http, &ctx.shutdown).await?;
            let auth = ctx.authenticators.resolve(h.server.auth.as_ref(), &http)?;
            tracing::info!(receiver = %ctx.id, endpoint = %h.server.endpoint, path = %h.profiles_url_path, tls = h.server.tls.is_some(), "OTLP/HTTP receiver listening");
            let app = otlp_http::router(&h, ingest.clone(), recorder.clone(), auth);
            servers.push(opened.serve(app, ctx.shutdown.clone()));
        }
        Ok(tokio::spawn(async move {
            for s in servers {
                let _ = s.await;
            }
        }))
    }
}

/// `ProfilesService/Export` over gRPC.
struct GrpcService {
    ingest: Arc<Ingest>,
    recorder: Option<Arc<crate::record::Recorder>>,
    max_recv_bytes: usize,
    include_metadata: bool,
    auth: Option<Arc<dyn Authenticator>>,
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
    let (parts, body) = req.into_parts();
    let origin = Origin {
        transport: "grpc",
        client: Some(peer),
        metadata: if svc.include_metadata {
            ingest::metadata(&parts.headers)
        } else {
            Vec::new()
        },
        resource: Vec::new(),
    };
    if let Err(r) = ingest::authenticate(svc.auth.as_ref(), &parts.headers)
        .and_then(|()| super::check_development_version(&parts.headers))
    {
        return refused(&svc.ingest, &origin, r);
    }
    let budget = svc.ingest.output.budget().clone();
    let (bytes, memory, compressed) =
        match grpc::read_message(&parts.headers, body, svc.max_recv_bytes, &budget).await {
            Ok(m) => m,
            Err(r) => return refused(&svc.ingest, &origin, r),
        };
    match svc
        .ingest
        .otlp(bytes.clone(), compressed, memory, origin)
        .await
    {
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
fn refused(ingest: &Ingest, origin: &Origin, r: Refusal) -> Response {
    ingest.refused(origin, 0, &r);
    grpc::error(r.grpc_status())
}
