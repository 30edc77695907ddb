//! The `pprof` receiver scraping a real Go program (tests/pprof_target,
//! built here with `go build`) through the `file` exporter, and hostile
//! targets: one that streams forever, one that announces 2 GiB, one that
//! is down.
//!
//! Needs `go` on PATH (Debian `golang-go`) for the Go target; skipped
//! locally without it and failing under CI, as the other Go tests do.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Ports;
use profcol_model::ResolvedProfile;
use profcol_pipeline::runtime::RuntimeOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Go target, killed when dropped.
struct Target {
    child: Child,
    /// `127.0.0.1:PORT`.
    address: String,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Builds and starts tests/pprof_target; it prints the address it took.
fn start_target(dir: &Path) -> Option<Target> {
    let bin = common::go::build("pprof_target", dir)?;
    let mut child = Command::new(bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start pprof_target");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("pprof_target said {line:?}"))
        .to_owned();
    Some(Target { child, address })
}

/// The name of the innermost `main.` frame of a folded line
/// (`root;...;leaf [attributes]`), the Go program's own function a sample
/// is charged to.
fn own_function(folded: &str) -> Option<&str> {
    let stack = folded.split(" [").next().unwrap_or(folded);
    stack.split(';').rev().find(|f| f.starts_with("main."))
}

/// The program's own functions by the share of `sample_type` they are
/// charged (innermost `main.` frame), largest first.
pub(crate) fn by_own_function(
    profiles: &[ResolvedProfile],
    sample_type: &str,
) -> Vec<(String, i64)> {
    let mut totals = std::collections::BTreeMap::<String, i64>::new();
    for p in profiles.iter().filter(|p| p.sample_type == sample_type) {
        for (line, v) in &p.samples {
            if let Some(f) = own_function(line) {
                *totals.entry(f.to_owned()).or_default() += v;
            }
        }
    }
    let mut v: Vec<(String, i64)> = totals.into_iter().collect();
    v.sort_by_key(|f| std::cmp::Reverse(f.1));
    v
}

fn total(profiles: &[ResolvedProfile], sample_type: &str) -> i64 {
    profiles
        .iter()
        .filter(|p| p.sample_type == sample_type)
        .flat_map(|p| p.samples.values())
        .sum()
}

/// CPU work in `main.burnSHA256` tops the CPU profile, `main.allocBuffers`
/// the allocated bytes; every kind of profile arrives; the resource names
/// the job, the instance and the target file's labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_program_is_scraped_and_its_hot_functions_are_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let Some(target) = start_target(dir.path()) else {
        return;
    };
    let targets = dir.path().join("targets.yaml");
    std::fs::write(
        &targets,
        format!(
            "- targets: ['{}']\n  labels: {{job: burner, env: test, __meta_x: dropped}}\n",
            target.address
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let yaml = format!(
        r#"
receivers:
  pprof:
    target_files: [{targets}]
    collection_interval: 3s
    initial_delay: 0s
exporters:
  file:
    path: {out}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [file]
"#,
        targets = targets.display(),
        out = out.display(),
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let metrics = svc.metrics_port();
    // Two rounds of every profile (the CPU one takes 2 s of each 3 s).
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::metric(
        metrics,
        "otelcol_scraper_scraped_profile_records_total{receiver=\"pprof\",scraper=\"cpu\"}",
    )
    .await
        < 2
    {
        assert!(Instant::now() < deadline, "no two CPU scrapes in 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for kind in ["heap", "allocs", "goroutine", "mutex", "block"] {
        let n = common::metric(
            metrics,
            &format!("otelcol_scraper_scraped_profile_records_total{{receiver=\"pprof\",scraper=\"{kind}\"}}"),
        )
        .await;
        assert!(n >= 1, "{kind}: {n} scrapes");
    }
    let errored = common::metric(metrics, "otelcol_scraper_errored_profile_records").await;
    assert_eq!(errored, 0);
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();
    let address = target.address.clone();
    drop(target);

    let profiles = crate::file_exporter::profiles(&out);
    let cpu = by_own_function(&profiles, "cpu/nanoseconds");
    assert_eq!(cpu[0].0, "main.burnSHA256", "{cpu:?}");
    assert!(
        cpu[0].1 * 2 > total(&profiles, "cpu/nanoseconds"),
        "burnSHA256 holds most of the CPU: {cpu:?}"
    );
    let allocs = by_own_function(&profiles, "alloc_space/bytes");
    assert_eq!(allocs[0].0, "main.allocBuffers", "{allocs:?}");
    assert!(allocs.iter().all(|(_, v)| *v > 0), "{allocs:?}");
    // Allocations count from the program's start: the first scrape of the
    // heap and of allocs is the baseline the later ones are sent as
    // changes from, while the snapshot in use goes every time.
    let count = |t: &str| profiles.iter().filter(|p| p.sample_type == t).count();
    assert_eq!(
        count("alloc_space/bytes") + 2,
        count("inuse_space/bytes"),
        "one baseline each of heap and allocs"
    );
    assert!(
        allocs[0].1 * 2 > total(&profiles, "alloc_space/bytes"),
        "allocBuffers allocates most: {allocs:?}"
    );
    for t in ["goroutine/count", "contentions/count", "delay/nanoseconds"] {
        assert!(
            profiles.iter().any(|p| p.sample_type == t),
            "no {t} profile"
        );
    }
    let (host, port) = address.split_once(':').unwrap();
    for p in &profiles {
        for want in [
            "service.name=burner".to_owned(),
            format!("service.instance.id={address}"),
            format!("server.address={host}"),
            format!("server.port={port}"),
            "url.scheme=http".to_owned(),
            "env=test".to_owned(),
        ] {
            assert!(p.resource.contains(&want), "{want} not in {:?}", p.resource);
        }
        assert!(
            !p.resource.iter().any(|a| a.starts_with("__meta_x")),
            "{:?}",
            p.resource
        );
    }
}

/// A fake target: answers every request with 200 and `body` bytes of
/// `chunk` repeated `rounds` times (`u64::MAX`: forever), announcing
/// `content_length` when given; keeps the most bytes one connection got
/// out.
async fn fake_target(content_length: Option<u64>, rounds: u64) -> (u16, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 4096];
                let _ = sock.read(&mut req).await;
                let head = match content_length {
                    Some(n) => format!("HTTP/1.1 200 OK\r\ncontent-length: {n}\r\n\r\n"),
                    None => "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_owned(),
                };
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![0x0a_u8; 64 << 10];
                let mut sent = 0;
                for _ in 0..rounds {
                    if sock.write_all(&chunk).await.is_err() {
                        return;
                    }
                    sent += chunk.len() as u64;
                    counter.fetch_max(sent, Ordering::Relaxed);
                }
            });
        }
    });
    (port, sent)
}

