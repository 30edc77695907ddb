//! The `profcol` binary as a user runs it.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{client, health_status, profcol, request, Ports, Running};

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `profcol validate --config CONFIG`.
fn validate(config: impl AsRef<std::ffi::OsStr>) -> std::process::Output {
    profcol()
        .args(["validate", "--config"])
        .arg(config)
        .output()
        .unwrap()
}

/// A config file in `dir`: otlp to debug through `processors` (type, YAML
/// settings), in order.
fn otlp_to_debug(dir: &tempfile::TempDir, processors: &[(&str, &str)]) -> std::path::PathBuf {
    let settings: Vec<String> = processors
        .iter()
        .map(|(t, y)| format!("{t}: {y}"))
        .collect();
    let names: Vec<&str> = processors.iter().map(|(t, _)| *t).collect();
    write(
        dir,
        "c.yaml",
        &format!(
            "receivers: {{otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:1\"}}}}}}}}\nprocessors: {{{}}}\nexporters: {{debug: {{}}}}\nservice: {{pipelines: {{profiles: {{receivers: [otlp], processors: [{}], exporters: [debug]}}}}}}\n",
            settings.join(", "),
            names.join(", ")
        ),
    )
}

#[test]
fn the_shipped_config_is_valid() {
    // validate binds no socket: it passes while config.yaml's ports are
    // taken (where this test can take them; else something else holds them).
    let _held: Vec<_> = [
        "0.0.0.0:4317",
        "0.0.0.0:3000",
        "0.0.0.0:4040",
        "127.0.0.1:13133",
        "127.0.0.1:8888",
    ]
    .iter()
    .filter_map(|a| std::net::TcpListener::bind(a).ok())
    .collect();
    let out = validate(concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml"));
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
    let out = validate(&bad);
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

/// Every error of one component, not just the first: a key that fails to
/// decode does not hide the checks of the others, and what start-up would
/// refuse about a directory is reported too.
#[test]
fn validate_lists_every_error_of_one_component() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        &dir,
        "bad.yaml",
        r#"
receivers:
  otlp:
    protocols: {grpc: {endpoint: "127.0.0.1:1"}}
exporters:
  sentry:
    compression: zstd
    dsn: sentry.example.com/1
    platform: Android
    environment: "a b"
  debug: {verbosity: loud, sampling_thereafter: 0}
  otlp:
    endpoint: gw:4317
    headers: {"bad name": "värde"}
  pprof: {directory: /proc/nope, create_directory: false}
service:
  pipelines:
    profiles: {receivers: [otlp], exporters: [debug, sentry, otlp, pprof]}
"#,
    );
    let out = validate(&bad);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let want = [
        "invalid configuration (9 errors):",
        r#"  exporters::debug::verbosity: unknown value "loud", expected one of "basic", "normal", "detailed""#,
        "  exporters::debug::sampling_thereafter: must be at least 1",
        "  exporters::otlp::headers::bad name: invalid header name: gRPC metadata names are letters, digits, '-', '_' and '.' (the Collector takes this one here and then fails every export)",
        "  exporters::otlp::headers::bad name: invalid header value: only printable ASCII is allowed",
        "  exporters::pprof::directory: /proc/nope does not exist and create_directory is false",
        r#"  exporters::sentry::compression: unknown value "zstd", expected one of "gzip", "", "none""#,
        r#"  exporters::sentry::dsn: invalid DSN "sentry.example.com/1": relative URL without a base"#,
        r#"  exporters::sentry::platform: "Android" is not a Sentry platform (lowercase letters, digits and '-')"#,
        r#"  exporters::sentry::environment: "a b" is not a valid Sentry environment (no spaces, newlines or '/', not "None")"#,
    ];
    assert_eq!(lines, want, "{err}");
}

