//! The `oraclecloud` detector (the Collector's `internal/oraclecloud`,
//! over `internal/metadataproviders/oraclecloud`): the instance's cloud,
//! host, OKE cluster and realm attributes from the OCI instance metadata
//! service (IMDS v2), as the provider asks it, with `Authorization: Bearer
//! Oracle`: a `HEAD /opc/v2/instance/` probe (200ms) that must answer 200,
//! then `GET /opc/v2/instance/`.
//!
//! As the Collector's: when the probe fails it finds nothing, even with
//! `fail_on_missing_metadata`; when the probe answers but the document
//! cannot be read, nothing, or with `fail_on_missing_metadata` the
//! Collector's error. Every attribute is set from the document as it is
//! (empty where it lacks the field: `k8s.cluster.name` off OKE), and
//! `cloud.platform` is `oracle_cloud_oke` on every instance. A `null`
//! document (on which the Collector's detector panics) is a decoding
//! error. The answer is decoded with serde, only the fields the detector
//! reads, keys matched exactly.

use std::time::Duration;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text};
use super::http::{call, status_text};

/// The attributes, in the order the Collector sets them, and whether each
/// is on by default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 10] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.region", true),
    ("cloud.resource_id", false),
    ("cloud.availability_zone", true),
    ("host.id", true),
    ("host.name", true),
    ("host.type", true),
    ("k8s.cluster.name", true),
    ("oracle_cloud.realm", true),
];

const PATH: &str = "/opc/v2/instance/";
const AUTHORIZATION: (&str, &str) = ("Authorization", "Bearer Oracle");
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);

/// The provider's `ComputeMetadata`; a missing or `null` field is empty.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Compute {
    id: Option<String>,
    display_name: Option<String>,
    shape: Option<String>,
    canonical_region_name: Option<String>,
    availability_domain: Option<String>,
    metadata: Option<InstanceMetadata>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InstanceMetadata {
    #[serde(rename = "oke-cluster-display-name")]
    oke_cluster_display_name: Option<String>,
    realm: Option<String>,
}

pub(super) async fn detect(on: &[bool; 10], fail: bool, at: &str) -> Result<Vec<KeyValue>, String> {
    let probe = call(
        at,
        hyper::Method::HEAD,
        PATH,
        Some(AUTHORIZATION),
        Some(PROBE_TIMEOUT),
    )
    .await;
    if !matches!(probe, Ok((200, _))) {
        tracing::debug!("Oracle Cloud platform probe failed – not running on Oracle Cloud. Returning empty resource.");
        return Ok(Vec::new());
    }
    let c = match metadata(at).await {
        Ok(c) => c,
        Err(e) if fail => return Err(format!("failed to get Oracle Cloud metadata: {e}")),
        Err(e) => {
            tracing::debug!(error = %e, "Oracle Cloud detected but failed to retrieve metadata!");
            return Ok(Vec::new());
        }
    };
    let m = c.metadata.unwrap_or_default();
    let id = c.id.unwrap_or_default();
    let values = [
        Some("oracle_cloud".to_string()),
        Some("oracle_cloud_oke".to_string()),
        c.canonical_region_name,
        Some(id.clone()),
        c.availability_domain,
        Some(id),
        c.display_name,
        c.shape,
        m.oke_cluster_display_name,
        m.realm,
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| Some(text(v.unwrap_or_default()))),
        on,
    ))
}

/// The instance's document, with the provider's errors. Its client has
/// no timeout: the detection's `timeout` bounds it.
async fn metadata(at: &str) -> Result<Compute, String> {
    let (status, body) = call(at, hyper::Method::GET, PATH, Some(AUTHORIZATION), None)
        .await
        .map_err(|e| format!("failed to query OracleCloud IMDS: {}", e.go()))?;
    if status != 200 {
        return Err(format!(
            "received non-OK response from OracleCloud IMDS: {}",
            status_text(status)
        ));
    }
    match serde_json::from_slice::<Option<Compute>>(&body) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err("failed to decode OracleCloud IMDS reply: null".into()),
        Err(e) => Err(format!("failed to decode OracleCloud IMDS reply: {e}")),
    }
}
