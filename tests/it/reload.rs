//! Config reload on SIGHUP, on the real binary: what did not change keeps
//! running (an exporter its queue, a receiver its listener), what was added
//! works, a bad config is refused while the old one keeps serving, and no
//! accepted sample is lost (the accounting metrics add up).

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, client_at, metric, profcol, Ports, Running, Sink};
use profcol_model::proto::ExportProfilesServiceRequest;

/// What a config's `otlp` receiver and `health_check` listen on: port 0,
/// the started process says which port each took ([`Ports`]).
struct Listen {
    otlp: &'static str,
    health: &'static str,
}

const ANY: Listen = Listen {
    otlp: "127.0.0.1:0",
    health: "127.0.0.1:0",
};

/// The parts every config here shares, around `body` (exporters,
/// processors, pipelines).
fn write(path: &Path, listen: &Listen, body: &str) {
    write_with(path, listen, "", body)
}

/// [`write`] with more receivers than `otlp`.
fn write_with(path: &Path, listen: &Listen, receivers: &str, body: &str) {
    std::fs::write(
        path,
        format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "{otlp}"}}}}}}
{receivers}
extensions:
  health_check: {{endpoint: "{health}"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
{body}
"#,
            otlp = listen.otlp,
            health = listen.health,
        ),
    )
    .unwrap();
}

/// An otlp exporter to `sink` that retries every 50 ms for ever, with one
/// consumer so that what it does not send stays counted in its queue.
fn exporter(name: &str, sink: &Sink) -> String {
    format!(
        r#"
  {name}:
    endpoint: 127.0.0.1:{port}
    tls: {{insecure: true}}
    retry_on_failure: {{initial_interval: 50ms, max_interval: 50ms, max_elapsed_time: 0s}}
    sending_queue: {{num_consumers: 1}}"#,
        port = sink.addr.port()
    )
}

async fn start(cfg: &Path) -> Running {
    Running::ready(
        profcol()
            .arg("--config")
            .arg(cfg)
            .args(["--shutdown-timeout", "10s"]),
    )
    .await
}

fn request(samples: usize) -> ExportProfilesServiceRequest {
    let data = profcol_model::synth::request(samples, samples / 10 + 1);
    ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    }
}

