//! What one incoming request may cost Sentry: the profiles of one process
//! share chunks, and the chunks of one batch and per second are bounded.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use profcol_model::proto::{any_value, AnyValue, KeyValue, ProfilesData};
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{Exporter, Request};

use super::{ctx, exporter, go_cpu};
use crate::sentry::encode::MAX_CHUNKS_PER_REQUEST;
use crate::sentry::mock::MockSentry;

/// `n` one-sample profiles per resource (a collection tick each, 1 ms
/// apart), for `resources` processes.
fn tiny_profiles(n: usize, resources: usize) -> ProfilesData {
    let mut data = go_cpu();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let t0 = now - 30_000_000_000;
    let mut rp0 = data.resource_profiles[0].clone();
    let mut base = rp0.scope_profiles[0].profiles[0].clone();
    base.samples.truncate(1);
    base.samples[0].values = vec![1];
    rp0.scope_profiles.truncate(1);
    rp0.scope_profiles[0].profiles = (0..n)
        .map(|i| {
            let mut p = base.clone();
            let t = t0 + i as u64 * 1_000_000;
            p.time_unix_nano = t;
            p.duration_nano = 1_000_000;
            p.samples[0].timestamps_unix_nano = vec![t];
            p
        })
        .collect();
    data.resource_profiles = (0..resources)
        .map(|r| {
            let mut rp = rp0.clone();
            let res = rp.resource.get_or_insert_with(Default::default);
            res.attributes.push(KeyValue {
                key: "service.instance.id".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(format!("i{r}"))),
                }),
                ..Default::default()
            });
            rp
        })
        .collect();
    data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tiny_profiles_of_one_process_are_one_chunk() {
    let mock = MockSentry::start().await;
    let e = exporter(&mock.dsn(), "");
    let batch = Arc::new(ProfileBatch::new(tiny_profiles(5000, 1)));
    let outcome = e.export(&Request::new(batch), &ctx()).await.unwrap();
    assert!(outcome.dropped.is_empty(), "{:?}", outcome.dropped);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let chunk = requests[0].chunk();
    assert_eq!(chunk["profile"]["samples"].as_array().unwrap().len(), 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_past_max_chunks_per_request_are_dropped_and_counted() {
    let mock = MockSentry::start().await;
    let e = exporter(&mock.dsn(), "max_chunks_per_request: 2");
    let batch = Arc::new(ProfileBatch::new(tiny_profiles(10, 3)));
    let c = ctx();
    let outcome = e.export(&Request::new(batch), &c).await.unwrap();
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(outcome.dropped, [(MAX_CHUNKS_PER_REQUEST, 10)]);
    assert_eq!(
        c.telemetry
            .exporter_events("sentry", "chunk_over_request_limit"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_past_max_chunks_per_second_wait_their_turn() {
    let mock = MockSentry::start().await;
    let e = exporter(&mock.dsn(), "max_chunks_per_second: 2");
    let batch = Arc::new(ProfileBatch::new(tiny_profiles(10, 4)));
    let c = ctx();
    let started = std::time::Instant::now();
    e.export(&Request::new(batch), &c).await.unwrap();
    // Two at once, then one per 500 ms.
    assert_eq!(mock.requests().len(), 4);
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    assert_eq!(c.telemetry.exporter_events("sentry", "chunk_paced"), 2);
}
