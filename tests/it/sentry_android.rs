//! Android profiles through the running collector: a continuous-profiling
//! `profile_chunk` and a legacy `profile` with its `transaction`, as the
//! Sentry Android SDK sends them, posted to the `sentry` receiver and sent
//! on by the `sentry` exporter. What arrives is Android chunks whose method
//! traces hold the same spans, and every span is counted once.

use crate::common;

use std::time::Duration;

use serde_json::{json, Value as Json};

use common::Ports;
use profcol_exporters::sentry::mock::MockSentry;
use profcol_pipeline::runtime::RuntimeOptions;
use profcol_sentry::android::{synth, trace};

const START_US: i64 = 1_764_000_000_000_000;

fn envelope(items: &[(&str, &Json)]) -> Vec<u8> {
    let mut out = serde_json::to_vec(&json!({
        "sdk": synth::client_sdk(),
        "sent_at": "2025-11-24T16:00:00Z",
    }))
    .unwrap();
    out.push(b'\n');
    for (ty, payload) in items {
        let payload = serde_json::to_vec(payload).unwrap();
        let mut header = json!({"type": ty, "length": payload.len()});
        if *ty == "profile_chunk" {
            header["platform"] = "android".into();
        }
        if *ty != "transaction" {
            header["content_type"] = "application/json".into();
        }
        out.extend_from_slice(&serde_json::to_vec(&header).unwrap());
        out.push(b'\n');
        out.extend_from_slice(&payload);
        out.push(b'\n');
    }
    out
}

/// (thread, start since `START_US`, duration, method ids' names) of a trace.
fn spans(log: &android_trace_log::AndroidTraceLog) -> Vec<(u16, u64, u64, Vec<String>)> {
    let offset = log.start_time.timestamp_micros() - START_US;
    let name = |id: &u32| {
        let m = log.methods.iter().find(|m| m.id == *id).unwrap();
        format!("{}.{}{}", m.class_name, m.name, m.signature)
    };
    let s = trace::spans(log);
    let mut out: Vec<_> = s
        .spans
        .iter()
        .map(|sp| {
            (
                sp.thread,
                offset as u64 * 1000 + sp.start_ns,
                sp.duration_ns,
                s.stacks[sp.stack as usize].iter().map(name).collect(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn android_profiles_reach_sentry_as_android_chunks() {
    let (chunk_log, _) = synth::sampled_trace(21, START_US, 400, 10_000);
    let chunk = synth::chunk_json(
        &chunk_log,
        "07e927e936ba40c58751bf36db09bcd9",
        "128082665abf46afb04c416b7ff50e56",
    );
    let (legacy_log, _) = synth::sampled_trace(22, START_US, 150, 10_000);
    let event_id = "8c3e0bc0518540b3ad1aa70d08f1ca7a";
    let trace_id = "4b45d297ef404fb89e8fdf418c8f38a2";
    let legacy = synth::legacy_json(
        &legacy_log,
        "9bd24eb4fd814a008ddefd035d363570",
        event_id,
        trace_id,
    );
    let tx = synth::transaction_json(event_id, trace_id, "a1b2c3d4e5f60718");

    let mock = MockSentry::start().await;
    let yaml = format!(
        r#"
receivers:
  sentry:
    endpoint: 127.0.0.1:0
exporters:
  sentry:
    dsn: {dsn}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [sentry]
      exporters: [sentry]
"#,
        dsn = mock.dsn()
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::sentry");
    let telemetry = svc.telemetry().clone();
    let client = reqwest::Client::new();
    for body in [
        envelope(&[("profile_chunk", &chunk)]),
        envelope(&[("transaction", &tx), ("profile", &legacy)]),
    ] {
        let resp = client
            .post(format!("http://127.0.0.1:{port}/api/42/envelope/"))
            .header(
                "x-sentry-auth",
                "Sentry sentry_key=public, sentry_version=7, sentry_client=sentry.java.android/8.13.2",
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
    }
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();

    let mut arrived = Vec::new();
    for r in mock.requests() {
        let envelope = r.envelope();
        let mut lines = envelope.split(|&b| b == b'\n').skip(1);
        while let (Some(h), Some(p)) = (lines.next(), lines.next()) {
            if h.is_empty() {
                break;
            }
            let header: Json = serde_json::from_slice(h).unwrap();
            assert_eq!(header["type"], "profile_chunk");
            assert_eq!(header["platform"], "android");
            arrived.push(serde_json::from_slice::<Json>(p).unwrap());
        }
    }
    assert_eq!(arrived.len(), 2, "one chunk per profile");
    let decoded = |c: &Json| trace::decode(c["sampled_profile"].as_str().unwrap()).unwrap();
    let from_chunk = arrived
        .iter()
        .find(|c| c["chunk_id"] == chunk["chunk_id"])
        .expect("the chunk keeps its id");
    assert_eq!(from_chunk["profiler_id"], chunk["profiler_id"]);
    assert_eq!(from_chunk["release"], chunk["release"]);
    assert_eq!(spans(&decoded(from_chunk)), spans(&chunk_log));
    let from_legacy = arrived
        .iter()
        .find(|c| c["chunk_id"] != chunk["chunk_id"])
        .unwrap();
    assert_eq!(spans(&decoded(from_legacy)), spans(&legacy_log));
    let names: Vec<_> = decoded(from_legacy)
        .threads
        .iter()
        .map(|t| t.name.clone())
        .collect();
    for (_, name) in synth::THREADS {
        assert!(names.iter().any(|n| n == name), "thread {name} kept");
    }

    let received = (spans(&chunk_log).len() + spans(&legacy_log).len()) as u64;
    assert_eq!(telemetry.accepted("sentry"), received);
    assert_eq!(telemetry.sent("sentry"), received);
    assert_eq!(telemetry.exporter_dropped_total("sentry"), 0);
}
