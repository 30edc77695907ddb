//! The `k8snode` detector (the Collector's `internal/k8snode`): the node
//! named by `node_from_env_var` (the downward API's `spec.nodeName`),
//! read from the Kubernetes API with the client `k8sattributes` uses, for
//! `k8s.node.name` and `k8s.node.uid`.

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use profcol_model::proto::KeyValue;

use super::config::K8sNodePlan;
use super::detect::{string_kv, Host};
use crate::k8sattributes::client::client;

/// The node's name, from the variable: missing or empty is the
/// Collector's start error (it is a deploy mistake no retry mends).
pub(super) fn node_name(plan: &K8sNodePlan, host: &dyn Host) -> Result<String, String> {
    host.env(&plan.node_from_env_var)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            format!(
                "node name can't be found: set {} to the node's name (downward API, spec.nodeName)",
                plan.node_from_env_var
            )
        })
}

pub(super) async fn detect(plan: &K8sNodePlan, name: &str) -> Result<Vec<KeyValue>, String> {
    let client = client(&plan.auth)
        .await
        .map_err(|e| format!("failed to create K8s API client: {e}"))?;
    let node = Api::<Node>::all(client)
        .get(name)
        .await
        .map_err(|e| format!("failed to fetch node with name {name} from K8s API: {e}"))?;
    let mut out = Vec::new();
    let [name_on, uid_on] = plan.attributes;
    if name_on {
        out.push(string_kv(
            "k8s.node.name",
            node.metadata.name.unwrap_or_default(),
        ));
    }
    if uid_on {
        out.push(string_kv(
            "k8s.node.uid",
            node.metadata.uid.unwrap_or_default(),
        ));
    }
    Ok(out)
}
