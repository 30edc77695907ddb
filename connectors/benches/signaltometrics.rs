//! `signaltometrics` with `context: sample` on one request of 100k
//! samples (synth: one service, 5000 stacks over 4000 functions, 16
//! threads, aggregated values), three
//! definitions: CPU by service and leaf function, samples by thread, and
//! profiles received (the Collector's per-profile context). The baseline
//! is prost decode of the same request (issue target: within 0.3x).
//!
//! `cargo bench -p profcol-connectors --bench signaltometrics -- --warm-up-time 1 --measurement-time 3`

use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;

use profcol_connectors::signaltometrics;
use profcol_model::proto::ProfilesData;
use profcol_model::{synth, ProfileBatch};
use profcol_pipeline::component::Connector;
use profcol_pipeline::config::{ComponentConfig, Kind};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;

const DEFINITIONS: &str = r#"
profiles:
  - name: profile.cpu.time
    unit: ns
    context: sample
    include_resource_attributes: [{key: service.name}]
    attributes: [{key: function.name}]
    sum: {value: sample.value, monotonic: true}
  - name: profile.samples
    context: sample
    include_resource_attributes: [{key: service.name}]
    attributes: [{key: thread.name, default_value: none}]
    sum: {value: "1", monotonic: true}
  - name: profiles.received
    include_resource_attributes: [{key: service.name}]
    sum: {value: "1", monotonic: true}
"#;

fn bench(c: &mut Criterion) {
    let mut data = synth::Config {
        samples: SAMPLES,
        stacks: 5000,
        timestamps: false,
        ..synth::Config::default()
    }
    .build();
    for rp in &mut data.resource_profiles {
        rp.resource
            .get_or_insert_with(Default::default)
            .attributes
            .push(profcol_model::proto::KeyValue {
                key: "service.name".into(),
                value: Some(profcol_model::proto::AnyValue {
                    value: Some(profcol_model::proto::any_value::Value::StringValue(
                        "checkout".into(),
                    )),
                }),
                ..Default::default()
            });
    }
    let bytes = Bytes::from(data.encode_to_vec());
    let batch = ProfileBatch::new(data);
    let samples = batch.sample_count();
    let cfg = ComponentConfig::from_yaml(Kind::Connector, "signaltometrics", DEFINITIONS).unwrap();
    let Connector::ToMetrics(convert) = signaltometrics::factory().create(&cfg).unwrap() else {
        unreachable!()
    };
    // It does what it says: every sample's value is in the CPU metric
    // (past 2000 functions, in its overflow point).
    {
        use profcol_model::proto::metrics::{metric::Data, number_data_point::Value};
        let want: i64 = batch
            .data()
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .flat_map(|s| &s.profiles)
            .flat_map(|p| &p.samples)
            .flat_map(|s| &s.values)
            .sum();
        let req = convert.convert(&batch).unwrap();
        let mut got = 0;
        for m in req
            .resource_metrics
            .iter()
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
            .filter(|m| m.name == "profile.cpu.time")
        {
            let Some(Data::Sum(sum)) = &m.data else {
                panic!()
            };
            for p in &sum.data_points {
                if let Some(Value::AsInt(v)) = p.value {
                    got += v;
                }
            }
        }
        assert_eq!(got, want);
        assert!(want > 0);
    }
    println!("request: {} bytes, {samples} samples", bytes.len());

    let mut g = c.benchmark_group("signaltometrics");
    g.throughput(Throughput::Elements(samples));
    g.bench_function("prost_decode", |b| {
        b.iter(|| ProfilesData::decode(&bytes[..]).unwrap())
    });
    g.bench_function("three_definitions", |b| b.iter(|| convert.convert(&batch)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
