//! One pipeline: its processor chain and the sending queues of its
//! exporters, driven by the receivers' requests.
//!
//! A receiver's batch goes through every pipeline that lists the receiver
//! in two phases ([`Pipeline::prepare`], then [`Prepared::commit`]): each
//! pipeline runs its processors and reserves a slot in each of its
//! exporters' queues; only when every pipeline holds every slot are they
//! committed, and only then is the client told its data was accepted. A
//! full queue anywhere refuses the batch everywhere (the client retries);
//! nothing accepted is dropped for lack of room.
//!
//! A pipeline with a stateful stage (`batch`) runs the processors before
//! it as above, then reserves a place in the stage's bounded inbox instead
//! of queue slots: the client is answered once its batch is in the stage's
//! custody. The stage runs on a task of its own ([`StageWorker`]) that
//! merges, holds and emits; what it emits goes through the processors
//! after it and into the exporters' queues, waiting for room there (the
//! data was accepted, so it is never refused): a full queue stops the
//! stage and its inbox fills. A client whose batch finds the inbox full
//! waits for a place (the stage merges more slowly than receivers take
//! requests in: that is ordinary load, paced, not refused); only if none
//! frees up within the inbox's patience is it refused with
//! `pipeline_full`. What waits and what the inbox holds is counted in the
//! memory budget (each batch keeps its reservation).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, Mutex, OwnedMutexGuard, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::component::{
    ConsumeError, Gate, Observers, Output, ProcessContext, Processor, ProcessorCounts, Ready,
    StageContext, Verdict,
};
use crate::config::ComponentId;
use crate::telemetry::Telemetry;
use profcol_model::cpu::INLINE;
use profcol_model::memory::{Held, MemoryBudget};
use profcol_model::ProfileBatch;

use profcol_queue::{Queue, QueueError, Slot};

use super::metrics::{MetricsOut, MetricsReady};

/// The sending side of one exporter's queue, shared by every pipeline that
/// lists the exporter.
#[derive(Clone)]
pub struct ExporterQueue {
    pub id: Arc<str>,
    pub queue: Arc<dyn Queue>,
    /// Wait for room instead of refusing (`block_on_overflow`, or a
    /// disabled queue, where the client waits for each send).
    pub block: bool,
    /// Only a real `sending_queue` has queue gauges, as in the Collector.
    pub gauges: bool,
    pub telemetry: Arc<Telemetry>,
    /// The exporter may decode a batch kept as received bytes.
    pub decodes: bool,
    /// The compression it sends a batch's received bytes with, when it
    /// can send them as their client compressed them.
    pub sends_compressed: Option<profcol_model::compressed::Encoding>,
}

impl ExporterQueue {
    pub fn update_gauge(&self) {
        if self.gauges {
            self.telemetry.exporter_queue(
                &self.id,
                self.queue.size() as i64,
                self.queue.capacity() as i64,
            );
        }
    }
}

/// A connector as an exporter of a pipeline: the pipelines it is a
/// receiver of, fed in the same two phases as a receiver's.
#[derive(Clone)]
pub struct Connection {
    pub id: Arc<str>,
    pub to: Downstream,
}

/// Where a connector hands what it makes.
#[derive(Clone)]
pub enum Downstream {
    /// Profiles pipelines, as a receiver's output (`forward`).
    Profiles(Output),
    /// Metrics pipelines, through a conversion (`signaltometrics`).
    Metrics(Arc<MetricsOut>),
}

pub struct Pipeline {
    pub id: Arc<str>,
    /// Batches in this pipeline at once (being processed or waiting for
    /// the chain); past it receivers are told to retry (`pipeline_full`).
    pub admission: Arc<Semaphore>,
    /// The permits `admission` started with.
    capacity: usize,
    /// The processors before the stateful stage (all of them without one).
    chain: Option<Arc<Mutex<Chain>>>,
    /// Some processor of the chain decodes batches: one held as bytes is
    /// decoded before the chain's lock.
    chain_decodes: bool,
    /// The processors before the stage when none of them reads batches:
    /// counted as passing every sample on.
    passive_names: Vec<String>,
    /// The stateful stage, if the pipeline has one.
    stage: Option<StageHandle>,
    /// Checks made before a batch enters (`memory_limiter`).
    gates: Vec<Arc<dyn Gate>>,
    exporters: Vec<ExporterQueue>,
    /// The connectors it exports to.
    connectors: Vec<Connection>,
    /// Extensions shown each batch it commits (`profilez`).
    observers: Observers,
    /// See [`crate::runtime::build::PipelineNode::rank`]: pipelines finish
    /// in rank order, so that what one hands a connector finds the
    /// pipelines after it still open.
    rank: usize,
    budget: Arc<MemoryBudget>,
    telemetry: Arc<Telemetry>,
}

/// The pipeline's side of its stateful stage.
struct StageHandle {
    name: Arc<str>,
    inbox: mpsc::Sender<Arc<ProfileBatch>>,
    /// How long a batch waits for a place in the inbox.
    patience: std::time::Duration,
    held: Arc<HeldSamples>,
    finish: CancellationToken,
    worker: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Samples in a stage's custody (its inbox, its state, and emitted but not
/// yet queued): accepted, and neither sent nor lost.
struct HeldSamples {
    samples: AtomicU64,
    pipeline: Arc<str>,
    processor: Arc<str>,
    telemetry: Arc<Telemetry>,
}

impl HeldSamples {
    fn add(&self, n: u64) {
        let now = self.samples.fetch_add(n, Ordering::AcqRel) + n;
        self.telemetry
            .processor_held(&self.pipeline, &self.processor, now);
    }

    fn sub(&self, n: u64) {
        let now = self.samples.fetch_sub(n, Ordering::AcqRel) - n;
        self.telemetry
            .processor_held(&self.pipeline, &self.processor, now);
    }
}

impl Pipeline {
    /// A pipeline running `processors` in order into `exporters`. A
    /// stateful processor (at most one; the config check says so) gets a
    /// task of its own, so this must run inside the async runtime when the
    /// pipeline has one.
    pub fn new(
        id: &str,
        max_batches: usize,
        inbox_patience: std::time::Duration,
        processors: Vec<(ComponentId, Box<dyn Processor>)>,
        exporters: Vec<ExporterQueue>,
        budget: Arc<MemoryBudget>,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        Self::with_connectors(
            id,
            max_batches,
            inbox_patience,
            processors,
            exporters,
            Vec::new(),
            Observers::from([]),
            0,
            budget,
            telemetry,
        )
    }

