//! The receiver driven through its HTTP routes with recorded SDK requests.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use profcol_model::resolved::{resolve, Detail};
use profcol_model::validate::validate;
use profcol_model::ProfileBatch;
use profcol_pipeline::telemetry::Telemetry;

use super::config::SentryReceiverConfig;
use super::handler::Handler;
use super::server::router;

use profcol_model::testing::fixtures_dir as fixtures;

struct Harness {
    app: axum::Router,
    rx: profcol_pipeline::testing::Capture,
    telemetry: Arc<Telemetry>,
}

fn harness(cfg: SentryReceiverConfig, inbox: usize) -> Harness {
    harness_with_budget(cfg, inbox, 1 << 30)
}

/// With a memory limit of `budget` bytes.
fn harness_with_budget(cfg: SentryReceiverConfig, inbox: usize, budget: usize) -> Harness {
    let telemetry = Arc::new(Telemetry::new());
    let (output, rx) =
        profcol_pipeline::testing::capture("sentry", inbox, budget, telemetry.clone());
    let handler = Handler::new(cfg, "sentry".into(), output, telemetry.clone());
    Harness {
        app: router(Arc::new(handler)),
        rx,
        telemetry,
    }
}

fn post(path: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Request<Body> {
    let mut req = Request::builder().method("POST").uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(body.into()).unwrap()
}

async fn send(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn sentry_samples(b: &ProfileBatch) -> u64 {
    b.data()
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .flat_map(|p| &p.samples)
        .map(|s| s.timestamps_unix_nano.len() as u64)
        .sum()
}

/// Every recorded request under `tests/fixtures/sentry-*` (any depth), as
/// `folder/.../NNNN`, sorted: new recordings are replayed without editing here.
fn recorded_requests() -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
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
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir()
            && p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("sentry-")
        {
            walk(&p, &mut metas);
        }
    }
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

/// Listens on a free local port with the receiver's routes.
async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Sends a recorded request over a real connection, as its client did: the
/// recorded request line and headers in their order (only `Host` and
/// `Connection` adapted to this connection), the raw body (still compressed),
/// chunked when it was recorded so. Returns the status and the JSON answer.
async fn replay_over_http(addr: std::net::SocketAddr, rel: &str) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixtures().join(format!("{rel}.meta.json"))).unwrap(),
    )
    .unwrap();
    let body = std::fs::read(fixtures().join(format!("{rel}.body.bin"))).unwrap();
    let query = meta["query"].as_str().unwrap_or("");
    let mut head = format!(
        "{} {}",
        meta["method"].as_str().unwrap(),
        meta["path"].as_str().unwrap()
    );
    if !query.is_empty() {
        head += &format!("?{query}");
    }
    head += " HTTP/1.1\r\n";
    let mut chunked = false;
    for h in meta["headers"].as_array().unwrap() {
        let (k, v) = (h[0].as_str().unwrap(), h[1].as_str().unwrap());
        match k.to_ascii_lowercase().as_str() {
            "host" => head += &format!("{k}: {addr}\r\n"),
            "connection" => {}
            "content-length" => {
                assert_eq!(v.parse::<usize>().unwrap(), body.len(), "{rel}");
                head += &format!("{k}: {v}\r\n");
            }
            "transfer-encoding" => {
                chunked = v.eq_ignore_ascii_case("chunked");
                head += &format!("{k}: {v}\r\n");
            }
            _ => head += &format!("{k}: {v}\r\n"),
        }
    }
    head += "Connection: close\r\n\r\n";
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    if chunked {
        for piece in body.chunks(1000) {
            conn.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                .await
                .unwrap();
            conn.write_all(piece).await.unwrap();
            conn.write_all(b"\r\n").await.unwrap();
        }
        conn.write_all(b"0\r\n\r\n").await.unwrap();
    } else {
        conn.write_all(&body).await.unwrap();
    }
    let mut resp = Vec::new();
    conn.read_to_end(&mut resp).await.unwrap();
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&resp[..split]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut payload = resp[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        let mut out = Vec::new();
        let mut rest = &payload[..];
        loop {
            let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[eol + 2..eol + 2 + n]);
            rest = &rest[eol + 4 + n..];
        }
        payload = out;
    }
    (
        status,
        serde_json::from_slice(&payload).unwrap_or(serde_json::Value::Null),
    )
}

/// Receiver counters as Prometheus lines, sorted, for snapshots.
fn receiver_counters(t: &Telemetry) -> String {
    let mut lines: Vec<&str> = Vec::new();
    let text = t.encode_text();
    for l in text.lines() {
        if l.starts_with("profcol_receiver_items_total{") || l.starts_with("otelcol_receiver_") {
            lines.push(l);
        }
    }
    lines.sort_unstable();
    lines.join("\n")
}

