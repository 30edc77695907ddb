//! Recorded Sentry SDK requests, replayed over HTTP to the real `sentry`
//! receiver, out of the real `sentry` exporter to an in-process Sentry: the
//! chunk that arrives holds the samples and thread names Relay would have
//! kept of the original, and every sample is counted exactly once.
//!
//! What is expected is read from the recorded envelope with
//! `serde_json::Value` alone, not through profcol's Sentry types.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value as Json;

use common::{fixture, replay_fixture, Ports};
use profcol_exporters::sentry::mock::MockSentry;
use profcol_pipeline::runtime::RuntimeOptions;

/// The recorded chunk plus a thread with a single sample, which Relay
/// drops (the recordings have none): an envelope holding it, and the chunk.
fn with_a_lonely_thread(recording: &str) -> (Vec<u8>, Json) {
    let mut p = recorded_profile(recording);
    let samples = p["profile"]["samples"].as_array_mut().unwrap();
    let mut lonely = samples[0].clone();
    lonely["thread_id"] = "4242".into();
    lonely["timestamp"] = (lonely["timestamp"].as_f64().unwrap() + 0.0005).into();
    samples.push(lonely);
    p["profile"]["thread_metadata"]["4242"] = serde_json::json!({"name": "lonely"});
    let payload = serde_json::to_vec(&p).unwrap();
    let header = serde_json::json!({
        "type": "profile_chunk",
        "platform": p["platform"],
        "length": payload.len(),
    });
    let mut envelope = b"{}\n".to_vec();
    envelope.extend_from_slice(&serde_json::to_vec(&header).unwrap());
    envelope.push(b'\n');
    envelope.extend_from_slice(&payload);
    envelope.push(b'\n');
    (envelope, p)
}

/// Envelope items: (header, payload), read as Relay frames them.
fn items(envelope: &[u8]) -> Vec<(Json, Vec<u8>)> {
    let mut rest = &envelope[envelope.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let header: Json = serde_json::from_slice(&rest[..end]).unwrap();
        rest = rest.get(end + 1..).unwrap_or(&[]);
        let len = match header.get("length").and_then(Json::as_u64) {
            Some(n) => n as usize,
            None => rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len()),
        };
        out.push((header, rest[..len].to_vec()));
        rest = rest.get(len..).unwrap_or(&[]);
        if rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
    }
    out
}

/// The profile a recording holds: a `profile_chunk`, or a v1 `profile`
/// with its samples outside the transaction's window removed (the receiver
/// drops those, as Relay does).
fn recorded_profile(recording: &str) -> Json {
    let envelope = fixture(&format!("{recording}.envelope"));
    let (_, payload) = items(&envelope)
        .into_iter()
        .find(|(h, _)| h["type"] == "profile_chunk" || h["type"] == "profile")
        .unwrap();
    let mut p: Json = serde_json::from_slice(&payload).unwrap();
    fn ns(v: &Json) -> u64 {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .unwrap()
    }
    // The window of a v1 `transactions` list's first; a `transaction`
    // object (Node 7.x) gives none, and every sample is kept.
    if let Some(tx) = p["transactions"][0].as_object() {
        let (start, end) = (ns(&tx["relative_start_ns"]), ns(&tx["relative_end_ns"]));
        p["profile"]["samples"]
            .as_array_mut()
            .unwrap()
            .retain(|s| (start..=end).contains(&ns(&s["elapsed_since_start_ns"])));
    }
    p
}

