//! The `k8sattributes` section, with the keys of the Collector's
//! `processor/k8sattributesprocessor` (v1.0.0 in contrib v0.161.0; type
//! `k8s_attributes`, alias `k8sattributes`). What profcol does not have is
//! refused by name with the reason, never accepted and ignored.

use regex::Regex;
use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use super::client::parse_auth;
pub(super) use super::client::Auth;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct K8sAttributesConfig {
    /// `serviceAccount` (in-cluster) or `kubeConfig`.
    pub auth_type: String,
    /// With `kubeConfig`: the context to use instead of the current one.
    pub context: String,
    /// client-go's rate limits; kube-rs has none: accepted, unused.
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    pub passthrough: bool,
    pub extract: ExtractConfig,
    pub filter: FilterConfig,
    pub pod_association: Vec<PodAssociationConfig>,
    pub exclude: ExcludeConfig,
    pub wait_for_metadata: bool,
    pub wait_for_metadata_timeout: Duration,
    /// The informers' resync; a kube-rs watch holds no second copy to
    /// resync from: accepted, unused.
    pub watch_sync_period: Duration,
    pub pod_delete_grace_period: Duration,
    /// profcol's: the host's `/proc` (with `hostPID`), where a sample's
    /// `process.pid` finds its container. Empty: `process.pid` is refused.
    pub proc_root: String,
}