/// Every recorded SDK request replayed over a real connection (with `keys`
/// set, so the recorded auth is checked): 200 with the envelope's event id,
/// every Sentry sample accepted or counted, and a snapshot of the counters and
/// the resolved profile (folded stacks per thread, counts, attributes).
#[tokio::test]
async fn every_recorded_request_replays_over_http() {
    // The `forward/` recordings (every item type an SDK sends) are the
    // front door's tests.
    let rels: Vec<String> = recorded_requests()
        .into_iter()
        .filter(|r| !r.contains("/forward/"))
        .collect();
    assert!(rels.len() >= 4, "{rels:?}");
    for rel in &rels {
        let cfg = SentryReceiverConfig {
            keys: vec!["publickey".into()],
            ..SentryReceiverConfig::default()
        };
        let mut h = harness(cfg, 8);
        let addr = serve(h.app.clone()).await;
        let (status, body) = replay_over_http(addr, rel).await;
        assert_eq!(status, 200, "{rel}: {body}");

        // What the recording holds, from the decoded body.
        let envelope = std::fs::read(fixtures().join(format!("{rel}.envelope"))).unwrap();
        let parsed = profcol_sentry::parse_envelope(&envelope).unwrap();
        let id = body["id"].as_str().unwrap_or_default();
        match parsed.header.get("event_id").and_then(|e| e.as_str()) {
            // The envelope's event_id, as Relay answers.
            Some(e) => assert_eq!(id, e, "{rel}"),
            // None in the header: a fresh one.
            None => assert!(
                id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
                "{rel}: {body}"
            ),
        }
        let profiles: Vec<serde_json::Value> = parsed
            .items
            .iter()
            .filter(|i| matches!(i.item_type(), "profile" | "profile_chunk"))
            .map(|i| serde_json::from_slice(i.payload).unwrap())
            .collect();
        let sent: u64 = profiles
            .iter()
            .map(|p| p["profile"]["samples"].as_array().unwrap().len() as u64)
            .sum();

        let mut text = format!("status {status}\n{}\n", receiver_counters(&h.telemetry));
        match h.rx.try_recv() {
            Some(batch) => {
                validate(batch.data()).unwrap();
                assert_eq!(batch.profile_count() as usize, profiles.len(), "{rel}");
                // Every Sentry sample is one timestamp, except v1 samples
                // outside the transaction, which are counted as refused.
                let accepted = sentry_samples(&batch);
                assert_eq!(accepted + h.telemetry.refused("sentry"), sent, "{rel}");
                assert_eq!(batch.sample_count(), accepted, "{rel}");
                assert_eq!(h.telemetry.accepted("sentry"), accepted, "{rel}");
                text += &resolve(batch.data(), Detail::Names).to_text();
            }
            None => {
                assert!(profiles.is_empty(), "{rel}: profiles but no batch");
                text += "no profiles\n";
            }
        }
        assert!(h.rx.try_recv().is_none(), "{rel}: one batch per envelope");
        insta::assert_snapshot!(rel.replace('/', "_"), text);
    }
}

fn valid_envelope() -> Vec<u8> {
    std::fs::read(fixtures().join("sentry-python/manual/0001.envelope")).unwrap()
}

const AUTH: (&str, &str) = (
    "x-sentry-auth",
    "Sentry sentry_key=publickey, sentry_version=7",
);

