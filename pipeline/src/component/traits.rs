use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::context::{DropReason, ExporterContext, ProcessContext, ReceiverContext};
use crate::config::{ComponentConfig, ConfigErrors, QueueSettings, RetrySettings, Signal};
use profcol_model::proto::metrics::ExportMetricsServiceRequest;
use profcol_model::ProfileBatch;
use profcol_queue::Request;

/// Makes receivers of one YAML type. `create` decodes and validates the
/// config and binds nothing, so `profcol validate` can call it.
pub trait ReceiverFactory: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors>;
}

#[async_trait]
pub trait Receiver: Send {
    /// Socket addresses this receiver will bind, so two receivers on one port
    /// are a config error rather than a start-up failure.
    fn endpoints(&self) -> Vec<String> {
        Vec::new()
    }

    /// The authenticators it names, with the key path of each reference,
    /// checked against the running extensions before start-up.
    fn authenticators(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The storage extensions it names, with the key path of each.
    fn storages(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Binds and starts serving in background tasks; returns once bound.
    /// Serving stops when `ctx.shutdown` is cancelled; the returned handle
    /// completes when the receiver has stopped accepting.
    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>>;
}

pub trait ProcessorFactory: Send + Sync {
    fn type_name(&self) -> &'static str;
    /// Other YAML types that mean this one (`k8s_attributes` for
    /// `k8sattributes`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// One processor instance per pipeline that lists the id.
    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors>;
    /// The processor as `profcol validate` and an id no pipeline lists
    /// make it: its config checked, nothing done that only a collector
    /// about to run does (`resourcedetection`'s detection, which the
    /// Collector runs when it starts).
    fn check(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        self.create(cfg)
    }
}

/// What a processor decided about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Pass the (possibly changed) batch on.
    Keep,
    /// Nothing is left to pass on; whatever was removed has been counted.
    Drop,
}

/// Synchronous, deterministic, no I/O. A processor that drops samples calls
/// `ctx.dropped(n, reason)`; the runtime counts the rest.
pub trait Processor: Send {
    /// One batch in, the same batch (changed or not) out. Not called for a
    /// stage that is [`Processor::stateful`].
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict;

    /// Gives back the buffers kept from batch to batch: called once the
    /// collector has been idle a while, so that resident memory follows the
    /// data in flight rather than the largest batch ever seen.
    fn release_buffers(&mut self) {}

    /// A stage that holds batches and emits them later (`batch`): the
    /// runtime drives it through [`Stateful`] instead of `process`.
    fn stateful(&mut self) -> Option<&mut dyn Stateful> {
        None
    }

    /// A check made before a batch enters the pipeline at all
    /// (`memory_limiter`): a refusal refuses the batch retryably.
    fn gate(&self) -> Option<Arc<dyn Gate>> {
        None
    }

    /// Whether `process` looks at the batch. A processor that only guards
    /// admission through its [`Processor::gate`] (`memory_limiter`) does
    /// not: a pipeline of such processors forwards batches as received,
    /// without decoding them or queueing for its chain.
    fn reads_batches(&self) -> bool {
        true
    }

    /// Whether `process` reads the batch's messages. One that only edits
    /// its resources ([`ProfileBatch::edit_resources`]: `resource`) does
    /// not: a batch held as its received bytes is then not decoded for it
    /// ahead of the chain, and may stay bytes through it.
    fn decodes_batches(&self) -> bool {
        true
    }

    /// Called once when its pipeline starts running (never by `profcol
    /// validate`), on the runtime: a processor fed from outside the
    /// pipeline (`k8sattributes`' watches of the Kubernetes API) spawns its
    /// background tasks here. They must end when the processor is dropped
    /// (a reload or shutdown); `process` stays synchronous and reads only
    /// what they left in memory.
    fn start(&mut self, _ctx: &ProcessorStart<'_>) {}
}

/// What [`Processor::start`] gets: its id, the collector's memory budget
/// (what it keeps is reserved there) and the telemetry it counts in.
pub struct ProcessorStart<'a> {
    pub id: &'a str,
    pub budget: &'a Arc<profcol_model::memory::MemoryBudget>,
    pub telemetry: &'a Arc<crate::telemetry::Telemetry>,
}

/// Checked before a batch is admitted to a pipeline, wherever its
/// processor stands in the chain.
pub trait Gate: Send + Sync {
    /// `Err` refuses the batch; its client retries.
    fn admit(&self) -> Result<(), GateRefusal>;

