//! OTLP/HTTP in and out, TLS and bearer tokens: the receiver's HTTP
//! protocol against a plain HTTP client, and two collectors chained as a
//! sidecar and a gateway (`otlp` gRPC in, `otlphttp` over TLS with a token,
//! `otlp` gRPC out to an independent sink).

use crate::common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{client, fixture, request, Ports, Sink};
use profcol_model::proto::{
    request_into_data, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use profcol_model::resolved::{resolve, Detail};
use profcol_otlp::json as otlp_json;
use profcol_pipeline::runtime::RuntimeOptions;
use prost::Message;

const FIXTURES: [&str; 3] = [
    "otlp/minimal-request.bin",
    "otlp/two-resources-request.bin",
    "otlp/go-cpu.otlp.bin",
];

/// The profiles of some requests, whatever their order and encoding.
fn resolved(reqs: &[ExportProfilesServiceRequest]) -> Vec<String> {
    let mut v: Vec<String> = reqs
        .iter()
        .map(|r| resolve(&request_into_data(r.clone()), Detail::Full).to_text())
        .collect();
    v.sort();
    v
}

/// A CA and certificates it signed, written as PEM files.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Pki {
    pub(crate) fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "profcol test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let pki = Self {
            dir: tempfile::tempdir().unwrap(),
            ca,
        };
        std::fs::write(pki.path("ca.pem"), pki.ca.pem()).unwrap();
        pki
    }

    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    /// `<name>.pem` and `<name>.key` for `localhost`.
    pub(crate) fn issue(&self, name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let (c, k) = (
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}.key")),
        );
        write_atomically(&c, cert.pem().as_bytes());
        write_atomically(&k, key.serialize_pem().as_bytes());
        (c, k)
    }

    /// Serves `router` over HTTPS on a port of 127.0.0.1 until `stop`, with
    /// a certificate of this CA for `localhost` (`<name>.pem`); with
    /// `client_certs`, a client must present one of this CA too. Its port.
    pub(crate) async fn serve(
        &self,
        name: &str,
        router: axum::Router,
        client_certs: bool,
        stop: tokio_util::sync::CancellationToken,
    ) -> u16 {
        let (cert, key) = self.issue(name);
        let tls = profcol_pipeline::config::ServerTls {
            cert_file: Some(cert),
            key_file: Some(key),
            client_ca_file: client_certs.then(|| self.path("ca.pem")),
            ..Default::default()
        };
        let tls = profcol_pipeline::net::tls::server_config(&tls, name, stop.clone()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let settings = profcol_pipeline::net::ServerSettings {
            tls: Some(tls),
            ..Default::default()
        };
        profcol_pipeline::net::spawn(name, listener, router, settings, stop);
        port
    }
}

/// Replaces a file in one step, as a secret mount or cert-manager does.
fn write_atomically(path: &str, data: &[u8]) {
    let tmp = format!("{path}.tmp");
    std::fs::File::create(&tmp)
        .unwrap()
        .write_all(data)
        .unwrap();
    std::fs::rename(tmp, path).unwrap();
}

