//! The `profcol` binary as a user runs it.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{client, free_port, request};

fn profcol() -> Command {
    Command::new(env!("CARGO_BIN_EXE_profcol"))
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_shipped_config_is_valid() {
    let out = profcol()
        .args(["validate", "--config"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And through the library, with every component built.
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml")).unwrap();
    let (cfg, graph) = profcol::app::load_str(&text).unwrap();
    assert!(cfg.service.pipelines.contains_key("profiles"));
    assert!(!graph.receivers.is_empty() && !graph.exporters.is_empty());
}

#[test]
fn validate_lists_every_error_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        &dir,
        "bad.yaml",
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:4317
  otlp/two:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
  nosuch:
exporters:
  otlp/gw:
    endpoint: gw:4317
    timeout: 5 sec
    retry_on_failure:
      max_intervall: 3s
service:
  pipelines:
    profiles:
      receivers: [otlp, otlp/two]
      exporters: [otlp/gw, otlp/missing]
    traces:
      receivers: [otlp]
      exporters: [otlp/gw]
"#,
    );
    let out = profcol()
        .args(["validate", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "exporters::otlp/gw::timeout: invalid duration \"5 sec\"",
        "max_intervall",
        "otlp/missing",
        "service::pipelines::traces",
        "receivers::nosuch: unknown type \"nosuch\"",
        "receivers::otlp/two: endpoint 0.0.0.0:4317 conflicts with receivers::otlp",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}

#[test]
fn later_config_files_win() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        &dir,
        "base.yaml",
        "receivers: {otlp: {protocols: {grpc: {endpoint: \"127.0.0.1:1\"}}}}\nexporters: {debug: {}}\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}\n",
    );
    let overlay = write(&dir, "over.yaml", "exporters: {debug: {verbosity: loud}}\n");
    let out = profcol()
        .args(["validate", "--config"])
        .arg(&base)
        .arg("--config")
        .arg(&overlay)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exporters::debug::verbosity"));
}

#[test]
fn components_lists_the_known_types() {
    let out = profcol().arg("components").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "receivers:",
        "  - otlp",
        "  - sentry",
        "exporters:",
        "  - debug",
        "  - otlp_grpc",
        "extensions:",
        "  - health_check",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
}

/// SIGTERM drains and exits 0; health_check says 200 while running.
#[tokio::test]
async fn sigterm_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let (recv, health, metrics) = (free_port(), free_port(), free_port());
    let cfg = write(
        &dir,
        "c.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols: {{grpc: {{endpoint: "127.0.0.1:{recv}"}}}}
exporters:
  debug:
    verbosity: detailed
extensions:
  health_check:
    endpoint: 127.0.0.1:{health}
service:
  extensions: [health_check]
  telemetry:
    metrics: {{address: "127.0.0.1:{metrics}"}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [debug]}}
"#
        ),
    );
    let mut child = profcol()
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until healthy (the process needs a moment to bind).
    let started = Instant::now();
    let url = format!("http://127.0.0.1:{health}/");
    loop {
        if let Ok(r) = reqwest::get(&url).await {
            if r.status() == 200 {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never became healthy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c = client(recv).await;
    c.export(request("otlp/minimal-request.bin")).await.unwrap();
    // The client stays connected: shutdown must not wait on it forever.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Read both pipes while waiting (a full stdout pipe would block the
    // child) and keep this runtime free to answer the server's GOAWAY.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let err = std::thread::spawn(move || {
        let mut logs = String::new();
        stderr.read_to_string(&mut logs).map(|_| logs)
    });
    let started = Instant::now();
    let code = loop {
        if let Some(code) = child.try_wait().unwrap() {
            break code;
        }
        if started.elapsed() > Duration::from_secs(40) {
            child.kill().unwrap();
            panic!("still running 40 s after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(c);
    out.join().unwrap().unwrap();
    let logs = err.join().unwrap().unwrap();
    assert!(code.success(), "exit {code:?}\n{logs}");
    // The debug exporter printed the profile as folded stacks before exit.
    assert!(logs.contains("Profiles: resource profiles: 1"), "{logs}");
    assert!(logs.contains("thread.name="), "{logs}");
    assert!(logs.contains("shutdown complete"), "{logs}");
}