    /// [`Pipeline::new`] that also exports to `connectors` and shows what
    /// it commits to `observers`; `rank` orders pipelines for shutdown (see
    /// [`Pipeline::rank`]).
    #[allow(clippy::too_many_arguments)]
    pub fn with_connectors(
        id: &str,
        max_batches: usize,
        inbox_patience: std::time::Duration,
        mut processors: Vec<(ComponentId, Box<dyn Processor>)>,
        exporters: Vec<ExporterQueue>,
        connectors: Vec<Connection>,
        observers: Observers,
        rank: usize,
        budget: Arc<MemoryBudget>,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        let id: Arc<str> = id.into();
        for (name, p) in &mut processors {
            p.start(&crate::component::ProcessorStart {
                id: &name.to_string(),
                budget: &budget,
                telemetry: &telemetry,
            });
        }
        let gates = processors.iter().filter_map(|(_, p)| p.gate()).collect();
        let at = processors
            .iter_mut()
            .position(|(_, p)| p.stateful().is_some());
        let (stage, after) = match at {
            Some(i) => {
                let mut after = processors.split_off(i);
                let stage = after.remove(0);
                (Some(stage), after)
            }
            None => (None, Vec::new()),
        };
        // Processors that only guard admission are counted, not run.
        let passive = processors.iter().all(|(_, p)| !p.reads_batches());
        let passive_names = if passive {
            processors.drain(..).map(|(id, _)| id.to_string()).collect()
        } else {
            Vec::new()
        };
        let chain_decodes = processors.iter().any(|(_, p)| p.decodes_batches());
        let bytes_only = sends_bytes_only(&connectors, &exporters);
        let settle = stage.is_none() && bytes_only;
        let chain = (!processors.is_empty())
            .then(|| Arc::new(Mutex::new(Chain::new(processors, &id, &budget, settle))));
        if let (Some(chain), Ok(rt)) = (&chain, tokio::runtime::Handle::try_current()) {
            rt.spawn(release_when_idle(Arc::downgrade(chain)));
        }
        let stage = stage.map(|(name, processor)| {
            let name: Arc<str> = name.to_string().into();
            let (tx, rx) = mpsc::channel(max_batches.max(1));
            let held = Arc::new(HeldSamples {
                samples: AtomicU64::new(0),
                pipeline: id.clone(),
                processor: name.clone(),
                telemetry: telemetry.clone(),
            });
            held.add(0);
            let finish = CancellationToken::new();
            let worker = StageWorker {
                stage: processor,
                name: name.clone(),
                after: (!after.is_empty()).then(|| Chain::new(after, &id, &budget, bytes_only)),
                settle: bytes_only,
                pipeline: id.clone(),
                budget: budget.clone(),
                telemetry: telemetry.clone(),
                held: held.clone(),
                outlet: Arc::new(Outlet {
                    pipeline: id.clone(),
                    exporters: exporters.clone(),
                    connectors: connectors.clone(),
                    observers: observers.clone(),
                    telemetry: telemetry.clone(),
                    held: held.clone(),
                }),
            };
            let task = tokio::spawn(worker.run(rx, finish.clone()));
            StageHandle {
                name,
                inbox: tx,
                patience: inbox_patience,
                held,
                finish,
                worker: std::sync::Mutex::new(Some(task)),
            }
        });
        Self {
            id,
            admission: Arc::new(Semaphore::new(max_batches.max(1))),
            capacity: max_batches.max(1),
            chain,
            chain_decodes,
            passive_names,
            stage,
            gates,
            exporters,
            connectors,
            observers,
            rank,
            budget,
            telemetry,
        }
    }

    /// Its chain, when its processors decode what they are handed, held
    /// for a batch about to be decoded for it on this task (see
    /// [`CHAIN_CLAIM`]).
    pub async fn claim(&self) -> Option<Claim> {
        let chain = self.chain.as_ref().filter(|_| self.chain_decodes)?;
        Some(Claim(chain.clone().lock_owned().await))
    }

    /// Pipelines a connector feeds have higher ranks than those feeding it.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Asks every gate (`memory_limiter`) whether a batch may enter.
    pub fn check_gates(&self) -> Result<(), ConsumeError> {
        for g in &self.gates {
            g.admit()
                .map_err(|r| ConsumeError::refused(r.reason, r.detail))?;
        }
        Ok(())
    }

    /// The memory limit the pipeline's gates stand for (the smallest).
    pub fn memory_limit(&self) -> Option<usize> {
        self.gates.iter().filter_map(|g| g.memory_limit()).min()
    }

    /// Samples the stateful stage holds now (0 without one).
    pub fn held_samples(&self) -> u64 {
        self.stage
            .as_ref()
            .map_or(0, |s| s.held.samples.load(Ordering::Acquire))
    }

