//! The deploy files (deploy/): the Kubernetes manifests match the
//! Kubernetes schemas (offline, with the `kubernetes-validate` Python
//! package and the schemas it ships), every config they carry and the
//! systemd and Docker configs pass `profcol validate`, and every memory
//! limit follows the README's sizing rule.

use crate::common;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml_ng::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` whose name ends with `.yaml`, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(yaml_files(&path));
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn is_kustomization(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "kustomization.yaml")
}

/// The Kubernetes objects of the manifests, with the file of each.
fn manifests() -> Vec<(PathBuf, Value)> {
    yaml_files(&root().join("deploy/kubernetes"))
        .into_iter()
        .filter(|p| !is_kustomization(p))
        .flat_map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            serde_yaml_ng::Deserializer::from_str(&text)
                .map(|doc| {
                    let v = Value::deserialize(doc)
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    (path.clone(), v)
                })
                .collect::<Vec<_>>()
        })
        .filter(|(_, v)| !v.is_null())
        .collect()
}

fn kind(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or_default()
}

/// Each ConfigMap's entries: (file, configmap name, key, text).
fn configmap_entries() -> Vec<(PathBuf, String, String, String)> {
    manifests()
        .into_iter()
        .filter(|(_, v)| kind(v) == "ConfigMap")
        .flat_map(|(path, v)| {
            let name = v["metadata"]["name"].as_str().unwrap().to_string();
            let data = v["data"].as_mapping().cloned().unwrap_or_default();
            data.into_iter()
                .map(|(k, text)| {
                    (
                        path.clone(),
                        name.clone(),
                        k.as_str().unwrap().to_string(),
                        text.as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_manifests_match_the_kubernetes_schemas() {
    let Some(python) = profcol_model::testing::python(&["kubernetes_validate"]) else {
        return;
    };
    let files: Vec<PathBuf> = yaml_files(&root().join("deploy/kubernetes"))
        .into_iter()
        // Kustomize's own file is no Kubernetes object.
        .filter(|p| !is_kustomization(p))
        .collect();
    assert!(files.len() >= 10, "{files:?}");
    // --strict: an unknown field (a misspelt probe) is an error too.
    let out = std::process::Command::new(&python)
        .args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kubectl apply -k DIR` applies every manifest of DIR, and nothing that
/// is not there.
#[test]
fn each_kustomization_lists_the_manifests_of_its_directory() {
    for k in yaml_files(&root().join("deploy/kubernetes"))
        .into_iter()
        .filter(|p| is_kustomization(p))
    {
        let dir = k.parent().unwrap();
        let v: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&k).unwrap()).unwrap();
        let listed: Vec<&str> = v["resources"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        for r in &listed {
            assert!(dir.join(r).exists(), "{}: {r} does not exist", k.display());
        }
        for f in std::fs::read_dir(dir).unwrap() {
            let name = f.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                assert!(
                    listed.contains(&name.as_str()),
                    "{}: {name} is not listed",
                    k.display()
                );
            }
        }
    }
}

/// What `profcol validate` says about `text`: `None` when it is valid.
fn validate(text: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).unwrap();
    let out = common::profcol()
        .arg("validate")
        .arg("--config")
        .arg(&path)
        // As a config copied out without the Deployment that sets them:
        // each config has a default.
        .env_remove("PROFCOL_GATEWAY")
        .env_remove("PROFCOL_BACKEND")
        // The node agent's k8sattributes filters by this variable, which
        // its DaemonSet sets from the downward API; validate checks it is
        // set, as the Collector's does.
        .env("K8S_NODE_NAME", "node-1")
        .output()
        .unwrap();
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_shipped_config_validates() {
    let mut configs: Vec<(String, String)> = configmap_entries()
        .into_iter()
        .map(|(path, name, key, text)| (format!("{} ({name}: {key})", path.display()), text))
        .collect();
    for f in ["deploy/systemd/config.yaml", "deploy/docker/config.yaml"] {
        configs.push((f.into(), std::fs::read_to_string(root().join(f)).unwrap()));
    }
    assert!(configs.len() >= 5, "{configs:?}");
    for (what, text) in configs {
        if let Some(errors) = validate(&text) {
            panic!("{what}:\n{errors}");
        }
    }
}

