//! The tap on every profiles pipeline, after its processors: it hands each
//! committed batch to a bounded queue and returns; a thread of its own
//! folds the stacks into the store. When the queue is full the batch is
//! skipped and its samples counted, so the pipeline never waits.

use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::Observer;

use super::fold::fold;
use super::store::Store;

/// What the tap and the pages share.
pub struct Shared {
    pub store: Mutex<Store>,
    /// Samples skipped per pipeline because the queue was full: a lock of
    /// its own, so that skipping never waits for the folding.
    pub skipped: Mutex<BTreeMap<String, u64>>,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Samples skipped so far in `pipeline`.
    pub fn skipped(&self, pipeline: &str) -> u64 {
        let s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        s.get(pipeline).copied().unwrap_or(0)
    }
}

struct Seen {
    pipeline: Arc<str>,
    batch: Arc<ProfileBatch>,
    at: Instant,
}

pub struct Tap {
    tx: SyncSender<Seen>,
    shared: Arc<Shared>,
    /// Interned pipeline ids, so a batch costs no allocation to queue.
    ids: Mutex<Vec<Arc<str>>>,
}

impl Tap {
    /// A tap queueing up to `queue_size` batches, and the thread that
    /// folds them (it ends when the tap is dropped).
    pub fn start(shared: Arc<Shared>, queue_size: usize) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = sync_channel(queue_size);
        let folding = shared.clone();
        std::thread::Builder::new()
            .name("profilez-fold".into())
            .spawn(move || fold_all(rx, &folding))?;
        Ok(Arc::new(Self {
            tx,
            shared,
            ids: Mutex::new(Vec::new()),
        }))
    }

    fn id(&self, pipeline: &str) -> Arc<str> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = ids.iter().find(|id| ***id == *pipeline) {
            return id.clone();
        }
        let id: Arc<str> = pipeline.into();
        ids.push(id.clone());
        id
    }
}

impl Observer for Tap {
    fn accepted(&self, pipeline: &str, batch: &Arc<ProfileBatch>) {
        let seen = Seen {
            pipeline: self.id(pipeline),
            batch: batch.clone(),
            at: Instant::now(),
        };
        if let Err(TrySendError::Full(seen) | TrySendError::Disconnected(seen)) =
            self.tx.try_send(seen)
        {
            let n = seen.batch.sample_count();
            let mut s = self
                .shared
                .skipped
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match s.get_mut(pipeline) {
                Some(t) => *t += n,
                None => {
                    s.insert(pipeline.to_owned(), n);
                }
            }
        }
    }

    fn refused(&self, pipeline: &str, samples: u64, reason: &str) {
        self.shared
            .lock()
            .refused(pipeline, samples, reason, Instant::now());
    }
}

fn fold_all(rx: Receiver<Seen>, shared: &Shared) {
    while let Ok(seen) = rx.recv() {
        fold_one(seen, shared);
    }
}

/// Folds one batch; one not decoded yet (forwarded as received) is decoded
/// into a copy of the tap's own, so that the batch in the exporters' queues
/// keeps holding its bytes only.
fn fold_one(seen: Seen, shared: &Shared) {
    let Seen {
        pipeline,
        batch,
        at,
    } = seen;
    let own;
    let data = if batch.is_decoded() {
        batch.data()
    } else {
        let Some(bytes) = batch.encoded() else { return };
        match ProfilesData::decode(bytes.clone()) {
            Ok(d) => {
                own = d;
                &own
            }
            // A batch checked on the wire decodes; nothing to show if not.
            Err(_) => return,
        }
    };
    let samples = batch.sample_count().max(1);
    let bytes = batch.encoded_len() as u64;
    let folded = fold(data);
    drop(batch);
    let mut store = shared.lock();
    for (key, series) in folded {
        let share = bytes * series.samples / samples;
        store.add(&pipeline, key, series, share, at);
    }
}
