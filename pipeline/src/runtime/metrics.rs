//! Metrics pipelines: fed only by connectors (`signaltometrics`), with no
//! processors, each ending in its exporters' bounded metrics queues.
//!
//! A connector makes one metrics request of a profiles batch and hands it
//! to every metrics pipeline it feeds in the same two phases as a
//! receiver's batch: a place in every exporter's queue is reserved first
//! ([`MetricsPipeline::prepare`]), and only when all are held is the
//! request committed, together with the profiles batch it was made of.
//! A queue is bounded by `sending_queue.queue_size` (requests, or bytes of
//! the encoding with `sizer: bytes`), and what it holds is reserved in the
//! memory budget. Its consumers send with the exporter's timeout and
//! retries (the exporter helper's [`Backoff`]) and count data points as
//! the Collector does (`otelcol_exporter_sent_metric_points`,
//! `otelcol_exporter_send_failed_metric_points`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::component::{
    ConsumeError, ExportError, Exporter, ExporterContext, ExporterSettings, ProfilesToMetrics,
};
use crate::config::Sizer;
use crate::telemetry::Telemetry;
use profcol_model::memory::{Held, MemoryBudget};
use profcol_model::proto::metrics::{point_count, ExportMetricsServiceRequest};
use profcol_model::ProfileBatch;

use super::exporter_helper::Backoff;

/// What a decoded metrics request holds in memory, per byte of its
/// encoding: strings and vectors of the prost structs, with their
/// headers, take a few times the wire size.
pub(super) const DECODED_PER_ENCODED_BYTE: usize = 3;

/// A request in a queue, with its room and its memory.
struct Queued {
    req: Arc<ExportMetricsServiceRequest>,
    points: u64,
    _room: OwnedSemaphorePermit,
    _memory: Arc<Held>,
}

/// One exporter's metrics queue: bounded, shared by every metrics pipeline
/// that lists the exporter.
pub struct MetricsQueue {
    pub id: Arc<str>,
    room: Arc<Semaphore>,
    capacity: usize,
    sizer: Sizer,
    /// Wait for room (`block_on_overflow`, or a disabled queue).
    block: bool,
    items: Mutex<VecDeque<Queued>>,
    ready: Notify,
    closed: CancellationToken,
    telemetry: Arc<Telemetry>,
}

impl MetricsQueue {
    fn new(id: &str, settings: &ExporterSettings, telemetry: Arc<Telemetry>) -> Self {
        let q = &settings.sending_queue;
        let (capacity, sizer, block) = if q.enabled {
            (q.queue_size.max(1), q.sizer, q.block_on_overflow)
        } else {
            (1, Sizer::Requests, true)
        };
        Self {
            id: id.into(),
            room: Arc::new(Semaphore::new(capacity.min(Semaphore::MAX_PERMITS))),
            capacity,
            sizer,
            block,
            items: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            closed: CancellationToken::new(),
            telemetry,
        }
    }

    /// How much of the capacity `req` takes.
    fn size_of(&self, req: &ExportMetricsServiceRequest) -> u32 {
        match self.sizer {
            Sizer::Requests => 1,
            Sizer::Bytes => {
                u32::try_from(req.encoded_len().clamp(1, self.capacity)).unwrap_or(u32::MAX)
            }
            Sizer::Items => u32::try_from((point_count(req) as usize).clamp(1, self.capacity))
                .unwrap_or(u32::MAX),
        }
    }

    /// Room for `req`, now or (with `wait`, or a blocking queue) once some
    /// is free; `None` when the queue is full and may not wait, or closed.
    async fn reserve(
        &self,
        req: &ExportMetricsServiceRequest,
        wait: bool,
    ) -> Result<OwnedSemaphorePermit, ConsumeError> {
        if self.closed.is_cancelled() {
            return Err(ConsumeError::ShuttingDown);
        }
        let n = self.size_of(req);
        if wait || self.block {
            tokio::select! {
                p = self.room.clone().acquire_many_owned(n) => p.map_err(|_| ConsumeError::ShuttingDown),
                _ = self.closed.cancelled() => Err(ConsumeError::ShuttingDown),
            }
        } else {
            self.room.clone().try_acquire_many_owned(n).map_err(|_| {
                self.telemetry
                    .exporter_enqueue_failed_points(&self.id, point_count(req));
                ConsumeError::queue_full(&self.id)
            })
        }
    }

    fn push(&self, q: Queued) {
        self.items
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(q);
        self.ready.notify_one();
    }