    /// At shutdown, once no receiver hands over anything more: the stage
    /// takes what is in its inbox, emits everything it holds, and its task
    /// ends once all of it is in the exporters' queues (or the queues were
    /// closed by the deadline, which counts the rest as dropped).
    pub async fn finish(&self) {
        let Some(stage) = &self.stage else { return };
        stage.finish.cancel();
        let task = stage
            .worker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::error!(pipeline = %self.id, "the stateful stage stopped: {e}");
            }
        }
    }

    /// Takes the pipeline out of service after a config reload routed its
    /// receivers elsewhere: waits until every batch in it is committed
    /// (holding all of its admission permits), refuses any more (a receiver
    /// that still had it looks up its route again), then lets the stateful
    /// stage emit what it holds into the exporters' queues, as at shutdown.
    pub async fn retire(&self) {
        let permits = u32::try_from(self.capacity).unwrap_or(u32::MAX);
        let all = self.admission.acquire_many(permits).await;
        self.admission.close();
        drop(all);
        self.finish().await;
    }

    /// Runs the processors and writes the batch into a slot of every
    /// exporter queue (to disk, for a persistent one). A refusal is shown
    /// to the observers.
    pub async fn prepare(
        self: &Arc<Self>,
        batch: Arc<ProfileBatch>,
    ) -> Result<Prepared, ConsumeError> {
        // Counted before the chain takes the batch (a count the receiver
        // already made), and only when something watches.
        let samples = (!self.observers.is_empty()).then(|| batch.sample_count());
        let r = self.prepare_unobserved(batch).await;
        if let (Err(e), Some(n)) = (&r, samples) {
            for o in self.observers.iter() {
                o.refused(&self.id, n, e.reason());
            }
        }
        r
    }

    async fn prepare_unobserved(
        self: &Arc<Self>,
        batch: Arc<ProfileBatch>,
    ) -> Result<Prepared, ConsumeError> {
        let (mut out, runs) = match &self.chain {
            None => {
                let n = batch.sample_count();
                let runs = self
                    .passive_names
                    .iter()
                    .map(|name| ProcessorRun {
                        name: name.clone(),
                        before: n,
                        after: n,
                        counts: ProcessorCounts::default(),
                    })
                    .collect();
                ((!batch.is_empty()).then_some(batch), runs)
            }
            Some(chain) => {
                let (chain, budget) = (chain.clone(), self.budget.clone());
                let decodes = self.chain_decodes;
                // A batch decoded for a chain its receiving task holds goes
                // through it here, on the thread that decoded it, so that
                // its messages are freed where they were made.
                let claimed = CHAIN_CLAIM
                    .try_with(|c| {
                        let mut c = c.borrow_mut();
                        let ours = c.as_ref().is_some_and(|Claim(held)| {
                            Arc::ptr_eq(OwnedMutexGuard::mutex(held), &chain)
                        });
                        if ours {
                            c.take()
                        } else {
                            None
                        }
                    })
                    .ok()
                    .flatten();
                if let Some(Claim(mut chain)) = claimed {
                    let work = budget.for_work(held(&batch)).await;
                    let r = chain.process(batch);
                    drop(work);
                    r
                } else {
                    // On a task of its own: a client that gives up must not take
                    // the chain down with its request.
                    tokio::spawn(async move {
                        let inline = batch.plain_bytes().is_some_and(|b| b.len() <= INLINE);
                        let (batch, mut chain) = if inline || batch.is_decoded() || !decodes {
                            (batch, chain.lock_owned().await)
                        } else {
                            decode_for(batch, chain).await
                        };
                        let work = budget.for_work(held(&batch)).await;
                        let run = move || {
                            let r = chain.process(batch);
                            drop(work);
                            r
                        };
                        if inline {
                            run()
                        } else {
                            profcol_model::cpu::run(run).await
                        }
                    })
                    .await
                    .expect("a processor panicked")
                }
            }
        };
        // Nothing here will decode a batch still undecoded: while it waits
        // to be sent it holds only its bytes, as compressed when every
        // exporter sends them so. A compressed form no exporter sends goes.
        let forwarded = self.stage.is_none() && sends_bytes_only(&self.connectors, &self.exporters);
        if let Some(b) = out.as_mut().and_then(Arc::get_mut) {
            let mut sends = self.exporters.iter().map(|e| e.sends_compressed);
            let first = sends.next().flatten();
            if forwarded {
                b.hold_bytes_only(first.filter(|_| sends.all(|e| e == first)));
            } else if self.exporters.iter().all(|e| e.sends_compressed.is_none()) {
                b.drop_compressed();
            }
        }
        let mut prepared = Prepared {
            pipeline: self.clone(),
            batch: out,
            slots: Vec::new(),
            downstream: Vec::new(),
            metrics: Vec::new(),
            inbox: None,
            runs,
        };
        let Some(batch) = prepared.batch.clone() else {
            return Ok(prepared);
        };
        if let Some(stage) = &self.stage {
            // The stage reads what it merges. A small batch is decoded here, on
            // the CPU pool and beside other requests. So is a large one if
            // a thread is spare beside the one decoding; else the stage
            // decodes it, on the thread that merges and frees it, and only
            // if it merges it (one over `send_batch_size` goes on as it
            // came), as `decode_for` has the chain do.
            let small = batch.plain_bytes().is_some_and(|b| b.len() <= INLINE);
            if !batch.is_decoded() && (small || profcol_model::cpu::spare_threads() >= 2) {
                let b = batch.clone();
                profcol_model::cpu::run(move || {
                    b.data();
                })
                .await;
            }
            // A place in the stage's inbox, waited for while the stage is
            // busy; the stage takes the batch on commit, and its queues are
            // its own business from then on.
            let inbox = stage.inbox.clone();
            let permit = match inbox.clone().try_reserve_owned() {
                Ok(p) => Ok(p),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(ConsumeError::ShuttingDown),
                Err(mpsc::error::TrySendError::Full(_)) => {
                    match tokio::time::timeout(stage.patience, inbox.reserve_owned()).await {
                        Ok(Ok(p)) => Ok(p),
                        Ok(Err(_)) => Err(ConsumeError::ShuttingDown),
                        Err(_) => Err(ConsumeError::pipeline_full(&self.id)),
                    }
                }
            };
            prepared.inbox = Some(permit?);
            return Ok(prepared);
        }
        // As the Collector, a queue that cannot take the batch counts it as
        // enqueue-failed; the client is refused, so nothing accepted is.
        let refused = |e: &ExporterQueue, err: QueueError| {
            if err != QueueError::Closed {
                let n = batch.sample_count();
                self.telemetry
                    .exporter_enqueue_failed(&e.id, n, &err.to_string(), true);
            }
            match err {
                QueueError::Full => ConsumeError::queue_full(&e.id),
                QueueError::Closed => ConsumeError::ShuttingDown,
                QueueError::Storage(m) => ConsumeError::queue_storage(&e.id, &m),
            }
        };
        for e in &self.exporters {
            let slot = if e.block {
                e.queue.reserve(&batch).await
            } else {
                e.queue.try_reserve(&batch)
            };
            prepared
                .slots
                .push((e.clone(), slot.map_err(|err| refused(e, err))?));
        }
        for (e, slot) in &mut prepared.slots {
            slot.write(&batch).await.map_err(|err| refused(e, err))?;
        }
        // What the pipelines after a connector refuse, this one refuses.
        for c in &self.connectors {
            match &c.to {
                Downstream::Profiles(output) => prepared
                    .downstream
                    .push(output.prepare(batch.clone(), true).await?),
                Downstream::Metrics(out) => {
                    prepared.metrics.extend(out.prepare(&batch, false).await?)
                }
            }
        }
        Ok(prepared)
    }
}

