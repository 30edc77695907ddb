//! OTLP in, Sentry out: expansion and splitting of aggregated profiles, and
//! what each Sentry answer does to a batch.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ExportError, ExportOutcome, Exporter, Request};
use profcol_sentry::Reason;

use super::{ctx, exporter, go_cpu};
use crate::sentry::mock::MockSentry;
use crate::sentry::rate_limits::{PROFILE_CHUNK, PROFILE_CHUNK_UI};

fn batch(data: ProfilesData) -> Arc<ProfileBatch> {
    Arc::new(ProfileBatch::new(data))
}

/// The first Profile of go-cpu stretched over `secs` seconds.
fn long_profile(secs: u64) -> ProfilesData {
    let mut data = go_cpu();
    let profiles = &mut data.resource_profiles[0].scope_profiles[0].profiles;
    profiles.truncate(1);
    profiles[0].duration_nano = secs * 1_000_000_000;
    data
}

fn duration_secs(chunk: &serde_json::Value) -> f64 {
    let ts: Vec<f64> = chunk["profile"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["timestamp"].as_f64().unwrap())
        .collect();
    ts.iter().cloned().fold(f64::MIN, f64::max) - ts.iter().cloned().fold(f64::MAX, f64::min)
}

#[tokio::test]
async fn pprof_cpu_profile_is_expanded_into_timestamped_samples() {
    let data = go_cpu();
    let profiles = &data.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 2, "samples/count and cpu/nanoseconds");
    assert!(profiles
        .iter()
        .flat_map(|p| &p.samples)
        .all(|s| s.timestamps_unix_nano.is_empty() && s.values.len() == 1));
    let otlp_samples: usize = profiles.iter().map(|p| p.samples.len()).sum();
    let duplicate = profiles[1].samples.len() as u64;

    let mock = MockSentry::start().await;
    let e = exporter(&mock.dsn(), "platform: go");
    let ctx = ctx();
    let b = batch(data);
    let outcome = e.export(&Request::new(b.clone()), &ctx).await.unwrap();
    let reqs = mock.requests();
    assert_eq!(
        reqs.len(),
        1,
        "the two Profiles hold the same samples: sent once"
    );
    for r in &reqs {
        let bytes = r.envelope();
        let env = profcol_sentry::parse_envelope(&bytes).unwrap();
        // Nothing in a pprof profile names the runtime: the configured platform.
        assert_eq!(env.items[0].platform(), Some("go"));
        let chunk = r.chunk();
        assert_eq!(chunk["platform"], "go");
        // 5.9 s of CPU at a 10 ms period: 590 points, distinct timestamps.
        let samples = chunk["profile"]["samples"].as_array().unwrap();
        assert_eq!(samples.len(), 590);
        let ts: BTreeSet<u64> = samples
            .iter()
            .map(|s| (s["timestamp"].as_f64().unwrap() * 1e9) as u64)
            .collect();
        assert_eq!(ts.len(), 590);
    }
    // The cpu/nanoseconds Profile is returned as dropped, with the reason,
    // for the runtime to count; nothing is counted twice.
    assert_eq!(b.sample_count(), otlp_samples as u64);
    assert_eq!(
        outcome,
        ExportOutcome {
            rejected: 0,
            dropped: vec![(Reason::DuplicateSampleType.as_str(), duplicate)],
        }
    );
    assert_eq!(ctx.telemetry.exporter_dropped_total("sentry"), 0);

    // Without `platform`, the neutral one.
    let mock = MockSentry::start().await;
    exporter(&mock.dsn(), "")
        .export(&Request::new(batch(go_cpu())), &ctx)
        .await
        .unwrap();
    assert_eq!(mock.requests()[0].chunk()["platform"], "native");
}

#[tokio::test]
async fn long_profiles_are_split_into_windows_of_max_chunk_duration() {
    for (yaml, chunks) in [("max_chunk_duration: 66s", 2), ("", 3)] {
        let mock = MockSentry::start().await;
        let e = exporter(&mock.dsn(), yaml);
        e.export(&Request::new(batch(long_profile(130))), &ctx())
            .await
            .unwrap();
        let reqs = mock.requests();
        assert_eq!(reqs.len(), chunks, "130 s with {yaml:?}");
        let limit = if yaml.is_empty() { 60.0 } else { 66.0 };
        let mut total = 0;
        let mut ids = BTreeSet::new();
        for r in &reqs {
            let c = r.chunk();
            assert!(duration_secs(&c) <= limit, "{}", duration_secs(&c));
            total += c["profile"]["samples"].as_array().unwrap().len();
            ids.insert(r.chunk_id());
        }
        assert_eq!(total, 590, "every point sent once");
        assert_eq!(ids.len(), chunks, "distinct chunk ids");
    }
}

