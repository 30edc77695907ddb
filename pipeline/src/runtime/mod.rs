//! Builds the component graph from a config and runs it:
//! receiver -> [bounded pipeline inbox] -> worker (processor chain)
//! -> Arc fan-out -> [bounded queue per exporter] -> retry/timeout -> peer.

mod build;
mod exporter_helper;
mod health;
mod registry;
mod service;
mod worker;

pub use build::{build, Graph};
pub use exporter_helper::{Backoff, QueueHandle};
pub use health::{ExtensionContext, Health};
pub use registry::Registry;
pub use service::{RunningService, RuntimeOptions};
