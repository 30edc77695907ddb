//! The `azure` detector (the Collector's `internal/azure`): the VM's cloud,
//! host and `azure.*` attributes from the Azure instance metadata service,
//! one `GET /metadata/instance/compute` as the Collector's provider asks
//! it. Off Azure it finds nothing, unless `fail_on_missing_metadata`.

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::AzurePlan;
use super::detect::{enabled, string_kv, text};
use super::http::request;

/// The attributes, in the order the Collector sets them, and whether each
/// is on by default.
pub(super) const ATTRIBUTES: [(&str, bool); 11] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("host.name", true),
    ("cloud.region", true),
    ("host.id", true),
    ("cloud.account.id", true),
    ("cloud.availability_zone", false),
    ("azure.vm.name", true),
    ("azure.vm.size", true),
    ("azure.vm.scaleset.name", true),
    ("azure.resourcegroup.name", true),
];

const PATH: &str = "/metadata/instance/compute?api-version=2020-09-01&format=json";

/// The compute document's fields the Collector's provider reads
/// (`internal/metadataproviders/azure`'s `ComputeMetadata`).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Compute {
    location: String,
    name: String,
    // Go reads JSON keys without regard to case: the provider's tags.
    #[serde(rename = "vmId", alias = "vmID")]
    vm_id: String,
    vm_size: String,
    #[serde(alias = "subscriptionID")]
    subscription_id: String,
    pub(super) resource_group_name: String,
    vm_scale_set_name: String,
    zone: String,
    os_profile: OsProfile,
    tags_list: Vec<Tag>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct OsProfile {
    computer_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Tag {
    name: String,
    value: String,
}

pub(super) async fn detect(plan: &AzurePlan, at: &str) -> Result<Vec<KeyValue>, String> {
    let c = match metadata(at).await {
        Ok(c) => c,
        Err(e) if plan.fail_on_missing_metadata => {
            return Err(format!("azure metadata unavailable: {e}"))
        }
        Err(e) => {
            tracing::debug!(error = %e, "Azure detector metadata retrieval failed");
            return Ok(Vec::new());
        }
    };
    let host_name = if c.os_profile.computer_name.is_empty() {
        c.name.clone()
    } else {
        c.os_profile.computer_name
    };
    // The optional ones are set only when the service gives them.
    let values = [
        Some("azure".to_string()),
        // semconv v1.40.0's value, the Collector v0.161.0's (`azure_vm` before).
        Some("azure.vm".to_string()),
        Some(host_name).filter(|v| !v.is_empty()),
        Some(c.location),
        Some(c.vm_id),
        Some(c.subscription_id),
        Some(c.zone).filter(|v| !v.is_empty()),
        Some(c.name),
        Some(c.vm_size),
        Some(c.vm_scale_set_name).filter(|v| !v.is_empty()),
        Some(c.resource_group_name),
    ];
    let mut out = enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        &plan.attributes,
    );
    for t in c.tags_list {
        if plan.tags.iter().any(|r| r.is_match(&t.name)) {
            out.push(string_kv(&format!("azure.tag.{}", t.name), t.value));
        }
    }
    Ok(out)
}

/// The VM's compute document from the instance metadata service at `at`
/// (`host:port`), as the Collector's provider (`Metadata`) asks it: for
/// the `azure` and `aks` detectors.
pub(super) async fn metadata(at: &str) -> Result<Compute, String> {
    let query = async {
        let stream = tokio::net::TcpStream::connect(at)
            .await
            .map_err(|e| format!("{at}: {e}"))?;
        request(
            stream,
            at,
            hyper::Method::GET,
            PATH,
            Some(("Metadata", "true")),
        )
        .await
    };
    let (status, body) = query
        .await
        .map_err(|e| format!("failed to query Azure IMDS: {e}"))?;
    if status != 200 {
        return Err(format!("Azure IMDS replied with status code: {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("failed to decode Azure IMDS reply: {e}"))
}