fn https_client(pki: &Pki, identity: Option<(&str, &str)>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(pki.path("ca.pem")).unwrap()).unwrap();
    let mut b = reqwest::Client::builder().tls_certs_only([ca]);
    if let Some((cert, key)) = identity {
        let mut pem = std::fs::read(cert).unwrap();
        pem.extend(std::fs::read(key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    content_type: &str,
    encoding: Option<&str>,
    body: Vec<u8>,
    token: Option<&str>,
) -> Result<reqwest::Response, reqwest::Error> {
    let mut req = http
        .post(url)
        .header("content-type", content_type)
        .body(body);
    if let Some(e) = encoding {
        req = req.header("content-encoding", e);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// A collector with OTLP over gRPC and HTTP in, `otlp` out to `sink`;
/// `http_extra` is added to the `http:` protocol's settings. Both protocols
/// listen on port 0: ask the started service for theirs ([`Ports`]).
fn gateway_config(sink: &Sink, http_extra: &str, extensions: &str) -> String {
    let service_extensions = if extensions.is_empty() {
        String::new()
    } else {
        "  extensions: [bearertokenauth]\n".to_owned()
    };
    format!(
        r#"
extensions:
{extensions}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
      http:
        endpoint: 127.0.0.1:0
{http_extra}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink_port}
    tls: {{insecure: true}}
service:
{service_extensions}  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlp]
"#,
        sink_port = sink.addr.port()
    )
}

async fn wait_for(sink: &Sink, calls: usize) {
    let start = Instant::now();
    while sink.calls() < calls {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the sink has {} of {calls} requests",
            sink.calls()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn http_carries_what_grpc_carries_in_every_encoding() {
    let sink = Sink::start().await;
    let yaml = gateway_config(&sink, "", "");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let (grpc, http) = (svc.grpc_port(), svc.http_port());
    let url = format!("http://127.0.0.1:{http}/v1development/profiles");
    let web = reqwest::Client::new();

    let sent: Vec<_> = FIXTURES.iter().map(|f| request(f)).collect();
    let mut c = client(grpc).await;
    for r in &sent {
        c.export(r.clone()).await.unwrap();
    }
    let mut expected = sent.clone();
    for (i, r) in sent.iter().enumerate() {
        let proto = r.encode_to_vec();
        let json = otlp_json::encode(&request_into_data(r.clone()));
        let zstd = zstd::encode_all(proto.as_slice(), 3).unwrap();
        for (ct, enc, body) in [
            ("application/x-protobuf", None, proto.clone()),
            ("application/x-protobuf", Some("gzip"), gzip(&proto)),
            ("application/x-protobuf", Some("zstd"), zstd),
            ("application/json", None, json.clone()),
            ("application/json; charset=utf-8", Some("gzip"), gzip(&json)),
        ] {
            let resp = post(&web, &url, ct, enc, body, None).await.unwrap();
            assert_eq!(resp.status(), 200, "{} {ct} {enc:?}", FIXTURES[i]);
            let answer_ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
            assert!(ct.starts_with(&answer_ct), "{answer_ct} for {ct}");
            let body = resp.bytes().await.unwrap();
            if answer_ct == "application/x-protobuf" {
                let r = ExportProfilesServiceResponse::decode(body).unwrap();
                assert!(r.partial_success.is_none());
            } else {
                assert_eq!(&body[..], b"{}");
            }
            expected.push(r.clone());
        }
    }
    // The JSON fixture recorded from a real producer.
    let json = fixture("otlp/minimal-request.json");
    let resp = post(&web, &url, "application/json", None, json.clone(), None)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    expected.push(
        ExportProfilesServiceRequest::decode(
            otlp_json::decode(&json).unwrap().encode_to_vec().as_slice(),
        )
        .unwrap(),
    );

    wait_for(&sink, expected.len()).await;
    svc.shutdown().await;
    assert_eq!(resolved(&sink.received()), resolved(&expected));
}

#[tokio::test]
async fn bad_http_requests_get_the_collectors_status_and_a_reason() {
    let sink = Sink::start().await;
    let yaml = gateway_config(&sink, "        max_request_body_size: 100000", "");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let http = svc.http_port();
    let url = format!("http://127.0.0.1:{http}/v1development/profiles");
    let web = reqwest::Client::new();
    let proto = request("otlp/minimal-request.bin").encode_to_vec();
    let bomb = gzip(&vec![0u8; 50 << 20]);

    // (content type, encoding, body, status, what the message says)
    let cases = [
        (
            "text/plain",
            None,
            proto.clone(),
            415,
            "is not application/x-protobuf",
        ),
        (
            "application/x-protobuf",
            None,
            b"\x0a\xff\xff".to_vec(),
            400,
            "cannot decode",
        ),
        (
            "application/json",
            None,
            b"{\"resourceProfiles\": 7}".to_vec(),
            400,
            "invalid OTLP/JSON: resourceProfiles: invalid type",
        ),
        (
            "application/x-protobuf",
            Some("br2"),
            proto.clone(),
            415,
            "br2",
        ),
        (
            "application/x-protobuf",
            None,
            vec![0; 200_000],
            413,
            "100000",
        ),
        ("application/x-protobuf", Some("gzip"), bomb, 413, "100000"),
        (
            "application/x-protobuf",
            Some("gzip"),
            proto.clone(),
            400,
            "gzip",
        ),
    ];
    for (ct, enc, body, status, says) in cases {
        let resp = post(&web, &url, ct, enc, body, None).await.unwrap();
        assert_eq!(resp.status(), status, "{ct} {enc:?}");
        let json = resp.headers()["content-type"] == "application/json";
        let body = resp.bytes().await.unwrap();
        let message = if json {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            v["message"].as_str().unwrap().to_owned()
        } else {
            tonic_types::pb::Status::decode(body).unwrap().message
        };
        assert!(message.contains(says), "{ct} {enc:?}: {message}");
    }
    // Only POST on the profiles path.
    let get = web.get(&url).send().await.unwrap();
    assert_eq!(get.status(), 405);
    let other = format!("http://127.0.0.1:{http}/v1/traces");
    let resp = post(
        &web,
        &other,
        "application/x-protobuf",
        None,
        proto.clone(),
        None,
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 404);
    // Still serving.
    let ok = post(&web, &url, "application/x-protobuf", None, proto, None)
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    wait_for(&sink, 1).await;
    svc.shutdown().await;
    assert_eq!(sink.calls(), 1);
}

/// The Profiles development version (opentelemetry-proto's specification,
/// the Collector from v0.165.0): a request without it or with `1` is read,
/// any other value, or two, is refused before its body is read, over gRPC
/// and HTTP alike, with the status the Collector gives; what is sent on
/// carries exactly one `1`, whatever the exporter's `headers` say.
#[tokio::test]
async fn the_profiles_development_version_is_checked_and_sent_on() {
    const KEY: &str = "otlp-profiles-development-version";
    let sink = Sink::start().await;
    let yaml = gateway_config(&sink, "", "").replace(
        "    tls: {insecure: true}",
        "    tls: {insecure: true}\n    headers: {OTLP-Profiles-Development-Version: '7'}",
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let (grpc, http) = (svc.grpc_port(), svc.http_port());
    let url = format!("http://127.0.0.1:{http}/v1development/profiles");
    let web = reqwest::Client::new();
    let sent = request("otlp/minimal-request.bin");
    let proto = sent.encode_to_vec();
    let json = otlp_json::encode(&request_into_data(sent.clone()));

    // (values, refused with a message saying)
    let cases: [(&[&str], Option<&str>); 6] = [
        (&[], None),
        (&["1"], None),
        (
            &["2"],
            Some("unsupported otlp-profiles-development-version \"2\""),
        ),
        (&["01"], Some("unsupported")),
        (&["1, 1"], Some("unsupported")),
        (&["1", "1"], Some("exactly once")),
    ];
    let mut c = client(grpc).await;
    let mut accepted = 0;
    for (values, refused) in cases {
        let mut req = tonic::Request::new(sent.clone());
        for v in values {
            req.metadata_mut().append(KEY, v.parse().unwrap());
        }
        match (c.export(req).await, refused) {
            (Ok(_), None) => accepted += 1,
            (Err(s), Some(says)) => {
                assert_eq!(s.code(), tonic::Code::InvalidArgument, "{values:?}");
                assert!(s.message().contains(says), "{values:?}: {s:?}");
            }
            (r, _) => panic!("gRPC {values:?}: {r:?}"),
        }
        for (ct, body) in [
            ("application/x-protobuf", proto.clone()),
            ("application/json", json.clone()),
        ] {
            let mut req = web.post(&url).header("content-type", ct).body(body);
            for v in values {
                // HTTP header names are case-insensitive.
                req = req.header("OTLP-Profiles-Development-Version", *v);
            }
            let resp = req.send().await.unwrap();
            let Some(says) = refused else {
                assert_eq!(resp.status(), 200, "HTTP {ct} {values:?}");
                accepted += 1;
                continue;
            };
            assert_eq!(resp.status(), 400, "HTTP {ct} {values:?}");
            assert_eq!(resp.headers()["content-type"], ct);
            let body = resp.bytes().await.unwrap();
            let message = if ct == "application/json" {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                v["message"].as_str().unwrap().to_owned()
            } else {
                tonic_types::pb::Status::decode(body).unwrap().message
            };
            assert!(message.contains(says), "HTTP {ct} {values:?}: {message}");
        }
    }
    assert_eq!(accepted, 6);
    wait_for(&sink, accepted).await;
    svc.shutdown().await;
    assert_eq!(sink.calls(), accepted, "nothing refused was sent on");
    for md in sink.metadata() {
        let versions: Vec<_> = md.get_all(KEY).iter().collect();
        assert_eq!(versions, ["1"], "{md:?}");
    }
}

#[tokio::test]
async fn tls_client_certificates_and_tokens_guard_both_protocols() {
    let pki = Pki::new();
    let (cert, key) = pki.issue("server");
    let (client_cert, client_key) = pki.issue("client");
    let other = Pki::new();
    let (stranger_cert, stranger_key) = other.issue("stranger");
    let sink = Sink::start().await;
    let tls = format!(
        "tls: {{cert_file: {cert}, key_file: {key}, client_ca_file: {}}}",
        pki.path("ca.pem")
    );
    let yaml = gateway_config(&sink, &format!(
        "        {tls}\n        auth: {{authenticator: bearertokenauth}}"
    ), "  bearertokenauth:\n    token: s3cret-token")
    .replace(
        "      grpc:\n        endpoint: 127.0.0.1:0\n",
        &format!("      grpc:\n        endpoint: 127.0.0.1:0\n        {tls}\n        auth: {{authenticator: bearertokenauth}}\n"),
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let (grpc, http) = (svc.grpc_port(), svc.http_port());
    let url = format!("https://localhost:{http}/v1development/profiles");
    let proto = request("otlp/minimal-request.bin").encode_to_vec();
    let ct = "application/x-protobuf";

    // No client certificate, or one from another CA: no handshake.
    for http_client in [
        https_client(&pki, None),
        https_client(&pki, Some((&stranger_cert, &stranger_key))),
    ] {
        let err = post(
            &http_client,
            &url,
            ct,
            None,
            proto.clone(),
            Some("s3cret-token"),
        )
        .await
        .unwrap_err();
        assert!(err.is_connect() || err.is_request(), "{err:?}");
    }
    let trusted = https_client(&pki, Some((&client_cert, &client_key)));
    for token in [None, Some("wrong")] {
        let resp = post(&trusted, &url, ct, None, proto.clone(), token)
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{token:?}");
        let message = tonic_types::pb::Status::decode(resp.bytes().await.unwrap())
            .unwrap()
            .message;
        assert!(!message.contains("s3cret"), "{message}");
    }
    let resp = post(
        &trusted,
        &url,
        ct,
        None,
        proto.clone(),
        Some("s3cret-token"),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);

    // gRPC over the same TLS settings.
    let ca = std::fs::read(pki.path("ca.pem")).unwrap();
    let identity = tonic::transport::Identity::from_pem(
        std::fs::read(&client_cert).unwrap(),
        std::fs::read(&client_key).unwrap(),
    );
    let channel = tonic::transport::Channel::from_shared(format!("https://localhost:{grpc}"))
        .unwrap()
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(ca))
                .identity(identity),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient::new(channel);
    for (token, code) in [
        (None, Some(tonic::Code::Unauthenticated)),
        (Some("wrong"), Some(tonic::Code::Unauthenticated)),
        (Some("s3cret-token"), None),
    ] {
        let mut req = tonic::Request::new(request("otlp/minimal-request.bin"));
        if let Some(t) = token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let got = c.export(req).await.err().map(|s| s.code());
        assert_eq!(got, code, "{token:?}");
    }
    wait_for(&sink, 2).await;
    svc.shutdown().await;
    assert_eq!(sink.calls(), 2);
}

#[tokio::test]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let pki = Pki::new();
    let (cert, key) = pki.issue("server");
    let sink = Sink::start().await;
    let yaml = gateway_config(
        &sink,
        &format!("        tls: {{cert_file: {cert}, key_file: {key}, reload_interval: 100ms}}"),
        "",
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let http = svc.http_port();
    let url = format!("https://localhost:{http}/v1development/profiles");
    let proto = request("otlp/minimal-request.bin").encode_to_vec();
    let ct = "application/x-protobuf";
    let status = |c: reqwest::Client| {
        let (url, proto) = (url.clone(), proto.clone());
        async move {
            post(&c, &url, ct, None, proto, None)
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| e.to_string())
        }
    };
    assert_eq!(status(https_client(&pki, None)).await, Ok(200));

    // A certificate from a new CA replaces the old one on disk.
    let renewed = Pki::new();
    let (new_cert, new_key) = renewed.issue("server");
    write_atomically(&key, &std::fs::read(new_key).unwrap());
    write_atomically(&cert, &std::fs::read(new_cert).unwrap());
    let start = Instant::now();
    while status(https_client(&renewed, None)).await != Ok(200) {
        assert!(start.elapsed() < Duration::from_secs(10), "never reloaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(status(https_client(&pki, None)).await.is_err());
    svc.shutdown().await;
}

/// A sidecar forwards over `otlphttp` with TLS and a token to a gateway.
#[tokio::test]
async fn a_sidecar_feeds_a_gateway_over_otlphttp() {
    let pki = Pki::new();
    let (cert, key) = pki.issue("gateway");
    let sink = Sink::start().await;
    let gateway = gateway_config(&sink, &format!(
        "        tls: {{cert_file: {cert}, key_file: {key}}}\n        auth: {{authenticator: bearertokenauth}}"
    ), "  bearertokenauth:\n    tokens: [old-token, team-token]");
    let gw = profcol::app::start_str(&gateway, RuntimeOptions::default())
        .await
        .unwrap();
    let gw_http = gw.http_port();

    let token_file = pki.path("token");
    std::fs::write(&token_file, "team-token\n").unwrap();
    let sidecar = format!(
        r#"
extensions:
  bearertokenauth/client:
    filename: {token_file}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
exporters:
  otlphttp:
    endpoint: https://localhost:{gw_http}
    tls: {{ca_file: {ca}}}
    auth: {{authenticator: bearertokenauth/client}}
    compression: zstd
    retry_on_failure: {{initial_interval: 10ms, max_interval: 50ms}}
service:
  extensions: [bearertokenauth/client]
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp]
"#,
        ca = pki.path("ca.pem")
    );
    let side = profcol::app::start_str(&sidecar, RuntimeOptions::default())
        .await
        .unwrap();
    let side_grpc = side.grpc_port();
    let sent: Vec<_> = FIXTURES.iter().map(|f| request(f)).collect();
    let mut c = client(side_grpc).await;
    for r in &sent {
        c.export(r.clone()).await.unwrap();
    }
    wait_for(&sink, sent.len()).await;
    side.shutdown().await;
    gw.shutdown().await;
    assert_eq!(resolved(&sink.received()), resolved(&sent));
}

#[test]
fn an_unknown_authenticator_is_a_config_error_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        r#"
receivers:
  otlp:
    protocols:
      http:
        auth: {authenticator: oidc}
exporters:
  otlphttp:
    endpoint: https://gw:4318
    auth: {authenticator: bearertokenauth}
service:
  pipelines:
    profiles: {receivers: [otlp], exporters: [otlphttp]}
"#,
    )
    .unwrap();
    let out = common::profcol()
        .args(["validate", "--config"])
        .arg(Path::new(&cfg))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "receivers::otlp::protocols::http::auth::authenticator: no extension \"oidc\"",
        "exporters::otlphttp::auth::authenticator: no extension \"bearertokenauth\"",
    ] {
        assert!(err.contains(want), "{err}");
    }
}

/// The OpenTelemetry Python SDK's OTLP/HTTP client, as an SDK set to
/// `http/protobuf` sends, to a gateway with TLS and a token.
#[tokio::test]
async fn the_python_sdks_otlp_http_client_is_accepted() {
    let Some(python) = profcol_model::testing::python(&[
        "opentelemetry.exporter.otlp.proto.http",
        "opentelemetry.proto.collector.profiles.v1development",
    ]) else {
        return;
    };
    let pki = Pki::new();
    let (cert, key) = pki.issue("gateway");
    let sink = Sink::start().await;
    let yaml = gateway_config(&sink, &format!(
        "        tls: {{cert_file: {cert}, key_file: {key}}}\n        auth: {{authenticator: bearertokenauth}}"
    ), "  bearertokenauth:\n    token: py-token");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let http = svc.http_port();
    let files: Vec<_> = FIXTURES
        .iter()
        .map(|f| profcol_model::testing::fixtures_dir().join(f))
        .collect();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/otlp_http_export.py"
    );
    // requests lets these override the CA the exporter is given.
    let sdk = || {
        let mut c = tokio::process::Command::new(&python);
        c.env_remove("REQUESTS_CA_BUNDLE")
            .env_remove("CURL_CA_BUNDLE");
        c.arg(script);
        c
    };
    let mut expected = Vec::new();
    for compression in ["gzip", "deflate", "none"] {
        let out = sdk()
            .args([
                "--endpoint",
                &format!("https://localhost:{http}/v1development/profiles"),
            ])
            .args(["--compression", compression, "--ca", &pki.path("ca.pem")])
            .args(["-H", "authorization=Bearer py-token"])
            .args(&files)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{compression}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            stdout.matches("\"status\": 200").count(),
            files.len(),
            "{stdout}"
        );
        expected.extend(FIXTURES.iter().map(|f| request(f)));
    }
    // A wrong token is refused, and the SDK does not retry it.
    let out = sdk()
        .args([
            "--endpoint",
            &format!("https://localhost:{http}/v1development/profiles"),
        ])
        .args([
            "--ca",
            &pki.path("ca.pem"),
            "-H",
            "authorization=Bearer nope",
        ])
        .arg(&files[0])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"status\": 401"));
    wait_for(&sink, expected.len()).await;
    svc.shutdown().await;
    assert_eq!(resolved(&sink.received()), resolved(&expected));
}

