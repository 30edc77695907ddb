use std::collections::HashSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod as ApiPod;
use profcol_model::memory::MemoryBudget;
use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use profcol_model::ProfileBatch;
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

// ---------------------------------------------------------------------------
// Per-sample association, on profiles shaped as the eBPF profiler sends them.
// ---------------------------------------------------------------------------

fn container(i: usize) -> String {
    format!("{:064x}", 0xc0_0000 + i)
}

fn ebpf_pod(i: usize) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("p{i}"), "namespace": "shop", "uid": format!("u{i}"),
            "creationTimestamp": "2026-11-28T10:00:00Z"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "img:1"}]},
        "status": {"podIP": format!("10.0.1.{i}"), "containerStatuses": [{"name": "main", "ready": true,
            "restartCount": 0, "image": "img:1", "imageID": "",
            "containerID": format!("containerd://{}", container(i))}]},
    })
}

/// Each sample's attributes, `k=v`, sorted.
fn sample_attrs(data: &profcol_model::proto::ProfilesData) -> Vec<Vec<String>> {
    let d = data.dictionary.as_ref().unwrap();
    profcol_model::profiles(&data.resource_profiles)
        .flat_map(|p| &p.samples)
        .map(|s| {
            let mut v: Vec<String> = s
                .attribute_indices
                .iter()
                .map(|&i| {
                    let kv = &d.attribute_table[i as usize];
                    let val = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::StringValue(s)) => s.clone(),
                        Some(A::IntValue(n)) => n.to_string(),
                        other => format!("{other:?}"),
                    };
                    format!("{}={val}", d.string_table[kv.key_strindex as usize])
                })
                .collect();
            v.sort();
            v
        })
        .collect()
}

fn run_on(
    p: &mut dyn Processor,
    data: profcol_model::proto::ProfilesData,
) -> (profcol_model::proto::ProfilesData, Vec<(&'static str, u64)>) {
    let mut b = ProfileBatch::new(data);
    let mut ctx = ProcessContext::deferred("profiles", "k8sattributes");
    assert_eq!(p.process(&mut b, &mut ctx), Verdict::Keep);
    let data = b.data().clone();
    profcol_model::validate(&data).unwrap();
    (data, ctx.into_counts().events)
}

#[test]
fn samples_get_their_pods_attributes_interned_once_per_pod() {
    let pods: Vec<_> = (0..3).map(ebpf_pod).collect();
    let mut p = with_pods(
        "pod_association: [{sources: [{from: sample_attribute, name: container.id}]}]
extract: {metadata: [k8s.pod.name, k8s.namespace.name, k8s.container.name, container.image.name]}",
        &pods,
    )
    .unwrap();
    // Processes 0..5 in pods 0..2; process 5 in a container no pod has.
    let data = ebpf_like(12, 6, |i| {
        if i == 5 {
            "f".repeat(64)
        } else {
            container(i % 3)
        }
    });
    let before = data.dictionary.as_ref().unwrap().attribute_table.len();
    let (out, events) = run_on(&mut *p, data);
    let got = sample_attrs(&out);
    let c0 = container(0);
    assert_eq!(
        got[0],
        [
            format!("container.id={c0}"),
            "container.image.name=img".into(),
            "k8s.container.name=main".into(),
            "k8s.namespace.name=shop".into(),
            "k8s.pod.name=p0".into(),
            "process.pid=1000".into(),
            "thread.name=worker-0".into(),
        ]
    );
    assert!(
        got[4].contains(&"k8s.pod.name=p1".to_string()),
        "{:?}",
        got[4]
    );
    assert_eq!(
        got[5].len(),
        3,
        "process 5 is in no known pod: {:?}",
        got[5]
    );
    // Each pod's 4 attributes interned once, shared by its samples.
    let d = out.dictionary.as_ref().unwrap();
    assert_eq!(d.attribute_table.len(), before + 3 * 4);
    let samples: Vec<_> = profcol_model::profiles(&out.resource_profiles)
        .flat_map(|p| &p.samples)
        .collect();
    assert_eq!(
        samples[0].attribute_indices[3..],
        samples[3].attribute_indices[3..]
    );
    assert_eq!(
        events,
        [("samples_associated", 10), ("samples_unassociated", 2)]
    );
}

#[test]
fn a_samples_own_attributes_win() {
    let mut p = with_pods(
        "pod_association: [{sources: [{from: sample_attribute, name: container.id}]}]
extract: {metadata: [k8s.pod.name, k8s.container.name]}",
        &[ebpf_pod(0)],
    )
    .unwrap();
    let mut data = ebpf_like(2, 1, |_| container(0));
    // The first sample already names its container.
    let d = data.dictionary.as_mut().unwrap();
    d.string_table.push("k8s.container.name".into());
    d.attribute_table
        .push(profcol_model::proto::KeyValueAndUnit {
            key_strindex: d.string_table.len() as i32 - 1,
            value: Some(AnyValue {
                value: Some(A::StringValue("mine".into())),
            }),
            unit_strindex: 0,
        });
    let own = d.attribute_table.len() as i32 - 1;
    data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0]
        .attribute_indices
        .push(own);
    let (out, _) = run_on(&mut *p, data);
    let got = sample_attrs(&out);
    assert!(
        got[0].contains(&"k8s.container.name=mine".to_string()),
        "{:?}",
        got[0]
    );
    assert!(
        !got[0].contains(&"k8s.container.name=main".to_string()),
        "{:?}",
        got[0]
    );
    assert!(
        got[1].contains(&"k8s.container.name=main".to_string()),
        "{:?}",
        got[1]
    );
}

