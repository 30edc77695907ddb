//! The in-memory queue: bounded, FIFO, shared by every consumer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Notify;

use super::{Ack, Queue, QueueError, Slot};
use crate::model::ProfileBatch;

pub struct MemoryQueue {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    state: Mutex<State>,
    not_empty: Notify,
    not_full: Notify,
}

#[derive(Default)]
struct State {
    items: VecDeque<Arc<ProfileBatch>>,
    /// Slots handed out and not yet committed or dropped.
    reserved: usize,
    closed: bool,
}

impl MemoryQueue {
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                capacity: capacity.max(1),
                state: Mutex::new(State::default()),
                not_empty: Notify::new(),
                not_full: Notify::new(),
            }),
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_reserve(self: &Arc<Self>) -> Result<Box<dyn Slot>, QueueError> {
        let mut s = self.lock();
        if s.closed {
            return Err(QueueError::Closed);
        }
        if s.items.len() + s.reserved >= self.capacity {
            return Err(QueueError::Full);
        }
        s.reserved += 1;
        Ok(Box::new(MemorySlot {
            queue: Some(self.clone()),
        }))
    }
}

struct MemorySlot {
    queue: Option<Arc<Inner>>,
}

#[async_trait]
impl Slot for MemorySlot {
    async fn commit(mut self: Box<Self>, batch: Arc<ProfileBatch>) -> Result<(), QueueError> {
        let q = self.queue.take().expect("a slot is committed once");
        {
            let mut s = q.lock();
            s.reserved -= 1;
            s.items.push_back(batch);
        }
        q.not_empty.notify_one();
        Ok(())
    }
}

impl Drop for MemorySlot {
    fn drop(&mut self) {
        if let Some(q) = self.queue.take() {
            q.lock().reserved -= 1;
            q.not_full.notify_one();
        }
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    fn try_reserve(&self) -> Result<Box<dyn Slot>, QueueError> {
        self.inner.try_reserve()
    }

    async fn reserve(&self) -> Result<Box<dyn Slot>, QueueError> {
        loop {
            let room = self.inner.not_full.notified();
            match self.inner.try_reserve() {
                Err(QueueError::Full) => room.await,
                other => return other,
            }
        }
    }

    async fn take(&self) -> Option<(Arc<ProfileBatch>, Ack)> {
        loop {
            let more = self.inner.not_empty.notified();
            {
                let mut s = self.inner.lock();
                if let Some(b) = s.items.pop_front() {
                    drop(s);
                    self.inner.not_full.notify_one();
                    return Some((b, Ack::none()));
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

    #[tokio::test]
    async fn slots_hold_room_until_committed_or_dropped() {
        let q = MemoryQueue::new(2);
        let a = q.try_reserve().unwrap();
        let b = q.try_reserve().unwrap();
        assert_eq!(q.try_reserve().err(), Some(QueueError::Full));
        drop(b);
        let c = q.try_reserve().unwrap();
        a.commit(batch()).await.unwrap();
        assert_eq!(q.size(), 1);
        assert_eq!(
            q.try_reserve().err(),
            Some(QueueError::Full),
            "one queued, one held"
        );
        c.commit(batch()).await.unwrap();
        assert!(q.take().await.is_some());
        assert!(q.try_reserve().is_ok(), "taking makes room");
    }

    #[tokio::test]
    async fn a_blocked_reserve_gets_room_when_a_batch_is_taken_and_close_drains() {
        let q = Arc::new(MemoryQueue::new(1));
        q.try_reserve().unwrap().commit(batch()).await.unwrap();
        let q2 = q.clone();
        let waiting = tokio::spawn(async move { q2.reserve().await.is_ok() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(q.take().await.is_some());
        assert!(waiting.await.unwrap());
        q.close();
        assert_eq!(q.try_reserve().err(), Some(QueueError::Closed));
        assert!(q.take().await.is_none(), "closed and empty");
    }
}
