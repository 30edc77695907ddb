//! Hostile clients against a running `profcol`: extreme values, stalled and
//! trickled bodies, idle and half-open connections, a process out of file
//! descriptors, unauthenticated bombs, signals. Each case checks the answer,
//! that memory or time stays bounded, and that a valid request right after
//! still goes through.

use crate::common;

use std::io::Write;
use std::time::{Duration, Instant};

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{profcol, Ports, Running};
use profcol_exporters::sentry::mock::MockSentry;
use profcol_model::synth;

const KEY: &str = "publickey";

struct Collector {
    p: Running,
    otlp: u16,
    sentry: u16,
    health: u16,
    metrics: u16,
    mock: MockSentry,
    _dir: tempfile::TempDir,
}

/// otlp + sentry receivers (Sentry key `publickey`, timeouts of 1 s, at
/// most 200 connections) into a `sentry` exporter that posts to a mock.
async fn start(fd_limit: Option<u64>) -> Collector {
    start_with(fd_limit, "1s").await
}

/// `start` with the gRPC listener's `max_connection_idle`.
async fn start_with(fd_limit: Option<u64>, grpc_idle: &str) -> Collector {
    let mock = MockSentry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "127.0.0.1:0"
        keepalive: {{server_parameters: {{max_connection_idle: {grpc_idle}}}}}
  sentry:
    endpoint: "127.0.0.1:0"
    keys: [{KEY}]
    read_header_timeout: 1s
    idle_timeout: 1s
    body_timeout: 1s
    max_connections: 200
exporters:
  sentry: {{dsn: "{dsn}", retry_on_failure: {{enabled: false}}}}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp, sentry], exporters: [sentry]}}
"#,
            dsn = mock.dsn()
        ),
    )
    .unwrap();
    let mut cmd = profcol();
    cmd.arg("--config")
        .arg(&cfg)
        .arg("--shutdown-timeout")
        .arg("5s");
    if let Some(n) = fd_limit {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe setrlimit between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let p = Running::ready(&mut cmd).await;
    Collector {
        otlp: p.grpc_port(),
        sentry: p.port("receivers::sentry"),
        health: p.health_port(),
        metrics: p.metrics_port(),
        p,
        mock,
        _dir: dir,
    }
}

impl Collector {
    /// The recorded Python chunk, as its SDK sent it: must be accepted.
    async fn valid_sentry_request(&self) {
        common::replay_fixture(self.sentry, "sentry-python/manual/0001", None).await;
    }

