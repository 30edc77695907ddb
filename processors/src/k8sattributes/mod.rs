//! Processor `k8sattributes` (alias `k8s_attributes`): the Collector's
//! Kubernetes attributes processor (`processor/k8sattributesprocessor`).
//! Background tasks watch pods (and namespaces and nodes when the rules
//! need them) through the Kubernetes API into a cache bounded by the memory
//! budget; a batch looks each resource's pod up there, by the client's
//! connection address or the resource's attributes, and adds the pod's
//! metadata to the resource. A batch never waits for the API: while the
//! API is slow, down or forbids the watch, batches pass un-enriched and
//! counted (`otelcol_k8s_pod_association{status="error"}`).

mod cache;
pub(crate) mod client;
mod config;
mod pod;
mod samples;
mod watch;

#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::{CancellationToken, DropGuard};

use profcol_model::dictionary::resolve_references;
use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue};
use profcol_model::ProfileBatch;
use profcol_ottl::value::{map_get, map_put};
use profcol_pipeline::component::{
    Gate, GateRefusal, ProcessContext, Processor, ProcessorFactory, ProcessorStart, Verdict,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::telemetry::Telemetry;

use cache::{Cache, State};
pub use config::K8sAttributesConfig;
use config::{Plan, Source};
use pod::{identifier_key, IdPart, Pod};
/// The container id in a `/proc/<pid>/cgroup` text (for the fuzz target).
#[doc(hidden)]
pub use samples::container_in_cgroup;

pub struct K8sAttributesFactory;

impl ProcessorFactory for K8sAttributesFactory {
    fn type_name(&self) -> &'static str {
        "k8sattributes"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["k8s_attributes"]
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, plan) = cfg.decode_checked(|c: &K8sAttributesConfig| c.compile(cfg))?;
        Ok(Box::new(K8sAttributes::new(plan)))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(K8sAttributesFactory)
}

pub struct K8sAttributes {
    plan: Arc<Plan>,
    /// Some association reads sample attributes.
    per_sample: bool,
    procfs: Option<samples::Procfs>,
    cache: Arc<Cache>,
    gate: Option<Arc<WaitForMetadata>>,
    telemetry: Option<Arc<Telemetry>>,
    id: String,
    /// Stops the watches when the processor goes (reload, shutdown).
    _stop: Option<DropGuard>,
}

impl K8sAttributes {
    fn new(plan: Plan) -> Self {
        let plan = Arc::new(plan);
        let cache = Arc::new(Cache::new(plan.clone(), None));
        let gate = plan.wait_for_metadata.map(|timeout| {
            Arc::new(WaitForMetadata {
                cache: cache.clone(),
                timeout,
                since: std::sync::OnceLock::new(),
            })
        });
        Self {
            per_sample: !samples::sample_associations(&plan).is_empty(),
            procfs: plan.proc_root.clone().map(|root| samples::Procfs { root }),
            plan,
            cache,
            gate,
            telemetry: None,
            id: String::new(),
            _stop: None,
        }
    }

    /// Starts the watches on the current runtime with `budget` reserving
    /// what the cache holds (tests call it directly).
    fn start_watches(&mut self, ctx: &ProcessorStart<'_>) {
        self.id = ctx.id.to_string();
        self.telemetry = Some(ctx.telemetry.clone());
        if self.plan.passthrough {
            return;
        }
        if let Ok(r) = ctx.budget.try_admit(0) {
            self.cache.attach(r);
        }
        if let Some(g) = &self.gate {
            let _ = g.since.set(Instant::now());
        }
        if tokio::runtime::Handle::try_current().is_err() {
            tracing::error!(
                processor = ctx.id,
                "no async runtime: kubernetes watches not started"
            );
            return;
        }
        let stop = CancellationToken::new();
        watch::Watches {
            cache: self.cache.clone(),
            telemetry: ctx.telemetry.clone(),
            id: self.id.clone(),
        }
        .spawn(stop.clone());
        self._stop = Some(stop.drop_guard());
    }
}

