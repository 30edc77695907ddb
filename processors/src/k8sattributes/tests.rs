use std::collections::HashSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod as ApiPod;
use profcol_model::memory::MemoryBudget;
use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use profcol_pipeline::config::{ComponentConfig, Kind};
use serde_json::json;

use super::cache::{Applied, Cache};
use super::config::K8sAttributesConfig;
use super::pod::{parse_image, pod_from_api};
use super::*;

fn plan(yaml: &str) -> Result<Plan, String> {
    plan_env(yaml, &|_| None)
}

fn plan_env(yaml: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Plan, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "k8sattributes", yaml)
        .map_err(|e| e.to_string())?;
    cfg.decode_checked(|c: &K8sAttributesConfig| c.compile_with(&cfg, env))
        .map(|(_, p)| p)
        .map_err(|e| e.to_string())
}

fn api_pod(name: &str, uid: &str, ip: &str) -> ApiPod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "shop", "uid": uid,
            "creationTimestamp": "2026-11-28T10:00:00Z",
            "labels": {"app": name, "pod-template-hash": "7d4b9c", "team.example/owner": "payments"},
            "annotations": {"note": "hi", "resource.opentelemetry.io/service.name": "checkout"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("{name}-7d4b9c"), "uid": "rs-uid"}],
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "main", "image": "registry.example:5000/team/api:1.2.3"}],
        },
        "status": {
            "podIP": ip, "startTime": "2026-11-28T10:00:01Z",
            "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0,
                "image": "x", "imageID": "", "containerID": format!("containerd://{uid}-c0")}],
        },
    }))
    .unwrap()
}

