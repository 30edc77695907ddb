//! The tap on every profiles pipeline, after its processors: it hands each
//! committed batch to a bounded queue and returns; a thread of its own
//! folds the stacks into the store. When the queue is full the batch is
//! skipped and its samples counted, so the pipeline never waits.
//!
//! Folding a batch forwarded as received decodes it: about 9 times what
//! the pass-through itself costs (a wire check, the bytes sent on). So the
//! thread folds within a CPU budget ([`CpuBudget`]): its own CPU time at
//! most a share of what the rest of the process used, with a burst for a
//! quiet collector; past it a batch is skipped and counted, and the flame
//! graphs are of the batches folded (a sample of the traffic). Each folded
//! batch stands for the ones skipped before it in the rates.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use profcol_model::ProfileBatch;
use profcol_pipeline::component::Observer;
use profcol_pipeline::telemetry::Telemetry;

use super::clock;
use super::fold::fold;
use super::store::Store;

/// What the tap and the pages share.
pub struct Shared {
    pub store: Mutex<Store>,
    /// Samples skipped per pipeline because the queue was full or the
    /// folding past its CPU budget: a lock of its own, so that skipping
    /// never waits for the folding.
    pub skipped: Mutex<BTreeMap<String, Skipped>>,
    /// Where skipped samples are counted too, and the extension's id.
    pub telemetry: Option<(Arc<Telemetry>, String)>,
    /// CPU time of the folding thread so far (skipping included), in
    /// nanoseconds.
    pub fold_cpu_ns: AtomicU64,
    /// Whether the folding thread is past its CPU budget.
    pub paused: AtomicBool,
}

/// Samples of one pipeline not folded.
#[derive(Debug, Default, Clone, Copy)]
pub struct Skipped {
    /// Since the start.
    pub total: u64,
    /// Since the pipeline's last folded batch, which stands for them.
    pub unfolded: u64,
}

impl Shared {
    pub fn new(store: Store) -> Self {
        Self {
            store: Mutex::new(store),
            skipped: Mutex::default(),
            telemetry: None,
            fold_cpu_ns: AtomicU64::new(0),
            paused: AtomicBool::new(false),
        }
    }

