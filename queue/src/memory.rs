//! The in-memory queue: bounded, FIFO, shared by every consumer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Notify;

use super::{size_of, Ack, Queue, QueueError, Settle, Slot};
use crate::Sizer;
use crate::{Progress, Request};
use profcol_model::ProfileBatch;

pub struct MemoryQueue {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    sizer: Sizer,
    state: Mutex<State>,
    not_empty: Notify,
    not_full: Notify,
}

#[derive(Default)]
struct State {
    /// Batches, their sizes, and the progress of those handed back.
    items: VecDeque<(Arc<ProfileBatch>, usize, Progress)>,
    /// Size of the queued items.
    used: usize,
    /// Size held by slots handed out and not yet committed or dropped.
    reserved: usize,
    closed: bool,
}

impl MemoryQueue {
    pub fn new(capacity: usize, sizer: Sizer) -> Self {
        Self {
            inner: Arc::new(Inner {
                capacity: capacity.max(1),
                sizer,
                state: Mutex::new(State::default()),
                not_empty: Notify::new(),
                not_full: Notify::new(),
            }),
        }
    }
}

/// Whether `size` more fits: within capacity, or alone in an empty queue
/// (a batch larger than the whole queue would otherwise never go).
pub(super) fn fits(used: usize, size: usize, capacity: usize) -> bool {
    used == 0 || used + size <= capacity
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_reserve(self: &Arc<Self>, batch: &ProfileBatch) -> Result<Box<dyn Slot>, QueueError> {
        let size = size_of(self.sizer, batch);
        let mut s = self.lock();
        if s.closed {
            return Err(QueueError::Closed);
        }
        if !fits(s.used + s.reserved, size, self.capacity) {
            return Err(QueueError::Full);
        }
        s.reserved += size;
        Ok(Box::new(MemorySlot {
            queue: Some(self.clone()),
            size,
            batch: None,
        }))
    }
}

struct MemorySlot {
    queue: Option<Arc<Inner>>,
    size: usize,
    batch: Option<Arc<ProfileBatch>>,
}

#[async_trait]
impl Slot for MemorySlot {
    async fn write(&mut self, batch: &Arc<ProfileBatch>) -> Result<(), QueueError> {
        self.batch = Some(batch.clone());
        Ok(())
    }

    fn commit(mut self: Box<Self>) {
        let q = self.queue.take().expect("a slot is committed once");
        let batch = self
            .batch
            .take()
            .expect("a slot is written before it is committed");
        {
            let mut s = q.lock();
            s.reserved -= self.size;
            s.used += self.size;
            s.items.push_back((batch, self.size, Progress::default()));
        }
        q.not_empty.notify_one();
    }
}

impl Drop for MemorySlot {
    fn drop(&mut self) {
        if let Some(q) = self.queue.take() {
            q.lock().reserved -= self.size;
            q.not_full.notify_one();
        }
    }
}

/// What a memory queue needs to take a request back; settling is nothing.
struct MemoryAck {
    queue: Arc<Inner>,
    size: usize,
}

#[async_trait]
impl Settle for MemoryAck {
    async fn progress(&mut self, _: &Progress) {}

    async fn done(self: Box<Self>) {}

