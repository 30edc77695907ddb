//! A request that arrives compressed and that nothing changes leaves as
//! its client compressed it, when the exporter compresses the same way:
//! the bytes a peer receives are the client's, not profcol's level-1
//! recompression of them.

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use common::Ports;
use http_body_util::BodyExt;
use profcol_model::proto::{ExportProfilesServiceRequest, ProfilesData};
use profcol_pipeline::runtime::RuntimeOptions;
use prost::Message;

/// What a peer received: the path, `grpc-encoding` or `Content-Encoding`,
/// and the message (a gRPC frame's payload) or body, as sent.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    encoding: Option<String>,
    bytes: Bytes,
}

type Log = Arc<Mutex<Vec<Received>>>;

/// An OTLP peer over gRPC (h2c) and HTTP that keeps the raw bytes.
async fn raw_peer() -> (u16, Log) {
    async fn take(State(log): State<Log>, req: axum::extract::Request) -> axum::response::Response {
        let path = req.uri().path().to_owned();
        let grpc = path.ends_with("/Export");
        let encoding_header = if grpc {
            "grpc-encoding"
        } else {
            "content-encoding"
        };
        let encoding = header(req.headers(), encoding_header);
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let bytes = if grpc {
            assert_eq!(body[0], u8::from(encoding.is_some()), "compressed flag");
            let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, body.len() - 5, "one message");
            body.slice(5..)
        } else {
            body
        };
        log.lock().unwrap().push(Received {
            path,
            encoding,
            bytes,
        });
        if grpc {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", "0".parse().unwrap());
            let frame = http_body_util::Full::new(Bytes::from_static(&[0, 0, 0, 0, 0]))
                .map_err(|never: std::convert::Infallible| -> std::io::Error { match never {} })
                .with_trailers(async move { Some(Ok(trailers)) });
            axum::response::Response::builder()
                .header("content-type", "application/grpc")
                .body(Body::new(frame))
                .unwrap()
        } else {
            axum::response::Response::builder()
                .header("content-type", "application/x-protobuf")
                .body(Body::empty())
                .unwrap()
        }
    }
    let log: Log = Arc::default();
    let app = axum::Router::new().fallback(take).with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, log)
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// Receivers on both protocols to an `otlp` and an `otlphttp` exporter
/// with `compression`, through `processors`.
fn config(peer: u16, compression: &str, processors: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: "127.0.0.1:0"}}
      http: {{endpoint: "127.0.0.1:0"}}
processors:
  resource:
    attributes: [{{key: deployment.environment, value: prod, action: upsert}}]
exporters:
  otlp:
    endpoint: 127.0.0.1:{peer}
    tls: {{insecure: true}}
    compression: {compression}
  otlphttp:
    endpoint: http://127.0.0.1:{peer}
    compression: {compression}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [{processors}]
      exporters: [otlp, otlphttp]
"#
    )
}

fn gzip_best(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn inflate(r: &Received) -> ProfilesData {
    let plain = match r.encoding.as_deref() {
        Some("gzip") => {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&r.bytes[..]), &mut out)
                .unwrap();
            out
        }
        Some("zstd") => zstd::decode_all(&r.bytes[..]).unwrap(),
        None => r.bytes.to_vec(),
        Some(other) => panic!("{other}"),
    };
    ProfilesData::decode(&plain[..]).unwrap()
}

/// Sends `message` compressed as `body` (`encoding`) once over gRPC and
/// once over HTTP; what the peer got from both exporters for each.
async fn send_both_ways(yaml: &str, body: &[u8], encoding: &str, log: &Log) -> Vec<Received> {
    let svc = profcol::app::start_str(yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let mut channel =
        tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{}", svc.grpc_port()))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let framed = common::grpc_frame(body, true);
    assert_eq!(
        common::export_framed(&mut channel, framed, Some(encoding)).await,
        0
    );
    let resp = reqwest::Client::new()
        .post(format!(
            "http://127.0.0.1:{}/v1development/profiles",
            svc.http_port()
        ))
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", encoding)
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    svc.shutdown().await;
    let got = log.lock().unwrap().clone();
    assert_eq!(got.len(), 4, "two requests to two exporters: {got:?}");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_request_leaves_as_its_client_compressed_it() {
    let request = common::request("otlp/go-cpu.otlp.bin");
    let plain = request.encode_to_vec();
    // At gzip's best level, which profcol (level 1) would not reproduce.
    let body = gzip_best(&plain);
    let (peer, log) = raw_peer().await;
    let got = send_both_ways(&config(peer, "gzip", ""), &body, "gzip", &log).await;
    let paths: Vec<_> = got.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths.iter().filter(|p| p.ends_with("/Export")).count(),
        2,
        "{paths:?}"
    );
    for r in &got {
        assert_eq!(r.encoding.as_deref(), Some("gzip"), "{}", r.path);
        assert!(r.bytes == body, "{}: the client's bytes, as sent", r.path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_or_differently_compressed_request_is_compressed_anew() {
    let request: ExportProfilesServiceRequest = common::request("otlp/go-cpu.otlp.bin");
    let plain = request.encode_to_vec();
    let expected = ProfilesData::decode(&plain[..]).unwrap();
    // zstd in, gzip out: inflated, sent compressed by the exporter.
    let zstd_body = zstd::encode_all(&plain[..], 19).unwrap();
    let (peer, log) = raw_peer().await;
    let got = send_both_ways(&config(peer, "gzip", ""), &zstd_body, "zstd", &log).await;
    for r in &got {
        assert_eq!(r.encoding.as_deref(), Some("gzip"), "{}", r.path);
        assert_eq!(inflate(r), expected, "{}", r.path);
    }
    // gzip in, no compression out: the plain bytes as received.
    let (peer, log) = raw_peer().await;
    let got = send_both_ways(&config(peer, "none", ""), &gzip_best(&plain), "gzip", &log).await;
    for r in &got {
        assert_eq!(r.encoding, None, "{}", r.path);
        assert!(r.bytes == plain, "{}", r.path);
    }
    // A processor that changes the request: its change arrives.
    let (peer, log) = raw_peer().await;
    let body = gzip_best(&plain);
    let got = send_both_ways(&config(peer, "gzip", "resource"), &body, "gzip", &log).await;
    for r in &got {
        assert!(r.bytes != body, "{}", r.path);
        let data = inflate(r);
        for rp in &data.resource_profiles {
            let attrs = &rp.resource.as_ref().unwrap().attributes;
            assert!(
                attrs.iter().any(|kv| kv.key == "deployment.environment"),
                "{}: {attrs:?}",
                r.path
            );
        }
    }
}
