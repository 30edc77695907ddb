//! The `kubeadm` detector (the Collector's `internal/kubeadm`): the
//! cluster's name from the `kubeadm-config` ConfigMap in `kube-system`
//! (its `ClusterConfiguration` YAML's `clusterName`) and its UID from the
//! `kube-system` namespace, read from the Kubernetes API with the client
//! `k8sattributes` uses. What it cannot read it gives up on, without an
//! error unless `fail_on_missing_metadata`.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::KubeadmPlan;
use super::detect::{enabled, text};
use super::k8sapi::{cluster_uid, kube_client};

/// The attributes, in the order the Collector sets them, all on by
/// default.
pub(super) const ATTRIBUTES: [(&str, bool); 2] =
    [("k8s.cluster.name", true), ("k8s.cluster.uid", true)];

const CONFIG_MAP: &str = "kubeadm-config";
const NAMESPACE: &str = "kube-system";

/// The `ClusterConfiguration` document's one field it reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ClusterConfiguration {
    cluster_name: String,
}

pub(super) async fn detect(plan: &KubeadmPlan, api: Option<&str>) -> Result<Vec<KeyValue>, String> {
    let client = kube_client(&plan.auth, api).await?;
    let [name_on, uid_on] = plan.attributes;
    let give_up = |what: &str, e: String| {
        if plan.fail_on_missing_metadata {
            return Err(format!("failed getting k8s cluster {what}: {e}"));
        }
        tracing::debug!(error = %e, "kubeadm metadata unavailable");
        Ok(Vec::new())
    };
    let mut name = None;
    if name_on {
        match cluster_name(&client).await {
            Ok(n) => name = Some(n),
            Err(e) => return give_up("name", e),
        }
    }
    let mut uid = None;
    if uid_on {
        match cluster_uid(&client).await {
            Ok(u) => uid = Some(u),
            Err(e) => {
                return give_up(
                    "uid",
                    format!("failed to fetch Namespace {NAMESPACE} from K8s API: {e}"),
                )
            }
        }
    }
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        [name, uid].map(|v| v.map(text)),
        &plan.attributes,
    ))
}

async fn cluster_name(client: &kube::Client) -> Result<String, String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .get(CONFIG_MAP)
        .await
        .map_err(|e| {
            format!("failed to fetch ConfigMap with name {CONFIG_MAP} and namespace {NAMESPACE} from K8s API: {e}")
        })?;
    let yaml = cm
        .data
        .as_ref()
        .and_then(|d| d.get("ClusterConfiguration"))
        .ok_or_else(|| format!("ClusterConfiguration key not found in ConfigMap {CONFIG_MAP}"))?;
    // An empty document is Go's zero value.
    if yaml.trim().is_empty() {
        return Ok(String::new());
    }
    let c: ClusterConfiguration = serde_yaml_ng::from_str(yaml)
        .map_err(|e| format!("failed to parse ClusterConfiguration YAML: {e}"))?;
    Ok(c.cluster_name)
}