/// A target streaming forever and one announcing 2 GiB are cut at
/// `max_response_body_size`, a down one is counted, and profcol keeps
/// scraping (and serving) through all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_targets_are_cut_at_the_limit_and_counted() {
    let (forever, forever_sent) = fake_target(None, u64::MAX).await;
    let (huge, huge_sent) = fake_target(Some(2 << 30), 2 << 14).await;
    let (_down_socket, down) = common::refusing_port();
    let yaml = format!(
        r#"
receivers:
  pprof:
    targets: ['127.0.0.1:{forever}', 'http://127.0.0.1:{huge}', '127.0.0.1:{down}']
    profiles: [heap]
    collection_interval: 1s
    timeout: 20s
    initial_delay: 0s
    max_response_body_size: 1048576
exporters:
  debug:
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [pprof]
      exporters: [debug]
"#
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let metrics = svc.metrics_port();
    let item = |outcome: &str| {
        format!("profcol_receiver_items_total{{receiver=\"pprof\",type=\"heap\",outcome=\"{outcome}\"}}")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    // Two rounds: the first failures did not stop the scraping.
    while common::metric(metrics, &item("too_large")).await < 4
        || common::metric(metrics, &item("unreachable")).await < 2
    {
        assert!(Instant::now() < deadline, "not counted within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let errored = common::metric(
        metrics,
        "otelcol_scraper_errored_profile_records_total{receiver=\"pprof\",scraper=\"heap\"}",
    )
    .await;
    assert!(errored >= 6, "{errored}");
    assert_eq!(
        common::metric(metrics, "otelcol_scraper_scraped_profile_records").await,
        0
    );
    // Each connection was dropped near the limit: what a peer got out is
    // the limit plus what socket buffers hold, not gigabytes.
    let most = 64 << 20;
    for (name, sent) in [("forever", &forever_sent), ("huge", &huge_sent)] {
        let n = sent.load(Ordering::Relaxed);
        assert!(n < most, "{name}: {n} bytes sent");
    }
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();
}

/// An HTTPS target that requires a client certificate of the test CA and
/// answers the goroutine profile only to `Authorization: Bearer s3cret`
/// with `X-Scope-OrgID: tenant-a`: counts what it answered 200 and 401.
async fn https_target(
    pki: &crate::otlp_http::Pki,
    shutdown: tokio_util::sync::CancellationToken,
) -> (u16, Arc<[AtomicU64; 2]>) {
    let answered: Arc<[AtomicU64; 2]> = Arc::default();
    let counts = answered.clone();
    let pprof = profcol_model::testing::fixture("pprof/go-cpu.pb.gz");
    let router = axum::Router::new().route(
        "/debug/pprof/goroutine",
        axum::routing::get(move |headers: http::HeaderMap| async move {
            let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
            let ok = header("authorization") == Some("Bearer s3cret")
                && header("x-scope-orgid") == Some("tenant-a");
            counts[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
            if ok {
                (http::StatusCode::OK, pprof)
            } else {
                (http::StatusCode::UNAUTHORIZED, Vec::new())
            }
        }),
    );
    let port = pki.serve("target", router, true, shutdown).await;
    (port, answered)
}

/// `tls`, `headers` and `auth` on the scrapes: the receiver with the CA,
/// a client certificate, the header and the token gets the profile; one
/// without a client certificate fails the handshake, one without the
/// header is answered 401, and neither sends anything on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_target_is_scraped_with_a_client_certificate_and_a_token() {
    let pki = crate::otlp_http::Pki::new();
    let (cert, key) = pki.issue("scraper");
    let stop = tokio_util::sync::CancellationToken::new();
    let (port, answered) = https_target(&pki, stop.clone()).await;
    let ca = pki.path("ca.pem");
    let yaml = format!(
        r#"
extensions:
  bearertokenauth:
    token: s3cret
receivers:
  pprof:
    targets: ['https://localhost:{port}']
    profiles: [goroutine]
    collection_interval: 1s
    initial_delay: 0s
    headers: {{X-Scope-OrgID: tenant-a}}
    tls: {{ca_file: {ca}, cert_file: {cert}, key_file: {key}}}
    auth: {{authenticator: bearertokenauth}}
  pprof/nocert:
    targets: ['https://localhost:{port}']
    profiles: [goroutine]
    collection_interval: 1s
    initial_delay: 0s
    headers: {{X-Scope-OrgID: tenant-a}}
    tls: {{ca_file: {ca}}}
    auth: {{authenticator: bearertokenauth}}
  pprof/noheader:
    targets: ['https://localhost:{port}']
    profiles: [goroutine]
    collection_interval: 1s
    initial_delay: 0s
    tls: {{ca_file: {ca}, cert_file: {cert}, key_file: {key}}}
    auth: {{authenticator: bearertokenauth}}
exporters:
  debug:
service:
  extensions: [bearertokenauth]
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [pprof, pprof/nocert, pprof/noheader]
      exporters: [debug]
"#
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let metrics = svc.metrics_port();
    let item = |receiver: &str, outcome: &str| {
        format!("profcol_receiver_items_total{{receiver=\"{receiver}\",type=\"goroutine\",outcome=\"{outcome}\"}}")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::metric(metrics, &item("pprof", "accepted")).await < 2
        || common::metric(metrics, &item("pprof/nocert", "unreachable")).await < 2
        || common::metric(metrics, &item("pprof/noheader", "http_status")).await < 2
    {
        assert!(Instant::now() < deadline, "not scraped within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for r in ["pprof/nocert", "pprof/noheader"] {
        assert_eq!(
            common::metric(metrics, &item(r, "accepted")).await,
            0,
            "{r}"
        );
    }
    assert_eq!(
        common::metric(
            metrics,
            "otelcol_scraper_errored_profile_records_total{receiver=\"pprof\",scraper=\"goroutine\"}"
        )
        .await,
        0
    );
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();
    stop.cancel();
    // Only the scrapes with the header reached the handler with the
    // token; the handshakes without a certificate never got there.
    let [ok, refused] = &*answered;
    assert!(ok.load(Ordering::Relaxed) >= 2);
    assert!(refused.load(Ordering::Relaxed) >= 2);
}