    /// The memory limit this gate stands for, in bytes, which sizes the
    /// collector's memory budget unless `--memory-limit-mib` is given.
    fn memory_limit(&self) -> Option<usize> {
        None
    }
}

/// Why a [`Gate`] refused a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRefusal {
    /// The `reason` label the refused samples are counted with.
    pub reason: super::DropReason,
    pub detail: String,
}

/// A stage that holds batches and emits them later: merged, split, or as
/// they came. The runtime owns it on a task of its own per pipeline: it
/// hands it every batch the pipeline accepted (in order), calls
/// [`Stateful::tick`] once [`Stateful::deadline`] has passed and
/// [`Stateful::flush`] at shutdown, before the exporters drain. What the
/// stage emits goes through the rest of the chain into the exporters'
/// queues, waiting for room there: data a client was told is accepted is
/// never refused afterwards.
///
/// Accounting: the runtime counts what the stage holds (samples between
/// `accept` and the queues) as neither lost nor sent
/// (`profcol_processor_held_profile_samples`). A stage must emit every
/// sample it takes (it may merge batches but drops nothing); the memory a
/// held batch reserved stays reserved until what it was merged into is
/// emitted, which then holds a reservation of its own size
/// ([`profcol_model::memory::Held::merge`]).
pub trait Stateful: Send {
    /// Takes a batch; pushes to `out` whatever is ready to go on.
    fn accept(
        &mut self,
        batch: ProfileBatch,
        now: Instant,
        out: &mut Vec<ProfileBatch>,
        ctx: &StageContext<'_>,
    );
    /// When [`Stateful::tick`] should next run; `None` while nothing waits
    /// for time.
    fn deadline(&self) -> Option<Instant>;
    /// Emits what is due at `now`.
    fn tick(&mut self, now: Instant, out: &mut Vec<ProfileBatch>, ctx: &StageContext<'_>);
    /// Emits everything it holds (shutdown).
    fn flush(&mut self, out: &mut Vec<ProfileBatch>, ctx: &StageContext<'_>);
}

/// What a [`Stateful`] stage counts its own metrics with.
pub struct StageContext<'a> {
    pub pipeline: &'a str,
    pub processor: &'a str,
    pub telemetry: &'a crate::telemetry::Telemetry,
}

/// Queue, retry and timeout settings every exporter carries, with the
/// Collector's names and defaults. The runtime decodes them (the keys
/// `timeout`, `retry_on_failure`, `sending_queue`) for every exporter type
/// that has them; the exporter's own config never sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct ExporterSettings {
    pub timeout: Duration,
    pub retry_on_failure: RetrySettings,
    pub sending_queue: QueueSettings,
}

impl ExporterSettings {
    /// The Collector's defaults with this `timeout` (exporterhelper: 5 s).
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            retry_on_failure: RetrySettings::default(),
            sending_queue: QueueSettings::default(),
        }
    }

    /// No queue (the client waits for each send) and no retries: the
    /// Collector's `debug` exporter.
    pub fn synchronous() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            retry_on_failure: RetrySettings {
                enabled: false,
                ..RetrySettings::default()
            },
            sending_queue: QueueSettings {
                enabled: false,
                ..QueueSettings::default()
            },
        }
    }
}

pub trait ExporterFactory: Send + Sync {
    fn type_name(&self) -> &'static str;
    /// Other YAML types that mean this one (`otlp_grpc` for `otlp`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// Defaults of the `timeout`, `retry_on_failure` and `sending_queue`
    /// keys, which the runtime decodes; `None` for a type without them
    /// (its settings are then [`ExporterSettings::synchronous`]).
    fn default_settings(&self) -> Option<ExporterSettings> {
        Some(ExporterSettings::with_timeout(Duration::from_secs(5)))
    }
    /// The exporter, from its own keys (`cfg` without the settings' keys)
    /// and the settings the runtime decoded.
    fn create(
        &self,
        cfg: &ComponentConfig,
        settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors>;
}

/// Why one export attempt failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExportError {
    /// Worth trying again, after `retry_after` when the peer said so.
    #[error("{message}")]
    Retryable {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Trying again cannot help; the batch is counted as failed.
    #[error("{message}")]
    Permanent { message: String },
}

impl ExportError {
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::Retryable {
            message: message.into(),
            retry_after: None,
        }
    }

