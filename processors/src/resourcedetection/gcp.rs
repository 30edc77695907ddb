//! The `gcp` detector (the Collector's `internal/gcp`, over Google's
//! `detectors/gcp` v1.37.0 and `cloud.google.com/go/compute/metadata`):
//! the platform from the environment variables each Google Cloud runtime
//! sets and from the metadata server, then its attributes, in the order
//! the Collector sets them. Platforms: Bare Metal Solution (variables
//! only), GKE, Cloud Functions, Cloud Run services, jobs and worker pools,
//! App Engine standard and flexible, GCE (managed instance group
//! included). Off Google Cloud (no `GCE_METADATA_HOST`, no metadata server
//! answering) it finds nothing, whatever `fail_on_missing_metadata`, as the
//! Collector's. It makes no Compute API call: GCE `labels` are refused in
//! the config, and `host.type` on GKE (that call, fallible in the
//! Collector) is never set.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use profcol_model::proto::KeyValue;

use super::config::GcpPlan;
use super::detect::{string_kv, Host};
use super::http::request_with_headers;

/// The attributes and whether each is on by default (the Collector's
/// `metadata.yaml`); the order each platform sets them is in `detect`.
pub(super) const ATTRIBUTES: [(&str, bool); 19] = [
    ("cloud.account.id", true),
    ("cloud.availability_zone", true),
    ("cloud.platform", true),
    ("cloud.provider", true),
    ("cloud.region", true),
    ("faas.instance", true),
    ("faas.name", true),
    ("faas.version", true),
    ("gcp.cloud_run.job.execution", true),
    ("gcp.cloud_run.job.task_index", true),
    ("gcp.gce.instance.hostname", false),
    ("gcp.gce.instance.name", false),
    ("gcp.gce.instance_group_manager.name", true),
    ("gcp.gce.instance_group_manager.region", true),
    ("gcp.gce.instance_group_manager.zone", true),
    ("host.id", true),
    ("host.name", true),
    ("host.type", true),
    ("k8s.cluster.name", true),
];

/// The variables the platforms are told by.
const ENV: [&str; 17] = [
    "BMS_PROJECT_ID",
    "BMS_REGION",
    "BMS_INSTANCE_ID",
    "KUBERNETES_SERVICE_HOST",
    "FUNCTION_TARGET",
    "K_CONFIGURATION",
    "K_SERVICE",
    "K_REVISION",
    "CLOUD_RUN_JOB",
    "CLOUD_RUN_EXECUTION",
    "CLOUD_RUN_TASK_INDEX",
    "CLOUD_RUN_WORKER_POOL",
    "CLOUD_RUN_REVISION",
    "GAE_ENV",
    "GAE_SERVICE",
    "GAE_VERSION",
    "GAE_INSTANCE",
];

const METADATA_IP: &str = "169.254.169.254";
/// The metadata client's dial timeout, and its whole-request one.
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `OnGCE` waits for the second probe when the machine's DMI
/// product name says Google.
const PROBE_WAIT: Duration = Duration::from_secs(5);
const MAX_RETRIES: u32 = 5;

/// What the detector reads of the machine when it is made.
pub(super) struct Target {
    /// `GCE_METADATA_HOST` (`host:port`), else the link-local address.
    at: String,
    /// `GCE_METADATA_HOST` is set: on GCE, unprobed.
    from_env: bool,
    /// `/sys/class/dmi/id/product_name` says Google.
    dmi_google: bool,
    /// The name whose addresses the second probe looks up.
    dns: Option<String>,
    env: BTreeMap<&'static str, String>,
}

pub(super) fn target(host: &dyn Host) -> Target {
    let from_env = host.env("GCE_METADATA_HOST").filter(|h| !h.is_empty());
    let dmi = host
        .file("/sys/class/dmi/id/product_name")
        .unwrap_or_default();
    let dmi = dmi.trim();
    Target {
        at: match &from_env {
            Some(h) if has_port(h) => h.clone(),
            Some(h) => format!("{h}:80"),
            None => host.link_local(),
        },
        from_env: from_env.is_some(),
        dmi_google: dmi == "Google" || dmi == "Google Compute Engine",
        dns: host.metadata_dns_name(),
        env: ENV
            .iter()
            .filter_map(|&n| Some((n, host.env(n)?)))
            .collect(),
    }
}