impl Default for K8sAttributesConfig {
    fn default() -> Self {
        Self {
            auth_type: "serviceAccount".into(),
            context: String::new(),
            kube_api_qps: 0.0,
            kube_api_burst: 0,
            passthrough: false,
            extract: ExtractConfig::default(),
            filter: FilterConfig::default(),
            pod_association: Vec::new(),
            exclude: ExcludeConfig::default(),
            wait_for_metadata: false,
            wait_for_metadata_timeout: Duration::from_secs(10),
            watch_sync_period: Duration::from_secs(300),
            pod_delete_grace_period: Duration::from_secs(120),
            proc_root: String::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractConfig {
    pub metadata: Vec<String>,
    pub annotations: Vec<FieldExtractConfig>,
    pub labels: Vec<FieldExtractConfig>,
    pub otel_annotations: bool,
}

/// The Collector's default `extract.metadata` (its feature gates
/// `EmitV1K8sConventions` and `DontEmitV0K8sConventions` are beta, on).
pub(super) const DEFAULT_METADATA: &[&str] = &[
    "container.image.name",
    "container.image.tags",
    "k8s.deployment.name",
    "k8s.namespace.name",
    "k8s.node.name",
    "k8s.pod.name",
    "k8s.pod.start_time",
    "k8s.pod.uid",
];

impl Default for ExtractConfig {
    fn default() -> Self {
        Self {
            metadata: DEFAULT_METADATA.iter().map(|s| s.to_string()).collect(),
            annotations: Vec::new(),
            labels: Vec::new(),
            otel_annotations: false,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldExtractConfig {
    pub tag_name: String,
    pub key: String,
    pub key_regex: String,
    pub from: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterConfig {
    pub node: String,
    pub node_from_env_var: String,
    pub namespace: String,
    pub fields: Vec<FieldFilterConfig>,
    pub labels: Vec<FieldFilterConfig>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldFilterConfig {
    pub key: String,
    pub value: String,
    pub op: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PodAssociationConfig {
    pub sources: Vec<PodAssociationSourceConfig>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PodAssociationSourceConfig {
    pub from: String,
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExcludeConfig {
    pub pods: Vec<ExcludePodConfig>,
}

impl Default for ExcludeConfig {
    fn default() -> Self {
        Self {
            pods: vec![
                ExcludePodConfig {
                    name: "jaeger-agent".into(),
                },
                ExcludePodConfig {
                    name: "jaeger-collector".into(),
                },
            ],
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExcludePodConfig {
    pub name: String,
}

/// The Collector's limit of sources in one association.
const MAX_SOURCES: usize = 4;

/// What `extract.metadata` asks for.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub pod_name: bool,
    pub pod_uid: bool,
    pub pod_hostname: bool,
    pub pod_ip: bool,
    pub start_time: bool,
    pub namespace: bool,
    pub node: bool,
    pub node_uid: bool,
    pub cluster_uid: bool,
    pub deployment_name: bool,
    pub replicaset_name: bool,
    pub replicaset_uid: bool,
    pub daemonset_name: bool,
    pub daemonset_uid: bool,
    pub statefulset_name: bool,
    pub statefulset_uid: bool,
    pub job_name: bool,
    pub job_uid: bool,
    pub cronjob_name: bool,
    pub service_namespace: bool,
    pub container_name: bool,
    pub container_id: bool,
    pub image_name: bool,
    pub image_tags: bool,
}

impl Rules {
    pub fn containers(&self) -> bool {
        self.container_name || self.container_id || self.image_name || self.image_tags
    }
}

/// Where a label or annotation is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Pod,
    Namespace,
    Node,
}

/// One `extract.labels` or `extract.annotations` rule.
#[derive(Debug, Clone)]
pub struct FieldRule {
    pub tag_name: String,
    pub key: String,
    pub key_regex: Option<Regex>,
    /// The regex has groups `tag_name` may refer to.
    pub expands: bool,
    pub from: From,
}

/// One association source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Connection,
    ResourceAttribute(String),
    SampleAttribute(String),
}

/// The section, checked and compiled.
#[derive(Debug, Clone)]
pub struct Plan {
    pub auth: Auth,
    pub passthrough: bool,
    pub rules: Rules,
    pub labels: Vec<FieldRule>,
    pub annotations: Vec<FieldRule>,
    pub associations: Vec<Vec<Source>>,
    pub exclude: Vec<Regex>,
    pub node: String,
    pub namespace: String,
    pub label_selector: String,
    pub field_selector: String,
    pub wait_for_metadata: Option<std::time::Duration>,
    pub delete_grace: std::time::Duration,
    /// Where `process.pid` is looked up, when a sample association uses it.
    pub proc_root: Option<std::path::PathBuf>,
    /// A sample association reads `container.id` or `process.pid`: pods
    /// are indexed by container id whatever the rules extract.
    pub sample_containers: bool,
}

impl Plan {
    pub fn watches_namespaces(&self) -> bool {
        self.rules.cluster_uid
            || self
                .labels
                .iter()
                .chain(&self.annotations)
                .any(|r| r.from == From::Namespace)
    }

    pub fn watches_nodes(&self) -> bool {
        self.rules.node_uid
            || self
                .labels
                .iter()
                .chain(&self.annotations)
                .any(|r| r.from == From::Node)
    }
}

/// `extract.metadata` fields of the Collector that profcol lacks, with why.
fn unsupported_metadata(field: &str) -> Option<&'static str> {
    Some(match field {
        "k8s.deployment.uid" | "k8s.cronjob.uid" => {
            "needs a watch of replicasets or jobs, which profcol does not run yet"
        }
        "service.name" | "service.version" | "service.instance.id" => {
            "profcol does not derive service attributes from Kubernetes metadata yet"
        }
        "container.image.repo_digests" => "profcol does not read image digests yet",
        _ => return None,
    })
}

impl K8sAttributesConfig {
    pub fn compile(&self, cfg: &ComponentConfig) -> Result<Plan, ConfigErrors> {
        self.compile_with(cfg, &|name| std::env::var(name).ok())
    }

    pub fn compile_with(
        &self,
        cfg: &ComponentConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let auth = parse_auth(&self.auth_type, &self.context, cfg, "", &mut errs);

        let mut rules = Rules::default();
        for (i, field) in self.extract.metadata.iter().enumerate() {
            let flag = match field.as_str() {
                "k8s.namespace.name" => &mut rules.namespace,
                "k8s.pod.name" => &mut rules.pod_name,
                "k8s.pod.uid" => &mut rules.pod_uid,
                "k8s.pod.hostname" => &mut rules.pod_hostname,
                "k8s.pod.start_time" => &mut rules.start_time,
                "k8s.pod.ip" => &mut rules.pod_ip,
                "k8s.deployment.name" => &mut rules.deployment_name,
                "k8s.replicaset.name" => &mut rules.replicaset_name,
                "k8s.replicaset.uid" => &mut rules.replicaset_uid,
                "k8s.daemonset.name" => &mut rules.daemonset_name,
                "k8s.daemonset.uid" => &mut rules.daemonset_uid,
                "k8s.statefulset.name" => &mut rules.statefulset_name,
                "k8s.statefulset.uid" => &mut rules.statefulset_uid,
                "k8s.job.name" => &mut rules.job_name,
                "k8s.job.uid" => &mut rules.job_uid,
                "k8s.cronjob.name" => &mut rules.cronjob_name,
                "k8s.node.name" => &mut rules.node,
                "k8s.node.uid" => &mut rules.node_uid,
                "k8s.cluster.uid" => &mut rules.cluster_uid,
                "service.namespace" => &mut rules.service_namespace,
                "k8s.container.name" => &mut rules.container_name,
                "container.id" => &mut rules.container_id,
                "container.image.name" => &mut rules.image_name,
                "container.image.tags" => &mut rules.image_tags,
                // The Collector's legacy name, not emitted while its gate
                // DontEmitV0K8sConventions is on (beta, the default).
                "container.image.tag" => continue,
                other => {
                    let why = match unsupported_metadata(other) {
                        Some(why) => format!("{other:?} is not supported by profcol: {why}"),
                        None => format!("{other:?} is not a supported metadata field"),
                    };
                    errs.push(cfg.key_path(&format!("extract::metadata::{i}")), why);
                    continue;
                }
            };
            *flag = true;
        }

        let mut compile_rules = |list: &[FieldExtractConfig], key: &str| {
            let mut out = Vec::new();
            for (i, f) in list.iter().enumerate() {
                let path = cfg.key_path(&format!("extract::{key}::{i}"));
                if !f.key.is_empty() && !f.key_regex.is_empty() {
                    errs.push(
                        path.clone(),
                        format!(
                            "Out of Key or KeyRegex only one option is expected to be configured at a time, currently Key:{} and KeyRegex:{}",
                            f.key, f.key_regex
                        ),
                    );
                    continue;
                }
                let from = match f.from.as_str() {
                    "" | "pod" => From::Pod,
                    "namespace" => From::Namespace,
                    "node" => From::Node,
                    "deployment" | "replicaset" | "statefulset" | "daemonset" | "job"
                    | "cronjob" => {
                        errs.push(
                            format!("{path}::from"),
                            format!(
                                "{:?} is not supported by profcol yet (pod, namespace and node are)",
                                f.from
                            ),
                        );
                        continue;
                    }
                    other => {
                        errs.push(
                            format!("{path}::from"),
                            format!("{other} is not a valid choice for From. Must be one of: pod, namespace, deployment, replicaset, statefulset, daemonset, job, cronjob, node"),
                        );
                        continue;
                    }
                };
                let key_regex = if f.key_regex.is_empty() {
                    None
                } else {
                    match Regex::new(&format!("^(?:{})$", f.key_regex)) {
                        Ok(r) => Some(r),
                        Err(e) => {
                            errs.push(format!("{path}::key_regex"), e.to_string());
                            continue;
                        }
                    }
                };
                out.push(FieldRule {
                    tag_name: f.tag_name.clone(),
                    key: f.key.clone(),
                    expands: key_regex.as_ref().is_some_and(|r| r.captures_len() > 1),
                    key_regex,
                    from,
                });
            }
            out
        };
        let labels = compile_rules(&self.extract.labels, "labels");
        let mut annotations = compile_rules(&self.extract.annotations, "annotations");
        if self.extract.otel_annotations {
            annotations.push(FieldRule {
                tag_name: "$1".into(),
                key: String::new(),
                key_regex: Some(Regex::new(r"^(?:resource\.opentelemetry\.io/(.+))$").unwrap()),
                expands: true,
                from: From::Pod,
            });
        }

        let mut associations = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, a) in self.pod_association.iter().enumerate() {
            let path = cfg.key_path(&format!("pod_association::{i}"));
            if a.sources.len() > MAX_SOURCES {
                errs.push(
                    format!("{path}::sources"),
                    format!("too many association sources. limit is {MAX_SOURCES}"),
                );
                continue;
            }
            let mut sources = Vec::new();
            for (j, s) in a.sources.iter().enumerate() {
                let spath = format!("{path}::sources::{j}");
                match s.from.as_str() {
                    "connection" => sources.push(Source::Connection),
                    "resource_attribute" if !s.name.is_empty() => {
                        sources.push(Source::ResourceAttribute(s.name.clone()))
                    }
                    "sample_attribute" if !s.name.is_empty() => {
                        if s.name == "process.pid" && self.proc_root.is_empty() {
                            errs.push(
                                format!("{spath}::name"),
                                "process.pid needs proc_root: the host's /proc (hostPID), where a process's cgroup names its container",
                            );
                        }
                        sources.push(Source::SampleAttribute(s.name.clone()))
                    }
                    "sample_attribute" => {
                        errs.push(format!("{spath}::name"), "must name a sample attribute")
                    }
                    "resource_attribute" => {
                        errs.push(format!("{spath}::name"), "must name a resource attribute")
                    }
                    other => errs.push(
                        format!("{spath}::from"),
                        format!(
                            "{other:?} is not a valid source; one of connection, resource_attribute, sample_attribute"
                        ),
                    ),
                }
            }
            let per_sample = sources
                .iter()
                .filter(|s| matches!(s, Source::SampleAttribute(_)))
                .count();
            if per_sample > 0 && per_sample < sources.len() {
                errs.push(
                    format!("{path}::sources"),
                    "sample_attribute sources cannot be mixed with others in one association",
                );
                continue;
            }
            let key = format!("{sources:?}");
            if !seen.insert(key.clone()) {
                errs.push(path, format!("duplicate pod association: {key}"));
                continue;
            }
            associations.push(sources);
        }

        let mut exclude = Vec::new();
        for (i, p) in self.exclude.pods.iter().enumerate() {
            match Regex::new(&p.name) {
                Ok(r) => exclude.push(r),
                Err(e) => errs.push(
                    cfg.key_path(&format!("exclude::pods::{i}::name")),
                    e.to_string(),
                ),
            }
        }

        let node = if !self.filter.node_from_env_var.is_empty() {
            match env(&self.filter.node_from_env_var) {
                Some(v) => v,
                None => {
                    errs.push(
                        cfg.key_path("filter::node_from_env_var"),
                        format!(
                            "`node_from_env_var` is configured but envvar {:?} is not set",
                            self.filter.node_from_env_var
                        ),
                    );
                    String::new()
                }
            }
        } else {
            self.filter.node.clone()
        };

        let mut label_parts = Vec::new();
        for (i, f) in self.filter.labels.iter().enumerate() {
            let part = match f.op.as_str() {
                "" | "equals" => format!("{}={}", f.key, f.value),
                "not-equals" => format!("{}!={}", f.key, f.value),
                "exists" => f.key.clone(),
                "does-not-exist" => format!("!{}", f.key),
                other => {
                    errs.push(
                        cfg.key_path(&format!("filter::labels::{i}::op")),
                        format!(
                            "'{other}' is not a valid label filter operation for key={}, value={}",
                            f.key, f.value
                        ),
                    );
                    continue;
                }
            };
            label_parts.push(part);
        }
        let mut field_parts = Vec::new();
        if !node.is_empty() {
            field_parts.push(format!("spec.nodeName={node}"));
        }
        for (i, f) in self.filter.fields.iter().enumerate() {
            let part = match f.op.as_str() {
                "" | "equals" => format!("{}={}", f.key, f.value),
                "not-equals" => format!("{}!={}", f.key, f.value),
                other => {
                    errs.push(
                        cfg.key_path(&format!("filter::fields::{i}::op")),
                        format!(
                            "'{other}' is not a valid label filter operation for key={}, value={}",
                            f.key, f.value
                        ),
                    );
                    continue;
                }
            };
            field_parts.push(part);
        }

        let mut sample_names: Vec<&str> = Vec::new();
        for s in associations.iter().flatten() {
            if let Source::SampleAttribute(n) = s {
                if !sample_names.contains(&n.as_str()) {
                    sample_names.push(n);
                }
            }
        }
        if sample_names.len() > 8 {
            errs.push(
                cfg.key_path("pod_association"),
                "at most 8 distinct sample attributes across the associations",
            );
        }
        let sample_containers = sample_names
            .iter()
            .any(|n| *n == "container.id" || *n == "process.pid");
        errs.into_result(Plan {
            auth,
            passthrough: self.passthrough,
            rules,
            labels,
            annotations,
            associations,
            exclude,
            node,
            namespace: self.filter.namespace.clone(),
            label_selector: label_parts.join(","),
            field_selector: field_parts.join(","),
            wait_for_metadata: self
                .wait_for_metadata
                .then(|| self.wait_for_metadata_timeout.get()),
            delete_grace: self.pod_delete_grace_period.get(),
            proc_root: (!self.proc_root.is_empty()).then(|| self.proc_root.clone().into()),
            sample_containers,
        })
    }
}
