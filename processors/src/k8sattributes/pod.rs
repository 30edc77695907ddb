//! What the cache keeps of a pod, a namespace and a node: the attributes
//! the rules ask for, computed once when the watch delivers the object (as
//! the Collector's `podFromAPI`), so that a batch only copies them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod as ApiPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::{FieldRule, From, Plan, Source};

/// The annotation that makes the Collector ignore a pod.
const IGNORE_ANNOTATION: &str = "opentelemetry.io/k8s-processor/ignore";
const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The Collector's skew allowed between a CronJob's job suffix (minutes)
/// and the pod's creation.
const CRONJOB_SKEW_MINUTES: i64 = 5;

#[derive(Debug, Default, Clone)]
pub(super) struct Pod {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub address: String,
    pub host_network: bool,
    pub node_name: String,
    /// `status.startTime`, seconds: a newer pod wins an identifier.
    pub start_time: Option<i64>,
    pub ignore: bool,
    pub attributes: Vec<(String, String)>,
    pub containers: Vec<Container>,
    /// Indexes into `containers`.
    pub by_name: Vec<(String, usize)>,
    pub by_id: Vec<(String, usize)>,
}

#[derive(Debug, Default, Clone)]
pub(super) struct Container {
    pub name: String,
    pub image_name: String,
    pub image_tag: String,
    /// Container ids by restart count.
    pub statuses: BTreeMap<i32, String>,
}

/// A namespace or node: its uid and the attributes its rules extract.
#[derive(Debug, Default, Clone)]
pub(super) struct Meta {
    pub uid: String,
    pub attributes: Vec<(String, String)>,
}

impl Pod {
    /// Bytes it holds, for the memory budget.
    pub(super) fn footprint(&self) -> usize {
        let strings = self.name.len()
            + self.namespace.len()
            + self.uid.len()
            + self.address.len()
            + self.node_name.len()
            + self
                .attributes
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
            + self
                .containers
                .iter()
                .map(|c| {
                    c.name.len()
                        + c.image_name.len()
                        + c.image_tag.len()
                        + c.statuses.values().map(|s| s.len() + 64).sum::<usize>()
                        + 96
                })
                .sum::<usize>()
            + (self.by_name.len() + self.by_id.len()) * 32
            + self
                .by_name
                .iter()
                .chain(&self.by_id)
                .map(|(k, _)| k.len())
                .sum::<usize>();
        std::mem::size_of::<Self>() + strings
    }

    pub(super) fn container_by_name(&self, name: &str) -> Option<&Container> {
        self.by_name
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, i)| &self.containers[*i])
    }

    pub(super) fn container_by_id(&self, id: &str) -> Option<&Container> {
        self.by_id
            .iter()
            .find(|(n, _)| n == id)
            .map(|(_, i)| &self.containers[*i])
    }
}

impl Meta {
    pub(super) fn footprint(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.uid.len()
            + self
                .attributes
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
    }
}

/// An image reference split as the Collector's `ParseImageName`
/// (docker's `reference.Parse`, not normalized): the repository as
/// written, and the tag (`latest` when none).
pub(super) fn parse_image(image: &str) -> Option<(String, String)> {
    if image.is_empty() {
        return None;
    }
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_slash = without_digest.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (repo, tag) = match without_digest[last_slash..].rfind(':') {
        Some(i) => (
            &without_digest[..last_slash + i],
            &without_digest[last_slash + i + 1..],
        ),
        None => (without_digest, "latest"),
    };
    if repo.is_empty() || tag.is_empty() {
        return None;
    }
    Some((repo.to_string(), tag.to_string()))
}

fn put(tags: &mut Vec<(String, String)>, key: impl Into<String>, value: impl Into<String>) {
    let key = key.into();
    let value = value.into();
    match tags.iter_mut().find(|(k, _)| *k == key) {
        Some(kv) => kv.1 = value,
        None => tags.push((key, value)),
    }
}