#[test]
fn a_process_pid_finds_its_container_through_proc() {
    let proc_root = tempfile::tempdir().unwrap();
    for i in 0..4 {
        let dir = proc_root.path().join((1000 + i).to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let cgroup = match i {
            // cgroup v2, systemd driver
            0 => format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu0.slice/cri-containerd-{}.scope\n", container(0)),
            // cgroup v1, cgroupfs driver
            1 => format!("12:memory:/kubepods/burstable/podu1/{}\n11:cpu:/kubepods/burstable/podu1/{}\n", container(1), container(1)),
            // a process outside any container
            2 => "0::/system.slice/sshd.service\n".to_string(),
            _ => format!("0::/system.slice/docker-{}.scope\n", container(2)),
        };
        std::fs::write(dir.join("cgroup"), cgroup).unwrap();
    }
    let pods: Vec<_> = (0..3).map(ebpf_pod).collect();
    let mut p = with_pods(
        &format!(
            "proc_root: {}
pod_association: [{{sources: [{{from: sample_attribute, name: process.pid}}]}}]
extract: {{metadata: [k8s.pod.name]}}",
            proc_root.path().display()
        ),
        &pods,
    )
    .unwrap();
    // Samples with only process.pid (and thread.name); pid 1004 has no /proc entry.
    let mut data = ebpf_like(5, 5, |_| String::new());
    for s in &mut data.resource_profiles[0].scope_profiles[0].profiles[0].samples {
        s.attribute_indices.remove(1);
    }
    let (out, events) = run_on(&mut *p, data);
    let names: Vec<Option<String>> = sample_attrs(&out)
        .into_iter()
        .map(|a| a.into_iter().find(|kv| kv.starts_with("k8s.pod.name=")))
        .collect();
    assert_eq!(
        names,
        [
            Some("k8s.pod.name=p0".into()),
            Some("k8s.pod.name=p1".into()),
            None,
            Some("k8s.pod.name=p2".into()),
            None
        ]
    );
    assert_eq!(
        events,
        [("samples_associated", 3), ("samples_unassociated", 2)]
    );
}

#[test]
fn sample_association_config_is_checked() {
    let e = plan("pod_association: [{sources: [{from: sample_attribute, name: process.pid}]}]")
        .unwrap_err();
    assert!(
        e.contains("pod_association::0::sources::0::name") && e.contains("proc_root"),
        "{e}"
    );
    let e = plan("pod_association: [{sources: [{from: sample_attribute, name: container.id}, {from: connection}]}]").unwrap_err();
    assert!(
        e.contains("pod_association::0::sources") && e.contains("mixed"),
        "{e}"
    );
    plan("pod_association: [{sources: [{from: sample_attribute, name: k8s.pod.uid}]}]").unwrap();
}

#[test]
fn cgroup_paths_name_their_container() {
    use super::samples::container_in_cgroup;
    let c = container(9);
    assert_eq!(
        container_in_cgroup(&format!("0::/kubepods.slice/x/cri-containerd-{c}.scope")),
        Some(c.clone())
    );
    assert_eq!(
        container_in_cgroup(&format!("3:pids:/docker/{c}\n")),
        Some(c.clone())
    );
    assert_eq!(
        container_in_cgroup("0::/user.slice/user-1000.slice/session-2.scope"),
        None
    );
    // 63 or 65 hex digits are no container id.
    assert_eq!(container_in_cgroup(&format!("0::/x/{}", &c[1..])), None);
    assert_eq!(container_in_cgroup(&format!("0::/x/a{c}")), None);
}

#[test]
fn a_batch_held_as_received_is_enriched_without_decoding_its_samples() {
    let mut p = K8sAttributes::new(plan("{}").unwrap());
    p.cache.upsert_pod(pod_from_api(
        &p.plan,
        &api_pod("api", "u1", "10.0.0.1"),
        None,
    ));
    let meta = profcol_model::BatchMeta {
        client_addr: Some("10.0.0.1:4317".parse().unwrap()),
        ..Default::default()
    };
    let b = crate::transform::tests::edited_as_bytes(&mut p, meta);
    for attrs in crate::transform::tests::resource_attrs(&b) {
        assert!(attrs.contains(&"k8s.pod.name=api".to_string()), "{attrs:?}");
    }
}
