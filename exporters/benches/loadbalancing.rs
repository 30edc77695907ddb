//! The `loadbalancing` exporter's own work on a mixed batch (100k samples,
//! 20 services, one shared dictionary), before the network: a routing key
//! per profile, its owner on the ring, the cut into one self-contained
//! part per backend (3 backends), and each part encoded as its request.
//! The baseline is prost decode of the same request (issue target: at most
//! 0.2x); prost encode of the whole batch, what any export of a changed
//! batch pays, is shown beside it. Also the ring lookup alone.
//! Ends with a summary (best of runs, so that the machine's load moves
//! little).
//!
//! Runs with mimalloc, the allocator of the `profcol` binary.
//!
//! `cargo bench -p profcol-exporters --bench loadbalancing`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;

use profcol_exporters::loadbalancing::ring::{hash_bytes, HashRing};
use profcol_exporters::loadbalancing::routing;
use profcol_exporters::loadbalancing::RoutingKey;
use profcol_exporters::settled::Settled;
use profcol_model::proto::{any_value::Value, AnyValue, KeyValue, ProfilesData};
use profcol_model::{synth, ProfileBatch};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;
const SERVICES: usize = 20;

fn mixed() -> ProfilesData {
    let mut data = synth::Config {
        samples: SAMPLES,
        resources: SERVICES,
        ..synth::Config::default()
    }
    .build();
    for (i, r) in data.resource_profiles.iter_mut().enumerate() {
        let res = r.resource.get_or_insert_with(Default::default);
        res.attributes.retain(|a| a.key != "service.name");
        res.attributes.push(KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(format!("svc-{i}"))),
            }),
            ..KeyValue::default()
        });
    }
    data
}

fn backends() -> HashRing {
    HashRing::new((1..=3).map(|i| format!("10.0.0.{i}:4317")))
}

/// Keys, owners and parts.
fn route(data: &ProfilesData, key: RoutingKey, ring: &HashRing) -> Vec<routing::Part> {
    let mut keys = Vec::new();
    routing::profile_keys(data, key, &mut keys);
    let mut owner = Vec::new();
    routing::assign(
        &keys,
        &Settled::none("loadbalancing", keys.len()),
        ring,
        &mut owner,
    )
    .expect("backends");
    routing::split(data, &owner, ring.endpoints().len())
}

/// What an export does before sending: the parts, each encoded.
fn route_and_encode(data: &ProfilesData, key: RoutingKey, ring: &HashRing) -> Vec<Vec<u8>> {
    route(data, key, ring)
        .iter()
        .map(|p| p.subset.encode(data))
        .collect()
}

fn bench(c: &mut Criterion) {
    let data = mixed();
    let bytes = data.encode_to_vec();
    let ring = backends();
    let parts = route(&data, RoutingKey::Service, &ring);
    eprintln!(
        "{} samples, {SERVICES} services, {} bytes; {} parts of {:?} samples",
        ProfileBatch::new(data.clone()).sample_count(),
        bytes.len(),
        parts.len(),
        parts.iter().map(|p| p.subset.samples()).collect::<Vec<_>>()
    );

    let mut g = c.benchmark_group("loadbalancing");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.sample_size(10);
    g.bench_function("prost_decode", |b| {
        b.iter(|| ProfilesData::decode(black_box(bytes.as_slice())).unwrap())
    });
    for key in [RoutingKey::Service, RoutingKey::TraceId] {
        g.bench_function(format!("route_split_encode_{key}"), |b| {
            b.iter(|| route_and_encode(black_box(&data), key, &ring))
        });
    }
    g.finish();

    let keys: Vec<u64> = (0..10_000)
        .map(|i| hash_bytes(format!("key-{i}").as_bytes()))
        .collect();
    let ten = HashRing::new((1..=10).map(|i| format!("10.0.0.{i}:4317")));
    let mut g = c.benchmark_group("ring");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("owner_10_endpoints", |b| {
        b.iter(|| keys.iter().map(|&k| ten.owner(k).unwrap()).sum::<u32>())
    });
    g.finish();

    summary(&data, &bytes, &ring, &ten, &keys);
}

/// Best of `runs` timings of `f`, each dropping its result untimed.
fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            let out = black_box(f());
            let took = t.elapsed();
            drop(out);
            took
        })
        .min()
        .unwrap()
}

fn summary(data: &ProfilesData, bytes: &[u8], ring: &HashRing, ten: &HashRing, keys: &[u64]) {
    let decode = best(30, || ProfilesData::decode(bytes).unwrap());
    println!(
        "\nloadbalancing: {SAMPLES} samples, {SERVICES} services, 3 backends; \
         prost decode {decode:.2?} ({:.0} ns/sample)",
        decode.as_nanos() as f64 / SAMPLES as f64
    );
    let encode = best(30, || data.encode_to_vec());
    println!(
        "  (prost encode of the whole batch: {:.2}x prost decode)",
        encode.as_secs_f64() / decode.as_secs_f64()
    );
    for key in [RoutingKey::Service, RoutingKey::TraceId] {
        let split = best(30, || route(data, key, ring));
        let t = best(30, || route_and_encode(data, key, ring));
        println!(
            "  routing_key {key}: route + split {:.3}x; + encoding the parts {t:.2?}, \
             {:.0} ns/sample, {:.2}x prost decode (target 0.2x)",
            split.as_secs_f64() / decode.as_secs_f64(),
            t.as_nanos() as f64 / SAMPLES as f64,
            t.as_secs_f64() / decode.as_secs_f64()
        );
    }
    // Where the time goes: the owners alone.
    let owners = best(30, || {
        let mut k = Vec::new();
        routing::profile_keys(data, RoutingKey::TraceId, &mut k);
        let mut owner = Vec::new();
        routing::assign(
            &k,
            &Settled::none("loadbalancing", k.len()),
            ring,
            &mut owner,
        )
        .map(|()| owner)
    });
    println!(
        "    of which keys and owners {:.3}x prost decode",
        owners.as_secs_f64() / decode.as_secs_f64()
    );
    let t = best(30, || {
        keys.iter().map(|&k| ten.owner(k).unwrap()).sum::<u32>()
    });
    println!(
        "  ring lookup, 10 endpoints: {:.1} ns/key",
        t.as_nanos() as f64 / keys.len() as f64
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