fn held(batch: &ProfileBatch) -> usize {
    batch.meta.memory.as_ref().map_or(0, |m| m.bytes())
}

/// A batch through one pipeline, with its exporters' slots (or a place in
/// its stateful stage's inbox) held.
pub struct Prepared {
    pipeline: Arc<Pipeline>,
    batch: Option<Arc<ProfileBatch>>,
    slots: Vec<(ExporterQueue, Box<dyn Slot>)>,
    /// The batch through the pipelines after its connectors.
    downstream: Vec<Ready>,
    /// What its connectors made of it, in the metrics pipelines' queues.
    metrics: Vec<MetricsReady>,
    inbox: Option<mpsc::OwnedPermit<Arc<ProfileBatch>>>,
    runs: Vec<ProcessorRun>,
}

impl Prepared {
    /// Hands the batch to every exporter's consumers (or to the stateful
    /// stage) and counts what the processors did.
    pub fn commit(self) {
        let p = &self.pipeline;
        for run in &self.runs {
            run.count(&p.id, &p.telemetry);
        }
        for (e, slot) in self.slots {
            slot.commit();
            e.update_gauge();
        }
        for d in self.downstream {
            d.commit();
        }
        for m in self.metrics {
            m.commit();
        }
        // A stage's batches are shown as it emits them (`Outlet::enqueue`).
        if let (None, Some(batch)) = (&p.stage, &self.batch) {
            for o in p.observers.iter() {
                o.accepted(&p.id, batch);
            }
        }
        if let (Some(permit), Some(batch), Some(stage)) = (self.inbox, self.batch, &p.stage) {
            let n = batch.sample_count();
            stage.held.add(n);
            p.telemetry.processor_in_out(&p.id, &stage.name, n, 0);
            permit.send(batch);
        }
    }
}

/// What one processor did to one batch, counted once the batch is accepted.
struct ProcessorRun {
    name: String,
    before: u64,
    after: u64,
    counts: ProcessorCounts,
}

impl ProcessorRun {
    fn count(&self, pipeline: &str, t: &Telemetry) {
        t.processor_in_out(pipeline, &self.name, self.before, self.after);
        let mut counted = 0;
        for &(reason, n) in &self.counts.drops {
            t.processor_dropped(pipeline, &self.name, n, reason);
            counted += n;
        }
        for &(what, n) in &self.counts.events {
            t.processor_event(&self.name, what, n);
        }
        // A processor must count what it removes; anything it lost
        // silently is counted here so the totals still add up.
        if self.after + counted < self.before {
            let lost = self.before - self.after - counted;
            tracing::error!(pipeline, processor = %self.name, lost, "processor lost samples without counting them");
            t.processor_dropped(pipeline, &self.name, lost, "uncounted");
        }
    }
}

/// A pipeline's processors, run on a blocking thread, one batch at a time.
struct Chain {
    processors: Vec<Box<dyn Processor>>,
    names: Vec<String>,
    id: Arc<str>,
    budget: Arc<MemoryBudget>,
    /// Everything after the chain only sends the batch's bytes: it is
    /// encoded and its messages dropped where the chain ran (see
    /// [`ProfileBatch::settle_to_bytes`]).
    settle: bool,
}

/// Whether where a pipeline hands its batches only sends their bytes: no
/// connector, no exporter that decodes.
fn sends_bytes_only(connectors: &[Connection], exporters: &[ExporterQueue]) -> bool {
    connectors.is_empty() && exporters.iter().all(|e| !e.decodes)
}

/// A batch checked on the wire, decoded for the chain, and the chain.
///
/// As a rule the batch decodes in the chain's own run, on the thread that
/// processes it and frees what the processors drop. Decoded on another
/// pool thread, every sample a merge or the final drop frees is a
/// cross-thread free for the allocator, and the decoded batch waits,
/// growing cold, for the chain: the four-processor chain then cost 1.5x
/// the CPU per medium request (profcol-bench). Only when the chain is busy
/// and the pool has a thread to spare beside the one decoding is the batch
/// decoded ahead, in parallel, as a many-core gateway needs: processors take
/// one batch at a time.
async fn decode_for(
    batch: Arc<ProfileBatch>,
    chain: Arc<Mutex<Chain>>,
) -> (Arc<ProfileBatch>, OwnedMutexGuard<Chain>) {
    if let Ok(free) = chain.clone().try_lock_owned() {
        return (batch, free);
    }
    if profcol_model::cpu::spare_threads() < 2 {
        return (batch, chain.lock_owned().await);
    }
    let batch = profcol_model::cpu::run(move || {
        batch.data();
        batch
    })
    .await;
    (batch, chain.lock_owned().await)
}

/// A pipeline's chain, held by the task that will hand it a batch.
pub struct Claim(OwnedMutexGuard<Chain>);

tokio::task_local! {
    /// The chain a receiving task holds for the batch it hands on.
    pub static CHAIN_CLAIM: std::cell::RefCell<Option<Claim>>;
}

/// The batch itself, copied only if another pipeline still shares it (the
/// copy then gets a reservation of its own).
fn owned(batch: Arc<ProfileBatch>, budget: &Arc<MemoryBudget>) -> ProfileBatch {
    let shared = Arc::strong_count(&batch) > 1;
    let mut batch = Arc::unwrap_or_clone(batch);
    if shared {
        let bytes = held(&batch);
        batch.meta.memory = Some(Held::new(budget.force(bytes)));
    }
    batch
}