fn has_port(authority: &str) -> bool {
    match authority.rsplit_once(':') {
        Some((h, p)) => {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.starts_with('[') || h.ends_with(']'))
        }
        None => false,
    }
}

impl Target {
    /// A variable, found even when empty, as Go's `LookupEnv`.
    fn var(&self, name: &str) -> Result<String, String> {
        self.env
            .get(name)
            .cloned()
            .ok_or_else(|| "environment variable not found".to_string())
    }

    fn has(&self, name: &str) -> bool {
        self.env.contains_key(name)
    }

    fn on_bare_metal_solution(&self) -> bool {
        ["BMS_PROJECT_ID", "BMS_REGION", "BMS_INSTANCE_ID"]
            .iter()
            .all(|n| self.env.get(n).is_some_and(|v| !v.is_empty()))
    }

    /// The first name of `names` set.
    fn first(&self, names: &[&str]) -> Result<String, String> {
        names
            .iter()
            .find_map(|n| self.env.get(n).cloned())
            .ok_or_else(|| "environment variable not found".to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Platform {
    Unknown,
    Gke,
    Gce,
    CloudRun,
    CloudRunJob,
    CloudRunWorkerPool,
    CloudFunctions,
    AppEngineStandard,
    AppEngineFlex,
}

/// The detected attributes, in the order set, as the Collector's
/// resource builder: an attribute turned off is not set.
struct Builder<'a> {
    plan: &'a GcpPlan,
    out: Vec<KeyValue>,
    errs: Vec<String>,
}

impl Builder<'_> {
    fn set(&mut self, name: &str, value: impl Into<String>) {
        let on = ATTRIBUTES
            .iter()
            .position(|(n, _)| *n == name)
            .is_some_and(|i| self.plan.attributes[i]);
        if !on {
            return;
        }
        let kv = string_kv(name, value);
        match self.out.iter_mut().find(|o| o.key == name) {
            Some(o) => *o = kv,
            None => self.out.push(kv),
        }
    }

    /// `SetFromCallable`: set when found, else the error kept.
    fn set_from(&mut self, name: &str, value: Result<String, String>) {
        match value {
            Ok(v) => self.set(name, v),
            Err(e) => self.errs.push(e),
        }
    }

    fn set_zone_and_region(&mut self, found: Result<(String, String), String>) {
        match found {
            Ok((zone, region)) => {
                self.set("cloud.availability_zone", zone);
                self.set("cloud.region", region);
            }
            Err(e) => self.errs.push(e),
        }
    }

    /// What the Collector returns: with `fail_on_missing_metadata` any
    /// error fails it; else what was found.
    fn finish(self) -> Result<Vec<KeyValue>, String> {
        if !self.errs.is_empty() {
            if self.plan.fail_on_missing_metadata {
                return Err(self.errs.join("; "));
            }
            tracing::debug!(errors = %self.errs.join("; "), "GCP detector: some metadata unavailable");
        }
        Ok(self.out)
    }
}

pub(super) async fn detect(plan: &GcpPlan, t: &Target) -> Result<Vec<KeyValue>, String> {
    let mut b = Builder {
        plan,
        out: Vec::new(),
        errs: Vec::new(),
    };
    if t.on_bare_metal_solution() {
        b.set("cloud.provider", "gcp");
        b.set_from("cloud.account.id", t.var("BMS_PROJECT_ID"));
        b.set("cloud.platform", "gcp_bare_metal_solution");
        b.set_from("host.name", t.var("BMS_INSTANCE_ID"));
        b.set_from("cloud.region", t.var("BMS_REGION"));
        return b.finish();
    }
    if !on_gce(t).await {
        return Ok(Vec::new());
    }
    let md = Metadata { at: &t.at };
    b.set("cloud.provider", "gcp");
    b.set_from("cloud.account.id", md.trimmed("project/project-id").await);
    match platform(t, &md).await {
        Platform::Gke => {
            b.set("cloud.platform", "gcp_kubernetes_engine");
            match md.get("instance/attributes/cluster-location").await {
                Ok(loc) => match loc.matches('-').count() {
                    1 => b.set("cloud.region", loc),
                    2 => {
                        b.set("cloud.availability_zone", loc.clone());
                        if let Some(i) = loc.rfind('-') {
                            b.set("cloud.region", &loc[..i]);
                        }
                    }
                    _ => b
                        .errs
                        .push(format!("unrecognized format for cluster location: {loc}")),
                },
                Err(e) => b.errs.push(e),
            }
            b.set_from(
                "k8s.cluster.name",
                md.get("instance/attributes/cluster-name").await,
            );
            b.set_from("host.id", md.trimmed("instance/id").await);
            // Fallible on GKE (not there under workload identity).
            match md.trimmed("instance/name").await {
                Ok(v) => b.set("host.name", v),
                Err(e) => tracing::info!(key = "host.name", error = %e,
                    "Fallible detector failed. This attribute will not be available."),
            }
            // host.type would take a Compute API call: profcol makes none.
        }
        p @ (Platform::CloudRun | Platform::CloudRunWorkerPool | Platform::CloudFunctions) => {
            let platform = if p == Platform::CloudFunctions {
                "gcp_cloud_functions"
            } else {
                "gcp_cloud_run"
            };
            b.set("cloud.platform", platform);
            b.set_from("faas.name", faas_name(t));
            b.set_from("faas.version", faas_version(t));
            b.set_from("faas.instance", md.trimmed("instance/id").await);
            b.set_from("cloud.region", faas_region(&md).await);
        }
        Platform::CloudRunJob => {
            b.set("cloud.platform", "gcp_cloud_run");
            b.set_from("faas.name", faas_name(t));
            b.set_from("cloud.region", faas_region(&md).await);
            b.set_from("faas.instance", md.trimmed("instance/id").await);
            b.set_from("gcp.cloud_run.job.execution", t.var("CLOUD_RUN_EXECUTION"));
            b.set_from(
                "gcp.cloud_run.job.task_index",
                t.var("CLOUD_RUN_TASK_INDEX"),
            );
        }
        Platform::AppEngineFlex => {
            b.set("cloud.platform", "gcp_app_engine");
            b.set_zone_and_region(zone_and_region(&md).await);
            b.set_from("faas.name", t.var("GAE_SERVICE"));
            b.set_from("faas.version", t.var("GAE_VERSION"));
            b.set_from("faas.instance", t.var("GAE_INSTANCE"));
        }
        Platform::AppEngineStandard => {
            b.set("cloud.platform", "gcp_app_engine");
            b.set_from("faas.name", t.var("GAE_SERVICE"));
            b.set_from("faas.version", t.var("GAE_VERSION"));
            b.set_from("faas.instance", t.var("GAE_INSTANCE"));
            b.set_from("cloud.availability_zone", zone(&md).await);
            b.set_from("cloud.region", faas_region(&md).await);
        }
        Platform::Gce => {
            b.set("cloud.platform", "gcp_compute_engine");
            b.set_zone_and_region(zone_and_region(&md).await);
            b.set_from("host.type", md.get("instance/machine-type").await);
            b.set_from("host.id", md.trimmed("instance/id").await);
            let name = md.trimmed("instance/name").await;
            b.set_from("host.name", name.clone());
            b.set_from(
                "gcp.gce.instance.hostname",
                md.trimmed("instance/hostname").await,
            );
            b.set_from("gcp.gce.instance.name", name);
            match managed_instance_group(&md).await {
                Ok(Some((kind, location, name))) => {
                    if !name.is_empty() {
                        b.set("gcp.gce.instance_group_manager.name", name);
                    }
                    match kind {
                        "zones" => b.set("gcp.gce.instance_group_manager.zone", location),
                        _ => b.set("gcp.gce.instance_group_manager.region", location),
                    }
                }
                Ok(None) => {}
                Err(e) => b.errs.push(e),
            }
        }
        // Not a platform the Collector knows: what was found so far.
        Platform::Unknown => {}
    }
    b.finish()
}

/// `detectors/gcp`'s `CloudPlatform`, Bare Metal Solution aside.
async fn platform(t: &Target, md: &Metadata<'_>) -> Platform {
    if t.has("KUBERNETES_SERVICE_HOST")
        && md.get("instance/attributes/cluster-location").await.is_ok()
    {
        Platform::Gke
    } else if t.has("FUNCTION_TARGET") {
        Platform::CloudFunctions
    } else if t.has("K_CONFIGURATION") {
        Platform::CloudRun
    } else if t.has("CLOUD_RUN_JOB") {
        Platform::CloudRunJob
    } else if t.has("CLOUD_RUN_WORKER_POOL") {
        Platform::CloudRunWorkerPool
    } else if t.env.get("GAE_ENV").is_some_and(|v| v == "standard") {
        Platform::AppEngineStandard
    } else if t.has("GAE_SERVICE") {
        Platform::AppEngineFlex
    } else if md.get("instance/machine-type").await.is_ok() {
        Platform::Gce
    } else {
        Platform::Unknown
    }
}

fn faas_name(t: &Target) -> Result<String, String> {
    t.first(&["K_SERVICE", "CLOUD_RUN_JOB", "CLOUD_RUN_WORKER_POOL"])
}

fn faas_version(t: &Target) -> Result<String, String> {
    t.first(&["CLOUD_RUN_REVISION", "K_REVISION"])
}

/// `instance/region`, `projects/<number>/regions/<region>`: its last part.
async fn faas_region(md: &Metadata<'_>) -> Result<String, String> {
    let r = md.get("instance/region").await?;
    Ok(last_segment(&r).to_string())
}

fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// `instance/zone`, `projects/<number>/zones/<zone>`: its last part.
async fn zone(md: &Metadata<'_>) -> Result<String, String> {
    let z = md.trimmed("instance/zone").await?;
    Ok(last_segment(&z).to_string())
}

/// The zone and its region (`country-region`).
async fn zone_and_region(md: &Metadata<'_>) -> Result<(String, String), String> {
    let z = zone(md).await?;
    if z.is_empty() {
        return Err("no zone detected from GCE metadata server".into());
    }
    let parts: Vec<&str> = z.splitn(3, '-').collect();
    if parts.len() != 3 {
        return Err(format!(
            "zone was not in the expected format: country-region-zone.  Got {z}"
        ));
    }
    let region = parts[..2].join("-");
    Ok((z, region))
}

/// The managed instance group that created the VM, from its `created-by`
/// attribute: (`zones` or `regions`, location, name); none when the
/// attribute is not there or names something else.
async fn managed_instance_group(
    md: &Metadata<'_>,
) -> Result<Option<(&'static str, String, String)>, String> {
    let created_by = match md.get_raw("instance/attributes/created-by").await {
        Ok(v) => v,
        Err(MdError::NotDefined(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    // ^projects/[^/]+/(zones|regions)/([^/]+)/instanceGroupManagers/([^/]+)$
    let parts: Vec<&str> = created_by.split('/').collect();
    let ["projects", project, kind, location, "instanceGroupManagers", name] = parts[..] else {
        return Ok(None);
    };
    let kind = match kind {
        "zones" => "zones",
        "regions" => "regions",
        _ => return Ok(None),
    };
    if project.is_empty() || location.is_empty() || name.is_empty() {
        return Ok(None);
    }
    Ok(Some((kind, location.to_string(), name.to_string())))
}

#[derive(Debug)]
enum MdError {
    /// 404: the key is not there.
    NotDefined(String),
    Other(String),
}

impl std::fmt::Display for MdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MdError::NotDefined(suffix) => {
                write!(f, "metadata: GCE metadata {suffix:?} not defined")
            }
            MdError::Other(e) => f.write_str(e),
        }
    }
}

/// The metadata server, as `cloud.google.com/go/compute/metadata` asks it.
struct Metadata<'a> {
    at: &'a str,
}

