//! Processor `batch`: the Collector's batch processor, for profiles. It
//! holds the batches a pipeline accepts and sends them on merged, so that a
//! gateway receiving thousands of small requests from sidecars forwards few
//! large ones, each with one dictionary instead of one per request.
//!
//! - Sizes are in samples (observations, the unit of every profcol metric):
//!   a batch goes out once it holds `send_batch_size` samples, or
//!   `timeout` after its oldest data arrived, or at shutdown.
//!   `send_batch_max_size` caps a batch: an input that would take a batch
//!   past it sends that batch first, and a larger input is split between
//!   its profiles, each part self-contained (the dictionary module's
//!   `extract`); a profile is never cut, so one profile larger than the cap
//!   goes out alone.
//! - Merging N batches makes one whose dictionary is the union with equal
//!   entries shared (the linear `model::dictionary::Merger`: each input's
//!   live entries are interned once, by hash), whose resources with equal
//!   attributes are merged, and scopes too; profiles are kept as they are,
//!   never merged with one another. A batch that stays alone goes out as it
//!   came (its received bytes are forwarded).
//! - Batches are kept apart by the values of `metadata_keys` in the
//!   client's metadata (a tenant header), at most
//!   `metadata_cardinality_limit` combinations at once, and by origin (a
//!   Sentry envelope's headers are never merged with another's).
//! - Memory: a held input keeps its reservation until the batch it went
//!   into is sent; that batch then holds a reservation of its own size.
//!
//! The runtime drives it as a stateful stage (see
//! `profcol_pipeline::component::Stateful`): the client is answered once
//! its batch is held here; what goes out waits for room in the exporters'
//! queues.

mod config;
mod pending;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{
    ProcessContext, Processor, ProcessorFactory, StageContext, Stateful, Verdict,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{BatchConfig, Sizer};

use pending::{split_at_profiles, Key, Pending};

pub struct BatchFactory;

impl ProcessorFactory for BatchFactory {
    fn type_name(&self) -> &'static str {
        "batch"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &BatchConfig| c.validate(cfg))?;
        Ok(Box::new(Batch::new(&c)))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(BatchFactory)
}

/// Why a batch went out (the Collector's trigger metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    Size,
    Timeout,
    /// Room for a new metadata combination was needed.
    Cardinality,
    Shutdown,
}

impl Trigger {
    fn label(self) -> &'static str {
        match self {
            Trigger::Size => "size",
            Trigger::Timeout => "timeout",
            Trigger::Cardinality => "cardinality",
            Trigger::Shutdown => "shutdown",
        }
    }
}

pub struct Batch {
    sizer: Sizer,
    timeout: Duration,
    send_batch_size: u64,
    send_batch_max_size: u64,
    metadata_keys: Vec<String>,
    cardinality_limit: usize,
    /// The batches being filled, by key.
    pending: HashMap<Key, Pending>,
    /// Keys in the order their batches started, with each one's
    /// generation: the front is the next to time out (every batch waits
    /// the same `timeout`). Entries of batches sent early are skipped.
    order: VecDeque<(Instant, Key, u64)>,
    generation: u64,
}

impl Batch {
    pub fn new(c: &BatchConfig) -> Self {
        Self {
            sizer: c.sizer.unwrap_or_default(),
            timeout: c.timeout.get(),
            send_batch_size: u64::from(c.send_batch_size),
            send_batch_max_size: u64::from(c.send_batch_max_size),
            metadata_keys: c
                .metadata_keys
                .iter()
                .map(|k| k.to_ascii_lowercase())
                .collect(),
            cardinality_limit: (c.metadata_cardinality_limit as usize).max(1),
            pending: HashMap::new(),
            order: VecDeque::new(),
            generation: 0,
        }
    }

    /// Sends the batch of `key`.
    fn send(
        &mut self,
        key: &Key,
        trigger: Trigger,
        out: &mut Vec<ProfileBatch>,
        ctx: &StageContext<'_>,
    ) {
        if let Some(p) = self.pending.remove(key) {
            let batch = p.finish(&self.metadata_keys);
            ctx.telemetry.batch_sent(
                ctx.processor,
                batch.sample_count(),
                batch.encoded_len(),
                trigger.label(),
            );
            out.push(batch);
        }
        self.drop_stale();
    }