    /// The next request; `None` once closed and empty.
    async fn take(&self) -> Option<Queued> {
        loop {
            let notified = self.ready.notified();
            if let Some(q) = self
                .items
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
            {
                return Some(q);
            }
            if self.closed.is_cancelled() {
                return None;
            }
            tokio::select! {
                _ = notified => {}
                _ = self.closed.cancelled() => {}
            }
        }
    }

    /// Requests queued (not counting those being sent).
    pub fn size(&self) -> usize {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// No more requests are taken; consumers drain what is queued.
    pub fn close(&self) {
        self.closed.cancel();
        self.ready.notify_waiters();
    }
}

/// An exporter's metrics side, running: its queue and its consumers.
pub(super) struct MetricsExporterRun {
    pub queue: Arc<MetricsQueue>,
    pub consumers: JoinHandle<()>,
}

/// Opens the metrics queue of an exporter a metrics pipeline lists and
/// runs `num_consumers` consumers on it (one without a queue). They stop
/// once the queue is closed and drained, or soon after `hard_stop`,
/// counting what is left as failed.
pub(super) fn run_exporter(
    id: &str,
    exporter: Arc<dyn Exporter>,
    settings: &ExporterSettings,
    ctx: ExporterContext,
    hard_stop: CancellationToken,
) -> MetricsExporterRun {
    let queue = Arc::new(MetricsQueue::new(id, settings, ctx.telemetry.clone()));
    let consumers = if settings.sending_queue.enabled {
        settings.sending_queue.num_consumers.max(1)
    } else {
        1
    };
    let settings = Arc::new(settings.clone());
    let mut tasks = JoinSet::new();
    for _ in 0..consumers {
        let (queue, exporter, ctx, settings, stop) = (
            queue.clone(),
            exporter.clone(),
            ctx.clone(),
            settings.clone(),
            hard_stop.clone(),
        );
        tasks.spawn(async move {
            while let Some(q) = queue.take().await {
                if stop.is_cancelled() {
                    ctx.telemetry.exporter_send_failed_points(
                        &ctx.id,
                        q.points,
                        "dropped at shutdown",
                    );
                    continue;
                }
                send_with_retry(&*exporter, &q, &ctx, &settings, &stop).await;
            }
        });
    }
    let consumers = tokio::spawn(async move { while tasks.join_next().await.is_some() {} });
    MetricsExporterRun { queue, consumers }
}

/// One request: attempts until delivered, failed for good, out of retries,
/// or stopped; its points are counted once.
async fn send_with_retry(
    exporter: &dyn Exporter,
    q: &Queued,
    ctx: &ExporterContext,
    settings: &ExporterSettings,
    stop: &CancellationToken,
) {
    let failed = |why: String| {
        ctx.telemetry
            .exporter_send_failed_points(&ctx.id, q.points, &why)
    };
    let started = Instant::now();
    let mut backoff = Backoff::new(&settings.retry_on_failure);
    loop {
        let attempt = tokio::select! {
            r = tokio::time::timeout(settings.timeout.max(Duration::from_millis(1)), exporter.export_metrics(&q.req, ctx)) => r,
            _ = stop.cancelled() => return failed("dropped at shutdown".into()),
        };
        let (message, retry_after) = match attempt {
            Ok(Ok(outcome)) => {
                let rejected = outcome.rejected.min(q.points);
                ctx.telemetry
                    .exporter_sent_points(&ctx.id, q.points - rejected);
                if rejected > 0 {
                    ctx.telemetry.exporter_send_failed_points(
                        &ctx.id,
                        rejected,
                        "rejected by the peer (partial success)",
                    );
                }
                return;
            }
            Ok(Err(ExportError::Permanent { message })) => {
                return failed(format!("not retryable: {message}"))
            }
            Ok(Err(ExportError::Retryable {
                message,
                retry_after,
            })) => (message, retry_after),
            Err(_) => (format!("timed out after {:?}", settings.timeout), None),
        };
        if !settings.retry_on_failure.enabled {
            return failed(format!("retries disabled: {message}"));
        }
        let backoff_delay = backoff.next_delay();
        let delay = retry_after.map_or(backoff_delay, |r| r.max(backoff_delay));
        let max = settings.retry_on_failure.max_elapsed_time.get();
        if !max.is_zero() && started.elapsed() + delay > max {
            return failed(format!(
                "no more retries left after {:?}: {message}",
                started.elapsed()
            ));
        }
        crate::warn_limited!(exporter = %ctx.id, error = %message, interval = ?delay, "exporting metrics failed, will retry");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => return failed("dropped at shutdown".into()),
        }
    }
}

