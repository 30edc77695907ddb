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
