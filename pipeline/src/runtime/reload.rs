//! Config reload (SIGHUP): the running service moves to a new config,
//! keeping what did not change.
//!
//! - A receiver whose section is unchanged keeps its listener; only its
//!   route (the pipelines it feeds) is repointed. A changed one is stopped
//!   and started again (its port is closed in between); a removed one stops.
//! - An exporter whose section is unchanged keeps its queue, its consumers
//!   and their requests in flight. A changed one whose `sending_queue` is
//!   unchanged keeps its queue: its old consumers settle what they are
//!   sending and the new instance sends the rest. Otherwise (and for a
//!   removed one) the old queue is closed once no pipeline feeds it and
//!   drains as at shutdown, within `--shutdown-timeout`.
//! - A pipeline whose processors (sections included) and exporters are
//!   unchanged, and whose exporters kept their queues, keeps running (a
//!   `batch` processor keeps what it holds). Any other is rebuilt: the old
//!   one takes no more batches, finishes those in it and emits what its
//!   `batch` holds into its queues, as at shutdown.
//!
//! Everything that can fail (the config, a port already taken, an
//! exporter's start, opening a queue) is tried before anything running is
//! touched; a failure refuses the reload and the old config keeps running.
//! Extensions and `service::telemetry` cannot change on reload.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::component::ExporterContext;
use crate::config::{ComponentConfig, ComponentId, Config, ConfigErrors, Signal};

use super::build::Graph;
use super::exporter_helper;
use super::metrics::{self, MetricsPipeline};
use super::pipeline::{ExporterQueue, Pipeline};
use super::service::{Retiring, RunningService};

/// What a reload changed, per kind of component.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadSummary {
    pub receivers: Changes,
    pub exporters: Changes,
    pub pipelines: Changes,
    /// Components of the new config that failed to start after the switch
    /// (a port taken in the instant between the check and the bind), with
    /// why; the rest of the new config runs.
    pub failed: Vec<String>,
}

/// Ids added, changed (restarted) and removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

impl ReloadSummary {
    pub fn is_empty(&self) -> bool {
        self.receivers.is_empty() && self.exporters.is_empty() && self.pipelines.is_empty()
    }
}

impl fmt::Display for ReloadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("nothing changed");
        }
        let mut first = true;
        for (kind, c) in [
            ("receivers", &self.receivers),
            ("exporters", &self.exporters),
            ("pipelines", &self.pipelines),
        ] {
            for (what, ids) in [
                ("added", &c.added),
                ("changed", &c.changed),
                ("removed", &c.removed),
            ] {
                if ids.is_empty() {
                    continue;
                }
                if !first {
                    f.write_str("; ")?;
                }
                first = false;
                write!(f, "{kind} {what}: {}", ids.join(", "))?;
            }
        }
        Ok(())
    }
}

/// What becomes of one exporter of the new config.
enum ExporterPlan {
    Add,
    Keep,
    /// A new instance; `keep_queue` when it takes over the old queue.
    Replace {
        keep_queue: bool,
    },
}

fn same(a: Option<&ComponentConfig>, b: Option<&ComponentConfig>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.value == b.value,
        _ => false,
    }
}

impl RunningService {
    /// Moves the running collector from `old` to `new` (whose components
    /// `graph` holds, built but not started). `Err` when the reload is
    /// refused: nothing running was touched.
    pub async fn reload(
        &mut self,
        old: &Config,
        new: &Config,
        graph: Graph,
    ) -> Result<ReloadSummary, ConfigErrors> {
        let listeners = self.listeners.clone();
        listeners.scope(self.reload_scoped(old, new, graph)).await
    }

