//! A self-hosted Sentry behind a private CA: the `sentry` exporter and the
//! `sentry` receiver's forwarding trust it through `tls::ca_file` (the
//! client `tls:` keys every HTTP client of profcol reads), and without it
//! the handshake fails and nothing is sent.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Ports;
use profcol_pipeline::runtime::RuntimeOptions;
use tokio_util::sync::CancellationToken;

/// An HTTPS Sentry stand-in with a certificate of `pki`'s CA: counts the
/// envelopes posted to each `/api/<project>/envelope/`.
async fn https_sentry(
    pki: &crate::otlp_http::Pki,
    stop: CancellationToken,
) -> (u16, Arc<Mutex<BTreeMap<String, u64>>>) {
    let posted: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let counts = posted.clone();
    let router = axum::Router::new().route(
        "/api/{project}/envelope/",
        axum::routing::post(
            move |axum::extract::Path(project): axum::extract::Path<String>| async move {
                *counts.lock().unwrap().entry(project).or_default() += 1;
                "{}"
            },
        ),
    );
    (pki.serve("sentry", router, false, stop).await, posted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentry_behind_a_private_ca_is_trusted_through_ca_file() {
    let pki = crate::otlp_http::Pki::new();
    let stop = CancellationToken::new();
    let (port, posted) = https_sentry(&pki, stop.clone()).await;
    let ca = pki.path("ca.pem");
    // Project 42: the exporter with the CA; 43: one without it; 1: what
    // the receiver forwards (the SDK's own project).
    let yaml = format!(
        r#"
receivers:
  sentry:
    endpoint: 127.0.0.1:0
    forward_to: https://localhost:{port}
    forwarding: {{tls: {{ca_file: {ca}}}}}
exporters:
  sentry:
    dsn: https://key@localhost:{port}/42
    tls: {{ca_file: {ca}}}
  sentry/untrusted:
    dsn: https://key@localhost:{port}/43
    retry_on_failure: {{enabled: false}}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [sentry]
      exporters: [sentry, sentry/untrusted]
"#
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let receiver = svc.port("receivers::sentry");
    // A profile chunk for the pipeline, and an event that only forwarding
    // sends on.
    common::replay_fixture(receiver, "sentry-python/manual/0001", None).await;
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{receiver}/api/1/envelope/"))
        .header("X-Sentry-Auth", "Sentry sentry_key=abc")
        .body("{}\n{\"type\":\"event\"}\n{\"message\":\"boom\"}\n")
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    let metrics = svc.metrics_port();
    let failed =
        "otelcol_exporter_send_failed_profile_samples_total{exporter=\"sentry/untrusted\"}";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = posted.lock().unwrap().clone();
        if got.get("42") >= Some(&1)
            && got.get("1") >= Some(&1)
            && common::metric(metrics, failed).await > 0
        {
            break;
        }
        assert!(Instant::now() < deadline, "sent: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The exporter without the CA never got past the handshake.
    assert_eq!(posted.lock().unwrap().get("43"), None);
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();
    stop.cancel();
}

#[test]
fn an_unreadable_ca_file_is_named_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        r#"
receivers:
  sentry:
    forward_to: https://sentry.example.com
    forwarding: {tls: {ca_file: /nonexistent/ca.pem}}
exporters:
  sentry:
    dsn: https://key@sentry.example.com/42
    tls: {ca_file: /nonexistent/ca.pem}
service:
  pipelines:
    profiles: {receivers: [sentry], exporters: [sentry]}
"#,
    )
    .unwrap();
    let profcol = std::path::Path::new(env!("CARGO_BIN_EXE_profcol"));
    let (ok, err) = common::otelcol::validate(profcol, &cfg);
    assert!(!ok);
    for key in [
        "exporters::sentry::tls::ca_file: cannot read /nonexistent/ca.pem",
        "receivers::sentry::forwarding::tls::ca_file: cannot read /nonexistent/ca.pem",
    ] {
        assert!(err.contains(key), "{key} in\n{err}");
    }
}