    fn requeue(self: Box<Self>, req: Request) {
        let mut s = self.queue.lock();
        s.used += self.size;
        s.items
            .push_front((req.batch.clone(), self.size, req.progress()));
        drop(s);
        self.queue.not_empty.notify_one();
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    fn try_reserve(&self, batch: &ProfileBatch) -> Result<Box<dyn Slot>, QueueError> {
        self.inner.try_reserve(batch)
    }

    async fn reserve(&self, batch: &ProfileBatch) -> Result<Box<dyn Slot>, QueueError> {
        loop {
            let room = self.inner.not_full.notified();
            match self.inner.try_reserve(batch) {
                Err(QueueError::Full) => room.await,
                other => return other,
            }
        }
    }

    async fn take(&self) -> Option<(Request, Ack)> {
        loop {
            let more = self.inner.not_empty.notified();
            {
                let mut s = self.inner.lock();
                if let Some((b, size, progress)) = s.items.pop_front() {
                    s.used -= size;
                    drop(s);
                    self.inner.not_full.notify_one();
                    let ack = Ack::new(MemoryAck {
                        queue: self.inner.clone(),
                        size,
                    });
                    return Some((Request::resumed(b, progress), ack));
                }
                if s.closed {
                    return None;
                }
            }
            more.await;
        }
    }

    fn size(&self) -> usize {
        self.inner.lock().items.len()
    }

    fn capacity(&self) -> usize {
        self.inner.capacity
    }

    fn close(&self) {
        self.inner.lock().closed = true;
        self.inner.not_empty.notify_waiters();
        self.inner.not_full.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn batch() -> Arc<ProfileBatch> {
        Arc::new(ProfileBatch::default())
    }

    /// A request handed back goes first, with its progress, and counts in
    /// the queue's size again.
    #[tokio::test]
    async fn a_request_handed_back_is_taken_first_with_its_progress() {
        let q = MemoryQueue::new(10, Sizer::Requests);
        let (a, b) = (batch(), batch());
        for x in [&a, &b] {
            let mut slot = q.try_reserve(x).unwrap();
            slot.write(x).await.unwrap();
            slot.commit();
        }
        let (r, ack) = q.take().await.unwrap();
        r.record(Progress {
            delivered: 4,
            ..Progress::default()
        });
        ack.requeue(r);
        assert_eq!(q.size(), 2);
        let (r, _) = q.take().await.unwrap();
        assert!(Arc::ptr_eq(&r.batch, &a));
        assert_eq!(r.progress().delivered, 4);
        let (r, _) = q.take().await.unwrap();
        assert!(Arc::ptr_eq(&r.batch, &b));
        assert_eq!(r.progress(), Progress::default());
    }

    /// `sizer: items` counts samples: two batches of 100 fill a queue of
    /// 250, and taking one makes room for another.
    #[tokio::test]
    async fn an_items_queue_counts_samples() {
        let b = ProfileBatch::new(profcol_model::synth::requests(1, 100, 20).pop().unwrap());
        assert_eq!(b.sample_count(), 100);
        let q = MemoryQueue::new(250, Sizer::Items);
        for _ in 0..2 {
            let mut slot = q.try_reserve(&b).unwrap();
            slot.write(&Arc::new(b.clone())).await.unwrap();
            slot.commit();
        }
        assert_eq!(q.size(), 2);
        assert_eq!(q.try_reserve(&b).err(), Some(QueueError::Full));
        q.take().await.unwrap();
        assert!(q.try_reserve(&b).is_ok(), "taking one makes room for 100");
    }

    async fn commit(mut slot: Box<dyn Slot>) {
        slot.write(&batch()).await.unwrap();
        slot.commit();
    }

    #[tokio::test]
    async fn slots_hold_room_until_committed_or_dropped() {
        let q = MemoryQueue::new(2, Sizer::Requests);
        let a = q.try_reserve(&ProfileBatch::default()).unwrap();
        let b = q.try_reserve(&ProfileBatch::default()).unwrap();
        assert_eq!(
            q.try_reserve(&ProfileBatch::default()).err(),
            Some(QueueError::Full)
        );
        drop(b);
        let c = q.try_reserve(&ProfileBatch::default()).unwrap();
        commit(a).await;
        assert_eq!(q.size(), 1);
        assert_eq!(
            q.try_reserve(&ProfileBatch::default()).err(),
            Some(QueueError::Full),
            "one queued, one held"
        );
        commit(c).await;
        assert!(q.take().await.is_some());
        assert!(
            q.try_reserve(&ProfileBatch::default()).is_ok(),
            "taking makes room"
        );
    }

    // The paused clock: the 20 ms wait passes once the reserve is blocked,
    // however loaded the machine.
    #[tokio::test(start_paused = true)]
    async fn a_blocked_reserve_gets_room_when_a_batch_is_taken_and_close_drains() {
        let q = Arc::new(MemoryQueue::new(1, Sizer::Requests));
        commit(q.try_reserve(&ProfileBatch::default()).unwrap()).await;
        let q2 = q.clone();
        let waiting =
            tokio::spawn(async move { q2.reserve(&ProfileBatch::default()).await.is_ok() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(q.take().await.is_some());
        assert!(waiting.await.unwrap());
        q.close();
        assert_eq!(
            q.try_reserve(&ProfileBatch::default()).err(),
            Some(QueueError::Closed)
        );
        assert!(q.take().await.is_none(), "closed and empty");
    }

    #[tokio::test]
    async fn a_bytes_sizer_counts_encoded_bytes_and_admits_one_oversize_batch_alone() {
        let big = ProfileBatch::new(profcol_model::synth::request(200, 50));
        let len = big.encoded_len();
        let q = MemoryQueue::new(len + len / 2, Sizer::Bytes);
        let first = q.try_reserve(&big).unwrap();
        assert_eq!(q.try_reserve(&big).err(), Some(QueueError::Full));
        drop(first);
        // Larger than the whole queue, but alone: admitted.
        let q = MemoryQueue::new(len / 2, Sizer::Bytes);
        let slot = q.try_reserve(&big).unwrap();
        assert_eq!(
            q.try_reserve(&ProfileBatch::default()).err(),
            Some(QueueError::Full)
        );
        drop(slot);
        assert!(q.try_reserve(&big).is_ok());
    }
}
