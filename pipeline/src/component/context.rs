use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::runtime::Pipeline;
use crate::telemetry::Telemetry;
use profcol_model::memory::{Exhausted, Held, MemoryBudget};
use profcol_model::ProfileBatch;

/// Why samples were dropped or refused; the `reason` label of the metrics.
pub type DropReason = &'static str;

/// Where a receiver hands its batches: every pipeline that lists it.
#[derive(Clone)]
pub struct Output {
    receiver: Arc<str>,
    route: Route,
    budget: Arc<MemoryBudget>,
    telemetry: Arc<Telemetry>,
}

/// The pipelines a running receiver feeds. A config reload points it at
/// the new pipelines while the receiver keeps its listener.
#[derive(Clone)]
pub struct Route(Arc<std::sync::RwLock<Arc<[Arc<Pipeline>]>>>);

impl Route {
    fn new(pipelines: Vec<Arc<Pipeline>>) -> Self {
        Self(Arc::new(std::sync::RwLock::new(pipelines.into())))
    }

    /// The pipelines batches go to from now on.
    pub fn set(&self, pipelines: Vec<Arc<Pipeline>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = pipelines.into();
    }

    fn get(&self) -> Arc<[Arc<Pipeline>]> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How often a batch looks up its pipelines again after meeting one a
/// reload retired; more than one reload would have to land in between.
const ROUTE_ATTEMPTS: usize = 8;

/// Why a batch was not accepted. Nothing of a refused batch was kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumeError {
    /// The memory limit (`memory_limit`), a pipeline (`pipeline_full`) or
    /// an exporter's sending queue (`queue_full`) is full, or a processor's
    /// gate refused (`memory_limiter`): the client should retry later
    /// (gRPC `UNAVAILABLE`, HTTP 429/503).
    #[error("{detail}, retry later")]
    Full {
        retry_after: Duration,
        reason: DropReason,
        detail: String,
    },
    /// Larger than the whole memory budget: can never be accepted (413).
    #[error("batch of {size} bytes exceeds the memory budget of {budget} bytes")]
    TooLarge { size: usize, budget: usize },
    /// The collector is shutting down.
    #[error("the collector is shutting down")]
    ShuttingDown,
}

impl ConsumeError {
    /// The reason the refused samples are counted with, also the outcome
    /// of the refused request or envelope.
    pub fn reason(&self) -> DropReason {
        match self {
            Self::Full { reason, .. } => reason,
            Self::TooLarge { .. } => "too_large",
            Self::ShuttingDown => "shutdown",
        }
    }

    fn full(reason: DropReason, detail: String) -> Self {
        Self::Full {
            retry_after: Duration::from_secs(1),
            reason,
            detail,
        }
    }

    /// The memory limit is reached (or the budget cannot hold `e` at all).
    pub fn memory(e: Exhausted) -> Self {
        if e.never() {
            Self::TooLarge {
                size: e.wanted,
                budget: e.limit,
            }
        } else {
            Self::full("memory_limit", "the memory limit is reached".into())
        }
    }

    /// A processor's gate refused the batch (`memory_limiter`): retry later.
    pub fn refused(reason: DropReason, detail: String) -> Self {
        Self::full(reason, detail)
    }

    pub fn pipeline_full(pipeline: &str) -> Self {
        Self::full("pipeline_full", format!("the pipeline {pipeline} is full"))
    }

    pub fn queue_full(exporter: &str) -> Self {
        Self::full(
            "queue_full",
            format!("the sending queue of exporters::{exporter} is full"),
        )
    }

    pub fn queue_storage(exporter: &str, why: &str) -> Self {
        Self::full(
            "queue_storage",
            format!("the sending queue of exporters::{exporter} cannot store the batch ({why})"),
        )
    }
}

impl Output {
    pub fn new(
        receiver: impl Into<Arc<str>>,
        pipelines: Vec<Arc<Pipeline>>,
        budget: Arc<MemoryBudget>,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        Self {
            receiver: receiver.into(),
            route: Route::new(pipelines),
            budget,
            telemetry,
        }
    }

    /// The handle a reload repoints this output's pipelines with.
    pub fn route(&self) -> Route {
        self.route.clone()
    }

    /// The chain of the one pipeline this output feeds, when it decodes
    /// what it is handed.
    pub async fn claim_chain(&self) -> Option<crate::runtime::Claim> {
        let pipelines = self.route.get();
        match &pipelines[..] {
            [p] => p.claim().await,
            _ => None,
        }
    }

    pub fn receiver_id(&self) -> &str {
        &self.receiver
    }

