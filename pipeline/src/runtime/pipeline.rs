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

use std::sync::Arc;

use tokio::sync::{Mutex, Semaphore};

use crate::component::{ConsumeError, Gate, ProcessContext, Processor, ProcessorCounts, Verdict};
use crate::config::ComponentId;
use crate::memory::{Held, MemoryBudget};
use crate::model::ProfileBatch;
use crate::telemetry::Telemetry;

use super::queue::{Queue, QueueError, Slot};

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

pub struct Pipeline {
    pub id: Arc<str>,
    /// Batches in this pipeline at once (being processed or waiting for
    /// the chain); past it receivers are told to retry (`pipeline_full`).
    pub admission: Arc<Semaphore>,
    chain: Option<Arc<Mutex<Chain>>>,
    /// Checks made before a batch enters (`memory_limiter`).
    gates: Vec<Arc<dyn Gate>>,
    exporters: Vec<ExporterQueue>,
    budget: Arc<MemoryBudget>,
    telemetry: Arc<Telemetry>,
}

impl Pipeline {
    pub fn new(
        id: &str,
        max_batches: usize,
        processors: Vec<(ComponentId, Box<dyn Processor>)>,
        exporters: Vec<ExporterQueue>,
        budget: Arc<MemoryBudget>,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        let id: Arc<str> = id.into();
        let gates = processors.iter().filter_map(|(_, p)| p.gate()).collect();
        let chain = (!processors.is_empty()).then(|| {
            Arc::new(Mutex::new(Chain {
                names: processors.iter().map(|(id, _)| id.to_string()).collect(),
                processors: processors.into_iter().map(|(_, p)| p).collect(),
                id: id.clone(),
                budget: budget.clone(),
            }))
        });
        Self {
            id,
            admission: Arc::new(Semaphore::new(max_batches.max(1))),
            chain,
            gates,
            exporters,
            budget,
            telemetry,
        }
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

    /// Runs the processors and writes the batch into a slot of every
    /// exporter queue (to disk, for a persistent one).
    pub async fn prepare(
        self: &Arc<Self>,
        batch: Arc<ProfileBatch>,
    ) -> Result<Prepared, ConsumeError> {
        let (out, runs) = match &self.chain {
            None => ((!batch.is_empty()).then_some(batch), Vec::new()),
            Some(chain) => {
                let (chain, budget) = (chain.clone(), self.budget.clone());
                // On a task of its own: a client that gives up must not take
                // the chain down with its request.
                tokio::spawn(async move {
                    let mut chain = chain.lock_owned().await;
                    let work = budget.for_work(held(&batch)).await;
                    crate::cpu::run(move || {
                        let r = chain.process(batch);
                        drop(work);
                        r
                    })
                    .await
                })
                .await
                .expect("a processor panicked")
            }
        };
        let mut prepared = Prepared {
            pipeline: self.clone(),
            batch: out,
            slots: Vec::new(),
            runs,
        };
        let Some(batch) = prepared.batch.clone() else {
            return Ok(prepared);
        };
        // As the Collector, a queue that cannot take the batch counts it as
        // enqueue-failed; the client is refused, so nothing accepted is.
        let refused = |e: &ExporterQueue, err: QueueError| {
            if err != QueueError::Closed {
                let n = batch.sample_count();
                self.telemetry
                    .exporter_enqueue_failed(&e.id, n, &err.to_string());
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
        Ok(prepared)
    }
}

fn held(batch: &ProfileBatch) -> usize {
    batch.meta.memory.as_ref().map_or(0, |m| m.bytes())
}

/// A batch through one pipeline, with its exporters' slots held.
pub struct Prepared {
    pipeline: Arc<Pipeline>,
    batch: Option<Arc<ProfileBatch>>,
    slots: Vec<(ExporterQueue, Box<dyn Slot>)>,
    runs: Vec<ProcessorRun>,
}

impl Prepared {
    /// Hands the batch to every exporter's consumers and counts what the
    /// processors did.
    pub fn commit(self) {
        let p = &self.pipeline;
        for run in &self.runs {
            run.count(&p.id, &p.telemetry);
        }
        for (e, slot) in self.slots {
            slot.commit();
            e.update_gauge();
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
}

impl Chain {
    /// Runs the chain. A batch is copied only if another pipeline still
    /// shares it (the copy then gets a reservation of its own); `None` when
    /// nothing is left to export.
    fn process(
        &mut self,
        batch: Arc<ProfileBatch>,
    ) -> (Option<Arc<ProfileBatch>>, Vec<ProcessorRun>) {
        let shared = Arc::strong_count(&batch) > 1;
        let mut batch = Arc::unwrap_or_clone(batch);
        if shared {
            let bytes = held(&batch);
            batch.meta.memory = Some(Held::new(self.budget.force(bytes)));
        }
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
        // What the batch holds now (processors mostly shrink it).
        if let Some(m) = &batch.meta.memory {
            m.set(batch.held_bytes());
        }
        (Some(Arc::new(batch)), runs)
    }
}
