use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_otlp::json as otlp_json;
use profcol_pipeline::component::{ExportError, Exporter, ExporterContext, Request};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::runtime::create_exporter;
use profcol_pipeline::telemetry::Telemetry;

use super::*;
use crate::otlp::Compression;

fn section(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Exporter, "otlphttp/gw", yaml).unwrap()
}

fn decode(yaml: &str) -> Result<OtlpHttpExporterConfig, String> {
    let cfg = section(yaml);
    let c: OtlpHttpExporterConfig = cfg.decode().map_err(|e| e.to_string())?;
    c.validate(&cfg).map_err(|e| e.to_string())?;
    Ok(c)
}

/// The errors of the whole section, as `profcol validate` reports them.
fn create_errors(yaml: &str) -> String {
    match create_exporter(&*factory(), &section(yaml)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted {yaml}"),
    }
}

#[test]
fn defaults_are_the_collectors() {
    let c: OtlpHttpExporterConfig = section("{}").decode().unwrap();
    assert_eq!(c, OtlpHttpExporterConfig::default());
    assert_eq!(
        (c.encoding, c.compression),
        (Encoding::Proto, Compression::Gzip)
    );
    let (_, s) = create_exporter(&*factory(), &section("endpoint: http://gw")).unwrap();
    assert_eq!(s.timeout, StdDuration::from_secs(30));
    assert_eq!(
        c.validate(&section("{}")).unwrap_err().to_string(),
        "exporters::otlphttp/gw::endpoint: is required (or profiles_endpoint)"
    );
}

/// The Collector's `confighttp` buffer sizes load and change nothing.
#[test]
fn buffer_sizes_are_accepted() {
    let c = decode("endpoint: http://gw\nread_buffer_size: 123\nwrite_buffer_size: 345").unwrap();
    assert_eq!(
        (c.read_buffer_size, c.write_buffer_size),
        (Some(123), Some(345))
    );
}

#[test]
fn the_signal_path_is_appended_unless_the_full_url_is_given() {
    let c = decode("endpoint: https://gw:4318/").unwrap();
    assert_eq!(c.url(), "https://gw:4318/v1development/profiles");
    let c = decode("endpoint: http://gw\nprofiles_endpoint: http://other:9/custom").unwrap();
    assert_eq!(c.url(), "http://other:9/custom");
}

#[test]
fn invalid_settings_name_their_key() {
    for (yaml, want) in [
        ("endpoint: gw:4318", "exporters::otlphttp/gw::endpoint: \"gw:4318/v1development/profiles\" is not an http:// or https:// URL"),
        ("endpoint: http://gw\nencoding: protobuf", "exporters::otlphttp/gw::encoding"),
        ("endpoint: http://gw\ncompression: br", "exporters::otlphttp/gw::compression"),
        ("endpoint: http://gw\ncompression: snappy\ncompression_params: {level: 1}", "exporters::otlphttp/gw::compression_params::level: unsupported level 1 for compression \"snappy\""),
        ("endpoint: http://gw\ncompression: zlib\ncompression_params: {level: 10}", "exporters::otlphttp/gw::compression_params::level: unsupported level 10 for compression \"zlib\" (-1 or 1 to 9)"),
        ("endpoint: http://gw\ntimeout: 0s", "exporters::otlphttp/gw::timeout: must be greater than 0"),
        ("endpoint: http://gw\ntls: {cert_file: a.pem}", "exporters::otlphttp/gw::tls: cert_file and key_file must be set together"),
        ("endpoint: http://gw\nheaders: {\"bad name\": x}", "exporters::otlphttp/gw::headers::bad name: invalid header name"),
        ("endpoint: http://gw\nretries: 3", "exporters::otlphttp/gw: unknown field \"retries\""),
        ("endpoint: http://gw\nproxy_url: socks5://127.0.0.1:1080", "exporters::otlphttp/gw::proxy_url: \"socks5://127.0.0.1:1080\" is not an http:// or https:// proxy (socks5 proxies are not supported)"),
        ("endpoint: http://gw\nproxy_url: not a url", "exporters::otlphttp/gw::proxy_url: invalid URL \"not a url\""),
        ("endpoint: http://gw\ncompression_params: {level: 10}", "exporters::otlphttp/gw::compression_params::level: unsupported level 10 for compression \"gzip\" (-1 or 1 to 9)"),
        ("endpoint: http://gw\ncompression_params: {level: -2}", "exporters::otlphttp/gw::compression_params::level: unsupported level -2 for compression \"gzip\""),
        ("endpoint: http://gw\ncompression: none\ncompression_params: {level: 3}", "exporters::otlphttp/gw::compression_params::level: unsupported level 3 for compression \"none\""),
        ("endpoint: http://gw\ncookies: {enabled: maybe}", "exporters::otlphttp/gw::cookies::enabled"),
    ] {
        let err = create_errors(yaml);
        assert!(err.contains(want), "{yaml}\n  got: {err}\n want: {want}");
    }
}

