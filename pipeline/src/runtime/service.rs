use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::component::{Output, ReceiverContext};
use crate::memory::MemoryBudget;
use crate::telemetry::{serve_metrics, Telemetry};

use super::build::Graph;
use super::exporter_helper;
use super::pipeline::{ExporterQueue, Pipeline};
use super::{ExtensionContext, Health};

/// Limits of the runtime itself (not of any one component).
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Batches a pipeline takes at once (being processed or waiting for its
    /// processors) before receivers are told to back off.
    pub inbox_capacity: usize,
    /// Memory for data in flight across the whole collector: request bodies,
    /// decoded batches, working space. Past it receivers ask clients to
    /// retry. A `memory_limiter` processor's limit replaces it unless
    /// [`RuntimeOptions::memory_limit_explicit`].
    pub memory_limit_bytes: usize,
    /// `memory_limit_bytes` was given on the command line: it wins over a
    /// `memory_limiter`'s limit.
    pub memory_limit_explicit: bool,
    /// One deadline for the whole drain on shutdown.
    pub shutdown_timeout: Duration,
    /// Count the process's resident memory against the limit and steer the
    /// allocator (`memory::spawn_guard`): for the collector's own process,
    /// not for a collector run inside a test.
    pub guard_process_memory: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            inbox_capacity: 64,
            memory_limit_bytes: 1024 << 20,
            memory_limit_explicit: false,
            shutdown_timeout: Duration::from_secs(30),
            guard_process_memory: false,
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
    queues: Vec<ExporterQueue>,
    pipelines: Vec<Arc<Pipeline>>,
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
            queues: Vec::new(),
            pipelines: Vec::new(),
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
        let authenticators = crate::component::Authenticators::new(
            graph
                .extensions
                .iter()
                .filter_map(|(id, ext)| Some((id.to_string(), ext.authenticator()?)))
                .collect(),
        );
        let storages: std::collections::HashMap<String, Arc<dyn crate::component::Storage>> = graph
            .extensions
            .iter()
            .filter_map(|(id, ext)| Some((id.to_string(), ext.storage()?)))
            .collect();
        let limit = memory_limit(&graph, &opts);
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

        let budget = MemoryBudget::new(limit);
        if opts.guard_process_memory {
            svc.extensions.push(crate::memory::spawn_guard(
                budget.clone(),
                stop_extensions.clone(),
            ));
        }
        let mut queues = std::collections::HashMap::new();
        for node in graph.exporters {
            let id = node.id.to_string();
            let spawned = exporter_helper::spawn(
                exporter_helper::Spawn {
                    id: id.clone(),
                    exporter: node.exporter,
                    telemetry: telemetry.clone(),
                    budget: budget.clone(),
                    authenticators: authenticators.clone(),
                    storage: node
                        .settings
                        .sending_queue
                        .storage
                        .as_ref()
                        .and_then(|s| storages.get(s).cloned()),
                    settings: node.settings,
                },
                hard_stop.clone(),
            )
            .await;
            let (queue, task) = svc.check(spawned, format!("exporters::{id}"))?;
            svc.exporters.push(task);
            svc.queues.push(queue.clone());
            queues.insert(node.id, queue);
        }

        let mut pipelines = std::collections::HashMap::new();
        for p in graph.pipelines {
            let exporters = p
                .exporters
                .iter()
                .filter_map(|e| queues.get(e).cloned())
                .collect();
            let pipeline = Pipeline::new(
                &p.id,
                opts.inbox_capacity,
                p.processors,
                exporters,
                budget.clone(),
                telemetry.clone(),
            );
            let pipeline = Arc::new(pipeline);
            svc.pipelines.push(pipeline.clone());
            pipelines.insert(p.id.clone(), pipeline);
        }

        let receiver_storages = Arc::new(storages.clone());
        for node in graph.receivers {
            let id = node.id.to_string();
            let output = Output::new(
                id.clone(),
                node.pipelines
                    .iter()
                    .filter_map(|p| pipelines.get(p).cloned())
                    .collect(),
                budget.clone(),
                telemetry.clone(),
            );
            let ctx = ReceiverContext {
                id: id.clone(),
                output,
                shutdown: stop_receivers.clone(),
                telemetry: telemetry.clone(),
                authenticators: authenticators.clone(),
                storages: receiver_storages.clone(),
            };
            let started = node.receiver.start(ctx).await;
            let task = svc.check(started, format!("receivers::{id}"))?;
            svc.receivers.push(task);
        }
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

    /// Samples the stateful stages (`batch`) of every pipeline hold now.
    pub fn held_samples(&self) -> u64 {
        self.pipelines.iter().map(|p| p.held_samples()).sum()
    }

    /// Graceful shutdown within the configured deadline.
    pub async fn shutdown(self) {
        let t = self.shutdown_timeout;
        self.shutdown_with(t).await
    }

    /// Stops receivers (their requests in flight finish and are answered),
    /// has the stateful stages (`batch`) emit what they hold into the
    /// exporter queues, closes the queues and lets them drain (retries
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
        let queues = self.queues;
        let close_queues = |queues: &[ExporterQueue]| queues.iter().for_each(|q| q.queue.close());
        let receivers = self.receivers;
        let exporters = self.exporters;
        let pipelines = self.pipelines;
        let drained = async {
            for t in receivers {
                let _ = t.await;
            }
            // Held batches go into the queues before they close; at the
            // deadline the closed queues end this wait, counting the rest.
            for p in &pipelines {
                p.finish().await;
            }
            close_queues(&queues);
            for t in exporters {
                let _ = t.await;
            }
        };
        tokio::pin!(drained);
        tokio::select! {
            _ = &mut drained => {}
            _ = tokio::time::sleep_until(deadline.into()) => {
                tracing::warn!("shutdown deadline reached; dropping what is still queued");
                self.hard_stop.cancel();
                receiver_aborts.iter().for_each(|a| a.abort());
                close_queues(&queues);
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

/// The memory budget: `--memory-limit-mib` when given, else the smallest
/// limit of the `memory_limiter`s in use, else the default.
fn memory_limit(graph: &Graph, opts: &RuntimeOptions) -> usize {
    let limiter = graph
        .pipelines
        .iter()
        .flat_map(|p| &p.processors)
        .filter_map(|(_, p)| p.gate()?.memory_limit())
        .min();
    match limiter {
        Some(l) if !opts.memory_limit_explicit => {
            tracing::info!(limit_mib = l >> 20, "memory limit set by memory_limiter");
            l
        }
        Some(l) => {
            tracing::info!(
                limit_mib = opts.memory_limit_bytes >> 20,
                memory_limiter_mib = l >> 20,
                "--memory-limit-mib wins over the memory_limiter's limit for the memory budget; the memory_limiter still refuses data above its soft limit"
            );
            opts.memory_limit_bytes
        }
        None => opts.memory_limit_bytes,
    }
}
