//! The `sentry` receiver as a front door (`forward_to`), on the real
//! binary: what real SDKs sent (recorded) reaches a mock upstream byte for
//! byte, the profiles reach the pipeline, an upstream outage is retried,
//! the upstream's rate limits reach the SDK; and keep-alive connections
//! with chunked, compressed bodies, as the Node SDK sends them.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{metric, profcol, Ports, Running, Sink};
use profcol_sentry::parse_envelope;

/// What the mock upstream saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    /// The envelope, decompressed.
    envelope: Vec<u8>,
}

type Reply = (StatusCode, Vec<(&'static str, &'static str)>);

/// A Sentry stand-in that records every envelope and answers with the
/// next scripted reply (200 when none is left).
#[derive(Clone)]
struct Upstream {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<Vec<Reply>>>,
    port: u16,
}

/// An upstream that is down (its port bound, not listening: connections
/// are refused) until [`Down::up`] serves on that very port.
struct Down {
    socket: tokio::net::TcpSocket,
    port: u16,
}

impl Down {
    fn new() -> Down {
        let (socket, port) = common::refusing_port();
        Down { socket, port }
    }

    fn up(self) -> Upstream {
        Upstream::serve(self.socket.listen(1024).unwrap())
    }
}

impl Upstream {
    fn start() -> Upstream {
        Down::new().up()
    }

    fn serve(listener: tokio::net::TcpListener) -> Upstream {
        let port = listener.local_addr().unwrap().port();
        let up = Upstream {
            seen: Arc::default(),
            script: Arc::default(),
            port,
        };
        let u = up.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                let u = u.clone();
                async move {
                    let envelope = match headers.get("content-encoding") {
                        Some(e) if e == "gzip" => {
                            let mut out = Vec::new();
                            std::io::Read::read_to_end(
                                &mut flate2::read::GzDecoder::new(&body[..]),
                                &mut out,
                            )
                            .unwrap();
                            out
                        }
                        _ => body.to_vec(),
                    };
                    u.seen.lock().unwrap().push(Seen {
                        path: uri.to_string(),
                        headers: headers.clone(),
                        envelope,
                    });
                    let (status, hs) = {
                        let mut s = u.script.lock().unwrap();
                        if s.is_empty() {
                            (StatusCode::OK, vec![])
                        } else {
                            s.remove(0)
                        }
                    };
                    let mut resp = axum::response::Response::builder().status(status);
                    for (k, v) in hs {
                        resp = resp.header(k, v);
                    }
                    resp.body(axum::body::Body::from(
                        r#"{"id":"00000000000000000000000000000000"}"#,
                    ))
                    .unwrap()
                }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        up
    }

    fn then(&self, status: u16, headers: &[(&'static str, &'static str)]) {
        self.script
            .lock()
            .unwrap()
            .push((StatusCode::from_u16(status).unwrap(), headers.to_vec()));
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Every listener on port 0 ([`Ports`]).
fn config(dir: &Path, sink: u16, upstream: u16, extra: &str) -> PathBuf {
    let path = dir.join("c.yaml");
    std::fs::write(
        &path,
        format!(
            r#"
receivers:
  sentry:
    endpoint: "127.0.0.1:0"
    forward_to: "http://127.0.0.1:{upstream}"
    forwarding: {{retry_on_failure: {{initial_interval: 100ms, max_interval: 200ms}}}}
{extra}
exporters:
  otlp: {{endpoint: "127.0.0.1:{sink}", tls: {{insecure: true}}, compression: none}}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}, logs: {{level: warn}}}}
  pipelines:
    profiles: {{receivers: [sentry], exporters: [otlp]}}
"#,
        ),
    )
    .unwrap();
    path
}

async fn start(cfg: &Path) -> Running {
    Running::ready(profcol().arg("--config").arg(cfg)).await
}

/// Every recording of real SDKs sending each item type Sentry defines.
fn recordings() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sdk in ["sentry-python", "sentry-node"] {
        let dir = profcol_model::testing::fixtures_dir()
            .join(sdk)
            .join("forward");
        let mut metas: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".meta.json"))
            .map(|p| PathBuf::from(p.to_string_lossy().trim_end_matches(".meta.json")))
            .collect();
        metas.sort();
        out.extend(metas);
    }
    out
}

fn envelope_of(recording: &Path) -> Vec<u8> {
    std::fs::read(recording.with_extension("envelope")).unwrap()
}

/// Items of an envelope as (type, the item's bytes as they are in it).
fn items(envelope: &[u8]) -> Vec<(String, Vec<u8>)> {
    let e = parse_envelope(envelope).unwrap();
    e.items
        .iter()
        .map(|i| (i.item_type().to_owned(), i.raw.to_vec()))
        .collect()
}