impl Chain {
    fn new(
        processors: Vec<(ComponentId, Box<dyn Processor>)>,
        id: &Arc<str>,
        budget: &Arc<MemoryBudget>,
        settle: bool,
    ) -> Self {
        Chain {
            names: processors.iter().map(|(id, _)| id.to_string()).collect(),
            processors: processors.into_iter().map(|(_, p)| p).collect(),
            id: id.clone(),
            budget: budget.clone(),
            settle,
        }
    }

    /// Runs the chain; `None` when nothing is left to export.
    fn process(
        &mut self,
        batch: Arc<ProfileBatch>,
    ) -> (Option<Arc<ProfileBatch>>, Vec<ProcessorRun>) {
        let batch = owned(batch, &self.budget);
        self.process_owned(batch)
    }

    fn process_owned(
        &mut self,
        mut batch: ProfileBatch,
    ) -> (Option<Arc<ProfileBatch>>, Vec<ProcessorRun>) {
        let mut runs = Vec::with_capacity(self.processors.len());
        for (p, name) in self.processors.iter_mut().zip(&self.names) {
            let before = batch.sample_count();
            let mut ctx = ProcessContext::deferred(&self.id, name);
            let verdict = p.process(&mut batch, &mut ctx);
            let after = match verdict {
                Verdict::Keep => batch.sample_count(),
                Verdict::Drop => 0,
            };
            runs.push(ProcessorRun {
                name: name.clone(),
                before,
                after,
                counts: ctx.into_counts(),
            });
            if verdict == Verdict::Drop || batch.is_empty() {
                return (None, runs);
            }
        }
        if self.settle {
            batch.settle_to_bytes();
        }
        // What the batch holds now (processors mostly shrink it); a batch
        // that still has its received bytes was not changed, and holds
        // what its receiver measured (a walk of every message saved).
        if let (Some(m), None) = (&batch.meta.memory, batch.encoded()) {
            m.set(batch.held_bytes());
        }
        (Some(Arc::new(batch)), runs)
    }
}

/// Has the chain's processors give back the buffers they keep each time
/// the collector is found idle, for as long as the pipeline exists.
async fn release_when_idle(chain: std::sync::Weak<Mutex<Chain>>) {
    loop {
        profcol_model::memory::idle().await;
        let Some(chain) = chain.upgrade() else { return };
        let mut chain = chain.lock_owned().await;
        profcol_model::cpu::run(move || {
            for p in &mut chain.processors {
                p.release_buffers();
            }
        })
        .await;
        // What was freed goes back to the OS.
        profcol_model::memory::release_freed_memory();
    }
}

/// The task that owns a pipeline's stateful stage and the processors after
/// it: takes accepted batches from the inbox, ticks the stage when its
/// deadline passes, flushes it at shutdown, and puts what it emits into the
/// exporters' queues.
struct StageWorker {
    stage: Box<dyn Processor>,
    name: Arc<str>,
    after: Option<Chain>,
    pipeline: Arc<str>,
    budget: Arc<MemoryBudget>,
    telemetry: Arc<Telemetry>,
    held: Arc<HeldSamples>,
    outlet: Arc<Outlet>,
    /// The outlet only sends bytes: what the stage emits is encoded here,
    /// on the CPU pool, as at the end of a [`Chain`].
    settle: bool,
}

/// Where a stage's output goes: the pipeline's exporter queues and its
/// connectors.
struct Outlet {
    pipeline: Arc<str>,
    exporters: Vec<ExporterQueue>,
    connectors: Vec<Connection>,
    observers: Observers,
    telemetry: Arc<Telemetry>,
    held: Arc<HeldSamples>,
}

/// What the stage is asked to do.
enum Step {
    /// Batches from the inbox, in order: all that were waiting, so that a
    /// busy stage pays the hop to the CPU pool once for many.
    Accept(Vec<Arc<ProfileBatch>>),
    Tick,
    Flush,
}

/// The most inbox batches one step takes.
const STEP_BATCHES: usize = 64;

impl StageWorker {
    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<Arc<ProfileBatch>>,
        finish: CancellationToken,
    ) {
        let mut finishing = false;
        loop {
            let deadline = self.stage.stateful().expect("a stateful stage").deadline();
            let step = tokio::select! {
                biased;
                _ = finish.cancelled(), if !finishing => {
                    // Take what is already in the inbox, then flush.
                    inbox.close();
                    finishing = true;
                    continue;
                }
                b = inbox.recv() => match b {
                    Some(b) => {
                        let mut batches = vec![b];
                        while batches.len() < STEP_BATCHES {
                            match inbox.try_recv() {
                                Ok(b) => batches.push(b),
                                Err(_) => break,
                            }
                        }
                        Step::Accept(batches)
                    }
                    None => Step::Flush,
                },
                _ = sleep_until(deadline), if deadline.is_some() => Step::Tick,
            };
            let flush = matches!(step, Step::Flush);
            let (worker, out) = profcol_model::cpu::run(move || {
                let out = self.step(step);
                (self, out)
            })
            .await;
            self = worker;
            let outlet = self.outlet.clone();
            for batch in out {
                outlet.enqueue(batch).await;
            }
            if flush {
                return;
            }
        }
    }

    /// Runs the stage (on the CPU pool) and the processors after it on
    /// what it emits.
    fn step(&mut self, step: Step) -> Vec<(Arc<ProfileBatch>, u64)> {
        let mut emitted = Vec::new();
        {
            let ctx = StageContext {
                pipeline: &self.pipeline,
                processor: &self.name,
                telemetry: &self.telemetry,
            };
            let stage = self.stage.stateful().expect("a stateful stage");
            match step {
                Step::Accept(batches) => {
                    for b in batches {
                        stage.accept(owned(b, &self.budget), Instant::now(), &mut emitted, &ctx);
                    }
                }
                Step::Tick => stage.tick(Instant::now(), &mut emitted, &ctx),
                Step::Flush => stage.flush(&mut emitted, &ctx),
            }
        }
        let mut out = Vec::with_capacity(emitted.len());
        for mut batch in emitted {
            let n = batch.sample_count();
            self.telemetry
                .processor_in_out(&self.pipeline, &self.name, 0, n);
            let Some(after) = &mut self.after else {
                if self.settle {
                    batch.settle_to_bytes();
                }
                out.push((Arc::new(batch), n));
                continue;
            };
            let (kept, runs) = after.process_owned(batch);
            for run in &runs {
                run.count(&self.pipeline, &self.telemetry);
            }
            match kept {
                Some(b) => out.push((b, n)),
                // The processors after the stage counted what they dropped.
                None => self.held.sub(n),
            }
        }
        out
    }
}

