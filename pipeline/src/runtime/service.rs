use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::component::{Connector, ExporterSettings, Output, ReceiverContext, Route, Storages};
use crate::config::{ComponentId, ConfigErrors};
use crate::telemetry::{serve_metrics, Telemetry};
use profcol_model::memory::MemoryBudget;

use super::build::{ExporterNode, Graph, PipelineNode, ReceiverNode};
use super::exporter_helper;
use super::metrics::{MetricsExporterRun, MetricsOut, MetricsPipeline};
use super::pipeline::{Connection, Downstream, ExporterQueue, Pipeline};
use super::{ExtensionContext, Health};

/// Limits of the runtime itself (not of any one component).
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Batches a pipeline takes at once (being processed or waiting for its
    /// processors) before receivers are told to back off.
    pub inbox_capacity: usize,
    /// How long a batch waits for a place in a full inbox of a stateful
    /// stage (`batch`) before its client is told to retry.
    pub inbox_patience: Duration,
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
            inbox_patience: Duration::from_secs(2),
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
    pub(super) hard_stop: CancellationToken,
    pub(super) receivers: BTreeMap<ComponentId, ReceiverRun>,
    pub(super) exporters: BTreeMap<ComponentId, ExporterRun>,
    pub(super) pipelines: BTreeMap<String, Arc<Pipeline>>,
    /// The exporters' metrics queues and consumers, for those a metrics
    /// pipeline lists.
    pub(super) metrics_exporters: BTreeMap<ComponentId, MetricsExporterRun>,
    pub(super) metrics_pipelines: BTreeMap<String, Arc<MetricsPipeline>>,
    extensions: Vec<JoinHandle<()>>,
    /// What config reloads took out of service and is still winding down.
    pub(super) retiring: Vec<Retiring>,
    pub(super) budget: Arc<MemoryBudget>,
    pub(super) authenticators: crate::component::Authenticators,
    /// What watches the pipelines' data (`profilez`).
    pub(super) observers: crate::component::Observers,
    pub(super) storages: Storages,
    pub(super) options: RuntimeOptions,
    /// Where its listeners are bound (recorded as they start).
    pub(super) listeners: crate::net::Listeners,
}

/// A running receiver.
pub(super) struct ReceiverRun {
    /// Stops this receiver alone (a child of the service's token).
    pub stop: CancellationToken,
    pub task: JoinHandle<()>,
    /// Where its batches go; a reload repoints it.
    pub route: Route,
    /// What it listens on, so a reload knows which ports it frees.
    pub endpoints: Vec<String>,
}

/// A running exporter: its queue and the consumers sending from it.
pub(super) struct ExporterRun {
    pub queue: ExporterQueue,
    pub settings: ExporterSettings,
    pub consumers: JoinHandle<()>,
    /// Makes the consumers stop taking requests (a successor takes over
    /// the queue); those being sent are settled first.
    pub retire: CancellationToken,
    /// Stops the consumers at once (a child of the service's token).
    pub hard_stop: CancellationToken,
}

/// Parts of an earlier config a reload replaced: old pipelines finishing
/// (`drain`, which closes `queues` once they are through) and consumers
/// sending what they hold.
pub(super) struct Retiring {
    pub drain: Option<JoinHandle<()>>,
    pub queues: Vec<ExporterQueue>,
    pub consumers: Vec<JoinHandle<()>>,
}

impl RunningService {
    /// Starts extensions, exporters, pipelines, then receivers (the
    /// Collector's order), and reports ready.
    pub async fn start(
        graph: Graph,
        opts: RuntimeOptions,
        telemetry: Arc<Telemetry>,
    ) -> anyhow::Result<Self> {
        let listeners = crate::net::Listeners::default();
        listeners
            .scope(Self::start_with(graph, opts, telemetry, listeners.clone()))
            .await
    }