impl Processor for K8sAttributes {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        let connection = batch.meta.client_addr.map(|a| canonical_ip(a.ip()));
        let state = self.cache.read();
        let per_sample = self.decodes_batches();
        if per_sample {
            // Decoded anyway, and the association reads the attribute
            // table's strings: the resources are edited in the messages.
            resolve_references(batch.data_mut());
        }
        batch.edit_resources(|r, _| {
            let outcome =
                process_resource(&self.plan, &state, &mut r.attributes, connection.as_deref());
            if let (Some(t), Some((status, identifier))) = (&self.telemetry, outcome) {
                t.k8s_pod_association(&self.id, status, &identifier);
            }
        });
        if per_sample {
            let data = batch.data_mut();
            let o = samples::associate(&self.plan, &state, self.procfs.as_ref(), data);
            ctx.event("samples_associated", o.associated);
            ctx.event("samples_unassociated", o.unassociated);
        }
        Verdict::Keep
    }

    fn gate(&self) -> Option<Arc<dyn Gate>> {
        self.gate.clone().map(|g| g as Arc<dyn Gate>)
    }

    /// Resources only, unless an association reads sample attributes.
    fn decodes_batches(&self) -> bool {
        self.per_sample && !self.plan.passthrough
    }

    fn start(&mut self, ctx: &ProcessorStart<'_>) {
        self.start_watches(ctx);
    }
}

/// `wait_for_metadata`: batches are refused (retryably) until the first
/// list of pods is in the cache, for at most `wait_for_metadata_timeout`.
/// The Collector instead blocks its start and fails it at the timeout.
struct WaitForMetadata {
    cache: Arc<Cache>,
    timeout: std::time::Duration,
    since: std::sync::OnceLock<Instant>,
}

impl Gate for WaitForMetadata {
    fn admit(&self) -> Result<(), GateRefusal> {
        if self.cache.synced() {
            return Ok(());
        }
        let since = *self.since.get_or_init(Instant::now);
        if since.elapsed() >= self.timeout {
            profcol_model::warn_limited!(
                "kubernetes metadata not synced within wait_for_metadata_timeout; passing batches un-enriched"
            );
            return Ok(());
        }
        Err(GateRefusal {
            reason: "k8s_metadata_not_synced",
            detail: "k8sattributes is waiting for the first list of pods".into(),
        })
    }
}

/// An IPv4 client on a dual-stack socket as the Collector sees it.
fn canonical_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        v4 => v4.to_string(),
    }
}

fn str_attr<'a>(attrs: &'a [KeyValue], key: &str) -> &'a str {
    match map_get(attrs, key).and_then(|v| v.value.as_ref()) {
        Some(A::StringValue(s)) => s,
        _ => "",
    }
}

/// The Collector's `setResourceAttribute`: only where the key is missing
/// or holds an empty string.
fn set_if_absent(attrs: &mut Vec<KeyValue>, key: &str, value: &str) {
    let empty = match map_get(attrs, key) {
        None => true,
        Some(v) => match &v.value {
            Some(A::StringValue(s)) => s.is_empty(),
            None => true,
            _ => false,
        },
    };
    if empty {
        map_put(
            attrs,
            key,
            AnyValue {
                value: Some(A::StringValue(value.to_string())),
            },
        );
    }
}

/// The resource's pod identifier (the Collector's `extractPodID`): the
/// first association whose every source has a value, as the cache's key,
/// with the sources for the association metric and the connection address
/// when a source used it.
fn extract_pod_id(
    plan: &Plan,
    attrs: &[KeyValue],
    connection: Option<&str>,
) -> Option<(String, String, Option<String>)> {
    static CONNECTION: Source = Source::Connection;
    if plan.associations.is_empty() {
        let ip = [str_attr(attrs, "k8s.pod.ip"), str_attr(attrs, "ip")]
            .into_iter()
            .find(|v| !v.is_empty())
            .map(str::to_string)
            .or_else(|| connection.map(str::to_string))
            .or_else(|| {
                let h = str_attr(attrs, "host.name");
                h.parse::<IpAddr>().is_ok().then(|| h.to_string())
            })?;
        return Some((
            identifier_key(&[(&CONNECTION, &ip)]),
            "connection".into(),
            Some(ip),
        ));
    }
    'assoc: for assoc in &plan.associations {
        if assoc
            .iter()
            .any(|s| matches!(s, Source::SampleAttribute(_)))
        {
            continue;
        }
        let mut parts: Vec<IdPart<'_>> = Vec::with_capacity(assoc.len());
        let mut used = None;
        for source in assoc {
            let value = match source {
                Source::Connection => match connection {
                    Some(ip) => {
                        used = Some(ip.to_string());
                        ip
                    }
                    None => continue 'assoc,
                },
                Source::ResourceAttribute(name) | Source::SampleAttribute(name) => {
                    let v = str_attr(attrs, name);
                    if v.is_empty() || (name == "host.name" && v.parse::<IpAddr>().is_err()) {
                        continue 'assoc;
                    }
                    v
                }
            };
            parts.push((source, value));
        }
        let label = assoc
            .iter()
            .map(|s| match s {
                Source::Connection => "connection".to_string(),
                Source::ResourceAttribute(n) => format!("resource_attribute/{n}"),
                Source::SampleAttribute(n) => format!("sample_attribute/{n}"),
            })
            .collect::<Vec<_>>()
            .join("+");
        return Some((identifier_key(&parts), label, used));
    }
    None
}