/// Sends SIGHUP and waits until the reload counter of `result` moves
/// (the ready file is rewritten by then).
async fn reload(p: &Running, result: &str) {
    let counter = format!("profcol_config_reloads_total{{result=\"{result}\"}}");
    let before = metric(p.metrics_port(), &counter).await;
    p.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(p.metrics_port(), &counter).await == before {
        assert!(Instant::now() < deadline, "no reload with result {result}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `f` holds, or fails with `what`.
async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> F,
) {
    let deadline = Instant::now() + limit;
    while !f().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn exporter_metric(name: &str, exporter: &str) -> String {
    format!("{name}{{exporter=\"{exporter}\"")
}

/// The sink is down: five requests wait in `otlp/a`'s queue. A reload adds
/// `otlp/b` and a pipeline to it, leaving `otlp/a` and the receiver as they
/// were: the queue is still there (and delivered once the sink is back), a
/// client connection opened before the reload still works, and the new
/// pipeline delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_exporter_keeps_its_queue_and_an_added_one_works() {
    let (a, b) = (Sink::start().await, Sink::start().await);
    a.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let before = format!(
        "  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp/a]}}\nexporters:{}",
        exporter("otlp/a", &a)
    );
    write(&cfg, &ANY, &before);
    let p = start(&cfg).await;

    let mut c = client(p.grpc_port()).await;
    for _ in 0..5 {
        c.export(request(100)).await.unwrap();
    }
    let size = exporter_metric("otelcol_exporter_queue_size", "otlp/a");
    // One request is with the consumer, retrying; four wait.
    eventually("four requests queued", Duration::from_secs(10), || async {
        metric(p.metrics_port(), &size).await == 4
    })
    .await;

    let after = format!(
        "  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp/a]}}\n    profiles/b: {{receivers: [otlp], exporters: [otlp/b]}}\nexporters:{}{}",
        exporter("otlp/a", &a),
        exporter("otlp/b", &b)
    );
    write(&cfg, &ANY, &after);
    reload(&p, "success").await;
    assert_eq!(
        metric(p.metrics_port(), &size).await,
        4,
        "the queue was kept"
    );

    // The connection from before the reload: the listener was kept.
    for _ in 0..3 {
        c.export(request(100)).await.unwrap();
    }
    eventually("otlp/b delivers", Duration::from_secs(10), || async {
        b.samples() == 300
    })
    .await;
    assert!(a.received().is_empty());
    a.down_for(Duration::ZERO);
    eventually(
        "otlp/a delivers its queue",
        Duration::from_secs(10),
        || async { a.samples() == 800 },
    )
    .await;

    let accepted = metric(
        p.metrics_port(),
        "otelcol_receiver_accepted_profile_samples_total",
    )
    .await;
    assert_eq!(accepted, 800);
    let m = p.metrics_port();
    let sent = |e: &'static str| {
        let name = exporter_metric("otelcol_exporter_sent_profile_samples_total", e);
        async move { metric(m, &name).await }
    };
    assert_eq!(sent("otlp/a").await, 800);
    assert_eq!(sent("otlp/b").await, 300);
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert!(
        logs.contains("config reloaded: exporters added: otlp/b; pipelines added: profiles/b"),
        "{logs}"
    );
}

/// A config that does not parse, one that does not validate, one with a
/// port another process holds and one that changes an extension are each
/// refused, their errors logged at their keys, and the running config
/// keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_is_refused_and_the_old_one_keeps_serving() {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let good = format!(
        "  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp/a]}}\nexporters:{}",
        exporter("otlp/a", &sink)
    );
    write(&cfg, &ANY, &good);
    let p = start(&cfg).await;
    let mut c = client(p.grpc_port()).await;
    c.export(request(100)).await.unwrap();

    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = held.local_addr().unwrap().port();
    std::fs::write(&cfg, "receivers: [unclosed").unwrap();
    reload(&p, "failure").await;
    write(&cfg, &ANY, &format!("{good}\n    timeoutt: 5s"));
    reload(&p, "failure").await;
    write_with(
        &cfg,
        &ANY,
        &format!("  otlp/2: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{taken}\"}}}}}}"),
        &good.replace("receivers: [otlp]", "receivers: [otlp, otlp/2]"),
    );
    reload(&p, "failure").await;
    // Refused before anything binds: the port is never used.
    let other_health = Listen {
        health: "127.0.0.1:1",
        ..ANY
    };
    write(&cfg, &other_health, &good);
    reload(&p, "failure").await;
    for i in 0..4 {
        c.export(request(100))
            .await
            .unwrap_or_else(|e| panic!("after bad config {i}: {e}"));
    }
    // The config the process started with is still the one that runs.
    write(&cfg, &ANY, &good);
    reload(&p, "success").await;
    c.export(request(100)).await.unwrap();
    eventually("all delivered", Duration::from_secs(10), || async {
        sink.samples() == 600
    })
    .await;
    assert_eq!(
        metric(
            p.metrics_port(),
            "profcol_config_reloads_total{result=\"failure\"}"
        )
        .await,
        4
    );
    drop(held);
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    for expected in [
        "config reload refused",
        "timeoutt",
        &format!("receivers::otlp/2: cannot listen on 127.0.0.1:{taken}"),
        "extensions::health_check: cannot change on reload; restart profcol to change it",
        "config reloaded: nothing changed",
    ] {
        assert!(logs.contains(expected), "{expected:?} in {logs}");
    }
}