fn thread_of(sample: &Json) -> String {
    match &sample["thread_id"] {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Samples per thread; with `relay`, without the threads that have at most
/// one non-idle sample (Relay's first rule for v2 chunks).
fn samples_per_thread(profile: &Json, relay: bool) -> BTreeMap<String, usize> {
    let p = &profile["profile"];
    let stacks = p["stacks"].as_array().unwrap();
    let mut all: BTreeMap<String, usize> = BTreeMap::new();
    let mut non_idle: BTreeMap<String, usize> = BTreeMap::new();
    for s in p["samples"].as_array().unwrap() {
        let t = thread_of(s);
        *all.entry(t.clone()).or_default() += 1;
        let stack = s["stack_id"].as_u64().unwrap() as usize;
        if !stacks[stack].as_array().unwrap().is_empty() {
            *non_idle.entry(t).or_default() += 1;
        }
    }
    if relay {
        all.retain(|t, _| non_idle.get(t).is_some_and(|&n| n > 1));
    }
    all
}

/// Thread names from `thread_metadata`, of the threads in `threads`.
fn thread_names(profile: &Json, threads: &BTreeMap<String, usize>) -> BTreeMap<String, String> {
    profile["profile"]["thread_metadata"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(id, _)| threads.contains_key(id.as_str()))
        .filter_map(|(id, t)| Some((id.clone(), t.get("name")?.as_str()?.to_owned())))
        .collect()
}

/// The receiver listens on port 0 ([`Ports`]).
fn collector_yaml(dsn: &str) -> String {
    format!(
        r#"
receivers:
  sentry:
    endpoint: 127.0.0.1:0
exporters:
  sentry:
    dsn: {dsn}
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 20ms
      max_elapsed_time: 5s
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [sentry]
      exporters: [sentry]
"#
    )
}

#[tokio::test]
async fn recorded_requests_reach_sentry_as_relay_would_keep_them() {
    for (recording, platform, lonely) in [
        ("sentry-python/manual/0001", "python", false),
        ("sentry-python/v1/0001", "python", false),
        ("sentry-python/v1-sdk-1.45.1/0001", "python", false),
        ("sentry-node/v1-sdk-7.120.4/0001", "node", false),
        ("sentry-node/v1-sdk-8.55.2/0001", "node", false),
        ("sentry-node/continuous-sdk-8.55.2/0001", "node", false),
        ("sentry-python/manual/0001", "python", true),
    ] {
        let (body, input) = if lonely {
            let (body, input) = with_a_lonely_thread(recording);
            (Some(body), input)
        } else {
            (None, recorded_profile(recording))
        };
        let received = samples_per_thread(&input, false);
        let want = samples_per_thread(&input, true);
        let want_names = thread_names(&input, &want);
        assert!(
            !want_names.is_empty(),
            "{recording}: the fixture names threads"
        );

        let mock = MockSentry::start().await;
        let svc = profcol::app::start_str(&collector_yaml(&mock.dsn()), RuntimeOptions::default())
            .await
            .unwrap();
        let port = svc.port("receivers::sentry");
        let telemetry = svc.telemetry().clone();
        replay_fixture(port, recording, body).await;
        // Shutdown drains the exporter's queue.
        tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
            .await
            .unwrap();

        let reqs = mock.requests();
        assert_eq!(reqs.len(), 1, "{recording}: one chunk, one envelope");
        let r = &reqs[0];
        assert_eq!(r.path, "/api/42/envelope/");
        assert!(r
            .header("x-sentry-auth")
            .unwrap()
            .starts_with("Sentry sentry_key=public, sentry_version=7"));
        let arrived = items(&r.envelope());
        assert_eq!(arrived.len(), 1);
        let (header, payload) = &arrived[0];
        assert_eq!(header["type"], "profile_chunk");
        assert_eq!(header["length"], payload.len());
        assert_eq!(header["platform"], platform);
        let chunk: Json = serde_json::from_slice(payload).unwrap();
        assert_eq!(chunk["platform"], platform);
        assert_eq!(chunk["version"], "2");
        if input["version"] == "2" {
            assert_eq!(chunk["chunk_id"], input["chunk_id"], "{recording}");
            assert_eq!(chunk["profiler_id"], input["profiler_id"], "{recording}");
        }

        // The same samples per thread and thread names as Relay keeps.
        let got = samples_per_thread(&chunk, false);
        assert_eq!(got, want, "{recording}: samples per thread");
        assert_eq!(
            thread_names(&chunk, &got),
            want_names,
            "{recording}: thread names"
        );
        assert_eq!(
            samples_per_thread(&chunk, true),
            got,
            "{recording}: Relay drops nothing more"
        );

        // Every sample counted exactly once: sent, failed or dropped.
        let accepted: usize = received.values().sum();
        let sent: usize = want.values().sum();
        assert_eq!(telemetry.accepted("sentry"), accepted as u64, "{recording}");
        assert_eq!(telemetry.sent("sentry"), sent as u64, "{recording}");
        assert_eq!(telemetry.send_failed("sentry"), 0, "{recording}");
        assert_eq!(
            telemetry.exporter_dropped_total("sentry"),
            (accepted - sent) as u64,
            "{recording}: Relay's drops"
        );
        if lonely {
            assert_eq!(accepted - sent, 1, "the lonely thread's sample");
            assert!(!got.contains_key("4242"));
        }
        assert_eq!(
            telemetry.accepted("sentry"),
            telemetry.sent("sentry")
                + telemetry.send_failed("sentry")
                + telemetry.exporter_dropped_total("sentry"),
            "{recording}"
        );
    }
}
