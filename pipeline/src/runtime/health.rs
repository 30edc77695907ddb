use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::telemetry::Telemetry;

/// Handed to an extension when it starts.
#[derive(Clone)]
pub struct ExtensionContext {
    pub id: String,
    pub shutdown: CancellationToken,
    pub telemetry: Arc<Telemetry>,
    pub health: Arc<Health>,
    /// The running authenticators, for an extension whose `auth:` names one.
    pub authenticators: crate::component::Authenticators,
    /// The collector's memory budget, for what an extension keeps.
    pub budget: Arc<profcol_model::memory::MemoryBudget>,
}

/// Whether the collector is ready: every component started and not draining.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}