/// Applies `rules` of origin `from` to one object's labels or annotations;
/// `prefix` makes the default name (`k8s.pod.label`).
fn extract(
    rules: &[FieldRule],
    from: From,
    map: Option<&BTreeMap<String, String>>,
    prefix: &str,
    tags: &mut Vec<(String, String)>,
) {
    let Some(map) = map else { return };
    for r in rules.iter().filter(|r| r.from == from) {
        match &r.key_regex {
            Some(re) => {
                for (k, v) in map {
                    if v.is_empty() || !re.is_match(k) {
                        continue;
                    }
                    if r.expands && !r.tag_name.is_empty() {
                        let caps = re.captures(k).expect("matched");
                        let mut name = String::new();
                        caps.expand(&r.tag_name, &mut name);
                        put(tags, name, v.clone());
                    } else {
                        put(tags, format!("{prefix}.{k}"), v.clone());
                    }
                }
            }
            None => {
                if let Some(v) = map.get(&r.key) {
                    let name = if r.tag_name.is_empty() {
                        format!("{prefix}.{}", r.key)
                    } else {
                        r.tag_name.clone()
                    };
                    put(tags, name, v.clone());
                }
            }
        }
    }
}

/// A namespace's or node's entry.
pub(super) fn meta_from_api(plan: &Plan, meta: &ObjectMeta, from: From) -> Meta {
    let mut attributes = Vec::new();
    let kind = match from {
        From::Namespace => "k8s.namespace",
        From::Node => "k8s.node",
        From::Pod => "k8s.pod",
    };
    extract(
        &plan.labels,
        from,
        meta.labels.as_ref(),
        &format!("{kind}.label"),
        &mut attributes,
    );
    extract(
        &plan.annotations,
        from,
        meta.annotations.as_ref(),
        &format!("{kind}.annotation"),
        &mut attributes,
    );
    Meta {
        uid: meta.uid.clone().unwrap_or_default(),
        attributes,
    }
}