    /// Forgets order entries of batches that were sent early.
    fn drop_stale(&mut self) {
        while let Some((_, key, generation)) = self.order.front() {
            match self.pending.get(key) {
                Some(p) if p.generation == *generation => break,
                _ => {
                    self.order.pop_front();
                }
            }
        }
    }

    /// The batch of `key`, started now if there is none; at the
    /// cardinality limit, the oldest batch goes out to make room.
    fn batch_for(
        &mut self,
        key: &Key,
        now: Instant,
        out: &mut Vec<ProfileBatch>,
        ctx: &StageContext<'_>,
    ) -> &mut Pending {
        if !self.pending.contains_key(key) {
            while self.pending.len() >= self.cardinality_limit {
                let Some((_, oldest, _)) = self.order.front().cloned() else {
                    break;
                };
                self.send(&oldest, Trigger::Cardinality, out, ctx);
            }
            self.generation += 1;
            // A timeout of years is as good as none (and must not overflow).
            let due = now
                .checked_add(self.timeout)
                .unwrap_or(now + Duration::from_secs(100 * 365 * 86400));
            self.order.push_back((due, key.clone(), self.generation));
            self.pending
                .insert(key.clone(), Pending::new(self.generation));
        }
        self.pending.get_mut(key).expect("inserted above")
    }

    /// A batch's size in the sizer's unit.
    fn size_of(&self, batch: &ProfileBatch) -> u64 {
        match self.sizer {
            Sizer::Items => batch.sample_count(),
            Sizer::Bytes => batch.encoded_len() as u64,
        }
    }

    /// Adds `part`, of `n` in the sizer's unit.
    fn add(
        &mut self,
        key: &Key,
        part: ProfileBatch,
        n: u64,
        now: Instant,
        out: &mut Vec<ProfileBatch>,
        ctx: &StageContext<'_>,
    ) {
        let max = self.send_batch_max_size;
        let held = self.pending.get(key).map_or(0, |p| p.size);
        if max > 0 && held > 0 && held + n > max {
            self.send(key, Trigger::Size, out, ctx);
        }
        let size = self.send_batch_size;
        let p = self.batch_for(key, now, out, ctx);
        p.push(part, n);
        let full = size > 0 && p.size >= size;
        if full || self.timeout.is_zero() {
            self.send(key, Trigger::Size, out, ctx);
        }
    }
}

impl Processor for Batch {
    /// Not called: the runtime drives `batch` as a stateful stage.
    fn process(&mut self, _: &mut ProfileBatch, _: &mut ProcessContext) -> Verdict {
        Verdict::Keep
    }

    fn stateful(&mut self) -> Option<&mut dyn Stateful> {
        Some(self)
    }
}

impl Stateful for Batch {
    fn accept(
        &mut self,
        batch: ProfileBatch,
        now: Instant,
        out: &mut Vec<ProfileBatch>,
        ctx: &StageContext<'_>,
    ) {
        let key = Key::of(&batch.meta, &self.metadata_keys);
        let max = self.send_batch_max_size;
        // Measured once: for bytes, a changed batch's size is a walk.
        let n = self.size_of(&batch);
        if max > 0 && n > max {
            for part in split_at_profiles(batch, max, self.sizer) {
                let n = self.size_of(&part);
                self.add(&key, part, n, now, out, ctx);
            }
        } else {
            self.add(&key, batch, n, now, out, ctx);
        }
        ctx.telemetry
            .batch_cardinality(ctx.processor, self.pending.len());
    }

    fn deadline(&self) -> Option<Instant> {
        self.order.front().map(|(at, _, _)| *at)
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<ProfileBatch>, ctx: &StageContext<'_>) {
        while let Some((at, key, _)) = self.order.front().cloned() {
            if at > now {
                break;
            }
            self.send(&key, Trigger::Timeout, out, ctx);
        }
        ctx.telemetry
            .batch_cardinality(ctx.processor, self.pending.len());
    }

    fn flush(&mut self, out: &mut Vec<ProfileBatch>, ctx: &StageContext<'_>) {
        while let Some((_, key, _)) = self.order.front().cloned() {
            self.send(&key, Trigger::Shutdown, out, ctx);
        }
        ctx.telemetry.batch_cardinality(ctx.processor, 0);
    }
}