    async fn reload_scoped(
        &mut self,
        old: &Config,
        new: &Config,
        graph: Graph,
    ) -> Result<ReloadSummary, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        fixed_sections(old, new, &mut errs);
        self.apply(Some((old, new)), graph, errs).await
    }

    /// Moves the service to `graph`: from what runs, keeping what
    /// `configs` (the old and the new config) shows unchanged, or, with
    /// `None`, from nothing: start-up is a reload from an empty config, so
    /// the two cannot drift. `errs` are refusals found before; at start-up
    /// a receiver that fails to start is one too.
    pub(super) async fn apply(
        &mut self,
        configs: Option<(&Config, &Config)>,
        graph: Graph,
        mut errs: ConfigErrors,
    ) -> Result<ReloadSummary, ConfigErrors> {
        let mut summary = ReloadSummary::default();
        let unchanged = |section: fn(&Config) -> &BTreeMap<ComponentId, ComponentConfig>,
                         id: &ComponentId| {
            configs.is_some_and(|(old, new)| same(section(old).get(id), section(new).get(id)))
        };

        // Exporters.
        let mut plans = BTreeMap::new();
        for node in &graph.exporters {
            let plan = match self.exporters.get(&node.id) {
                None => ExporterPlan::Add,
                Some(_) if unchanged(|c| &c.exporters, &node.id) => ExporterPlan::Keep,
                Some(run) => {
                    let (was, is) = (&run.settings.sending_queue, &node.settings.sending_queue);
                    if was != is && was.storage.is_some() && is.storage.is_some() {
                        errs.push(
                            format!("exporters::{}::sending_queue", node.id),
                            "the settings of a persistent queue cannot change on reload (its \
                             directory stays open); restart profcol to change them",
                        );
                    }
                    ExporterPlan::Replace {
                        keep_queue: was == is,
                    }
                }
            };
            plans.insert(node.id.clone(), plan);
        }

        // Receivers: which keep running, and which ports the others free.
        let kept_receivers: BTreeSet<ComponentId> = graph
            .receivers
            .iter()
            .filter(|n| self.receivers.contains_key(&n.id) && unchanged(|c| &c.receivers, &n.id))
            .map(|n| n.id.clone())
            .collect();
        // The ports configured, and those port 0 took when it bound.
        let bound = self.listeners.list();
        let freed: BTreeSet<u16> = self
            .receivers
            .iter()
            .filter(|(id, _)| !kept_receivers.contains(*id))
            .flat_map(|(id, r)| {
                let name = format!("receivers::{id}");
                let ports = bound
                    .iter()
                    .filter(|b| {
                        b.name == name
                            || b.name
                                .strip_prefix(name.as_str())
                                .is_some_and(|rest| rest.starts_with("::"))
                    })
                    .map(|b| b.address.port())
                    .collect::<Vec<_>>();
                r.endpoints.iter().filter_map(|e| port_of(e)).chain(ports)
            })
            .collect();
        for node in graph
            .receivers
            .iter()
            .filter(|n| !kept_receivers.contains(&n.id))
        {
            for e in node.receiver.endpoints() {
                if port_of(&e).is_some_and(|p| freed.contains(&p)) {
                    continue;
                }
                if let Err(why) = probe(&e) {
                    errs.push(
                        format!("receivers::{}", node.id),
                        format!("cannot listen on {e}: {why}"),
                    );
                }
            }
        }
        if !errs.0.is_empty() {
            return Err(errs);
        }
        let limit = match super::service::limiter_limit(&graph) {
            Some(l) if !self.options.memory_limit_explicit => l,
            _ => self.options.memory_limit_bytes,
        };
        if limit != self.budget.limit() {
            tracing::warn!(
                limit_mib = self.budget.limit() >> 20,
                new_limit_mib = limit >> 20,
                "the memory budget keeps its limit until a restart; the memory_limiter's own refusals use the new limit"
            );
        }

        // Start what is new (the part that can fail) before touching
        // anything that runs.
        let mut started = Vec::new();
        for node in &graph.exporters {
            let kept_queue = match plans[&node.id] {
                ExporterPlan::Keep => continue,
                ExporterPlan::Add => None,
                ExporterPlan::Replace { keep_queue } => {
                    keep_queue.then(|| self.exporters[&node.id].queue.clone())
                }
            };
            match exporter_helper::start(self.exporter_spawn(node), kept_queue).await {
                Ok(s) => started.push((node.id.clone(), s, node.settings.clone())),
                Err(e) => {
                    // What was started here has taken nothing yet.
                    return Err(ConfigErrors::one(
                        format!("exporters::{}", node.id),
                        format!("{e:#}"),
                    ));
                }
            }
        }

        // From here on the new config takes over. A metrics pipeline is
        // only ever added from nothing (`fixed_sections` refuses a reload
        // with one), so its exporters' metrics queues start here too.
        for node in graph.exporters.iter().filter(|n| n.metrics) {
            let ctx = ExporterContext {
                id: node.id.to_string(),
                telemetry: self.telemetry().clone(),
                authenticators: self.authenticators.clone(),
                budget: self.budget.clone(),
            };
            let run = metrics::run_exporter(
                &ctx.id.clone(),
                node.exporter.clone(),
                &node.settings,
                ctx,
                self.hard_stop.child_token(),
            );
            self.metrics_exporters.insert(node.id.clone(), run);
        }
        let mut retired_queues: Vec<ExporterQueue> = Vec::new();
        let mut retired_hard_stops: Vec<CancellationToken> = Vec::new();
        let mut retiring_consumers = Vec::new();
        for (id, s, settings) in started {
            let run = self.run_exporter(s, settings);
            match self.exporters.insert(id.clone(), run) {
                None => summary.exporters.added.push(id.to_string()),
                Some(old_run) => {
                    summary.exporters.changed.push(id.to_string());
                    if matches!(plans[&id], ExporterPlan::Replace { keep_queue: true }) {
                        old_run.retire.cancel();
                    } else {
                        retired_queues.push(old_run.queue);
                        retired_hard_stops.push(old_run.hard_stop);
                    }
                    retiring_consumers.push(old_run.consumers);
                }
            }
        }
        let removed: Vec<ComponentId> = self
            .exporters
            .keys()
            .filter(|id| !plans.contains_key(*id))
            .cloned()
            .collect();
        for id in removed {
            let run = self.exporters.remove(&id).expect("listed above");
            summary.exporters.removed.push(id.to_string());
            retired_queues.push(run.queue);
            retired_hard_stops.push(run.hard_stop);
            retiring_consumers.push(run.consumers);
        }

        // Pipelines: kept when nothing of theirs changed and their
        // exporters' queues are the same ones.
        let queue_kept = |id: &ComponentId| {
            matches!(
                plans.get(id),
                Some(ExporterPlan::Keep | ExporterPlan::Replace { keep_queue: true })
            )
        };
        let mut pipelines = BTreeMap::new();
        let mut old_pipelines = std::mem::take(&mut self.pipelines);
        for p in graph.pipelines {
            if p.signal == Signal::Metrics {
                let queues = p
                    .exporters
                    .iter()
                    .filter_map(|e| self.metrics_exporters.get(e).map(|r| r.queue.clone()))
                    .collect();
                let mp = Arc::new(MetricsPipeline::new(&p.id, queues));
                self.metrics_pipelines.insert(p.id.clone(), mp);
                summary.pipelines.added.push(p.id);
                continue;
            }
            let configured = configs.map(|(old, new)| {
                (
                    old.service.pipelines.get(&p.id),
                    new.service.pipelines.get(&p.id),
                )
            });
            let kept = match configured {
                Some((Some(a), Some(b))) => {
                    a.processors == b.processors
                        && a.exporters == b.exporters
                        && b.processors
                            .iter()
                            .all(|id| unchanged(|c| &c.processors, id))
                        // A connector is no queue: a pipeline exporting to
                        // one is always rebuilt, onto the pipelines after
                        // it as they are now (built before it).
                        && b.exporters.iter().all(queue_kept)
                }
                _ => false,
            };
            let running = if kept {
                old_pipelines.remove(&p.id)
            } else {
                None
            };
            let pipeline = match running {
                Some(running) => running,
                None => {
                    match old_pipelines.contains_key(&p.id) {
                        true => summary.pipelines.changed.push(p.id.clone()),
                        false => summary.pipelines.added.push(p.id.clone()),
                    }
                    self.pipeline(p, &pipelines)
                }
            };
            pipelines.insert(pipeline.id.to_string(), pipeline);
        }
        summary.pipelines.removed = old_pipelines
            .keys()
            .filter(|id| !pipelines.contains_key(*id))
            .cloned()
            .collect();
        self.pipelines = pipelines;

        // Receivers: repoint the kept, stop the others, start the new.
        let mut to_start = Vec::new();
        for node in graph.receivers {
            if kept_receivers.contains(&node.id) {
                let route = self.route_of(&node.pipelines);
                self.receivers[&node.id].route.set(route);
            } else {
                to_start.push(node);
            }
        }
        let stopping: Vec<ComponentId> = self
            .receivers
            .keys()
            .filter(|id| !kept_receivers.contains(*id))
            .cloned()
            .collect();
        for id in &stopping {
            let run = self.receivers.remove(id).expect("listed above");
            run.stop.cancel();
            let abort = run.task.abort_handle();
            if tokio::time::timeout(self.options.shutdown_timeout, run.task)
                .await
                .is_err()
            {
                tracing::warn!(receiver = %id, "the receiver did not stop in time; cut off");
                abort.abort();
            }
            if !to_start.iter().any(|n| n.id == *id) {
                summary.receivers.removed.push(id.to_string());
            }
        }
        for node in to_start {
            let id = node.id.clone();
            match self.start_receiver(node).await {
                Ok(run) => {
                    self.receivers.insert(id.clone(), run);
                    match stopping.contains(&id) {
                        true => summary.receivers.changed.push(id.to_string()),
                        false => summary.receivers.added.push(id.to_string()),
                    }
                }
                // At start-up nothing runs that this could leave out.
                Err(e) if configs.is_none() => {
                    return Err(ConfigErrors::one(
                        format!("receivers::{id}"),
                        format!("{e:#}"),
                    ));
                }
                Err(e) => {
                    tracing::error!(receiver = %id, "receivers::{id}: failed to start after the reload: {e:#}");
                    summary.failed.push(format!("receivers::{id}: {e:#}"));
                }
            }
        }

        // What was replaced winds down in the background: the old
        // pipelines finish what they hold, then the queues nothing feeds
        // any more close and drain as at shutdown, within its deadline.
        // Upstream first, as at shutdown.
        let mut old: Vec<Arc<Pipeline>> = old_pipelines.into_values().collect();
        old.sort_by_key(|p| p.rank());
        let queues = retired_queues.clone();
        let timeout = self.options.shutdown_timeout;
        let drain = (!old.is_empty() || !queues.is_empty()).then(|| {
            tokio::spawn(async move {
                for p in &old {
                    p.retire().await;
                }
                for q in &queues {
                    q.queue.close();
                }
                tokio::spawn(async move {
                    tokio::time::sleep(timeout).await;
                    retired_hard_stops.iter().for_each(|h| h.cancel());
                });
            })
        });
        self.retiring.retain(|r| !r.is_finished());
        if drain.is_some() || !retiring_consumers.is_empty() {
            self.retiring.push(Retiring {
                drain,
                queues: retired_queues,
                consumers: retiring_consumers,
            });
        }
        Ok(summary)
    }
}