    /// Retryable after `after` (the peer's RetryInfo or Retry-After).
    pub fn retry_after(message: impl Into<String>, after: Option<Duration>) -> Self {
        Self::Retryable {
            message: message.into(),
            retry_after: after,
        }
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent {
            message: message.into(),
        }
    }
}

/// What became of a batch an export attempt finished (`Ok` of
/// [`Exporter::export`]). The runtime counts each `dropped` entry as dropped
/// with its reason, `rejected` as failed, and the rest of the batch as sent,
/// so that every sample is counted exactly once. An exporter reports its own
/// drops here rather than counting them itself: an attempt that fails is
/// counted whole by the runtime, and only the attempt that finishes the
/// batch says what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOutcome {
    /// Samples the peer rejected (partial success).
    pub rejected: u64,
    /// Samples the exporter chose not to send, by reason.
    pub dropped: Vec<(DropReason, u64)>,
}

impl ExportOutcome {
    /// Every sample was delivered.
    pub fn delivered() -> Self {
        Self::default()
    }

    /// The peer rejected `samples` of the batch; the rest was delivered.
    pub fn rejected(samples: u64) -> Self {
        Self {
            rejected: samples,
            dropped: Vec::new(),
        }
    }

    /// Samples in `dropped`.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|&(_, n)| n).sum()
    }
}

