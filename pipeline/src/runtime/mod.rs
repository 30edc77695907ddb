//! Builds the component graph from a config and runs it:
//! receiver --(memory budget)--> pipelines: processor chain, then a slot in
//! each exporter's bounded queue (two-phase, all or nothing) --> answer the
//! client --> consumers: retry/timeout --> peer.

mod build;
mod exporter_helper;
mod health;
mod metrics;
mod pipeline;
mod registry;
mod reload;
mod service;

/// The sending queues: `profcol-queue`, under its old path.
pub use profcol_queue as queue;

pub use build::{build, check, create_exporter, ConnectorNode, Graph, PipelineNode};
pub use exporter_helper::Backoff;
pub use health::{ExtensionContext, Health};
pub use metrics::{MetricsOut, MetricsPipeline, MetricsQueue};
pub use pipeline::{Claim, Connection, Downstream, ExporterQueue, Pipeline, Prepared, CHAIN_CLAIM};
pub use registry::Registry;
pub use reload::{Changes, ReloadSummary};
pub use service::{RunningService, RuntimeOptions};
