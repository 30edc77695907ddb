//! Recorded SDK envelopes -> OTLP (as the `sentry` receiver converts them)
//! -> this exporter -> a mock Sentry: what arrives is what Relay would have
//! kept of the original, framed as Sentry expects.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value as Json;

use profcol_model::Origin;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{Exporter, Request};
use profcol_sentry::{chunk_to_otlp, parse_envelope, profile_v1_to_otlp, Reason, ReceiveOptions};

use super::sentry_view::{assert_same_samples, samples, thread_names};
use super::{ctx, exporter, fixture};
use crate::sentry::client::{CLIENT_NAME, ENVELOPE_CONTENT_TYPE};
use crate::sentry::mock::MockSentry;

/// A recorded `profile_chunk` payload and its item header platform.
fn recorded(rel: &str) -> (Vec<u8>, Option<String>) {
    let bytes = fixture(rel);
    let env = parse_envelope(&bytes).unwrap();
    let item = env
        .items
        .iter()
        .find(|i| i.item_type() == "profile_chunk")
        .unwrap();
    (item.payload.to_vec(), item.platform().map(str::to_owned))
}

/// The recorded Python chunk plus a thread with a single sample, which
/// Relay drops (the recordings have none).
fn python_with_a_lonely_thread() -> (Vec<u8>, Option<String>) {
    let (payload, platform) = recorded("sentry-python/manual/0001.envelope");
    let mut c: Json = serde_json::from_slice(&payload).unwrap();
    let p = &mut c["profile"];
    let first = p["samples"][0].clone();
    let mut lonely = first.clone();
    lonely["thread_id"] = "4242".into();
    lonely["timestamp"] = (first["timestamp"].as_f64().unwrap() + 0.0005).into();
    p["samples"].as_array_mut().unwrap().push(lonely);
    p["thread_metadata"]["4242"] = serde_json::json!({"name": "lonely"});
    (serde_json::to_vec(&c).unwrap(), platform)
}

/// The batch the `sentry` receiver makes of a chunk, and the chunk JSON.
fn received((payload, platform): (Vec<u8>, Option<String>)) -> (ProfileBatch, Json) {
    let opts = ReceiveOptions {
        project_id: Some("7".into()),
        ..ReceiveOptions::default()
    };
    let conv = chunk_to_otlp(&payload, platform.as_deref(), &opts).unwrap();
    let mut batch = ProfileBatch::new(conv.data);
    batch.meta.origin = Origin::Sentry {
        project_id: "7".into(),
        envelope_header: serde_json::json!({}),
    };
    (batch, serde_json::from_slice(&payload).unwrap())
}

