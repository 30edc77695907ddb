use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::component::{
    Connector, ConnectorFactory, Exporter, ExporterFactory, ExporterSettings, Extension, Processor,
    Receiver,
};
use crate::config::{
    ComponentConfig, ComponentId, Config, ConfigErrors, ExporterSettingsKeys, Kind, Signal,
    TelemetryConfig, EXPORTER_SETTINGS_KEYS,
};

use super::Registry;

/// Every component of a config, created (configs decoded and validated) but
/// not started: nothing is bound yet.
pub struct Graph {
    pub receivers: Vec<ReceiverNode>,
    pub pipelines: Vec<PipelineNode>,
    pub exporters: Vec<ExporterNode>,
    pub extensions: Vec<(ComponentId, Box<dyn Extension>)>,
    pub telemetry: TelemetryConfig,
}

pub struct ReceiverNode {
    pub id: ComponentId,
    pub receiver: Box<dyn Receiver>,
    /// Ids of the pipelines it feeds.
    pub pipelines: Vec<String>,
}

pub struct PipelineNode {
    pub id: String,
    /// What it carries: a metrics pipeline has neither receivers (only
    /// connectors) nor processors.
    pub signal: Signal,
    pub processors: Vec<(ComponentId, Box<dyn Processor>)>,
    /// Its exporters (connectors are in `connectors`).
    pub exporters: Vec<ComponentId>,
    /// The connectors it exports to, each with the pipelines it feeds.
    pub connectors: Vec<ConnectorNode>,
    /// The most connectors a batch crosses to reach it from a pipeline no
    /// connector feeds: a pipeline feeds only pipelines of higher rank.
    pub rank: usize,
}

/// A connector as an exporter of one pipeline.
pub struct ConnectorNode {
    pub id: ComponentId,
    pub connector: Connector,
    /// The pipelines it is a receiver of whose signal it can make of this
    /// pipeline's.
    pub pipelines: Vec<String>,
}

pub struct ExporterNode {
    pub id: ComponentId,
    pub exporter: Arc<dyn Exporter>,
    pub settings: ExporterSettings,
    /// A metrics pipeline lists it: it runs a metrics queue too.
    pub metrics: bool,
}

/// An exporter behind `sending_queue::batch` reads only the metadata keys
/// the batching keeps (`kept`); the others would be gone from every batch.
fn check_batched_metadata(
    id: &ComponentId,
    exporter: &dyn Exporter,
    kept: &[String],
    errs: &mut ConfigErrors,
) {
    for (path, key) in exporter.metadata_keys() {
        if !kept.iter().any(|k| k.eq_ignore_ascii_case(&key)) {
            errs.push(
                format!("exporters::{id}::{path}"),
                format!("{key:?} must be present in sending_queue::batch::partition::metadata_keys if batching is enabled (batches keep only the metadata keys they are partitioned by; found {kept:?})"),
            );
        }
    }
}

/// Decodes every component section with its factory and wires the graph.
/// All errors are collected; unused components are checked but not kept.
pub fn build(config: &Config, registry: &Registry) -> Result<Graph, ConfigErrors> {
    build_as(config, registry, false)
}

/// [`build`] for `profcol validate`: every processor only checked
/// ([`ProcessorFactory::check`]), as one that will not run.
pub fn check(config: &Config, registry: &Registry) -> Result<Graph, ConfigErrors> {
    build_as(config, registry, true)
}

