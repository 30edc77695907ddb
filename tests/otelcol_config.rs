//! Collector configs and command lines as they are copied from the
//! Collector's documentation: `--config=file:`, `env:`, `yaml:`, `--set`,
//! the Collector's processors, and hints for what profcol lacks.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{client, free_port, profcol, wait_healthy, Running, Sink};
use profcol_pipeline::model::synth;
use profcol_pipeline::proto::ExportProfilesServiceRequest;

/// The Collector's example gateway config, as copied (see its header).
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otelcol/k8s-otel-collector-config.yaml")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// As copied, the config fails on exactly what profcol lacks, each with a
/// hint: the `zpages` extension and a pipeline of another signal. Its OTLP
/// receivers, `memory_limiter`, `batch` and `otlp` exporter all pass.
#[test]
fn the_collectors_example_config_fails_only_on_what_profcol_lacks() {
    let out = profcol()
        .arg("validate")
        .arg(format!("--config=file:{}", fixture().display()))
        .env("MY_POD_IP", "127.0.0.1")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("invalid configuration (2 errors):"), "{err}");
    assert!(
        err.contains(r#"extensions::zpages: unknown type "zpages"; profcol has no zpages extension (see README: Collector compatibility)"#),
        "{err}"
    );
    assert!(
        err.contains(r#"service::pipelines::traces/1: only profiles pipelines are supported, not "traces"; profcol carries profiles only: name it profiles or profiles/NAME"#),
        "{err}"
    );
}

/// The same config with the two changes its errors ask for (the pipeline
/// named `profiles/1`, no `zpages`), and the command line a Collector user
/// writes: it validates, starts, and sends what it receives through
/// `memory_limiter` and `batch` to its `otlp` exporter, merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collectors_example_config_runs_once_it_carries_profiles() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let edited = text
        .replace("    traces/1:\n", "    profiles/1:\n")
        .replace("extensions:\n  zpages: {}\n", "")
        .replace("  extensions: [zpages]\n", "");
    assert_ne!(edited, text);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, edited).unwrap();

    let out = profcol()
        .arg("validate")
        .arg(format!("--config=file:{}", path.display()))
        .env("MY_POD_IP", "127.0.0.1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let sink = Sink::start().await;
    let (grpc, http, health, metrics) = (free_port(), free_port(), free_port(), free_port());
    let p = Running::spawn(
        profcol()
            .arg(format!("--config=file:{}", path.display()))
            // The pod's address, as the Kubernetes example sets it.
            .env("MY_POD_IP", "127.0.0.1")
            .arg(format!(
                "--set=receivers.otlp.protocols.grpc.endpoint=127.0.0.1:{grpc}"
            ))
            .arg(format!(
                "--set=receivers::otlp::protocols::http::endpoint=127.0.0.1:{http}"
            ))
            .arg(format!(
                "--set=exporters.otlp.endpoint=http://127.0.0.1:{}",
                sink.addr.port()
            ))
            .arg(format!(
                "--set=service.telemetry.metrics.address=127.0.0.1:{metrics}"
            ))
            .arg("--set=service.telemetry.logs.encoding=json")
            .arg(format!(
                "--config=yaml:extensions::health_check::endpoint: 127.0.0.1:{health}"
            ))
            .arg("--config=yaml:service::extensions: [health_check]"),
    );
    wait_healthy(health).await;

    let inputs = synth::service_requests(100, 10, 20);
    let mut c = client(grpc).await;
    for d in &inputs {
        // A busy machine may fill the pipeline for a moment; clients retry
        // UNAVAILABLE, as the Collector's exporters do.
        let mut tries = 0;
        loop {
            let sent = c
                .export(ExportProfilesServiceRequest {
                    resource_profiles: d.resource_profiles.clone(),
                    dictionary: d.dictionary.clone(),
                })
                .await;
            match sent {
                Ok(_) => break,
                Err(s) if s.code() == tonic::Code::Unavailable && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(s) => panic!("{s:?}"),
            }
        }
    }
    p.signal("TERM");
    let (status, logs) = p.wait(Duration::from_secs(20)).await;
    assert!(status.success(), "{logs}");
    assert_eq!(sink.samples(), 2000);
    // batch: default size 8192 samples, 200 ms: a few requests, not 100.
    assert!(sink.calls() <= 10, "{} requests", sink.calls());
    // service.telemetry.logs.encoding: json, one object a line.
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(
            v.get("level").is_some() && v.get("message").is_some(),
            "{l}"
        );
    }
    assert!(
        logs.contains("memory limit set by memory_limiter"),
        "limit_mib sizes the memory budget: {logs}"
    );
}