impl Outlet {
    /// Puts an emitted batch into every exporter's queue, waiting for room:
    /// it was accepted, so it is never refused. Only a queue closed by the
    /// shutdown deadline (or a persistent queue that cannot store it) loses
    /// it, counted for that exporter.
    async fn enqueue(&self, (batch, emitted): (Arc<ProfileBatch>, u64)) {
        let n = batch.sample_count();
        let mut slots = Vec::with_capacity(self.exporters.len());
        for e in &self.exporters {
            let slot = match e.queue.reserve(&batch).await {
                Ok(mut slot) => slot.write(&batch).await.map(|()| slot),
                Err(err) => Err(err),
            };
            match slot {
                Ok(slot) => slots.push((e, slot)),
                Err(QueueError::Closed) => self.telemetry.exporter_dropped(&e.id, n, "shutdown"),
                Err(err) => {
                    self.telemetry
                        .exporter_enqueue_failed(&e.id, n, &err.to_string(), false)
                }
            }
        }
        for (e, slot) in slots {
            slot.commit();
            e.update_gauge();
        }
        for o in self.observers.iter() {
            o.accepted(&self.pipeline, &batch);
        }
        for c in &self.connectors {
            self.connect(c, &batch, n).await;
        }
        self.held.sub(emitted);
    }

    /// Hands an emitted batch to the pipelines after a connector, waiting
    /// while they are full (the batch was accepted, so their gates do not
    /// refuse it either). Only their shutdown loses it, counted as dropped
    /// by the connector.
    async fn connect(&self, c: &Connection, batch: &Arc<ProfileBatch>, n: u64) {
        let output = match &c.to {
            Downstream::Profiles(output) => output,
            // Waits for room in the metrics queues; only their shutdown
            // loses what the connector made.
            Downstream::Metrics(out) => {
                return match out.prepare(batch, true).await {
                    Ok(ready) => ready.into_iter().for_each(MetricsReady::commit),
                    Err(e) => {
                        tracing::warn!(connector = %c.id, "dropped the metrics of {n} samples: {e}");
                        self.telemetry.exporter_dropped(&c.id, n, e.reason())
                    }
                };
            }
        };
        let mut backoff = CONNECT_RETRY;
        loop {
            match output.prepare(batch.clone(), false).await {
                Ok(ready) => return ready.commit(),
                Err(ConsumeError::Full { .. }) => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(CONNECT_RETRY_MAX);
                }
                Err(e) => {
                    tracing::warn!(connector = %c.id, "dropped {n} samples: {e}");
                    return self.telemetry.exporter_dropped(&c.id, n, e.reason());
                }
            }
        }
    }
}

