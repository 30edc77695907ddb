use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::component::{Output, ReceiverContext};
use crate::model::ProfileBatch;
use crate::telemetry::{serve_metrics, Telemetry};

use super::build::Graph;
use super::exporter_helper;
use super::worker::Worker;
use super::{ExtensionContext, Health};

/// Limits of the runtime itself (not of any one component).
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Batches a pipeline inbox holds before receivers are told to back off.
    pub inbox_capacity: usize,
    /// Bytes of batches in flight across the whole collector (measured as
    /// their protobuf size); past it receivers answer "unavailable".
    pub memory_limit_bytes: usize,
    /// One deadline for the whole drain on shutdown.
    pub shutdown_timeout: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            inbox_capacity: 64,
            memory_limit_bytes: 1024 << 20,
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// A started collector.
pub struct RunningService {
    telemetry: Arc<Telemetry>,
    health: Arc<Health>,
    stop_receivers: CancellationToken,
    stop_extensions: CancellationToken,
    hard_stop: CancellationToken,
    receivers: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    exporters: Vec<JoinHandle<()>>,
    extensions: Vec<JoinHandle<()>>,
    shutdown_timeout: Duration,
}

impl RunningService {
    /// Starts extensions, exporters, pipelines, then receivers (the
    /// Collector's order), and reports ready.
    pub async fn start(
        graph: Graph,
        opts: RuntimeOptions,
        telemetry: Arc<Telemetry>,
    ) -> anyhow::Result<Self> {
        let health = Arc::new(Health::default());
        let stop_receivers = CancellationToken::new();
        let stop_extensions = CancellationToken::new();
        let hard_stop = CancellationToken::new();
        let mut svc = Self {
            telemetry: telemetry.clone(),
            health: health.clone(),
            stop_receivers: stop_receivers.clone(),
            stop_extensions: stop_extensions.clone(),
            hard_stop: hard_stop.clone(),
            receivers: Vec::new(),
            workers: Vec::new(),
            exporters: Vec::new(),
            extensions: Vec::new(),
            shutdown_timeout: opts.shutdown_timeout,
        };

        if let Some(addr) = graph.telemetry.metrics_address {
            let level = graph.telemetry.metrics_level;
            let started =
                serve_metrics(addr, level, telemetry.clone(), stop_extensions.clone()).await;
            let task = svc.check(started, "service::telemetry::metrics".into())?;
            svc.extensions.push(task);
        }
        for (id, ext) in graph.extensions {
            let ctx = ExtensionContext {
                id: id.to_string(),
                shutdown: stop_extensions.clone(),
                telemetry: telemetry.clone(),
                health: health.clone(),
            };
            let started = ext.start(ctx).await;
            let task = svc.check(started, format!("extensions::{id}"))?;
            svc.extensions.push(task);
        }

        let mut queues = std::collections::HashMap::new();
        for node in graph.exporters {
            let id = node.id.to_string();
            let spawned = exporter_helper::spawn(
                id.clone(),
                node.exporter,
                node.settings,
                telemetry.clone(),
                hard_stop.clone(),
            )
            .await;
            let (queue, task) = svc.check(spawned, format!("exporters::{id}"))?;
            svc.exporters.push(task);
            queues.insert(node.id, queue);
        }

        let mut inboxes = std::collections::HashMap::new();
        for p in graph.pipelines {
            let (tx, rx) = mpsc::channel::<Arc<ProfileBatch>>(opts.inbox_capacity.max(1));
            inboxes.insert(p.id.clone(), tx);
            let worker = Worker {
                exporters: p
                    .exporters
                    .iter()
                    .filter_map(|e| queues.get(e).cloned())
                    .collect(),
                id: p.id,
                inbox: rx,
                processors: p.processors,
                telemetry: telemetry.clone(),
            };
            svc.workers
                .push(tokio::spawn(worker.run(hard_stop.clone())));
        }
        drop(queues);

        let budget = Arc::new(Semaphore::new(
            opts.memory_limit_bytes.min(Semaphore::MAX_PERMITS),
        ));
        for node in graph.receivers {
            let id = node.id.to_string();
            let output = Output::new(
                id.clone(),
                node.pipelines
                    .iter()
                    .filter_map(|p| inboxes.get(p).cloned())
                    .collect(),
                budget.clone(),
                opts.memory_limit_bytes,
                telemetry.clone(),
            );
            let ctx = ReceiverContext {
                id: id.clone(),
                output,
                shutdown: stop_receivers.clone(),
                telemetry: telemetry.clone(),
            };
            let started = node.receiver.start(ctx).await;
            let task = svc.check(started, format!("receivers::{id}"))?;
            svc.receivers.push(task);
        }
        // The receivers' outputs now hold the only inbox senders: once they
        // stop, the inboxes close and the workers drain.
        drop(inboxes);
        health.set_ready(true);
        tracing::info!("everything is ready; begin running and processing data");
        Ok(svc)
    }

    /// On a failed start, stops what already runs before reporting: its
    /// tasks wind down on their own once their tokens fire.
    fn check<T>(&self, r: anyhow::Result<T>, what: String) -> anyhow::Result<T> {
        r.map_err(|e| {
            self.stop_receivers.cancel();
            self.hard_stop.cancel();
            self.stop_extensions.cancel();
            e.context(format!("failed to start {what}"))
        })
    }

    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Graceful shutdown within the configured deadline.
    pub async fn shutdown(self) {
        let t = self.shutdown_timeout;
        self.shutdown_with(t).await
    }

    /// Stops receivers, lets pipelines and exporter queues drain (retries
    /// included) until `timeout`, then stops hard: what is left is counted
    /// as dropped with reason `shutdown`.
    pub async fn shutdown_with(self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.health.set_ready(false);
        tracing::info!(?timeout, "shutting down: receivers stop, pipelines drain");
        self.stop_receivers.cancel();
        // A receiver waits for its clients to go (an HTTP/2 client must
        // answer GOAWAY's ping); one that never does is cut off at the
        // deadline rather than holding the process up.
        let receiver_aborts: Vec<_> = self.receivers.iter().map(|t| t.abort_handle()).collect();
        let drain = async {
            for t in self.receivers {
                let _ = t.await;
            }
            for t in self.workers {
                let _ = t.await;
            }
        };
        let hard_stop = self.hard_stop.clone();
        let exporters = self.exporters;
        let drained = async move {
            drain.await;
            for t in exporters {
                let _ = t.await;
            }
        };
        tokio::pin!(drained);
        tokio::select! {
            _ = &mut drained => {}
            _ = tokio::time::sleep_until(deadline.into()) => {
                tracing::warn!("shutdown deadline reached; dropping what is still queued");
                hard_stop.cancel();
                receiver_aborts.iter().for_each(|a| a.abort());
                drained.await;
            }
        }
        self.stop_extensions.cancel();
        for t in self.extensions {
            let _ = t.await;
        }
        tracing::info!("shutdown complete");
    }
}
