//! The `k8sattributes` processor through the binary, against the fake
//! Kubernetes API server of `common::fake_k8s` (reached through a
//! kubeconfig, `auth_type: kubeConfig`): pods listed, then added, changed
//! and deleted through the watch; a watch that breaks and resumes from its
//! `resourceVersion`; a `410 Gone` that forces a relist; an API that
//! forbids the watch. Then the real Collector's `k8s_attributes` and
//! profcol on the same fake, same config, same requests: the resources
//! they export must agree.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use serde_json::json;

use crate::common::fake_k8s::{pod, FakeK8s};
use crate::common::{self, client, metric, otelcol, Ports, Running, Sink};

/// `body` indented under the processor's key.
fn indent(body: &str) -> String {
    body.lines().map(|l| format!("    {l}\n")).collect()
}

fn profcol_config(sink: &Sink, kind: &str, body: &str) -> String {
    format!(
        r#"receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
processors:
  {kind}:
{body}exporters:
  otlp:
    endpoint: 127.0.0.1:{port}
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [{kind}]
      exporters: [otlp]
"#,
        body = indent(body),
        port = sink.addr.port()
    )
}

async fn start_profcol(fake: &FakeK8s, dir: &tempfile::TempDir, config: &str) -> Running {
    let path = dir.path().join("profcol.yaml");
    std::fs::write(&path, config).unwrap();
    Running::ready(
        common::profcol()
            .arg("--config")
            .arg(&path)
            .env("KUBECONFIG", fake.kubeconfig(dir.path())),
    )
    .await
}

/// A request of one resource per attribute set, each with the samples of
/// a recorded request.
fn request(resources: &[&[(&str, &str)]]) -> ExportProfilesServiceRequest {
    let mut req = common::request("otlp/minimal-request.bin");
    let template = req.resource_profiles[0].clone();
    req.resource_profiles = resources
        .iter()
        .map(|attrs| {
            let mut rp = template.clone();
            rp.resource.get_or_insert_with(Default::default).attributes = attrs
                .iter()
                .map(|(k, v)| KeyValue {
                    key: k.to_string(),
                    value: Some(AnyValue {
                        value: Some(A::StringValue(v.to_string())),
                    }),
                    ..Default::default()
                })
                .collect();
            rp
        })
        .collect();
    req
}

/// Each exported resource's attributes, `k=v`, sorted.
fn resources(req: &ExportProfilesServiceRequest) -> Vec<Vec<String>> {
    req.resource_profiles
        .iter()
        .map(|rp| {
            let mut out: Vec<String> = rp
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
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
        })
        .collect()
}

/// Polls `cond` until it holds, failing after 20 s with `what`.
async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `req` and returns the resources of what the sink gets for it.
async fn through(p: &Running, sink: &Sink, req: ExportProfilesServiceRequest) -> Vec<Vec<String>> {
    let before = sink.received().len();
    client(p.grpc_port()).await.export(req).await.unwrap();
    until("the export", || async { sink.received().len() > before }).await;
    resources(&sink.received()[before])
}

fn has(resource: &[String], kv: &str) -> bool {
    resource.iter().any(|a| a == kv)
}

const PROCESSOR: &str = r#"auth_type: kubeConfig
pod_delete_grace_period: 1s
extract:
  metadata: [k8s.pod.name, k8s.pod.uid, k8s.namespace.name, k8s.node.name, container.image.name, container.image.tags]
  labels:
    - {key: app}
    - {key: team, from: namespace}
pod_association:
  - sources: [{from: resource_attribute, name: k8s.pod.ip}]
  - sources: [{from: resource_attribute, name: k8s.pod.uid}]
"#;

