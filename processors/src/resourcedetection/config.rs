//! The `resourcedetection` section, with the Collector's keys
//! (`processor/resourcedetectionprocessor` v0.161.0). profcol has the
//! `env`, `system`, `docker`, `k8s_api` (`k8snode`), `kubeadm`,
//! `openshift`, `consul`, `ec2`, `ecs`, `elastic_beanstalk`, `azure`,
//! `aks`, `azureappservice`, `azurecontainerapps`, `gcp`, `lambda`,
//! `heroku`, `dynatrace`, `akamai`, `nova`, `alibaba_ecs`, `tencent_cvm`,
//! `ibmcloud_classic`, `ibmcloud_vpc`, `digitalocean`, `upcloud`,
//! `hetzner`, `vultr`, `scaleway` and `oraclecloud` detectors; `eks`, the
//! Collector's only other detector, is refused by name where `detectors`
//! lists it, and its settings section is accepted unused when it does not
//! (the Collector's default config carries them all).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, RetrySettings};

/// The processor's `retry` (configretry's `BackOffConfig`), with its own
/// defaults where a key is left out, not the exporters'.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    pub enabled: bool,
    pub initial_interval: Duration,
    pub randomization_factor: f64,
    pub multiplier: f64,
    pub max_interval: Duration,
    /// The whole session's bound when set; else `timeout` is.
    pub max_elapsed_time: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            initial_interval: Duration::from_secs(1),
            randomization_factor: 0.5,
            multiplier: 2.0,
            max_interval: Duration::from_secs(30),
            max_elapsed_time: Duration::from_secs(0),
        }
    }
}

impl RetryConfig {
    fn settings(&self) -> RetrySettings {
        RetrySettings {
            enabled: self.enabled,
            initial_interval: self.initial_interval,
            randomization_factor: self.randomization_factor,
            multiplier: self.multiplier,
            max_interval: self.max_interval,
            max_elapsed_time: self.max_elapsed_time,
        }
    }
}

use crate::k8sattributes::client::{parse_auth, Auth};
use crate::transform::config_any::Any;