#[tokio::test]
async fn bad_input_gets_its_status_and_reason_and_the_next_envelope_is_accepted() {
    let mut cfg = SentryReceiverConfig {
        keys: vec!["publickey".into()],
        ..SentryReceiverConfig::default()
    };
    cfg.server.max_request_body_size = 100 << 20;
    let mut h = harness(cfg, 64);
    let envelope = valid_envelope();
    let chunk_payload = {
        let s = std::str::from_utf8(&envelope).unwrap();
        s.splitn(3, '\n').nth(2).unwrap().trim_end().to_owned()
    };
    let item = |payload: &str| {
        format!("{{}}\n{{\"type\":\"profile_chunk\",\"platform\":\"python\"}}\n{payload}\n")
    };

    let mut truncated = gzip(&envelope);
    truncated.truncate(truncated.len() / 2);
    let bomb = gzip(&vec![b' '; 120 << 20]);
    let unknown_stack = chunk_payload.replacen("\"stack_id\":0", "\"stack_id\":999", 1);
    assert_ne!(
        unknown_stack, chunk_payload,
        "the fixture has a sample on stack 0"
    );
    let big_item = format!(
        "{{}}\n{{\"type\":\"profile_chunk\",\"platform\":\"python\",\"length\":{}}}\n{}\n",
        60 << 20,
        " ".repeat(60 << 20)
    );

    // (case, request, status, (item type, outcome) counted)
    type Case = (
        &'static str,
        Request<Body>,
        StatusCode,
        (&'static str, &'static str),
    );
    let cases: Vec<Case> = vec![
        (
            "truncated gzip",
            post(
                "/api/1/envelope/",
                &[AUTH, ("content-encoding", "gzip")],
                truncated,
            ),
            StatusCode::BAD_REQUEST,
            ("envelope", "malformed"),
        ),
        (
            "gzip bomb",
            post(
                "/api/1/envelope/",
                &[AUTH, ("content-encoding", "gzip")],
                bomb,
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            ("envelope", "too_large"),
        ),
        (
            "length past the end",
            post(
                "/api/1/envelope/",
                &[AUTH],
                "{}\n{\"type\":\"profile_chunk\",\"length\":5000}\n{}\n",
            ),
            StatusCode::BAD_REQUEST,
            ("envelope", "malformed"),
        ),
        (
            "invalid envelope header",
            post("/api/1/envelope/", &[AUTH], "{not json\n"),
            StatusCode::BAD_REQUEST,
            ("envelope", "malformed"),
        ),
        (
            "invalid item JSON",
            post("/api/1/envelope/", &[AUTH], item("{\"version\":\"2\",")),
            StatusCode::OK,
            ("profile_chunk", "profiling_invalid_json"),
        ),
        (
            "unknown stack id",
            post("/api/1/envelope/", &[AUTH], item(&unknown_stack)),
            StatusCode::OK,
            ("profile_chunk", "profiling_malformed_samples"),
        ),
        (
            "wrong key",
            post(
                "/api/1/envelope/",
                &[("x-sentry-auth", "Sentry sentry_key=nope")],
                envelope.clone(),
            ),
            StatusCode::UNAUTHORIZED,
            ("envelope", "unauthorized"),
        ),
        (
            "no key",
            post("/api/1/envelope/", &[], envelope.clone()),
            StatusCode::UNAUTHORIZED,
            ("envelope", "unauthorized"),
        ),
        (
            "60 MiB item",
            post("/api/1/envelope/", &[AUTH], big_item),
            StatusCode::OK,
            ("profile_chunk", "profiling_too_large"),
        ),
        (
            "empty body",
            post("/api/1/envelope/", &[AUTH], ""),
            StatusCode::BAD_REQUEST,
            ("envelope", "malformed"),
        ),
        (
            "unknown encoding",
            post(
                "/api/1/envelope/",
                &[AUTH, ("content-encoding", "compress")],
                envelope.clone(),
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ("envelope", "unsupported_encoding"),
        ),
        (
            "dsn for another project",
            post(
                "/api/1/envelope/",
                &[],
                format!(
                    "{{\"dsn\":\"http://publickey@localhost:3000/2\"}}\n{}",
                    &item(&chunk_payload)[3..]
                ),
            ),
            StatusCode::BAD_REQUEST,
            ("envelope", "dsn_mismatch"),
        ),
        (
            "non-numeric project",
            post("/api/abc/envelope/", &[AUTH], envelope.clone()),
            StatusCode::BAD_REQUEST,
            ("envelope", "invalid_project"),
        ),
    ];
    for (case, req, want, (ty, outcome)) in cases {
        let before = h.telemetry.items("sentry", ty, outcome);
        let (status, _, body) = send(&h.app, req).await;
        assert_eq!(status, want, "{case}: {body}");
        if status != StatusCode::OK {
            assert!(
                body["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "{case}: {body}"
            );
        }
        // Broken framing, JSON or compression: the parser's words as causes.
        if [
            "truncated gzip",
            "length past the end",
            "invalid envelope header",
        ]
        .contains(&case)
        {
            assert!(
                body["causes"].as_array().is_some_and(|c| !c.is_empty()),
                "{case}: {body}"
            );
        }
        assert_eq!(
            h.telemetry.items("sentry", ty, outcome),
            before + 1,
            "{case}: counted as {ty}/{outcome}"
        );
        assert!(
            h.rx.try_recv().is_none(),
            "{case}: nothing reaches the pipeline"
        );
        // A valid envelope right after is still accepted.
        let (status, _, _) = send(&h.app, post("/api/1/envelope", &[AUTH], envelope.clone())).await;
        assert_eq!(status, StatusCode::OK, "after {case}");
        assert!(h.rx.try_recv().is_some(), "after {case}");
    }
    // Auth from the envelope's dsn alone is enough.
    let with_dsn = format!(
        "{{\"dsn\":\"http://publickey@localhost:3000/1\"}}\n{}",
        &item(&chunk_payload)[3..]
    );
    let (status, _, _) = send(&h.app, post("/api/1/envelope/", &[], with_dsn)).await;
    assert_eq!(status, StatusCode::OK);
}

/// Sends two envelopes where `h` has room for one: the second gets 429
/// with `detail`, and it (and, when it was converted before the refusal,
/// `converted`, its item and samples) is counted with `reason`, not as
/// accepted. Returns the 429's headers.
async fn second_envelope_refused(
    h: &Harness,
    reason: &str,
    detail: &str,
    converted: bool,
) -> axum::http::HeaderMap {
    let (first, _, _) = send(&h.app, post("/api/1/envelope/", &[], valid_envelope())).await;
    assert_eq!(first, StatusCode::OK);
    let (status, headers, body) =
        send(&h.app, post("/api/1/envelope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(body["detail"], detail);
    let n = u64::from(converted);
    assert_eq!(h.telemetry.refused_for("sentry", reason), 1085 * n);
    let items = |outcome| h.telemetry.items("sentry", "profile_chunk", outcome);
    assert_eq!((items("accepted"), items(reason)), (1, n));
    assert_eq!(h.telemetry.items("sentry", "envelope", reason), 1);
    headers
}

#[tokio::test]
async fn a_full_queue_answers_429_with_rate_limits() {
    let h = harness(SentryReceiverConfig::default(), 1);
    let headers = second_envelope_refused(
        &h,
        "queue_full",
        "the sending queue of exporters::capture is full, retry later",
        true,
    )
    .await;
    let limits = headers["x-sentry-rate-limits"].to_str().unwrap();
    assert!(
        limits.starts_with("1:") && limits.contains("profile_chunk"),
        "{limits}"
    );
}

#[tokio::test]
async fn the_memory_limit_answers_429_and_says_so() {
    // Room to convert one envelope (three times its JSON) and keep its
    // batch, not to convert a second while the first is held.
    let mut probe = harness(SentryReceiverConfig::default(), 1);
    send(&probe.app, post("/api/1/envelope/", &[], valid_envelope())).await;
    let held = probe.rx.recv().await.unwrap().held_bytes();
    let budget = 3 * valid_envelope().len() + held / 2;
    let h = harness_with_budget(SentryReceiverConfig::default(), 4, budget);
    // Refused before the conversion: its samples are not known.
    second_envelope_refused(
        &h,
        "memory_limit",
        "the memory limit is reached, retry later",
        false,
    )
    .await;
}

#[tokio::test]
async fn project_ids_restrict_the_url() {
    let cfg = SentryReceiverConfig {
        project_ids: vec![super::ProjectId::Number(42)],
        ..SentryReceiverConfig::default()
    };
    let h = harness(cfg, 4);
    let (status, _, _) = send(&h.app, post("/api/1/envelope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = send(&h.app, post("/api/42/envelope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::OK);
}

#[test]
fn config_defaults_and_errors() {
    use profcol_pipeline::component::ReceiverFactory;
    use profcol_pipeline::config::{ComponentConfig, Kind};
    let cfg = ComponentConfig::from_yaml(Kind::Receiver, "sentry", "{}").unwrap();
    let c: SentryReceiverConfig = cfg.decode().unwrap();
    assert_eq!(c, SentryReceiverConfig::default());
    assert_eq!(c.server.endpoint, "localhost:3000");
    assert_eq!(
        (c.server.max_request_body_size, c.max_item_size),
        (200 << 20, 50 << 20)
    );

    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "sentry/mobile",
        "endpoint: 127.0.0.1:3001\nkeys: [abc]\nproject_ids: [1, \"2\"]\nservice_name: shop\ninclude_original_payload: true\n",
    )
    .unwrap();
    let c: SentryReceiverConfig = cfg.decode().unwrap();
    c.validate(&cfg).unwrap();
    assert_eq!(c.keys, ["abc"]);
    assert_eq!(
        c.project_ids
            .iter()
            .map(|p| p.as_string())
            .collect::<Vec<_>>(),
        ["1", "2"]
    );

    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "sentry",
        "project_ids: [x1]\nmax_item_size: 0\n",
    )
    .unwrap();
    let c: SentryReceiverConfig = cfg.decode().unwrap();
    let err = c.validate(&cfg).unwrap_err().to_string();
    assert!(
        err.contains("receivers::sentry::project_ids::0: invalid project id"),
        "{err}"
    );
    assert!(
        err.contains("receivers::sentry::max_item_size: must be greater than 0"),
        "{err}"
    );
    // The factory (what `profcol validate` runs) reports a key that fails
    // to decode together with the checks of the others.
    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "sentry",
        "keys: abc\nproject_ids: [x1]\nmax_item_size: 0\nservice_name: ''\n",
    )
    .unwrap();
    let err = match super::SentryReceiverFactory.create(&cfg) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted a bad config"),
    };
    assert_eq!(
        err,
        "receivers::sentry::keys: invalid type: expected a sequence, got string \"abc\"\n\
         receivers::sentry::max_item_size: must be greater than 0\n\
         receivers::sentry::project_ids::0: invalid project id \"x1\": must be a number\n\
         receivers::sentry::service_name: must not be empty (remove the key to derive it from release)"
    );
    let cfg = ComponentConfig::from_yaml(Kind::Receiver, "sentry", "max_item_sise: 1\n").unwrap();
    let err = cfg
        .decode::<SentryReceiverConfig>()
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("receivers::sentry"), "{err}");
    assert!(err.contains("max_item_sise"), "{err}");
}

/// A handler recording into `dir`, keeping `max_files`.
/// The batches' receiver is returned to keep the inbox open.
fn recording_app(
    dir: &std::path::Path,
    max_files: usize,
) -> (axum::Router, profcol_pipeline::testing::Capture) {
    let telemetry = Arc::new(Telemetry::new());
    let (output, rx) = profcol_pipeline::testing::capture("sentry", 64, 1 << 30, telemetry.clone());
    let recorder = crate::record::Recorder::start(dir, max_files, "sentry").unwrap();
    let handler = Handler::new(
        SentryReceiverConfig::default(),
        "sentry".into(),
        output,
        telemetry,
    )
    .with_recorder(Some(recorder));
    (router(Arc::new(handler)), rx)
}

fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn read_meta(dir: &std::path::Path, seq: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(format!("{seq}.meta.json"))).unwrap()).unwrap()
}

