//! The Collector's exporterhelper: a bounded sending queue drained by
//! `num_consumers` tasks, each attempt bounded by `timeout`, failures retried
//! with randomized exponential backoff until `max_elapsed_time`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::component::{ExportError, Exporter, ExporterContext, ExporterSettings, Request};
use crate::config::{RetrySettings, Sizer};
use crate::telemetry::Telemetry;
use profcol_model::memory::MemoryBudget;

use super::pipeline::ExporterQueue;
use profcol_queue::{Ack, MemoryQueue, Queue};

/// What an exporter runs with.
pub(super) struct Spawn {
    pub id: String,
    pub exporter: Arc<dyn Exporter>,
    pub settings: ExporterSettings,
    pub telemetry: Arc<Telemetry>,
    pub budget: Arc<MemoryBudget>,
    pub authenticators: crate::component::Authenticators,
    /// The storage `sending_queue.storage` names, if any.
    pub storage: Option<Arc<dyn crate::component::Storage>>,
}

/// An exporter started with its queue open, before any consumer runs: the
/// part of a start that can fail, so that a config reload can do it
/// before it changes anything.
pub(super) struct Started {
    pub queue: ExporterQueue,
    exporter: Arc<dyn Exporter>,
    ctx: ExporterContext,
    settings: Arc<ExporterSettings>,
    consumers: usize,
    budget: Arc<MemoryBudget>,
}

/// Starts the exporter and opens its queue, or takes over `queue` (a
/// reload that changed the exporter but not its `sending_queue`: what is
/// queued is sent by the new instance).
pub(super) async fn start(s: Spawn, queue: Option<ExporterQueue>) -> anyhow::Result<Started> {
    let Spawn {
        id,
        exporter,
        settings,
        telemetry,
        budget,
        authenticators,
        storage,
    } = s;
    let ctx = ExporterContext {
        id: id.clone(),
        telemetry: telemetry.clone(),
        authenticators,
        budget: budget.clone(),
    };
    exporter
        .start(&ctx)
        .await
        .map_err(|e| anyhow::anyhow!("exporters::{id}: failed to start: {e:#}"))?;

    // A disabled queue behaves like the Collector's: the pipeline (and so
    // the client) waits for each send, so it holds one batch and blocks.
    let q = &settings.sending_queue;
    let (consumers, block) = if q.enabled {
        (q.num_consumers, q.block_on_overflow)
    } else {
        (1, true)
    };
    let mut handle = match queue {
        Some(kept) => kept,
        None => {
            let queue: Arc<dyn Queue> = match (&storage, q.enabled) {
                (Some(storage), true) => storage
                    .open_queue(&id, q, budget.clone(), telemetry.clone())
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!("exporters::{id}::sending_queue::storage: {e:#}")
                    })?,
                _ if q.enabled => Arc::new(MemoryQueue::new(q.queue_size, q.sizer)),
                _ => Arc::new(MemoryQueue::new(1, Sizer::Requests)),
            };
            ExporterQueue {
                id: id.clone().into(),
                queue,
                block,
                gauges: q.enabled,
                telemetry: telemetry.clone(),
                decodes: true,
                sends_compressed: None,
            }
        }
    };
    // A queue kept over a reload may now feed a differently configured
    // exporter.
    handle.decodes = !exporter.sends_received_bytes();
    handle.sends_compressed = exporter
        .sends_received_bytes()
        .then(|| exporter.sends_compressed())
        .flatten();
    handle.update_gauge();
    Ok(Started {
        queue: handle,
        exporter,
        ctx,
        settings: Arc::new(settings),
        consumers,
        budget,
    })
}

