//! A sink that answers every export OK and counts requests and bytes,
//! without decoding (so that it takes little of the machine's CPU); with
//! `decode`, it also counts samples.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use prost::Message;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, UnaryService};
use tonic::{Request, Response, Status};

use profcol_model::proto::{ExportProfilesServiceResponse, ProfilesData, EXPORT_PATH};

#[derive(Default, Debug)]
pub struct Counts {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
    pub samples: AtomicU64,
}

pub struct Sink {
    pub addr: SocketAddr,
    counts: Arc<Counts>,
    _task: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub async fn start(listen: &str, decode: bool) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let svc = RawService {
            counts: counts.clone(),
            decode,
        };
        let incoming = tokio_stream_from(listener);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(incoming)
                .await;
        });
        Ok(Self {
            addr,
            counts,
            _task: task,
        })
    }

    /// (requests, bytes, samples) so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.counts.requests.load(Ordering::Relaxed),
            self.counts.bytes.load(Ordering::Relaxed),
            self.counts.samples.load(Ordering::Relaxed),
        )
    }
}

fn tokio_stream_from(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |l| async move {
        let r = l.accept().await.map(|(s, _)| {
            let _ = s.set_nodelay(true);
            s
        });
        Some((r, l))
    })
}

#[derive(Clone)]
struct RawService {
    counts: Arc<Counts>,
    decode: bool,
}

impl NamedService for RawService {
    const NAME: &'static str =
        "opentelemetry.proto.collector.profiles.v1development.ProfilesService";
}

struct Export(RawService);

impl UnaryService<Bytes> for Export {
    type Response = ExportProfilesServiceResponse;
    type Future = std::future::Ready<Result<Response<Self::Response>, Status>>;

    fn call(&mut self, req: Request<Bytes>) -> Self::Future {
        let bytes = req.into_inner();
        let c = &self.0.counts;
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if self.0.decode {
            if let Ok(d) = ProfilesData::decode(bytes) {
                let n = profcol_model::ProfileBatch::new(d).sample_count();
                c.samples.fetch_add(n, Ordering::Relaxed);
            }
        }
        std::future::ready(Ok(Response::new(ExportProfilesServiceResponse::default())))
    }
}

impl<B> tower_service::Service<http::Request<B>> for RawService
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let svc = self.clone();
        Box::pin(async move {
            if req.uri().path() != EXPORT_PATH {
                return Ok(Status::unimplemented("unknown method").into_http());
            }
            let mut grpc = tonic::server::Grpc::new(RawCodec)
                .accept_compressed(CompressionEncoding::Gzip)
                .accept_compressed(CompressionEncoding::Zstd)
                .max_decoding_message_size(usize::MAX);
            Ok(grpc.unary(Export(svc), req).await)
        })
    }
}

#[derive(Default, Clone, Copy)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = ExportProfilesServiceResponse;
    type Decode = Bytes;
    type Encoder = RespEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RespEncoder {
        RespEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

pub struct RespEncoder;
impl Encoder for RespEncoder {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;
    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(buf)
            .map_err(|e| Status::internal(e.to_string()))
    }
}

pub struct RawDecoder;
impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