fn namespace(name: &str, team: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "uid": format!("ns-{name}"), "labels": {"team": team}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profcol_follows_the_pods_through_watch_breaks_and_relists() {
    let fake = FakeK8s::start().await;
    fake.apply("namespaces", namespace("shop", "payments"));
    fake.apply("pods", pod("shop", "a", "ua", "10.0.0.1", "node-1"));
    fake.apply("pods", pod("shop", "b", "ub", "10.0.0.2", "node-1"));
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let p = start_profcol(
        &fake,
        &dir,
        &profcol_config(&sink, "k8sattributes", PROCESSOR),
    )
    .await;
    let m = p.metrics_port();
    until("the first list", || async {
        metric(m, "otelcol_k8s_watcher_pod_added_total").await >= 2
            && metric(m, "otelcol_k8s_watcher_namespace_added_total").await >= 1
    })
    .await;

    // By IP, by uid, and an IP no pod has.
    let got = through(
        &p,
        &sink,
        request(&[
            &[("k8s.pod.ip", "10.0.0.1")],
            &[("k8s.pod.uid", "ub"), ("service.name", "b")],
            &[("k8s.pod.ip", "10.9.9.9")],
        ]),
    )
    .await;
    assert_eq!(
        got[0],
        [
            "container.image.name=registry.example/a",
            "container.image.tags=[1.2.3]",
            "k8s.namespace.label.team=payments",
            "k8s.namespace.name=shop",
            "k8s.node.name=node-1",
            "k8s.pod.ip=10.0.0.1",
            "k8s.pod.label.app=a",
            "k8s.pod.name=a",
            "k8s.pod.uid=ua",
        ]
    );
    assert!(
        has(&got[1], "k8s.pod.name=b") && has(&got[1], "service.name=b"),
        "{got:?}"
    );
    assert_eq!(got[2], ["k8s.pod.ip=10.9.9.9"]);
    assert!(
        metric(
            m,
            "otelcol_k8s_pod_association_total{processor=\"k8sattributes\",status=\"error\""
        )
        .await
            >= 1
    );

    // A change arrives through the watch.
    let mut a2 = pod("shop", "a", "ua", "10.0.0.1", "node-1");
    a2["metadata"]["labels"]["app"] = json!("a-v2");
    fake.apply("pods", a2);
    until("the update", || async {
        metric(m, "otelcol_k8s_watcher_pod_updated_total").await >= 1
    })
    .await;
    let got = through(&p, &sink, request(&[&[("k8s.pod.ip", "10.0.0.1")]])).await;
    assert!(has(&got[0], "k8s.pod.label.app=a-v2"), "{got:?}");

    // A broken watch resumes from the last version it saw, without a list.
    let seen = fake.version();
    let lists = |fake: &FakeK8s| {
        fake.requests()
            .iter()
            .filter(|r| r.starts_with("/api/v1/pods") && !r.contains("watch=true"))
            .count()
    };
    assert_eq!(lists(&fake), 1);
    fake.break_watches();
    fake.apply("pods", pod("shop", "c", "uc", "10.0.0.3", "node-2"));
    until("pod c", || async {
        metric(m, "otelcol_k8s_watcher_pod_added_total").await >= 3
    })
    .await;
    let resumed = format!("resourceVersion={seen}");
    assert!(
        fake.requests().iter().any(|r| r.starts_with("/api/v1/pods")
            && r.contains("watch=true")
            && r.contains(&resumed)),
        "no watch resumed from {seen}: {:?}",
        fake.requests()
    );
    assert_eq!(lists(&fake), 1, "a resumed watch lists nothing");
    let got = through(&p, &sink, request(&[&[("k8s.pod.ip", "10.0.0.3")]])).await;
    assert!(has(&got[0], "k8s.node.name=node-2"), "{got:?}");

    // Events the client missed, then a history it can no longer resume
    // from: 410 Gone, a relist, and b (deleted meanwhile) is forgotten
    // once its grace period has passed.
    fake.hold(true);
    fake.delete("pods", "shop", "b");
    fake.apply("pods", pod("shop", "d", "ud", "10.0.0.4", "node-1"));
    fake.compact();
    fake.break_watches();
    fake.hold(false);
    until("the relist", || async { lists(&fake) >= 2 }).await;
    until("pod d", || async {
        let got = through(&p, &sink, request(&[&[("k8s.pod.ip", "10.0.0.4")]])).await;
        has(&got[0], "k8s.pod.name=d")
    })
    .await;
    until("pod b forgotten", || async {
        let got = through(&p, &sink, request(&[&[("k8s.pod.uid", "ub")]])).await;
        !has(&got[0], "k8s.pod.name=b")
    })
    .await;
    // Pods the relist kept are still there.
    let got = through(&p, &sink, request(&[&[("k8s.pod.uid", "uc")]])).await;
    assert!(has(&got[0], "k8s.pod.name=c"), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidding_api_leaves_batches_unenriched_and_counted() {
    let fake = FakeK8s::start().await;
    fake.apply("pods", pod("shop", "a", "ua", "10.0.0.1", "node-1"));
    fake.forbid("pods");
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let p = start_profcol(
        &fake,
        &dir,
        &profcol_config(&sink, "k8sattributes", PROCESSOR),
    )
    .await;
    let m = p.metrics_port();
    until("a failed watch", || async {
        metric(
            m,
            "profcol_k8s_watch_errors_total{processor=\"k8sattributes\",resource=\"pods\"}",
        )
        .await
            >= 1
    })
    .await;
    // The batch passes as it came, counted.
    let started = Instant::now();
    let got = through(&p, &sink, request(&[&[("k8s.pod.ip", "10.0.0.1")]])).await;
    assert_eq!(got[0], ["k8s.pod.ip=10.0.0.1"]);
    assert!(
        metric(
            m,
            "otelcol_k8s_pod_association_total{processor=\"k8sattributes\",status=\"error\""
        )
        .await
            >= 1
    );
    // The watch keeps retrying (with backoff, not in a tight loop); once
    // the API allows it, it lists and batches are enriched again.
    let errors = metric(
        m,
        "profcol_k8s_watch_errors_total{processor=\"k8sattributes\",resource=\"pods\"}",
    )
    .await;
    fake.allow("pods");
    until("enriched again", || async {
        through(&p, &sink, request(&[&[("k8s.pod.ip", "10.0.0.1")]])).await[0]
            .contains(&"k8s.pod.name=a".to_string())
    })
    .await;
    let retries = metric(
        m,
        "profcol_k8s_watch_errors_total{processor=\"k8sattributes\",resource=\"pods\"}",
    )
    .await;
    let elapsed = started.elapsed().as_secs();
    assert!(
        retries - errors <= 2 * elapsed + 5,
        "{errors} then {retries} watch errors in {elapsed}s: no backoff"
    );
}

/// The processor of the comparison: the Collector's defaults plus labels
/// and annotations of pods and namespaces, every association source.
const SHARED: &str = r#"auth_type: kubeConfig
wait_for_metadata: true
extract:
  metadata: [k8s.namespace.name, k8s.pod.name, k8s.pod.uid, k8s.pod.start_time, k8s.pod.ip, k8s.node.name, k8s.deployment.name, k8s.replicaset.name, k8s.container.name, container.id, container.image.name, container.image.tags]
  labels:
    - {key: app}
    - {tag_name: tier, key: tier}
    - {key: team, from: namespace}
  annotations:
    - {key_regex: 'note/.*'}
pod_association:
  - sources: [{from: resource_attribute, name: k8s.pod.ip}]
  - sources: [{from: resource_attribute, name: k8s.pod.uid}]
  - sources: [{from: resource_attribute, name: container.id}]
  - sources: [{from: connection}]
"#;

fn cluster(fake: &FakeK8s) {
    fake.apply("namespaces", namespace("shop", "payments"));
    fake.apply("namespaces", namespace("ops", "sre"));
    let mut web = pod("shop", "web-7d4b9c-x1", "uw", "10.0.0.1", "node-1");
    web["metadata"]["labels"] =
        json!({"app": "web", "tier": "front", "pod-template-hash": "7d4b9c"});
    web["metadata"]["annotations"] = json!({"note/owner": "ana", "other": "x"});
    web["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "rs-web", "controller": true}]);
    fake.apply("pods", web);
    // Two containers: attributes of a container only by its id.
    let mut db = pod("ops", "db", "ud", "10.0.0.2", "node-2");
    db["spec"]["containers"] = json!([
        {"name": "main", "image": "postgres:16"},
        {"name": "sidecar", "image": "registry.example/proxy"},
    ]);
    db["status"]["containerStatuses"] = json!([
        {"name": "main", "ready": true, "restartCount": 2, "image": "postgres:16", "imageID": "", "containerID": "containerd://db-main"},
        {"name": "sidecar", "ready": true, "restartCount": 0, "image": "registry.example/proxy", "imageID": "", "containerID": "containerd://db-side"},
    ]);
    fake.apply("pods", db);
    // The pod both collectors' clients connect from.
    fake.apply("pods", pod("ops", "loader", "ul", "127.0.0.1", "node-2"));
}

fn shared_requests() -> ExportProfilesServiceRequest {
    request(&[
        &[("k8s.pod.ip", "10.0.0.1")],
        &[("k8s.pod.uid", "ud"), ("service.name", "db")],
        &[("container.id", "db-side")],
        &[("container.id", "db-main"), ("k8s.pod.name", "")],
        &[("service.name", "by-connection")],
        &[("k8s.pod.ip", "10.9.9.9"), ("k8s.namespace.name", "shop")],
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_and_profcol_add_the_same_attributes() {
    let Some(bin) = otelcol::binary() else { return };
    let fake = FakeK8s::start().await;
    cluster(&fake);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path());

    let (c_sink, p_sink) = (Sink::start().await, Sink::start().await);
    let c_port = c_sink.addr.port();
    // `wait_for_metadata`: the Collector is healthy once its cache is.
    let (collector, _cdir, ports) = otelcol::start_on_free_ports_with(
        &bin,
        2,
        |ports| {
            format!(
                r#"receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{}
processors:
  k8s_attributes:
{}exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:{c_port}
    tls:
      insecure: true
extensions:
  health_check:
    endpoint: 127.0.0.1:{}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [k8s_attributes]
      exporters: [otlp_grpc]
"#,
                ports[0],
                indent(SHARED),
                ports[1]
            )
        },
        &[("KUBECONFIG", kubeconfig.as_os_str())],
    )
    .await;
    let p = start_profcol(
        &fake,
        &dir,
        &profcol_config(&p_sink, "k8s_attributes", SHARED),
    )
    .await;
    let m = p.metrics_port();
    until("profcol's first list", || async {
        metric(m, "otelcol_k8s_watcher_pod_added_total").await >= 3
            && metric(m, "otelcol_k8s_watcher_namespace_added_total").await >= 2
    })
    .await;

    let profcol = through(&p, &p_sink, shared_requests()).await;
    let before = c_sink.received().len();
    client(ports[0])
        .await
        .export(shared_requests())
        .await
        .unwrap();
    until("the Collector's export", || async {
        c_sink.received().len() > before
    })
    .await;
    let collector_out = resources(&c_sink.received()[before]);
    drop(collector);
    assert_eq!(
        profcol, collector_out,
        "profcol (left) and the Collector (right) differ"
    );
    // The comparison saw enrichment, not two pass-throughs.
    assert!(has(&profcol[0], "k8s.deployment.name=web"), "{profcol:?}");
    assert!(has(&profcol[4], "k8s.pod.name=loader"), "{profcol:?}");
}

/// Per-sample association through the binary, on a request shaped as the
/// eBPF profiler sends it: one resource, samples naming their process
/// and container. Each sample gets its pod's attributes; the resource
/// gets none (it is the node's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_of_one_node_resource_get_their_own_pods() {
    let container = |i: usize| format!("{:064x}", 0xc0_0000 + i);
    let fake = FakeK8s::start().await;
    for i in 0..3 {
        let mut p = pod(
            "shop",
            &format!("p{i}"),
            &format!("u{i}"),
            &format!("10.0.0.{i}"),
            "node-1",
        );
        p["status"]["containerStatuses"][0]["containerID"] =
            json!(format!("containerd://{}", container(i)));
        fake.apply("pods", p);
    }
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let body = "auth_type: kubeConfig
extract: {metadata: [k8s.pod.name, k8s.namespace.name]}
pod_association: [{sources: [{from: sample_attribute, name: container.id}]}]
";
    let p = start_profcol(&fake, &dir, &profcol_config(&sink, "k8sattributes", body)).await;
    let m = p.metrics_port();
    until("the first list", || async {
        metric(m, "otelcol_k8s_watcher_pod_added_total").await >= 3
    })
    .await;
    // 8 processes in containers 0, 1, 2 and one no pod has.
    let data = profcol_processors::k8sattributes::ebpf_like(64, 8, |i| {
        if i % 4 == 3 {
            "e".repeat(64)
        } else {
            container(i % 4)
        }
    });
    let req = ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    };
    client(p.grpc_port()).await.export(req).await.unwrap();
    until("the export", || async { !sink.received().is_empty() }).await;
    let got = sink.received().remove(0);
    assert_eq!(resources(&got), [["host.name=node-1"]]);
    let d = got.dictionary.as_ref().unwrap();
    let pod_of = |s: &profcol_model::proto::Sample| {
        s.attribute_indices.iter().find_map(|&i| {
            let kv = &d.attribute_table[i as usize];
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(A::StringValue(s)) => s.clone(),
                _ => return None,
            };
            let key = if kv.key_strindex != 0 {
                d.string_table[kv.key_strindex as usize].clone()
            } else {
                return None;
            };
            (key == "k8s.pod.name").then_some(value)
        })
    };
    let samples = &got.resource_profiles[0].scope_profiles[0].profiles[0].samples;
    assert_eq!(samples.len(), 64);
    for (k, s) in samples.iter().enumerate() {
        let want = match (k % 8) % 4 {
            3 => None,
            c => Some(format!("p{c}")),
        };
        assert_eq!(pod_of(s), want, "sample {k}");
    }
    assert_eq!(
        metric(m, "profcol_processor_events_total{processor=\"k8sattributes\",event=\"samples_associated\"}").await,
        48
    );
}
