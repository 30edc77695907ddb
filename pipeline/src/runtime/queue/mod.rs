//! An exporter's sending queue: the one place a batch waits between the
//! pipeline that produced it and the consumers that send it.
//!
//! Admission is two-phase so that a receiver can tell its client the truth:
//! a pipeline first reserves a slot in every queue the batch goes to
//! ([`Queue::try_reserve`], or [`Queue::reserve`] with
//! `block_on_overflow`), and only when every slot of every pipeline is
//! held are they committed; a slot dropped uncommitted gives its room back.
//! Consumers [`Queue::take`] a batch with an [`Ack`], settled once its send
//! is done (a persistent queue deletes the batch only then).

mod memory;

use std::sync::Arc;

use async_trait::async_trait;

use crate::model::ProfileBatch;

pub use memory::MemoryQueue;

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
    async fn commit(self: Box<Self>, batch: Arc<ProfileBatch>) -> Result<(), QueueError>;
}

/// Settles a batch taken from the queue; dropping it without [`Ack::done`]
/// leaves a persistent queue's copy in place for the next start.
pub struct Ack(Option<Box<dyn FnOnce() + Send>>);

impl Ack {
    pub fn none() -> Self {
        Self(None)
    }

    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Self(Some(Box::new(f)))
    }

    pub fn done(mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

#[async_trait]
pub trait Queue: Send + Sync {
    /// A slot if the queue has room now.
    fn try_reserve(&self) -> Result<Box<dyn Slot>, QueueError>;
    /// Waits for room (`block_on_overflow`); `Closed` once the queue is.
    async fn reserve(&self) -> Result<Box<dyn Slot>, QueueError>;
    /// The next batch, waiting for one; `None` once closed and empty.
    async fn take(&self) -> Option<(Arc<ProfileBatch>, Ack)>;
    /// Batches queued (not counting those being sent).
    fn size(&self) -> usize;
    fn capacity(&self) -> usize;
    /// No more batches are accepted; consumers drain what is queued.
    fn close(&self);
}