#[tokio::test]
async fn expansion_beyond_max_samples_per_chunk_is_counted_as_dropped() {
    let mock = MockSentry::start().await;
    let e = exporter(&mock.dsn(), "max_samples_per_chunk: 100");
    let ctx = ctx();
    let b = batch(go_cpu());
    let outcome = e.export(&Request::new(b.clone()), &ctx).await.unwrap();
    assert_eq!(outcome.rejected, 0);
    for r in mock.requests() {
        assert!(r.chunk()["profile"]["samples"].as_array().unwrap().len() <= 100);
    }
    let dropped = outcome.dropped_total();
    assert!(dropped > 0 && dropped < b.sample_count(), "{dropped}");
    assert!(outcome
        .dropped
        .iter()
        .any(|(r, n)| *r == Reason::MaxSamplesPerChunk.as_str() && *n > 0));
}

#[tokio::test]
async fn rate_limited_profile_chunks_wait_without_sending() {
    let mock = MockSentry::start().await;
    mock.then(
        429,
        &[(
            "x-sentry-rate-limits",
            "60:profile_chunk:organization:quota_exceeded",
        )],
    );
    let e = exporter(&mock.dsn(), "");
    match e.export(&Request::new(batch(go_cpu())), &ctx()).await {
        Err(ExportError::Retryable {
            retry_after: Some(d),
            ..
        }) => {
            assert!(
                d > Duration::from_secs(59) && d <= Duration::from_secs(60),
                "{d:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().len(), 1);
    assert!(e.rate_limited_for(PROFILE_CHUNK).is_some());
    assert!(
        e.rate_limited_for(PROFILE_CHUNK_UI).is_none(),
        "only the named category"
    );
    // While limited, another batch is not sent at all.
    match e.export(&Request::new(batch(go_cpu())), &ctx()).await {
        Err(ExportError::Retryable {
            retry_after: Some(d),
            ..
        }) => assert!(d <= Duration::from_secs(60)),
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().len(), 1, "no request while rate limited");

    // A bare 429: Retry-After for every category.
    let mock = MockSentry::start().await;
    mock.then(429, &[("retry-after", "7")]);
    let e = exporter(&mock.dsn(), "");
    match e.export(&Request::new(batch(go_cpu())), &ctx()).await {
        Err(ExportError::Retryable {
            retry_after: Some(d),
            ..
        }) => assert_eq!(d.as_secs_f64().round(), 7.0),
        other => panic!("{other:?}"),
    }
    assert!(e.rate_limited_for(PROFILE_CHUNK_UI).is_some());
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    // 400 for a one-chunk batch: the batch failed for good.
    let mock = MockSentry::start().await;
    mock.then(400, &[]);
    let e = exporter(&mock.dsn(), "");
    match e
        .export(&Request::new(batch(long_profile(30))), &ctx())
        .await
    {
        Err(ExportError::Permanent { message }) => assert!(
            message.contains("HTTP 400") && message.contains("scripted 400"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.stats().envelopes_refused, 1);

    // 413 refuses one chunk; the others still go, and only its samples fail.
    let mock = MockSentry::start().await;
    mock.then(413, &[]);
    let e = exporter(&mock.dsn(), "");
    let rejected = e
        .export(&Request::new(batch(long_profile(130))), &ctx())
        .await
        .unwrap()
        .rejected;
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    let first_chunk_samples = reqs[0].chunk()["profile"]["samples"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        rejected > 0 && rejected < 472,
        "{rejected} of 472 OTLP samples, first chunk has {first_chunk_samples} points"
    );
    assert_eq!(
        (e.stats().envelopes_delivered, e.stats().envelopes_refused),
        (2, 1)
    );

    // 401 after a delivered chunk: the rest of the batch fails with it.
    let mock = MockSentry::start().await;
    mock.then(200, &[]).then(401, &[]);
    let e = exporter(&mock.dsn(), "");
    let rejected = e
        .export(&Request::new(batch(long_profile(130))), &ctx())
        .await
        .unwrap()
        .rejected;
    assert_eq!(mock.requests().len(), 2, "nothing sent after a 401");
    assert!(rejected > 0 && rejected < 472);
}

#[tokio::test]
async fn a_retry_resends_only_the_chunks_not_yet_delivered() {
    let mock = MockSentry::start().await;
    mock.then(200, &[]).then(500, &[]);
    let e = exporter(&mock.dsn(), "");
    let req = Request::new(batch(long_profile(130)));
    match e.export(&req, &ctx()).await {
        Err(ExportError::Retryable {
            retry_after: None,
            message,
        }) => assert!(message.contains("HTTP 500"), "{message}"),
        other => panic!("{other:?}"),
    }
    // The first chunk's samples are recorded as delivered, in the request
    // (a persistent queue keeps this across a restart).
    let first = req.progress();
    assert!(first.delivered > 0 && first.resume.is_some(), "{first:?}");
    // The runtime retries the same request.
    assert_eq!(
        e.export(&req, &ctx()).await.unwrap(),
        ExportOutcome::delivered()
    );
    let keys: Vec<(String, usize)> = mock.requests().iter().map(|r| r.chunk_key()).collect();
    assert_eq!(keys.len(), 4, "1 delivered + 1 failed + the 2 left");
    assert_eq!(keys[1], keys[2], "the failed chunk is sent again");
    assert_eq!(
        keys.iter().collect::<BTreeSet<_>>().len(),
        3,
        "each chunk delivered once"
    );
    assert_eq!(
        keys.iter().skip(1).map(|k| k.1).sum::<usize>(),
        590,
        "all points delivered"
    );
    assert_eq!(req.progress().rejected, 0);

    // A request resumed from what a queue stored (here: a copy of the
    // first attempt's progress) resends only what was not delivered.
    let mock = MockSentry::start().await;
    let e = exporter(&mock.dsn(), "");
    let resumed = Request::resumed(batch(long_profile(130)), first);
    e.export(&resumed, &ctx()).await.unwrap();
    assert_eq!(mock.requests().len(), 2, "the 2 chunks not delivered");
    assert_eq!(
        mock.requests()
            .iter()
            .map(|r| r.chunk_key().1)
            .sum::<usize>(),
        keys.iter().skip(2).map(|k| k.1).sum::<usize>(),
    );

    // Another batch with the same data is a new batch: sent in full.
    e.export(&Request::new(batch(long_profile(130))), &ctx())
        .await
        .unwrap();
    assert_eq!(mock.requests().len(), 5);
}

#[tokio::test]
async fn drops_are_reported_once_however_many_attempts() {
    let mock = MockSentry::start().await;
    mock.then(503, &[]).then(502, &[]);
    let e = exporter(&mock.dsn(), "max_samples_per_chunk: 100");
    let ctx = ctx();
    let req = Request::new(batch(go_cpu()));
    for _ in 0..2 {
        assert!(matches!(
            e.export(&req, &ctx).await,
            Err(ExportError::Retryable { .. })
        ));
    }
    // A failed attempt counts nothing: the runtime counts the whole batch
    // if it gives up.
    assert_eq!(ctx.telemetry.exporter_dropped_total("sentry"), 0);
    let outcome = e.export(&req, &ctx).await.unwrap();
    assert!(outcome.dropped_total() > 0);
    assert_eq!(ctx.telemetry.exporter_dropped_total("sentry"), 0);

    // A fresh exporter reports the same for one clean attempt.
    let mock2 = MockSentry::start().await;
    let fresh = exporter(&mock2.dsn(), "max_samples_per_chunk: 100")
        .export(&Request::new(batch(go_cpu())), &super::ctx())
        .await
        .unwrap();
    assert_eq!(fresh, outcome);
}

#[tokio::test]
async fn connection_errors_are_retryable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = exporter(&format!("http://public@127.0.0.1:{port}/42"), "");
    match e.export(&Request::new(batch(go_cpu())), &ctx()).await {
        Err(ExportError::Retryable { message, .. }) => {
            assert!(message.contains("/api/42/envelope/"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}