impl Metadata<'_> {
    async fn get(&self, suffix: &str) -> Result<String, String> {
        self.get_raw(suffix).await.map_err(|e| e.to_string())
    }

    async fn trimmed(&self, suffix: &str) -> Result<String, String> {
        Ok(self.get(suffix).await?.trim().to_string())
    }

    /// `GET /computeMetadata/v1/<suffix>` with `Metadata-Flavor: Google`,
    /// retried as the Go client: a failed connection, a 5xx or 429 again,
    /// up to five times, after a random pause under 100ms, doubling.
    async fn get_raw(&self, suffix: &str) -> Result<String, MdError> {
        let path = format!("/computeMetadata/v1/{}", suffix.trim_start_matches('/'));
        let mut cur = Duration::from_millis(100);
        let mut retries = 0;
        loop {
            let r = tokio::time::timeout(REQUEST_TIMEOUT, self.once(&path))
                .await
                .unwrap_or_else(|_| Err(format!("{path}: no answer within {REQUEST_TIMEOUT:?}")));
            let retry = match &r {
                Ok((status, _)) => *status >= 500 || *status == 429,
                Err(_) => true,
            };
            if !retry || retries == MAX_RETRIES {
                let (status, body) = r.map_err(MdError::Other)?;
                return match status {
                    200 => Ok(body),
                    404 => Err(MdError::NotDefined(suffix.to_string())),
                    _ => Err(MdError::Other(format!(
                        "metadata: GCE metadata {suffix:?}: status {status}: {}",
                        body.trim()
                    ))),
                };
            }
            retries += 1;
            tokio::time::sleep(jitter(cur)).await;
            cur = (cur * 2).min(Duration::from_secs(30));
        }
    }

    async fn once(&self, path: &str) -> Result<(u16, String), String> {
        let stream = tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(self.at))
            .await
            .map_err(|_| format!("{}: dial timeout", self.at))?
            .map_err(|e| format!("{}: {e}", self.at))?;
        let (status, _, body) = request_with_headers(
            stream,
            self.at,
            hyper::Method::GET,
            path,
            Some(("Metadata-Flavor", "Google")),
        )
        .await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// A pause in `[1ns, cur]`, as the Go client's backoff.