/// Enriches one resource (the Collector's `processResource`); returns the
/// association's outcome for the metric, `None` in passthrough mode.
fn process_resource(
    plan: &Plan,
    state: &State,
    attrs: &mut Vec<KeyValue>,
    connection: Option<&str>,
) -> Option<(&'static str, String)> {
    let id = extract_pod_id(plan, attrs, connection);
    if let Some((_, _, Some(ip))) = &id {
        if plan.passthrough || plan.rules.pod_ip {
            set_if_absent(attrs, "k8s.pod.ip", ip);
        }
    }
    if plan.passthrough {
        return None;
    }
    let pod = id
        .as_ref()
        .and_then(|(key, _, _)| state.pods.get(key))
        .filter(|p| !p.ignore);
    if let Some(pod) = pod {
        for (k, v) in &pod.attributes {
            set_if_absent(attrs, k, v);
        }
        add_container_attributes(attrs, pod);
    }
    let namespace = match pod {
        Some(p) if !p.namespace.is_empty() => p.namespace.clone(),
        _ => str_attr(attrs, "k8s.namespace.name").to_string(),
    };
    if !namespace.is_empty() {
        if let Some(ns) = state.namespaces.get(&namespace) {
            for (k, v) in &ns.attributes {
                set_if_absent(attrs, k, v);
            }
        }
        if plan.rules.service_namespace {
            set_if_absent(attrs, "service.namespace", &namespace);
        }
    }
    let node = match pod {
        Some(p) if !p.node_name.is_empty() => p.node_name.clone(),
        _ => str_attr(attrs, "k8s.node.name").to_string(),
    };
    if !node.is_empty() {
        if let Some(n) = state.nodes.get(&node) {
            for (k, v) in &n.attributes {
                set_if_absent(attrs, k, v);
            }
            if plan.rules.node_uid && !n.uid.is_empty() {
                set_if_absent(attrs, "k8s.node.uid", &n.uid);
            }
        }
    }
    let status = if pod.is_some() { "success" } else { "error" };
    Some((status, id.map(|(_, label, _)| label).unwrap_or_default()))
}

/// The Collector's `addContainerAttributes`: the container named by
/// `k8s.container.name` or `container.id`, or the pod's only one.
fn add_container_attributes(attrs: &mut Vec<KeyValue>, pod: &Pod) {
    let name = str_attr(attrs, "k8s.container.name");
    let id = str_attr(attrs, "container.id");
    let container = if !name.is_empty() {
        pod.container_by_name(name)
    } else if !id.is_empty() {
        pod.container_by_id(id)
    } else if pod.by_id.len() == 1 {
        pod.containers.get(pod.by_id[0].1)
    } else if pod.by_name.len() == 1 {
        pod.containers.get(pod.by_name[0].1)
    } else {
        None
    };
    let Some(c) = container else { return };
    if !c.name.is_empty() {
        set_if_absent(attrs, "k8s.container.name", &c.name);
    }
    if !c.image_name.is_empty() {
        set_if_absent(attrs, "container.image.name", &c.image_name);
    }
    if !c.image_tag.is_empty() && map_get(attrs, "container.image.tags").is_none() {
        map_put(
            attrs,
            "container.image.tags",
            AnyValue {
                value: Some(A::ArrayValue(ArrayValue {
                    values: vec![AnyValue {
                        value: Some(A::StringValue(c.image_tag.clone())),
                    }],
                })),
            },
        );
    }
    let run = match map_get(attrs, "k8s.container.restart_count").and_then(|v| v.value.as_ref()) {
        Some(A::IntValue(n)) => i32::try_from(*n).ok(),
        Some(A::StringValue(s)) => s.parse().ok(),
        Some(_) => None,
        None => c.statuses.keys().next_back().copied(),
    };
    if let Some(cid) = run.and_then(|r| c.statuses.get(&r)) {
        if map_get(attrs, "container.id").is_none() && !cid.is_empty() {
            map_put(
                attrs,
                "container.id",
                AnyValue {
                    value: Some(A::StringValue(cid.clone())),
                },
            );
        }
    }
}

