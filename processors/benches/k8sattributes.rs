//! `k8sattributes` per-sample association on profiles shaped as the
//! OpenTelemetry eBPF profiler sends them: one resource, 100k samples from
//! 500 processes in 50 pods, each sample with `process.pid`,
//! `container.id` and `thread.name`; associated by `container.id`. The
//! baseline is prost decode of the same request (issue target: within
//! 0.2x).
//!
//! `cargo bench -p profcol-processors --bench k8sattributes -- --warm-up-time 1 --measurement-time 3`

use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use prost::Message;
use serde_json::json;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::ProcessContext;
use profcol_processors::k8sattributes::{ebpf_like, with_pods};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;
const PROCESSES: usize = 500;
const PODS: usize = 50;

fn container(pod: usize) -> String {
    format!("{:064x}", 0xc0_0000 + pod)
}

fn pod(i: usize) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("shop-{i}-7d4b9c-x{i}"), "namespace": "shop", "uid": format!("uid-{i}"),
            "creationTimestamp": "2026-11-28T10:00:00Z",
            "labels": {"app": format!("shop-{i}"), "pod-template-hash": "7d4b9c"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("shop-{i}-7d4b9c"), "uid": format!("rs-{i}")}]},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": format!("registry.example/shop-{i}:1.0")}]},
        "status": {"podIP": format!("10.0.{}.{}", i / 250, i % 250), "containerStatuses": [{"name": "main",
            "ready": true, "restartCount": 0, "image": "x", "imageID": "",
            "containerID": format!("containerd://{}", container(i))}]},
    })
}

fn bench(c: &mut Criterion) {
    let data = ebpf_like(SAMPLES, PROCESSES, |p| container(p % PODS));
    let bytes = Bytes::from(data.encode_to_vec());
    let pods: Vec<_> = (0..PODS).map(pod).collect();
    let yaml = "pod_association: [{sources: [{from: sample_attribute, name: container.id}]}]
extract:
  metadata: [k8s.namespace.name, k8s.pod.name, k8s.pod.uid, k8s.deployment.name, k8s.node.name, k8s.container.name, container.image.name]
  labels: [{key: app}]";
    let mut p = with_pods(yaml, &pods).unwrap();
    // It does what it says: every sample gets its pod.
    {
        let mut b = ProfileBatch::new(data.clone());
        let mut ctx = ProcessContext::deferred("profiles", "k8sattributes");
        p.process(&mut b, &mut ctx);
        let events = ctx.into_counts().events;
        assert_eq!(
            events[0],
            ("samples_associated", SAMPLES as u64),
            "{events:?}"
        );
        profcol_model::validate(b.data()).unwrap();
    }
    println!("request: {} bytes, {SAMPLES} samples", bytes.len());

    let mut g = c.benchmark_group("k8sattributes");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.bench_function("prost_decode", |b| {
        b.iter(|| ProfilesData::decode(&bytes[..]).unwrap())
    });
    g.bench_function("per_sample_association", |b| {
        b.iter_batched(
            || ProfileBatch::new(data.clone()),
            |mut batch| {
                let mut ctx = ProcessContext::deferred("profiles", "k8sattributes");
                p.process(&mut batch, &mut ctx);
                batch
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