    /// The collector's memory budget, which a receiver reserves from before
    /// it reads, decodes or converts a request.
    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.budget
    }

    /// Hands `batch` to every pipeline, or to none, and answers only when
    /// it is in every sending queue it goes to (or was refused): `Ok` means
    /// nothing of it will be dropped for lack of room. Counts accepted or
    /// refused samples under the receiver's id.
    ///
    /// A batch without a memory reservation (`meta.memory`) gets one here.
    pub async fn consume(&self, mut batch: ProfileBatch) -> Result<(), ConsumeError> {
        let samples = batch.sample_count();
        let transport = batch.meta.transport;
        let refuse = |e: ConsumeError| {
            self.telemetry
                .receiver_refused(&self.receiver, transport, samples, e.reason());
            Err(e)
        };
        if batch.meta.memory.is_none() {
            match self.budget.try_admit(batch.held_bytes()) {
                Ok(r) => batch.meta.memory = Some(Held::new(r)),
                Err(e) => return refuse(ConsumeError::memory(e)),
            }
        }
        batch.meta.receiver = self.receiver.to_string();
        match self.prepare(Arc::new(batch), true).await {
            Ok(ready) => ready.commit(),
            Err(e) => return refuse(e),
        }
        self.telemetry
            .receiver_accepted(&self.receiver, transport, samples);
        Ok(())
    }
}

impl Output {
    /// The first phase of [`Output::consume`] for a batch that already
    /// holds its memory reservation: through every pipeline, holding their
    /// exporters' slots, nothing committed. A connector hands what its
    /// pipeline exports to the pipelines it is a receiver of this way, so
    /// that a batch is accepted by all of them or refused by all.
    ///
    /// `gates`: ask the pipelines' gates (`memory_limiter`) first. A batch
    /// already accepted (what a `batch` processor emits) passes them, as it
    /// passes into exporter queues, waiting only for room.
    pub fn prepare(
        &self,
        batch: Arc<ProfileBatch>,
        gates: bool,
    ) -> futures::future::BoxFuture<'_, Result<Ready, ConsumeError>> {
        Box::pin(async move {
            // A pipeline a reload retired closes its admission once the
            // batches in it are through; the route then names its successor.
            let mut attempt = 0;
            let (pipelines, admitted) = loop {
                attempt += 1;
                let pipelines = self.route.get();
                for p in pipelines.iter().filter(|_| gates) {
                    p.check_gates()?;
                }
                let mut admitted = Vec::with_capacity(pipelines.len());
                let mut retired = false;
                for p in pipelines.iter() {
                    match p.admission.clone().try_acquire_owned() {
                        Ok(permit) => admitted.push(permit),
                        Err(tokio::sync::TryAcquireError::Closed) => {
                            retired = true;
                            break;
                        }
                        // A retiring pipeline's permits go to its
                        // retirement: full only if it is still the one
                        // routed to.
                        Err(tokio::sync::TryAcquireError::NoPermits)
                            if Arc::ptr_eq(&pipelines, &self.route.get()) =>
                        {
                            return Err(ConsumeError::pipeline_full(&p.id))
                        }
                        Err(tokio::sync::TryAcquireError::NoPermits) => {
                            retired = true;
                            break;
                        }
                    }
                }
                match (retired, attempt < ROUTE_ATTEMPTS) {
                    (false, _) => break (pipelines, admitted),
                    (true, true) => tokio::task::yield_now().await,
                    (true, false) => return Err(ConsumeError::ShuttingDown),
                }
            };
            // The last pipeline takes the batch itself: one that is not
            // shared is processed in place, not copied
            // (`Arc::unwrap_or_clone`).
            let mut batch = Some(batch);
            let last = pipelines.len().saturating_sub(1);
            let prepared = futures::future::join_all(pipelines.iter().enumerate().map(|(i, p)| {
                let b = if i == last {
                    batch.take()
                } else {
                    batch.clone()
                };
                p.prepare(b.expect("taken only by the last pipeline"))
            }))
            .await;
            let mut ready = Vec::with_capacity(prepared.len());
            for p in prepared {
                // Every slot held so far is given back as `ready` drops.
                ready.push(p?);
            }
            Ok(Ready {
                prepared: ready,
                _admitted: admitted,
            })
        })
    }
}

/// A batch through every pipeline of an [`Output`], their slots held.
pub struct Ready {
    prepared: Vec<crate::runtime::Prepared>,
    _admitted: Vec<tokio::sync::OwnedSemaphorePermit>,
}