/// RFC 3339 in UTC with seconds, as Go's `metav1.Time.MarshalText`.
fn rfc3339(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> String {
    t.0.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The cache's entry for a pod from the API (the Collector's `podFromAPI`
/// and `extractPodAttributes`). `cluster_uid` is `kube-system`'s uid when
/// the rules ask for it and it is known.
pub(super) fn pod_from_api(plan: &Plan, pod: &ApiPod, cluster_uid: Option<&str>) -> Pod {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let uid = meta.uid.clone().unwrap_or_default();
    let mut out = Pod {
        name: name.clone(),
        namespace: namespace.clone(),
        uid: uid.clone(),
        address: status.and_then(|s| s.pod_ip.clone()).unwrap_or_default(),
        host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
        node_name: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        start_time: status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.timestamp()),
        ..Pod::default()
    };
    let ignored = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(IGNORE_ANNOTATION))
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if ignored || plan.exclude.iter().any(|r| r.is_match(&name)) {
        out.ignore = true;
        return out;
    }
    let r = &plan.rules;
    let tags = &mut out.attributes;
    if r.pod_name {
        put(tags, "k8s.pod.name", &name);
    }
    if r.pod_hostname {
        put(
            tags,
            "k8s.pod.hostname",
            spec.and_then(|s| s.hostname.clone()).unwrap_or_default(),
        );
    }
    if r.pod_ip {
        put(tags, "k8s.pod.ip", &out.address);
    }
    if r.namespace {
        put(tags, "k8s.namespace.name", &namespace);
    }
    if r.service_namespace {
        put(tags, "service.namespace", &namespace);
    }
    let created = meta.creation_timestamp.as_ref();
    if r.start_time {
        if let Some(t) = created {
            put(tags, "k8s.pod.start_time", rfc3339(t));
        }
    }
    if r.pod_uid {
        put(tags, "k8s.pod.uid", &uid);
    }
    for owner in meta.owner_references.iter().flatten() {
        match owner.kind.as_str() {
            "ReplicaSet" => {
                if r.replicaset_uid {
                    put(tags, "k8s.replicaset.uid", &owner.uid);
                }
                if r.replicaset_name {
                    put(tags, "k8s.replicaset.name", &owner.name);
                }
                if r.deployment_name {
                    let hash = meta
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(POD_TEMPLATE_HASH))
                        .map(String::as_str)
                        .unwrap_or("");
                    let suffix = format!("-{hash}");
                    if !hash.is_empty() && owner.name.ends_with(&suffix) {
                        put(
                            tags,
                            "k8s.deployment.name",
                            &owner.name[..owner.name.len() - suffix.len()],
                        );
                    }
                }
            }
            "DaemonSet" => {
                if r.daemonset_uid {
                    put(tags, "k8s.daemonset.uid", &owner.uid);
                }
                if r.daemonset_name {
                    put(tags, "k8s.daemonset.name", &owner.name);
                }
            }
            "StatefulSet" => {
                if r.statefulset_uid {
                    put(tags, "k8s.statefulset.uid", &owner.uid);
                }
                if r.statefulset_name {
                    put(tags, "k8s.statefulset.name", &owner.name);
                }
            }
            "Job" => {
                if r.job_uid {
                    put(tags, "k8s.job.uid", &owner.uid);
                }
                if r.job_name {
                    put(tags, "k8s.job.name", &owner.name);
                }
                if r.cronjob_name {
                    if let Some(cron) = cronjob_of(&owner.name, created) {
                        put(tags, "k8s.cronjob.name", cron);
                    }
                }
            }
            _ => {}
        }
    }
    if r.node {
        put(tags, "k8s.node.name", &out.node_name);
    }
    if r.cluster_uid {
        if let Some(uid) = cluster_uid {
            put(tags, "k8s.cluster.uid", uid);
        }
    }
    extract(
        &plan.labels,
        From::Pod,
        meta.labels.as_ref(),
        "k8s.pod.label",
        tags,
    );
    extract(
        &plan.annotations,
        From::Pod,
        meta.annotations.as_ref(),
        "k8s.pod.annotation",
        tags,
    );
    if r.containers() || plan.sample_containers {
        containers(plan, pod, &mut out);
    }
    out
}

/// The CronJob a Job's name says it was made by: `<cronjob>-<minutes>`
/// with the minutes close to the pod's creation (the Collector's
/// heuristic when it does not watch jobs).
fn cronjob_of(
    job: &str,
    created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Option<String> {
    let (prefix, digits) = job.rsplit_once('-')?;
    if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let minutes: i64 = digits.parse().ok()?;
    let pod_minutes = created.map(|t| t.0.timestamp() / 60).unwrap_or(0);
    ((pod_minutes - minutes).abs() <= CRONJOB_SKEW_MINUTES).then(|| prefix.to_string())
}

fn containers(plan: &Plan, pod: &ApiPod, out: &mut Pod) {
    let r = &plan.rules;
    if let Some(spec) = &pod.spec {
        if r.image_name || r.image_tags {
            let specs = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten());
            for c in specs {
                let mut container = Container::default();
                if let Some((repo, tag)) = c.image.as_deref().and_then(parse_image) {
                    if r.image_name {
                        container.image_name = repo;
                    }
                    if r.image_tags {
                        container.image_tag = tag;
                    }
                }
                set_by_name(out, &c.name, container);
            }
        }
    }
    let Some(status) = &pod.status else { return };
    let statuses = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten());
    for s in statuses {
        let i = match out.by_name.iter().find(|(n, _)| *n == s.name) {
            Some((_, i)) => *i,
            None => set_by_name(out, &s.name, Container::default()),
        };
        if r.container_name {
            out.containers[i].name = s.name.clone();
        }
        let raw = s.container_id.clone().unwrap_or_default();
        let id = match raw.split_once("://") {
            Some((_, id)) if !id.contains("://") => id.to_string(),
            _ => raw,
        };
        match out.by_id.iter_mut().find(|(k, _)| *k == id) {
            Some(e) => e.1 = i,
            None => out.by_id.push((id.clone(), i)),
        }
        if r.container_id {
            out.containers[i].statuses.insert(s.restart_count, id);
        }
    }
}

