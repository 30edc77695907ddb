//! The receiver driven over HTTP with the requests real Pyroscope SDKs
//! sent (tests/fixtures/pyroscope, see its README), and with bad input.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use bytes::Bytes;
use prost::Message;
use tower::ServiceExt;

use profcol_model::proto::{any_value::Value, ProfilesData};
use profcol_model::resolved::folded;
use profcol_model::testing::fixtures_dir as fixtures;
use profcol_model::validate::validate;
use profcol_pipeline::telemetry::Telemetry;
use profcol_pprof::decode_pprof;

use super::config::PyroscopeReceiverConfig;
use super::handler::Handler;
use super::push::{LabelPair, PushRequest, RawProfileSeries, RawSample};
use super::server::router;
use crate::ingest::Ingest;

struct Harness {
    app: axum::Router,
    rx: profcol_pipeline::testing::Capture,
    telemetry: Arc<Telemetry>,
}

fn harness(cfg: PyroscopeReceiverConfig, inbox: usize, budget: usize) -> Harness {
    harness_with_auth(cfg, inbox, budget, None)
}

fn harness_with_auth(
    cfg: PyroscopeReceiverConfig,
    inbox: usize,
    budget: usize,
    auth: Option<Arc<dyn profcol_pipeline::component::Authenticator>>,
) -> Harness {
    let telemetry = Arc::new(Telemetry::new());
    let (output, rx) =
        profcol_pipeline::testing::capture("pyroscope", inbox, budget, telemetry.clone());
    let handler = Handler {
        ingest: Ingest::new(
            "pyroscope".into(),
            output,
            telemetry.clone(),
            crate::ingest::OnInvalid::Refuse,
        ),
        cfg,
        recorder: None,
        auth,
    };
    Harness {
        app: router(Arc::new(handler)),
        rx,
        telemetry,
    }
}

fn default_harness() -> Harness {
    harness(PyroscopeReceiverConfig::default(), 64, 1 << 30)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Every recording under tests/fixtures/pyroscope, as `folder/.../NNNN`.
fn recordings() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.to_string_lossy().ends_with(".meta.json") {
                out.push(p);
            }
        }
    }
    let mut metas = Vec::new();
    walk(&fixtures().join("pyroscope"), &mut metas);
    let mut out: Vec<String> = metas
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(fixtures()).unwrap().to_string_lossy();
            rel.strip_suffix(".meta.json").unwrap().replace('\\', "/")
        })
        .collect();
    out.sort();
    out
}