/// For benches and tests: a processor on `yaml` whose cache holds `pods`
/// (API objects as the API server returns them), with no watches.
#[doc(hidden)]
pub fn with_pods(yaml: &str, pods: &[serde_json::Value]) -> Result<Box<dyn Processor>, String> {
    let cfg = ComponentConfig::from_yaml(
        profcol_pipeline::config::Kind::Processor,
        "k8sattributes",
        yaml,
    )
    .map_err(|e| e.to_string())?;
    let (_, plan) = cfg
        .decode_checked(|c: &K8sAttributesConfig| c.compile(&cfg))
        .map_err(|e| e.to_string())?;
    let p = K8sAttributes::new(plan);
    for pod in pods {
        let api: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod.clone()).map_err(|e| e.to_string())?;
        p.cache.upsert_pod(pod::pod_from_api(&p.plan, &api, None));
    }
    p.cache.set_synced();
    Ok(Box::new(p))
}

/// Profiles shaped as the OpenTelemetry eBPF profiler sends them: one
/// resource (the node), one profile, `samples` samples from `processes`
/// processes, each sample with its `process.pid` (an int), `container.id`
/// and `thread.name`; process `i` runs in container `container(i)`.
#[doc(hidden)]
pub fn ebpf_like(
    samples: usize,
    processes: usize,
    container: impl Fn(usize) -> String,
) -> profcol_model::proto::ProfilesData {
    use profcol_model::proto::{
        KeyValueAndUnit, Profile, ProfilesData, ProfilesDictionary, Resource, ResourceProfiles,
        Sample, ScopeProfiles, Stack, ValueType,
    };
    let mut strings: Vec<String> = [
        "",
        "process.pid",
        "container.id",
        "thread.name",
        "samples",
        "count",
        "cpu",
        "nanoseconds",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut attrs = vec![KeyValueAndUnit::default()];
    let kv = |key: i32, v: A| KeyValueAndUnit {
        key_strindex: key,
        value: Some(AnyValue { value: Some(v) }),
        unit_strindex: 0,
    };
    let mut per_process = Vec::with_capacity(processes);
    for i in 0..processes {
        let first = attrs.len() as i32;
        attrs.push(kv(1, A::IntValue(1000 + i as i64)));
        attrs.push(kv(2, A::StringValue(container(i))));
        strings.push(format!("worker-{}", i % 7));
        attrs.push(kv(3, A::StringValue(format!("worker-{}", i % 7))));
        per_process.push([first, first + 1, first + 2]);
    }
    let samples = (0..samples)
        .map(|k| Sample {
            stack_index: 0,
            attribute_indices: per_process[k % processes].to_vec(),
            values: vec![1 + (k % 3) as i64],
            ..Default::default()
        })
        .collect();
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "host.name".into(),
                    value: Some(AnyValue {
                        value: Some(A::StringValue("node-1".into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    sample_type: Some(ValueType {
                        type_strindex: 4,
                        unit_strindex: 5,
                    }),
                    period_type: Some(ValueType {
                        type_strindex: 6,
                        unit_strindex: 7,
                    }),
                    period: 50_000_000,
                    profile_id: vec![7; 16],
                    samples,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(ProfilesDictionary {
            string_table: strings,
            attribute_table: attrs,
            stack_table: vec![Stack::default()],
            ..Default::default()
        }),
    }
}