fn set_by_name(out: &mut Pod, name: &str, container: Container) -> usize {
    match out.by_name.iter().find(|(n, _)| n == name) {
        Some((_, i)) => {
            out.containers[*i] = container;
            *i
        }
        None => {
            out.containers.push(container);
            let i = out.containers.len() - 1;
            out.by_name.push((name.to_string(), i));
            i
        }
    }
}

/// One slot of a pod identifier: `(source, value)`.
pub(super) type IdPart<'a> = (&'a Source, &'a str);

/// A pod identifier as one string: the key of the cache's map.
pub(super) fn identifier_key(parts: &[IdPart<'_>]) -> String {
    let mut key = String::new();
    for (source, value) in parts {
        match source {
            Source::Connection => key.push_str("c\u{1}"),
            Source::ResourceAttribute(n) | Source::SampleAttribute(n) => {
                key.push_str("r\u{1}");
                key.push_str(n);
                key.push('\u{1}');
            }
        }
        key.push_str(value);
        key.push('\u{2}');
    }
    key
}

/// The identifiers a pod is found by (the Collector's
/// `getIdentifiersFromAssoc`): one per association whose sources the pod
/// has, one per container id where a source is `container.id`; then its
/// uid, and its IP as a connection and as `k8s.pod.ip`.
pub(super) fn identifiers(plan: &Plan, pod: &Pod) -> Vec<String> {
    static CONNECTION: Source = Source::Connection;
    let uid_source = Source::ResourceAttribute("k8s.pod.uid".into());
    let ip_source = Source::ResourceAttribute("k8s.pod.ip".into());
    let mut ids = Vec::new();
    'assoc: for assoc in &plan.associations {
        let mut parts: Vec<IdPart<'_>> = Vec::with_capacity(assoc.len());
        let mut container_slot = None;
        for (i, source) in assoc.iter().enumerate() {
            let value: &str = match source {
                Source::Connection => {
                    if pod.address.is_empty() || pod.host_network {
                        continue 'assoc;
                    }
                    &pod.address
                }
                Source::ResourceAttribute(name) | Source::SampleAttribute(name) => {
                    match name.as_str() {
                        "k8s.namespace.name" => &pod.namespace,
                        "k8s.pod.name" => &pod.name,
                        "k8s.pod.uid" => &pod.uid,
                        "host.name" | "k8s.pod.ip" => &pod.address,
                        "container.id" => {
                            container_slot = Some(i);
                            ""
                        }
                        "process.pid" if matches!(source, Source::SampleAttribute(_)) => {
                            container_slot = Some(i);
                            ""
                        }
                        other => pod
                            .attributes
                            .iter()
                            .find(|(k, _)| k == other)
                            .map(|(_, v)| v.as_str())
                            .unwrap_or(""),
                    }
                }
            };
            if value.is_empty() && container_slot != Some(i) {
                continue 'assoc;
            }
            parts.push((source, value));
        }
        match container_slot {
            Some(slot) => {
                for (id, _) in &pod.by_id {
                    parts[slot].1 = id;
                    ids.push(identifier_key(&parts));
                }
            }
            None => ids.push(identifier_key(&parts)),
        }
    }
    if !pod.uid.is_empty() {
        ids.push(identifier_key(&[(&uid_source, &pod.uid)]));
    }
    if !pod.address.is_empty() && !pod.host_network {
        ids.push(identifier_key(&[(&CONNECTION, &pod.address)]));
        ids.push(identifier_key(&[(&ip_source, &pod.address)]));
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}
