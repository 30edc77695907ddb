//! `format=jfr` on the `pyroscope` receiver, as the Pyroscope Java agent
//! uploads it: a form with a gzip'd JFR (async-profiler's) and a gzip'd
//! `LabelsSnapshot`, through the collector to an OTLP sink.
//!
//! The live test runs tests/pyroscope_java/AgentApp.java under the real
//! agent (io.pyroscope:agent, fetched by tests/java/fetch.sh);
//! skipped without `java`, `javac` or `mvn`, except under `CI`. The
//! recording tests/fixtures/pyroscope/java-agent-2.9.2/ is one upload of
//! that run (JDK 17.0.15), recorded by the receiver's `record_to`.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Ports, Sink};
use profcol_model::proto::ProfilesData;
use profcol_model::resolved::{folded, ResolvedProfile};
use profcol_pipeline::runtime::RuntimeOptions;

fn config(sink: &Sink, record_to: Option<&Path>) -> String {
    common::receiver_to_sink("pyroscope", sink, record_to)
}

fn received(sink: &Sink) -> Vec<ProfilesData> {
    sink.received()
        .into_iter()
        .map(profcol_model::proto::request_into_data)
        .collect()
}

/// The profiles of `sample_type` (`type/unit`) over every request.
fn of_type<'a>(all: &'a [ResolvedProfile], sample_type: &str) -> Vec<&'a ResolvedProfile> {
    all.iter()
        .filter(|p| p.sample_type == sample_type)
        .collect()
}

/// The leaf frame with the most value over `profiles`, its share of the
/// total and the attributes of its heaviest line.
fn top_leaf(profiles: &[&ResolvedProfile]) -> (String, f64, String) {
    let mut by: std::collections::HashMap<String, i64> = Default::default();
    let mut heaviest = (0, String::new());
    let mut total = 0;
    for p in profiles {
        for (line, v) in &p.samples {
            let (stack, attrs) = line.split_once(" [").unwrap_or((line, ""));
            let leaf = stack.rsplit(';').next().unwrap_or("").to_owned();
            *by.entry(leaf).or_default() += v;
            total += v;
            if *v > heaviest.0 {
                heaviest = (*v, attrs.trim_end_matches(']').to_owned());
            }
        }
    }
    let (leaf, v) = by.into_iter().max_by_key(|(_, v)| *v).unwrap_or_default();
    (leaf, v as f64 / total.max(1) as f64, heaviest.1)
}

