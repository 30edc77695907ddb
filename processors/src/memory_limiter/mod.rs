//! Processor `memory_limiter`: the Collector's processor of that name, with
//! its keys. Every `check_interval` at most, as batches arrive, it reads the
//! process's resident memory; above the soft limit (`limit - spike`) the
//! pipeline refuses batches with a retryable answer (reason
//! `memory_limiter`; gRPC `UNAVAILABLE`, HTTP 429/503) and asks the
//! allocator to give back what it keeps (a Go Collector forces a garbage
//! collection there). Below it again, batches flow.
//!
//! Its hard limit (`limit_mib`, or `limit_percentage` of the cgroup's or
//! machine's memory) sizes the collector's memory budget, which bounds the
//! data in flight and counts the process's resident memory too, unless
//! `--memory-limit-mib` is given: the flag wins. With several
//! `memory_limiter`s the smallest limit does.
//!
//! The check is made when a batch enters the pipeline, wherever the
//! processor stands in the chain (the Collector recommends it first); the
//! processor passes every batch through unchanged.

mod config;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use profcol_model::memory;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{
    Gate, GateRefusal, ProcessContext, Processor, ProcessorFactory, Verdict,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{Limits, MemoryLimiterConfig};

/// The reason refused samples are counted with.
pub const REFUSED: &str = "memory_limiter";

pub struct MemoryLimiterFactory;

impl ProcessorFactory for MemoryLimiterFactory {
    fn type_name(&self) -> &'static str {
        "memory_limiter"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, limits) =
            cfg.decode_checked(|c: &MemoryLimiterConfig| c.validate(cfg, memory::total_memory()))?;
        Ok(Box::new(MemoryLimiter {
            gate: Arc::new(MemoryGate::new(limits, memory::resident_bytes)),
        }))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(MemoryLimiterFactory)
}

pub struct MemoryLimiter {
    gate: Arc<MemoryGate>,
}

impl Processor for MemoryLimiter {
    fn process(&mut self, _: &mut ProfileBatch, _: &mut ProcessContext) -> Verdict {
        Verdict::Keep
    }

    fn gate(&self) -> Option<Arc<dyn Gate>> {
        Some(self.gate.clone())
    }

    fn reads_batches(&self) -> bool {
        false
    }
}

/// Refuses while resident memory, measured at most every `check_interval`,
/// is above the soft limit.
pub struct MemoryGate {
    limits: Limits,
    read: fn() -> Option<usize>,
    /// When memory was last read, and whether it was above the soft limit.
    last: Mutex<Option<(Instant, bool)>>,
}

impl MemoryGate {
    pub fn new(limits: Limits, read: fn() -> Option<usize>) -> Self {
        Self {
            limits,
            read,
            last: Mutex::new(None),
        }
    }

    /// Whether memory is above the soft limit, reading it again once
    /// `check_interval` has passed since the last reading.
    fn above(&self, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, above)) = *last {
            if now.duration_since(at) < self.limits.check_interval {
                return above;
            }
        }
        // Unreadable (not Linux): nothing to limit by.
        let rss = (self.read)().unwrap_or(0);
        let above = rss > self.limits.soft;
        if above {
            let was = last.is_some_and(|(_, a)| a);
            if !was {
                tracing::warn!(
                    resident_mib = rss >> 20,
                    soft_limit_mib = self.limits.soft >> 20,
                    "memory usage is above the soft limit: refusing data"
                );
            }
            memory::release_freed_memory();
        } else if last.is_some_and(|(_, a)| a) {
            tracing::info!(
                resident_mib = rss >> 20,
                "memory usage is back below the soft limit: accepting data"
            );
        }
        *last = Some((now, above));
        above
    }
}

impl Gate for MemoryGate {
    fn admit(&self) -> Result<(), GateRefusal> {
        if self.above(Instant::now()) {
            return Err(GateRefusal {
                reason: REFUSED,
                detail: format!(
                    "data refused due to high memory usage (above the soft limit of {} MiB)",
                    self.limits.soft >> 20
                ),
            });
        }
        Ok(())
    }

    fn memory_limit(&self) -> Option<usize> {
        Some(self.limits.hard)
    }
}