impl Retiring {
    fn is_finished(&self) -> bool {
        self.drain.as_ref().is_none_or(|d| d.is_finished())
            && self.consumers.iter().all(|c| c.is_finished())
    }
}

/// Extensions and `service::telemetry` are not reloaded: a change is
/// refused, at its key.
fn fixed_sections(old: &Config, new: &Config, errs: &mut ConfigErrors) {
    const RESTART: &str = "cannot change on reload; restart profcol to change it";
    if old.service.extensions != new.service.extensions {
        errs.push("service::extensions", RESTART);
    }
    for id in &new.service.extensions {
        if old.service.extensions.contains(id)
            && !same(old.extensions.get(id), new.extensions.get(id))
        {
            errs.push(format!("extensions::{id}"), RESTART);
        }
    }
    if old.service.telemetry != new.service.telemetry {
        errs.push("service::telemetry", RESTART);
    }
    // Metrics pipelines and their queues are not carried over a reload yet.
    let metrics = |c: &Config| {
        c.service
            .pipelines
            .values()
            .any(|p| p.signal == crate::config::Signal::Metrics)
    };
    if metrics(old) || metrics(new) {
        errs.push(
            "service::pipelines",
            "a config with metrics pipelines cannot be reloaded yet; restart profcol to change it",
        );
    }
}

fn port_of(endpoint: &str) -> Option<u16> {
    crate::config::listen_address(endpoint)
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
}

/// Whether `endpoint` can be bound now (bound and let go at once).
fn probe(endpoint: &str) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addr = crate::config::listen_address(endpoint);
    let addrs: Vec<_> = addr.to_socket_addrs().map_err(|e| e.to_string())?.collect();
    let first = addrs.first().ok_or("the address resolves to nothing")?;
    std::net::TcpListener::bind(first)
        .map(drop)
        .map_err(|e| e.to_string())
}