/// A metrics pipeline: the metrics queues of its exporters.
pub struct MetricsPipeline {
    pub id: Arc<str>,
    queues: Vec<Arc<MetricsQueue>>,
}

impl MetricsPipeline {
    pub fn new(id: &str, queues: Vec<Arc<MetricsQueue>>) -> Self {
        Self {
            id: id.into(),
            queues,
        }
    }

    /// Holds a place for `req` in every exporter's queue. `wait`: the
    /// profiles it was made of were accepted already (a `batch` stage
    /// emitted them), so wait for room rather than refuse.
    pub async fn prepare(
        &self,
        req: &Arc<ExportMetricsServiceRequest>,
        memory: &Arc<Held>,
        wait: bool,
    ) -> Result<MetricsReady, ConsumeError> {
        let points = point_count(req);
        let mut places = Vec::with_capacity(self.queues.len());
        for q in &self.queues {
            let room = q.reserve(req, wait).await?;
            places.push((q.clone(), room));
        }
        Ok(MetricsReady {
            req: req.clone(),
            points,
            memory: memory.clone(),
            places,
        })
    }
}

/// A metrics request with a place held in every queue of one pipeline.
pub struct MetricsReady {
    req: Arc<ExportMetricsServiceRequest>,
    points: u64,
    memory: Arc<Held>,
    places: Vec<(Arc<MetricsQueue>, OwnedSemaphorePermit)>,
}

impl MetricsReady {
    /// Hands the request to every queue's consumers.
    pub fn commit(self) {
        for (q, room) in self.places {
            q.push(Queued {
                req: self.req.clone(),
                points: self.points,
                _room: room,
                _memory: self.memory.clone(),
            });
        }
    }
}

/// A connector to metrics pipelines: what it makes of a batch, and where
/// that goes.
pub struct MetricsOut {
    pub convert: Arc<dyn ProfilesToMetrics>,
    pub pipelines: Vec<Arc<MetricsPipeline>>,
    pub budget: Arc<MemoryBudget>,
}

impl MetricsOut {
    /// Converts `batch` on the CPU pool and holds a place for the request
    /// in every pipeline. `accepted`: the batch was accepted already (a
    /// stage emitted it), so memory is forced and room waited for.
    pub async fn prepare(
        &self,
        batch: &Arc<ProfileBatch>,
        accepted: bool,
    ) -> Result<Vec<MetricsReady>, ConsumeError> {
        if self.pipelines.is_empty() {
            return Ok(Vec::new());
        }
        let (convert, b, budget) = (self.convert.clone(), batch.clone(), self.budget.clone());
        let converted = profcol_model::cpu::run(move || {
            // What the conversion copies is held in the budget while it
            // runs (measured here: it may decode the batch).
            let bytes = convert.working_bytes(&b);
            let _working = if accepted {
                budget.force(bytes)
            } else {
                budget.try_admit(bytes).map_err(ConsumeError::memory)?
            };
            Ok::<_, ConsumeError>(convert.convert(&b))
        })
        .await?;
        let Some(req) = converted else {
            return Ok(Vec::new());
        };
        let req = Arc::new(req);
        let memory = reserve_memory(&req, &self.budget, accepted)?;
        let mut ready = Vec::with_capacity(self.pipelines.len());
        for p in &self.pipelines {
            ready.push(p.prepare(&req, &memory, accepted).await?);
        }
        Ok(ready)
    }
}