fn cache_with(plan: Plan, pods: &[ApiPod]) -> Cache {
    let plan = Arc::new(plan);
    let cache = Cache::new(plan.clone(), None);
    for p in pods {
        cache.upsert_pod(pod_from_api(&plan, p, None));
    }
    cache
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(A::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// `k=v` sorted; arrays as `[a,b]`.
fn flat(attrs: &[KeyValue]) -> Vec<String> {
    let mut out: Vec<String> = attrs
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(A::StringValue(s)) => s.clone(),
                Some(A::ArrayValue(a)) => format!(
                    "[{}]",
                    a.values
                        .iter()
                        .map(|v| match &v.value {
                            Some(A::StringValue(s)) => s.clone(),
                            other => format!("{other:?}"),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                other => format!("{other:?}"),
            };
            format!("{}={v}", kv.key)
        })
        .collect();
    out.sort();
    out
}

fn enrich(cache: &Cache, attrs: Vec<KeyValue>, conn: Option<&str>) -> (Vec<String>, String) {
    let mut attrs = attrs;
    let state = cache.read();
    let (status, _) = process_resource(&cache.plan, &state, &mut attrs, conn).unwrap();
    (flat(&attrs), status.to_string())
}

#[test]
fn the_default_rules_add_the_collectors_default_attributes_by_connection() {
    let cache = cache_with(plan("{}").unwrap(), &[api_pod("api", "u1", "10.0.0.1")]);
    let (got, status) = enrich(&cache, vec![kv("service.name", "api")], Some("10.0.0.1"));
    assert_eq!(status, "success");
    assert_eq!(
        got,
        [
            "container.image.name=registry.example:5000/team/api",
            "container.image.tags=[1.2.3]",
            "k8s.deployment.name=api",
            "k8s.namespace.name=shop",
            "k8s.node.name=node-1",
            "k8s.pod.name=api",
            "k8s.pod.start_time=2026-11-28T10:00:00Z",
            "k8s.pod.uid=u1",
            "service.name=api",
        ]
    );
    // No connection, no identifying attribute: nothing added, counted.
    let (got, status) = enrich(&cache, vec![kv("service.name", "api")], None);
    assert_eq!((got.len(), status.as_str()), (1, "error"));
}

#[test]
fn a_resource_keeps_its_own_values_but_an_empty_one_is_filled() {
    let cache = cache_with(plan("{}").unwrap(), &[api_pod("api", "u1", "10.0.0.1")]);
    let (got, _) = enrich(
        &cache,
        vec![
            kv("k8s.pod.ip", "10.0.0.1"),
            kv("k8s.pod.name", "mine"),
            kv("k8s.namespace.name", ""),
        ],
        None,
    );
    assert!(got.contains(&"k8s.pod.name=mine".to_string()), "{got:?}");
    assert!(
        got.contains(&"k8s.namespace.name=shop".to_string()),
        "{got:?}"
    );
}

#[test]
fn associations_are_tried_in_order_and_need_every_source() {
    let p = plan(
        "pod_association:
  - sources: [{from: resource_attribute, name: k8s.pod.name}, {from: resource_attribute, name: k8s.namespace.name}]
  - sources: [{from: resource_attribute, name: container.id}]
  - sources: [{from: connection}]
extract: {metadata: [k8s.pod.name, container.id]}",
    )
    .unwrap();
    let cache = cache_with(
        p,
        &[
            api_pod("a", "ua", "10.0.0.1"),
            api_pod("b", "ub", "10.0.0.2"),
        ],
    );
    // Name and namespace: pod b, though the connection says a.
    let (got, _) = enrich(
        &cache,
        vec![kv("k8s.pod.name", "b"), kv("k8s.namespace.name", "shop")],
        Some("10.0.0.1"),
    );
    assert!(got.contains(&"k8s.pod.name=b".to_string()), "{got:?}");
    // A name without its namespace does not identify: container.id does.
    let (got, _) = enrich(
        &cache,
        vec![kv("k8s.pod.name", "zzz"), kv("container.id", "ub-c0")],
        Some("10.0.0.1"),
    );
    assert!(got.contains(&"k8s.pod.name=zzz".to_string()), "{got:?}");
    let (got, status) = enrich(&cache, vec![kv("container.id", "ua-c0")], None);
    assert_eq!(status, "success");
    assert!(got.contains(&"k8s.pod.name=a".to_string()), "{got:?}");
    // Only the connection left.
    let (got, _) = enrich(&cache, vec![], Some("10.0.0.2"));
    assert_eq!(got, ["container.id=ub-c0", "k8s.pod.name=b"]);
    // With associations, only they identify a resource.
    let attrs = vec![kv("k8s.pod.uid", "ua")];
    assert!(super::extract_pod_id(&cache.plan, &attrs, None).is_none());
}

#[test]
fn labels_annotations_and_their_regexes_name_attributes_as_the_collector() {
    let p = plan(
        r#"extract:
  metadata: [k8s.pod.name]
  otel_annotations: true
  labels:
    - {key: app}
    - {tag_name: owner_$1, key_regex: 'team\.example/(.*)'}
  annotations:
    - {tag_name: the_note, key: note}
pod_association: [{sources: [{from: connection}]}]"#,
    );
    let p = p.unwrap_or_else(|e| panic!("{e}"));
    let cache = cache_with(p, &[api_pod("api", "u1", "10.0.0.1")]);
    let (got, _) = enrich(&cache, vec![], Some("10.0.0.1"));
    assert_eq!(
        got,
        [
            "k8s.pod.label.app=api",
            "k8s.pod.name=api",
            "owner_owner=payments",
            "service.name=checkout",
            "the_note=hi",
        ]
    );
}

#[test]
fn a_deleted_pod_answers_until_its_grace_period_ends() {
    let p = plan("pod_delete_grace_period: 30s").unwrap();
    let cache = cache_with(p, &[api_pod("api", "u1", "10.0.0.1")]);
    let held = cache.bytes();
    assert!(held > 0);
    cache.forget_pod("u1", Default::default());
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.1")).1, "success");
    assert_eq!(cache.expire(Instant::now(), Duration::from_secs(30)), 0);
    let removed = cache.expire(
        Instant::now() + Duration::from_secs(31),
        Duration::from_secs(30),
    );
    assert_eq!(removed, 3, "uid, connection and k8s.pod.ip");
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.1")).1, "error");
    assert_eq!(cache.bytes(), 0, "every byte of the pod is given back");
}

#[test]
fn a_new_pod_takes_a_reused_ip_and_the_old_ones_delete_spares_it() {
    let p = plan("extract: {metadata: [k8s.pod.name]}").unwrap();
    let cache = cache_with(p, &[api_pod("old", "u1", "10.0.0.1")]);
    cache.forget_pod("u1", Default::default());
    let plan = cache.plan.clone();
    let mut newer = api_pod("new", "u2", "10.0.0.1");
    newer.status.as_mut().unwrap().start_time =
        Some(serde_json::from_value(json!("2026-11-28T11:00:00Z")).unwrap());
    assert_eq!(
        cache.upsert_pod(pod_from_api(&plan, &newer, None)),
        Applied::Added
    );
    cache.expire(
        Instant::now() + Duration::from_secs(500),
        Duration::from_secs(120),
    );
    assert_eq!(
        enrich(&cache, vec![], Some("10.0.0.1")).0,
        ["k8s.pod.name=new"]
    );
}

#[test]
fn an_ip_change_retires_the_old_ip_after_the_grace_period() {
    let p = plan("extract: {metadata: [k8s.pod.name]}").unwrap();
    let cache = cache_with(p, &[api_pod("api", "u1", "10.0.0.1")]);
    let plan = cache.plan.clone();
    let moved = pod_from_api(&plan, &api_pod("api", "u1", "10.0.0.9"), None);
    assert_eq!(cache.upsert_pod(moved), Applied::Updated);
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.9")).1, "success");
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.1")).1, "success");
    cache.expire(
        Instant::now() + Duration::from_secs(121),
        Duration::from_secs(120),
    );
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.1")).1, "error");
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.9")).1, "success");
}

#[test]
fn a_relist_forgets_pods_it_no_longer_has() {
    let p = plan("pod_delete_grace_period: 0s").unwrap();
    let cache = cache_with(
        p,
        &[
            api_pod("a", "ua", "10.0.0.1"),
            api_pod("b", "ub", "10.0.0.2"),
        ],
    );
    let listed: HashSet<String> = ["ub".to_string()].into();
    assert_eq!(cache.forget_pods_not_in(&listed), 1);
    cache.expire(Instant::now(), Duration::ZERO);
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.1")).1, "error");
    assert_eq!(enrich(&cache, vec![], Some("10.0.0.2")).1, "success");
}

#[test]
fn the_cache_is_reserved_in_the_memory_budget_and_bounded_by_it() {
    let budget = MemoryBudget::new(64 << 10);
    let p = Arc::new(plan("{}").unwrap());
    let cache = Cache::new(p.clone(), None);
    cache.attach(budget.try_admit(0).unwrap());
    let mut added = 0;
    let mut refused = 0;
    for i in 0..1000 {
        let pod = pod_from_api(
            &p,
            &api_pod(
                &format!("p{i}"),
                &format!("u{i}"),
                &format!("10.1.{}.{}", i / 250, i % 250),
            ),
            None,
        );
        match cache.upsert_pod(pod) {
            Applied::Refused => refused += 1,
            _ => added += 1,
        }
    }
    assert!(
        added > 10 && refused > 0,
        "{added} added, {refused} refused"
    );
    assert_eq!(budget.used(), cache.bytes());
    assert!(budget.used() <= 64 << 10);
    drop(cache);
    assert_eq!(budget.used(), 0);
}

#[test]
fn passthrough_only_records_the_connection_address() {
    let cache = cache_with(plan("passthrough: true").unwrap(), &[]);
    let mut attrs = vec![];
    let state = cache.read();
    assert!(process_resource(&cache.plan, &state, &mut attrs, Some("10.0.0.7")).is_none());
    assert_eq!(flat(&attrs), ["k8s.pod.ip=10.0.0.7"]);
}

#[test]
fn images_split_as_docker_references() {
    let cases = [
        ("nginx", Some(("nginx", "latest"))),
        ("nginx:1.25", Some(("nginx", "1.25"))),
        ("localhost:5000/a/b", Some(("localhost:5000/a/b", "latest"))),
        ("localhost:5000/a/b:v2", Some(("localhost:5000/a/b", "v2"))),
        ("a/b:v2@sha256:abcd", Some(("a/b", "v2"))),
        ("", None),
    ];
    for (image, want) in cases {
        let got = parse_image(image);
        assert_eq!(
            got.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
            want,
            "{image}"
        );
    }
}

#[test]
fn config_errors_name_the_key_and_the_reason() {
    let e = plan("extract: {metadata: [k8s.pod.name, k8s.bogus, k8s.deployment.uid]}").unwrap_err();
    assert!(
        e.contains("extract::metadata::1") && e.contains("not a supported metadata field"),
        "{e}"
    );
    assert!(
        e.contains("extract::metadata::2") && e.contains("not supported by profcol"),
        "{e}"
    );
    let e = plan("auth_type: tls").unwrap_err();
    assert!(
        e.contains("auth_type") && e.contains("not supported by profcol"),
        "{e}"
    );
    let e = plan("pod_association: [{sources: [{from: nowhere}]}]").unwrap_err();
    assert!(e.contains("pod_association::0::sources::0::from"), "{e}");
    let e = plan("extract: {labels: [{key: a, key_regex: b}]}").unwrap_err();
    assert!(
        e.contains("extract::labels::0") && e.contains("only one option"),
        "{e}"
    );
    let e = plan("filter: {labels: [{key: a, op: like}]}").unwrap_err();
    assert!(e.contains("filter::labels::0::op"), "{e}");
    let e = plan("filter: {node_from_env_var: K8S_NODE_NAME}").unwrap_err();
    assert!(
        e.contains("filter::node_from_env_var") && e.contains("K8S_NODE_NAME"),
        "{e}"
    );
    let e = plan("extract: {metdata: []}").unwrap_err();
    assert!(e.contains("metdata"), "{e}");
    let ok = plan_env(
        "filter: {node_from_env_var: K8S_NODE_NAME, labels: [{key: app, op: exists}], fields: [{key: status.phase, value: Running, op: not-equals}]}",
        &|n| (n == "K8S_NODE_NAME").then(|| "node-7".to_string()),
    )
    .unwrap();
    assert_eq!(
        ok.field_selector,
        "spec.nodeName=node-7,status.phase!=Running"
    );
    assert_eq!(ok.label_selector, "app");
}
