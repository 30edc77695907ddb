use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::model::ProfileBatch;
use crate::telemetry::Telemetry;

/// Why samples were dropped or refused; the `reason` label of the metrics.
pub type DropReason = &'static str;

/// Where a receiver hands its batches: every pipeline that lists it.
#[derive(Clone)]
pub struct Output {
    receiver: Arc<str>,
    inboxes: Arc<[mpsc::Sender<Arc<ProfileBatch>>]>,
    budget: Arc<Semaphore>,
    budget_bytes: usize,
    telemetry: Arc<Telemetry>,
}

/// Why a batch was not accepted. Nothing of a refused batch was kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumeError {
    /// A pipeline inbox (`pipeline_full`) or the memory limit
    /// (`memory_limit`) is full: the client should retry later (gRPC
    /// `UNAVAILABLE`, HTTP 429).
    #[error("{}, retry later", full_message(.reason))]
    Full {
        retry_after: Duration,
        reason: DropReason,
    },
    /// Larger than the whole byte budget: can never be accepted (413).
    #[error("batch of {size} bytes exceeds the memory budget of {budget} bytes")]
    TooLarge { size: usize, budget: usize },
    /// The collector is shutting down.
    #[error("the collector is shutting down")]
    ShuttingDown,
}

const MEMORY_LIMIT: DropReason = "memory_limit";
const PIPELINE_FULL: DropReason = "pipeline_full";

fn full_message(reason: &DropReason) -> &'static str {
    if *reason == MEMORY_LIMIT {
        "the memory limit is reached"
    } else {
        "the pipeline is full"
    }
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
}

/// Held by a batch while it is in flight; returns its bytes to the budget.
#[derive(Debug)]
struct BudgetShare(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

impl Output {
    pub fn new(
        receiver: impl Into<Arc<str>>,
        inboxes: Vec<mpsc::Sender<Arc<ProfileBatch>>>,
        budget: Arc<Semaphore>,
        budget_bytes: usize,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        Self {
            receiver: receiver.into(),
            inboxes: inboxes.into(),
            budget,
            budget_bytes,
            telemetry,
        }
    }

    pub fn receiver_id(&self) -> &str {
        &self.receiver
    }

    /// Hands `batch` to every pipeline, or to none: either every inbox has
    /// room and the batch is accepted, or nothing is sent and it is refused.
    /// Counts accepted/refused samples under the receiver's id.
    pub fn consume(&self, mut batch: ProfileBatch) -> Result<(), ConsumeError> {
        let samples = batch.sample_count();
        let transport = batch.meta.transport;
        let refuse = |e: ConsumeError| {
            self.telemetry
                .receiver_refused(&self.receiver, transport, samples, e.reason());
            Err(e)
        };
        let size = batch.encoded_len().max(1);
        if size > self.budget_bytes {
            return refuse(ConsumeError::TooLarge {
                size,
                budget: self.budget_bytes,
            });
        }
        let permits = u32::try_from(size).unwrap_or(u32::MAX);
        let share = match self.budget.clone().try_acquire_many_owned(permits) {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => return refuse(ConsumeError::ShuttingDown),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                return refuse(ConsumeError::Full {
                    retry_after: Duration::from_secs(1),
                    reason: MEMORY_LIMIT,
                })
            }
        };
        let mut reserved = Vec::with_capacity(self.inboxes.len());
        for inbox in self.inboxes.iter() {
            match inbox.try_reserve() {
                Ok(p) => reserved.push(p),
                Err(mpsc::error::TrySendError::Closed(())) => {
                    return refuse(ConsumeError::ShuttingDown)
                }
                Err(mpsc::error::TrySendError::Full(())) => {
                    return refuse(ConsumeError::Full {
                        retry_after: Duration::from_secs(1),
                        reason: PIPELINE_FULL,
                    })
                }
            }
        }
        batch.meta.budget = Some(Arc::new(BudgetShare(share)));
        batch.meta.receiver = self.receiver.to_string();
        let batch = Arc::new(batch);
        for permit in reserved {
            permit.send(batch.clone());
        }
        self.telemetry
            .receiver_accepted(&self.receiver, transport, samples);
        Ok(())
    }
}

/// Handed to a receiver when it starts.
#[derive(Clone)]
pub struct ReceiverContext {
    pub id: String,
    pub output: Output,
    pub shutdown: CancellationToken,
    pub telemetry: Arc<Telemetry>,
}

/// Handed to a processor on every batch: where it counts what it drops.
pub struct ProcessContext<'a> {
    pub pipeline: &'a str,
    pub processor: &'a str,
    pub telemetry: &'a Telemetry,
    dropped: u64,
}

impl<'a> ProcessContext<'a> {
    pub fn new(pipeline: &'a str, processor: &'a str, telemetry: &'a Telemetry) -> Self {
        Self {
            pipeline,
            processor,
            telemetry,
            dropped: 0,
        }
    }

    /// Counts `samples` removed from the batch for `reason`.
    pub fn dropped(&mut self, samples: u64, reason: DropReason) {
        if samples == 0 {
            return;
        }
        self.dropped += samples;
        self.telemetry
            .processor_dropped(self.pipeline, self.processor, samples, reason);
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped
    }

    /// Counts a non-sample event (an unknown unit, pruned thread metadata).
    pub fn event(&self, what: &'static str, n: u64) {
        self.telemetry.processor_event(self.processor, what, n);
    }
}

/// Handed to an exporter on start and with every batch.
#[derive(Clone)]
pub struct ExporterContext {
    pub id: String,
    pub telemetry: Arc<Telemetry>,
}

impl ExporterContext {
    /// Counts dropped samples. Only the runtime calls it: an exporter returns
    /// what it decided not to send in `ExportOutcome::dropped`, so that every
    /// sample is counted exactly once whatever happens to the batch.
    pub(crate) fn dropped(&self, samples: u64, reason: DropReason) {
        self.telemetry.exporter_dropped(&self.id, samples, reason);
    }
}
