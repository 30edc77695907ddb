//! The `openshift` detector (the Collector's `internal/openshift`): the
//! cluster's name, cloud and region from the OpenShift API's
//! `infrastructures/cluster` status, one `GET` with the service account's
//! token as the Collector's provider asks it. When the API does not
//! answer it finds nothing, unless `fail_on_missing_metadata`.

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::OpenShiftPlan;
use super::detect::{enabled, text, Host};

/// The attributes, in the order the Collector sets them, all on by
/// default.
pub(super) const ATTRIBUTES: [(&str, bool); 4] = [
    ("k8s.cluster.name", true),
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.region", true),
];

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
const CA_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// The API's address, the token and the client, once the host is read.
pub(super) struct Target {
    url: String,
    token: String,
    client: reqwest::Client,
}

/// As the Collector's `NewDetector`: the address and the token default to
/// the pod's (`KUBERNETES_SERVICE_HOST`/`_PORT`, the service account's
/// token file); without them, or with a CA that cannot be read, the
/// detector cannot be made.
pub(super) fn target(plan: &OpenShiftPlan, host: &dyn Host) -> Result<Target, String> {
    let token = if plan.token.is_empty() {
        host.read_file(TOKEN_PATH)?
            .ok_or_else(|| format!("open {TOKEN_PATH}: no such file or directory"))?
    } else {
        plan.token.clone()
    };
    let address = if plan.address.is_empty() {
        let env = |k: &str| host.env(k).filter(|v| !v.is_empty());
        let h = env("KUBERNETES_SERVICE_HOST").ok_or("could not extract openshift api host")?;
        let p = env("KUBERNETES_SERVICE_PORT").ok_or("could not extract openshift api port")?;
        format!("https://{h}:{p}")
    } else {
        plan.address.clone()
    };
    let mut builder = reqwest::Client::builder();
    // The Collector's TLS: a CA (the service account's unless `insecure`
    // or given), else the system's roots.
    let ca = if !plan.ca_pem.is_empty() {
        Some(plan.ca_pem.clone())
    } else {
        let path = match (plan.ca_file.as_str(), plan.insecure) {
            ("", true) => None,
            ("", false) => Some(CA_PATH),
            (p, _) => Some(p),
        };
        match path {
            Some(p) => Some(host.read_file(p)?.ok_or_else(|| {
                format!("failed to load CA CertPool File: open {p}: no such file or directory")
            })?),
            None => None,
        }
    };
    if let Some(pem) = ca {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|e| format!("failed to load CA CertPool: {e}"))?;
        if certs.is_empty() {
            return Err("failed to load CA CertPool: failed to parse cert".into());
        }
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    if plan.insecure_skip_verify {
        builder = builder.tls_danger_accept_invalid_certs(true);
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    Ok(Target {
        url: format!("{address}/apis/config.openshift.io/v1/infrastructures/cluster/status"),
        token,
        client,
    })
}

/// The answer's fields the Collector's provider reads.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Infrastructure {
    status: InfrastructureStatus,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct InfrastructureStatus {
    infrastructure_name: String,
    platform_status: PlatformStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PlatformStatus {
    r#type: String,
    aws: Region,
    azure: CloudName,
    gcp: Region,
    ibmcloud: Location,
    openstack: CloudName,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Region {
    region: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct CloudName {
    cloud_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Location {
    location: String,
}

pub(super) async fn detect(plan: &OpenShiftPlan, at: &Target) -> Result<Vec<KeyValue>, String> {
    let infra = match infrastructure(at).await {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(error = %e, "OpenShift detector metadata retrieval failed");
            if plan.fail_on_missing_metadata {
                return Err(format!("openshift metadata unavailable: {e}"));
            }
            return Ok(Vec::new());
        }
    };
    let s = infra.status;
    let p = s.platform_status;
    // semconv v1.40.0's values, the Collector v0.161.0's.
    let (provider, platform, region) = match p.r#type.to_lowercase().as_str() {
        "aws" => (Some("aws"), Some("aws_openshift"), Some(p.aws.region)),
        "azure" => (
            Some("azure"),
            Some("azure.openshift"),
            Some(p.azure.cloud_name),
        ),
        "gcp" => (Some("gcp"), Some("gcp_openshift"), Some(p.gcp.region)),
        "ibmcloud" => (
            Some("ibm_cloud"),
            Some("ibm_cloud_openshift"),
            Some(p.ibmcloud.location),
        ),
        "openstack" => (None, None, Some(p.openstack.cloud_name)),
        _ => (None, None, None),
    };
    let values = [
        Some(s.infrastructure_name).filter(|n| !n.is_empty()),
        provider.map(str::to_string),
        platform.map(str::to_string),
        region.map(|r| r.to_lowercase()),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        &plan.attributes,
    ))
}

async fn infrastructure(at: &Target) -> Result<Infrastructure, String> {
    let resp = at
        .client
        .get(&at.url)
        .bearer_auth(&at.token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    if status != reqwest::StatusCode::OK {
        return Err(format!("OpenShift API returned status {status}"));
    }
    let body = resp.bytes().await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| {
        format!(
            "unable to unmarshal response, err: {e}, response: {}",
            String::from_utf8_lossy(&body)
        )
    })
}
