//! What a component is: factories decode and validate their config and make
//! unstarted components; the runtime starts, wires and stops them.

mod auth;
mod context;
mod traits;

pub use auth::{AuthConfig, Authenticator, Authenticators};
pub use context::{
    ConsumeError, DropReason, ExporterContext, Output, ProcessContext, ProcessorCounts, Ready,
    ReceiverContext, Route, Storages,
};
/// What an exporter sends and how far it got: the queue's types, which a
/// persistent queue stores.
pub use profcol_queue::{Progress, Request};
pub use traits::{
    Connector, ConnectorFactory, ExportError, ExportOutcome, Exporter, ExporterFactory,
    ExporterSettings, Extension, ExtensionFactory, Gate, GateRefusal, Observer, Observers,
    Processor, ProcessorFactory, ProcessorStart, ProfilesToMetrics, Receiver, ReceiverFactory,
    StageContext, Stateful, Storage, Verdict,
};