/// MiB of a Kubernetes quantity such as `2048Mi` or `2Gi`.
fn mib(q: &str) -> u64 {
    match (q.strip_suffix("Mi"), q.strip_suffix("Gi")) {
        (Some(n), _) => n.parse().unwrap(),
        (_, Some(n)) => n.parse::<u64>().unwrap() * 1024,
        _ => panic!("unexpected quantity {q}"),
    }
}

/// The `memory_limiter`'s `limit_mib` of a config.
fn limit_mib(text: &str) -> u64 {
    let v: Value = serde_yaml_ng::from_str(text).unwrap();
    v["processors"]["memory_limiter"]["limit_mib"]
        .as_u64()
        .expect("a memory_limiter with limit_mib")
}

/// README "Memory": the process stays within its limit + 64 MiB, so the
/// memory_limiter's limit is the container's (or unit's) limit - 64 MiB,
/// and the memory request is the limit.
#[test]
fn memory_limits_follow_the_sizing_rule() {
    let configs: Vec<(String, String)> = configmap_entries()
        .into_iter()
        .map(|(_, name, _, text)| (name, text))
        .collect();
    let mut checked = 0;
    for (path, v) in manifests()
        .into_iter()
        .filter(|(_, v)| ["Deployment", "DaemonSet"].contains(&kind(v)))
    {
        let spec = &v["spec"]["template"]["spec"];
        let volumes = spec["volumes"].as_sequence().cloned().unwrap_or_default();
        let containers = spec["containers"]
            .as_sequence()
            .into_iter()
            .chain(spec["initContainers"].as_sequence())
            .flatten();
        for c in containers {
            // The profcol container: the one that mounts a profcol config.
            let config = c["volumeMounts"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find_map(|m| {
                    (m["mountPath"].as_str() == Some("/etc/profcol")).then(|| {
                        let vol = volumes
                            .iter()
                            .find(|v| v["name"] == m["name"])
                            .expect("the mounted volume");
                        vol["configMap"]["name"].as_str().unwrap().to_string()
                    })
                });
            let Some(config) = config else { continue };
            let text = &configs.iter().find(|(n, _)| *n == config).unwrap().1;
            let limit = mib(c["resources"]["limits"]["memory"].as_str().unwrap());
            let request = mib(c["resources"]["requests"]["memory"].as_str().unwrap());
            let what = format!("{}: {}", path.display(), c["name"].as_str().unwrap());
            assert_eq!(limit_mib(text) + 64, limit, "{what}");
            assert_eq!(request, limit, "{what}: memory request = limit");
            checked += 1;
        }
    }
    assert_eq!(
        checked, 5,
        "sidecar, gateway, load balancer, kafka gateway, node agent"
    );

    let unit = std::fs::read_to_string(root().join("deploy/systemd/profcol.service")).unwrap();
    let max = unit
        .lines()
        .find_map(|l| l.strip_prefix("MemoryMax="))
        .and_then(|m| m.strip_suffix('M'))
        .expect("MemoryMax=<n>M")
        .parse::<u64>()
        .unwrap();
    let config = std::fs::read_to_string(root().join("deploy/systemd/config.yaml")).unwrap();
    assert_eq!(limit_mib(&config) + 64, max, "MemoryMax");
}

/// An HPA owns its Deployment's replica count: a `replicas` beside it is
/// reset on every `kubectl apply`, undoing what the HPA scaled to.
#[test]
fn deployments_an_hpa_scales_leave_replicas_to_it() {
    let all = manifests();
    let scaled: Vec<(String, String)> = all
        .iter()
        .filter(|(_, v)| kind(v) == "HorizontalPodAutoscaler")
        .map(|(_, v)| {
            let target = &v["spec"]["scaleTargetRef"];
            assert_eq!(target["kind"].as_str(), Some("Deployment"));
            (
                v["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                target["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(!scaled.is_empty(), "the gateway has an HPA");
    for (ns, name) in &scaled {
        let (path, deployment) = all
            .iter()
            .find(|(_, v)| {
                kind(v) == "Deployment"
                    && v["metadata"]["name"].as_str() == Some(name)
                    && v["metadata"]["namespace"].as_str().unwrap_or("") == ns
            })
            .unwrap_or_else(|| panic!("the HPA's target {ns}/{name} is shipped"));
        assert!(
            deployment["spec"]["replicas"].is_null(),
            "{}: sets spec.replicas, which an HPA manages",
            path.display()
        );
    }
}

/// Every workload whose config runs `k8sattributes` can do what it does:
/// its service account is bound to a role that may get, list and watch
/// pods (and namespaces and nodes), its token is mounted, and a
/// `filter.node_from_env_var` names a variable its container sets from
/// the downward API's `spec.nodeName`, and a `proc_root` comes with the
/// host's PID namespace.
#[test]
fn workloads_running_k8sattributes_have_their_rbac_and_node_name() {
    let all = manifests();
    let configs: Vec<(String, Value)> = configmap_entries()
        .into_iter()
        .map(|(_, name, _, text)| (name, serde_yaml_ng::from_str(&text).unwrap()))
        .collect();
    let mut checked = 0;
    for (path, w) in all
        .iter()
        .filter(|(_, v)| ["Deployment", "DaemonSet"].contains(&kind(v)))
    {
        let spec = &w["spec"]["template"]["spec"];
        let Some(config) = spec["volumes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find_map(|v| v["configMap"]["name"].as_str())
            .and_then(|name| configs.iter().find(|(n, _)| n == name))
            .map(|(_, c)| c)
        else {
            continue;
        };
        let Some(k8s) = config["processors"]
            .as_mapping()
            .into_iter()
            .flatten()
            .find(|(k, _)| {
                let k = k.as_str().unwrap();
                let ty = k.split('/').next().unwrap();
                ty == "k8sattributes" || ty == "k8s_attributes"
            })
            .map(|(_, v)| v)
        else {
            continue;
        };
        let what = path.display();
        assert_ne!(
            spec["automountServiceAccountToken"].as_bool(),
            Some(false),
            "{what}"
        );
        let account = spec["serviceAccountName"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no serviceAccountName"));
        let namespace = w["metadata"]["namespace"].as_str().unwrap();
        assert!(
            all.iter().any(|(_, v)| kind(v) == "ServiceAccount"
                && v["metadata"]["name"].as_str() == Some(account)
                && v["metadata"]["namespace"].as_str() == Some(namespace)),
            "{what}: no ServiceAccount {account}"
        );
        let role = all
            .iter()
            .filter(|(_, v)| kind(v) == "ClusterRoleBinding")
            .find(|(_, b)| {
                b["subjects"].as_sequence().into_iter().flatten().any(|s| {
                    s["kind"].as_str() == Some("ServiceAccount")
                        && s["name"].as_str() == Some(account)
                        && s["namespace"].as_str() == Some(namespace)
                })
            })
            .map(|(_, b)| b["roleRef"]["name"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{what}: {account} is bound to no ClusterRole"));
        let (_, role) = all
            .iter()
            .find(|(_, v)| {
                kind(v) == "ClusterRole" && v["metadata"]["name"].as_str() == Some(&role)
            })
            .unwrap_or_else(|| panic!("{what}: no ClusterRole {role}"));
        for resource in ["pods", "namespaces", "nodes"] {
            for verb in ["get", "list", "watch"] {
                assert!(
                    role["rules"].as_sequence().into_iter().flatten().any(|r| {
                        let has = |key: &str, x: &str| {
                            r[key]
                                .as_sequence()
                                .into_iter()
                                .flatten()
                                .any(|v| v.as_str() == Some(x))
                        };
                        has("apiGroups", "") && has("resources", resource) && has("verbs", verb)
                    }),
                    "{what}: the role may not {verb} {resource}"
                );
            }
        }
        if let Some(var) = k8s["filter"]["node_from_env_var"].as_str() {
            let set = spec["containers"]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["env"].as_sequence().into_iter().flatten().any(|e| {
                        e["name"].as_str() == Some(var)
                            && e["valueFrom"]["fieldRef"]["fieldPath"].as_str()
                                == Some("spec.nodeName")
                    })
                });
            assert!(set, "{what}: {var} is not set from spec.nodeName");
            assert_eq!(
                kind(w),
                "DaemonSet",
                "{what}: a node filter on a Deployment"
            );
        }
        // Pids of other pods' processes are read in the host's /proc.
        if k8s["proc_root"].as_str().is_some_and(|r| !r.is_empty()) {
            assert_eq!(
                spec["hostPID"].as_bool(),
                Some(true),
                "{what}: proc_root without hostPID"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 1, "the node agent");
}
