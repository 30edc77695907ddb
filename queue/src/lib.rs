//! An exporter's sending queue: the one place a batch waits between the
//! pipeline that produced it and the consumers that send it.
//!
//! Admission is two-phase so that a receiver can tell its client the truth:
//! a pipeline first reserves a slot in every queue the batch goes to
//! ([`Queue::try_reserve`], or [`Queue::reserve`] with
//! `block_on_overflow`) and [`Slot::write`]s the batch into it (a
//! persistent queue stores it on disk then); only when every slot of every
//! pipeline holds the batch are they committed, and a slot dropped
//! uncommitted gives its room back. Consumers [`Queue::take`] a request
//! with an [`Ack`], settled once its send is done (a persistent queue
//! deletes the request only then, and keeps the progress of a part-sent
//! one).

pub mod disk;
mod memory;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use profcol_model::ProfileBatch;

pub use disk::{Blob, BlobLog, DiskQueue, DiskQueueOptions, Location, OnCorrupt, RecoveredBlobs};
pub use memory::MemoryQueue;

/// What an exporter sends: a batch, and how far earlier attempts got with
/// it. An exporter that sends a request in parts records its progress as
/// it goes, so that the next attempt (after a failure, a timeout, or a
/// restart with a persistent queue) sends only what remains.
#[derive(Debug, Clone)]
pub struct Request {
    pub batch: Arc<ProfileBatch>,
    progress: Arc<std::sync::Mutex<Progress>>,
}

impl Request {
    pub fn new(batch: Arc<ProfileBatch>) -> Self {
        Self::resumed(batch, Progress::default())
    }

    /// A request earlier attempts got as far as `progress` with.
    pub fn resumed(batch: Arc<ProfileBatch>, progress: Progress) -> Self {
        Self {
            batch,
            progress: Arc::new(std::sync::Mutex::new(progress)),
        }
    }

    pub fn progress(&self) -> Progress {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records how far the export got, at once: an attempt cut short by
    /// the timeout or shutdown keeps it.
    pub fn record(&self, progress: Progress) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = progress;
    }
}

/// How far the export of a batch got over earlier attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// Samples delivered.
    pub delivered: u64,
    /// Samples the peer refused for good.
    pub rejected: u64,
    /// Where the next attempt resumes, in the exporter's own terms (the
    /// Sentry exporter: chunks done, and the clock its chunks were cut by).
    pub resume: Option<serde_json::Value>,
}

/// What `queue_size` counts, as the Collector's `sending_queue.sizer`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sizer {
    /// Requests (batches).
    #[default]
    Requests,
    /// Bytes of the requests' protobuf encoding.
    Bytes,
    /// The smallest parts of the signal, as in the Collector: profile
    /// samples (observations), metric data points. In memory only: a
    /// persistent queue would have to decode every stored request at start
    /// to count them.
    Items,
}

/// Why a batch could not be queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("the sending queue is full")]
    Full,
    #[error("the sending queue is closed")]
    Closed,
    /// A persistent queue could not store the batch (disk full, I/O error).
    #[error("the sending queue cannot store the batch: {0}")]
    Storage(String),
}

/// Room for one batch, held until committed or dropped.
#[async_trait]
pub trait Slot: Send {
    /// Puts the batch in the slot; a persistent queue stores it (durably
    /// with `fsync`). Consumers do not see it before [`Slot::commit`].
    async fn write(&mut self, batch: &Arc<ProfileBatch>) -> Result<(), QueueError>;
    /// Hands the written batch to the consumers.
    fn commit(self: Box<Self>);
}

/// How a consumer settles a request it took.
#[async_trait]
pub trait Settle: Send {
    /// Part of the request went out: a restart resumes from here.
    async fn progress(&mut self, progress: &Progress);
    /// The request is settled (delivered, failed for good, or dropped).
    async fn done(self: Box<Self>);
    /// Puts the request back at the front of the queue with its progress,
    /// for the next consumer (the successor of one a config reload
    /// retired). Room is not checked: the queue accepted it already.
    fn requeue(self: Box<Self>, req: Request);
}

/// Settles a request taken from the queue; dropping it without
/// [`Ack::done`] leaves a persistent queue's copy for the next start.
pub struct Ack(Option<Box<dyn Settle>>);

impl Ack {
    pub fn new(s: impl Settle + 'static) -> Self {
        Self(Some(Box::new(s)))
    }

    pub async fn progress(&mut self, progress: &Progress) {
        if let Some(s) = &mut self.0 {
            s.progress(progress).await;
        }
    }

    pub async fn done(mut self) {
        if let Some(s) = self.0.take() {
            s.done().await;
        }
    }

    /// [`Settle::requeue`].
    pub fn requeue(mut self, req: Request) {
        if let Some(s) = self.0.take() {
            s.requeue(req);
        }
    }
}

#[async_trait]
pub trait Queue: Send + Sync {
    /// A slot for `batch` if the queue has room now.
    fn try_reserve(&self, batch: &ProfileBatch) -> Result<Box<dyn Slot>, QueueError>;
    /// Waits for room (`block_on_overflow`); `Closed` once the queue is.
    async fn reserve(&self, batch: &ProfileBatch) -> Result<Box<dyn Slot>, QueueError>;
    /// The next request, waiting for one; `None` once closed (and, for a
    /// memory queue, empty: a persistent one keeps the rest for the next
    /// start).
    async fn take(&self) -> Option<(Request, Ack)>;
    /// Requests queued (not counting those being sent).
    fn size(&self) -> usize;
    /// `queue_size`, in the unit of the sizer.
    fn capacity(&self) -> usize;
    /// No more batches are accepted.
    fn close(&self);
    /// What is queued outlives the process.
    fn persistent(&self) -> bool {
        false
    }
}

/// How much of a queue's capacity a batch takes.
pub fn size_of(sizer: Sizer, batch: &ProfileBatch) -> usize {
    match sizer {
        Sizer::Requests => 1,
        Sizer::Bytes => batch.encoded_len(),
        Sizer::Items => usize::try_from(batch.sample_count()).unwrap_or(usize::MAX),
    }
}