/// Producers on older proto revisions post over HTTP: the real profilers'
/// HTTP captures in protobuf (the v1.9.0 one with real entries at index 0)
/// and the same profile as each revision's published classes write it in
/// OTLP/JSON. All are accepted, the sink gets what each producer meant,
/// and each request is counted by the revision it was read as.
#[tokio::test]
async fn older_revisions_are_accepted_over_http_in_protobuf_and_json() {
    use profcol_model::repair::repair;
    use profcol_otlp::revisions as otlp_revisions;

    let sink = Sink::start().await;
    let yaml = gateway_config(&sink, "", "");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let http = svc.http_port();
    let telemetry = svc.telemetry().clone();
    let url = format!("http://127.0.0.1:{http}/v1development/profiles");
    let web = reqwest::Client::new();
    let revision_fixture = |rel: &str| fixture(&format!("otlp-revisions/{rel}"));

    let mut want = Vec::new();
    for file in [
        "opentelemetry-sdk-extension-profiling-0.63b4/0002.binpb",
        "beacon-profiling-1.2.1/0002.binpb",
    ] {
        let body = revision_fixture(file);
        let resp = post(
            &web,
            &url,
            "application/x-protobuf",
            None,
            body.clone(),
            None,
        )
        .await
        .unwrap();
        assert_eq!(resp.status(), 200, "{file}");
        let r = ExportProfilesServiceResponse::decode(resp.bytes().await.unwrap()).unwrap();
        assert!(r.partial_success.is_none(), "{file}");
        let mut meant = otlp_revisions::decode(&body.into()).unwrap().data;
        repair(&mut meant);
        want.push(resolve(&meant, Detail::Full).to_text());
    }
    // One profile in every revision's JSON: all mean what v1.10.0 says.
    let v1_10 = ExportProfilesServiceRequest::decode(
        revision_fixture("python-proto-1.45.2/request.binpb").as_slice(),
    )
    .unwrap();
    for dir in [
        "python-proto-1.39.1",
        "python-protoc-v1.8.0",
        "python-proto-1.42.1",
        "python-proto-1.45.2",
    ] {
        let json = revision_fixture(&format!("{dir}/request.json"));
        let resp = post(
            &web,
            &url,
            "application/json",
            Some("gzip"),
            gzip(&json),
            None,
        )
        .await
        .unwrap();
        assert_eq!(resp.status(), 200, "{dir}");
        assert_eq!(&resp.bytes().await.unwrap()[..], b"{}", "{dir}");
        want.push(resolved(std::slice::from_ref(&v1_10)).remove(0));
    }

    wait_for(&sink, want.len()).await;
    svc.shutdown().await;
    want.sort();
    assert_eq!(resolved(&sink.received()), want);
    // v1.9.0 and v1.10.0 write the same JSON: read as v1.10.0.
    for (revision, n) in [("v1.7.0", 1), ("v1.8.0", 1), ("v1.9.0", 1), ("v1.10.0", 3)] {
        assert_eq!(
            telemetry.accepted_requests("otlp", revision),
            n,
            "{revision}"
        );
    }
    assert_eq!(telemetry.repairs("otlp", "index_0_real_entry"), 4);
    assert!(telemetry.encode_text().contains(
        "profcol_receiver_accepted_requests_total{receiver=\"otlp\",transport=\"http\",otlp_proto_revision=\"v1.8.0\"} 1"
    ));
}