/// How long a stage's output waits before it offers a batch again to the
/// full pipelines after a connector, doubling up to the most.
const CONNECT_RETRY: std::time::Duration = std::time::Duration::from_millis(5);
const CONNECT_RETRY_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// Sleeps until `deadline`, at most a day at a time (the timer's range is
/// bounded; waking early only makes the stage's tick find nothing due).
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => {
            let cap = Instant::now() + std::time::Duration::from_secs(86_400);
            tokio::time::sleep_until(d.min(cap).into()).await
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::{StageContext, Stateful, Verdict};
    use crate::telemetry::Telemetry;
    use bytes::Bytes;
    use profcol_model::proto::ProfilesData;
    use profcol_queue::{MemoryQueue, Queue};
    use prost::Message;

    /// A processor that only guards admission, reads, or changes batches
    /// (drops the last sample of the first profile); or a stateful stage
    /// that changes them so and emits them at once.
    #[derive(Clone, Copy, PartialEq)]
    enum Probe {
        Guards,
        Reads,
        Changes,
        Stage,
        /// Adds a resource attribute ([`ProfileBatch::edit_resources`]).
        EditsResources,
        /// Reads a batch it asserts is not decoded yet.
        FindsUndecoded,
    }

    /// What [`Probe::EditsResources`] does.
    fn edit(r: &mut profcol_model::proto::Resource, _: &mut String) {
        r.attributes.push(profcol_model::proto::KeyValue {
            key: "probe".into(),
            ..Default::default()
        });
    }

    /// What [`Probe::Changes`] does.
    fn change(data: &mut ProfilesData) {
        data.resource_profiles[0].scope_profiles[0].profiles[0]
            .samples
            .pop();
    }

    impl Processor for Probe {
        fn process(&mut self, batch: &mut ProfileBatch, _: &mut ProcessContext) -> Verdict {
            match self {
                Probe::FindsUndecoded => {
                    assert!(!batch.is_decoded(), "decoded before the chain");
                    batch.data();
                }
                Probe::Reads => {
                    batch.data();
                }
                Probe::Changes => change(batch.data_mut()),
                Probe::EditsResources => batch.edit_resources(edit),
                Probe::Guards | Probe::Stage => {}
            }
            Verdict::Keep
        }

        fn reads_batches(&self) -> bool {
            *self != Probe::Guards
        }

        fn decodes_batches(&self) -> bool {
            *self != Probe::EditsResources
        }

        fn stateful(&mut self) -> Option<&mut dyn Stateful> {
            if *self == Probe::Stage {
                Some(self)
            } else {
                None
            }
        }
    }

    impl Stateful for Probe {
        fn accept(
            &mut self,
            mut batch: ProfileBatch,
            _: Instant,
            out: &mut Vec<ProfileBatch>,
            _: &StageContext<'_>,
        ) {
            change(batch.data_mut());
            out.push(batch);
        }
        fn deadline(&self) -> Option<Instant> {
            None
        }
        fn tick(&mut self, _: Instant, _: &mut Vec<ProfileBatch>, _: &StageContext<'_>) {}
        fn flush(&mut self, _: &mut Vec<ProfileBatch>, _: &StageContext<'_>) {}
    }

    /// A pipeline of `processors` to one exporter that `decodes` or not:
    /// the pipeline, the exporter's queue and the memory budget.
    fn probed(
        processors: Vec<Probe>,
        decodes: bool,
    ) -> (Arc<Pipeline>, Arc<MemoryQueue>, Arc<MemoryBudget>) {
        let telemetry = Arc::new(Telemetry::new());
        let queue = Arc::new(MemoryQueue::new(8, crate::config::Sizer::Requests));
        let exporter = ExporterQueue {
            id: "e".into(),
            queue: queue.clone(),
            block: false,
            gauges: false,
            telemetry: telemetry.clone(),
            decodes,
            sends_compressed: None,
        };
        let processors = processors
            .into_iter()
            .enumerate()
            .map(|(i, probe)| {
                let id = ComponentId::parse(&format!("probe/{i}")).unwrap();
                (id, Box::new(probe) as Box<dyn Processor>)
            })
            .collect();
        let budget = MemoryBudget::new(1 << 30);
        let p = Arc::new(Pipeline::new(
            "profiles",
            8,
            std::time::Duration::ZERO,
            processors,
            vec![exporter],
            budget.clone(),
            telemetry,
        ));
        (p, queue, budget)
    }

    /// What comes out of a pipeline of `processors`, to an exporter that
    /// `decodes` or not, for a request checked on the wire; and the
    /// request.
    async fn through(processors: Vec<Probe>, decodes: bool) -> (Arc<ProfileBatch>, Bytes) {
        let (p, queue, budget) = probed(processors, decodes);
        // Over INLINE, so an active chain decodes it on the CPU pool.
        let bytes = Bytes::from(profcol_model::synth::request(20_000, 2_000).encode_to_vec());
        assert!(bytes.len() > INLINE);
        let clean = profcol_model::wire_check::check(&bytes).unwrap();
        let mut batch = ProfileBatch::checked(bytes.clone(), clean);
        batch.meta.memory = Some(Held::new(budget.force(bytes.len() + clean.heap)));
        let batch = Arc::new(batch);
        p.prepare(batch).await.unwrap().commit();
        (queue.take().await.unwrap().0.batch, bytes)
    }

    /// A receiving task that holds the chain (the batch decoded for it
    /// there) has its batch run through the chain on that task, with the
    /// lock it holds; another task's batch waits for the lock.
    #[tokio::test]
    async fn a_claimed_chain_runs_the_claiming_tasks_batch() {
        let (p, queue, budget) = probed(vec![Probe::Changes], true);
        let decoded = || {
            let d = profcol_model::synth::request(100, 20);
            let mut b = ProfileBatch::new(d);
            b.meta.memory = Some(Held::new(budget.force(b.held_bytes())));
            Arc::new(b)
        };
        let claim = p.claim().await.expect("a chain that decodes");
        // Held: a batch handed on without the claim waits for the lock...
        let other = tokio::spawn({
            let (p, b) = (p.clone(), decoded());
            async move { p.prepare(b).await.map(Prepared::commit) }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!other.is_finished(), "ran while the chain was held");
        // ...while the claiming task's own goes through with it.
        let ran = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            CHAIN_CLAIM.scope(std::cell::RefCell::new(Some(claim)), async {
                let r = p.prepare(decoded()).await.map(Prepared::commit);
                // Taken by the chain, and released once it ran.
                assert!(CHAIN_CLAIM.with(|c| c.borrow().is_none()));
                r
            }),
        )
        .await
        .expect("the claimed chain was locked again");
        ran.unwrap();
        other.await.unwrap().unwrap();
        for _ in 0..2 {
            let (got, _) = queue.take().await.unwrap();
            assert!(got.batch.encoded().is_none(), "each went through the chain");
        }
    }

    #[tokio::test]
    async fn a_pipeline_of_admission_guards_forwards_without_decoding() {
        use Probe::*;
        let (out, received) = through(vec![Guards, Guards], false).await;
        assert!(!out.is_decoded());
        assert_eq!(out.plain_bytes(), Some(&received));
        assert!(through(vec![Guards, Reads], true).await.0.is_decoded());
    }

    #[tokio::test]
    async fn a_free_chain_decodes_a_large_batch_in_its_own_run() {
        // `FindsUndecoded` fails the run if the pipeline decoded the batch
        // ahead of the chain, on another thread.
        let (out, received) = through(vec![Probe::FindsUndecoded], true).await;
        assert!(out.is_decoded());
        assert_eq!(out.data(), &ProfilesData::decode(received).unwrap());
    }

    #[tokio::test]
    async fn a_chain_that_edits_resources_only_never_decodes_the_batch() {
        use Probe::*;
        // To an exporter that decodes: nothing settles the batch to bytes
        // at the chain's end, so it is as the chain left it.
        let (out, received) = through(vec![EditsResources], true).await;
        assert!(!out.is_decoded(), "not decoded for the chain");
        let sent = out.plain_bytes().expect("held as bytes").clone();
        let mut want = ProfilesData::decode(received).unwrap();
        for rp in &mut want.resource_profiles {
            edit(
                rp.resource.get_or_insert_with(Default::default),
                &mut rp.schema_url,
            );
        }
        assert_eq!(ProfilesData::decode(sent).unwrap(), want);
        // Before a processor that reads the batch, it is edited as bytes
        // and then decoded.
        let (out, _) = through(vec![EditsResources, Reads], true).await;
        assert!(out.is_decoded());
        assert_eq!(out.data(), &want);
    }

    /// Exporters that only send bytes get a batch that holds its bytes
    /// alone, changed or not, with its counts, from a chain or a stage;
    /// one that decodes gets the messages.
    #[tokio::test]
    async fn a_chain_hands_exporters_that_send_bytes_only_its_bytes() {
        use Probe::*;
        let (out, received) = through(vec![Reads], false).await;
        assert!(!out.is_decoded());
        assert_eq!(out.plain_bytes(), Some(&received));

        for probes in [vec![Reads, Changes], vec![Stage], vec![Reads, Stage, Reads]] {
            let (out, received) = through(probes, false).await;
            assert!(!out.is_decoded());
            let mut want = ProfilesData::decode(&received[..]).unwrap();
            change(&mut want);
            let sent = out.plain_bytes().expect("encoded by the chain");
            assert_eq!(sent, &want.encode_to_vec());
            let (samples, profiles) = (out.sample_count(), out.profile_count());
            assert_eq!(samples, 20_000 - 1);
            assert_eq!(profiles, 1);
            // What the batch holds is its bytes; decoding them again is right.
            assert_eq!(out.meta.memory.as_ref().unwrap().bytes(), sent.len());
            assert_eq!(out.data(), &want);
        }

        for probes in [vec![Changes], vec![Stage]] {
            let (out, _) = through(probes, true).await;
            assert!(out.is_decoded());
            assert!(out.plain_bytes().is_none());
        }
    }
}

#[cfg(test)]
mod connector_tests {
    use super::*;
    use crate::component::{GateRefusal, Stateful, Verdict};
    use profcol_queue::MemoryQueue;

    /// A `memory_limiter` that always refuses.
    struct Refusing;

    impl Gate for Refusing {
        fn admit(&self) -> Result<(), GateRefusal> {
            Err(GateRefusal {
                reason: "memory_limiter",
                detail: "over the limit".into(),
            })
        }
    }

    struct Guard;

    impl Processor for Guard {
        fn process(&mut self, _: &mut ProfileBatch, _: &mut ProcessContext) -> Verdict {
            Verdict::Keep
        }
        fn gate(&self) -> Option<Arc<dyn Gate>> {
            Some(Arc::new(Refusing))
        }
        fn reads_batches(&self) -> bool {
            false
        }
    }

    /// A stage that emits what it takes at once.
    struct PassOn;

    impl Processor for PassOn {
        fn process(&mut self, _: &mut ProfileBatch, _: &mut ProcessContext) -> Verdict {
            unreachable!("a stateful stage")
        }
        fn stateful(&mut self) -> Option<&mut dyn Stateful> {
            Some(self)
        }
    }

    impl Stateful for PassOn {
        fn accept(
            &mut self,
            batch: ProfileBatch,
            _: Instant,
            out: &mut Vec<ProfileBatch>,
            _: &StageContext<'_>,
        ) {
            out.push(batch);
        }
        fn deadline(&self) -> Option<Instant> {
            None
        }
        fn tick(&mut self, _: Instant, _: &mut Vec<ProfileBatch>, _: &StageContext<'_>) {}
        fn flush(&mut self, _: &mut Vec<ProfileBatch>, _: &StageContext<'_>) {}
    }

    fn id(s: &str) -> ComponentId {
        ComponentId::parse(s).unwrap()
    }

    /// `in` (with `stage` or not) -> forward -> `out` (whose gate always
    /// refuses) -> a queue.
    fn graph(stage: bool) -> (Arc<Pipeline>, Arc<MemoryQueue>, Arc<Telemetry>) {
        let telemetry = Arc::new(Telemetry::new());
        let budget = MemoryBudget::new(1 << 30);
        let queue = Arc::new(MemoryQueue::new(8, crate::config::Sizer::Requests));
        let exporter = ExporterQueue {
            id: "e".into(),
            queue: queue.clone(),
            block: false,
            gauges: false,
            telemetry: telemetry.clone(),
            decodes: false,
            sends_compressed: None,
        };
        let out = Arc::new(Pipeline::with_connectors(
            "profiles/out",
            8,
            std::time::Duration::ZERO,
            vec![(id("memory_limiter"), Box::new(Guard) as Box<dyn Processor>)],
            vec![exporter],
            Vec::new(),
            Observers::from([]),
            1,
            budget.clone(),
            telemetry.clone(),
        ));
        let connection = Connection {
            id: "forward".into(),
            to: Downstream::Profiles(Output::new(
                "forward",
                vec![out],
                budget.clone(),
                telemetry.clone(),
            )),
        };
        let processors = match stage {
            true => vec![(id("pass_on"), Box::new(PassOn) as Box<dyn Processor>)],
            false => Vec::new(),
        };
        let input = Arc::new(Pipeline::with_connectors(
            "profiles",
            8,
            std::time::Duration::ZERO,
            processors,
            Vec::new(),
            vec![connection],
            Observers::from([]),
            0,
            budget,
            telemetry.clone(),
        ));
        (input, queue, telemetry)
    }

    fn batch() -> Arc<ProfileBatch> {
        Arc::new(ProfileBatch::new(profcol_model::synth::request(100, 10)))
    }

    /// Not yet accepted: the gate after the connector refuses the batch
    /// for the pipeline before it, retryably, and nothing is queued.
    #[tokio::test]
    async fn a_gate_after_a_connector_refuses_a_new_batch() {
        let (input, queue, _) = graph(false);
        let err = input.prepare(batch()).await.err().expect("refused");
        assert_eq!(err.reason(), "memory_limiter");
        assert_eq!(queue.size(), 0);
    }

    /// What a stage emits was accepted: the gate lets it through into the
    /// queue after the connector.
    #[tokio::test]
    async fn what_a_stage_emits_passes_the_gates_after_a_connector() {
        let (input, queue, telemetry) = graph(true);
        input.prepare(batch()).await.unwrap().commit();
        // Were it refused, the stage would wait for room for ever.
        tokio::time::timeout(std::time::Duration::from_secs(20), input.finish())
            .await
            .expect("the stage emitted into the queue after the connector");
        assert_eq!(queue.size(), 1);
        assert_eq!(telemetry.exporter_dropped_total("forward"), 0);
        assert_eq!(input.held_samples(), 0);
    }
}
