//! async-profiler's agent sending OTLP/HTTP itself (4.6 and later:
//! `otlp,file=http://HOST:PORT`, one POST per `loop`), into the `otlp`
//! receiver with `on_invalid: refuse`: every request is valid as sent
//! (its zero link is 16 and 8 zero bytes), and holds the Java stacks.
//!
//! Runs tests/async_profiler/Otlp.java under the agent of the jar
//! tests/java/fetch.sh fetches; skipped without `java`, `javac` or `mvn`,
//! except under `CI`. The agent loads libcurl to send.

use crate::common;

use std::time::Duration;

use common::{Ports, Sink};
use profcol_model::resolved::{folded, ResolvedProfile};
use profcol_pipeline::runtime::RuntimeOptions;

fn config(sink: &Sink) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols: {{http: {{endpoint: "127.0.0.1:0"}}}}
    on_invalid: refuse
exporters:
  otlp:
    endpoint: 127.0.0.1:{}
    tls: {{insecure: true}}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp]}}
"#,
        sink.addr.port()
    )
}

/// The agent's native library for this machine, taken out of the jar.
fn agent(jars: &std::path::Path, into: &std::path::Path) -> std::path::PathBuf {
    let jar = std::fs::read_dir(jars)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("async-profiler-"))
        .expect("the async-profiler jar");
    let lib = "linux-x64/libasyncProfiler.so";
    let out = std::process::Command::new("jar")
        .current_dir(into)
        .arg("xf")
        .arg(&jar)
        .arg(lib)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    into.join(lib)
}

#[tokio::test(flavor = "multi_thread")]
async fn async_profiler_agent_sends_otlp_http_live() {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return;
    }
    let Some(jars) = common::java::jars("async_profiler", "async-profiler", "async-profiler")
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let lib = agent(&jars, work.path());
    let classpath = format!("{}/*", jars.display());
    common::java::compile("async_profiler/Otlp.java", &classpath, work.path());

    let sink = Sink::start().await;
    let svc = profcol::app::start_str(&config(&sink), RuntimeOptions::default())
        .await
        .unwrap();
    let log = common::java::run(&[
        format!(
            "-agentpath:{}=start,event=itimer,interval=10ms,loop=1s,otlp,file=http://127.0.0.1:{}",
            lib.display(),
            svc.http_port()
        ),
        "-cp".into(),
        format!("{}:{classpath}", work.path().display()),
        "Otlp".into(),
        "agent".into(),
        "3".into(),
    ])
    .await;
    // A refused request is logged by the agent ("Failed to send profile
    // to ...: HTTP 400 ..."), as is a missing libcurl.
    assert!(!log.contains("Failed"), "{log}");
    common::until(
        Duration::from_secs(20),
        &format!("two requests; the agent said:\n{log}"),
        || sink.received().len() >= 2,
    )
    .await;
    svc.shutdown().await;

    let profiles: Vec<ResolvedProfile> = sink
        .received()
        .into_iter()
        .map(profcol_model::proto::request_into_data)
        .flat_map(|d| folded(&d))
        .collect();
    assert!(
        profiles
            .iter()
            .all(|p| p.sample_type == "itimer/count" && p.period == 10_000_000),
        "{profiles:#?}"
    );
    // Otlp.burn under the workers' threads, and no sample linked to a
    // trace (the zero link is no link).
    let lines: Vec<&String> = profiles.iter().flat_map(|p| p.samples.keys()).collect();
    assert!(lines.iter().any(|l| l.contains(";Otlp.burn")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("trace_id=")), "{lines:#?}");
}