#[tokio::test]
async fn record_to_keeps_accepted_envelopes_only() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _rx) = recording_app(dir.path(), 10);

    // Refused requests are not recorded.
    let (status, _, _) = send(&app, post("/api/1/envelope/", &[], "not an envelope")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = send(&app, post("/api/x/envelope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let envelope = valid_envelope();
    let auth = "Sentry sentry_key=secretkey, sentry_version=7, sentry_client=sentry.python/2.75.0";
    let req = post(
        "/api/1/envelope/?sentry_version=7&sentry_key=querykey",
        &[
            ("user-agent", "sentry.python/2.75.0"),
            ("content-encoding", "gzip"),
            ("x-sentry-auth", auth),
            ("cookie", "sid=c00kie"),
        ],
        gzip(&envelope),
    );
    let (status, _, _) = send(&app, req).await;
    assert_eq!(status, StatusCode::OK);
    drop(app); // the recorder finishes writing when the handler goes

    assert_eq!(file_names(dir.path()), ["0001.envelope", "0001.meta.json"]);
    assert_eq!(
        std::fs::read(dir.path().join("0001.envelope")).unwrap(),
        envelope,
        "the uncompressed body, byte for byte"
    );
    let meta = read_meta(dir.path(), "0001");
    let text = meta.to_string();
    for secret in ["secretkey", "querykey", "c00kie"] {
        assert!(!text.contains(secret), "{secret}: {meta:#}");
    }
    assert_eq!(meta["seq"], 1);
    assert!(meta["time"].as_f64().is_some_and(|t| t > 1.7e9), "{meta:#}");
    assert_eq!(meta["method"], "POST");
    assert_eq!(meta["path"], "/api/1/envelope/");
    assert_eq!(meta["query"], "sentry_version=7&sentry_key=REDACTED");
    assert_eq!(meta["http_version"], "HTTP/1.1");
    assert_eq!(meta["receiver"], "sentry");
    assert_eq!(meta["transport"], "http");
    assert_eq!(meta["body"], "0001.envelope");
    let headers: Vec<(String, String)> = serde_json::from_value(meta["headers"].clone()).unwrap();
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        headers,
        [
            pair("user-agent", "sentry.python/2.75.0"),
            pair("x-profcol-original-content-encoding", "gzip"),
            pair(
                "x-sentry-auth",
                "Sentry sentry_key=REDACTED, sentry_version=7, sentry_client=sentry.python/2.75.0"
            ),
            pair("cookie", "REDACTED"),
        ],
        "arrival order, no content-encoding or content-length"
    );
}

#[tokio::test]
async fn record_to_redacts_only_the_key_in_an_envelope_dsn() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _rx) = recording_app(dir.path(), 0);
    let envelope = valid_envelope();
    let items = &envelope[envelope.iter().position(|b| *b == b'\n').unwrap()..];
    let header = r#"{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc", "dsn":"http://publickey@localhost:3000/1","trace":{"public_key":"publickey","trace_id":"t"}}"#;
    let sent = [header.as_bytes(), items].concat();
    let (status, _, _) = send(&app, post("/api/1/envelope/", &[], sent)).await;
    assert_eq!(status, StatusCode::OK);
    drop(app);

    let recorded = std::fs::read(dir.path().join("0001.envelope")).unwrap();
    let want_header = r#"{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc", "dsn":"http://REDACTED@localhost:3000/1","trace":{"public_key":"REDACTED","trace_id":"t"}}"#;
    assert_eq!(
        String::from_utf8_lossy(&recorded[..want_header.len()]),
        want_header
    );
    assert!(
        recorded[want_header.len()..] == *items,
        "every item byte is unchanged"
    );
}