fn build_as(config: &Config, registry: &Registry, checking: bool) -> Result<Graph, ConfigErrors> {
    let mut errs = ConfigErrors::default();

    let used = |kind: Kind| -> BTreeSet<&ComponentId> {
        config
            .service
            .pipelines
            .values()
            .flat_map(|p| match kind {
                Kind::Receiver => p.receivers.iter(),
                Kind::Processor => p.processors.iter(),
                Kind::Exporter => p.exporters.iter(),
                Kind::Extension | Kind::Connector => [].iter(),
            })
            .collect()
    };

    let mut receivers = Vec::new();
    let used_receivers = used(Kind::Receiver);
    for (id, cfg) in &config.receivers {
        let Some(f) = lookup(&registry.receivers, cfg, registry, &mut errs) else {
            continue;
        };
        match f.create(cfg) {
            Ok(r) if used_receivers.contains(id) => {
                let pipelines = config
                    .service
                    .pipelines
                    .iter()
                    .filter(|(_, p)| p.receivers.contains(id))
                    .map(|(pid, _)| pid.clone())
                    .collect();
                receivers.push(ReceiverNode {
                    id: id.clone(),
                    receiver: r,
                    pipelines,
                });
            }
            Ok(_) => {}
            Err(e) => errs.extend(e),
        }
    }

    let mut exporters = Vec::new();
    let used_exporters = used(Kind::Exporter);
    for (id, cfg) in &config.exporters {
        let Some(f) = lookup(&registry.exporters, cfg, registry, &mut errs) else {
            continue;
        };
        match create_exporter(&**f, cfg) {
            Ok((exporter, settings)) if used_exporters.contains(id) => {
                if let Some(kept) = config.batched_exporters.get(id) {
                    check_batched_metadata(id, &*exporter, kept, &mut errs);
                }
                let mut metrics = false;
                for (pid, p) in &config.service.pipelines {
                    if !p.exporters.contains(id) {
                        continue;
                    }
                    if p.signal != Signal::Metrics {
                        if !exporter.exports_profiles() {
                            errs.push(
                                format!("service::pipelines::{pid}::exporters"),
                                format!("exporter \"{id}\" does not support profiles; list it in a metrics pipeline"),
                            );
                        }
                        continue;
                    }
                    metrics = true;
                    if !exporter.exports_metrics() {
                        errs.push(
                            format!("service::pipelines::{pid}::exporters"),
                            format!("exporter \"{id}\" does not support metrics; of the exporters, otlp, otlphttp, file, debug and prometheus do"),
                        );
                    }
                }
                exporters.push(ExporterNode {
                    id: id.clone(),
                    exporter,
                    settings,
                    metrics,
                })
            }
            Ok(_) => {}
            Err(e) => errs.extend(e),
        }
    }

    // Processors: one instance per pipeline that lists the id; an unused one
    // is still created once so its config is checked. Errors once per id.
    let mut processor_factories = BTreeMap::new();
    for (id, cfg) in &config.processors {
        if let Some(f) = lookup(&registry.processors, cfg, registry, &mut errs) {
            processor_factories.insert(id, (f, cfg));
        }
    }
    let mut failed = BTreeSet::new();
    let mut pipelines = Vec::new();
    for (pid, p) in &config.service.pipelines {
        if p.signal == Signal::Metrics {
            check_metrics_pipeline(config, pid, p, &mut errs);
        }
        let mut processors = Vec::new();
        for id in &p.processors {
            // An id missing from the map was reported by the loader or above.
            let Some((f, cfg)) = processor_factories.get(id) else {
                continue;
            };
            let made = if checking {
                f.check(cfg)
            } else {
                f.create(cfg)
            };
            match made {
                Ok(proc) => processors.push((id.clone(), proc)),
                Err(e) if failed.insert(id.clone()) => errs.extend(e),
                Err(_) => {}
            }
        }
        let mut stateful: Vec<String> = processors
            .iter_mut()
            .filter_map(|(id, p)| p.stateful().is_some().then(|| id.to_string()))
            .collect();
        if stateful.len() > 1 {
            stateful.iter_mut().for_each(|s| *s = format!("{s:?}"));
            errs.push(
                format!("service::pipelines::{pid}::processors"),
                format!(
                    "at most one processor per pipeline may hold batches; {} all do",
                    stateful.join(", ")
                ),
            );
        }
        pipelines.push(PipelineNode {
            id: pid.clone(),
            signal: p.signal,
            processors,
            exporters: p
                .exporters
                .iter()
                .filter(|id| !config.connectors.contains_key(*id))
                .cloned()
                .collect(),
            connectors: Vec::new(),
            rank: 0,
        });
    }
    connect(config, registry, &mut pipelines, &mut errs);
    for (id, (f, cfg)) in &processor_factories {
        if !used(Kind::Processor).contains(id) {
            if let Err(e) = f.check(cfg) {
                errs.extend(e);
            }
        }
    }

    let mut extensions = Vec::new();
    for (id, cfg) in &config.extensions {
        let Some(f) = lookup(&registry.extensions, cfg, registry, &mut errs) else {
            continue;
        };
        match f.create(cfg) {
            Ok(x) if config.service.extensions.contains(id) => extensions.push((id.clone(), x)),
            Ok(_) => {}
            Err(e) => errs.extend(e),
        }
    }

    check_ports(config, &receivers, &extensions, &mut errs);
    check_authenticators(&receivers, &exporters, &extensions, &mut errs);
    check_storages(&receivers, &exporters, &extensions, &mut errs);

    errs.into_result(Graph {
        receivers,
        pipelines,
        exporters,
        extensions,
        telemetry: config.service.telemetry.clone(),
    })
}