async fn wait_for(sink: &Sink, what: &str, done: impl Fn(&[ResolvedProfile]) -> bool) {
    let started = std::time::Instant::now();
    loop {
        let all: Vec<ResolvedProfile> = received(sink).iter().flat_map(folded).collect();
        if done(&all) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what} did not arrive; got {:?}",
            all.iter().map(|p| &p.sample_type).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a Java agent upload must become: CPU with the hot method on top
/// inside the `handler` label, allocations with the allocation site on
/// top, the service named after the application and its static labels.
fn assert_agent_profiles(all: &[ResolvedProfile]) {
    let cpu = of_type(all, "cpu/nanoseconds");
    assert!(!cpu.is_empty(), "no CPU profile");
    // The top leaf (one 1 s upload holds only ~20 samples, a third of
    // them in the loop: the rest is the JIT and class loading).
    let (leaf, _, attrs) = top_leaf(&cpu);
    assert_eq!(leaf, "AgentApp.burnTheCpu", "{:#?}", cpu[0].samples);
    assert!(attrs.contains("handler=checkout"), "{attrs}");
    assert_eq!(cpu[0].period, 10_000_000);
    assert_eq!(cpu[0].period_type, "cpu/nanoseconds");
    let resource = &cpu[0].resource;
    assert!(
        resource.contains(&"service.name=agentapp".to_owned()),
        "{resource:?}"
    );
    assert!(
        resource.contains(&"deployment.environment.name=test".to_owned()),
        "{resource:?}"
    );
    assert_eq!(cpu[0].scope, "com.grafana.pyroscope/java 2.9.2");

    let bytes: Vec<_> = [
        "alloc_in_new_tlab_bytes/bytes",
        "alloc_outside_tlab_bytes/bytes",
    ]
    .iter()
    .flat_map(|t| of_type(all, t))
    .collect();
    assert!(!bytes.is_empty(), "no allocation profile");
    let (leaf, _, attrs) = top_leaf(&bytes);
    assert_eq!(leaf, "AgentApp.allocateBuffers");
    assert!(attrs.contains("handler=checkout"), "{attrs}");
}

/// One recorded upload of the agent, replayed byte for byte.
#[tokio::test]
async fn a_recorded_java_agent_upload_becomes_profiles() {
    let sink = Sink::start().await;
    let svc = profcol::app::start_str(&config(&sink, None), RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::pyroscope");
    crate::pyroscope_e2e::replay(port, "java-agent-2.9.2/0001").await;
    wait_for(&sink, "the replayed upload", |all| {
        !of_type(all, "cpu/nanoseconds").is_empty()
    })
    .await;
    svc.shutdown().await;
    let all: Vec<ResolvedProfile> = received(&sink).iter().flat_map(folded).collect();
    assert_agent_profiles(&all);
}

/// A body that is not JFR, a form without its `jfr` part and a truncated
/// JFR are refused with 400 and Pyroscope's error body; nothing is sent on.
#[tokio::test]
async fn broken_jfr_uploads_are_refused() {
    let sink = Sink::start().await;
    let svc = profcol::app::start_str(&config(&sink, None), RuntimeOptions::default())
        .await
        .unwrap();
    let url = format!(
        "http://127.0.0.1:{}/ingest?name=app&format=jfr",
        svc.port("receivers::pyroscope")
    );
    let jfr = profcol_model::testing::fixture("pyroscope/jfr/jdk-17.0.15-hotloop.jfr");
    let form = |name: &str, body: &[u8]| {
        let mut b = format!(
            "--b\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"x\"\r\n\r\n"
        )
        .into_bytes();
        b.extend_from_slice(body);
        b.extend_from_slice(b"\r\n--b--\r\n");
        b
    };
    let client = reqwest::Client::new();
    for (body, form_ct, want) in [
        (b"not a recording".to_vec(), false, "no FLR magic"),
        (form("profile", &jfr), true, "no jfr part"),
        (jfr[..jfr.len() / 2].to_vec(), false, "jfr: chunk 0"),
    ] {
        let mut req = client.post(&url).body(body);
        if form_ct {
            req = req.header("content-type", "multipart/form-data; boundary=b");
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 400);
        let json: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert!(json["message"].as_str().unwrap().contains(want), "{json}");
    }
    // The JDK recording itself, raw: accepted.
    let resp = client.post(&url).body(jfr).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    wait_for(&sink, "the raw JFR", |all| {
        !of_type(all, "cpu/nanoseconds").is_empty()
    })
    .await;
    svc.shutdown().await;
    assert_eq!(received(&sink).len(), 1);
}

/// The agent jar, or `None` (skipped) without `java`/`javac`/`mvn`
/// locally; under `CI` a missing tool fails.
fn agent_jar() -> Option<PathBuf> {
    let dir = common::java::jars("pyroscope_java", "pyroscope-java", "Pyroscope Java agent")?;
    let jar = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("agent-"))
        });
    Some(jar.unwrap_or_else(|| panic!("no agent jar in {}", dir.display())))
}

/// The real agent attached to a real program, pushing every second: CPU
/// and allocation profiles arrive with the hot method and the allocation
/// site on top, inside their dynamic label, under the static labels.
#[tokio::test(flavor = "multi_thread")]
async fn the_pyroscope_java_agent_live() {
    let Some(jar) = agent_jar() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    common::java::compile(
        "pyroscope_java/AgentApp.java",
        &jar.to_string_lossy(),
        dir.path(),
    );

    let sink = Sink::start().await;
    let record = std::env::var_os("PROFCOL_RECORD_JAVA_AGENT").map(PathBuf::from);
    let svc = profcol::app::start_str(&config(&sink, record.as_deref()), RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::pyroscope");
    let mut java = tokio::process::Command::new("java")
        .arg(format!("-javaagent:{}", jar.display()))
        // The agent unpacks async-profiler under `dir`, removed with it.
        .arg(format!("-Djava.io.tmpdir={}", dir.path().display()))
        .arg("-cp")
        .arg(dir.path())
        .arg("AgentApp")
        .arg("8000")
        .env(
            "PYROSCOPE_SERVER_ADDRESS",
            format!("http://127.0.0.1:{port}"),
        )
        .env("PYROSCOPE_APPLICATION_NAME", "agentapp")
        .env("PYROSCOPE_UPLOAD_INTERVAL", "1s")
        .env("PYROSCOPE_PROFILER_ALLOC", "256k")
        .env("PYROSCOPE_LABELS", "env=test")
        .env("PYROSCOPE_LOG_LEVEL", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for(&sink, "the agent's CPU and allocation profiles", |all| {
        let cpu = of_type(all, "cpu/nanoseconds");
        let alloc = all.iter().any(|p| p.sample_type.starts_with("alloc_"));
        alloc && cpu.iter().map(|p| p.samples.len()).sum::<usize>() > 0 && {
            let (leaf, share, _) = top_leaf(&cpu);
            leaf == "AgentApp.burnTheCpu" && share > 0.5
        }
    })
    .await;
    java.kill().await.ok();
    let out = java.wait_with_output().await.unwrap();
    svc.shutdown().await;
    let all: Vec<ResolvedProfile> = received(&sink).iter().flat_map(folded).collect();
    assert_agent_profiles(&all);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("[ERROR]"), "{log}");
}