/// A detector's `resource_attributes` toggles over its attributes (each
/// with its default): which are enabled; another name is an error at its
/// key.
fn toggles<const N: usize>(
    cfg: &ComponentConfig,
    detector: &str,
    set: &BTreeMap<String, AttributeToggle>,
    names: &[(&str, bool); N],
    errs: &mut ConfigErrors,
) -> [bool; N] {
    for name in set.keys().filter(|n| !names.iter().any(|(k, _)| k == n)) {
        errs.push(
            cfg.key_path(&format!("{detector}::resource_attributes::{name}")),
            format!("unknown attribute {name:?} of the {detector} detector"),
        );
    }
    names.map(|(n, on)| set.get(n).map_or(on, |t| t.enabled))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceDetectionConfig {
    pub detectors: Vec<String>,
    /// Whether detected attributes replace a resource's own.
    pub r#override: bool,
    pub timeout: Duration,
    pub refresh_interval: Duration,
    pub fail_on_missing_metadata: bool,
    /// Each detector's retries.
    pub retry: RetryConfig,
    pub env: Option<Any>,
    pub system: SystemConfig,
    // The detectors' sections (`eks`'s accepted unused).
    pub alibaba_ecs: FailFlagConfig,
    pub akamai: AttributesConfig,
    pub aks: AttributesConfig,
    pub azure: AzureConfig,
    pub azureappservice: AttributesConfig,
    pub azurecontainerapps: AttributesConfig,
    pub consul: ConsulConfig,
    pub digitalocean: AttributesConfig,
    pub docker: AttributesConfig,
    pub ec2: Ec2Config,
    pub ecs: AttributesConfig,
    pub eks: Option<Any>,
    pub elasticbeanstalk: AttributesConfig,
    pub gcp: GcpConfig,
    pub heroku: AttributesConfig,
    pub hetzner: AttributesConfig,
    pub ibmcloud_classic: AttributesConfig,
    pub ibmcloud_vpc: IbmCloudVpcConfig,
    pub k8s_api: K8sNodeConfig,
    pub k8snode: K8sNodeConfig,
    pub kubeadm: KubeadmConfig,
    pub lambda: AttributesConfig,
    pub nova: NovaConfig,
    pub openshift: OpenShiftConfig,
    pub oraclecloud: AttributesConfig,
    pub scaleway: AttributesConfig,
    pub tencent_cvm: FailFlagConfig,
    pub upcloud: FailFlagConfig,
    pub vultr: FailFlagConfig,
}

impl Default for ResourceDetectionConfig {
    fn default() -> Self {
        Self {
            detectors: Vec::new(),
            r#override: true,
            timeout: Duration::from_secs(5),
            refresh_interval: Duration::from_secs(0),
            fail_on_missing_metadata: false,
            retry: RetryConfig::default(),
            env: None,
            system: SystemConfig::default(),
            alibaba_ecs: FailFlagConfig::default(),
            akamai: AttributesConfig::default(),
            aks: AttributesConfig::default(),
            azure: AzureConfig::default(),
            azureappservice: AttributesConfig::default(),
            azurecontainerapps: AttributesConfig::default(),
            consul: ConsulConfig::default(),
            digitalocean: AttributesConfig::default(),
            docker: AttributesConfig::default(),
            ec2: Ec2Config::default(),
            ecs: AttributesConfig::default(),
            eks: None,
            elasticbeanstalk: AttributesConfig::default(),
            gcp: GcpConfig::default(),
            heroku: AttributesConfig::default(),
            hetzner: AttributesConfig::default(),
            ibmcloud_classic: AttributesConfig::default(),
            ibmcloud_vpc: IbmCloudVpcConfig::default(),
            k8s_api: K8sNodeConfig::default(),
            k8snode: K8sNodeConfig::default(),
            kubeadm: KubeadmConfig::default(),
            lambda: AttributesConfig::default(),
            nova: NovaConfig::default(),
            openshift: OpenShiftConfig::default(),
            oraclecloud: AttributesConfig::default(),
            scaleway: AttributesConfig::default(),
            tencent_cvm: FailFlagConfig::default(),
            upcloud: FailFlagConfig::default(),
            vultr: FailFlagConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemConfig {
    /// Default `[dns, os]`.
    pub hostname_sources: Option<Vec<String>>,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttributeToggle {
    pub enabled: bool,
}

/// The section of a detector that has only its attributes' toggles
/// (`docker`, `ecs`, `aks`, `lambda`, `heroku`, `akamai`,
/// `ibmcloud_classic`, `digitalocean`, `hetzner`, `scaleway`,
/// `oraclecloud`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttributesConfig {
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

/// The section of a detector with its attributes' toggles and its own,
/// deprecated, `fail_on_missing_metadata` (`alibaba_ecs`, `tencent_cvm`,
/// `upcloud`, `vultr`), which the Collector ORs with the top-level one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FailFlagConfig {
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
    pub fail_on_missing_metadata: bool,
}

/// The `nova` (OpenStack) detector's section.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NovaConfig {
    /// Regular expressions over the instance's `meta` keys:
    /// `openstack.nova.meta.<key>`.
    pub labels: Vec<String>,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
    pub fail_on_missing_metadata: bool,
}

/// The `ibmcloud_vpc` detector's section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IbmCloudVpcConfig {
    /// How the metadata service is reached: `http` (default) or `https`.
    pub protocol: String,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

impl Default for IbmCloudVpcConfig {
    fn default() -> Self {
        Self {
            protocol: "http".into(),
            resource_attributes: BTreeMap::new(),
        }
    }
}

/// A metadata-service detector's attributes enabled (its `ATTRIBUTES`)
/// and whether missing metadata fails it.
#[derive(Debug, Clone)]
pub struct MetadataPlan<const N: usize> {
    pub attributes: [bool; N],
    pub fail_on_missing_metadata: bool,
}

#[derive(Debug, Clone)]
pub struct NovaPlan {
    /// `nova::ATTRIBUTES` enabled.
    pub attributes: [bool; 7],
    pub labels: Vec<regex::Regex>,
    pub fail_on_missing_metadata: bool,
}

#[derive(Debug, Clone)]
pub struct IbmCloudVpcPlan {
    /// `ibmcloud_vpc::ATTRIBUTES` enabled.
    pub attributes: [bool; 11],
    /// `http` or `https`.
    pub protocol: &'static str,
    pub fail_on_missing_metadata: bool,
}

/// The `k8snode` detector's section: the Collector's `k8sconfig.APIConfig`
/// keys and the variable naming this node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct K8sNodeConfig {
    pub auth_type: String,
    pub context: String,
    /// client-go's rate limits; one GET needs none: accepted, unused.
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    /// Empty: `K8S_NODE_NAME`.
    pub node_from_env_var: String,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

impl Default for K8sNodeConfig {
    fn default() -> Self {
        Self {
            auth_type: "serviceAccount".into(),
            context: String::new(),
            kube_api_qps: 0.0,
            kube_api_burst: 0,
            node_from_env_var: String::new(),
            resource_attributes: BTreeMap::new(),
        }
    }
}

/// The `ec2` detector's section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ec2Config {
    /// Regular expressions over tag keys: the tags to add, `ec2.tag.<key>`.
    pub tags: Vec<String>,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
    pub max_attempts: u32,
    pub max_backoff: Duration,
    pub fail_on_missing_metadata: bool,
    pub tags_from_imds: bool,
}

impl Default for Ec2Config {
    fn default() -> Self {
        Self {
            tags: Vec::new(),
            resource_attributes: BTreeMap::new(),
            // The AWS SDK's standard retryer's.
            max_attempts: 3,
            max_backoff: Duration::from_secs(20),
            fail_on_missing_metadata: false,
            tags_from_imds: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Ec2Plan {
    /// `ec2::ATTRIBUTES` enabled.
    pub attributes: [bool; 9],
    pub tags: Vec<regex::Regex>,
    pub max_attempts: u32,
    pub max_backoff: std::time::Duration,
    pub fail_on_missing_metadata: bool,
}

/// The `azure` detector's section.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AzureConfig {
    /// Regular expressions over the VM's tag names: `azure.tag.<name>`.
    pub tags: Vec<String>,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

#[derive(Debug, Clone)]
pub struct AzurePlan {
    /// `azure::ATTRIBUTES` enabled.
    pub attributes: [bool; 11],
    pub tags: Vec<regex::Regex>,
    pub fail_on_missing_metadata: bool,
}

/// The `gcp` detector's section.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GcpConfig {
    /// Regular expressions over the GCE instance's label keys: refused,
    /// they take a Compute API call.
    pub labels: Vec<String>,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

#[derive(Debug, Clone)]
pub struct GcpPlan {
    /// `gcp::ATTRIBUTES` enabled.
    pub attributes: [bool; 19],
    pub fail_on_missing_metadata: bool,
}

/// The detectors of the Collector v0.161.0 profcol does not have.
const OTHER_DETECTORS: &[&str] = &["eks"];

/// The system detector's attributes: those profcol detects, with the
/// Collector's default, and those it does not.
pub(super) const SYSTEM_DETECTED: [(&str, bool); 4] = [
    ("host.name", true),
    ("os.type", true),
    ("host.arch", false),
    ("host.id", false),
];
const SYSTEM_NOT_DETECTED: &[&str] = &[
    "host.cpu.cache.l2.size",
    "host.cpu.family",
    "host.cpu.model.id",
    "host.cpu.model.name",
    "host.cpu.stepping",
    "host.cpu.vendor.id",
    "host.interface",
    "host.ip",
    "host.mac",
    "os.build.id",
    "os.description",
    "os.name",
    "os.version",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detector {
    Env,
    System,
    Docker,
    K8sNode,
    Ec2,
    Ecs,
    Azure,
    Aks,
    Gcp,
    Lambda,
    Heroku,
    ElasticBeanstalk,
    Dynatrace,
    AppService,
    ContainerApps,
    K8sApi,
    Kubeadm,
    OpenShift,
    Consul,
    Akamai,
    Nova,
    AlibabaEcs,
    TencentCvm,
    IbmCloudClassic,
    IbmCloudVpc,
    DigitalOcean,
    UpCloud,
    Hetzner,
    Vultr,
    Scaleway,
    OracleCloud,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostnameSource {
    Dns,
    Os,
    Cname,
    Lookup,
}

/// A checked config: the detectors in order and what `system` reports.
#[derive(Debug, Clone)]
pub struct Plan {
    pub detectors: Vec<Detector>,
    pub hostname_sources: Vec<HostnameSource>,
    /// `SYSTEM_DETECTED` names that are enabled.
    pub system_attributes: Vec<&'static str>,
    pub override_existing: bool,
    /// How long detection may take, retries included; with
    /// `retry.max_elapsed_time`, how long one attempt may take.
    pub timeout: std::time::Duration,
    pub retry: RetrySettings,
    pub fail_on_missing_metadata: bool,
    /// `host.name` and `os.type` enabled.
    pub docker: [bool; 2],
    pub k8snode: K8sNodePlan,
    pub ec2: Ec2Plan,
    /// `ecs::ATTRIBUTES` enabled.
    pub ecs: [bool; 15],
    pub azure: AzurePlan,
    /// `aks::ATTRIBUTES` enabled.
    pub aks: [bool; 3],
    pub gcp: GcpPlan,
    /// `lambda::ATTRIBUTES` enabled.
    pub lambda: [bool; 9],
    /// `heroku::ATTRIBUTES` enabled.
    pub heroku: [bool; 8],
    /// `elasticbeanstalk::ATTRIBUTES` enabled.
    pub elasticbeanstalk: [bool; 7],
    /// `appservice::ATTRIBUTES` enabled.
    pub appservice: [bool; 9],
    /// `containerapps::ATTRIBUTES` enabled.
    pub containerapps: [bool; 4],
    /// The `k8s_api` section's.
    pub k8s_api: K8sNodePlan,
    pub kubeadm: KubeadmPlan,
    pub openshift: OpenShiftPlan,
    pub consul: ConsulPlan,
    pub akamai: MetadataPlan<9>,
    pub nova: NovaPlan,
    pub alibaba_ecs: MetadataPlan<9>,
    pub tencent_cvm: MetadataPlan<9>,
    pub ibmcloud_classic: MetadataPlan<7>,
    pub ibmcloud_vpc: IbmCloudVpcPlan,
    /// `digitalocean::ATTRIBUTES` enabled.
    pub digitalocean: [bool; 4],
    pub upcloud: MetadataPlan<4>,
    /// `hetzner::ATTRIBUTES` enabled.
    pub hetzner: [bool; 6],
    pub vultr: MetadataPlan<5>,
    /// `scaleway::ATTRIBUTES` enabled.
    pub scaleway: [bool; 10],
    /// `oraclecloud::ATTRIBUTES` enabled.
    pub oraclecloud: [bool; 10],
}

#[derive(Debug, Clone)]
pub struct K8sNodePlan {
    pub auth: Auth,
    pub node_from_env_var: String,
    /// `k8sapi::ATTRIBUTES` enabled.
    pub attributes: [bool; 3],
    pub fail_on_missing_metadata: bool,
}

/// The `kubeadm` detector's section: the Collector's `k8sconfig.APIConfig`
/// keys and the attributes' toggles.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubeadmConfig {
    pub auth_type: String,
    pub context: String,
    /// client-go's rate limits; two GETs need none: accepted, unused.
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

impl Default for KubeadmConfig {
    fn default() -> Self {
        Self {
            auth_type: "serviceAccount".into(),
            context: String::new(),
            kube_api_qps: 0.0,
            kube_api_burst: 0,
            resource_attributes: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct KubeadmPlan {
    pub auth: Auth,
    /// `kubeadm::ATTRIBUTES` enabled.
    pub attributes: [bool; 2],
    pub fail_on_missing_metadata: bool,
}

/// The `openshift` detector's section.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenShiftConfig {
    /// Empty: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`.
    pub address: String,
    /// Empty: the service account's token file.
    pub token: String,
    pub tls: TlsClientConfig,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

/// The Collector's `configtls.ClientConfig` keys profcol honours; any
/// other is refused at its key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TlsClientConfig {
    pub ca_file: String,
    pub ca_pem: String,
    pub insecure: bool,
    pub insecure_skip_verify: bool,
    #[serde(flatten)]
    pub other: BTreeMap<String, Any>,
}

#[derive(Debug, Clone)]
pub struct OpenShiftPlan {
    pub address: String,
    pub token: String,
    pub ca_file: String,
    pub ca_pem: String,
    pub insecure: bool,
    pub insecure_skip_verify: bool,
    /// `openshift::ATTRIBUTES` enabled.
    pub attributes: [bool; 4],
    pub fail_on_missing_metadata: bool,
}

/// The `consul` detector's section: the Consul client's settings (its
/// `CONSUL_*` variables fill what is not set) and the node metadata keys
/// to add.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsulConfig {
    pub address: String,
    pub datacenter: String,
    pub token: String,
    pub token_file: String,
    pub namespace: String,
    /// The node metadata keys to add; the values are not read.
    pub meta: BTreeMap<String, Any>,
    pub resource_attributes: BTreeMap<String, AttributeToggle>,
}

#[derive(Debug, Clone)]
pub struct ConsulPlan {
    pub address: String,
    pub datacenter: String,
    pub token: String,
    pub token_file: String,
    pub namespace: String,
    pub meta: Vec<String>,
    /// `consul::ATTRIBUTES` enabled.
    pub attributes: [bool; 3],
    pub fail_on_missing_metadata: bool,
}

impl Plan {
    /// Whether `detector` failing fails the start: the top-level
    /// `fail_on_missing_metadata`, or the detector's own (deprecated) one,
    /// as the Collector ORs them.
    pub fn fails_on_missing_metadata(&self, detector: Detector) -> bool {
        self.fail_on_missing_metadata
            || match detector {
                Detector::Ec2 => self.ec2.fail_on_missing_metadata,
                Detector::Nova => self.nova.fail_on_missing_metadata,
                Detector::AlibabaEcs => self.alibaba_ecs.fail_on_missing_metadata,
                Detector::TencentCvm => self.tencent_cvm.fail_on_missing_metadata,
                Detector::UpCloud => self.upcloud.fail_on_missing_metadata,
                Detector::Vultr => self.vultr.fail_on_missing_metadata,
                _ => false,
            }
    }
}

impl ResourceDetectionConfig {
    pub fn compile(&self, cfg: &ComponentConfig) -> Result<Plan, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let mut detectors = Vec::new();
        for (i, d) in self.detectors.iter().enumerate() {
            let at = cfg.key_path(&format!("detectors::{i}"));
            match d.as_str() {
                "env" => detectors.push(Detector::Env),
                "system" => detectors.push(Detector::System),
                "docker" => detectors.push(Detector::Docker),
                "k8snode" => detectors.push(Detector::K8sNode),
                "ec2" => detectors.push(Detector::Ec2),
                "ecs" => detectors.push(Detector::Ecs),
                "azure" => detectors.push(Detector::Azure),
                "aks" => detectors.push(Detector::Aks),
                "gcp" => detectors.push(Detector::Gcp),
                "lambda" => detectors.push(Detector::Lambda),
                "heroku" => detectors.push(Detector::Heroku),
                "elastic_beanstalk" => detectors.push(Detector::ElasticBeanstalk),
                "dynatrace" => detectors.push(Detector::Dynatrace),
                "azureappservice" => detectors.push(Detector::AppService),
                "azurecontainerapps" => detectors.push(Detector::ContainerApps),
                "k8s_api" => detectors.push(Detector::K8sApi),
                "kubeadm" => detectors.push(Detector::Kubeadm),
                "openshift" => detectors.push(Detector::OpenShift),
                "consul" => detectors.push(Detector::Consul),
                "akamai" => detectors.push(Detector::Akamai),
                "nova" => detectors.push(Detector::Nova),
                "alibaba_ecs" => detectors.push(Detector::AlibabaEcs),
                "tencent_cvm" => detectors.push(Detector::TencentCvm),
                "ibmcloud_classic" => detectors.push(Detector::IbmCloudClassic),
                "ibmcloud_vpc" => detectors.push(Detector::IbmCloudVpc),
                "digitalocean" => detectors.push(Detector::DigitalOcean),
                "upcloud" => detectors.push(Detector::UpCloud),
                "hetzner" => detectors.push(Detector::Hetzner),
                "vultr" => detectors.push(Detector::Vultr),
                "scaleway" => detectors.push(Detector::Scaleway),
                "oraclecloud" => detectors.push(Detector::OracleCloud),
                other if OTHER_DETECTORS.contains(&other) => errs.push(
                    at,
                    format!("profcol has no {other} detector: it queries a cloud or orchestrator API profcol does not call; \
                             set the attributes through OTEL_RESOURCE_ATTRIBUTES (detector env) or the resource processor"),
                ),
                other => errs.push(at, format!("invalid detector key: {other:?}")),
            }
        }
        let retry = self.retry.settings();
        retry.validate(&cfg.key_path("retry"), &mut errs);
        if self.retry.enabled
            && self.timeout.get().is_zero()
            && self.retry.max_elapsed_time.get().is_zero()
        {
            errs.push(
                cfg.key_path("retry::enabled"),
                "retry.enabled requires either timeout > 0 or retry.max_elapsed_time > 0 to bound detection",
            );
        }
        if self.refresh_interval.get() > std::time::Duration::ZERO {
            errs.push(
                cfg.key_path("refresh_interval"),
                "refused: profcol detects once, when the pipeline starts",
            );
        }
        let sources = self
            .system
            .hostname_sources
            .clone()
            .unwrap_or_else(|| vec!["dns".into(), "os".into()]);
        let mut hostname_sources = Vec::new();
        for (i, s) in sources.iter().enumerate() {
            let at = cfg.key_path(&format!("system::hostname_sources::{i}"));
            match s.as_str() {
                "dns" => hostname_sources.push(HostnameSource::Dns),
                "os" => hostname_sources.push(HostnameSource::Os),
                "cname" => hostname_sources.push(HostnameSource::Cname),
                "lookup" => hostname_sources.push(HostnameSource::Lookup),
                other => errs.push(
                    at,
                    format!("hostname_sources contains invalid value: {other:?}"),
                ),
            }
        }
        let mut system_attributes: Vec<&'static str> = SYSTEM_DETECTED
            .iter()
            .filter(|(name, on)| {
                self.system
                    .resource_attributes
                    .get(*name)
                    .map_or(*on, |t| t.enabled)
            })
            .map(|(name, _)| *name)
            .collect();
        for (name, t) in &self.system.resource_attributes {
            let at = cfg.key_path(&format!("system::resource_attributes::{name}"));
            if SYSTEM_DETECTED.iter().any(|(n, _)| n == name) {
                continue;
            }
            if SYSTEM_NOT_DETECTED.contains(&name.as_str()) {
                if t.enabled {
                    errs.push(
                        at,
                        format!("profcol's system detector does not detect {name}"),
                    );
                }
            } else {
                errs.push(
                    at,
                    format!("unknown attribute {name:?} of the system detector"),
                );
            }
        }
        system_attributes.dedup();
        let docker = toggles(
            cfg,
            "docker",
            &self.docker.resource_attributes,
            &[("host.name", true), ("os.type", true)],
            &mut errs,
        );
        // As the Collector: a section is read when its detector is made.
        let fail = self.fail_on_missing_metadata;
        let mut unused = ConfigErrors::default();
        let on = |d: Detector| detectors.contains(&d);
        let k8snode = self.k8snode.compile(
            cfg,
            "k8snode",
            fail,
            section(on(Detector::K8sNode), &mut errs, &mut unused),
        );
        let k8s_api = self.k8s_api.compile(
            cfg,
            "k8s_api",
            fail,
            section(on(Detector::K8sApi), &mut errs, &mut unused),
        );
        let kubeadm = self.kubeadm.compile(
            cfg,
            fail,
            section(on(Detector::Kubeadm), &mut errs, &mut unused),
        );
        let openshift = self.openshift.compile(
            cfg,
            fail,
            section(on(Detector::OpenShift), &mut errs, &mut unused),
        );
        let consul = self.consul.compile(
            cfg,
            fail,
            section(on(Detector::Consul), &mut errs, &mut unused),
        );
        let elasticbeanstalk = toggles(
            cfg,
            "elasticbeanstalk",
            &self.elasticbeanstalk.resource_attributes,
            &super::elasticbeanstalk::ATTRIBUTES,
            section(on(Detector::ElasticBeanstalk), &mut errs, &mut unused),
        );
        let appservice = toggles(
            cfg,
            "azureappservice",
            &self.azureappservice.resource_attributes,
            &super::appservice::ATTRIBUTES,
            section(on(Detector::AppService), &mut errs, &mut unused),
        );
        let containerapps = toggles(
            cfg,
            "azurecontainerapps",
            &self.azurecontainerapps.resource_attributes,
            &super::containerapps::ATTRIBUTES,
            section(on(Detector::ContainerApps), &mut errs, &mut unused),
        );
        let ec2 = self.ec2.compile(
            cfg,
            fail,
            section(on(Detector::Ec2), &mut errs, &mut unused),
        );
        let ecs = toggles(
            cfg,
            "ecs",
            &self.ecs.resource_attributes,
            &super::ecs::ATTRIBUTES,
            section(on(Detector::Ecs), &mut errs, &mut unused),
        );
        let azure = self.azure.compile(
            cfg,
            fail,
            section(on(Detector::Azure), &mut errs, &mut unused),
        );
        let aks = toggles(
            cfg,
            "aks",
            &self.aks.resource_attributes,
            &super::aks::ATTRIBUTES,
            section(on(Detector::Aks), &mut errs, &mut unused),
        );
        let lambda = toggles(
            cfg,
            "lambda",
            &self.lambda.resource_attributes,
            &super::lambda::ATTRIBUTES,
            section(on(Detector::Lambda), &mut errs, &mut unused),
        );
        let heroku = toggles(
            cfg,
            "heroku",
            &self.heroku.resource_attributes,
            &super::heroku::ATTRIBUTES,
            section(on(Detector::Heroku), &mut errs, &mut unused),
        );
        let gcp = self.gcp.compile(
            cfg,
            fail,
            section(on(Detector::Gcp), &mut errs, &mut unused),
        );
        let akamai = MetadataPlan {
            attributes: toggles(
                cfg,
                "akamai",
                &self.akamai.resource_attributes,
                &super::akamai::ATTRIBUTES,
                section(on(Detector::Akamai), &mut errs, &mut unused),
            ),
            fail_on_missing_metadata: fail,
        };
        let nova = self.nova.compile(
            cfg,
            fail,
            section(on(Detector::Nova), &mut errs, &mut unused),
        );
        let alibaba_ecs = self.alibaba_ecs.compile(
            cfg,
            "alibaba_ecs",
            &super::alibaba_ecs::ATTRIBUTES,
            fail,
            section(on(Detector::AlibabaEcs), &mut errs, &mut unused),
        );
        let tencent_cvm = self.tencent_cvm.compile(
            cfg,
            "tencent_cvm",
            &super::tencent_cvm::ATTRIBUTES,
            fail,
            section(on(Detector::TencentCvm), &mut errs, &mut unused),
        );
        let ibmcloud_classic = MetadataPlan {
            attributes: toggles(
                cfg,
                "ibmcloud_classic",
                &self.ibmcloud_classic.resource_attributes,
                &super::ibmcloud_classic::ATTRIBUTES,
                section(on(Detector::IbmCloudClassic), &mut errs, &mut unused),
            ),
            fail_on_missing_metadata: fail,
        };
        let ibmcloud_vpc = self.ibmcloud_vpc.compile(
            cfg,
            fail,
            section(on(Detector::IbmCloudVpc), &mut errs, &mut unused),
        );
        let digitalocean = toggles(
            cfg,
            "digitalocean",
            &self.digitalocean.resource_attributes,
            &super::digitalocean::ATTRIBUTES,
            section(on(Detector::DigitalOcean), &mut errs, &mut unused),
        );
        let upcloud = self.upcloud.compile(
            cfg,
            "upcloud",
            &super::upcloud::ATTRIBUTES,
            fail,
            section(on(Detector::UpCloud), &mut errs, &mut unused),
        );
        let hetzner = toggles(
            cfg,
            "hetzner",
            &self.hetzner.resource_attributes,
            &super::hetzner::ATTRIBUTES,
            section(on(Detector::Hetzner), &mut errs, &mut unused),
        );
        let vultr = self.vultr.compile(
            cfg,
            "vultr",
            &super::vultr::ATTRIBUTES,
            fail,
            section(on(Detector::Vultr), &mut errs, &mut unused),
        );
        let scaleway = toggles(
            cfg,
            "scaleway",
            &self.scaleway.resource_attributes,
            &super::scaleway::ATTRIBUTES,
            section(on(Detector::Scaleway), &mut errs, &mut unused),
        );
        let oraclecloud = toggles(
            cfg,
            "oraclecloud",
            &self.oraclecloud.resource_attributes,
            &super::oraclecloud::ATTRIBUTES,
            section(on(Detector::OracleCloud), &mut errs, &mut unused),
        );
        errs.into_result(Plan {
            detectors,
            hostname_sources,
            system_attributes,
            override_existing: self.r#override,
            timeout: self.timeout.get(),
            retry,
            fail_on_missing_metadata: self.fail_on_missing_metadata,
            docker,
            k8snode,
            ec2,
            ecs,
            azure,
            aks,
            gcp,
            lambda,
            heroku,
            elasticbeanstalk,
            appservice,
            containerapps,
            k8s_api,
            kubeadm,
            openshift,
            consul,
            akamai,
            nova,
            alibaba_ecs,
            tencent_cvm,
            ibmcloud_classic,
            ibmcloud_vpc,
            digitalocean,
            upcloud,
            hetzner,
            vultr,
            scaleway,
            oraclecloud,
        })
    }
}

impl K8sNodeConfig {
    /// The `k8s_api` section, or `k8snode` (its deprecated alias's).
    fn compile(
        &self,
        cfg: &ComponentConfig,
        key: &str,
        fail: bool,
        errs: &mut ConfigErrors,
    ) -> K8sNodePlan {
        K8sNodePlan {
            auth: parse_auth(
                &self.auth_type,
                &self.context,
                cfg,
                &format!("{key}::"),
                errs,
            ),
            node_from_env_var: if self.node_from_env_var.is_empty() {
                "K8S_NODE_NAME".into()
            } else {
                self.node_from_env_var.clone()
            },
            attributes: toggles(
                cfg,
                key,
                &self.resource_attributes,
                &super::k8sapi::ATTRIBUTES,
                errs,
            ),
            fail_on_missing_metadata: fail,
        }
    }
}

impl KubeadmConfig {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> KubeadmPlan {
        KubeadmPlan {
            auth: parse_auth(&self.auth_type, &self.context, cfg, "kubeadm::", errs),
            attributes: toggles(
                cfg,
                "kubeadm",
                &self.resource_attributes,
                &super::kubeadm::ATTRIBUTES,
                errs,
            ),
            fail_on_missing_metadata: fail,
        }
    }
}

impl OpenShiftConfig {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> OpenShiftPlan {
        for key in self.tls.other.keys() {
            errs.push(
                cfg.key_path(&format!("openshift::tls::{key}")),
                "not supported by profcol's openshift detector (it honours tls::ca_file, \
                 tls::ca_pem, tls::insecure and tls::insecure_skip_verify)",
            );
        }
        let t = &self.tls;
        if !t.ca_file.is_empty() && !t.ca_pem.is_empty() {
            errs.push(
                cfg.key_path("openshift::tls"),
                "provide either a CA file or the PEM-encoded string, but not both",
            );
        }
        OpenShiftPlan {
            address: self.address.clone(),
            token: self.token.clone(),
            ca_file: t.ca_file.clone(),
            ca_pem: t.ca_pem.clone(),
            insecure: t.insecure,
            insecure_skip_verify: t.insecure_skip_verify,
            attributes: toggles(
                cfg,
                "openshift",
                &self.resource_attributes,
                &super::openshift::ATTRIBUTES,
                errs,
            ),
            fail_on_missing_metadata: fail,
        }
    }
}

impl ConsulConfig {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> ConsulPlan {
        ConsulPlan {
            address: self.address.clone(),
            datacenter: self.datacenter.clone(),
            token: self.token.clone(),
            token_file: self.token_file.clone(),
            namespace: self.namespace.clone(),
            meta: self.meta.keys().cloned().collect(),
            attributes: toggles(
                cfg,
                "consul",
                &self.resource_attributes,
                &super::consul::ATTRIBUTES,
                errs,
            ),
            fail_on_missing_metadata: fail,
        }
    }
}

impl Ec2Config {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> Ec2Plan {
        // All on by default.
        let names = super::ec2::ATTRIBUTES.map(|n| (n, true));
        let attributes = toggles(cfg, "ec2", &self.resource_attributes, &names, errs);
        let tags = tag_regexes(cfg, "ec2", &self.tags, errs);
        if !self.tags.is_empty() && !self.tags_from_imds {
            errs.push(
                cfg.key_path("ec2::tags"),
                "profcol reads instance tags from the instance metadata only: set \
                 ec2::tags_from_imds: true (and allow tags in the instance's metadata options); \
                 it does not call the EC2 DescribeTags API",
            );
        }
        if self.fail_on_missing_metadata {
            tracing::warn!("per-detector fail_on_missing_metadata fields are deprecated; use the top-level fail_on_missing_metadata instead");
        }
        if self.max_attempts == 0 {
            errs.push(cfg.key_path("ec2::max_attempts"), "must be at least 1");
        }
        Ec2Plan {
            attributes,
            tags,
            max_attempts: self.max_attempts.max(1),
            max_backoff: self.max_backoff.get(),
            fail_on_missing_metadata: fail || self.fail_on_missing_metadata,
        }
    }
}

/// Where a detector section's errors go: nowhere unless the detector is
/// listed (the Collector reads a section when it makes its detector).
fn section<'a>(
    listed: bool,
    errs: &'a mut ConfigErrors,
    unused: &'a mut ConfigErrors,
) -> &'a mut ConfigErrors {
    if listed {
        errs
    } else {
        unused
    }
}

/// A detector's `tags`: regular expressions, each an error at its key.
fn tag_regexes(
    cfg: &ComponentConfig,
    detector: &str,
    tags: &[String],
    errs: &mut ConfigErrors,
) -> Vec<regex::Regex> {
    regexes(cfg, &format!("{detector}::tags"), tags, errs)
}

/// The regular expressions of the list at `key`, each an error at its
/// index.
fn regexes(
    cfg: &ComponentConfig,
    key: &str,
    patterns: &[String],
    errs: &mut ConfigErrors,
) -> Vec<regex::Regex> {
    let mut out = Vec::new();
    for (i, t) in patterns.iter().enumerate() {
        match regex::Regex::new(t) {
            Ok(r) => out.push(r),
            Err(e) => errs.push(cfg.key_path(&format!("{key}::{i}")), e.to_string()),
        }
    }
    out
}

/// The Collector warns of a per-detector `fail_on_missing_metadata`
/// wherever it is set.
fn warn_deprecated_fail_flag(detector: &str, set: bool) {
    if set {
        tracing::warn!(
            affected_detectors = detector,
            "per-detector fail_on_missing_metadata fields are deprecated; use the top-level fail_on_missing_metadata instead"
        );
    }
}

impl FailFlagConfig {
    fn compile<const N: usize>(
        &self,
        cfg: &ComponentConfig,
        detector: &str,
        names: &[(&str, bool); N],
        fail: bool,
        errs: &mut ConfigErrors,
    ) -> MetadataPlan<N> {
        warn_deprecated_fail_flag(detector, self.fail_on_missing_metadata);
        MetadataPlan {
            attributes: toggles(cfg, detector, &self.resource_attributes, names, errs),
            fail_on_missing_metadata: fail || self.fail_on_missing_metadata,
        }
    }
}

impl NovaConfig {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> NovaPlan {
        warn_deprecated_fail_flag("nova", self.fail_on_missing_metadata);
        let set = &self.resource_attributes;
        NovaPlan {
            attributes: toggles(cfg, "nova", set, &super::nova::ATTRIBUTES, errs),
            labels: regexes(cfg, "nova::labels", &self.labels, errs),
            fail_on_missing_metadata: fail || self.fail_on_missing_metadata,
        }
    }
}

impl IbmCloudVpcConfig {
    fn compile(
        &self,
        cfg: &ComponentConfig,
        fail: bool,
        errs: &mut ConfigErrors,
    ) -> IbmCloudVpcPlan {
        let set = &self.resource_attributes;
        let attributes = toggles(
            cfg,
            "ibmcloud_vpc",
            set,
            &super::ibmcloud_vpc::ATTRIBUTES,
            errs,
        );
        let protocol = match self.protocol.as_str() {
            "http" => "http",
            "https" => "https",
            other => {
                errs.push(
                    cfg.key_path("ibmcloud_vpc::protocol"),
                    format!("invalid protocol {other:?}: must be \"http\" or \"https\""),
                );
                "http"
            }
        };
        IbmCloudVpcPlan {
            attributes,
            protocol,
            fail_on_missing_metadata: fail,
        }
    }
}

impl AzureConfig {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> AzurePlan {
        let set = &self.resource_attributes;
        AzurePlan {
            attributes: toggles(cfg, "azure", set, &super::azure::ATTRIBUTES, errs),
            tags: tag_regexes(cfg, "azure", &self.tags, errs),
            fail_on_missing_metadata: fail,
        }
    }
}

impl GcpConfig {
    fn compile(&self, cfg: &ComponentConfig, fail: bool, errs: &mut ConfigErrors) -> GcpPlan {
        let set = &self.resource_attributes;
        let attributes = toggles(cfg, "gcp", set, &super::gcp::ATTRIBUTES, errs);
        if !self.labels.is_empty() {
            errs.push(
                cfg.key_path("gcp::labels"),
                "profcol does not read GCE instance labels: they come from the Compute Engine \
                 API (instances.get, with the instance's credentials), which profcol does not call; \
                 the metadata server has no labels. Set them through OTEL_RESOURCE_ATTRIBUTES \
                 (detector env) or the resource processor",
            );
        }
        GcpPlan {
            attributes,
            fail_on_missing_metadata: fail,
        }
    }
}