/// A metrics pipeline carries what connectors make: its receivers must be
/// connectors, and it takes no processors yet (profcol has none for
/// metrics; `batch` and `memory_limiter` work on profiles).
fn check_metrics_pipeline(
    config: &Config,
    pid: &str,
    p: &crate::config::PipelineConfig,
    errs: &mut ConfigErrors,
) {
    for r in &p.receivers {
        if !config.connectors.contains_key(r) {
            errs.push(
                format!("service::pipelines::{pid}::receivers"),
                format!("receiver \"{r}\" does not support metrics: a metrics pipeline is fed only by connectors (signaltometrics)"),
            );
        }
    }
    if !p.processors.is_empty() {
        errs.push(
            format!("service::pipelines::{pid}::processors"),
            "a metrics pipeline takes no processors yet: profcol's processors work on profiles; remove them (the connector's output goes straight to the exporters' queues)",
        );
    }
}

/// Creates the connectors, checks the graph they make (each used both as
/// an exporter and as a receiver of pipelines whose signals it connects, no
/// cycle), fills in each pipeline's connectors and rank, and orders
/// `pipelines` downstream first (the order they are built in).
fn connect(
    config: &Config,
    registry: &Registry,
    pipelines: &mut [PipelineNode],
    errs: &mut ConfigErrors,
) {
    let mut created: BTreeMap<&ComponentId, (&Arc<dyn ConnectorFactory>, Connector)> =
        BTreeMap::new();
    for (id, cfg) in &config.connectors {
        let Some(f) = lookup(&registry.connectors, cfg, registry, errs) else {
            continue;
        };
        match f.create(cfg) {
            Ok(c) => {
                created.insert(id, (f, c));
            }
            Err(e) => errs.extend(e),
        }
    }
    let service = &config.service.pipelines;
    let listing = |id: &ComponentId, exporters: bool| -> Vec<(&String, Signal)> {
        service
            .iter()
            .filter(|(_, p)| match exporters {
                true => p.exporters.contains(id),
                false => p.receivers.contains(id),
            })
            .map(|(pid, p)| (pid, p.signal))
            .collect()
    };
    // Edges from pipeline to pipeline, through a connector.
    let mut edges: BTreeMap<&str, Vec<(&ComponentId, &str)>> = BTreeMap::new();
    for (id, (f, connector)) in &created {
        let signals = f.signals();
        let (from, to) = (listing(id, true), listing(id, false));
        for (e, es) in &from {
            let fed: Vec<&String> = to
                .iter()
                .filter(|(_, rs)| signals.contains(&(*es, *rs)))
                .map(|(r, _)| *r)
                .collect();
            if fed.is_empty() {
                errs.push(
                    format!("service::pipelines::{e}::exporters"),
                    format!("connector \"{id}\" used as exporter in [{e}] pipeline but not used in any supported receiver pipeline"),
                );
            }
            for r in &fed {
                edges.entry(e.as_str()).or_default().push((id, r.as_str()));
            }
            if let Some(node) = pipelines.iter_mut().find(|p| p.id == **e) {
                node.connectors.push(ConnectorNode {
                    id: (*id).clone(),
                    connector: connector.clone(),
                    pipelines: fed.iter().map(|r| (*r).clone()).collect(),
                });
            }
        }
        for (r, rs) in &to {
            if !from.iter().any(|(_, es)| signals.contains(&(*es, *rs))) {
                errs.push(
                    format!("service::pipelines::{r}::receivers"),
                    format!("connector \"{id}\" used as receiver in [{r}] pipeline but not used in any supported exporter pipeline"),
                );
            }
        }
    }
    match ranks(service.keys().map(String::as_str), &edges) {
        Ok(ranks) => {
            for p in pipelines.iter_mut() {
                p.rank = ranks.get(p.id.as_str()).copied().unwrap_or(0);
            }
            pipelines.sort_by(|a, b| b.rank.cmp(&a.rank).then_with(|| a.id.cmp(&b.id)));
        }
        Err(cycle) => errs.push("service::pipelines", format!("cycle detected: {cycle}")),
    }
}