/// Every recorded envelope through the front door: the upstream gets the
/// items the pipeline does not take, byte for byte, under the original
/// header line, with the SDK's credentials; whole envelopes of such items
/// arrive unchanged; profiles reach the pipeline (and, with
/// `forward_profiles`, the upstream too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_sdks_send_reaches_the_upstream_byte_for_byte() {
    for forward_profiles in [false, true] {
        let sink = Sink::start().await;
        let upstream = Upstream::start();
        let dir = tempfile::tempdir().unwrap();
        let extra = format!("    forward_profiles: {forward_profiles}");
        let cfg = config(dir.path(), sink.addr.port(), upstream.port, &extra);
        let p = start(&cfg).await;
        let recordings = recordings();
        let mut expected = Vec::new();
        let mut profiles = 0;
        for r in &recordings {
            common::replay_sentry(p.port("receivers::sentry"), r, None).await;
            let original = envelope_of(r);
            let all = items(&original);
            let kept: Vec<_> = all
                .iter()
                .filter(|(ty, _)| {
                    forward_profiles || !matches!(ty.as_str(), "profile" | "profile_chunk")
                })
                .cloned()
                .collect();
            profiles += all.len()
                - all
                    .iter()
                    .filter(|(t, _)| !matches!(t.as_str(), "profile" | "profile_chunk"))
                    .count();
            if !kept.is_empty() {
                expected.push((r.clone(), original, kept.len() == all.len(), kept));
            }
        }
        let seen = upstream.seen();
        assert_eq!(
            seen.len(),
            expected.len(),
            "one upstream request per envelope with such items"
        );
        for (s, (r, original, whole, kept)) in seen.iter().zip(&expected) {
            let name = r.display();
            if *whole {
                assert_eq!(
                    s.envelope, *original,
                    "{name}: the whole envelope, unchanged"
                );
            } else {
                let header_line = original.split(|&b| b == b'\n').next().unwrap();
                assert!(
                    s.envelope.starts_with(header_line),
                    "{name}: the header line"
                );
                assert_eq!(
                    items(&s.envelope),
                    *kept,
                    "{name}: the items, byte for byte"
                );
            }
            let meta: serde_json::Value =
                serde_json::from_slice(&std::fs::read(r.with_extension("meta.json")).unwrap())
                    .unwrap();
            let path = meta["path"].as_str().unwrap();
            assert!(s.path.starts_with(path), "{name}: {} for {path}", s.path);
            let query = meta["query"].as_str().unwrap_or("");
            if !query.is_empty() {
                assert!(s.path.ends_with(query), "{name}: the SDK's query auth");
            }
            for pair in meta["headers"].as_array().unwrap() {
                let k = pair[0].as_str().unwrap().to_ascii_lowercase();
                if matches!(k.as_str(), "x-sentry-auth" | "user-agent") {
                    assert_eq!(
                        s.headers.get(&k).unwrap(),
                        pair[1].as_str().unwrap(),
                        "{name}: {k}"
                    );
                }
            }
        }
        // The pipeline got every profile.
        let deadline = Instant::now() + Duration::from_secs(20);
        while (sink.received().len() as usize) < 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(profiles >= 2, "the recordings hold profiles");
        let accepted = metric(
            p.metrics_port(),
            "profcol_receiver_items_total{receiver=\"sentry\",type=\"profile",
        )
        .await;
        assert!(
            accepted >= profiles as u64,
            "{accepted} profile items counted"
        );
        assert!(!sink.received().is_empty(), "profiles reached the pipeline");
        let forwarded = metric(
            p.metrics_port(),
            "profcol_receiver_forwarded_items_total{receiver=\"sentry\"",
        )
        .await;
        let want: usize = expected.iter().map(|e| e.3.len()).sum();
        assert_eq!(forwarded as usize, want, "every forwarded item counted");
        p.signal("TERM");
        let (code, logs) = p.wait(Duration::from_secs(30)).await;
        assert!(code.success(), "{logs}");
    }
}

/// An event-only envelope (Python's gzip'd `event`).
fn event_recording() -> PathBuf {
    profcol_model::testing::fixtures_dir().join("sentry-python/forward/0002")
}

async fn post_event(port: u16) -> reqwest::Response {
    let envelope = envelope_of(&event_recording());
    reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/1/envelope/"))
        .header(
            "x-sentry-auth",
            "Sentry sentry_key=publickey, sentry_version=7",
        )
        .body(envelope)
        .send()
        .await
        .unwrap()
}

