use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::context::{DropReason, ExporterContext, ProcessContext, ReceiverContext};
use crate::config::{ComponentConfig, ConfigErrors, QueueSettings, RetrySettings};
use crate::model::ProfileBatch;

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
    /// One processor instance per pipeline that lists the id.
    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors>;
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
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict;
}

/// Queue, retry and timeout settings every exporter carries, with the
/// Collector's names and defaults.
#[derive(Debug, Clone)]
pub struct ExporterSettings {
    pub timeout: Duration,
    pub retry_on_failure: RetrySettings,
    pub sending_queue: QueueSettings,
}

pub trait ExporterFactory: Send + Sync {
    fn type_name(&self) -> &'static str;
    /// Other YAML types that mean this one (`otlp_grpc` for `otlp`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    fn create(
        &self,
        cfg: &ComponentConfig,
    ) -> Result<(Arc<dyn Exporter>, ExporterSettings), ConfigErrors>;
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

    /// Sends one batch. The runtime applies the timeout and the retries;
    /// the exporter only classifies what went wrong. On success, returns
    /// what the peer rejected through partial success and what the exporter
    /// left out itself; an `Err` counts the whole batch as failed.
    async fn export(
        &self,
        batch: Arc<ProfileBatch>,
        ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError>;

    /// Called when the runtime gives up on `batch` (retries ran out, a
    /// permanent error, shutdown): how many of its samples earlier attempts
    /// delivered. Those are counted as sent, the rest as failed or dropped.
    /// An exporter that sends a batch in one request delivers all or
    /// nothing: 0, the default.
    fn delivered_before_giving_up(&self, _batch: &Arc<ProfileBatch>) -> u64 {
        0
    }

    /// Called after the queue has drained.
    async fn shutdown(&self) {}
}

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
    async fn start(
        self: Box<Self>,
        ctx: crate::runtime::ExtensionContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>>;
}
