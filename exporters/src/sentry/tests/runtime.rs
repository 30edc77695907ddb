//! Through the real runtime (config loader, queue, retries, metrics): a
//! 500 is retried, a 429 waits for its limit, a 400 is counted as failed,
//! and every sample is counted exactly once however the batch ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{Receiver, ReceiverContext, ReceiverFactory};
use profcol_pipeline::config::{load_str, ComponentConfig, ConfigErrors};
use profcol_pipeline::runtime::{build, Registry, RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

use super::{go_cpu, long_profile_for_runtime};
use crate::sentry::mock::MockSentry;

/// A receiver that hands over prepared batches when it starts.
struct Replay(Arc<Mutex<Vec<ProfileBatch>>>);

struct ReplayReceiver(Vec<ProfileBatch>);

impl ReceiverFactory for Replay {
    fn type_name(&self) -> &'static str {
        "replay"
    }

    fn create(&self, _cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors> {
        Ok(Box::new(ReplayReceiver(std::mem::take(
            &mut *self.0.lock().unwrap(),
        ))))
    }
}

#[async_trait]
impl Receiver for ReplayReceiver {
    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        for b in self.0 {
            ctx.output
                .consume(b)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(tokio::spawn(async move { ctx.shutdown.cancelled().await }))
    }
}

#[tokio::test]
async fn retries_waits_and_failures_are_counted_by_the_runtime() {
    let mock = MockSentry::start().await;
    // Batch A: 500, then delivered. Batch B: rate limited for 50 ms, then
    // delivered. Batch C: refused.
    mock.then(500, &[])
        .then(200, &[])
        .then(
            429,
            &[("x-sentry-rate-limits", "0.05:profile_chunk:project")],
        )
        .then(200, &[])
        .then(400, &[]);
    let batches = vec![
        ProfileBatch::new(long_profile_for_runtime()),
        ProfileBatch::new(long_profile_for_runtime()),
        ProfileBatch::new(long_profile_for_runtime()),
    ];
    let per_batch = batches[0].sample_count();
    let started = std::time::Instant::now();
    let telemetry = run(
        &mock,
        "{initial_interval: 10ms, max_interval: 20ms, max_elapsed_time: 10s}",
        batches,
    )
    .await;

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5, "A twice, B twice, C once");
    assert_eq!(reqs[0].chunk_key(), reqs[1].chunk_key(), "A retried");
    assert_eq!(
        reqs[2].chunk_key(),
        reqs[3].chunk_key(),
        "B retried after the limit"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "waited for the rate limit"
    );
    assert_eq!(telemetry.accepted("replay"), 3 * per_batch);
    assert_eq!(telemetry.sent("sentry"), 2 * per_batch, "A and B");
    assert_eq!(telemetry.send_failed("sentry"), per_batch, "C, not retried");
    assert_eq!(telemetry.exporter_dropped_total("sentry"), 0);
    assert_counted_once(&telemetry);
}

/// Runs `batches` through a collector whose `sentry` exporter sends to
/// `mock` (one consumer, so in order) and returns its metrics after a drain.
async fn run(mock: &MockSentry, retry: &str, batches: Vec<ProfileBatch>) -> Arc<Telemetry> {
    run_with(mock, "", retry, batches).await
}

/// [`run`] with more `sentry` exporter settings (`key: value` lines).
async fn run_with(
    mock: &MockSentry,
    settings: &str,
    retry: &str,
    batches: Vec<ProfileBatch>,
) -> Arc<Telemetry> {
    let yaml = format!(
        r#"
receivers:
  replay:
exporters:
  sentry:
    dsn: {dsn}
    {settings}
    retry_on_failure: {retry}
    sending_queue: {{num_consumers: 1}}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [replay], exporters: [sentry]}}
"#,
        dsn = mock.dsn()
    );
    let config = load_str(&yaml).unwrap();
    let registry = Registry::default()
        .receiver(Arc::new(Replay(Arc::new(Mutex::new(batches)))))
        .exporter(crate::sentry::factory());
    let graph = build(&config, &registry).unwrap();
    let telemetry = Arc::new(Telemetry::new());
    let svc = RunningService::start(graph, RuntimeOptions::default(), telemetry.clone())
        .await
        .unwrap();
    svc.shutdown_with(Duration::from_secs(20)).await;
    telemetry
}

