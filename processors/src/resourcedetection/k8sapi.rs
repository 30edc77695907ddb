//! The `k8s_api` detector and its deprecated alias `k8snode` (the
//! Collector's `internal/k8sapi`): the node named by `node_from_env_var`
//! (the downward API's `spec.nodeName`) and the `kube-system` namespace,
//! read from the Kubernetes API with the client `k8sattributes` uses, for
//! `k8s.node.uid`, `k8s.node.name` and `k8s.cluster.uid`.

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::Api;
use kube::Client;

use profcol_model::proto::KeyValue;

use super::config::K8sNodePlan;
use super::detect::{enabled, text, Host};
use crate::k8sattributes::client::{client, Auth};

/// The attributes, in the order the Collector sets them, all on by
/// default.
pub(super) const ATTRIBUTES: [(&str, bool); 3] = [
    ("k8s.node.uid", true),
    ("k8s.node.name", true),
    ("k8s.cluster.uid", true),
];

/// What a detector on the Kubernetes API needs once the host is read: the
/// node's name (`k8s_api`) and where the API is, when the host says
/// (tests); else the client's own (`auth_type`).
pub(super) struct Target {
    pub node: String,
    pub api: Option<String>,
}

/// The node's name, from the variable: missing or empty is the
/// Collector's start error (it is a deploy mistake no retry mends).
pub(super) fn target(plan: &K8sNodePlan, host: &dyn Host) -> Result<Target, String> {
    let node = host
        .env(&plan.node_from_env_var)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            format!(
                "node name can't be found: set {} to the node's name (downward API, spec.nodeName)",
                plan.node_from_env_var
            )
        })?;
    Ok(Target {
        node,
        api: host.kube_api(),
    })
}

/// A client of the API at `api` (a URL, no credentials), else as `auth`
/// says.
pub(super) async fn kube_client(auth: &Auth, api: Option<&str>) -> Result<Client, String> {
    let made = match api {
        Some(url) => {
            let uri = url.parse::<hyper::Uri>().map_err(|e| e.to_string())?;
            Client::try_from(kube::Config::new(uri)).map_err(|e| e.to_string())
        }
        None => client(auth).await.map_err(|e| e.to_string()),
    };
    made.map_err(|e| format!("failed to create K8s API client: {e}"))
}

/// Whether the API refused for want of rights (401 or 403).
pub(super) fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(r) if r.code == 401 || r.code == 403)
}

/// The `kube-system` namespace's UID, the cluster's.
pub(super) async fn cluster_uid(client: &Client) -> Result<String, kube::Error> {
    let ns = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await?;
    Ok(ns.metadata.uid.unwrap_or_default())
}

pub(super) async fn detect(plan: &K8sNodePlan, at: &Target) -> Result<Vec<KeyValue>, String> {
    let client = kube_client(&plan.auth, at.api.as_deref()).await?;
    let [uid_on, name_on, cluster_on] = plan.attributes;
    let mut node = None;
    if uid_on || name_on {
        match Api::<Node>::all(client.clone()).get(&at.node).await {
            Ok(n) => node = Some(n),
            Err(e) => {
                let e = format!(
                    "failed to fetch node with name {} from K8s API: {e}",
                    at.node
                );
                let what = if uid_on { "UID" } else { "name" };
                if plan.fail_on_missing_metadata {
                    return Err(format!("failed getting k8s node {what}: {e}"));
                }
                tracing::debug!(error = %e, "k8snode metadata unavailable");
                return Ok(Vec::new());
            }
        }
    }
    let mut cluster = None;
    if cluster_on {
        match cluster_uid(&client).await {
            Ok(uid) if uid.is_empty() => {
                return Err("failed getting k8s cluster UID: kube-system namespace UID is empty".into())
            }
            Ok(uid) => cluster = Some(uid),
            // As the Collector, for deployments without rights on
            // kube-system: a warning, for now.
            Err(e) if forbidden(&e) => tracing::warn!(
                error = %e,
                "no permission to get kube-system namespace, skipping k8s.cluster.uid; \
                 disable the attribute or grant 'get' on namespaces/kube-system"
            ),
            Err(e) => {
                return Err(format!(
                    "failed getting k8s cluster UID: failed to fetch kube-system namespace from K8s API: {e}"
                ))
            }
        }
    }
    let (uid, name) = match node {
        Some(n) => (n.metadata.uid, n.metadata.name),
        None => (None, None),
    };
    let values = [
        Some(uid.unwrap_or_default()),
        Some(name.unwrap_or_default()),
        cluster,
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        &plan.attributes,
    ))
}