struct Recorded {
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Recorded {
    fn load(rel: &str) -> Self {
        let meta: serde_json::Value = serde_json::from_slice(
            &std::fs::read(fixtures().join(format!("{rel}.meta.json"))).unwrap(),
        )
        .unwrap();
        Recorded {
            path: meta["path"].as_str().unwrap().to_owned(),
            query: meta["query"].as_str().unwrap_or("").to_owned(),
            headers: serde_json::from_value(meta["headers"].clone()).unwrap(),
            body: std::fs::read(fixtures().join(format!("{rel}.body.bin"))).unwrap(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body with its `Content-Encoding` undone.
    fn decoded_body(&self) -> Vec<u8> {
        match self.header("content-encoding") {
            Some("gzip") => gunzip(&self.body),
            _ => self.body.clone(),
        }
    }

    fn param(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(self.query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// Listens on a free local port with the receiver's routes.
async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Sends a recording over a real connection as its SDK did: the request
/// line and headers in their recorded order (`Host` and `Connection`
/// adapted), the body byte for byte. Returns the status and the body.
async fn replay_over_http(addr: std::net::SocketAddr, r: &Recorded) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = format!("POST {}", r.path);
    if !r.query.is_empty() {
        head += &format!("?{}", r.query);
    }
    head += " HTTP/1.1\r\n";
    // A recording without a length (the recorder of the Java agent's
    // upload kept none) is sent with one, as its client did.
    let framed = r.headers.iter().any(|(k, _)| {
        k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
    });
    if !framed {
        head += &format!("Content-Length: {}\r\n", r.body.len());
    }
    for (k, v) in &r.headers {
        match k.to_ascii_lowercase().as_str() {
            "host" => head += &format!("{k}: {addr}\r\n"),
            "connection" => {}
            "content-length" => {
                assert_eq!(v.parse::<usize>().unwrap(), r.body.len());
                head += &format!("{k}: {v}\r\n");
            }
            _ => head += &format!("{k}: {v}\r\n"),
        }
    }
    head += "Connection: close\r\n\r\n";
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&r.body).await.unwrap();
    let mut resp = Vec::new();
    conn.read_to_end(&mut resp).await.unwrap();
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&resp[..split]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, resp[split + 4..].to_vec())
}

/// Sum of sample values per `type/unit` of every profile in `data`.
fn otlp_totals(data: Option<&ProfilesData>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for p in data.map(folded).unwrap_or_default() {
        *out.entry(p.sample_type.clone()).or_default() += p.samples.values().sum::<i64>();
    }
    out.retain(|_, v| *v != 0);
    out
}

/// Sum of sample values per `type/unit` of a pprof, decoded by the
/// pipeline's pprof reader alone.
fn pprof_totals(bytes: &[u8], out: &mut BTreeMap<String, i64>) {
    let p = decode_pprof(bytes).unwrap();
    let s = |i: i64| p.string_table[i as usize].clone();
    for (i, t) in p.sample_type.iter().enumerate() {
        let total: i64 = p.sample.iter().map(|x| x.value[i]).sum();
        *out.entry(format!("{}/{}", s(t.r#type), s(t.unit)))
            .or_default() += total;
    }
    out.retain(|_, v| *v != 0);
}

/// The bytes of a form's `profile` part, found without the receiver's
/// parser: after the part's headers, up to the next boundary.
fn profile_part(body: &[u8], content_type: &str) -> Vec<u8> {
    let boundary = content_type.split("boundary=").nth(1).unwrap();
    let at = body
        .windows(14)
        .position(|w| w == b"name=\"profile\"")
        .unwrap();
    let start = at
        + body[at..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap()
        + 4;
    let end_marker = format!("\r\n--{boundary}");
    let len = body[start..]
        .windows(end_marker.len())
        .position(|w| w == end_marker.as_bytes())
        .unwrap();
    body[start..start + len].to_vec()
}

/// A readable account of what a request became: per profile its sample
/// type, period, time, resource, scope and attributes, the number of
/// stacks and their total, and the sample attribute keys.
fn summary(data: Option<&ProfilesData>) -> String {
    let Some(data) = data else {
        return "no profiles\n".into();
    };
    let mut out = String::new();
    let times: Vec<(u64, u64)> = data
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| (p.time_unix_nano, p.duration_nano))
        .collect();
    for (p, (time, duration)) in folded(data).iter().zip(times) {
        out += &format!(
            "profile {} period_type={} period={} time={time} duration={duration}\n",
            p.sample_type, p.period_type, p.period
        );
        out += &format!("  resource: {}\n", p.resource.join(", "));
        if !p.scope.is_empty() {
            out += &format!("  scope: {}\n", p.scope);
        }
        if !p.attributes.is_empty() {
            out += &format!("  attributes: {}\n", p.attributes.join(", "));
        }
        let mut keys = std::collections::BTreeSet::new();
        for line in p.samples.keys() {
            if let Some(attrs) = line.split(" [").nth(1) {
                for kv in attrs.trim_end_matches(']').split(", ") {
                    keys.insert(kv.split('=').next().unwrap().to_owned());
                }
            }
        }
        let keys = match keys.into_iter().collect::<Vec<_>>().join(", ") {
            k if k.is_empty() => "none".to_owned(),
            k => k,
        };
        out += &format!(
            "  {} stacks, total {}, sample attributes: {keys}\n",
            p.samples.len(),
            p.samples.values().sum::<i64>(),
        );
    }
    out
}

/// Every recorded SDK request replayed over a real connection: 200 with
/// an empty body (Push: an empty `application/proto` message), the
/// profiles valid, and what they hold equal to what the SDK sent: the
/// folded stacks of a folded body, line for line, or the totals of each
/// sample type of the pprof. A snapshot shows the mapping of each.
#[tokio::test]
async fn every_recorded_request_replays_over_http() {
    let rels = recordings();
    assert!(rels.len() >= 30, "{rels:?}");
    for rel in &rels {
        let mut h = default_harness();
        let addr = serve(h.app.clone()).await;
        let r = Recorded::load(rel);
        let (status, body) = replay_over_http(addr, &r).await;
        assert_eq!(status, 200, "{rel}: {}", String::from_utf8_lossy(&body));
        let push = r.path.starts_with("/push.v1");
        assert!(
            body.is_empty(),
            "{rel}: Pyroscope answers with an empty body"
        );
        let batch = h.rx.try_recv();
        assert!(h.rx.try_recv().is_none(), "{rel}: one batch per request");
        let data = batch.as_ref().map(|b| b.data());
        if let Some(d) = data {
            validate(d).unwrap();
        }

        let format = r.param("format").unwrap_or_default();
        let mut want = BTreeMap::new();
        if push {
            let req = PushRequest::decode(r.decoded_body().as_slice()).unwrap();
            for s in &req.series {
                for sample in &s.samples {
                    pprof_totals(&sample.raw_profile, &mut want);
                }
            }
        } else if format == "folded" {
            // The folded stacks, exactly as the SDK wrote them.
            let mut lines: BTreeMap<String, i64> = BTreeMap::new();
            for line in String::from_utf8(r.decoded_body()).unwrap().lines() {
                let (stack, n) = line.rsplit_once(' ').unwrap();
                *lines.entry(stack.to_owned()).or_default() += n.parse::<i64>().unwrap();
            }
            let got = folded(data.unwrap());
            assert_eq!(got.len(), 1, "{rel}");
            assert_eq!(got[0].samples, lines, "{rel}");
            want.insert("samples/count".to_owned(), lines.values().sum());
        } else if format == "jfr" {
            // The JFR reader has its own oracle (the JDK's recordings in
            // formats/jfr, the live agent in tests/it/pyroscope_jfr.rs):
            // here, that the upload converts and what it holds.
            want = otlp_totals(data);
            assert!(!want.is_empty(), "{rel}");
        } else {
            let ct = r.header("content-type").unwrap_or("");
            let pprof = if ct.starts_with("multipart/form-data") {
                profile_part(&r.body, ct)
            } else {
                r.decoded_body()
            };
            pprof_totals(&pprof, &mut want);
        }
        assert_eq!(otlp_totals(data), want, "{rel}");
        let samples = batch.as_ref().map_or(0, |b| b.sample_count());
        assert_eq!(h.telemetry.accepted("pyroscope"), samples, "{rel}");
        assert_eq!(h.telemetry.refused("pyroscope"), 0, "{rel}");
        let item = if push {
            "push"
        } else if format == "folded" || format == "jfr" {
            format.as_str()
        } else {
            "pprof"
        };
        let outcome = if data.is_some() { "accepted" } else { "empty" };
        assert_eq!(h.telemetry.items("pyroscope", item, outcome), 1, "{rel}");
        insta::assert_snapshot!(rel.replace('/', "_"), summary(data));
    }
}

fn resource_attr(data: &ProfilesData, key: &str) -> Option<Value> {
    data.resource_profiles[0]
        .resource
        .as_ref()?
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .clone()?
        .value
}

fn text(s: &str) -> Option<Value> {
    Some(Value::StringValue(s.into()))
}

async fn send(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, body.to_vec())
}

fn post(uri: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Request<Body> {
    let mut req = Request::builder().method("POST").uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(body.into()).unwrap()
}

fn request_of(rel: &str) -> Request<Body> {
    let r = Recorded::load(rel);
    let uri = if r.query.is_empty() {
        r.path.clone()
    } else {
        format!("{}?{}", r.path, r.query)
    };
    let mut req = Request::builder().method("POST").uri(uri);
    for (k, v) in &r.headers {
        if !matches!(k.to_ascii_lowercase().as_str(), "host" | "content-length") {
            req = req.header(k, v);
        }
    }
    req.body(Body::from(r.body)).unwrap()
}

/// What users rely on, SDK by SDK: the service and its labels as resource
/// attributes in their conventions, the SDK, time and period, thread names
/// on the samples.
#[tokio::test]
async fn each_sdks_request_maps_to_the_conventions() {
    let mut h = default_harness();
    let app = h.app.clone();
    let next = |rel: &'static str| {
        let app = app.clone();
        async move {
            let (status, _, body) = send(&app, request_of(rel)).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "{rel}: {}",
                String::from_utf8_lossy(&body)
            );
        }
    };

    // Go: labels from the name, ns times, the SDK, block vs mutex names.
    next("pyroscope/go-pyroscope-go-1.2.8/cpu/0005").await;
    let b = h.rx.try_recv().unwrap();
    let d = b.data();
    assert_eq!(resource_attr(d, "service.name"), text("goapp"));
    assert_eq!(
        resource_attr(d, "service.instance.id"),
        text("77e425ea48b3919f")
    );
    assert_eq!(
        resource_attr(d, "deployment.environment.name"),
        text("test")
    );
    assert_eq!(resource_attr(d, "cloud.region"), text("eu"));
    assert_eq!(resource_attr(d, "telemetry.sdk.name"), text("gospy"));
    assert_eq!(resource_attr(d, "telemetry.sdk.language"), text("go"));
    let p = &d.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(
        p.time_unix_nano, 1795728486383097015,
        "the pprof's own time"
    );
    assert_eq!(p.period, 10_000_000);
    let f = folded(d);
    assert!(f[0]
        .samples
        .keys()
        .any(|k| k.ends_with("main.leafHash [handler=worker]")));

    next("pyroscope/go-pyroscope-go-1.2.8/heap-goroutines-block-mutex/0003").await;
    let b = h.rx.try_recv().unwrap();
    let f = folded(b.data());
    assert_eq!(f[0].attributes, ["pyroscope.display_name=block_count"]);
    next("pyroscope/go-pyroscope-go-1.2.8/heap-goroutines-block-mutex/0001").await;
    let f = folded(h.rx.try_recv().unwrap().data());
    let inuse = f
        .iter()
        .find(|p| p.sample_type == "inuse_space/bytes")
        .unwrap();
    assert_eq!(inuse.attributes, ["pyroscope.aggregation=average"]);
    // An empty mutex profile is answered and stored nowhere.
    next("pyroscope/go-pyroscope-go-1.2.8/heap-goroutines-block-mutex/0004").await;
    assert!(h.rx.try_recv().is_none());
    assert_eq!(h.telemetry.items("pyroscope", "pprof", "empty"), 1);

    // Python 0.8.x folded: the app up to `.cpu`, counts at 100 Hz, the
    // query's window.
    next("pyroscope/python-pyroscope-io-0.8.4/0001").await;
    let b = h.rx.try_recv().unwrap();
    let d = b.data();
    assert_eq!(resource_attr(d, "service.name"), text("pyapp"));
    assert_eq!(resource_attr(d, "handler"), text("worker"));
    assert_eq!(resource_attr(d, "telemetry.sdk.language"), text("python"));
    let f = folded(d);
    assert_eq!(
        (
            f[0].sample_type.as_str(),
            f[0].period_type.as_str(),
            f[0].period
        ),
        ("samples/count", "cpu/nanoseconds", 10_000_000)
    );
    let p = &d.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(
        (p.time_unix_nano, p.duration_nano),
        (1_795_728_140_000_000_000, 10_000_000_000)
    );

    // Node: the otel scope labels name the scope.
    next("pyroscope/nodejs-pyroscope-0.6.4/default/0001").await;
    let b = h.rx.try_recv().unwrap();
    let scope = b.data().resource_profiles[0].scope_profiles[0]
        .scope
        .clone()
        .unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("com.grafana.pyroscope/nodejs", "0.6.4")
    );
    assert_eq!(
        resource_attr(b.data(), "process.runtime.name"),
        text("nodejs")
    );

    // Python 1.x Push: thread labels become thread.name / thread.id, the
    // SDK comes from the User-Agent.
    next("pyroscope/python-pyroscope-io-1.4.0/report-pid-thread/0001").await;
    let b = h.rx.try_recv().unwrap();
    let d = b.data();
    assert_eq!(resource_attr(d, "telemetry.sdk.name"), text("pyspy"));
    assert_eq!(resource_attr(d, "telemetry.sdk.version"), text("1.4.0"));
    let f = folded(d);
    let lines: Vec<&String> = f[0].samples.keys().collect();
    assert!(
        lines.iter().any(|l| l.contains("thread.name=worker-1")
            && l.contains("thread.id=139841431910080")
            && l.contains("process.pid=2946")),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("thread_name")));

    // Rust (pyroscope-rs 2.x Push): the scope and runtime labels, the
    // tags as attributes, a thread's tag on that thread's samples only.
    next("pyroscope/rust-pyroscope-rs-2.1.5/default/0002").await;
    let b = h.rx.try_recv().unwrap();
    let d = b.data();
    assert_eq!(resource_attr(d, "service.name"), text("rust-app"));
    assert_eq!(resource_attr(d, "telemetry.sdk.name"), text("pyroscope-rs"));
    assert_eq!(resource_attr(d, "telemetry.sdk.version"), text("2.1.5"));
    assert_eq!(resource_attr(d, "process.runtime.name"), text("rust"));
    let f = folded(d);
    assert_eq!(
        (f[0].sample_type.as_str(), f[0].period),
        ("cpu/nanoseconds", 10_000_000)
    );
    let lines: Vec<&String> = f[0].samples.keys().collect();
    let on = |thread: &'static str| lines.iter().filter(move |l| l.contains(thread));
    assert!(on("thread.name=tagged-worker").all(|l| l.contains("route=/checkout")));
    assert!(on("thread.name=plain-worker").all(|l| !l.contains("route=")));
    for thread in ["thread.name=tagged-worker", "thread.name=plain-worker"] {
        assert!(
            on(thread).any(|l| l.contains("pyrs::work;pyrs::burn")),
            "{thread}: {lines:#?}"
        );
    }

    // Rust 0.5 (/ingest pprof): the app from `name`, the tags on every
    // sample, the thread's tag on its samples only.
    next("pyroscope/rust-pyroscope-rs-0.5.8/default/0001").await;
    let b = h.rx.try_recv().unwrap();
    let d = b.data();
    assert_eq!(resource_attr(d, "service.name"), text("rust-app-05"));
    let f = folded(d);
    let lines: Vec<&String> = f[0].samples.keys().collect();
    assert!(
        lines
            .iter()
            .all(|l| l.contains("env=test") && l.contains("region=eu")),
        "{lines:#?}"
    );
    let tagged = lines
        .iter()
        .filter(|l| l.contains("route=/checkout"))
        .count();
    assert!(tagged > 0 && tagged < lines.len(), "{lines:#?}");

    // Python 1.x with memory on: two series, one resource.
    next("pyroscope/python-pyroscope-io-1.4.0/mem-enabled/0001").await;
    let b = h.rx.try_recv().unwrap();
    assert_eq!(b.data().resource_profiles.len(), 1);
    assert_eq!(b.profile_count(), 5, "4 memory sample types and cpu");

    // The OpenTelemetry span processor's trace and span ids link samples.
    next("pyroscope/python-pyroscope-io-1.4.0/otel-span-processor/0001").await;
    let b = h.rx.try_recv().unwrap();
    let dict = b.data().dictionary.as_ref().unwrap();
    assert!(dict.link_table.len() > 1, "samples link to their spans");

    // A profile-type suffix is not part of the service, whatever the body.
    let pprof = profcol_model::testing::fixture("pprof/go-cpu.pb.gz");
    let req = post(
        "/ingest?name=svc.cpu%7Bhost%3Dh1%7D&format=pprof",
        &[],
        pprof,
    );
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    let b = h.rx.try_recv().unwrap();
    assert_eq!(resource_attr(b.data(), "service.name"), text("svc"));
    assert_eq!(resource_attr(b.data(), "host.name"), text("h1"));
}

/// Bad input: a precise 400 (or the status its kind takes), counted with
/// its reason, nothing handed on, and the next good request accepted.
#[tokio::test]
async fn bad_input_gets_its_status_and_reason_and_nothing_else_is_lost() {
    let mut cfg = PyroscopeReceiverConfig::default();
    cfg.server.max_request_body_size = 1 << 20;
    let mut h = harness(cfg, 64, 1 << 30);
    let folded_uri = "/ingest?name=app.cpu&from=1795728140&until=1795728150&format=folded";
    let form = |parts: &[(&str, &[u8])]| {
        let mut b = Vec::new();
        for (name, data) in parts {
            b.extend_from_slice(
                format!("--XX\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\n\r\n").as_bytes(),
            );
            b.extend_from_slice(data);
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(b"--XX--\r\n");
        b
    };
    let multipart = ("content-type", "multipart/form-data; boundary=XX");
    let pprof = profcol_model::testing::fixture("pprof/go-cpu.pb.gz");
    let mut bad_push = PushRequest {
        series: vec![RawProfileSeries {
            labels: vec![LabelPair {
                name: "service_name".into(),
                value: "x".into(),
            }],
            samples: vec![RawSample {
                raw_profile: Bytes::from(pprof.clone()),
                id: "a".into(),
            }],
        }],
    };
    bad_push.series[0].samples.push(RawSample {
        raw_profile: Bytes::from_static(b"\x1f\x8bnot gzip"),
        id: "b".into(),
    });
    let proto = ("content-type", "application/proto");

    // (case, request, status, reason, message fragment)
    let cases: Vec<(&str, Request<Body>, StatusCode, &str, &str)> = vec![
        (
            "folded line with no count",
            post(folded_uri, &[], "a;b 1\na;b"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "line 2: no count",
        ),
        (
            "negative count",
            post(folded_uri, &[], "a;b -5"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "negative count \"-5\"",
        ),
        (
            "count not a number",
            post(folded_uri, &[], "a;b five"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "is not an integer",
        ),
        (
            "unclosed {",
            post("/ingest?name=app%7Benv%3Dtest&format=folded", &[], "a 1"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "'{' is not closed",
        ),
        (
            "no name",
            post("/ingest?format=folded", &[], "a 1"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "no name",
        ),
        (
            "bad from",
            post("/ingest?name=a&from=yesterday", &[], "a 1"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "from: cannot read \"yesterday\"",
        ),
        (
            "form without a profile part",
            post(
                "/ingest?name=a",
                &[multipart],
                form(&[("sample_type_config", b"{}")]),
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "no profile part (parts: [\"sample_type_config\"])",
        ),
        (
            "form with a previous profile",
            post(
                "/ingest?name=a",
                &[multipart],
                form(&[("profile", &pprof), ("prev_profile", &pprof)]),
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "prev_profile",
        ),
        (
            "form without its closing boundary",
            post(
                "/ingest?name=a",
                &[multipart],
                &b"--XX\r\nContent-Disposition: form-data; name=\"profile\"\r\n\r\nabc"[..],
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "closing boundary",
        ),
        (
            "bad sample_type_config",
            post(
                "/ingest?name=a",
                &[multipart],
                form(&[("profile", &pprof), ("sample_type_config", b"[1]")]),
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "not a JSON object",
        ),
        (
            "pprof that does not decode",
            post("/ingest?name=a&format=pprof", &[], "not a pprof"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "pprof profile does not decode",
        ),
        (
            "corrupt gzip'd pprof",
            post(
                "/ingest?name=a&format=pprof",
                &[],
                &b"\x1f\x8b\x08\x00garbage"[..],
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "gzip'd pprof is corrupt",
        ),
        (
            "pprof bomb",
            post(
                "/ingest?name=a&format=pprof",
                &[],
                gzip(&vec![0u8; 4 << 20]),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "once inflated",
        ),
        (
            "body over the limit",
            post(folded_uri, &[], vec![b'a'; 2 << 20]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "size limit",
        ),
        (
            "unknown encoding",
            post(folded_uri, &[("content-encoding", "compress")], "a 1"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            "compress",
        ),
        (
            "jfr that is not one",
            post("/ingest?name=a&format=jfr", &[], "x"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "no FLR magic",
        ),
        (
            "jfr bomb",
            post("/ingest?name=a&format=jfr", &[], gzip(&vec![0u8; 4 << 20])),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the jfr exceeds",
        ),
        (
            "speedscope that is not one",
            post("/ingest?name=a&format=speedscope", &[], "x"),
            StatusCode::BAD_REQUEST,
            "malformed",
            "invalid speedscope file",
        ),
        (
            "a binary type profcol does not read",
            post(
                "/ingest?name=a",
                &[("content-type", "binary/octet-stream+jfr")],
                "x",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_format",
            "binary/octet-stream+jfr",
        ),
        (
            "push without profiles",
            post(
                "/push.v1.PusherService/Push",
                &[proto],
                PushRequest::default().encode_to_vec(),
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "no profiles received",
        ),
        (
            "push that does not decode",
            post("/push.v1.PusherService/Push", &[proto], &b"\xff\xff"[..]),
            StatusCode::BAD_REQUEST,
            "malformed",
            "cannot decode push.v1.PushRequest",
        ),
        (
            "push with a bad sample",
            post(
                "/push.v1.PusherService/Push",
                &[proto],
                bad_push.encode_to_vec(),
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "series[0].samples[1]: the gzip'd pprof is corrupt",
        ),
        (
            "push as connect streaming",
            post(
                "/push.v1.PusherService/Push",
                &[("content-type", "application/connect+proto")],
                "",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "application/connect+proto",
        ),
        (
            "push of another protocol version",
            post(
                "/push.v1.PusherService/Push",
                &[proto, ("connect-protocol-version", "2")],
                "",
            ),
            StatusCode::BAD_REQUEST,
            "malformed",
            "connect-protocol-version",
        ),
    ];
    let valid = || post(folded_uri, &[], "a;b 3\na;c 4");
    let n = cases.len() as u64;
    for (case, req, want, reason, fragment) in cases {
        let before = h.telemetry.items("pyroscope", "request", reason);
        let (status, headers, body) = send(&h.app, req).await;
        assert_eq!(status, want, "{case}: {}", String::from_utf8_lossy(&body));
        assert_eq!(headers["content-type"], "application/json", "{case}");
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let message = json["message"].as_str().unwrap();
        assert!(message.contains(fragment), "{case}: {message}");
        assert!(
            json["code"].as_str().is_some_and(|c| !c.is_empty()),
            "{case}"
        );
        assert_eq!(
            h.telemetry.items("pyroscope", "request", reason),
            before + 1,
            "{case}: counted as {reason}"
        );
        assert!(
            h.rx.try_recv().is_none(),
            "{case}: nothing reaches the pipeline"
        );
        let (status, _, _) = send(&h.app, valid()).await;
        assert_eq!(status, StatusCode::OK, "after {case}");
        assert_eq!(h.rx.try_recv().unwrap().sample_count(), 2, "after {case}");
    }
    assert_eq!(h.telemetry.accepted("pyroscope"), 2 * n);
    // Other methods and paths.
    let get = Request::builder()
        .uri("/ingest?name=a")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&h.app, get).await.0, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, body) = send(&h.app, post("/push.v1.PusherService/Fetch", &[proto], "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&body).contains("\"unimplemented\""));
    assert_eq!(
        h.telemetry.items("pyroscope", "request", "unknown_method"),
        1
    );
}

#[tokio::test]
async fn push_takes_json_and_answers_in_kind() {
    let mut h = default_harness();
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .encode(profcol_model::testing::fixture("pprof/go-cpu.pb.gz"));
    let json = format!(
        r#"{{"series":[{{"labels":[{{"name":"__name__","value":"process_cpu"}},{{"name":"service_name","value":"shop"}},{{"name":"hostname","value":"h1"}}],"samples":[{{"rawProfile":"{raw}","ID":"u"}}]}}]}}"#
    );
    let (status, _, body) = send(
        &h.app,
        post(
            "/push.v1.PusherService/Push",
            &[
                ("content-type", "application/json"),
                ("connect-protocol-version", "1"),
            ],
            gzip(json.as_bytes()),
        ),
    )
    .await;
    // A gzip body without its header is not JSON: refused, then sent right.
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (status, headers2, body2) = send(
        &h.app,
        post(
            "/push.v1.PusherService/Push",
            &[
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            gzip(json.as_bytes()),
        ),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&body2)
    );
    assert_eq!(headers2["content-type"], "application/json");
    assert_eq!(body2, b"{}");
    let b = h.rx.try_recv().unwrap();
    assert_eq!(resource_attr(b.data(), "service.name"), text("shop"));
    assert_eq!(resource_attr(b.data(), "host.name"), text("h1"));
}

/// Accepts `Authorization: Bearer right`, as `bearertokenauth` would.
struct Token;

impl profcol_pipeline::component::Authenticator for Token {
    fn authenticate(&self, headers: &axum::http::HeaderMap) -> Result<(), String> {
        match headers.get("authorization").map(|v| v.as_bytes()) {
            Some(b"Bearer right") => Ok(()),
            Some(_) => Err("wrong token".into()),
            None => Err("missing authorization".into()),
        }
    }

    fn client_headers(
        &self,
    ) -> Result<Vec<(axum::http::HeaderName, axum::http::HeaderValue)>, String> {
        Ok(Vec::new())
    }
}

/// With `auth`, every route wants the credential before anything else of
/// the request (even a body that would not parse): 401 `unauthenticated`,
/// counted `unauthorized`, nothing handed on; the SDKs' bearer token gets
/// in.
#[tokio::test]
async fn auth_is_checked_before_the_request_is_read() {
    let mut h = harness_with_auth(
        PyroscopeReceiverConfig::default(),
        8,
        1 << 30,
        Some(Arc::new(Token)),
    );
    let proto = ("content-type", "application/proto");
    let requests = |auth: &[(&'static str, &'static str)]| {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v = auth.to_vec();
            v.extend_from_slice(extra);
            v
        };
        vec![
            post(
                "/ingest?name=app%7Bunclosed&format=folded",
                &with(&[]),
                "not counted",
            ),
            post("/push.v1.PusherService/Push", &with(&[proto]), &b"\xff"[..]),
            post("/push.v1.PusherService/Fetch", &with(&[proto]), ""),
        ]
    };
    for (who, auth) in [
        ("no credential", vec![]),
        ("a wrong token", vec![("authorization", "Bearer wrong")]),
        ("basic auth", vec![("authorization", "Basic dTpw")]),
    ] {
        for req in requests(&auth) {
            let path = req.uri().path().to_owned();
            let (status, _, body) = send(&h.app, req).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{who} {path}");
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["code"], "unauthenticated", "{who} {path}");
        }
    }
    assert_eq!(h.telemetry.items("pyroscope", "request", "unauthorized"), 9);
    assert_eq!(h.telemetry.items("pyroscope", "request", "malformed"), 0);
    assert!(h.rx.try_recv().is_none());

    // The right token: the requests are read, and judged on their own.
    let good = [("authorization", "Bearer right")];
    let statuses: Vec<StatusCode> = {
        let mut v = Vec::new();
        for req in requests(&good) {
            v.push(send(&h.app, req).await.0);
        }
        v
    };
    assert_eq!(
        statuses,
        [
            StatusCode::BAD_REQUEST,
            StatusCode::BAD_REQUEST,
            StatusCode::NOT_FOUND
        ]
    );
    let (status, _, _) = send(
        &h.app,
        post("/ingest?name=app&format=folded", &good, "a;b 2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(h.rx.try_recv().unwrap().sample_count(), 1);
}

/// Two requests where the queue has room for one: the second is refused
/// with 429 and `Retry-After`, counted, and nothing of it kept; likewise
/// when the memory limit is reached.
#[tokio::test]
async fn a_full_collector_answers_429_with_retry_after() {
    let req = || post("/ingest?name=a&format=folded", &[], "a;b 3\na;c 4");
    let h = harness(PyroscopeReceiverConfig::default(), 1, 1 << 30);
    assert_eq!(send(&h.app, req()).await.0, StatusCode::OK);
    let (status, headers, body) = send(&h.app, req()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["code"], "resource_exhausted");
    assert_eq!(h.telemetry.refused_for("pyroscope", "queue_full"), 2);
    assert_eq!(h.telemetry.items("pyroscope", "request", "queue_full"), 1);
    assert_eq!(h.telemetry.items("pyroscope", "folded", "accepted"), 1);

    // A budget too small to convert the body now.
    let h = harness(PyroscopeReceiverConfig::default(), 4, 2 << 10);
    let (status, headers, _) =
        send(&h.app, post("/ingest?name=a", &[], "a;b 3\n".repeat(100))).await;
    assert!(
        status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::PAYLOAD_TOO_LARGE,
        "{status}"
    );
    if status == StatusCode::TOO_MANY_REQUESTS {
        assert!(headers.contains_key("retry-after"));
    }
}

#[test]
fn config_defaults_and_errors() {
    use profcol_pipeline::component::ReceiverFactory;
    use profcol_pipeline::config::{ComponentConfig, Kind};
    let cfg = ComponentConfig::from_yaml(Kind::Receiver, "pyroscope", "{}").unwrap();
    let c: PyroscopeReceiverConfig = cfg.decode().unwrap();
    assert_eq!(c, PyroscopeReceiverConfig::default());
    assert_eq!(c.server.endpoint, "localhost:4040");
    assert_eq!(c.server.max_request_body_size, 64 << 20);
    assert_eq!((c.record_to.as_deref(), c.record_max_files), (None, 1000));
    let s = c.server.server_settings();
    assert_eq!(s.max_connections, 1024);
    assert_eq!(s.body.timeout, Some(std::time::Duration::from_secs(30)));
    assert_eq!(s.body.read_timeout, None);

    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "pyroscope",
        "endpoint: nope\nmax_request_body_size: 0\nmax_connections: 0\nrecord_to: ''\nidle_timeout: 5 sec\n",
    )
    .unwrap();
    let err = match super::PyroscopeReceiverFactory.create(&cfg) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted a bad config"),
    };
    for want in [
        "receivers::pyroscope::idle_timeout: invalid duration \"5 sec\"",
        "receivers::pyroscope::endpoint: invalid endpoint \"nope\"",
        "receivers::pyroscope::max_request_body_size: must be greater than 0",
        "receivers::pyroscope::max_connections: must be greater than 0",
        "receivers::pyroscope::record_to: must be a directory, not empty",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
    // tls and auth as the other receivers: a TLS block without its
    // certificate is an error at its key; auth names its authenticator.
    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "pyroscope",
        "tls: {}\nauth: {authenticator: bearertokenauth}\n",
    )
    .unwrap();
    let err = match super::PyroscopeReceiverFactory.create(&cfg) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted TLS without a certificate"),
    };
    assert!(
        err.contains("receivers::pyroscope::tls: a server certificate is required"),
        "{err}"
    );
    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "pyroscope",
        "auth: {authenticator: bearertokenauth}\n",
    )
    .unwrap();
    let receiver = super::PyroscopeReceiverFactory.create(&cfg).unwrap();
    assert_eq!(
        receiver.authenticators(),
        [(
            "auth::authenticator".to_owned(),
            "bearertokenauth".to_owned()
        )]
    );
}

/// Started from YAML as the service starts it: an accepted request is
/// recorded decoded as `NNNN.body.bin` with its meta, a refused one not.
#[tokio::test]
async fn record_to_keeps_accepted_requests_replayable() {
    use profcol_pipeline::component::ReceiverContext;
    use profcol_pipeline::config::{ComponentConfig, Kind};
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = format!("endpoint: 127.0.0.1:{port}\nrecord_to: {}\n", rec.display());
    let cfg = ComponentConfig::from_yaml(Kind::Receiver, "pyroscope/prod", &yaml).unwrap();
    let receiver = super::factory().create(&cfg).unwrap();
    let telemetry = Arc::new(Telemetry::new());
    let (output, mut rx) =
        profcol_pipeline::testing::capture("pyroscope/prod", 8, 1 << 30, telemetry.clone());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = receiver
        .start(ReceiverContext {
            id: "pyroscope/prod".into(),
            output,
            shutdown: shutdown.clone(),
            telemetry,
            authenticators: Default::default(),
            storages: Default::default(),
        })
        .await
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let recorded = Recorded::load("pyroscope/python-pyroscope-io-0.8.16/0001");
    let bad = Recorded {
        query: "name=a%7Bb".into(),
        ..Recorded::load("pyroscope/python-pyroscope-io-0.8.16/0002")
    };
    assert_eq!(replay_over_http(addr, &bad).await.0, 400);
    let mut with_auth = recorded;
    with_auth
        .headers
        .push(("Authorization".into(), "Basic c2VjcmV0".into()));
    assert_eq!(replay_over_http(addr, &with_auth).await.0, 200);
    assert!(rx.recv().await.is_some());
    shutdown.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    // The recorder is dropped with the server's handler and writes what
    // it queued first.
    for _ in 0..500 {
        if rec.join("0001.meta.json").exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut names: Vec<String> = std::fs::read_dir(&rec)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["0001.body.bin", "0001.meta.json"]);
    assert_eq!(
        std::fs::read(rec.join("0001.body.bin")).unwrap(),
        with_auth.decoded_body(),
        "the body with its Content-Encoding undone"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("0001.meta.json")).unwrap()).unwrap();
    assert_eq!(meta["path"], "/ingest");
    assert_eq!(meta["query"], with_auth.query);
    assert_eq!(meta["receiver"], "pyroscope/prod");
    let headers: Vec<(String, String)> = serde_json::from_value(meta["headers"].clone()).unwrap();
    assert!(
        headers.contains(&("authorization".into(), "REDACTED".into())),
        "{headers:?}"
    );
    assert!(headers.contains(&("x-profcol-original-content-encoding".into(), "gzip".into())));
}