#[tokio::test]
async fn record_to_rotates_and_continues_numbering() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _rx) = recording_app(dir.path(), 2);
    for _ in 0..3 {
        let (status, _, _) = send(&app, post("/api/1/envelope/", &[], valid_envelope())).await;
        assert_eq!(status, StatusCode::OK);
    }
    drop(app);
    let kept = [
        "0002.envelope",
        "0002.meta.json",
        "0003.envelope",
        "0003.meta.json",
    ];
    assert_eq!(file_names(dir.path()), kept);
    // A restart continues after the highest number instead of overwriting.
    let (app, _rx) = recording_app(dir.path(), 2);
    let (status, _, _) = send(&app, post("/api/1/envelope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::OK);
    drop(app);
    assert_eq!(
        file_names(dir.path()),
        [
            "0003.envelope",
            "0003.meta.json",
            "0004.envelope",
            "0004.meta.json"
        ]
    );
    assert_eq!(read_meta(dir.path(), "0004")["seq"], 4);
}

#[tokio::test]
async fn record_to_config_and_start_up_errors() {
    use profcol_pipeline::component::ReceiverContext;
    use profcol_pipeline::config::{ComponentConfig, Kind};

    let decode = |yaml: &str| {
        let cfg = ComponentConfig::from_yaml(Kind::Receiver, "sentry/prod", yaml).unwrap();
        let c: SentryReceiverConfig = cfg.decode().unwrap();
        (cfg, c)
    };
    let (_, c) = decode("{}");
    assert_eq!((c.record_to.as_deref(), c.record_max_files), (None, 1000));
    let (cfg, c) = decode("record_to: \" \"\n");
    let err = c.validate(&cfg).unwrap_err().to_string();
    assert!(
        err.contains("receivers::sentry/prod::record_to: must be a directory"),
        "{err}"
    );

    // A directory that cannot be created fails the start, naming the key:
    // here one below a file that appeared after the config was checked.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    let (cfg, _) = decode(&format!(
        "endpoint: 127.0.0.1:0\nrecord_to: {}\nrecord_max_files: 5\n",
        file.join("rec").display()
    ));
    let receiver = super::factory().create(&cfg).unwrap();
    std::fs::write(&file, "").unwrap();
    // Creating the receiver (what `validate` does) refuses one that already
    // is, and a path that is a file, without creating anything.
    for (path, want) in [
        (
            file.join("rec"),
            format!(
                "receivers::sentry/prod::record_to: cannot use {}: Not a directory (os error 20)",
                file.join("rec").display()
            ),
        ),
        (
            file.clone(),
            format!(
                "receivers::sentry/prod::record_to: {} exists but is not a directory",
                file.display()
            ),
        ),
    ] {
        let (cfg, _) = decode(&format!("record_to: {}\n", path.display()));
        let err = match super::factory().create(&cfg) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted {}", path.display()),
        };
        assert_eq!(err, want);
    }
    let (cfg, _) = decode(&format!(
        "record_to: {}\n",
        dir.path().join("new/rec").display()
    ));
    assert!(super::factory().create(&cfg).is_ok());
    assert!(!dir.path().join("new").exists());
    let telemetry = Arc::new(Telemetry::new());
    let (output, _rx) = profcol_pipeline::testing::capture("sentry/prod", 1, 1, telemetry.clone());
    let ctx = ReceiverContext {
        id: "sentry/prod".into(),
        output,
        shutdown: tokio_util::sync::CancellationToken::new(),
        telemetry,
        authenticators: Default::default(),
        storages: Default::default(),
    };
    let err = receiver.start(ctx).await.err().unwrap().to_string();
    assert!(
        err.starts_with("receivers::sentry/prod::record_to: cannot create"),
        "{err}"
    );
}