/// The memory a metrics request holds while queued, reserved in the
/// budget (refused when the budget is full, unless `force`: the profiles
/// it was made of were accepted already).
pub(super) fn reserve_memory(
    req: &ExportMetricsServiceRequest,
    budget: &Arc<MemoryBudget>,
    force: bool,
) -> Result<Arc<Held>, ConsumeError> {
    let bytes = req.encoded_len() * DECODED_PER_ENCODED_BYTE;
    if force {
        return Ok(Held::new(budget.force(bytes)));
    }
    budget
        .try_admit(bytes)
        .map(Held::new)
        .map_err(ConsumeError::memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::ExportOutcome;
    use crate::config::{QueueSettings, RetrySettings};
    use profcol_model::proto::metrics::{
        metric, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
    };

    fn request(points: usize) -> Arc<ExportMetricsServiceRequest> {
        let dp = NumberDataPoint {
            value: Some(profcol_model::proto::metrics::number_data_point::Value::AsInt(7)),
            ..Default::default()
        };
        Arc::new(ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name: "m".into(),
                        data: Some(metric::Data::Gauge(Gauge {
                            data_points: vec![dp; points],
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        })
    }

    /// Fails `fail` times (retryably), then records what it got.
    struct Flaky {
        fail: Mutex<u32>,
        got: Mutex<Vec<u64>>,
    }

    #[async_trait::async_trait]
    impl Exporter for Flaky {
        async fn export(
            &self,
            _: &crate::component::Request,
            _: &ExporterContext,
        ) -> Result<ExportOutcome, ExportError> {
            unreachable!("profiles are not sent here")
        }
        fn exports_metrics(&self) -> bool {
            true
        }
        async fn export_metrics(
            &self,
            req: &ExportMetricsServiceRequest,
            _: &ExporterContext,
        ) -> Result<ExportOutcome, ExportError> {
            let mut fail = self.fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(ExportError::retryable("try again"));
            }
            self.got.lock().unwrap().push(point_count(req));
            Ok(ExportOutcome::delivered())
        }
    }

    fn settings(queue_size: usize) -> ExporterSettings {
        ExporterSettings {
            timeout: Duration::from_secs(1),
            retry_on_failure: RetrySettings {
                initial_interval: crate::config::Duration::from_millis(1),
                max_interval: crate::config::Duration::from_millis(2),
                ..RetrySettings::default()
            },
            sending_queue: QueueSettings {
                queue_size,
                ..QueueSettings::default()
            },
        }
    }

    #[tokio::test]
    async fn a_request_is_retried_sent_and_counted_in_points() {
        let telemetry = Arc::new(Telemetry::new());
        let flaky = Arc::new(Flaky {
            fail: Mutex::new(2),
            got: Mutex::new(Vec::new()),
        });
        let ctx = ExporterContext {
            id: "m".into(),
            telemetry: telemetry.clone(),
            authenticators: Default::default(),
            budget: profcol_model::memory::MemoryBudget::new(1 << 30),
        };
        let run = run_exporter(
            "m",
            flaky.clone(),
            &settings(4),
            ctx,
            CancellationToken::new(),
        );
        let budget = MemoryBudget::new(1 << 20);
        let p = MetricsPipeline::new("metrics", vec![run.queue.clone()]);
        let req = request(3);
        let memory = reserve_memory(&req, &budget, false).unwrap();
        assert!(budget.used() > 0);
        p.prepare(&req, &memory, false).await.unwrap().commit();
        drop(memory);
        run.queue.close();
        run.consumers.await.unwrap();
        assert_eq!(*flaky.got.lock().unwrap(), vec![3]);
        assert_eq!(budget.used(), 0, "the memory goes with the request");
        let text = telemetry.encode_text();
        assert!(
            text.contains("otelcol_exporter_sent_metric_points_total{exporter=\"m\"} 3"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_counts_the_points() {
        let telemetry = Arc::new(Telemetry::new());
        let q = Arc::new(MetricsQueue::new("m", &settings(1), telemetry.clone()));
        let p = MetricsPipeline::new("metrics", vec![q.clone()]);
        let budget = MemoryBudget::new(1 << 20);
        let req = request(2);
        let memory = reserve_memory(&req, &budget, false).unwrap();
        p.prepare(&req, &memory, false).await.unwrap().commit();
        let err = p.prepare(&req, &memory, false).await.err().unwrap();
        assert_eq!(err, ConsumeError::queue_full("m"));
        assert_eq!(q.size(), 1);
        assert!(telemetry
            .encode_text()
            .contains("otelcol_exporter_enqueue_failed_metric_points_total{exporter=\"m\"} 2"));
        // An uncommitted place gives its room back.
        drop(q.take().await);
        let ready = p.prepare(&req, &memory, false).await.unwrap();
        drop(ready);
        assert!(p.prepare(&req, &memory, false).await.is_ok());
    }

    /// One gauge point per sample of the batch.
    struct PointPerSample;

    impl ProfilesToMetrics for PointPerSample {
        fn convert(&self, batch: &ProfileBatch) -> Option<ExportMetricsServiceRequest> {
            let n = batch.sample_count() as usize;
            (n > 0).then(|| (*request(n)).clone())
        }
    }

    /// A conversion that works on a copy of `working` bytes, and sees how
    /// much of the budget is in use while it runs.
    struct Copying {
        working: usize,
        budget: Arc<MemoryBudget>,
        seen: std::sync::Mutex<Vec<usize>>,
    }

    impl ProfilesToMetrics for Copying {
        fn convert(&self, batch: &ProfileBatch) -> Option<ExportMetricsServiceRequest> {
            self.seen.lock().unwrap().push(self.budget.used());
            PointPerSample.convert(batch)
        }

        fn working_bytes(&self, _batch: &ProfileBatch) -> usize {
            self.working
        }
    }

    /// The copy a conversion works on is in the budget while it runs, is
    /// refused with the request when the budget cannot hold it, and forced
    /// for a batch already accepted.
    #[tokio::test]
    async fn a_conversion_holds_its_working_copy_in_the_budget() {
        let telemetry = Arc::new(Telemetry::new());
        let budget = MemoryBudget::new(1 << 20);
        let convert = Arc::new(Copying {
            working: 300 << 10,
            budget: budget.clone(),
            seen: Default::default(),
        });
        let out = MetricsOut {
            convert: convert.clone(),
            pipelines: vec![Arc::new(MetricsPipeline::new(
                "metrics",
                vec![Arc::new(MetricsQueue::new("m", &settings(4), telemetry))],
            ))],
            budget: budget.clone(),
        };
        let batch = Arc::new(ProfileBatch::new(profcol_model::synth::request(5, 2)));
        let ready = out.prepare(&batch, false).await.unwrap();
        assert!(convert.seen.lock().unwrap()[0] >= 300 << 10);
        let queued = budget.used();
        assert!(
            queued < 300 << 10,
            "given back after the conversion: {queued}"
        );
        drop(ready);

        let _held = budget.force(800 << 10);
        let Err(err) = out.prepare(&batch, false).await else {
            panic!("converted past the budget");
        };
        assert!(matches!(err, ConsumeError::Full { .. }), "{err:?}");
        assert_eq!(
            convert.seen.lock().unwrap().len(),
            1,
            "refused before converting"
        );
        assert!(out.prepare(&batch, true).await.is_ok());
        assert!(convert.seen.lock().unwrap()[1] >= (800 << 10) + (300 << 10));
    }

    /// A receiver's batch through a profiles pipeline whose connector
    /// makes metrics: accepted once the metrics pipeline's queue holds the
    /// request, refused everywhere when it cannot.
    #[tokio::test]
    async fn a_connector_hands_metrics_in_two_phases() {
        use crate::component::Output;
        use crate::runtime::{Connection, Downstream, Pipeline};
        let telemetry = Arc::new(Telemetry::new());
        let budget = MemoryBudget::new(64 << 20);
        let q = Arc::new(MetricsQueue::new("m", &settings(1), telemetry.clone()));
        let out = Arc::new(MetricsOut {
            convert: Arc::new(PointPerSample),
            pipelines: vec![Arc::new(MetricsPipeline::new("metrics", vec![q.clone()]))],
            budget: budget.clone(),
        });
        let profiles = Arc::new(Pipeline::with_connectors(
            "profiles",
            8,
            std::time::Duration::ZERO,
            Vec::new(),
            Vec::new(),
            vec![Connection {
                id: "signaltometrics".into(),
                to: Downstream::Metrics(out),
            }],
            crate::component::Observers::from([]),
            0,
            budget.clone(),
            telemetry.clone(),
        ));
        let input = Output::new("otlp", vec![profiles], budget.clone(), telemetry.clone());
        let batch = || ProfileBatch::new(profcol_model::synth::request(5, 2));
        let samples = batch().sample_count();
        input.consume(batch()).await.unwrap();
        assert_eq!(q.size(), 1);
        let queued = q.take().await.unwrap();
        assert_eq!(queued.points, samples);
        assert!(budget.used() > 0, "a queued request holds memory");
        // The queue (of one) is full while `queued` is being sent.
        q.push(queued);
        let err = input.consume(batch()).await.unwrap_err();
        assert_eq!(err, ConsumeError::queue_full("m"));
        drop(q.take().await);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn memory_is_refused_past_the_budget() {
        let budget = MemoryBudget::new(16);
        let req = request(100);
        assert!(matches!(
            reserve_memory(&req, &budget, false),
            Err(ConsumeError::TooLarge { .. })
        ));
        assert!(reserve_memory(&req, &budget, true).is_ok());
    }
}