/// The batch the `sentry` receiver makes of the recorded v1 `profile` and
/// its `transaction`, and the profile as a chunk would hold it (absolute
/// timestamps, the same tables).
fn received_v1() -> (ProfileBatch, Json) {
    let bytes = fixture("sentry-python/v1/0001.envelope");
    let env = parse_envelope(&bytes).unwrap();
    let item = |ty: &str| env.items.iter().find(|i| i.item_type() == ty).unwrap();
    let (profile, tx) = (item("profile"), item("transaction"));
    let conv = profile_v1_to_otlp(
        profile.payload,
        profile.platform(),
        Some(tx.payload),
        &env.header,
        &ReceiveOptions::default(),
    )
    .unwrap();
    let mut view: Json = serde_json::from_slice(profile.payload).unwrap();
    let start = humantime::parse_rfc3339(view["timestamp"].as_str().unwrap())
        .unwrap()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for s in view["profile"]["samples"].as_array_mut().unwrap() {
        let elapsed: u64 = s["elapsed_since_start_ns"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        s["timestamp"] = ((start + elapsed) as f64 / 1e9).into();
    }
    (ProfileBatch::new(conv.data), view)
}

#[tokio::test]
async fn recorded_chunks_arrive_as_relay_would_keep_them() {
    for (rel, platform, (batch, input), relay_drops) in [
        (
            "python",
            "python",
            received(recorded("sentry-python/manual/0001.envelope")),
            0,
        ),
        (
            "node",
            "node",
            received(recorded("sentry-node/manual/0001.envelope")),
            0,
        ),
        (
            "python + lonely thread",
            "python",
            received(python_with_a_lonely_thread()),
            1,
        ),
        ("python v1 profile", "python", received_v1(), 0),
    ] {
        let v1 = input["version"] == "1";
        let total = batch.sample_count();
        let mock = MockSentry::start().await;
        let e = exporter(&mock.dsn(), "");
        let ctx = ctx();
        let before = SystemTime::now() - Duration::from_secs(1);
        let outcome = e
            .export(&Request::new(Arc::new(batch)), &ctx)
            .await
            .unwrap();
        assert_eq!(outcome.rejected, 0, "{rel}");

        let reqs = mock.requests();
        assert_eq!(reqs.len(), 1, "{rel}: one chunk, one envelope");
        let r = &reqs[0];
        // The request, as Relay's envelope endpoint expects it.
        assert_eq!(r.path, "/api/42/envelope/");
        assert_eq!(
            r.header("x-sentry-auth").unwrap(),
            format!("Sentry sentry_key=public, sentry_version=7, sentry_client={CLIENT_NAME}")
        );
        assert!(CLIENT_NAME.starts_with("profcol/"));
        assert_eq!(r.header("content-type"), Some(ENVELOPE_CONTENT_TYPE));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.header("user-agent"), Some(CLIENT_NAME));

        // The envelope framing.
        let bytes = r.envelope();
        assert!(
            bytes.ends_with(b"}\n") && !bytes.ends_with(b"\n\n"),
            "{rel}: one trailing newline"
        );
        let env = parse_envelope(&bytes).unwrap();
        assert_eq!(env.header["dsn"], mock.dsn());
        let sent_at = humantime::parse_rfc3339(env.header["sent_at"].as_str().unwrap()).unwrap();
        assert!(
            sent_at >= before && sent_at <= SystemTime::now(),
            "{rel}: sent_at is the sending time"
        );
        assert_eq!(env.items.len(), 1);
        let item = &env.items[0];
        assert_eq!(item.item_type(), "profile_chunk");
        assert_eq!(
            item.header.length,
            Some(item.payload.len() as u64),
            "{rel}: item length"
        );
        let out: Json = serde_json::from_slice(item.payload).unwrap();
        assert_eq!(item.platform(), Some(platform));
        assert_eq!(
            out["platform"], platform,
            "{rel}: item header platform equals the payload's"
        );

        // The same samples, stacks and thread names as Relay keeps of the input.
        let want = samples(&input, true);
        let got = samples(&out, false);
        assert_same_samples(&got, &want, rel);
        let mut names = thread_names(&input);
        names.retain(|id, _| want.iter().any(|s| &s.1 == id));
        assert_eq!(thread_names(&out), names, "{rel}");
        let keys: &[&str] = if v1 {
            // A v1 profile has no chunk or profiler id; its SDK is the
            // transaction's.
            &["release", "environment"]
        } else {
            &[
                "chunk_id",
                "profiler_id",
                "release",
                "environment",
                "client_sdk",
            ]
        };
        for &key in keys {
            assert_eq!(out[key], input[key], "{rel}: {key}");
        }
        assert_eq!(out["version"], "2");

        // What Relay would have dropped is returned as dropped, by reason,
        // for the runtime to count: the exporter counts nothing itself, or
        // the runtime would count those samples a second time.
        let dropped = outcome.dropped_total();
        assert_eq!(dropped, relay_drops, "{rel}: Relay's drops");
        assert_eq!(dropped + want.len() as u64, total, "{rel}: accounting");
        assert_eq!(ctx.telemetry.exporter_dropped_total("sentry"), 0, "{rel}");
        if relay_drops > 0 {
            assert_eq!(outcome.dropped, [(Reason::SingleSampleThread.as_str(), 1)]);
            assert!(!thread_names(&out).contains_key("4242"));
        }
        assert_eq!(e.stats().envelopes_delivered, 1);
    }
}

#[tokio::test]
async fn overrides_and_uncompressed_bodies() {
    let (batch, input) = received(recorded("sentry-python/manual/0001.envelope"));
    let mock = MockSentry::start().await;
    let e = exporter(
        &mock.dsn(),
        "compression: none\nenvironment: staging\nrelease: shop@2.0.0\nplatform: go",
    );
    e.export(&Request::new(Arc::new(batch)), &ctx())
        .await
        .unwrap();
    let r = &mock.requests()[0];
    assert_eq!(r.header("content-encoding"), None);
    let chunk = r.chunk();
    assert_eq!(chunk["environment"], "staging");
    assert_eq!(chunk["release"], "shop@2.0.0");
    assert_ne!(input["release"], "shop@2.0.0");
    // The data says python: the configured platform is only a fallback.
    assert_eq!(chunk["platform"], "python");
    let env = parse_envelope(&r.body).unwrap();
    assert_eq!(
        env.items[0].header.length,
        Some(env.items[0].payload.len() as u64),
        "length after the override"
    );
}
