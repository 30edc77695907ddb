//! The `ibmcloud_vpc` detector (the Collector's `internal/ibmcloud/vpc`,
//! which runs the OpenTelemetry Go SDK's `detectors/ibmcloud/vpc`): a VPC
//! virtual server's cloud and host attributes from the IBM Cloud VPC
//! instance metadata service at `<protocol>://api.metadata.cloud.ibm.com`:
//! an identity token (`PUT /identity/v1/token`), then
//! `GET /metadata/v1/instance` with it. If either fails (off IBM Cloud
//! VPC) it finds nothing, unless `fail_on_missing_metadata`.
//!
//! The attributes come in their names' order (the SDK's resource sorts
//! them); an empty value is left out. The SDK keeps why the service did
//! not answer to itself, so the Collector's error is only
//! `ibmcloud vpc metadata unavailable`; profcol adds why.

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::IbmCloudVpcPlan;
use super::detect::{enabled, text};
use super::http::{read, url_client};

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 11] = [
    ("cloud.account.id", true),
    ("cloud.availability_zone", true),
    ("cloud.platform", true),
    ("cloud.provider", true),
    ("cloud.region", true),
    ("cloud.resource_id", true),
    ("host.id", true),
    ("host.image.id", true),
    ("host.image.name", true),
    ("host.name", true),
    ("host.type", true),
];

const HOST: &str = "api.metadata.cloud.ibm.com";
const API_VERSION: &str = "2026-01-30";
const TOKEN_TTL_SECONDS: u32 = 300;

/// The service's base URL for the configured protocol.
pub(super) fn service(plan: &IbmCloudVpcPlan) -> String {
    format!("{}://{HOST}", plan.protocol)
}

/// The instance's fields the SDK reads; a missing or `null` field is
/// empty, as with Go's decoder.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Instance {
    id: Option<String>,
    crn: Option<String>,
    name: Option<String>,
    profile: Option<Named>,
    zone: Option<Named>,
    image: Option<Image>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Named {
    name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Image {
    id: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Token {
    access_token: Option<String>,
}

/// `base` is the service's base URL.
pub(super) async fn detect(plan: &IbmCloudVpcPlan, base: &str) -> Result<Vec<KeyValue>, String> {
    let inst = match instance(base).await {
        Ok(i) => i,
        Err(e) if plan.fail_on_missing_metadata => {
            return Err(format!("ibmcloud vpc metadata unavailable: {e}"))
        }
        Err(e) => {
            tracing::debug!(error = %e, "IBM Cloud VPC metadata not available");
            return Ok(Vec::new());
        }
    };
    let zone = inst.zone.and_then(|z| z.name).unwrap_or_default();
    let crn = inst.crn.unwrap_or_default();
    let image = inst.image.unwrap_or_default();
    let values = [
        account_id_from_crn(&crn).to_string(),
        zone.clone(),
        // The SDK's values: semconv's provider, its own platform.
        "ibm_cloud.vpc".to_string(),
        "ibm_cloud".to_string(),
        region_from_zone(&zone).to_string(),
        crn,
        inst.id.unwrap_or_default(),
        image.id.unwrap_or_default(),
        image.name.unwrap_or_default(),
        inst.name.unwrap_or_default(),
        inst.profile.and_then(|p| p.name).unwrap_or_default(),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| Some(v).filter(|v| !v.is_empty()).map(text)),
        &plan.attributes,
    ))
}

/// The instance document, with a new identity token.
async fn instance(base: &str) -> Result<Instance, String> {
    let client = url_client()?;
    let base = base.trim_end_matches('/');
    let token = token(&client, base)
        .await
        .map_err(|e| format!("failed to get instance identity token: {e}"))?;
    let resp = client
        .get(format!("{base}/metadata/v1/instance?version={API_VERSION}"))
        .bearer_auth(token)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("failed to get instance metadata: {e}"))?;
    let (status, body) = read(resp)
        .await
        .map_err(|e| format!("failed to get instance metadata: {e}"))?;
    if status != 200 {
        let body = String::from_utf8_lossy(&body);
        return Err(format!(
            "instance metadata request returned {status}: {body}"
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("failed to decode instance metadata: {e}"))
}

async fn token(client: &reqwest::Client, base: &str) -> Result<String, String> {
    let resp = client
        .put(format!("{base}/identity/v1/token?version={API_VERSION}"))
        .header("Metadata-Flavor", "ibm")
        .header("Accept", "application/json")
        .header("Content-Type", "application/json")
        .body(format!("{{\"expires_in\":{TOKEN_TTL_SECONDS}}}"))
        .send()
        .await
        .map_err(|e| format!("failed to get metadata token: {e}"))?;
    let (status, body) = read(resp)
        .await
        .map_err(|e| format!("failed to get metadata token: {e}"))?;
    if status != 200 {
        let body = String::from_utf8_lossy(&body);
        return Err(format!("token request returned {status}: {body}"));
    }
    let t: Token = serde_json::from_slice(&body)
        .map_err(|e| format!("failed to decode token response: {e}"))?;
    t.access_token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| "metadata token response missing access_token".into())
}

/// `us-south-1` → `us-south`: up to the last `-` (not a leading one).
pub(super) fn region_from_zone(zone: &str) -> &str {
    match zone.rfind('-') {
        Some(i) if i > 0 => &zone[..i],
        _ => zone,
    }
}

/// A CRN's account (its seventh field, without `a/`), or nothing.
pub(super) fn account_id_from_crn(crn: &str) -> &str {
    let parts: Vec<&str> = crn.split(':').collect();
    match parts.get(6) {
        Some(p) => p.strip_prefix("a/").unwrap_or(p),
        None => "",
    }
}