    async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.metrics))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Waits until a metric line starting with `prefix` shows up.
    async fn wait_metric(&self, prefix: &str) -> String {
        let started = Instant::now();
        loop {
            let text = self.metrics().await;
            if let Some(l) = text.lines().find(|l| l.starts_with(prefix)) {
                return l.to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no {prefix} in\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn stop(self) -> String {
        self.p.signal("TERM");
        let (code, logs) = self.p.wait(Duration::from_secs(20)).await;
        assert!(code.success(), "exit {code:?}\n{logs}");
        logs
    }
}

async fn export_raw(port: u16, body: Vec<u8>) -> Result<(), tonic::Status> {
    let mut c = common::client(port).await;
    let req = opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest::decode(&body[..]).unwrap();
    c.export(req).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_values_are_refused_or_dropped_and_memory_stays_bounded() {
    let c = start(None).await;
    for (name, data) in synth::hostile() {
        let body = data.encode_to_vec();
        assert!(
            body.len() < 600,
            "{name}: a small request ({} bytes)",
            body.len()
        );
        let r = export_raw(c.otlp, body).await;
        if name.contains("2^64-1") {
            let e = r.expect_err(name);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{name}: {e:?}");
            assert!(
                e.message().contains("after 2262-04-11"),
                "{name}: {}",
                e.message()
            );
        } else {
            r.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
    }
    // Accepted, and dropped by the Sentry exporter with a reason.
    c.wait_metric("profcol_exporter_dropped_profile_samples_total{exporter=\"sentry\",reason=\"implausible_values\"}")
        .await;
    c.wait_metric("profcol_exporter_dropped_profile_samples_total{exporter=\"sentry\",reason=\"implausible_time\"}")
        .await;
    let (peak, _) = c.p.memory_mib();
    assert!(peak < 200, "peak RSS {peak} MiB");
    c.valid_sentry_request().await;
    let started = Instant::now();
    while c.mock.requests().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing reached Sentry"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nothing hostile is left for shutdown to wait out: it drains, not
    // cut off at its deadline.
    let logs = c.stop().await;
    assert!(logs.contains("shutdown complete"), "{logs}");
    assert!(!logs.contains("shutdown deadline reached"), "{logs}");
}

/// Sends `head` (request line and headers) and `body`, then waits for the
/// answer without sending more; returns the status line (empty if the
/// connection was closed without one) and how long it took.
async fn stalled(port: u16, head: &str, body: &[u8]) -> (String, Duration) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(15), s.read(&mut buf))
        .await
        .expect("no answer and no close within 15 s")
        .unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    (
        text.lines().next().unwrap_or("").to_owned(),
        started.elapsed(),
    )
}

fn post(port: u16, extra: &str) -> String {
    format!(
        "POST /api/1/envelope/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Sentry-Auth: Sentry sentry_key={KEY}\r\n{extra}\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_short_bodies_are_timed_out_and_their_memory_freed() {
    let c = start(None).await;
    let port = c.sentry;
    let megabyte = vec![b'x'; 1 << 20];
    // A Content-Length larger than the body, 20 at once, each 1 MiB in.
    let cases: Vec<_> = (0..20)
        .map(|_| {
            let head = post(port, "Content-Length: 10000000\r\n");
            let body = megabyte.clone();
            tokio::spawn(async move { stalled(port, &head, &body).await })
        })
        .collect();
    for case in cases {
        let (status, took) = case.await.unwrap();
        assert_eq!(status, "HTTP/1.1 408 Request Timeout", "after {took:?}");
    }
    // A chunked body that announces a huge chunk and sends a few bytes.
    let (status, _) = stalled(
        port,
        &post(port, "Transfer-Encoding: chunked\r\n"),
        b"fffffff\r\nabc",
    )
    .await;
    assert_eq!(status, "HTTP/1.1 408 Request Timeout");
    // A body trickled a byte at a time: some bytes in every window, but far
    // below the minimum rate.
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(post(port, "Content-Length: 1000\r\n").as_bytes())
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 4096];
    let answer = loop {
        let _ = s.write_all(b"x").await;
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await {
            break String::from_utf8_lossy(&buf[..r.unwrap_or(0)]).to_string();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never cut off");
    };
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // Half-sent headers: the connection is closed.
    let (status, took) = stalled(port, "POST /api/1/envelope/ HTTP/1.1\r\nHost: x\r\n", b"").await;
    assert!(
        status.is_empty() || status.contains("408"),
        "{status} after {took:?}"
    );

    let (_, rss) = c.p.memory_mib();
    assert!(
        rss < 150,
        "RSS {rss} MiB after the stalled bodies were dropped"
    );
    c.valid_sentry_request().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_lock_out_new_clients() {
    let c = start(None).await;
    // More idle connections than the listener's cap (200), some with half a
    // request line.
    let mut idle = Vec::new();
    for i in 0..300 {
        let mut s = TcpStream::connect(("127.0.0.1", c.sentry)).await.unwrap();
        if i % 3 == 0 {
            s.write_all(b"POST /api/1/env").await.unwrap();
        }
        idle.push(s);
    }
    for _ in 0..50 {
        idle.push(TcpStream::connect(("127.0.0.1", c.otlp)).await.unwrap());
    }
    // The oldest idle ones make room (the log below says so): a new client
    // is served, and every other port still answers.
    c.valid_sentry_request().await;
    assert_eq!(common::health_status(c.health).await, Some(200));
    assert!(c
        .metrics()
        .await
        .contains("otelcol_receiver_accepted_profile_samples"));
    common::client(c.otlp)
        .await
        .export(common::request("otlp/minimal-request.bin"))
        .await
        .unwrap();
    // After the idle timeout (1 s) every idle connection is closed: read
    // each until its close, for at most 10 s in all (a loaded machine
    // sweeps late, not never).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut open = 0;
    for s in &mut idle {
        let mut b = [0u8; 512];
        loop {
            match tokio::time::timeout_at(deadline, s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                // An answer (408 to the half request line), then the close.
                Ok(Ok(_)) => {}
                Err(_) => {
                    open += 1;
                    break;
                }
            }
        }
    }
    assert_eq!(
        open, 0,
        "idle connections still open 12 s after the 1 s idle timeout"
    );
    let logs = c.stop().await;
    assert!(
        logs.contains("connection limit reached; closing the oldest idle connection"),
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_sheds_idle_connections() {
    // Idle connections are not closed by the idle timeout here, so that
    // only running out of descriptors can close them.
    let c = start_with(Some(256), "1h").await;
    // More connections than the process has descriptors, to the listener
    // with the larger cap (otlp: 1024).
    let mut idle = Vec::new();
    for _ in 0..300 {
        match TcpStream::connect(("127.0.0.1", c.otlp)).await {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect: {e}"),
        }
    }
    // The collector, however slow to accept, runs out and closes the
    // oldest one (as long as the connections are held: dropped ones would
    // free their descriptors as fast as it accepts them).
    let mut b = [0u8; 512];
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        // Whatever the server sends before it closes, then the end.
        while let Ok(1..) = idle[0].read(&mut b).await {}
    });
    assert!(
        closed.await.is_ok(),
        "the oldest idle connection was not closed"
    );
    assert_eq!(common::health_status(c.health).await, Some(200));
    c.valid_sentry_request().await;
    drop(idle);
    let logs = c.stop().await;
    assert!(
        logs.contains("out of file descriptors; closing the oldest idle connection"),
        "{logs}"
    );
}

/// gzip of `data`, flushed so that a reader sees all of it at once.
fn gzip_flushed(data: &[u8]) -> (flate2::write::GzEncoder<Vec<u8>>, Vec<u8>) {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.flush().unwrap();
    let bytes = std::mem::take(e.get_mut());
    (e, bytes)
}

/// Posts a gzip'd chunked body whose first line is `header`, without a key
/// anywhere but (perhaps) the header's `dsn`, and stops sending.
async fn first_line_then_stall(
    port: u16,
    header: &str,
) -> (TcpStream, String, flate2::write::GzEncoder<Vec<u8>>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = "POST /api/1/envelope/ HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (enc, first) = gzip_flushed(format!("{header}\n").as_bytes());
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(format!("{:x}\r\n", first.len()).as_bytes())
        .await
        .unwrap();
    s.write_all(&first).await.unwrap();
    s.write_all(b"\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let answer = match tokio::time::timeout(Duration::from_millis(700), s.read(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).to_string(),
        _ => String::new(),
    };
    (s, answer, enc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_valid_key_is_refused_on_its_first_line() {
    let c = start(None).await;
    // No key at all, or another key in the dsn: 401 before the rest of the
    // body (the bomb that would follow) is read.
    for header in [
        "{}".to_owned(),
        "{\"dsn\":\"http://intruder@127.0.0.1/1\"}".to_owned(),
    ] {
        let (_s, answer, _) = first_line_then_stall(c.sentry, &header).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{header}: {answer:?}");
    }
    // The right key in the dsn: the receiver waits for the rest.
    let envelope = std::fs::read(
        profcol_model::testing::fixtures_dir().join("sentry-python/manual/0001.envelope"),
    )
    .unwrap();
    let rest = &envelope[envelope.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let header = format!("{{\"dsn\":\"http://{KEY}@127.0.0.1/1\"}}");
    let (mut s, answer, mut enc) = first_line_then_stall(c.sentry, &header).await;
    assert_eq!(answer, "", "no answer before the body");
    enc.write_all(rest).unwrap();
    let tail = enc.finish().unwrap();
    s.write_all(format!("{:x}\r\n", tail.len()).as_bytes())
        .await
        .unwrap();
    s.write_all(&tail).await.unwrap();
    s.write_all(b"\r\n0\r\n\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_stopping_signals_stop_and_every_signal_is_logged() {
    let mut c = start(None).await;
    for sig in ["HUP", "USR1", "USR2", "ALRM"] {
        c.p.signal(sig);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(c.p.is_running(), "SIG{sig} ended the process");
        assert_eq!(common::health_status(c.health).await, Some(200), "SIG{sig}");
    }
    c.valid_sentry_request().await;
    c.p.signal("QUIT");
    let (code, logs) = c.p.wait(Duration::from_secs(20)).await;
    assert!(code.success(), "exit {code:?}\n{logs}");
    for want in [
        "received SIGHUP; reloading the config",
        "config reloaded: nothing changed",
        "received SIGUSR1; logging the state",
        "received SIGUSR2; ignoring the signal",
        "received SIGALRM; ignoring the signal",
        "received SIGQUIT; logging the state, then shutting down",
        "state: otelcol_receiver_accepted_profile_samples_total{receiver=\"sentry\"",
        "shutdown complete",
    ] {
        assert!(logs.contains(want), "{want:?} missing in\n{logs}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_refusals_are_logged_a_few_times_and_all_counted() {
    let c = start(None).await;
    let mut message = String::new();
    for _ in 0..200 {
        let data = synth::hostile().remove(0).1;
        message = export_raw(c.otlp, data.encode_to_vec())
            .await
            .unwrap_err()
            .message()
            .to_owned();
    }
    let refused = c
        .wait_metric("otelcol_receiver_refused_profile_samples_total{receiver=\"otlp\",transport=\"grpc\",reason=\"invalid\"}")
        .await;
    assert!(refused.ends_with(" 200"), "{refused}");
    let logs = c.stop().await;
    let lines = logs.lines().filter(|l| l.contains(" refused ")).count();
    assert!(lines <= 10, "{lines} refusal lines:\n{logs}");
    // The log says what the client was told, and who it was.
    let first = logs
        .lines()
        .find(|l| l.contains("request refused"))
        .unwrap();
    assert!(message.starts_with("invalid profiles data: "), "{message}");
    assert!(
        first.contains(&message) && first.contains("peer=127.0.0.1:"),
        "{first}"
    );
}

#[test]
fn a_deeply_nested_config_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.yaml");
    std::fs::write(
        &path,
        format!(
            "receivers: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    )
    .unwrap();
    let out = profcol()
        .arg("validate")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nest deeper than 64 levels"), "{err}");
}