    async fn start_with(
        mut graph: Graph,
        opts: RuntimeOptions,
        telemetry: Arc<Telemetry>,
        listeners: crate::net::Listeners,
    ) -> anyhow::Result<Self> {
        let health = Arc::new(Health::default());
        let stop_receivers = CancellationToken::new();
        let stop_extensions = CancellationToken::new();
        let hard_stop = CancellationToken::new();
        let limit = memory_limit(&graph, &opts);
        telemetry.set_metrics_level(graph.telemetry.metrics_level);
        let mut svc = Self {
            telemetry: telemetry.clone(),
            health: health.clone(),
            stop_receivers: stop_receivers.clone(),
            stop_extensions: stop_extensions.clone(),
            hard_stop: hard_stop.clone(),
            receivers: BTreeMap::new(),
            exporters: BTreeMap::new(),
            pipelines: BTreeMap::new(),
            metrics_exporters: BTreeMap::new(),
            metrics_pipelines: BTreeMap::new(),
            extensions: Vec::new(),
            retiring: Vec::new(),
            budget: MemoryBudget::new(limit),
            authenticators: Default::default(),
            observers: Arc::new([]),
            storages: Default::default(),
            options: opts.clone(),
            listeners,
        };

        if let Some(addr) = graph.telemetry.metrics_address {
            let level = graph.telemetry.metrics_level;
            let started =
                serve_metrics(addr, level, telemetry.clone(), stop_extensions.clone()).await;
            let task = svc.check(started, "service::telemetry::metrics".into())?;
            svc.extensions.push(task);
        }
        svc.authenticators = crate::component::Authenticators::new(
            graph
                .extensions
                .iter()
                .filter_map(|(id, ext)| Some((id.to_string(), ext.authenticator()?)))
                .collect(),
        );
        svc.storages = Arc::new(
            graph
                .extensions
                .iter()
                .filter_map(|(id, ext)| Some((id.to_string(), ext.storage()?)))
                .collect(),
        );
        svc.observers = graph
            .extensions
            .iter()
            .filter_map(|(_, ext)| ext.observer())
            .collect();
        for (id, ext) in std::mem::take(&mut graph.extensions) {
            let ctx = ExtensionContext {
                id: id.to_string(),
                shutdown: stop_extensions.clone(),
                telemetry: telemetry.clone(),
                health: health.clone(),
                authenticators: svc.authenticators.clone(),
                budget: svc.budget.clone(),
            };
            let started = ext.start(ctx).await;
            let task = svc.check(started, format!("extensions::{id}"))?;
            svc.extensions.push(task);
        }

        if opts.guard_process_memory {
            svc.extensions.push(profcol_model::memory::spawn_guard(
                svc.budget.clone(),
                stop_extensions.clone(),
            ));
        }
        // The rest starts as a reload from an empty config does.
        if let Err(errs) = svc.apply(None, graph, ConfigErrors::default()).await {
            let what = errs.0.first().map(|e| e.path.clone()).unwrap_or_default();
            return svc.check(Err(anyhow::anyhow!("{errs}")), what);
        }
        health.set_ready(true);
        tracing::info!("everything is ready; begin running and processing data");
        Ok(svc)
    }

    /// What starting the exporter of `node` takes.
    pub(super) fn exporter_spawn(&self, node: &ExporterNode) -> exporter_helper::Spawn {
        exporter_helper::Spawn {
            id: node.id.to_string(),
            exporter: node.exporter.clone(),
            telemetry: self.telemetry.clone(),
            budget: self.budget.clone(),
            authenticators: self.authenticators.clone(),
            storage: node
                .settings
                .sending_queue
                .storage
                .as_ref()
                .and_then(|s| self.storages.get(s).cloned()),
            settings: node.settings.clone(),
        }
    }

    /// Runs the consumers of a started exporter.
    pub(super) fn run_exporter(
        &self,
        started: exporter_helper::Started,
        settings: ExporterSettings,
    ) -> ExporterRun {
        let (retire, hard_stop) = (CancellationToken::new(), self.hard_stop.child_token());
        let queue = started.queue.clone();
        ExporterRun {
            queue,
            settings,
            consumers: started.consume(hard_stop.clone(), retire.clone()),
            retire,
            hard_stop,
        }
    }

    /// A pipeline feeding the running exporters it lists and, through its
    /// connectors, the pipelines of `built` they feed.
    pub(super) fn pipeline(
        &self,
        p: PipelineNode,
        built: &BTreeMap<String, Arc<Pipeline>>,
    ) -> Arc<Pipeline> {
        let exporters = p
            .exporters
            .iter()
            .filter_map(|e| self.exporters.get(e).map(|r| r.queue.clone()))
            .collect();
        let connectors = p
            .connectors
            .iter()
            .map(|c| {
                let id: Arc<str> = c.id.to_string().into();
                let to = match &c.connector {
                    Connector::Forward => {
                        let pipelines = c
                            .pipelines
                            .iter()
                            .filter_map(|p| built.get(p).cloned())
                            .collect();
                        Downstream::Profiles(Output::new(
                            id.clone(),
                            pipelines,
                            self.budget.clone(),
                            self.telemetry.clone(),
                        ))
                    }
                    Connector::ToMetrics(convert) => Downstream::Metrics(Arc::new(MetricsOut {
                        convert: {
                            convert.start(id.as_ref(), &self.telemetry);
                            convert.clone()
                        },
                        pipelines: c
                            .pipelines
                            .iter()
                            .filter_map(|p| self.metrics_pipelines.get(p).cloned())
                            .collect(),
                        budget: self.budget.clone(),
                    })),
                };
                Connection { id, to }
            })
            .collect();
        Arc::new(Pipeline::with_connectors(
            &p.id,
            self.options.inbox_capacity,
            self.options.inbox_patience,
            p.processors,
            exporters,
            connectors,
            self.observers.clone(),
            p.rank,
            self.budget.clone(),
            self.telemetry.clone(),
        ))
    }