impl Started {
    /// Runs the consumers. The returned task ends, after the exporter's
    /// `shutdown`, once the queue is closed and drained, or once `retire`
    /// fires and the requests being sent are settled (the queue then
    /// belongs to a successor), or soon after `hard_stop` fires, counting
    /// what a memory queue still held as dropped (`shutdown`).
    pub(super) fn consume(
        self,
        hard_stop: CancellationToken,
        retire: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let Started {
            queue: handle,
            exporter,
            ctx,
            settings,
            consumers,
            budget,
        } = self;
        let mut tasks = JoinSet::new();
        for _ in 0..consumers {
            let (handle, exporter, ctx, settings, stop, budget, retire) = (
                handle.clone(),
                exporter.clone(),
                ctx.clone(),
                settings.clone(),
                hard_stop.clone(),
                budget.clone(),
                retire.clone(),
            );
            tasks.spawn(async move {
                let kept = handle.queue.persistent();
                loop {
                    // `take` gives nothing up when dropped while waiting.
                    let next = tokio::select! {
                        biased;
                        _ = retire.cancelled() => None,
                        next = handle.queue.take() => next,
                    };
                    let Some((req, mut ack)) = next else { break };
                    handle.update_gauge();
                    let sent = if stop.is_cancelled() {
                        Sent::Stopped(req)
                    } else {
                        let ends = Ends {
                            stop: &stop,
                            retire: &retire,
                        };
                        send_with_retry(&*exporter, req, &ctx, &settings, &budget, ends, &mut ack)
                            .await
                    };
                    match sent {
                        Sent::Settled => ack.done().await,
                        Sent::Handed(req) => {
                            ack.requeue(req);
                            handle.update_gauge();
                        }
                        // A persistent queue keeps it (and its progress) for
                        // the next start; from memory it is lost, and counted.
                        Sent::Stopped(_) if kept => {}
                        Sent::Stopped(req) => {
                            give_up(&ctx, &req, &|n| ctx.dropped(n, "shutdown"));
                            ack.done().await;
                        }
                    }
                }
            });
        }
        tokio::spawn(async move {
            while tasks.join_next().await.is_some() {}
            exporter.shutdown().await;
        })
    }
}

/// How one request's send ended.
enum Sent {
    /// Delivered, failed for good, or dropped: every sample counted.
    Settled,
    /// Shutdown came first; nothing of what remains is counted yet.
    Stopped(Request),
    /// A config reload retired this consumer while the request waited to
    /// be retried: it goes back to the queue, whose new exporter (a new
    /// endpoint, a new set of backends) retries it rather than this one.
    Handed(Request),
}

/// What cuts a send short: shutdown, and the consumer's retirement.
#[derive(Clone, Copy)]
struct Ends<'a> {
    stop: &'a CancellationToken,
    retire: &'a CancellationToken,
}

/// Counts a request the runtime gives up on: what earlier attempts
/// delivered as sent, the rest by `rest` (failed, or dropped at shutdown).
fn give_up(ctx: &ExporterContext, req: &Request, rest: &dyn Fn(u64)) {
    let samples = req.batch.sample_count();
    let delivered = req.progress().delivered.min(samples);
    if delivered > 0 {
        ctx.telemetry.exporter_sent(&ctx.id, delivered);
    }
    if samples > delivered {
        rest(samples - delivered);
    }
}

/// One request: attempts until sent, permanently failed, out of retries,
/// or stopped. Every sample of a settled request is counted exactly once.
async fn send_with_retry(
    exporter: &dyn Exporter,
    req: Request,
    ctx: &ExporterContext,
    settings: &ExporterSettings,
    budget: &Arc<MemoryBudget>,
    Ends { stop, retire }: Ends<'_>,
    ack: &mut Ack,
) -> Sent {
    let samples = req.batch.sample_count();
    let failed = |req: &Request, why: String| {
        give_up(ctx, req, &|n| {
            ctx.telemetry.exporter_send_failed(&ctx.id, n, &why)
        });
        Sent::Settled
    };
    let started = Instant::now();
    let mut backoff = Backoff::new(&settings.retry_on_failure);
    // What converting and sending the batch takes (a pprof file, Sentry
    // chunks, a compressed request) is of the order of the batch itself.
    let working = req.batch.meta.memory.as_ref().map_or(0, |m| m.bytes());
    let mut kept = req.progress();
    loop {
        let attempt = tokio::select! {
            r = async {
                let _work = budget.for_work(working).await;
                tokio::time::timeout(settings.timeout.max(Duration::from_millis(1)), exporter.export(&req, ctx)).await
            } => Some(r),
            _ = stop.cancelled() => None,
        };
        // Part of the request went out: a restart resumes after it.
        let progress = req.progress();
        if progress != kept && !matches!(attempt, Some(Ok(Ok(_)))) {
            ack.progress(&progress).await;
            kept = progress;
        }
        let Some(attempt) = attempt else {
            return Sent::Stopped(req);
        };
        let (message, retry_after) = match attempt {
            Ok(Ok(outcome)) => {
                // The exporter's own drops first, then the peer's
                // rejections; whatever is left was delivered.
                let mut left = samples;
                for &(reason, n) in &outcome.dropped {
                    let n = n.min(left);
                    if n > 0 {
                        ctx.dropped(n, reason);
                        left -= n;
                    }
                }
                let rejected = outcome.rejected.min(left);
                ctx.telemetry.exporter_sent(&ctx.id, left - rejected);
                if rejected > 0 {
                    ctx.telemetry.exporter_send_failed(
                        &ctx.id,
                        rejected,
                        "rejected by the peer (partial success)",
                    );
                }
                return Sent::Settled;
            }
            Ok(Err(ExportError::Permanent { message })) => {
                return failed(&req, format!("not retryable: {message}"));
            }
            Ok(Err(ExportError::Retryable {
                message,
                retry_after,
            })) => (message, retry_after),
            Err(_) => (format!("timed out after {:?}", settings.timeout), None),
        };
        if !settings.retry_on_failure.enabled {
            return failed(&req, format!("retries disabled: {message}"));
        }
        // As the Collector: the backoff always advances, and a peer's
        // RetryInfo / Retry-After can only lengthen the wait.
        let backoff_delay = backoff.next_delay();
        let delay = retry_after.map_or(backoff_delay, |r| r.max(backoff_delay));
        let max = settings.retry_on_failure.max_elapsed_time.get();
        if !max.is_zero() && started.elapsed() + delay > max {
            let why = format!(
                "no more retries left after {:?}: {message}",
                started.elapsed()
            );
            return failed(&req, why);
        }
        crate::warn_limited!(exporter = %ctx.id, error = %message, interval = ?delay, "exporting failed, will retry");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => return Sent::Stopped(req),
            _ = retire.cancelled() => return Sent::Handed(req),
        }
    }
}