fn jitter(cur: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos()) as u128;
    Duration::from_nanos((1 + nanos % cur.as_nanos().max(1)) as u64)
}

type Probe = Pin<Box<dyn Future<Output = bool> + Send>>;

/// `metadata.OnGCE`: true when `GCE_METADATA_HOST` is set; else two probes
/// at once, the metadata server's answer to `GET /` carrying
/// `Metadata-Flavor: Google`, and `metadata.google.internal` resolving to
/// its address. The first to answer decides, unless the DMI product name
/// says Google: then either saying yes within 5s does.
async fn on_gce(t: &Target) -> bool {
    if t.from_env {
        return true;
    }
    let http: Probe = Box::pin(probe_http(t.at.clone()));
    let Some(name) = t.dns.clone() else {
        return http.await;
    };
    let dns: Probe = Box::pin(probe_dns(name));
    let (first, rest) = match futures::future::select(http, dns).await {
        futures::future::Either::Left((r, rest)) | futures::future::Either::Right((r, rest)) => {
            (r, rest)
        }
    };
    if first || !t.dmi_google {
        return first;
    }
    tokio::time::timeout(PROBE_WAIT, rest)
        .await
        .unwrap_or(false)
}

async fn probe_http(at: String) -> bool {
    let query = async {
        let stream = tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(&at))
            .await
            .ok()?
            .ok()?;
        let host = at.strip_suffix(":80").unwrap_or(&at);
        let (_, headers, _) = request_with_headers(stream, host, hyper::Method::GET, "/", None)
            .await
            .ok()?;
        Some(
            headers
                .get("Metadata-Flavor")
                .is_some_and(|v| v.as_bytes() == b"Google"),
        )
    };
    tokio::time::timeout(REQUEST_TIMEOUT, query)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

async fn probe_dns(name: String) -> bool {
    let ip: std::net::IpAddr = METADATA_IP.parse().expect("an address");
    match tokio::time::timeout(REQUEST_TIMEOUT, tokio::net::lookup_host(name)).await {
        Ok(Ok(mut addrs)) => addrs.any(|a| a.ip() == ip),
        _ => false,
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn authority_ports() {
        assert!(has_port("127.0.0.1:8080"));
        assert!(has_port("[::1]:80"));
        assert!(!has_port("metadata.google.internal"));
        assert!(!has_port("[::1]"));
    }

    #[test]
    fn jitter_stays_under_its_bound() {
        let d = jitter(Duration::from_millis(100));
        assert!(d > Duration::ZERO && d <= Duration::from_millis(100));
    }
}