/// confighttp's server `keepalive: {enabled: false}`: each answer closes
/// its HTTP/1 connection; by default the connection stays open.
#[tokio::test]
async fn keepalive_enabled_false_closes_each_connection() {
    let sink = Sink::start().await;
    let proto = request("otlp/minimal-request.bin").encode_to_vec();
    for (extra, closes) in [("", false), ("        keepalive: {enabled: false}", true)] {
        let yaml = gateway_config(&sink, extra, "");
        let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
            .await
            .unwrap();
        let url = format!(
            "http://127.0.0.1:{}/v1development/profiles",
            svc.http_port()
        );
        let resp = post(
            &reqwest::Client::new(),
            &url,
            "application/x-protobuf",
            None,
            proto.clone(),
            None,
        )
        .await
        .unwrap();
        assert_eq!(resp.status(), 200);
        let connection = resp
            .headers()
            .get("connection")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            connection.as_deref() == Some("close"),
            closes,
            "{extra:?}: {connection:?}"
        );
        svc.shutdown().await;
    }
}

/// confighttp's server keys as its testdata writes them:
/// `response_headers` on every answer, `compression_algorithms` refusing
/// the others with 400 (as confighttp's decompressor answers), and
/// `write_timeout` cutting off a request whose body still trickles in
/// past it, where the same request is answered without one.
#[tokio::test]
async fn response_headers_compression_algorithms_and_write_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sink = Sink::start().await;
    let proto = request("otlp/minimal-request.bin").encode_to_vec();
    let yaml = gateway_config(
        &sink,
        "        response_headers: {Server: OpenTelemetry-Collector, X-Flavor: apple}\n        compression_algorithms: [\"\", gzip]",
        "",
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let url = format!(
        "http://127.0.0.1:{}/v1development/profiles",
        svc.http_port()
    );
    let c = reqwest::Client::new();
    for (encoding, body, status) in [
        (None, proto.clone(), 200),
        (Some("gzip"), gzip(&proto), 200),
        (Some("zstd"), zstd::encode_all(&proto[..], 1).unwrap(), 400),
    ] {
        let resp = post(&c, &url, "application/x-protobuf", encoding, body, None)
            .await
            .unwrap();
        assert_eq!(resp.status(), status, "{encoding:?}");
        assert_eq!(resp.headers()["server"], "OpenTelemetry-Collector");
        assert_eq!(resp.headers()["x-flavor"], "apple");
        if status == 400 {
            assert_eq!(
                resp.text().await.unwrap(),
                "unsupported Content-Encoding: zstd\n"
            );
        }
    }
    svc.shutdown().await;

    // The body in three pieces 400 ms apart.
    for (timeout, answered) in [("0s", true), ("500ms", false)] {
        let yaml = gateway_config(
            &sink,
            &format!("        write_timeout: {timeout}\n        min_body_rate: 0"),
            "",
        );
        let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
            .await
            .unwrap();
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", svc.http_port()))
            .await
            .unwrap();
        let head = format!(
            "POST /v1development/profiles HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            proto.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let third = proto.len().div_ceil(3);
        for piece in proto.chunks(third) {
            tokio::time::sleep(Duration::from_millis(400)).await;
            if conn.write_all(piece).await.is_err() {
                break;
            }
        }
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(
            answer.starts_with("HTTP/1.1 200"),
            answered,
            "write_timeout {timeout}: {answer:?}"
        );
        svc.shutdown().await;
    }
}