#[async_trait]
pub trait Exporter: Send + Sync {
    /// The authenticators it names, with the key path of each reference.
    fn authenticators(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Called once before the first export (open connections, directories).
    async fn start(&self, _ctx: &ExporterContext) -> anyhow::Result<()> {
        Ok(())
    }

    /// Sends one request. The runtime applies the timeout and the retries;
    /// the exporter only classifies what went wrong. On success, returns
    /// what the peer rejected through partial success and what the exporter
    /// left out itself (over every attempt of the request); an `Err` counts
    /// the request as failed, except what its recorded progress says was
    /// delivered.
    async fn export(
        &self,
        req: &Request,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError>;

    /// Called after the queue has drained.
    async fn shutdown(&self) {}

    /// Whether it takes profiles (a profiles pipeline may list it); the
    /// `prometheus` exporter takes metrics only.
    fn exports_profiles(&self) -> bool {
        true
    }

    /// Whether it takes metrics (a metrics pipeline may list it): then it
    /// implements [`Exporter::export_metrics`].
    fn exports_metrics(&self) -> bool {
        false
    }

    /// Sends one metrics request. As [`Exporter::export`], the runtime
    /// applies the timeout and retries; `rejected` of the outcome counts
    /// data points.
    async fn export_metrics(
        &self,
        _req: &ExportMetricsServiceRequest,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        Err(ExportError::permanent(
            "this exporter does not take metrics",
        ))
    }

    /// The client metadata keys it reads from a batch, each with the key
    /// path (under its section) that names it. Behind
    /// `sending_queue::batch` they must be among the batch's
    /// `partition::metadata_keys`, as the Collector checks: batching keeps
    /// only those.
    fn metadata_keys(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Whether it sends a batch that still holds the bytes it was received
    /// as without decoding it. While such a batch waits in its queue, the
    /// memory budget holds only its bytes, not what decoding would take.
    fn sends_received_bytes(&self) -> bool {
        false
    }

    /// The compression it sends such a batch with when it sends the bytes
    /// as their client compressed them (a batch received so and changed
    /// by nothing): while it waits in the queue it holds only those.
    fn sends_compressed(&self) -> Option<profcol_model::compressed::Encoding> {
        None
    }
}

/// A storage extension: where persistent sending queues live.
#[async_trait]
pub trait Storage: Send + Sync {
    /// The sending queue of exporter `owner`, with what the last run left
    /// in it queued again.
    async fn open_queue(
        &self,
        owner: &str,
        settings: &QueueSettings,
        budget: Arc<profcol_model::memory::MemoryBudget>,
        telemetry: Arc<crate::telemetry::Telemetry>,
    ) -> anyhow::Result<Arc<dyn profcol_queue::Queue>>;

    /// A log of opaque records for `owner` (a receiver's forwarding), with
    /// what the last run left in it. Blocking.
    fn open_log(
        &self,
        owner: &str,
    ) -> anyhow::Result<(profcol_queue::BlobLog, profcol_queue::RecoveredBlobs)>;
}

/// Makes connectors of one YAML type: a connector is an exporter of the
/// pipelines that list it under `exporters` and a receiver of those that
/// list it under `receivers`.
pub trait ConnectorFactory: Send + Sync {
    fn type_name(&self) -> &'static str;
    /// Other YAML types that mean this one.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// The `(from, to)` signals it connects: it may be an exporter of a
    /// `from` pipeline only if it is a receiver of a `to` pipeline.
    fn signals(&self) -> &'static [(Signal, Signal)];
    /// Decodes and validates its section; binds nothing.
    fn create(&self, cfg: &ComponentConfig) -> Result<Connector, ConfigErrors>;
}

/// What a connector does with what the pipelines before it export.
#[derive(Clone)]
pub enum Connector {
    /// Hands every batch, as it is, to each pipeline it is a receiver of
    /// (`forward`).
    Forward,
    /// Makes metrics of each batch for the metrics pipelines it is a
    /// receiver of (`signaltometrics`).
    ToMetrics(Arc<dyn ProfilesToMetrics>),
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Forward => f.write_str("Forward"),
            Self::ToMetrics(_) => f.write_str("ToMetrics"),
        }
    }
}

impl PartialEq for Connector {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Forward, Self::Forward) => true,
            (Self::ToMetrics(a), Self::ToMetrics(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A connector from profiles to metrics: one metrics request (or none)
/// per batch, made synchronously on the CPU pool, with no state between
/// batches.
pub trait ProfilesToMetrics: Send + Sync {
    fn convert(&self, batch: &ProfileBatch) -> Option<ExportMetricsServiceRequest>;

    /// What `convert` allocates beside the batch while it runs (a copy it
    /// works on): held in the memory budget for that time.
    fn working_bytes(&self, _batch: &ProfileBatch) -> usize {
        0
    }

    /// Called once when the service runs it, with its id and the
    /// telemetry it counts its own events in.
    fn start(&self, _id: &str, _telemetry: &Arc<crate::telemetry::Telemetry>) {}
}

/// Sees what each profiles pipeline hands its exporters, after its
/// processors (and its stateful stage), for an extension that watches the
/// data (`profilez`). Called on the pipeline's path, so it must return at
/// once: hand the batch to a task of its own or skip it, never block.
pub trait Observer: Send + Sync {
    /// `batch` was committed to the pipeline's exporters.
    fn accepted(&self, pipeline: &str, batch: &Arc<ProfileBatch>);

    /// The pipeline refused a batch of `samples` with `reason` (its client
    /// was told to retry or that it is too large).
    fn refused(&self, _pipeline: &str, _samples: u64, _reason: &str) {}
}

/// The observers of the running config, shared by every pipeline.
pub type Observers = Arc<[Arc<dyn Observer>]>;

pub trait ExtensionFactory: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Extension>, ConfigErrors>;
}

#[async_trait]
pub trait Extension: Send {
    fn endpoints(&self) -> Vec<String> {
        Vec::new()
    }

    /// Set for an extension that authenticates (`bearertokenauth`).
    fn authenticator(&self) -> Option<Arc<dyn super::Authenticator>> {
        None
    }

    /// Set for a storage extension (`file_storage`).
    fn storage(&self) -> Option<Arc<dyn Storage>> {
        None
    }

    /// Set for an extension that watches the pipelines' data (`profilez`).
    fn observer(&self) -> Option<Arc<dyn Observer>> {
        None
    }

    /// The authenticators it names, with the key path of each reference,
    /// checked against the running extensions before start-up.
    fn authenticators(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    async fn start(
        self: Box<Self>,
        ctx: crate::runtime::ExtensionContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>>;
}
