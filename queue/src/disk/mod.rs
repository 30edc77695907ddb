//! The persistent queue (`sending_queue.storage`): every request is
//! appended to a segment file before the client is answered, and deleted
//! (its segment, once every request in it is) only when its send settles.
//!
//! Why a segment log of our own rather than an embedded database: the
//! queue is a FIFO of large blobs (MBs) written once, read once, deleted in
//! order. Appending them costs one write (and one `fdatasync` with
//! `fsync`), and reclaiming them deletes a file; a B-tree store (redb,
//! bbolt) would copy each blob into pages, free them page by page and need
//! compaction to give disk space back. Every record carries a CRC32C, so a
//! torn write or a damaged page costs the records it touched, counted, and
//! never the queue (see [`record`]).
//!
//! Layout of the queue's directory: `VERSION`, `LOCK` (held while a
//! process uses the queue), `NNNN.seg` (records, named by the first
//! sequence number) and `NNNN.acks` (which of that segment's requests are
//! settled, and the progress of part-sent ones).

mod blob;
pub mod record;
mod store;

pub use blob::{Blob, BlobLog, RecoveredBlobs};
pub use store::Location;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;

use super::memory::fits;
use super::{size_of, Ack, Queue, QueueError, Settle, Slot};
use crate::Sizer;
use crate::{Progress, Request};
use profcol_model::memory::{Held, MemoryBudget};
use profcol_model::ProfileBatch;

use store::{Recovered, Store};

/// Counts damaged records and files a persistent queue found and skipped
/// (the runtime: its exporter's `profcol_exporter_queue_corrupt_records_total`).
pub type OnCorrupt = Arc<dyn Fn(u64) + Send + Sync>;

pub struct DiskQueueOptions {
    /// The queue's own directory (created if missing).
    pub directory: PathBuf,
    /// `fdatasync` every request before the client is answered, and every
    /// ack: nothing acknowledged is lost even at power loss.
    pub fsync: bool,
    /// `queue_size`, in the sizer's unit.
    pub capacity: usize,
    pub sizer: Sizer,
    /// Requests also kept in memory while queued, so that a queue drained
    /// as fast as it fills never reads back or decodes what it wrote.
    pub resident: usize,
    /// A segment file is closed for appends past this size.
    pub segment_bytes: u64,
}

pub struct DiskQueue {
    inner: Arc<Inner>,
}

struct Inner {
    owner: String,
    capacity: usize,
    sizer: Sizer,
    resident_max: usize,
    budget: Arc<MemoryBudget>,
    on_corrupt: OnCorrupt,
    state: Mutex<State>,
    store: Arc<Mutex<Store>>,
    not_empty: Notify,
    not_full: Notify,
}

#[derive(Default)]
struct State {
    pending: VecDeque<Entry>,
    used: usize,
    reserved: usize,
    /// Pending entries whose batch is in memory.
    resident: usize,
    closed: bool,
}

struct Entry {
    at: Location,
    size: usize,
    batch: Option<Arc<ProfileBatch>>,
    progress: Progress,
}

