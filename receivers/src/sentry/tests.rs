//! The receiver driven through its HTTP routes with recorded SDK requests.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tokio::sync::{mpsc, Semaphore};
use tower::ServiceExt;

use profcol_pipeline::component::Output;
use profcol_pipeline::model::resolved::{resolve, Detail};
use profcol_pipeline::model::validate::validate;
use profcol_pipeline::telemetry::Telemetry;
use profcol_pipeline::ProfileBatch;

use super::config::SentryReceiverConfig;
use super::handler::Handler;
use super::server::router;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

struct Harness {
    app: axum::Router,
    rx: mpsc::Receiver<Arc<ProfileBatch>>,
    telemetry: Arc<Telemetry>,
}

fn harness(cfg: SentryReceiverConfig, inbox: usize) -> Harness {
    let (tx, rx) = mpsc::channel(inbox);
    let telemetry = Arc::new(Telemetry::new());
    let output = Output::new(
        "sentry",
        vec![tx],
        Arc::new(Semaphore::new(1 << 30)),
        1 << 30,
        telemetry.clone(),
    );
    let handler = Handler::new(cfg, "sentry".into(), output, telemetry.clone());
    Harness {
        app: router(Arc::new(handler)),
        rx,
        telemetry,
    }
}

/// A recorded request: method, path, query and headers from `.meta.json`,
/// the raw body (still compressed) from `.body.bin`.
fn recorded(rel: &str) -> Request<Body> {
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixtures().join(format!("{rel}.meta.json"))).unwrap(),
    )
    .unwrap();
    let body = std::fs::read(fixtures().join(format!("{rel}.body.bin"))).unwrap();
    let query = meta["query"].as_str().unwrap_or("");
    let uri = if query.is_empty() {
        meta["path"].as_str().unwrap().to_owned()
    } else {
        format!("{}?{query}", meta["path"].as_str().unwrap())
    };
    let mut req = Request::builder().method("POST").uri(uri);
    for h in meta["headers"].as_array().unwrap() {
        let (k, v) = (h[0].as_str().unwrap(), h[1].as_str().unwrap());
        // Framing headers belong to the recorded connection, not this one.
        if !["host", "content-length", "transfer-encoding", "connection"]
            .contains(&k.to_ascii_lowercase().as_str())
        {
            req = req.header(k, v);
        }
    }
    req.body(Body::from(body)).unwrap()
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

#[tokio::test]
async fn recorded_envelopes_are_accepted_and_converted() {
    // (fixture, Sentry samples in the payload, event id the SDK set)
    for (rel, samples, event_id) in [
        ("sentry-python/manual/0001", 1085u64, None),
        ("sentry-node/manual/0001", 475, None),
        (
            "sentry-python/v1/0001",
            498,
            Some("7fc428df13c34d1e90c82c67fb037c90"),
        ),
    ] {
        let mut h = harness(SentryReceiverConfig::default(), 8);
        let (status, _, body) = send(&h.app, recorded(rel)).await;
        assert_eq!(status, StatusCode::OK, "{rel}: {body}");
        let id = body["id"].as_str().unwrap_or_default();
        match event_id {
            // The envelope's event_id, as Relay answers.
            Some(e) => assert_eq!(id, e, "{rel}"),
            // None in the header: a fresh one.
            None => assert!(
                id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
                "{rel}: {body}"
            ),
        }
        let batch = h.rx.try_recv().expect("one batch per envelope");
        validate(batch.data()).unwrap();
        assert_eq!(batch.profile_count(), 1, "{rel}");
        // Every Sentry sample is one timestamp, except v1 samples outside the
        // transaction, which are counted as dropped.
        let dropped = h.telemetry.refused("sentry");
        assert_eq!(sentry_samples(&batch) + dropped, samples, "{rel}");
        assert_eq!(
            batch.sample_count(),
            sentry_samples(&batch),
            "{rel}: one observation per timestamp"
        );
        assert_eq!(
            h.telemetry.accepted("sentry"),
            sentry_samples(&batch),
            "{rel}"
        );
        let name = rel.replace('/', "_");
        insta::assert_snapshot!(name, resolve(batch.data(), Detail::Names).to_text());
    }
}