#[test]
fn unreadable_tls_files_name_their_key() {
    let cfg = section("endpoint: https://gw\ntls: {ca_file: /nonexistent/ca.pem}");
    let c: OtlpHttpExporterConfig = cfg.decode().unwrap();
    let err = OtlpHttpExporter::new(&c, &cfg, StdDuration::from_secs(30))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("exporters::otlphttp/gw::tls::ca_file: cannot read /nonexistent/ca.pem"),
        "{err}"
    );
}

/// What the fake server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

type Reply = (StatusCode, HeaderMap, Vec<u8>);

/// A server that records every request and answers with the next of
/// `replies` (the last one repeats).
async fn server(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let replies = Arc::new(Mutex::new(replies));
    let s = seen.clone();
    let handler = move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
        let (seen, replies) = (s.clone(), replies.clone());
        async move {
            seen.lock().unwrap().push(Seen {
                path: uri.path().to_owned(),
                headers,
                body: body.to_vec(),
            });
            let mut r = replies.lock().unwrap();
            if r.len() > 1 {
                r.remove(0)
            } else {
                r[0].clone()
            }
        }
    };
    let app = axum::Router::new()
        .route(
            "/v1development/profiles",
            axum::routing::post(handler.clone()),
        )
        .route("/v1/metrics", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn ok() -> Reply {
    (StatusCode::OK, HeaderMap::new(), Vec::new())
}

fn exporter(endpoint: &str, extra: &str) -> OtlpHttpExporter {
    let cfg = section(&format!("endpoint: {endpoint}\n{extra}"));
    let c: OtlpHttpExporterConfig = cfg.decode().unwrap();
    c.validate(&cfg).unwrap();
    OtlpHttpExporter::new(&c, &cfg, StdDuration::from_secs(30)).unwrap()
}

fn ctx() -> ExporterContext {
    ExporterContext {
        id: "otlphttp/gw".into(),
        telemetry: Arc::new(Telemetry::new()),
        authenticators: Default::default(),
        budget: profcol_model::memory::MemoryBudget::new(1 << 30),
    }
}

fn received() -> Arc<ProfileBatch> {
    let bytes = profcol_model::testing::fixture("otlp/go-cpu.otlp.bin");
    Arc::new(ProfileBatch::decode(bytes.into()).unwrap())
}

fn plain(seen: &Seen) -> Vec<u8> {
    let mut out = Vec::new();
    match seen
        .headers
        .get("content-encoding")
        .map(|v| v.to_str().unwrap())
    {
        None => out = seen.body.clone(),
        Some("gzip") => {
            flate2::read::GzDecoder::new(seen.body.as_slice())
                .read_to_end(&mut out)
                .unwrap();
        }
        Some("zstd") => out = zstd::decode_all(seen.body.as_slice()).unwrap(),
        Some("zlib" | "deflate") => {
            flate2::read::ZlibDecoder::new(seen.body.as_slice())
                .read_to_end(&mut out)
                .unwrap();
        }
        Some("snappy") => {
            out = snap::raw::Decoder::new()
                .decompress_vec(&seen.body)
                .unwrap()
        }
        Some("x-snappy-framed") => {
            snap::read::FrameDecoder::new(seen.body.as_slice())
                .read_to_end(&mut out)
                .unwrap();
        }
        Some("lz4") => {
            lz4::Decoder::new(seen.body.as_slice())
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
        }
        Some(other) => panic!("unexpected content-encoding {other}"),
    }
    out
}

#[tokio::test]
async fn every_encoding_and_compression_carries_the_same_profiles() {
    let batch = received();
    let want = batch.data().clone();
    for (extra, content_type, encoding) in [
        ("", "application/x-protobuf", Some("gzip")),
        ("compression: none", "application/x-protobuf", None),
        ("compression: zstd", "application/x-protobuf", Some("zstd")),
        ("compression: zlib", "application/x-protobuf", Some("zlib")),
        (
            "compression: deflate\ncompression_params: {level: 9}",
            "application/x-protobuf",
            Some("deflate"),
        ),
        (
            "compression: snappy",
            "application/x-protobuf",
            Some("snappy"),
        ),
        (
            "compression: x-snappy-framed",
            "application/x-protobuf",
            Some("x-snappy-framed"),
        ),
        ("compression: lz4", "application/x-protobuf", Some("lz4")),
        ("encoding: json", "application/json", Some("gzip")),
        (
            "encoding: json\ncompression: snappy",
            "application/json",
            Some("snappy"),
        ),
        (
            "encoding: json\ncompression: none",
            "application/json",
            None,
        ),
    ] {
        let (url, seen) = server(vec![ok()]).await;
        let e = exporter(
            &url,
            &format!("headers: {{x-scope-orgid: team-a}}\n{extra}"),
        );
        let outcome = e
            .export(&Request::new(batch.clone()), &ctx())
            .await
            .unwrap();
        assert_eq!(outcome.rejected, 0);
        let seen = seen.lock().unwrap()[0].clone();
        let h = |k: &str| seen.headers.get(k).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(h("content-type").as_deref(), Some(content_type), "{extra}");
        assert_eq!(h("content-encoding").as_deref(), encoding, "{extra}");
        assert_eq!(h("x-scope-orgid").as_deref(), Some("team-a"));
        assert!(h("user-agent").unwrap().starts_with("profcol/"));
        let body = plain(&seen);
        let got = if content_type == "application/json" {
            otlp_json::decode(&body).unwrap()
        } else {
            ProfilesData::decode(body.as_slice()).unwrap()
        };
        assert_eq!(got, want, "{extra}");
    }
}

/// A peer on an older revision gets that revision, in protobuf and in
/// JSON, even for a batch that passes through unchanged; a peer that reads
/// it back gets the same profiles.
#[tokio::test]
async fn proto_revision_sends_an_older_revision_in_either_encoding() {
    use profcol_otlp::revisions::{self as otlp_revisions, Revision};

    let batch = received();
    let want = batch.data().clone();
    for (extra, revision) in [
        (
            "compression: none\nproto_revision: v1.8.0",
            Revision::V1_8_0,
        ),
        ("proto_revision: v1.7.0", Revision::V1_7_0),
        ("encoding: json\nproto_revision: v1.8.0", Revision::V1_8_0),
        ("encoding: json\nproto_revision: v1.7.0", Revision::V1_7_0),
    ] {
        let (url, seen) = server(vec![ok()]).await;
        exporter(&url, extra)
            .export(&Request::new(batch.clone()), &ctx())
            .await
            .unwrap();
        let body = plain(&seen.lock().unwrap()[0]);
        let d = if extra.contains("json") {
            otlp_json::decode_any(&body).unwrap()
        } else {
            otlp_revisions::decode(&body.into()).unwrap()
        };
        // v1.8.0 bytes without profile ids or comments mean the same in
        // v1.9.0, which a reader takes (the newest); JSON names tell.
        assert!(d.revision >= revision, "{extra}");
        if extra.contains("json") {
            assert_eq!(d.revision, revision, "{extra}");
        }
        assert!(d.findings.is_valid(), "{extra}");
        let mut sent = Vec::new();
        otlp_revisions::encode_as(&want, revision, &mut sent).unwrap();
        let meant = otlp_revisions::read_as(revision, &sent.into())
            .unwrap()
            .data;
        assert_eq!(d.data, meant, "{extra}");
        if revision == Revision::V1_8_0 {
            // Lossless: the batch itself, string references resolved.
            let mut resolved = want.clone();
            profcol_model::dictionary::resolve_references(&mut resolved);
            assert_eq!(d.data, resolved, "{extra}");
        }
    }
    let err = create_errors("endpoint: http://gw\nproto_revision: v2");
    assert!(err.contains("otlphttp/gw::proto_revision"), "{err}");
}

#[tokio::test]
async fn an_unchanged_protobuf_batch_is_sent_as_received() {
    let bytes = profcol_model::testing::fixture("otlp/go-cpu.otlp.bin");
    let (url, seen) = server(vec![ok()]).await;
    let e = exporter(&url, "compression: none");
    e.export(&Request::new(received()), &ctx()).await.unwrap();
    assert_eq!(seen.lock().unwrap()[0].body, bytes);
}

#[tokio::test]
async fn partial_success_counts_rejected_samples() {
    let batch = received();
    let body = br#"{"partialSuccess":{"rejectedProfiles":"1000","errorMessage":"too old"}}"#;
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    let (url, _) = server(vec![(StatusCode::OK, headers, body.to_vec())]).await;
    let outcome = exporter(&url, "")
        .export(&Request::new(batch.clone()), &ctx())
        .await
        .unwrap();
    // More rejected profiles than sent: the whole batch.
    assert_eq!(outcome.rejected, batch.sample_count());
}

#[tokio::test]
async fn failures_are_classified_with_the_servers_message_and_delay() {
    let status = |code: i32, message: &str| {
        tonic_types::pb::Status {
            code,
            message: message.into(),
            details: Vec::new(),
        }
        .encode_to_vec()
    };
    let mut throttle = HeaderMap::new();
    throttle.insert("retry-after", "3".parse().unwrap());
    throttle.insert("content-type", "application/x-protobuf".parse().unwrap());
    let mut proto = HeaderMap::new();
    proto.insert("content-type", "application/x-protobuf".parse().unwrap());
    let (url, _) = server(vec![
        (
            StatusCode::TOO_MANY_REQUESTS,
            throttle,
            status(8, "slow down"),
        ),
        (StatusCode::BAD_REQUEST, proto, status(3, "bad profile")),
    ])
    .await;
    let e = exporter(&url, "");
    match e.export(&Request::new(received()), &ctx()).await {
        Err(ExportError::Retryable {
            message,
            retry_after,
        }) => {
            assert_eq!(retry_after, Some(StdDuration::from_secs(3)));
            assert!(
                message.ends_with("/v1development/profiles: HTTP 429: slow down"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    match e.export(&Request::new(received()), &ctx()).await {
        Err(ExportError::Permanent { message }) => {
            assert!(message.ends_with("HTTP 400: bad profile"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_closed_port_is_retried() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = exporter(&format!("http://127.0.0.1:{port}"), "");
    match e.export(&Request::new(received()), &ctx()).await {
        Err(ExportError::Retryable { message, .. }) => {
            assert!(message.contains("onnect"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

fn metrics_request() -> profcol_model::proto::metrics::ExportMetricsServiceRequest {
    use profcol_model::proto::metrics::*;
    let point = |v: i64| NumberDataPoint {
        value: Some(number_data_point::Value::AsInt(v)),
        time_unix_nano: 1_700_000_000_000_000_000,
        ..Default::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "cpu".into(),
                    unit: "ns".into(),
                    data: Some(metric::Data::Sum(Sum {
                        data_points: vec![point(1), point(2), point(3)],
                        aggregation_temporality: 1,
                        is_monotonic: true,
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Metrics go to `/v1/metrics` (or `metrics_endpoint`) in either
/// encoding and compression, and read back as they were sent.
#[tokio::test]
async fn metrics_are_posted_to_v1_metrics() {
    use profcol_model::proto::metrics::ExportMetricsServiceRequest;
    use profcol_pipeline::component::ExportOutcome;
    let (url, seen) = server(vec![ok()]).await;
    let req = metrics_request();
    for extra in ["", "encoding: json\ncompression: none", "compression: zstd"] {
        let e = exporter(&url, extra);
        assert!(e.exports_metrics());
        let outcome = e.export_metrics(&req, &ctx()).await.unwrap();
        assert_eq!(outcome, ExportOutcome::delivered());
        let got = seen.lock().unwrap().pop().unwrap();
        assert_eq!(got.path, "/v1/metrics");
        let body = plain(&got);
        let back: ExportMetricsServiceRequest = if extra.contains("json") {
            assert_eq!(got.headers["content-type"], "application/json");
            serde_json::from_slice(&body).unwrap()
        } else {
            assert_eq!(got.headers["content-type"], "application/x-protobuf");
            ExportMetricsServiceRequest::decode(body.as_slice()).unwrap()
        };
        assert_eq!(back, req, "{extra}");
    }
    let e = exporter(
        "http://unused",
        &format!("metrics_endpoint: {url}/v1/metrics"),
    );
    e.export_metrics(&req, &ctx()).await.unwrap();
    assert_eq!(seen.lock().unwrap().pop().unwrap().path, "/v1/metrics");
}

/// Profiles go with exactly one `OTLP-Profiles-Development-Version: 1`, in
/// either encoding, whatever `headers` sets under that name in any case; a
/// peer on an older revision (older than the mechanism) gets what `headers`
/// says, and metrics never carry it.
#[tokio::test]
async fn profiles_carry_their_development_version() {
    let batch = received();
    let (url, seen) = server(vec![ok()]).await;
    let versions = |seen: &Seen| -> Vec<String> {
        seen.headers
            .get_all("otlp-profiles-development-version")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    };
    for (extra, want) in [
        ("", vec!["1"]),
        ("encoding: json", vec!["1"]),
        (
            "headers: {OTLP-Profiles-Development-Version: '7'}",
            vec!["1"],
        ),
        (
            "headers: {otlp-profiles-development-version: ''}",
            vec!["1"],
        ),
        ("proto_revision: v1.9.0", vec![]),
        (
            "proto_revision: v1.9.0\nheaders: {otlp-profiles-development-version: '1'}",
            vec!["1"],
        ),
    ] {
        let e = exporter(&url, extra);
        e.export(&Request::new(batch.clone()), &ctx())
            .await
            .unwrap();
        let got = seen.lock().unwrap().pop().unwrap();
        assert_eq!(versions(&got), want, "{extra}");
    }
    let e = exporter(&url, "");
    e.export_metrics(&metrics_request(), &ctx()).await.unwrap();
    assert_eq!(
        versions(&seen.lock().unwrap().pop().unwrap()),
        Vec::<String>::new()
    );
}

/// confighttp's `keepalive`: by default two exports share one connection;
/// with `enabled: false` each opens its own.
#[tokio::test]
async fn keepalive_decides_whether_connections_are_reused() {
    let peers = Arc::new(Mutex::new(Vec::new()));
    let seen = peers.clone();
    let handler = move |axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<
        std::net::SocketAddr,
    >| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(peer);
            StatusCode::OK
        }
    };
    let app = axum::Router::new().route("/v1development/profiles", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
        .unwrap()
    });
    let batch = received();
    for (extra, reused) in [
        ("", true),
        (
            "keepalive: {idle_conn_timeout: 30s, max_idle_conns: 10}",
            true,
        ),
        ("keepalive: {enabled: false}", false),
    ] {
        let e = exporter(&url, extra);
        for _ in 0..2 {
            e.export(&Request::new(batch.clone()), &ctx())
                .await
                .unwrap();
        }
        let p = std::mem::take(&mut *peers.lock().unwrap());
        assert_eq!(p.len(), 2);
        assert_eq!(p[0] == p[1], reused, "{extra:?}: {p:?}");
    }
    let cfg = section(&format!("endpoint: {url}\nkeepalive: {{max_idle_con: 1}}"));
    let err = cfg
        .decode::<OtlpHttpExporterConfig>()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("keepalive: unknown field \"max_idle_con\""),
        "{err}"
    );
}

/// `max_conns_per_host`: four exports at once reach the peer one at a
/// time with 1, together without it.
#[tokio::test]
async fn max_conns_per_host_bounds_the_requests_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (n, m) = (now.clone(), most.clone());
    let handler = move || {
        let (n, m) = (n.clone(), m.clone());
        async move {
            m.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            tokio::time::sleep(StdDuration::from_millis(50)).await;
            n.fetch_sub(1, Ordering::SeqCst);
            StatusCode::OK
        }
    };
    let app = axum::Router::new().route("/v1development/profiles", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let batch = received();
    for (extra, want) in [("max_conns_per_host: 1", 1), ("", 4)] {
        most.store(0, Ordering::SeqCst);
        let e = Arc::new(exporter(&url, extra));
        let sends: Vec<_> = (0..4)
            .map(|_| {
                let (e, b) = (e.clone(), batch.clone());
                tokio::spawn(async move { e.export(&Request::new(b), &ctx()).await.unwrap() })
            })
            .collect();
        for s in sends {
            s.await.unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), want, "{extra:?}");
    }
}

/// `proxy_url`: the request goes to the proxy, in absolute form, for a
/// peer whose name only the proxy could resolve (a URL that is not an
/// HTTP proxy: `invalid_settings_name_their_key`).
#[tokio::test]
async fn proxy_url_sends_requests_through_the_proxy() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = proxy.local_addr().unwrap();
    let seen = tokio::spawn(async move {
        let (mut conn, _) = proxy.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "the connection closed before the headers ended");
            head.extend_from_slice(&buf[..n]);
        }
        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        String::from_utf8_lossy(&head)
            .lines()
            .next()
            .unwrap()
            .to_owned()
    });
    let e = exporter(
        "http://collector.invalid:4318",
        &format!("proxy_url: http://{at}"),
    );
    e.export(&Request::new(received()), &ctx()).await.unwrap();
    assert_eq!(
        seen.await.unwrap(),
        "POST http://collector.invalid:4318/v1development/profiles HTTP/1.1"
    );
}

/// `cookies`, as confighttp's README example writes it: a cookie the peer
/// sets comes back on the next request; without the section, or with
/// `enabled: false`, it does not. The HTTP/2 keys load.
#[tokio::test]
async fn cookies_the_peer_sets_are_sent_back() {
    let mut set = HeaderMap::new();
    set.insert("set-cookie", "session=abc123; Path=/".parse().unwrap());
    for (extra, kept) in [
        ("cookies: {enabled: true}", true),
        ("cookies: {}", true),
        ("cookies: {enabled: false}", false),
        (
            "force_attempt_http2: false\nhttp2_read_idle_timeout: 10s\nhttp2_ping_timeout: 5s",
            false,
        ),
    ] {
        let (url, seen) = server(vec![(StatusCode::OK, set.clone(), Vec::new()), ok()]).await;
        let e = exporter(&url, extra);
        for _ in 0..2 {
            e.export(&Request::new(received()), &ctx()).await.unwrap();
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].headers.get("cookie"), None, "{extra}");
        let cookie = seen[1].headers.get("cookie").map(|v| v.to_str().unwrap());
        assert_eq!(cookie, kept.then_some("session=abc123"), "{extra}");
    }
}

/// `compression_params.level`: a higher level sends fewer bytes of the
/// same request, in gzip, zstd, zlib and deflate; any zstd level and gzip's -1 load
/// (the levels refused: `invalid_settings_name_their_key`).
#[tokio::test]
async fn compression_params_level_sets_the_level() {
    // Changed by nothing but built here: the batch has no received bytes,
    // so the exporter compresses it itself.
    let batch = Arc::new(ProfileBatch::new(received().data().clone()));
    let (url, seen) = server(vec![ok()]).await;
    for compression in ["gzip", "zstd", "zlib", "deflate"] {
        let mut sizes = Vec::new();
        for level in ["", "\ncompression_params: {level: 9}"] {
            let e = exporter(&url, &format!("compression: {compression}{level}"));
            e.export(&Request::new(batch.clone()), &ctx())
                .await
                .unwrap();
            let got = seen.lock().unwrap().pop().unwrap();
            assert_eq!(
                ProfilesData::decode(plain(&got).as_slice()).unwrap(),
                *batch.data()
            );
            sizes.push(got.body.len());
        }
        assert!(sizes[1] < sizes[0], "{compression}: {sizes:?}");
    }
    for ok in [
        "compression: zstd\ncompression_params: {level: 40}",
        "compression_params: {level: -1}",
    ] {
        decode(&format!("endpoint: http://gw\n{ok}")).unwrap();
    }
}

#[tokio::test]
async fn a_metrics_partial_success_counts_rejected_points() {
    use profcol_model::proto::metrics::{
        ExportMetricsPartialSuccess, ExportMetricsServiceResponse,
    };
    let body = ExportMetricsServiceResponse {
        partial_success: Some(ExportMetricsPartialSuccess {
            rejected_data_points: 2,
            error_message: "two too many".into(),
        }),
    }
    .encode_to_vec();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/x-protobuf".parse().unwrap());
    let (url, _) = server(vec![(StatusCode::OK, headers, body)]).await;
    let outcome = exporter(&url, "")
        .export_metrics(&metrics_request(), &ctx())
        .await
        .unwrap();
    assert_eq!(outcome.rejected, 2);
}
