//! The baseline: what a straightforward Rust OTLP profiles proxy does with
//! tonic's generated server and prost: decode each request, re-encode it
//! for the next hop, compressed at the level profcol uses (tonic's own
//! client would gzip at level 6, which costs several times more).

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    profiles_service_server::{ProfilesService, ProfilesServiceServer},
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::load::{export, frame_bytes};

struct Proxy {
    next: Channel,
    compression: String,
}

#[tonic::async_trait]
impl ProfilesService for Proxy {
    async fn export(
        &self,
        req: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        let bytes = Bytes::from(req.into_inner().encode_to_vec());
        let framed =
            frame_bytes(&bytes, &self.compression).map_err(|e| Status::internal(e.to_string()))?;
        match export(self.next.clone(), framed, &self.compression).await {
            Ok(0) => Ok(Response::new(ExportProfilesServiceResponse::default())),
            Ok(code) | Err(code) => Err(Status::new(code.into(), "the next hop failed")),
        }
    }
}

pub async fn serve(listen: &str, forward: &str, compression: &str) -> anyhow::Result<()> {
    let next = Channel::from_shared(format!("http://{forward}"))?.connect_lazy();
    let svc = ProfilesServiceServer::new(Proxy {
        next,
        compression: compression.to_owned(),
    })
    .accept_compressed(CompressionEncoding::Gzip)
    .accept_compressed(CompressionEncoding::Zstd)
    .max_decoding_message_size(64 << 20);
    tonic::transport::Server::builder()
        .add_service(svc)
        .serve(listen.parse()?)
        .await?;
    Ok(())
}