/// Each pipeline's rank (the longest path of connectors into it), or the
/// first cycle found, described from pipeline to pipeline.
fn ranks<'a>(
    nodes: impl Iterator<Item = &'a str>,
    edges: &BTreeMap<&'a str, Vec<(&'a ComponentId, &'a str)>>,
) -> Result<BTreeMap<&'a str, usize>, String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    // Depth-first from every node, iteratively; `path` is the open chain.
    let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for start in nodes {
        if marks.contains_key(start) {
            continue;
        }
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        marks.insert(start, Mark::Open);
        while let Some(&(node, next)) = path.last() {
            let out = edges.get(node).map_or(&[][..], Vec::as_slice);
            let Some(&(_, to)) = out.get(next) else {
                marks.insert(node, Mark::Done);
                order.push(node);
                path.pop();
                continue;
            };
            if let Some(top) = path.last_mut() {
                top.1 += 1;
            }
            match marks.get(to) {
                Some(Mark::Done) => {}
                Some(Mark::Open) => {
                    let at = path.iter().position(|(n, _)| *n == to).unwrap_or(0);
                    let mut text = String::new();
                    for (n, i) in &path[at..] {
                        let (via, _) = edges[n][*i - 1];
                        text.push_str(&format!("pipeline \"{n}\" -> connector \"{via}\" -> "));
                    }
                    text.push_str(&format!("pipeline \"{to}\""));
                    return Err(text);
                }
                None => {
                    marks.insert(to, Mark::Open);
                    path.push((to, 0));
                }
            }
        }
    }
    // `order` is downstream first: walk it backwards (upstream first).
    let mut rank: BTreeMap<&str, usize> = order.iter().map(|n| (*n, 0)).collect();
    for n in order.iter().rev() {
        let r = rank[n];
        for (_, to) in edges.get(n).map_or(&[][..], Vec::as_slice) {
            let e = rank.entry(to).or_insert(0);
            *e = (*e).max(r + 1);
        }
    }
    Ok(rank)
}

/// An exporter from its whole section: the runtime's settings decoded
/// here, the rest by its factory; the errors of both.
pub fn create_exporter(
    f: &dyn ExporterFactory,
    cfg: &ComponentConfig,
) -> Result<(Arc<dyn Exporter>, ExporterSettings), ConfigErrors> {
    let (rest, settings) = exporter_settings(f, cfg);
    let created = f.create(
        &rest,
        settings
            .as_ref()
            .unwrap_or(&ExporterSettings::synchronous()),
    );
    match (created, settings) {
        (Ok(exporter), Ok(settings)) => Ok((exporter, settings)),
        (created, settings) => {
            let mut errs = created.err().unwrap_or_default();
            errs.extend(settings.err().unwrap_or_default());
            Err(errs)
        }
    }
}

/// An exporter's `timeout`, `retry_on_failure` and `sending_queue`,
/// decoded here for every type that has them (with the type's defaults),
/// and the rest of its section, for its factory.
fn exporter_settings(
    f: &dyn ExporterFactory,
    cfg: &ComponentConfig,
) -> (ComponentConfig, Result<ExporterSettings, ConfigErrors>) {
    let Some(defaults) = f.default_settings() else {
        return (cfg.clone(), Ok(ExporterSettings::synchronous()));
    };
    let (rest, keys) = cfg.split_off(&EXPORTER_SETTINGS_KEYS);
    let decoded = keys.decode_checked(|k: &ExporterSettingsKeys| {
        let mut errs = ConfigErrors::default();
        if k.timeout.is_some_and(|t| t.get().is_zero()) {
            errs.push(cfg.key_path("timeout"), "must be greater than 0");
        }
        if let Some(r) = &k.retry_on_failure {
            r.validate(&cfg.key_path("retry_on_failure"), &mut errs);
        }
        if let Some(q) = &k.sending_queue {
            q.validate(&cfg.key_path("sending_queue"), &mut errs);
        }
        errs.into_result(())
    });
    let settings = decoded.map(|(k, ())| ExporterSettings {
        timeout: k.timeout.map_or(defaults.timeout, |t| t.get()),
        retry_on_failure: k.retry_on_failure.unwrap_or(defaults.retry_on_failure),
        sending_queue: k.sending_queue.unwrap_or(defaults.sending_queue),
    });
    (rest, settings)
}

fn lookup<'r, F: ?Sized>(
    factories: &'r BTreeMap<&'static str, Arc<F>>,
    cfg: &ComponentConfig,
    registry: &Registry,
    errs: &mut ConfigErrors,
) -> Option<&'r Arc<F>> {
    let f = factories.get(cfg.id.ty.as_str());
    if f.is_none() {
        errs.push(
            cfg.path(),
            crate::config::unknown_type(cfg.kind, &cfg.id.ty, &registry.types(cfg.kind)),
        );
    }
    f
}