impl Ready {
    /// Hands the batch on in every pipeline (see [`crate::runtime::Prepared::commit`]).
    pub fn commit(self) {
        for p in self.prepared {
            p.commit();
        }
    }
}

/// Handed to a receiver when it starts.
#[derive(Clone)]
pub struct ReceiverContext {
    pub id: String,
    pub output: Output,
    pub shutdown: CancellationToken,
    pub telemetry: Arc<Telemetry>,
    pub authenticators: super::Authenticators,
    /// The storage extensions of the running config, by id.
    pub storages: Storages,
}

/// Storage extensions by id.
pub type Storages = Arc<std::collections::HashMap<String, Arc<dyn super::Storage>>>;

/// Handed to a processor on every batch: where it counts what it drops.
///
/// Made with [`ProcessContext::new`], counts go to the telemetry at once;
/// the runtime makes it [`ProcessContext::deferred`] and applies the counts
/// only once the batch is accepted (a batch refused downstream is retried
/// by its client, and must not be counted twice).
pub struct ProcessContext<'a> {
    pub pipeline: &'a str,
    pub processor: &'a str,
    telemetry: Option<&'a Telemetry>,
    dropped: u64,
    drops: Vec<(DropReason, u64)>,
    events: Vec<(&'static str, u64)>,
}

impl<'a> ProcessContext<'a> {
    pub fn new(pipeline: &'a str, processor: &'a str, telemetry: &'a Telemetry) -> Self {
        Self {
            telemetry: Some(telemetry),
            ..Self::deferred(pipeline, processor)
        }
    }

    /// Keeps the counts for [`ProcessContext::into_counts`].
    pub fn deferred(pipeline: &'a str, processor: &'a str) -> Self {
        Self {
            pipeline,
            processor,
            telemetry: None,
            dropped: 0,
            drops: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Counts `samples` removed from the batch for `reason`.
    pub fn dropped(&mut self, samples: u64, reason: DropReason) {
        if samples == 0 {
            // The Collector's filter records its counter on every batch, 0
            // too: dashboards find the series from the first batch on.
            if let (Some(t), "filtered") = (self.telemetry, reason) {
                t.filter_filtered(self.processor, 0);
            }
            return;
        }
        self.dropped += samples;
        match self.telemetry {
            Some(t) => t.processor_dropped(self.pipeline, self.processor, samples, reason),
            None => self.drops.push((reason, samples)),
        }
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped
    }

    /// Counts a non-sample event (an unknown unit, pruned thread metadata).
    pub fn event(&mut self, what: &'static str, n: u64) {
        match self.telemetry {
            Some(t) => t.processor_event(self.processor, what, n),
            None => self.events.push((what, n)),
        }
    }

    /// What a deferred context counted: drops by reason, events.
    pub fn into_counts(self) -> ProcessorCounts {
        ProcessorCounts {
            drops: self.drops,
            events: self.events,
        }
    }
}

/// Counts of one processor on one batch, applied once the batch is
/// accepted.
#[derive(Debug, Default, Clone)]
pub struct ProcessorCounts {
    pub drops: Vec<(DropReason, u64)>,
    pub events: Vec<(&'static str, u64)>,
}

/// Handed to an exporter on start and with every batch.
#[derive(Clone)]
pub struct ExporterContext {
    pub id: String,
    pub telemetry: Arc<Telemetry>,
    pub authenticators: super::Authenticators,
    /// The collector's memory budget: what an exporter keeps beyond a
    /// request (the `prometheus` exporter's series) is reserved there.
    pub budget: Arc<profcol_model::memory::MemoryBudget>,
}

impl ExporterContext {
    /// Counts dropped samples. Only the runtime calls it: an exporter returns
    /// what it decided not to send in `ExportOutcome::dropped`, so that every
    /// sample is counted exactly once whatever happens to the batch.
    pub(crate) fn dropped(&self, samples: u64, reason: DropReason) {
        self.telemetry.exporter_dropped(&self.id, samples, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_counter_is_served_from_the_first_batch() {
        let t = Telemetry::new();
        let series = "otelcol_processor_filter_profiles_filtered_total{filter=\"filter/noisy\"}";
        let mut ctx = ProcessContext::new("profiles", "filter/noisy", &t);
        ctx.dropped(0, "filtered");
        let text = t.encode_text();
        assert!(text.contains(&format!("{series} 0\n")), "{text}");
        ctx.dropped(3, "filtered");
        assert!(t.encode_text().contains(&format!("{series} 3\n")));
        // Other reasons of 0 samples still count nothing.
        ctx.dropped(0, "sampled_out");
        assert!(!t.encode_text().contains("sampled_out"));
    }
}