fn assert_counted_once(t: &Telemetry) {
    assert_eq!(
        t.accepted("replay"),
        t.sent("sentry") + t.send_failed("sentry") + t.exporter_dropped_total("sentry"),
        "every sample counted exactly once:\n{}",
        t.encode_text()
    );
}

/// go-cpu holds the same samples twice (`samples/count` and
/// `cpu/nanoseconds`): one Profile is sent, the other is dropped as
/// `duplicate_sample_type`. Those drops are counted once, whether the batch
/// is delivered after a retry or fails, and never also as sent or failed.
#[tokio::test]
async fn the_exporters_own_drops_are_counted_once_by_the_runtime() {
    let data = go_cpu();
    let profiles = &data.resource_profiles[0].scope_profiles[0].profiles;
    let duplicate = profiles[1].samples.len() as u64;
    let per_batch = ProfileBatch::new(go_cpu()).sample_count();
    assert!(duplicate > 0 && duplicate < per_batch);

    // A: 500, then delivered on the retry. B: refused for good (400).
    let mock = MockSentry::start().await;
    mock.then(500, &[]).then(200, &[]).then(400, &[]);
    let t = run(
        &mock,
        "{initial_interval: 10ms, max_interval: 20ms, max_elapsed_time: 10s}",
        vec![ProfileBatch::new(go_cpu()), ProfileBatch::new(go_cpu())],
    )
    .await;
    assert_eq!(mock.requests().len(), 3, "A twice, B once");
    assert_eq!(t.accepted("replay"), 2 * per_batch);
    assert_eq!(t.exporter_dropped_total("sentry"), duplicate, "A's, once");
    assert_eq!(t.sent("sentry"), per_batch - duplicate, "A's sent Profile");
    assert_eq!(t.send_failed("sentry"), per_batch, "B as a whole");
    assert!(t
        .encode_text()
        .contains(profcol_sentry::Reason::DuplicateSampleType.as_str()));
    assert_counted_once(&t);

    // Retries run out: the batch fails as a whole, its drops included.
    let mock = MockSentry::start().await;
    // More answers than 10 ms intervals fit in the second, and a second
    // leaves room for a retry on a loaded machine.
    for _ in 0..200 {
        mock.then(503, &[]);
    }
    let t = run(
        &mock,
        "{initial_interval: 10ms, max_interval: 10ms, max_elapsed_time: 1s, randomization_factor: 0}",
        vec![ProfileBatch::new(go_cpu())],
    )
    .await;
    assert!(mock.requests().len() >= 2, "retried");
    assert_eq!(t.send_failed("sentry"), per_batch);
    assert_eq!(t.sent("sentry") + t.exporter_dropped_total("sentry"), 0);
    assert_counted_once(&t);

    // Retries disabled.
    let mock = MockSentry::start().await;
    mock.then(503, &[]);
    let t = run(&mock, "{enabled: false}", vec![ProfileBatch::new(go_cpu())]).await;
    assert_eq!(t.send_failed("sentry"), per_batch);
    assert_counted_once(&t);
}

/// A batch cut into three chunks: the first is delivered, then Sentry fails
/// until the retries run out. The delivered chunk counts as sent, only the
/// rest as failed, however the runtime gives up.
#[tokio::test]
async fn giving_up_after_a_partial_delivery_counts_what_was_delivered() {
    let per_batch = ProfileBatch::new(long_profile_for_runtime()).sample_count();
    for retry in [
        "{initial_interval: 10ms, max_interval: 10ms, max_elapsed_time: 50ms, randomization_factor: 0}",
        "{enabled: false}",
    ] {
        let mock = MockSentry::start().await;
        mock.then(200, &[]);
        for _ in 0..50 {
            mock.then(503, &[]);
        }
        let t = run_with(
            &mock,
            "max_chunk_duration: 10s",
            retry,
            vec![ProfileBatch::new(long_profile_for_runtime())],
        )
        .await;
        let reqs = mock.requests();
        assert!(reqs.len() >= 2, "{retry}");
        assert_ne!(reqs[0].chunk_key(), reqs[1].chunk_key(), "the first chunk is not resent");
        let (sent, failed) = (t.sent("sentry"), t.send_failed("sentry"));
        assert!(sent > 0 && failed > 0, "{retry}: sent {sent}, failed {failed}");
        assert_eq!(sent + failed, per_batch, "{retry}");
        assert_counted_once(&t);
    }
}