/// The upstream down (nothing listening) for longer than a retry
/// interval: the SDK hears 200 (the envelope is queued), and once the
/// upstream is back each envelope arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_outage_is_retried_and_each_envelope_arrives_once() {
    let sink = Sink::start().await;
    let down = Down::new();
    let up_port = down.port;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), up_port, "");
    let p = start(&cfg).await;
    for _ in 0..5 {
        let r = post_event(p.port("receivers::sentry")).await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(
        metric(p.metrics_port(), "profcol_receiver_forward_queue_size").await,
        0,
        "taken by the consumers"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let upstream = down.up();
    let deadline = Instant::now() + Duration::from_secs(20);
    while upstream.seen().len() < 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(upstream.seen().len(), 5, "each once");
    for s in upstream.seen() {
        assert_eq!(s.envelope, envelope_of(&event_recording()));
    }
    assert_eq!(
        metric(p.metrics_port(), "profcol_receiver_forwarded_items_total{receiver=\"sentry\",type=\"event\",outcome=\"forwarded\"").await,
        5
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// The upstream's 429 and its rate limits reach the SDK: as they are for
/// an envelope of events; merged into profcol's answer for an envelope
/// whose profile the pipeline took. A 400 is passed on and counted failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_answers_reach_the_sdk() {
    let sink = Sink::start().await;
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), upstream.port, "");
    let p = start(&cfg).await;
    let limits = "60:error;transaction:key:quota_exceeded";
    upstream.then(
        429,
        &[("x-sentry-rate-limits", limits), ("retry-after", "60")],
    );
    let r = post_event(p.port("receivers::sentry")).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["x-sentry-rate-limits"], limits);
    assert_eq!(r.headers()["retry-after"], "60");

    // A v1 profile and its transaction (Python): the profile is taken, the
    // transaction forwarded; the SDK hears 200 with the upstream's limits.
    upstream.then(200, &[("x-sentry-rate-limits", limits)]);
    let v1 = profcol_model::testing::fixtures_dir().join("sentry-python/forward/0003");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(v1.with_extension("meta.json")).unwrap()).unwrap();
    let auth = meta["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "X-Sentry-Auth")
        .map(|h| h[1].as_str().unwrap().to_owned())
        .unwrap();
    let r = reqwest::Client::new()
        .post(format!(
            "http://127.0.0.1:{}/api/1/envelope/",
            p.port("receivers::sentry")
        ))
        .header("x-sentry-auth", auth)
        .body(envelope_of(&v1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-sentry-rate-limits"], limits);
    let last = upstream.seen().pop().unwrap();
    assert_eq!(
        items(&last.envelope)
            .iter()
            .map(|i| i.0.as_str())
            .collect::<Vec<_>>(),
        ["transaction"]
    );

    upstream.then(400, &[("x-sentry-error", "invalid event")]);
    let r = post_event(p.port("receivers::sentry")).await;
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["x-sentry-error"], "invalid event");
    assert_eq!(
        metric(p.metrics_port(), "profcol_receiver_forwarded_items_total{receiver=\"sentry\",type=\"event\",outcome=\"failed\",reason=\"upstream_400\"").await,
        1
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

fn compress(encoding: &str, data: &[u8]) -> Vec<u8> {
    match encoding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            brotli::BrotliCompress(&mut &data[..], &mut out, &Default::default()).unwrap();
            out
        }
        "zstd" => zstd::encode_all(data, 1).unwrap(),
        other => panic!("{other}"),
    }
}

/// Reads one HTTP/1.1 response (headers and a Content-Length body).
async fn read_response(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> (u16, String) {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                buf.drain(..end + 4 + len);
                return (status, head);
            }
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(n > 0, "the connection was closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// 50 envelopes back to back on one keep-alive connection, each with
/// `Transfer-Encoding: chunked` and a compressed body whose final empty
/// chunk comes in a write of its own, after a pause (as Node's SDK sends
/// them): each is answered 200, after its whole body, on the same
/// connection. A compressed body followed by garbage is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_compressed_bodies_keep_the_connection() {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_refusing, nowhere) = common::refusing_port();
    let cfg = config(dir.path(), sink.addr.port(), nowhere, "")
        .to_string_lossy()
        .to_string();
    // Without forwarding: the bug was the receiver's.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("    forward_to:", "    # forward_to:")
            .replace("    forwarding:", "    # forwarding:"),
    )
    .unwrap();
    let p = start(Path::new(&cfg)).await;
    let envelope = envelope_of(&event_recording());
    for encoding in ["gzip", "deflate", "br", "zstd"] {
        let body = compress(encoding, &envelope);
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", p.port("receivers::sentry")))
            .await
            .unwrap();
        let mut buf = Vec::new();
        for i in 0..50 {
            let head = format!(
                "POST /api/1/envelope/?sentry_key=publickey&sentry_version=7 HTTP/1.1\r\nHost: x\r\nContent-Encoding: {encoding}\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n{:x}\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(&body).await.unwrap();
            s.write_all(b"\r\n").await.unwrap();
            s.flush().await.unwrap();
            // The final chunk, late: the answer must wait for it.
            tokio::time::sleep(Duration::from_millis(if i < 3 { 100 } else { 2 })).await;
            s.write_all(b"0\r\n\r\n").await.unwrap();
            let (status, head) = read_response(&mut s, &mut buf).await;
            assert_eq!(status, 200, "{encoding} #{i}: {head}");
            assert!(
                !head.to_ascii_lowercase().contains("connection: close"),
                "{encoding} #{i}"
            );
        }
        // Garbage after the compressed stream.
        let mut bad = body.clone();
        bad.extend_from_slice(b"trailing garbage");
        let head = format!(
            "POST /api/1/envelope/?sentry_key=publickey HTTP/1.1\r\nHost: x\r\nContent-Encoding: {encoding}\r\nContent-Length: {}\r\n\r\n",
            bad.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(&bad).await.unwrap();
        let (status, head) = read_response(&mut s, &mut buf).await;
        assert_eq!(status, 400, "{encoding} with trailing garbage: {head}");
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// Every refusal is logged at `info` with its status, reason and the
/// client's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_with_reason_and_client() {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_refusing, nowhere) = common::refusing_port();
    let cfg = config(
        dir.path(),
        sink.addr.port(),
        nowhere,
        "    keys: [publickey]",
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("level: warn", "level: info")).unwrap();
    let p = start(&cfg).await;
    let url = format!(
        "http://127.0.0.1:{}/api/1/envelope/",
        p.port("receivers::sentry")
    );
    let c = reqwest::Client::new();
    let auth = |key: &str| format!("Sentry sentry_key={key}, sentry_version=7");
    let cases = [
        (
            auth("wrong"),
            None,
            b"{}\n".to_vec(),
            401,
            "invalid public key",
        ),
        (
            auth("publickey"),
            None,
            b"not json".to_vec(),
            400,
            "invalid envelope",
        ),
        (
            auth("publickey"),
            Some("compress"),
            b"{}\n".to_vec(),
            415,
            "unsupported content encoding",
        ),
    ];
    for (auth, encoding, body, status, _) in &cases {
        let mut r = c
            .post(&url)
            .header("x-sentry-auth", auth)
            .body(body.clone());
        if let Some(e) = encoding {
            r = r.header("content-encoding", *e);
        }
        assert_eq!(r.send().await.unwrap().status(), *status);
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    for (_, _, _, status, reason) in cases {
        let line = logs
            .lines()
            .find(|l| l.contains("envelope refused") && l.contains(&format!("status={status}")))
            .unwrap_or_else(|| panic!("no log line for {status}: {logs}"));
        assert!(line.contains(" INFO "), "{line}");
        assert!(line.contains(reason), "{line}");
        assert!(line.contains("peer=127.0.0.1:"), "{line}");
    }
}

/// With `forwarding.sending_queue.storage`, envelopes queued while the
/// upstream is down survive `kill -9`: after a restart with the upstream
/// back, each arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_forwarding_queue_survives_kill_9() {
    let sink = Sink::start().await;
    let down = Down::new();
    let up_port = down.port;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), up_port, "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace(
            "max_interval: 200ms}}",
            "max_interval: 200ms, max_elapsed_time: 0s}, sending_queue: {storage: file_storage}}",
        )
        .replace(
            "extensions:\n  health_check:",
            &format!(
                "extensions:\n  file_storage: {{directory: \"{}\", create_directory: true}}\n  health_check:",
                dir.path().join("q").display()
            ),
        )
        .replace("extensions: [health_check]", "extensions: [health_check, file_storage]");
    std::fs::write(&cfg, text).unwrap();
    let p = start(&cfg).await;
    for _ in 0..5 {
        assert_eq!(post_event(p.port("receivers::sentry")).await.status(), 200);
    }
    p.signal("KILL");
    p.wait(Duration::from_secs(10)).await;
    assert!(dir.path().join("q/receiver_sentry_forward").is_dir());

    let upstream = down.up();
    let p = start(&cfg).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while upstream.seen().len() < 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = upstream.seen();
    assert_eq!(seen.len(), 5, "each once");
    for s in &seen {
        assert_eq!(s.envelope, envelope_of(&event_recording()));
        assert!(
            s.headers.get("x-sentry-auth").is_some(),
            "the SDK's auth kept"
        );
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}
