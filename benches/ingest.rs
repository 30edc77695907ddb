//! What one OTLP request costs through the running receiver, over gRPC and
//! over OTLP/HTTP, on the same protobuf bytes (the medium request: 100k
//! samples, ~2 MB): connection handling, body read, decode, validation,
//! hand-off to a pipeline whose `debug` exporter only counts. Both clients
//! send pre-encoded bytes, so the figures are the collector's (and the
//! loopback's) work. The baseline is raw prost decode + encode of the bytes.
//!
//! `cargo bench --bench ingest`

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use http_body_util::BodyExt;
use prost::Message;
use tower::{Service, ServiceExt};

use profcol_model::proto::{ExportProfilesServiceRequest, EXPORT_PATH};
use profcol_model::synth;
use profcol_pipeline::runtime::RuntimeOptions;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One gRPC call with a framed message; panics unless it is accepted.
async fn grpc_export(channel: &mut tonic::transport::Channel, framed: Bytes) {
    let req = http::Request::builder()
        .method("POST")
        .uri(EXPORT_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(http_body_util::Full::new(framed)))
        .unwrap();
    let resp = channel.ready().await.unwrap().call(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let trailers = body.collect().await.unwrap().trailers().cloned();
    let status = parts
        .headers
        .get("grpc-status")
        .or_else(|| trailers.as_ref().and_then(|t| t.get("grpc-status")));
    assert_eq!(status.map(|s| s.as_bytes()), Some(&b"0"[..]));
}

fn main() {
    let message = Bytes::from(synth::request(100_000, 20_000).encode_to_vec());
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let framed = Bytes::from(framed);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (grpc, http) = (free_port(), free_port());
    let yaml = format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: "127.0.0.1:{grpc}", max_recv_msg_size_mib: 64}}
      http: {{endpoint: "127.0.0.1:{http}", max_request_body_size: 67108864}}
exporters:
  debug: {{verbosity: basic, sampling_initial: 0, sampling_thereafter: 1000000}}
service:
  telemetry: {{logs: {{level: error}}, metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [debug]}}
"#
    );
    let svc = rt
        .block_on(profcol::app::start_str(&yaml, RuntimeOptions::default()))
        .unwrap();
    let mut channel = rt.block_on(async {
        tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{grpc}"))
            .unwrap()
            .connect()
            .await
            .unwrap()
    });
    let web = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{http}/v1development/profiles");

    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(6))
        .configure_from_args();
    let mut g = c.benchmark_group("ingest_medium");
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("prost_decode_encode", |b| {
        b.iter(|| {
            let req = ExportProfilesServiceRequest::decode(black_box(&message[..])).unwrap();
            black_box(req.encode_to_vec().len())
        })
    });
    g.bench_function("grpc", |b| {
        b.iter(|| rt.block_on(grpc_export(&mut channel, framed.clone())))
    });
    g.bench_function("http_protobuf", |b| {
        b.iter(|| {
            rt.block_on(async {
                let resp = web
                    .post(&url)
                    .header("content-type", "application/x-protobuf")
                    .body(message.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                black_box(resp.bytes().await.unwrap());
            })
        })
    });
    g.finish();
    rt.block_on(svc.shutdown());
    c.final_summary();
}