/// Clients send without pause while the config is reloaded twice: the
/// pipeline's `batch` processor changes (the pipeline is rebuilt, handing
/// over what it held), then exporter `otlp/b`, whose peer is down, is
/// removed (it drains as at shutdown once its peer is back). Every sample
/// accepted is delivered to `otlp/a`, and `otlp/b` settles everything it
/// was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_accepted_is_lost_across_reloads() {
    let (a, b) = (Sink::start().await, Sink::start().await);
    b.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let config = |timeout: &str, exporters: &str, with_b: bool| {
        format!(
            "  pipelines:\n    profiles: {{receivers: [otlp], processors: [batch], exporters: [{exporters}]}}\nprocessors:\n  batch: {{timeout: {timeout}}}\nexporters:{}{}",
            exporter("otlp/a", &a),
            if with_b { exporter("otlp/b", &b) } else { String::new() }
        )
    };
    write(&cfg, &ANY, &config("2s", "otlp/a, otlp/b", true));
    let p = start(&cfg).await;

    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU64::new(0));
    let senders: Vec<_> = (0..2)
        .map(|_| {
            let (stop, accepted, port) = (stop.clone(), accepted.clone(), p.grpc_port());
            tokio::spawn(async move {
                let mut c = client(port).await;
                while !stop.load(Ordering::Relaxed) {
                    match c.export(request(50)).await {
                        Ok(_) => accepted.fetch_add(50, Ordering::Relaxed),
                        Err(s) if s.code() == tonic::Code::Unavailable => 0,
                        Err(s) => panic!("{s}"),
                    };
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    write(&cfg, &ANY, &config("3s", "otlp/a, otlp/b", true));
    reload(&p, "success").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    write(&cfg, &ANY, &config("3s", "otlp/a", false));
    reload(&p, "success").await;
    let for_b = accepted.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.await.unwrap();
    }
    b.down_for(Duration::ZERO);
    let total = accepted.load(Ordering::Relaxed);
    assert!(total > 0);
    eventually(
        "otlp/a delivers everything",
        Duration::from_secs(20),
        || async { a.samples() == total },
    )
    .await;
    let m = p.metrics_port();
    assert_eq!(
        metric(m, "otelcol_receiver_accepted_profile_samples_total").await,
        total
    );
    // otlp/b got what was accepted until its removal and sent all of it
    // from its closed queue.
    eventually("otlp/b drains", Duration::from_secs(20), || async {
        metric(
            m,
            &exporter_metric("otelcol_exporter_sent_profile_samples_total", "otlp/b"),
        )
        .await
            == b.samples()
    })
    .await;
    assert!(
        (1..=for_b).contains(&b.samples()),
        "{} of {for_b}",
        b.samples()
    );
    assert_eq!(
        metric(m, "profcol_exporter_dropped_profile_samples_total").await,
        0
    );
    assert_eq!(
        metric(
            m,
            &exporter_metric("otelcol_exporter_sent_profile_samples_total", "otlp/a")
        )
        .await,
        total
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    for expected in [
        "config reloaded: pipelines changed: profiles",
        "config reloaded: exporters removed: otlp/b; pipelines changed: profiles",
    ] {
        assert!(logs.contains(expected), "{expected:?} in {logs}");
    }
}

/// A changed exporter whose `sending_queue` is unchanged hands its queue
/// to the new instance (which sends with the new settings), and a changed
/// receiver moves to its new port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_exporter_takes_over_its_queue_and_a_receiver_moves() {
    let sink = Sink::start().await;
    sink.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let body = |timeout: &str| {
        format!(
            "  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp/a]}}\nexporters:{}\n    timeout: {timeout}",
            exporter("otlp/a", &sink)
        )
    };
    write(&cfg, &ANY, &body("5s"));
    let mut p = start(&cfg).await;
    let mut c = client(p.grpc_port()).await;
    for _ in 0..5 {
        c.export(request(100)).await.unwrap();
    }
    let size = exporter_metric("otelcol_exporter_queue_size", "otlp/a");
    eventually("four requests queued", Duration::from_secs(10), || async {
        metric(p.metrics_port(), &size).await == 4
    })
    .await;

    // Another address, so that the new listener cannot be on the old port.
    let moved = Listen {
        otlp: "127.0.0.2:0",
        ..ANY
    };
    let old = p.addr("receivers::otlp::protocols::grpc");
    write(&cfg, &moved, &body("4s"));
    reload(&p, "success").await;
    p.reread_when(|l| l.get("receivers::otlp::protocols::grpc") != Some(&old))
        .await;
    let new = p.addr("receivers::otlp::protocols::grpc");
    assert_eq!(new.ip().to_string(), "127.0.0.2");
    // The old consumer hands the request it was retrying back to the
    // queue, now the new instance's, whose consumer holds one.
    eventually(
        "the held request handed back",
        Duration::from_secs(10),
        || async { metric(p.metrics_port(), &size).await == 4 },
    )
    .await;
    assert!(
        c.export(request(100)).await.is_err(),
        "the old port is closed"
    );
    let mut c = client_at(new).await;
    c.export(request(100)).await.unwrap();
    sink.down_for(Duration::ZERO);
    eventually("everything delivered", Duration::from_secs(10), || async {
        sink.samples() == 600
    })
    .await;
    assert_eq!(
        metric(
            p.metrics_port(),
            &exporter_metric("otelcol_exporter_sent_profile_samples_total", "otlp/a")
        )
        .await,
        600
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert!(
        logs.contains("config reloaded: receivers changed: otlp; exporters changed: otlp/a"),
        "{logs}"
    );
}

/// Requests an exporter was retrying against a dead endpoint go, after a
/// reload points it elsewhere, to the new endpoint at once: the old
/// consumer hands back the one it holds instead of waiting out its backoff
/// (an hour here) against the old endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_held_for_a_retry_follow_the_exporter_to_its_new_endpoint() {
    let (dead, live) = (Sink::start().await, Sink::start().await);
    dead.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let body = |sink: &Sink| {
        format!(
            r#"  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp/a]}}
exporters:
  otlp/a:
    endpoint: 127.0.0.1:{port}
    tls: {{insecure: true}}
    retry_on_failure: {{initial_interval: 1h, max_interval: 1h, randomization_factor: 0, max_elapsed_time: 0s}}
    sending_queue: {{num_consumers: 2}}"#,
            port = sink.addr.port()
        )
    };
    write(&cfg, &ANY, &body(&dead));
    let p = start(&cfg).await;
    let mut c = client(p.grpc_port()).await;
    for _ in 0..5 {
        c.export(request(100)).await.unwrap();
    }
    let size = exporter_metric("otelcol_exporter_queue_size", "otlp/a");
    eventually(
        "two requests held, three queued",
        Duration::from_secs(10),
        || async { metric(p.metrics_port(), &size).await == 3 },
    )
    .await;
    write(&cfg, &ANY, &body(&live));
    reload(&p, "success").await;
    eventually(
        "every request at the new endpoint",
        Duration::from_secs(10),
        || async { live.samples() == 500 },
    )
    .await;
    assert_eq!(dead.samples(), 0);
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// A receiver whose section changes but not its port is stopped and
/// started again on the same port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_receiver_listens_again_on_its_port() {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let body = format!(
        "  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp/a]}}\nexporters:{}",
        exporter("otlp/a", &sink)
    );
    write(&cfg, &ANY, &body);
    let p = start(&cfg).await;
    client(p.grpc_port())
        .await
        .export(request(100))
        .await
        .unwrap();
    // The port it took, now written in the config.
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "{grpc: {endpoint: \"127.0.0.1:0\"}",
        &format!(
            "{{grpc: {{endpoint: \"127.0.0.1:{}\", max_recv_msg_size_mib: 8}}",
            p.grpc_port()
        ),
    );
    std::fs::write(&cfg, text).unwrap();
    reload(&p, "success").await;
    client(p.grpc_port())
        .await
        .export(request(100))
        .await
        .unwrap();
    eventually("both delivered", Duration::from_secs(10), || async {
        sink.samples() == 200
    })
    .await;
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert!(
        logs.contains("config reloaded: receivers changed: otlp"),
        "{logs}"
    );
}

/// Connectors across a reload: `profiles` (with a `batch` holding what it
/// got) feeds `profiles/out` through `forward`; the reload points
/// `profiles/out` at another exporter. The pipeline before the connector
/// is rebuilt onto the new `profiles/out`; what its old `batch` held goes
/// on through the old one, and what comes after the reload through the
/// new: nothing is lost or sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_before_a_connector_follows_the_pipeline_after_it() {
    let (a, b) = (Sink::start().await, Sink::start().await);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let body = |to: &str| {
        format!(
            "  pipelines:\n    profiles: {{receivers: [otlp], processors: [batch], exporters: [forward]}}\n    profiles/out: {{receivers: [forward], exporters: [{to}]}}\nprocessors:\n  batch: {{send_batch_size: 100000, timeout: 1h}}\nconnectors:\n  forward:\nexporters:{}{}",
            exporter("otlp/a", &a),
            exporter("otlp/b", &b)
        )
    };
    write(&cfg, &ANY, &body("otlp/a"));
    let p = start(&cfg).await;
    let mut c = client(p.grpc_port()).await;
    for _ in 0..3 {
        c.export(request(100)).await.unwrap();
    }
    assert!(a.received().is_empty(), "the batch holds them");
    write(&cfg, &ANY, &body("otlp/b"));
    reload(&p, "success").await;
    eventually(
        "the old batch's samples reach otlp/a",
        Duration::from_secs(10),
        || async { a.samples() == 300 },
    )
    .await;
    for _ in 0..2 {
        c.export(request(100)).await.unwrap();
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert_eq!(a.samples(), 300, "{logs}");
    assert_eq!(b.samples(), 200, "{logs}");
}