/// `--config` as the Collector reads it: a bare path or `file:`, `env:` (a
/// whole document in a variable), `yaml:` (keys reaching down with `::`),
/// merged in order with every `--set` last.
#[test]
fn config_sources_merge_in_the_collectors_order() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.yaml");
    std::fs::write(
        &base,
        "receivers: {otlp: {protocols: {grpc: {endpoint: \"127.0.0.1:1\"}}}}\nexporters: {debug: {}}\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}\n",
    )
    .unwrap();
    let validate = |args: &[String], env: &[(&str, &str)]| {
        let mut c = profcol();
        c.arg("validate").args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let base_arg = format!("--config=file:{}", base.display());
    // A processor from an environment variable, another key from yaml:.
    let out = validate(
        &[
            base_arg.clone(),
            "--config=env:PROFCOL_EXTRA".into(),
            "--config=yaml:service::pipelines::profiles::processors: [batch]".into(),
        ],
        &[("PROFCOL_EXTRA", "processors:\n  batch:\n    timeout: 1s\n")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // --set comes after every --config, whatever the order on the line.
    let out = validate(
        &[
            base_arg.clone(),
            "--set=processors.batch.timeout=-1s".into(),
            "--config=yaml:processors: {batch: {timeout: 1s}}".into(),
            "--config=yaml:service::pipelines::profiles::processors: [batch]".into(),
        ],
        &[],
    );
    let err = stderr(&out);
    assert!(
        err.contains("processors::batch::timeout: invalid duration \"-1s\""),
        "{err}"
    );
    // A bare path is a file, as in the Collector.
    let out = validate(&["--config".into(), base.display().to_string()], &[]);
    assert!(out.status.success(), "{}", stderr(&out));

    // Usage errors (exit 2), each saying what is wrong.
    for (args, want) in [
        (
            vec![base_arg.clone(), "--set=processors.batch".into()],
            "--set processors.batch: missing equal sign",
        ),
        (
            vec!["--config=ftp:x.yaml".into()],
            "--config=ftp:x.yaml: unsupported scheme \"ftp\" (profcol reads file:, env: and yaml:)",
        ),
        (
            vec!["--config=https://example.com/c.yaml".into()],
            "profcol does not fetch configs over https",
        ),
    ] {
        let out = validate(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // An unset variable is named.
    let out = validate(&["--config=env:PROFCOL_NO_SUCH_VAR".into()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--config=env:PROFCOL_NO_SUCH_VAR: the environment variable PROFCOL_NO_SUCH_VAR is not set"),
        "{}",
        stderr(&out)
    );
}

/// `probabilistic_sampler` and `memory_limiter` as the Collector's docs
/// write them load; what profiles cannot do is refused at its key.
#[test]
fn the_collectors_processors_load_with_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    let write = |processors: &str, list: &str| {
        std::fs::write(
            &path,
            format!("receivers: {{otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:1\"}}}}}}}}\nprocessors:\n{processors}\nexporters: {{debug: {{}}}}\nservice: {{pipelines: {{profiles: {{receivers: [otlp], processors: [{list}], exporters: [debug]}}}}}}\n"),
        )
        .unwrap();
        profcol()
            .arg("validate")
            .arg(format!("--config={}", path.display()))
            .output()
            .unwrap()
    };
    // From the Collector's configuration page and READMEs.
    let out = write(
        "  memory_limiter:\n    check_interval: 1s\n    limit_percentage: 75\n    spike_limit_percentage: 15\n  probabilistic_sampler:\n    hash_seed: 22\n    sampling_percentage: 15\n  batch:\n    send_batch_size: 10000\n    timeout: 10s",
        "memory_limiter, probabilistic_sampler, batch",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = write(
        "  memory_limiter:\n    limit_mib: 100\n    spike_limit_mib: 200\n  probabilistic_sampler:\n    mode: proportional\n    sampling_percentage: 15\n  batch:\n    send_batch_size: 100\n  batch/2: {}\n  batch/3:\n    send_batch_size: 100\n    send_batch_max_size: 10",
        "memory_limiter, probabilistic_sampler, batch, batch/2",
    );
    let err = stderr(&out);
    for want in [
        "processors::memory_limiter::check_interval: 'check_interval' must be greater than zero",
        "processors::memory_limiter::spike_limit_mib: 'spike_limit_mib' must be smaller than 'limit_mib'",
        "processors::probabilistic_sampler::mode: \"proportional\" is not supported for profiles",
        "processors::batch/3::send_batch_max_size: send_batch_max_size must be greater or equal to send_batch_size",
        "service::pipelines::profiles::processors: at most one processor per pipeline may hold batches; \"batch\", \"batch/2\" all do",
    ] {
        assert!(err.contains(want), "{want}\nin\n{err}");
    }
}