/// `--memory-limit-mib 0` would refuse every batch: a usage error (exit 2),
/// as any bad flag, before the config is even read.
#[test]
fn a_zero_memory_limit_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = otlp_to_debug(&dir, &[]);
    for args in [
        vec!["--memory-limit-mib", "0", "--config"],
        vec!["validate", "--memory-limit-mib", "0", "--config"],
    ] {
        // Without the check the collector would start (and refuse every
        // batch): stop it rather than wait for it.
        let mut child = profcol()
            .args(&args)
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("{args:?}: started instead of refusing the flag");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid value '0' for '--memory-limit-mib <MEMORY_LIMIT_MIB>': must be greater than 0"),
            "{args:?}: {err}"
        );
    }
    let out = profcol()
        .args(["validate", "--memory-limit-mib", "lots", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expected a whole number of MiB"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 1 MiB is fine.
    let out = profcol()
        .args(["validate", "--memory-limit-mib", "1", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn later_config_files_win() {
    let dir = tempfile::tempdir().unwrap();
    let base = otlp_to_debug(&dir, &[]);
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

/// The Collector's command line carries over: `--feature-gates` with the
/// gate it needs for profiles (always on here), repeatable, comma lists.
/// An unknown gate, or turning profiles off, is a usage error naming the
/// gates profcol knows.
#[test]
fn the_collectors_feature_gates_flag() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = otlp_to_debug(&dir, &[]);
    let config = format!("--config={}", cfg.display());
    for gates in [
        vec!["--feature-gates=service.profilesSupport"],
        vec![
            "--feature-gates",
            "+service.profilesSupport,service.profilesSupport",
            "--feature-gates=service.profilesSupport",
        ],
    ] {
        let out = profcol()
            .arg("validate")
            .arg(&config)
            .args(&gates)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{gates:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Before the subcommand too, as the Collector's docs write it.
    let out = profcol()
        .arg("--feature-gates=service.profilesSupport")
        .arg("validate")
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (gates, want) in [
        (
            "--feature-gates=service.profilesSupport,exporter.otlp.nope",
            "unknown feature gate \"exporter.otlp.nope\"; profcol knows service.profilesSupport (always on)",
        ),
        (
            "--feature-gates=-service.profilesSupport",
            "service.profilesSupport cannot be turned off: profcol always carries profiles",
        ),
    ] {
        let out = profcol()
            .arg("validate")
            .arg(&config)
            .arg(gates)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{gates}: {err}");
        assert!(err.contains(want), "{gates}: {err}");
    }
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
        // The Collector's v0.161.0 names of its renamed types.
        "  - otlp_http",
        "  - load_balancing",
        "extensions:",
        "  - health_check",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
}

/// One receiver, one exporter (`exporter` with its YAML body), health_check,
/// each listening on port 0 ([`Ports`]).
fn running_config(dir: &tempfile::TempDir, exporter: &str, body: &str) -> std::path::PathBuf {
    write(
        dir,
        "c.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}
exporters:
  {exporter}: {body}
extensions:
  health_check:
    endpoint: 127.0.0.1:0
service:
  extensions: [health_check]
  telemetry:
    metrics: {{address: "127.0.0.1:0"}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [{exporter}]}}
"#,
        ),
    )
}

/// SIGTERM or SIGINT drains and exits 0; health_check says 200 while running.
async fn graceful_exit(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = running_config(&dir, "debug", "{verbosity: detailed}");
    let p = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    let mut c = client(p.grpc_port()).await;
    c.export(request("otlp/minimal-request.bin")).await.unwrap();
    // The client stays connected: shutdown must not wait on it forever.
    p.signal(signal);
    let (code, logs) = p.wait(Duration::from_secs(40)).await;
    drop(c);
    assert!(code.success(), "exit {code:?}\n{logs}");
    assert!(logs.contains(&format!("received SIG{signal}")), "{logs}");
    // The debug exporter printed the profile as folded stacks before exit.
    assert!(logs.contains("Profiles: resource profiles: 1"), "{logs}");
    assert!(logs.contains("thread.name="), "{logs}");
    assert!(logs.contains("shutdown complete"), "{logs}");
}

#[tokio::test]
async fn sigterm_shuts_down_gracefully() {
    graceful_exit("TERM").await;
}

#[tokio::test]
async fn sigint_shuts_down_gracefully() {
    graceful_exit("INT").await;
}

/// While draining (a batch retrying towards a dead peer) health is 503; a
/// second signal exits at once with 130 instead of waiting for the deadline.
#[tokio::test]
async fn a_second_signal_forces_exit() {
    let dir = tempfile::tempdir().unwrap();
    // A peer that is down: it drops every connection, which the exporter
    // retries. Holding the port keeps another test from taking it.
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = down.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((conn, _)) = down.accept().await {
            drop(conn);
        }
    });
    let cfg = running_config(
        &dir,
        "otlp",
        &format!("{{endpoint: '127.0.0.1:{dead}', tls: {{insecure: true}}}}"),
    );
    let p = Running::ready(
        profcol()
            .arg("--config")
            .arg(&cfg)
            .args(["--shutdown-timeout", "120s"]),
    )
    .await;
    let (recv, health) = (p.grpc_port(), p.health_port());
    client(recv)
        .await
        .export(request("otlp/minimal-request.bin"))
        .await
        .unwrap();
    p.signal("INT");
    let started = Instant::now();
    while health_status(health).await != Some(503) {
        if started.elapsed() > Duration::from_secs(10) {
            p.fail("health never turned 503").await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Still draining: the batch waits for its next retry.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if health_status(health).await != Some(503) {
        p.fail("stopped draining").await;
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(10)).await;
    assert_eq!(code.code(), Some(130), "{logs}");
    assert!(
        logs.contains("second signal: exiting without draining"),
        "{logs}"
    );
    assert!(!logs.contains("shutdown complete"), "{logs}");
}

/// Errors found while building the components (the second pass), each at
/// its exact otelcol-style path.
#[test]
fn component_errors_have_exact_paths() {
    let pipeline = "service: {pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}";
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            format!("receivers: {{otlp: , nosuch/a: }}\nexporters: {{debug: , loki: }}\n{pipeline}"),
            vec![
                r#"receivers::nosuch/a: unknown type "nosuch" (known: kafka, otlp, pprof, pyroscope, sentry)"#,
                r#"exporters::loki: unknown type "loki"; profcol has no loki exporter (see docs/collector-compatibility.md)"#,
            ],
        ),
        (
            "receivers: {otlp: {protocols: {grpc: {endpoint: '127.0.0.1:8888'}}}}\nexporters: {debug: }\nextensions: {health_check: {endpoint: '0.0.0.0:8888'}}\nservice: {extensions: [health_check], pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}".to_owned(),
            vec![
                "extensions::health_check: endpoint 0.0.0.0:8888 conflicts with receivers::otlp, which listens on the same port",
                "service::telemetry::metrics: endpoint 127.0.0.1:8888 conflicts with receivers::otlp, which listens on the same port",
            ],
        ),
        // `:port` (every interface, as in Go) clashes with `localhost:port`.
        (
            "receivers: {otlp: {protocols: {grpc: {endpoint: ':4317'}}}, sentry: {endpoint: 'localhost:4317'}}\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp, sentry], exporters: [debug]}}}".to_owned(),
            vec![
                "receivers::sentry: endpoint localhost:4317 conflicts with receivers::otlp, which listens on the same port",
            ],
        ),
        (
            format!("receivers: {{otlp: {{protocols: {{grpc: {{max_recv_msg_size_mib: 0, endpoint: '4317'}}}}}}}}\nexporters: {{debug: {{verbosity: loud}}, otlp/gw: {{endpoint: 'gw:4317', timeout: 5 sec, compression: lz4}}}}\n{pipeline}"),
            vec![
                "receivers::otlp::protocols::grpc::endpoint: invalid endpoint \"4317\": expected host:port",
                "receivers::otlp::protocols::grpc::max_recv_msg_size_mib: must be between 1 and 4095, got 0",
                r#"exporters::debug::verbosity: unknown value "loud", expected one of "basic", "normal", "detailed""#,
                r#"exporters::otlp/gw::compression: unsupported compression type "lz4": gRPC sends gzip, zstd, snappy or none"#,
                r#"exporters::otlp/gw::timeout: invalid duration "5 sec""#,
            ],
        ),
    ];
    for (yaml, want) in cases {
        let errs = match profcol::app::load_str(&yaml) {
            Ok(_) => panic!("valid:\n{yaml}"),
            Err(e) => e.0.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        };
        assert_eq!(errs, want, "\n{yaml}");
    }
}

#[test]
fn warnings_from_building_components_reach_stderr() {
    // Components are built before the configured logger exists.
    let dir = tempfile::tempdir().unwrap();
    let cfg = otlp_to_debug(&dir, &[("sampling", "{sampling_percentage: 0.001}")]);
    let out = validate(&cfg);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("WARN") && err.contains("sampling_percentage rounds to zero"),
        "{err}"
    );
}

/// `profcol health` (the Docker image's HEALTHCHECK): 0 while the
/// collector serves, 1 with the reason once nothing answers.
#[tokio::test]
async fn health_exits_0_while_ready_and_1_when_not() {
    let health_cmd = |port: u16| {
        let out = profcol()
            .args(["health", "--endpoint", &format!("127.0.0.1:{port}")])
            .args(["--timeout", "2s"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = running_config(&dir, "debug", "{}");
    let p = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    let health = p.health_port();
    let (code, out, _) = tokio::task::spawn_blocking(move || health_cmd(health))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.trim(), "healthy: HTTP/1.1 200 OK");
    p.signal("TERM");
    let (status, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(status.success(), "{logs}");
    let (code, _, err) = tokio::task::spawn_blocking(move || health_cmd(health))
        .await
        .unwrap();
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with(&format!("unhealthy: cannot connect to 127.0.0.1:{health}")),
        "{err}"
    );
}
