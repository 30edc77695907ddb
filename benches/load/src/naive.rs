//! The baseline: what a straightforward Rust OTLP profiles proxy does with
//! tonic's generated code: decode each request with prost, re-encode it
//! for the next hop.

use opentelemetry_proto::tonic::collector::profiles::v1development::{
    profiles_service_client::ProfilesServiceClient,
    profiles_service_server::{ProfilesService, ProfilesServiceServer},
    ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

struct Proxy {
    next: ProfilesServiceClient<Channel>,
}

#[tonic::async_trait]
impl ProfilesService for Proxy {
    async fn export(
        &self,
        req: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        self.next.clone().export(req.into_inner()).await
    }
}

pub async fn serve(listen: &str, forward: &str, compression: &str) -> anyhow::Result<()> {
    let channel = Channel::from_shared(format!("http://{forward}"))?.connect_lazy();
    let mut next = ProfilesServiceClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    match compression {
        "gzip" => next = next.send_compressed(CompressionEncoding::Gzip),
        "zstd" => next = next.send_compressed(CompressionEncoding::Zstd),
        _ => {}
    }
    let svc = ProfilesServiceServer::new(Proxy { next })
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd)
        .max_decoding_message_size(64 << 20);
    tonic::transport::Server::builder()
        .add_service(svc)
        .serve(listen.parse()?)
        .await?;
    Ok(())
}
