//! The real pyroscope-go SDK (tests/pyroscope_go, go.mod pins the
//! version; built here with `go build`, modules from the Go module proxy)
//! pushing to the `pyroscope` receiver, through the `file` exporter.
//!
//! Needs `go` on PATH (Debian `golang-go`) and the module proxy or a warm
//! module cache; skipped locally without `go` and failing under CI.

use crate::common;

use std::process::Command;
use std::time::Duration;

use crate::pprof_receiver::by_own_function;
use common::Ports;
use profcol_model::ResolvedProfile;
use profcol_pipeline::runtime::RuntimeOptions;

/// The version tests/pyroscope_go/go.mod requires.
const VERSION: &str = "v1.5.0";

/// CPU and allocation profiles arrive from the SDK under its application
/// name and tags, the hot functions on top, the `TagWrapper` label on the
/// CPU samples, and nothing is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_sdk_pushes_cpu_and_alloc_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = common::go::build("pyroscope_go", dir.path()) else {
        return;
    };
    let go_mod = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pyroscope_go/go.mod"),
    )
    .unwrap();
    assert!(
        go_mod.contains(&format!("github.com/grafana/pyroscope-go {VERSION}")),
        "{go_mod}"
    );
    let out = dir.path().join("out.jsonl");
    let yaml = format!(
        r#"
receivers:
  pyroscope:
    endpoint: 127.0.0.1:0
    record_to: {rec}
exporters:
  file:
    path: {out}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [pyroscope]
      exporters: [file]
"#,
        rec = dir.path().join("rec").display(),
        out = out.display(),
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::pyroscope");
    let metrics = svc.metrics_port();
    let client = tokio::task::spawn_blocking(move || {
        Command::new(bin)
            .args([&format!("http://127.0.0.1:{port}"), "5s"])
            .output()
            .expect("run pyroscope_go")
    })
    .await
    .unwrap();
    let log = String::from_utf8_lossy(&client.stderr).into_owned();
    assert!(client.status.success(), "{log}");
    // The SDK logs an upload it could not make.
    assert!(!log.to_lowercase().contains("fail"), "{log}");
    let refused = common::metric(metrics, "otelcol_receiver_refused_profile_samples").await;
    assert_eq!(refused, 0);
    assert!(
        common::metric(metrics, "otelcol_receiver_accepted_profile_samples").await > 0,
        "nothing accepted"
    );
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();

    let profiles = crate::file_exporter::profiles(&out);
    let ours: Vec<ResolvedProfile> = profiles
        .iter()
        .filter(|p| {
            p.resource
                .contains(&"service.name=profcol.pyroscope-go".to_owned())
        })
        .cloned()
        .collect();
    assert_eq!(ours.len(), profiles.len(), "every profile is the app's");
    for p in &ours {
        for want in [
            "cloud.region=eu",
            "deployment.environment.name=test",
            "telemetry.sdk.language=go",
            "process.runtime.name=go",
        ] {
            assert!(
                p.resource.iter().any(|a| a == want),
                "{want} not in {:?}",
                p.resource
            );
        }
        // Since v1.3 the SDK names itself (and godeltaprof) in labels
        // that become the scope.
        assert!(
            p.scope.starts_with("com.grafana.pyroscope/go"),
            "{}",
            p.scope
        );
        assert!(
            p.resource
                .iter()
                .any(|a| a.starts_with("service.instance.id=")),
            "the session id: {:?}",
            p.resource
        );
    }
    let cpu = by_own_function(&ours, "cpu/nanoseconds");
    assert_eq!(
        cpu.first().map(|f| f.0.as_str()),
        Some("main.burnSHA256"),
        "{cpu:?}"
    );
    let tagged: i64 = ours
        .iter()
        .filter(|p| p.sample_type == "cpu/nanoseconds")
        .flat_map(|p| &p.samples)
        .filter(|(line, _)| line.contains("main.burnSHA256") && line.contains("handler=worker"))
        .map(|(_, v)| v)
        .sum();
    assert!(
        tagged * 10 >= cpu[0].1 * 9,
        "TagWrapper's label on burnSHA256's samples: {tagged} of {}",
        cpu[0].1
    );
    let allocs = by_own_function(&ours, "alloc_space/bytes");
    assert_eq!(
        allocs.first().map(|f| f.0.as_str()),
        Some("main.allocBuffers"),
        "{allocs:?}"
    );
    for t in ["inuse_space/bytes", "goroutine/count"] {
        assert!(ours.iter().any(|p| p.sample_type == t), "no {t} profile");
    }
}