/// Every place an SDK puts its key, checked against `keys`, and a body that
/// arrives in pieces (chunked transfer encoding) and compressed.
#[tokio::test]
async fn keys_are_read_from_each_place_and_chunked_bodies_are_accepted() {
    let cfg = SentryReceiverConfig {
        keys: vec!["publickey".into()],
        ..SentryReceiverConfig::default()
    };
    let mut h = harness(cfg, 64);
    for (case, path, headers, want) in [
        (
            "query",
            "/api/1/envelope/?sentry_key=publickey&sentry_version=7",
            vec![],
            StatusCode::OK,
        ),
        (
            "query, wrong key",
            "/api/1/envelope/?sentry_key=other",
            vec![],
            StatusCode::UNAUTHORIZED,
        ),
        (
            "Authorization",
            "/api/1/envelope/",
            vec![(
                "authorization",
                "Sentry sentry_key=publickey, sentry_version=7, sentry_client=sentry.go/0.30.0",
            )],
            StatusCode::OK,
        ),
        (
            "Authorization, wrong key",
            "/api/1/envelope/",
            vec![("authorization", "Sentry sentry_key=other, sentry_version=7")],
            StatusCode::UNAUTHORIZED,
        ),
        (
            "X-Sentry-Auth",
            "/api/1/envelope/",
            vec![AUTH],
            StatusCode::OK,
        ),
        (
            // Relay reads `Authorization: Basic base64(KEY:)` too.
            "Authorization: Basic",
            "/api/1/envelope/",
            vec![("authorization", "Basic cHVibGlja2V5Og==")],
            StatusCode::OK,
        ),
        (
            "Authorization: Basic, wrong key",
            "/api/1/envelope/",
            vec![("authorization", "Basic b3RoZXI6c2VjcmV0")],
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        let (status, _, body) = send(&h.app, post(path, &headers, valid_envelope())).await;
        assert_eq!(status, want, "{case}: {body}");
        assert_eq!(h.rx.try_recv().is_some(), want == StatusCode::OK, "{case}");
    }

    let compressed = gzip(&valid_envelope());
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
        compressed.chunks(1000).map(|c| Ok(c.to_vec())).collect();
    assert!(pieces.len() > 5);
    let body = Body::from_stream(futures::stream::iter(pieces));
    let (status, _, body) = send(
        &h.app,
        post(
            "/api/1/envelope/",
            &[
                AUTH,
                ("content-encoding", "gzip"),
                ("transfer-encoding", "chunked"),
            ],
            body,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(sentry_samples(&h.rx.try_recv().unwrap()), 1085);
}

/// v1 over HTTP: samples outside the transaction's window are left out and
/// counted as refused (`outside_transaction`), the rest are accepted and
/// linked to the transaction's trace and span. The envelope is rebuilt the
/// loose way SDKs write it: no `length`, blank lines, no final newline.
#[tokio::test]
async fn v1_samples_outside_the_transaction_are_counted_over_http() {
    let bytes = std::fs::read(fixtures().join("sentry-python/v1/0001.envelope")).unwrap();
    let env = profcol_sentry::parse_envelope(&bytes).unwrap();
    let mut profile: serde_json::Value = serde_json::from_slice(env.items[0].payload).unwrap();
    profile["transactions"][0]["relative_end_ns"] = serde_json::json!("1000000000");
    let samples = profile["profile"]["samples"].as_array().unwrap();
    let inside = samples
        .iter()
        .filter(|s| {
            let ns: u64 = s["elapsed_since_start_ns"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            ns <= 1_000_000_000
        })
        .count() as u64;
    let total = samples.len() as u64;
    assert!(inside > 0 && inside < total);
    let tx = env.items[1].payload;
    assert!(!tx.contains(&b'\n'));
    let header_line = &bytes[..bytes.iter().position(|b| *b == b'\n').unwrap()];
    // The profile, then (after `gap`) its transaction.
    let envelope = |profile: &serde_json::Value, gap: &[u8]| {
        [
            header_line,
            b"\n{\"type\":\"profile\",\"platform\":\"python\"}\n",
            &serde_json::to_vec(profile).unwrap(),
            gap,
            b"{\"type\":\"transaction\"}\n",
            tx,
        ]
        .concat()
    };
    let body = envelope(&profile, b"\n\n\n");

    let mut h = harness(SentryReceiverConfig::default(), 8);
    let (status, _, answer) = send(&h.app, post("/api/1/envelope/", &[], body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["id"], "7fc428df13c34d1e90c82c67fb037c90");
    let batch = h.rx.try_recv().unwrap();
    assert_eq!(sentry_samples(&batch), inside);
    assert_eq!(h.telemetry.accepted("sentry"), inside);
    assert_eq!(
        h.telemetry.refused_for("sentry", "outside_transaction"),
        total - inside
    );
    assert_eq!(h.telemetry.items("sentry", "profile", "accepted"), 1);
    assert_eq!(h.telemetry.items("sentry", "transaction", "used"), 1);
    let data = batch.data();
    let dict = data.dictionary.as_ref().unwrap();
    for s in data
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .flat_map(|p| &p.samples)
    {
        let link = &dict.link_table[s.link_index as usize];
        assert_eq!(
            (hex(&link.trace_id), hex(&link.span_id)),
            (
                "9558c43617dd4a2b9bcde612fb8eb31c".into(),
                "9f04ed82547963b4".into()
            )
        );
    }

    // The same envelope with its profile refused: the transaction served
    // nothing.
    let mut broken = profile.clone();
    broken["profile"]["samples"] = serde_json::json!([]);
    let body = envelope(&broken, b"\n");
    let (status, _, _) = send(&h.app, post("/api/1/envelope/", &[], body)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        h.telemetry
            .items("sentry", "profile", "profiling_not_enough_samples"),
        1
    );
    assert_eq!(h.telemetry.items("sentry", "transaction", "used"), 1);
    assert_eq!(h.telemetry.items("sentry", "transaction", "ignored"), 1);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Relay folds runs of slashes in the path before routing (its
/// `NormalizePath`); the query is left alone.
#[tokio::test]
async fn duplicate_slashes_in_the_path_are_folded() {
    let cfg = SentryReceiverConfig {
        keys: vec!["publickey".into()],
        ..SentryReceiverConfig::default()
    };
    let mut h = harness(cfg, 8);
    for path in [
        "//api/42/envelope/?sentry_key=publickey",
        "/api//42///envelope//?sentry_key=publickey",
        "///api/42/envelope?sentry_key=publickey",
    ] {
        let (status, _, body) = send(&h.app, post(path, &[], valid_envelope())).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        let batch = h.rx.try_recv().unwrap();
        assert_eq!(sentry_samples(&batch), 1085, "{path}");
        match &batch.meta.origin {
            profcol_model::Origin::Sentry { project_id, .. } => {
                assert_eq!(project_id, "42", "{path}")
            }
            other => panic!("{path}: {other:?}"),
        }
    }
    // Still the key from the (untouched) query.
    let (status, _, _) = send(
        &h.app,
        post("//api/42/envelope/?sentry_key=other", &[], valid_envelope()),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&h.app, post("/api/42/nope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Browser SDKs post cross-origin: as in Relay, any origin may, the
/// preflight is answered, and the answers' rate-limit headers are exposed
/// so the SDK can read them on a 429 (and on a 200).
#[tokio::test]
async fn browsers_may_post_from_any_origin_and_read_the_rate_limits() {
    let mut h = harness(SentryReceiverConfig::default(), 1);
    let origin = ("origin", "https://shop.example");

    let preflight = Request::builder()
        .method("OPTIONS")
        .uri("/api/1/envelope/?sentry_key=publickey&sentry_version=7")
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&h.app, preflight).await;
    assert!(status.is_success(), "{status}");
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert_eq!(headers["access-control-allow-methods"], "POST");
    let allowed = headers["access-control-allow-headers"].to_str().unwrap();
    for name in [
        "content-type",
        "x-sentry-auth",
        "content-encoding",
        "authorization",
    ] {
        assert!(
            allowed.split(',').any(|h| h.trim() == name),
            "{name}: {allowed}"
        );
    }
    assert_eq!(headers["access-control-max-age"], "3600");
    assert!(h.rx.try_recv().is_none(), "a preflight carries no envelope");
    // Also where the path has doubled slashes.
    let preflight = Request::builder()
        .method("OPTIONS")
        .uri("//api/1//envelope/")
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&h.app, preflight).await;
    assert!(status.is_success(), "{status}");
    assert_eq!(headers["access-control-allow-origin"], "*");

    let exposed = |headers: &axum::http::HeaderMap| -> Vec<String> {
        let v = headers["access-control-expose-headers"].to_str().unwrap();
        let mut names: Vec<String> = v.split(',').map(|s| s.trim().to_owned()).collect();
        names.sort();
        names
    };
    let want = ["retry-after", "x-sentry-error", "x-sentry-rate-limits"];
    let (status, headers, _) = send(
        &h.app,
        post("/api/1/envelope/", &[origin], valid_envelope()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert_eq!(exposed(&headers), want);
    // The inbox of one is now full.
    let (status, headers, _) = send(
        &h.app,
        post("/api/1/envelope/", &[origin], valid_envelope()),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert_eq!(exposed(&headers), want);
    assert!(headers.contains_key("x-sentry-rate-limits") && headers.contains_key("retry-after"));
    assert!(h.rx.try_recv().is_some());
}

/// The Cocoa SDK sends its chunks without `client_sdk`; the envelope
/// header's `sdk` names it instead. The handler hands the header over.
#[tokio::test]
async fn a_cocoa_chunk_takes_its_sdk_from_the_envelope_header() {
    let chunk = serde_json::json!({
        "version": "2", "platform": "cocoa", "release": "app@1.0",
        "chunk_id": "0c2a5e3bc5a24b4e9f3a0e1a22a6d5c1",
        "profiler_id": "d8f8e8b7a6b54b3c9a1d2e3f4a5b6c7d",
        "profile": {
            "samples": [
                {"timestamp": 1795318570.0, "stack_id": 0, "thread_id": "259"},
                {"timestamp": 1795318570.01, "stack_id": 0, "thread_id": "259"},
            ],
            "stacks": [[0]],
            "frames": [{"function": "main", "instruction_addr": "0x102581000"}],
        },
    });
    let body = format!(
        "{{\"sdk\":{{\"name\":\"sentry.cocoa\",\"version\":\"8.40.1\"}}}}\n{{\"type\":\"profile_chunk\",\"platform\":\"cocoa\"}}\n{chunk}\n"
    );
    let mut h = harness(SentryReceiverConfig::default(), 4);
    let (status, _, answer) = send(&h.app, post("/api/1/envelope/", &[], body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let batch = h.rx.try_recv().unwrap();
    let rp = &batch.data().resource_profiles[0];
    let resource: std::collections::BTreeMap<&str, String> = rp
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|kv| {
            (
                kv.key.as_str(),
                format!("{:?}", kv.value.as_ref().unwrap().value),
            )
        })
        .collect();
    assert!(
        resource["telemetry.sdk.name"].contains("sentry.cocoa"),
        "{resource:?}"
    );
    assert!(
        resource["telemetry.sdk.version"].contains("8.40.1"),
        "{resource:?}"
    );
    assert_eq!(
        rp.scope_profiles[0].scope.as_ref().unwrap().name,
        "sentry.cocoa"
    );
}

/// `forward_to` and its keys are checked at their key paths.
#[test]
fn forwarding_config_errors_name_their_key() {
    use profcol_pipeline::config::{ComponentConfig, Kind};
    for (yaml, want) in [
        ("forward_to: o1.ingest.sentry.io", "receivers::sentry::forward_to: \"o1.ingest.sentry.io\" is not an http:// or https:// base URL"),
        ("forward_profiles: true", "receivers::sentry::forward_to: is required with forward_profiles"),
        ("{forward_to: 'https://s.io', forward_to_project: abc}", "receivers::sentry::forward_to_project: invalid project id"),
        ("{forward_to: 'https://s.io', forward_to_key: 'a b'}", "receivers::sentry::forward_to_key"),
        ("{forward_to: 'https://s.io', forwarding: {timeout: 0s}}", "receivers::sentry::forwarding::timeout: must be greater than 0"),
        ("{forward_to: 'https://s.io', forwarding: {sending_queue: {enabled: false, storage: file_storage}}}", "receivers::sentry::forwarding::sending_queue::storage"),
        ("{forward_to: 'https://s.io', forwarding: {sending_queue: {sizer: items}}}", "receivers::sentry::forwarding::sending_queue::sizer: \"items\" is not supported: envelopes are forwarded whole"),
        ("{forward_to: 'https://s.io', forwarding: {tls: {ca_file: /nonexistent.pem}}}", "receivers::sentry::forwarding::tls::ca_file: cannot read /nonexistent.pem"),
        ("{forward_to: 'https://s.io', forwarding: {retries: 3}}", "receivers::sentry::forwarding: unknown field"),
    ] {
        let cfg = ComponentConfig::from_yaml(Kind::Receiver, "sentry", yaml).unwrap();
        let err = match super::factory().create(&cfg) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted {yaml}"),
        };
        assert!(err.contains(want), "{yaml}\n  got: {err}");
    }
}

/// Without `forward_to`, what the pipeline does not take is answered 200
/// and dropped: the log says so once per item type, so that a user of the
/// shipped config learns why Sentry never sees their errors.
#[tokio::test]
async fn unforwarded_items_are_logged_once_per_type() {
    #[derive(Clone, Default)]
    struct Log(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // Global: envelopes are converted on the CPU pool's threads. Other
    // tests' lines land here too: the item types are ones no other test
    // sends.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let h = harness(SentryReceiverConfig::default(), 4);
    let item = |ty: &str, payload: &str| {
        format!(
            "{{\"type\":\"{ty}\",\"length\":{}}}\n{payload}\n",
            payload.len()
        )
    };
    for _ in 0..3 {
        let body = format!(
            "{{\"event_id\":\"9ec79c33ec9942ab8353589fcb2e04dc\"}}\n{}{}{}",
            item("check_in", "{\"check_in_id\":\"a\"}"),
            item("check_in", "{\"check_in_id\":\"b\"}"),
            item("replay_event", "{\"replay_id\":\"x\"}"),
        );
        let (status, _, _) = send(&h.app, post("/api/1/envelope/", &[], body)).await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(h.telemetry.items("sentry", "check_in", "ignored"), 6);
    assert_eq!(h.telemetry.items("sentry", "replay_event", "ignored"), 3);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines = |ty: &str| {
        let needle = format!("{ty} items are answered 200 and dropped: set forward_to");
        text.lines().filter(|l| l.contains(&needle)).count()
    };
    assert_eq!((lines("check_in"), lines("replay_event")), (1, 1), "{text}");
}