/// Randomized exponential backoff, as the Collector's (cenkalti/backoff).
pub struct Backoff {
    current: Duration,
    max: Duration,
    multiplier: f64,
    randomization: f64,
}

impl Backoff {
    pub fn new(s: &RetrySettings) -> Self {
        Self {
            current: s.initial_interval.get(),
            max: s.max_interval.get(),
            multiplier: s.multiplier,
            randomization: s.randomization_factor,
        }
    }

    /// The next wait: the current interval +/- the randomization factor,
    /// after which the interval grows by the multiplier up to the maximum.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current.as_secs_f64();
        let delta = base * self.randomization;
        let jittered = if delta > 0.0 {
            rand::rng().random_range(base - delta..=base + delta)
        } else {
            base
        };
        self.current = self
            .current
            .mul_f64(self.multiplier)
            .min(self.max.max(self.current));
        Duration::from_secs_f64(jittered.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::ExportOutcome;
    use crate::config::{Duration as D, QueueSettings};
    use profcol_model::ProfileBatch;

    struct Nop;

    #[async_trait::async_trait]
    impl Exporter for Nop {
        async fn export(
            &self,
            _: &Request,
            _: &ExporterContext,
        ) -> Result<ExportOutcome, ExportError> {
            Ok(ExportOutcome::default())
        }
    }

    #[tokio::test]
    async fn only_a_sending_queue_has_queue_gauges() {
        for enabled in [true, false] {
            let telemetry = Arc::new(Telemetry::new());
            let settings = ExporterSettings {
                timeout: Duration::from_secs(1),
                retry_on_failure: RetrySettings::default(),
                sending_queue: QueueSettings {
                    enabled,
                    ..QueueSettings::default()
                },
            };
            let stop = CancellationToken::new();
            let started = start(
                Spawn {
                    id: "nop".into(),
                    exporter: Arc::new(Nop),
                    settings,
                    telemetry: telemetry.clone(),
                    budget: MemoryBudget::new(1 << 20),
                    authenticators: Default::default(),
                    storage: None,
                },
                None,
            )
            .await
            .unwrap();
            let queue = started.queue.clone();
            let task = started.consume(stop, CancellationToken::new());
            let mut slot = queue.queue.try_reserve(&ProfileBatch::default()).unwrap();
            slot.write(&Arc::new(ProfileBatch::default()))
                .await
                .unwrap();
            slot.commit();
            queue.queue.close();
            task.await.unwrap();
            let text = telemetry.encode_text();
            assert_eq!(
                text.contains("otelcol_exporter_queue_capacity{exporter=\"nop\""),
                enabled,
                "{text}"
            );
            assert_eq!(
                text.contains("otelcol_exporter_queue_size{"),
                enabled,
                "{text}"
            );
        }
    }

    #[test]
    fn backoff_grows_to_the_maximum_within_jitter() {
        let s = RetrySettings {
            initial_interval: D::from_millis(100),
            max_interval: D::from_millis(400),
            multiplier: 2.0,
            randomization_factor: 0.5,
            ..RetrySettings::default()
        };
        let mut b = Backoff::new(&s);
        for base in [100.0, 200.0, 400.0, 400.0] {
            let d = b.next_delay().as_secs_f64() * 1000.0;
            assert!(
                (base * 0.5..=base * 1.5).contains(&d),
                "{d} not around {base}"
            );
        }
    }
}