/// Every `auth: {authenticator: id}` must name an extension that runs (is
/// listed in `service.extensions`) and authenticates.
fn check_authenticators(
    receivers: &[ReceiverNode],
    exporters: &[ExporterNode],
    extensions: &[(ComponentId, Box<dyn Extension>)],
    errs: &mut ConfigErrors,
) {
    let refs = receivers
        .iter()
        .flat_map(|r| {
            r.receiver
                .authenticators()
                .into_iter()
                .map(move |(k, id)| (format!("receivers::{}::{k}", r.id), id))
        })
        .chain(exporters.iter().flat_map(|e| {
            e.exporter
                .authenticators()
                .into_iter()
                .map(move |(k, id)| (format!("exporters::{}::{k}", e.id), id))
        }))
        .chain(extensions.iter().flat_map(|(xid, x)| {
            x.authenticators()
                .into_iter()
                .map(move |(k, id)| (format!("extensions::{xid}::{k}"), id))
        }));
    for (path, id) in refs {
        match extensions.iter().find(|(eid, _)| eid.to_string() == id) {
            Some((_, x)) if x.authenticator().is_some() => {}
            Some(_) => errs.push(path, format!("extension {id:?} is not an authenticator")),
            None => errs.push(
                path,
                format!("no extension {id:?} is configured and listed in service::extensions"),
            ),
        }
    }
}

/// Every `sending_queue.storage` must name a storage extension that runs.
fn check_storages(
    receivers: &[ReceiverNode],
    exporters: &[ExporterNode],
    extensions: &[(ComponentId, Box<dyn Extension>)],
    errs: &mut ConfigErrors,
) {
    let refs = exporters
        .iter()
        .filter_map(|e| {
            let id = e.settings.sending_queue.storage.clone()?;
            Some((format!("exporters::{}::sending_queue::storage", e.id), id))
        })
        .chain(receivers.iter().flat_map(|r| {
            r.receiver
                .storages()
                .into_iter()
                .map(move |(k, id)| (format!("receivers::{}::{k}", r.id), id))
        }));
    for (path, id) in refs {
        let id = &id;
        match extensions.iter().find(|(eid, _)| eid.to_string() == *id) {
            Some((_, x)) if x.storage().is_some() => {}
            Some(_) => errs.push(path, format!("extension {id:?} is not a storage extension")),
            None => errs.push(
                path,
                format!("no extension {id:?} is configured and listed in service::extensions"),
            ),
        }
    }
}

/// Two listeners on one port fail at start-up; say so while validating.
fn check_ports(
    config: &Config,
    receivers: &[ReceiverNode],
    extensions: &[(ComponentId, Box<dyn Extension>)],
    errs: &mut ConfigErrors,
) {
    let mut seen: Vec<(SocketAddr, String)> = Vec::new();
    let mut claim = |owner: String, endpoint: &str, errs: &mut ConfigErrors| {
        // `localhost` is loopback; other host names are resolved at start-up.
        let bound = crate::config::listen_address(endpoint);
        let normalized = match bound.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}").into(),
            None => bound,
        };
        let Ok(addr) = normalized.parse::<SocketAddr>() else {
            return;
        };
        // Port 0 takes whichever port is free when it binds: no clash.
        if addr.port() == 0 {
            return;
        }
        let clash = seen.iter().find(|(other, _)| {
            other.port() == addr.port()
                && (other.ip() == addr.ip()
                    || other.ip().is_unspecified()
                    || addr.ip().is_unspecified())
        });
        if let Some((_, first)) = clash {
            errs.push(
                owner.clone(),
                format!(
                    "endpoint {endpoint} conflicts with {first}, which listens on the same port"
                ),
            );
        } else {
            seen.push((addr, owner));
        }
    };
    for r in receivers {
        for e in r.receiver.endpoints() {
            claim(format!("receivers::{}", r.id), &e, errs);
        }
    }
    for (id, x) in extensions {
        for e in x.endpoints() {
            claim(format!("extensions::{id}"), &e, errs);
        }
    }
    if let Some(addr) = config.service.telemetry.metrics_address {
        claim(
            "service::telemetry::metrics".into(),
            &addr.to_string(),
            errs,
        );
    }
}
