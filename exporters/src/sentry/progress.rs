//! How far the export of a batch got, so that a retry (the runtime calls
//! `export` again with the same `Arc`) resends only the chunks not yet
//! delivered and cuts the same chunks.
//!
//! Keyed by the batch's address. Each entry holds a `Weak` to the batch,
//! which keeps the allocation (not the data) alive, so the address cannot
//! be reused by another batch while the entry exists; entries of batches
//! nobody holds any more are pruned. The map therefore never holds more
//! entries than there are live batches that failed part way.
//!
//! An entry is claimed by one export at a time: a second copy of the same
//! `Arc` exported concurrently (one exporter listed in two pipelines fed by
//! one receiver) starts from scratch instead of sharing progress.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use profcol_pipeline::ProfileBatch;

/// Where the export of one batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchState {
    /// Stands in for missing profile start times, fixed on the first
    /// attempt so that every attempt cuts the same chunks.
    pub now_unix_nano: u64,
    /// Chunks (in conversion order) delivered or refused for good.
    pub done: usize,
    /// Samples in chunks delivered so far.
    pub delivered: u64,
    /// Samples in chunks Sentry refused for good (400, 413).
    pub rejected: u64,
}

impl BatchState {
    pub fn new(now_unix_nano: u64) -> Self {
        Self {
            now_unix_nano,
            done: 0,
            delivered: 0,
            rejected: 0,
        }
    }
}

struct Entry {
    batch: Weak<ProfileBatch>,
    state: BatchState,
    claimed: bool,
}

#[derive(Default)]
pub struct Progress {
    entries: Mutex<HashMap<usize, Entry>>,
}

fn key(batch: &Arc<ProfileBatch>) -> usize {
    Arc::as_ptr(batch) as usize
}

impl Progress {
    /// Claims the batch's progress (a fresh state if none is recorded or
    /// another export holds it). Dropping the claim releases it, also when
    /// the export is cancelled by the runtime's timeout.
    pub fn claim(self: &Arc<Self>, batch: &Arc<ProfileBatch>, now_unix_nano: u64) -> Claim {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, e| e.batch.strong_count() > 0);
        let k = key(batch);
        let (state, owned) = match map.get_mut(&k) {
            Some(e) if !e.claimed => {
                e.claimed = true;
                (e.state, true)
            }
            Some(_) => (BatchState::new(now_unix_nano), false),
            None => {
                map.insert(
                    k,
                    Entry {
                        batch: Arc::downgrade(batch),
                        state: BatchState::new(now_unix_nano),
                        claimed: true,
                    },
                );
                (BatchState::new(now_unix_nano), true)
            }
        };
        Claim {
            progress: self.clone(),
            key: k,
            owned,
            finished: false,
            state,
        }
    }

    /// The runtime gave up on the batch: forgets its progress and returns
    /// how many of its samples earlier attempts delivered (0 while an export
    /// holds it: that export settles it).
    pub fn give_up(&self, batch: &Arc<ProfileBatch>) -> u64 {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&key(batch)) {
            Some(e) if !e.claimed => map.remove(&key(batch)).map_or(0, |e| e.state.delivered),
            _ => 0,
        }
    }

    /// Batches with recorded progress.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One export's hold on a batch's progress.
pub struct Claim {
    progress: Arc<Progress>,
    key: usize,
    /// False for a concurrent copy: its progress is not recorded.
    owned: bool,
    finished: bool,
    pub state: BatchState,
}

impl Claim {
    /// Records `state` at once, so that a cancelled export keeps it.
    pub fn save(&mut self) {
        if !self.owned {
            return;
        }
        let mut map = self
            .progress
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get_mut(&self.key) {
            e.state = self.state;
        }
    }

    /// The batch is settled (delivered, refused or given up): forget it.
    pub fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let mut map = self
            .progress
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if self.finished {
            map.remove(&self.key);
        } else if let Some(e) = map.get_mut(&self.key) {
            e.claimed = false;
        }
    }
}
