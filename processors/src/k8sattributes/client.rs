//! How profcol reaches the Kubernetes API, shared by `k8sattributes` and
//! the `k8snode` detector of `resourcedetection`: the Collector's
//! `k8sconfig.APIConfig` keys `auth_type` and `context`.

use kube::config::KubeConfigOptions;
use kube::Client;

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    ServiceAccount,
    KubeConfig { context: Option<String> },
}

/// `auth_type` (at `prefix`, e.g. `k8snode::`) with `context`; errors
/// name the key.
pub(crate) fn parse_auth(
    auth_type: &str,
    context: &str,
    cfg: &ComponentConfig,
    prefix: &str,
    errs: &mut ConfigErrors,
) -> Auth {
    match auth_type {
        "serviceAccount" => Auth::ServiceAccount,
        "kubeConfig" => Auth::KubeConfig {
            context: (!context.is_empty()).then(|| context.to_string()),
        },
        "none" | "tls" => {
            errs.push(
                cfg.key_path(&format!("{prefix}auth_type")),
                format!(
                    "{auth_type:?} is not supported by profcol; use serviceAccount or kubeConfig"
                ),
            );
            Auth::ServiceAccount
        }
        other => {
            errs.push(
                cfg.key_path(&format!("{prefix}auth_type")),
                format!("invalid authType for kubernetes: {other}"),
            );
            Auth::ServiceAccount
        }
    }
}

/// A client: in-cluster (service account) or from the kubeconfig
/// (`KUBECONFIG`, else `~/.kube/config`).
pub(crate) async fn client(
    auth: &Auth,
) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
    let config = match auth {
        Auth::ServiceAccount => kube::Config::incluster()?,
        Auth::KubeConfig { context } => {
            let options = KubeConfigOptions {
                context: context.clone(),
                ..Default::default()
            };
            kube::Config::from_kubeconfig(&options).await?
        }
    };
    Ok(Client::try_from(config)?)
}
