//! sentry-java's JVM continuous profiling (`sentry-async-profiler`,
//! async-profiler in wall-clock mode) into the `sentry` receiver: a
//! `profile_chunk` of sample format v2 with `platform: java`, through the
//! collector to an OTLP sink.
//!
//! The live test runs tests/sentry_java/App.java with the SDK's jars
//! (fetched by tests/java/fetch.sh); skipped without `java`, `javac` or
//! `mvn`, except under `CI`. The recording tests/fixtures/sentry-java/
//! jvm-8.43.0-jdk-17.0.15/ is one envelope of that run, recorded by the
//! receiver's `record_to`, and is replayed without Java.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{replay_fixture, Ports, Sink};
use profcol_model::resolved::{folded, ResolvedProfile};
use profcol_pipeline::runtime::RuntimeOptions;

/// The SDK version tests/sentry_java/pom.xml pins.
const SDK_VERSION: &str = "8.43.0";
const RECORDING: &str = "sentry-java/jvm-8.43.0-jdk-17.0.15/0001";

fn config(sink: &Sink, record_to: Option<&Path>) -> String {
    common::receiver_to_sink("sentry", sink, record_to)
}

fn profiles(sink: &Sink) -> Vec<ResolvedProfile> {
    sink.received()
        .into_iter()
        .map(profcol_model::proto::request_into_data)
        .flat_map(|d| folded(&d))
        .collect()
}

/// The profiles `sink` got, once some did; `log` is what the program
/// said, for the failure message.
async fn wait_for_profile(sink: &Sink, log: &str) -> Vec<ResolvedProfile> {
    let started = std::time::Instant::now();
    loop {
        let all = profiles(sink);
        if !all.is_empty() {
            return all;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no profile arrived; the program said:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leaf with the most samples on thread `thread` and its share of
/// that thread's samples.
fn top_leaf_of_thread(p: &ResolvedProfile, thread: &str) -> (String, f64) {
    let mut by: std::collections::HashMap<&str, i64> = Default::default();
    let mut total = 0;
    for (line, v) in &p.samples {
        let (stack, attrs) = line.split_once(" [").unwrap_or((line, ""));
        if !attrs
            .trim_end_matches(']')
            .split(", ")
            .any(|a| a == format!("thread.name={thread}"))
        {
            continue;
        }
        *by.entry(stack.rsplit(';').next().unwrap_or(""))
            .or_default() += v;
        total += v;
    }
    let (leaf, v) = by.into_iter().max_by_key(|(_, v)| *v).unwrap_or_default();
    (leaf.to_owned(), v as f64 / total.max(1) as f64)
}

/// What one chunk of the SDK must become: a wall-clock profile of
/// `platform: java`, version 2, with the `burner` thread in `burnTheCpu`
/// (async-profiler samples every thread, so the hot method is the top leaf
/// of its thread, not of the whole profile) and the SDK as the resource.
fn assert_sdk_profile(all: &[ResolvedProfile]) {
    assert_eq!(all.len(), 1, "one chunk, one profile");
    let p = &all[0];
    let attr = |k: &str| {
        p.attributes
            .iter()
            .find_map(|a| a.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {:?}", p.attributes))
    };
    assert_eq!(attr("sentry.platform"), "java");
    assert_eq!(attr("sentry.version"), "2");
    assert_eq!(attr("sentry.environment"), "test");
    let threads = attr("sentry.thread_metadata");
    assert!(threads.contains("{name=burner, "), "{threads}");
    assert_eq!(p.sample_type, "samples/count");
    assert_eq!(p.period_type, "wall/nanoseconds");
    // async-profiler's wall clock at the SDK's 101 Hz: 9900 us apart, or
    // more on a loaded machine; never the few microseconds between the
    // samples of thread "0" (every thread without a Java frame).
    assert!((9_000_000..100_000_000).contains(&p.period), "{}", p.period);
    for want in [
        "service.name=sentryjavaapp".to_owned(),
        "service.version=sentryjavaapp@1.0".to_owned(),
        "deployment.environment.name=test".to_owned(),
        "telemetry.sdk.name=sentry.java".to_owned(),
        format!("telemetry.sdk.version={SDK_VERSION}"),
        "telemetry.sdk.language=java".to_owned(),
    ] {
        assert!(p.resource.contains(&want), "{want}: {:?}", p.resource);
    }
    let (leaf, share) = top_leaf_of_thread(p, "burner");
    assert_eq!(leaf, "App.burnTheCpu", "{:#?}", p.samples);
    assert!(share > 0.8, "burnTheCpu is {share} of the burner's samples");
}

/// One recorded envelope of the SDK, replayed over HTTP without Java.
#[tokio::test]
async fn a_recorded_sentry_java_chunk_becomes_a_profile() {
    let sink = Sink::start().await;
    let svc = profcol::app::start_str(&config(&sink, None), RuntimeOptions::default())
        .await
        .unwrap();
    replay_fixture(svc.port("receivers::sentry"), RECORDING, None).await;
    let all = wait_for_profile(&sink, "(a recording, replayed)").await;
    svc.shutdown().await;
    assert_sdk_profile(&all);
    // Every real thread of the recording is sampled 9900 us apart (median).
    assert_eq!(all[0].period, 9_900_000);
}

/// The real SDK and its profiler around a real program: one chunk arrives,
/// converted as the recording is.
#[tokio::test(flavor = "multi_thread")]
async fn sentry_java_continuous_profiling_live() {
    let Some(jars) = common::java::jars("sentry_java", "sentry-java", "Sentry Java SDK") else {
        return;
    };
    let classes = tempfile::tempdir().unwrap();
    let classpath = format!("{}/*", jars.display());
    common::java::compile("sentry_java/App.java", &classpath, classes.path());

    let sink = Sink::start().await;
    let record = std::env::var_os("PROFCOL_RECORD_SENTRY_JAVA").map(PathBuf::from);
    let svc = profcol::app::start_str(&config(&sink, record.as_deref()), RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::sentry");
    // The SDK's profiling dir goes here, removed with it; the SDK turns
    // profiling off for a path with a '.' (`tempdir()`'s `.tmp` prefix).
    let tmp = tempfile::Builder::new()
        .prefix("profcol-sentry-java-")
        .tempdir()
        .unwrap();
    let log = common::java::run(&[
        format!("-Djava.io.tmpdir={}", tmp.path().display()),
        "-cp".into(),
        format!("{}:{classpath}", classes.path().display()),
        "App".into(),
        format!("http://publickey@127.0.0.1:{port}/1"),
        "2000".into(),
    ])
    .await;
    let all = wait_for_profile(&sink, &log).await;
    svc.shutdown().await;
    assert!(!log.contains("ERROR"), "{log}");
    assert_sdk_profile(&all);
}