    /// Counts `samples` of `pipeline` not folded, and why.
    fn skip(&self, pipeline: &str, samples: u64, reason: &str) {
        {
            let mut s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
            let t = match s.get_mut(pipeline) {
                Some(t) => t,
                None => s.entry(pipeline.to_owned()).or_default(),
            };
            t.total += samples;
            t.unfolded += samples;
        }
        if let Some((t, id)) = &self.telemetry {
            t.profilez_skipped(id, pipeline, samples, reason);
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Samples skipped so far in `pipeline`.
    pub fn skipped(&self, pipeline: &str) -> u64 {
        let s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        s.get(pipeline).map_or(0, |t| t.total)
    }

    /// The samples of `pipeline` skipped since its last folded batch,
    /// which the batch folded now stands for.
    fn take_unfolded(&self, pipeline: &str) -> u64 {
        let mut s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        s.get_mut(pipeline)
            .map_or(0, |t| std::mem::take(&mut t.unfolded))
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
    /// folds them within `cpu_share` of the process's other CPU time (it
    /// ends when the tap is dropped).
    pub fn start(
        shared: Arc<Shared>,
        queue_size: usize,
        cpu_share: f64,
    ) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = sync_channel(queue_size);
        let folding = shared.clone();
        std::thread::Builder::new()
            .name("profilez-fold".into())
            .spawn(move || fold_all(rx, &folding, CpuBudget::new(cpu_share)))?;
        Ok(Arc::new(Self {
            tx,
            shared,
            ids: Mutex::new(Vec::new()),
        }))
    }

    /// What the tap feeds.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
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
        // Past its budget the folding thread sleeps: skipped here, without
        // waking it.
        if self.shared.paused.load(Ordering::Relaxed) {
            self.shared
                .skip(pipeline, batch.sample_count(), "cpu_budget");
            return;
        }
        let seen = Seen {
            pipeline: self.id(pipeline),
            batch: batch.clone(),
            at: Instant::now(),
        };
        if let Err(TrySendError::Full(seen) | TrySendError::Disconnected(seen)) =
            self.tx.try_send(seen)
        {
            self.shared
                .skip(pipeline, seen.batch.sample_count(), "queue_full");
        }
    }

    fn refused(&self, pipeline: &str, samples: u64, reason: &str) {
        self.shared
            .lock()
            .refused(pipeline, samples, reason, Instant::now());
    }
}

/// How often a folding thread past its budget looks at it again.
const PAUSE: Duration = Duration::from_millis(20);

/// Folds what comes while the budget allows; past it, pauses (the tap then
/// skips batches itself) and skips what was queued, until the rest of the
/// process has earned it more. Ends when the tap is dropped.
fn fold_all(rx: Receiver<Seen>, shared: &Shared, mut budget: CpuBudget) {
    loop {
        if budget.allows() {
            shared.paused.store(false, Ordering::Relaxed);
            let Ok(seen) = rx.recv() else { return };
            fold_one(seen, shared);
        } else {
            shared.paused.store(true, Ordering::Relaxed);
            loop {
                match rx.try_recv() {
                    Ok(seen) => {
                        shared.skip(&seen.pipeline, seen.batch.sample_count(), "cpu_budget")
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            std::thread::sleep(PAUSE);
        }
        let cpu = clock::thread().as_nanos();
        shared
            .fold_cpu_ns
            .store(u64::try_from(cpu).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The folding thread's CPU allowance, in seconds of CPU: it earns `share`
/// of every second of CPU the rest of the process spends (receiving,
/// checking, exporting), up to [`CpuBudget::BURST`], and spends what its
/// own thread uses. A batch is taken while the balance is positive, so
/// the folding overdraws by one batch at most and pays it back before the
/// next. Starting full, a quiet collector folds everything it is sent.
pub struct CpuBudget {
    share: f64,
    balance: f64,
    process: Duration,
    own: Duration,
}

impl CpuBudget {
    /// A quarter second of CPU: a few medium requests folded at once.
    pub const BURST: f64 = 0.25;

    pub fn new(share: f64) -> Self {
        Self {
            share,
            balance: Self::BURST,
            process: clock::process(),
            own: clock::thread(),
        }
    }

    /// Whether the next batch may be folded (called on the folding thread).
    pub fn allows(&mut self) -> bool {
        let process = clock::process();
        let own = clock::thread();
        let spent = own.saturating_sub(self.own).as_secs_f64();
        let rest = process.saturating_sub(self.process).as_secs_f64() - spent;
        self.balance = (self.balance + self.share * rest.max(0.0)).min(Self::BURST) - spent;
        (self.process, self.own) = (process, own);
        self.balance > 0.0
    }
}

/// Folds one batch; one not decoded yet (forwarded as received) is decoded
/// into a copy of the tap's own, so that the batch in the exporters' queues
/// keeps holding its bytes only (compressed, if it was so).
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
        // A batch held only as its client compressed it is inflated here,
        // not in the batch.
        let inflated;
        let bytes: &[u8] = match (batch.plain_bytes(), batch.compressed()) {
            (Some(b), _) => b,
            (None, Some(c)) => match c.inflate() {
                Ok(b) => {
                    inflated = b;
                    &inflated
                }
                Err(_) => return,
            },
            (None, None) => return,
        };
        match profcol_model::codec::decode(bytes) {
            Ok(d) => {
                own = d;
                &own
            }
            // A batch checked on the wire decodes; nothing to show if not.
            Err(_) => return,
        }
    };
    let samples = batch.sample_count();
    let bytes = batch.encoded_len() as u64;
    let folded = fold(data);
    drop(batch);
    // The batch stands for those skipped before it: the rates count them
    // too, split as its own samples are (the stacks keep their values).
    let unfolded = if samples > 0 {
        shared.take_unfolded(&pipeline)
    } else {
        0
    };
    let samples = samples.max(1);
    let scale = |n: u64| {
        let all = u128::from(samples) + u128::from(unfolded);
        u64::try_from(u128::from(n) * all / u128::from(samples)).unwrap_or(u64::MAX)
    };
    let mut store = shared.lock();
    for (key, series) in folded {
        let share = scale(bytes * series.samples / samples);
        let seen = scale(series.samples);
        store.add(&pipeline, key, series, seen, share, at);
    }
}