    /// The running pipelines a receiver feeds.
    pub(super) fn route_of(&self, pipelines: &[String]) -> Vec<Arc<Pipeline>> {
        pipelines
            .iter()
            .filter_map(|p| self.pipelines.get(p).cloned())
            .collect()
    }

    /// Binds and starts one receiver, feeding the running pipelines.
    pub(super) async fn start_receiver(&self, node: ReceiverNode) -> anyhow::Result<ReceiverRun> {
        let id = node.id.to_string();
        let output = Output::new(
            id.clone(),
            self.route_of(&node.pipelines),
            self.budget.clone(),
            self.telemetry.clone(),
        );
        let route = output.route();
        let stop = self.stop_receivers.child_token();
        let endpoints = node.receiver.endpoints();
        let ctx = ReceiverContext {
            id,
            output,
            shutdown: stop.clone(),
            telemetry: self.telemetry.clone(),
            authenticators: self.authenticators.clone(),
            storages: self.storages.clone(),
        };
        let task = node.receiver.start(ctx).await?;
        Ok(ReceiverRun {
            stop,
            task,
            route,
            endpoints,
        })
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

    /// Every listener serving now and its bound address: with an endpoint
    /// of port 0, how the caller learns the port it got.
    pub fn listeners(&self) -> Vec<crate::net::Bound> {
        self.listeners.list()
    }

    /// The bound address of the listener `name`
    /// (`receivers::otlp::protocols::grpc`, `extensions::health_check`,
    /// `service::telemetry::metrics`).
    pub fn address(&self, name: &str) -> Option<std::net::SocketAddr> {
        self.listeners.address(name)
    }

    /// Samples the stateful stages (`batch`) of every pipeline hold now.
    pub fn held_samples(&self) -> u64 {
        self.pipelines.values().map(|p| p.held_samples()).sum()
    }

    /// Graceful shutdown within the configured deadline.
    pub async fn shutdown(self) {
        let t = self.options.shutdown_timeout;
        self.shutdown_with(t).await
    }

    /// Stops receivers (their requests in flight finish and are answered),
    /// has the stateful stages (`batch`) emit what they hold into the
    /// exporter queues, closes the queues and lets them drain (retries
    /// included) until `timeout`, then stops hard: what is left is counted
    /// as dropped with reason `shutdown`. What a config reload retired and
    /// is still draining is part of the same drain and deadline.
    pub async fn shutdown_with(self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.health.set_ready(false);
        tracing::info!(?timeout, "shutting down: receivers stop, pipelines drain");
        self.stop_receivers.cancel();
        // A receiver waits for its clients to go (an HTTP/2 client must
        // answer GOAWAY's ping); one that never does is cut off at the
        // deadline rather than holding the process up.
        let receivers: Vec<_> = self.receivers.into_values().map(|r| r.task).collect();
        let receiver_aborts: Vec<_> = receivers.iter().map(|t| t.abort_handle()).collect();
        let mut queues: Vec<ExporterQueue> = Vec::new();
        let mut consumers = Vec::new();
        for run in self.exporters.into_values() {
            queues.push(run.queue);
            consumers.push(run.consumers);
        }
        let mut drains = Vec::new();
        for r in self.retiring {
            queues.extend(r.queues);
            consumers.extend(r.consumers);
            drains.extend(r.drain);
        }
        let mut metrics_queues = Vec::new();
        for run in self.metrics_exporters.into_values() {
            metrics_queues.push(run.queue);
            consumers.push(run.consumers);
        }
        let close_queues = |queues: &[ExporterQueue]| queues.iter().for_each(|q| q.queue.close());
        let pipelines = self.pipelines;
        let drained = async {
            for t in receivers {
                let _ = t.await;
            }
            // Held batches go into the queues before they close; at the
            // deadline the closed queues end this wait, counting the rest.
            // Upstream first: what a stage hands a connector finds the
            // pipelines after it still open.
            let mut ordered: Vec<&Arc<Pipeline>> = pipelines.values().collect();
            ordered.sort_by_key(|p| p.rank());
            for p in ordered {
                p.finish().await;
            }
            for d in drains {
                let _ = d.await;
            }
            close_queues(&queues);
            // Nothing feeds the metrics queues once the profiles pipelines
            // are through.
            for q in &metrics_queues {
                q.close();
            }
            for t in consumers {
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
    match limiter_limit(graph) {
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

/// The smallest limit of the `memory_limiter`s in use.
pub(super) fn limiter_limit(graph: &Graph) -> Option<usize> {
    graph
        .pipelines
        .iter()
        .flat_map(|p| &p.processors)
        .filter_map(|(_, p)| p.gate()?.memory_limit())
        .min()
}