impl DiskQueue {
    /// Opens the queue, queueing again what an earlier run left. Damage
    /// found on the way (records, ack files, a directory of another
    /// version) is counted with `on_corrupt` and logged with `owner`.
    pub async fn open(
        opts: DiskQueueOptions,
        owner: &str,
        budget: Arc<MemoryBudget>,
        on_corrupt: OnCorrupt,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            opts.sizer != Sizer::Items,
            "a persistent queue is sized in requests or bytes, not items (it would have to decode every stored request at start to count them)"
        );
        let (dir, fsync, segment_bytes) = (opts.directory.clone(), opts.fsync, opts.segment_bytes);
        let owner_log = owner.to_owned();
        let (store, recovered) = tokio::task::spawn_blocking(move || {
            Store::open(&dir, fsync, segment_bytes, &owner_log)
        })
        .await??;
        let Recovered { entries, corrupt } = recovered;
        if corrupt > 0 {
            on_corrupt(corrupt);
        }
        let mut state = State::default();
        for (at, progress) in entries {
            let size = match opts.sizer {
                Sizer::Requests | Sizer::Items => 1,
                Sizer::Bytes => at.payload_len() as usize,
            };
            state.used += size;
            state.pending.push_back(Entry {
                at,
                size,
                batch: None,
                progress,
            });
        }
        if !state.pending.is_empty() {
            tracing::info!(exporter = owner, requests = state.pending.len(), directory = %opts.directory.display(), "sending queue: requests left by the last run are sent first");
        }
        Ok(Self {
            inner: Arc::new(Inner {
                owner: owner.to_owned(),
                capacity: opts.capacity.max(1),
                sizer: opts.sizer,
                resident_max: opts.resident,
                budget,
                on_corrupt,
                state: Mutex::new(state),
                store: Arc::new(Mutex::new(store)),
                not_empty: Notify::new(),
                not_full: Notify::new(),
            }),
        })
    }
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
        Ok(Box::new(DiskSlot {
            queue: Some(self.clone()),
            size,
            written: None,
        }))
    }

    /// Runs `f` on the store off the async threads.
    async fn with_store<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> std::io::Result<R> + Send + 'static,
    ) -> std::io::Result<R> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(&mut store.lock().unwrap_or_else(|e| e.into_inner())))
            .await
            .map_err(std::io::Error::other)?
    }

    /// Marks a request settled; a failure only means it may be sent again
    /// after a restart (at least once), so it is logged, not raised.
    async fn settle(&self, at: Location, kind: u8, payload: Vec<u8>) {
        if let Err(e) = self.with_store(move |s| s.ack(at, kind, &payload)).await {
            profcol_model::error_limited!(exporter = %self.owner, error = %e, "sending queue: cannot record a settled request; it may be sent again after a restart");
        }
    }

    /// A queued request's batch read back from disk.
    async fn load(&self, at: Location) -> Result<ProfileBatch, String> {
        let record = self
            .with_store(move |s| s.read(at))
            .await
            .map_err(|e| format!("reading: {e}"))?;
        let payload = record::request_payload(&Bytes::from(record))
            .ok_or("the record no longer checks out (damaged since start-up)")?;
        let mut batch = profcol_model::cpu::run(move || record::decode_payload(payload)).await?;
        let held = batch.held_bytes();
        batch.meta.memory = Some(Held::new(self.budget.force(held)));
        Ok(batch)
    }
}

struct DiskSlot {
    queue: Option<Arc<Inner>>,
    size: usize,
    written: Option<(Location, Arc<ProfileBatch>)>,
}

#[async_trait]
impl Slot for DiskSlot {
    async fn write(&mut self, batch: &Arc<ProfileBatch>) -> Result<(), QueueError> {
        let q = self
            .queue
            .clone()
            .expect("a slot is written before it is committed");
        let meta = record::encode_meta(&batch.meta);
        let bytes = match batch.plain_bytes() {
            Some(b) => b.clone(),
            // Encoded, or inflated from what the client compressed.
            None => {
                let b = batch.clone();
                profcol_model::cpu::run(move || b.encode_to_bytes()).await
            }
        };
        let at = q
            .with_store(move |s| s.append(&meta, &bytes))
            .await
            .map_err(|e| QueueError::Storage(e.to_string()))?;
        self.written = Some((at, batch.clone()));
        Ok(())
    }

    fn commit(mut self: Box<Self>) {
        let q = self.queue.take().expect("a slot is committed once");
        let (at, batch) = self
            .written
            .take()
            .expect("a slot is written before it is committed");
        {
            let mut s = q.lock();
            s.reserved -= self.size;
            s.used += self.size;
            // Past the resident window, the copy on disk is the only one.
            let keep = s.resident < q.resident_max;
            s.resident += usize::from(keep);
            s.pending.push_back(Entry {
                at,
                size: self.size,
                batch: keep.then_some(batch),
                progress: Progress::default(),
            });
        }
        q.not_empty.notify_one();
    }
}

