//! The `aks` detector (the Collector's `internal/azure/aks`): on
//! Kubernetes (`KUBERNETES_SERVICE_HOST` set), the Azure instance metadata
//! service's compute document, asked as the `azure` detector asks it, for
//! `cloud.provider`, `cloud.platform` and, when enabled, the cluster's name
//! from the node resource group's. Off Kubernetes it finds nothing; off
//! Azure too, unless `fail_on_missing_metadata`.

use profcol_model::proto::KeyValue;

use super::azure;
use super::detect::{enabled, text, Host};

/// The attributes, in the order the Collector sets them, and whether each
/// is on by default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 3] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("k8s.cluster.name", false),
];

/// Set, and not empty, in every pod.
pub(super) fn on_k8s(host: &dyn Host) -> bool {
    host.env("KUBERNETES_SERVICE_HOST")
        .is_some_and(|v| !v.is_empty())
}

pub(super) async fn detect(on: &[bool; 3], fail: bool, at: &str) -> Result<Vec<KeyValue>, String> {
    let m = match azure::metadata(at).await {
        Ok(m) => m,
        Err(e) if fail => return Err(format!("aks metadata unavailable: {e}")),
        // As the Collector: no answer, not on Azure.
        Err(e) => {
            tracing::debug!(error = %e, "AKS detector metadata retrieval failed");
            return Ok(Vec::new());
        }
    };
    // semconv v1.40.0's values, the Collector v0.161.0's.
    let values = [
        "azure".to_string(),
        "azure.aks".to_string(),
        cluster_name(&m.resource_group_name).to_string(),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| Some(text(v))),
        on,
    ))
}

/// The cluster's name in the infrastructure resource group's that AKS
/// generates, `MC_<resource group>_<cluster>_<location>` (`mc` in any
/// case); a custom group's name, or a generated one whose resource group
/// or cluster name has an underscore, as it is.
pub(super) fn cluster_name(resource_group: &str) -> &str {
    let parts: Vec<&str> = resource_group.split('_').collect();
    if parts.len() == 4 && parts[0].eq_ignore_ascii_case("mc") {
        return parts[2];
    }
    resource_group
}