#[tokio::test]
async fn other_items_are_accepted_and_ignored() {
    let mut h = harness(SentryReceiverConfig::default(), 8);
    let (status, _, _) = send(&h.app, recorded("sentry-node/manual/0002")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(h.rx.try_recv().is_err(), "a session item makes no batch");
    assert_eq!(h.telemetry.items("sentry", "session", "ignored"), 1);
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
    let cfg = SentryReceiverConfig {
        keys: vec!["publickey".into()],
        max_request_body_size: 100 << 20,
        ..SentryReceiverConfig::default()
    };
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
                &[AUTH, ("content-encoding", "lz4")],
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
            h.rx.try_recv().is_err(),
            "{case}: nothing reaches the pipeline"
        );
        // A valid envelope right after is still accepted.
        let (status, _, _) = send(&h.app, post("/api/1/envelope", &[AUTH], envelope.clone())).await;
        assert_eq!(status, StatusCode::OK, "after {case}");
        assert!(h.rx.try_recv().is_ok(), "after {case}");
    }
    // Auth from the envelope's dsn alone is enough.
    let with_dsn = format!(
        "{{\"dsn\":\"http://publickey@localhost:3000/1\"}}\n{}",
        &item(&chunk_payload)[3..]
    );
    let (status, _, _) = send(&h.app, post("/api/1/envelope/", &[], with_dsn)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_full_pipeline_answers_429_with_rate_limits() {
    let h = harness(SentryReceiverConfig::default(), 1);
    let (first, _, _) = send(&h.app, post("/api/1/envelope/", &[], valid_envelope())).await;
    assert_eq!(first, StatusCode::OK);
    let (status, headers, _) = send(&h.app, post("/api/1/envelope/", &[], valid_envelope())).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    let limits = headers["x-sentry-rate-limits"].to_str().unwrap();
    assert!(
        limits.starts_with("1:") && limits.contains("profile_chunk"),
        "{limits}"
    );
    assert_eq!(h.telemetry.refused_for("sentry", "pipeline_full"), 1085);
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
    use profcol_pipeline::config::{ComponentConfig, Kind};
    let cfg = ComponentConfig::from_yaml(Kind::Receiver, "sentry", "{}").unwrap();
    let c: SentryReceiverConfig = cfg.decode().unwrap();
    assert_eq!(c, SentryReceiverConfig::default());
    assert_eq!(c.endpoint, "0.0.0.0:3000");
    assert_eq!(
        (c.max_request_body_size, c.max_item_size),
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
) -> (axum::Router, mpsc::Receiver<Arc<ProfileBatch>>) {
    let (tx, rx) = mpsc::channel(64);
    let telemetry = Arc::new(Telemetry::new());
    let output = Output::new(
        "sentry",
        vec![tx],
        Arc::new(Semaphore::new(1 << 30)),
        1 << 30,
        telemetry.clone(),
    );
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

    // A directory that cannot be created fails the start, naming the key.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let (cfg, _) = decode(&format!(
        "endpoint: 127.0.0.1:0\nrecord_to: {}\nrecord_max_files: 5\n",
        file.join("rec").display()
    ));
    let receiver = super::factory().create(&cfg).unwrap();
    let (tx, _rx) = mpsc::channel(1);
    let telemetry = Arc::new(Telemetry::new());
    let ctx = ReceiverContext {
        id: "sentry/prod".into(),
        output: Output::new(
            "sentry/prod",
            vec![tx],
            Arc::new(Semaphore::new(1)),
            1,
            telemetry.clone(),
        ),
        shutdown: tokio_util::sync::CancellationToken::new(),
        telemetry,
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
    ] {
        let (status, _, body) = send(&h.app, post(path, &headers, valid_envelope())).await;
        assert_eq!(status, want, "{case}: {body}");
        assert_eq!(h.rx.try_recv().is_ok(), want == StatusCode::OK, "{case}");
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