impl Drop for DiskSlot {
    fn drop(&mut self) {
        let Some(q) = self.queue.take() else {
            return;
        };
        q.lock().reserved -= self.size;
        q.not_full.notify_one();
        // Written but another queue refused the batch: the client was
        // refused, so the copy on disk must not be sent.
        if let Some((at, _)) = self.written.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { q.settle(at, record::KIND_DONE, Vec::new()).await });
            }
        }
    }
}

/// Settles one taken request on disk.
struct DiskAck {
    queue: Arc<Inner>,
    at: Location,
    size: usize,
}

#[async_trait]
impl Settle for DiskAck {
    async fn progress(&mut self, progress: &Progress) {
        let json = serde_json::to_vec(progress).expect("progress serializes");
        self.queue
            .settle(self.at, record::KIND_PROGRESS, json)
            .await;
    }

    async fn done(self: Box<Self>) {
        self.queue
            .settle(self.at, record::KIND_DONE, Vec::new())
            .await;
    }

    fn requeue(self: Box<Self>, req: Request) {
        let q = &self.queue;
        let mut s = q.lock();
        s.used += self.size;
        // Kept in memory if the resident window has room, as when queued.
        let keep = s.resident < q.resident_max;
        s.resident += usize::from(keep);
        s.pending.push_front(Entry {
            at: self.at,
            size: self.size,
            batch: keep.then(|| req.batch.clone()),
            progress: req.progress(),
        });
        drop(s);
        q.not_empty.notify_one();
    }
}

/// A request `take` popped and is reading back from disk: should the
/// caller drop `take` meanwhile (a consumer retired by a config reload),
/// it goes back to the front of the queue instead of waiting for the
/// next start.
struct Unpopped<'a> {
    queue: &'a Arc<Inner>,
    at: Location,
    size: usize,
    progress: Option<Progress>,
}

impl<'a> Unpopped<'a> {
    fn new(queue: &'a Arc<Inner>, entry: &Entry) -> Self {
        Self {
            queue,
            at: entry.at,
            size: entry.size,
            progress: Some(entry.progress.clone()),
        }
    }

    async fn load(mut self) -> Result<ProfileBatch, String> {
        let r = self.queue.load(self.at).await;
        self.progress = None;
        r
    }
}

impl Drop for Unpopped<'_> {
    fn drop(&mut self) {
        let Some(progress) = self.progress.take() else {
            return;
        };
        let mut s = self.queue.lock();
        s.used += self.size;
        s.pending.push_front(Entry {
            at: self.at,
            size: self.size,
            batch: None,
            progress,
        });
        drop(s);
        self.queue.not_empty.notify_one();
    }
}

#[async_trait]
impl Queue for DiskQueue {
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
        let q = &self.inner;
        loop {
            let more = q.not_empty.notified();
            let entry = {
                let mut s = q.lock();
                if s.closed {
                    return None;
                }
                match s.pending.pop_front() {
                    Some(e) => {
                        s.used -= e.size;
                        s.resident -= usize::from(e.batch.is_some());
                        Some(e)
                    }
                    None => None,
                }
            };
            let Some(entry) = entry else {
                more.await;
                continue;
            };
            q.not_full.notify_one();
            let batch = match entry.batch {
                Some(b) => b,
                None => match Unpopped::new(q, &entry).load().await {
                    Ok(b) => Arc::new(b),
                    Err(e) => {
                        (q.on_corrupt)(1);
                        profcol_model::error_limited!(exporter = %q.owner, error = %e, "sending queue: a stored request cannot be read; it is skipped");
                        q.settle(entry.at, record::KIND_DONE, Vec::new()).await;
                        continue;
                    }
                },
            };
            let ack = Ack::new(DiskAck {
                queue: q.clone(),
                at: entry.at,
                size: entry.size,
            });
            return Some((Request::resumed(batch, entry.progress), ack));
        }
    }

    fn size(&self) -> usize {
        self.inner.lock().pending.len()
    }

    fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Stops handing out requests: what is queued stays on disk for the
    /// next start.
    fn close(&self) {
        self.inner.lock().closed = true;
        self.inner.not_empty.notify_waiters();
        self.inner.not_full.notify_waiters();
    }

    fn persistent(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
