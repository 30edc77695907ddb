//! The OTTL processors on a 100k-sample, 20k-stack request of 100
//! resources (one profile each), against the prost decode every request
//! pays anyway: `transform` with five typical statements (issue target
//! <= 0.3x) and `filter` dropping half the profiles (<= 0.1x). Ends with
//! a summary in turns, as `processors_b` does ([`turns`]).
//!
//! `cargo bench -p profcol-processors --bench ottl -- --warm-up-time 1 --measurement-time 3`

use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::synth;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Verdict};
use profcol_pipeline::telemetry::Telemetry;

mod configured;
mod turns;

use configured::processor;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;
const RESOURCES: usize = 100;

/// What a deployment's transform typically does: set the environment,
/// drop a costly attribute, tag by service, rewrite a host name and derive
/// an attribute from another.
const TRANSFORM: &str = r#"
error_mode: ignore
profile_statements:
  - context: resource
    statements:
      - set(resource.attributes["deployment.environment.name"], "production")
      - delete_key(resource.attributes, "process.command_line")
      - replace_pattern(resource.attributes["service.instance.id"], "^instance-(\\d+)$", "i-$$1")
  - context: profile
    statements:
      - set(profile.attributes["team"], "platform") where resource.attributes["service.name"] == "synth-app"
      - set(profile.attributes["instance"], Concat([resource.attributes["service.instance.id"], "cpu"], "/"))
"#;

/// Drops the profiles of even-numbered instances: half of them.
const FILTER: &str = r#"
error_mode: ignore
profile_conditions:
  - IsMatch(resource.attributes["service.instance.id"], "[02468]$")
"#;

fn ottl(c: &mut Criterion) {
    let data = synth::Config {
        samples: SAMPLES,
        stacks: STACKS,
        resources: RESOURCES,
        ..synth::Config::default()
    }
    .build();
    let bytes = Bytes::from(data.encode_to_vec());
    println!(
        "request: {} bytes, {SAMPLES} samples, {RESOURCES} resources",
        bytes.len()
    );
    {
        let mut g = c.benchmark_group("ottl");
        g.throughput(Throughput::Elements(SAMPLES as u64));
        g.bench_function("prost_decode", |b| {
            b.iter(|| ProfilesData::decode(&bytes[..]).unwrap())
        });
        g.finish();
    }

    // The statements do what they say on this request, or the figures
    // below would time a no-op.
    let mut check = ProfileBatch::decode(bytes.clone()).expect("decode");
    let telemetry = Telemetry::new();
    let mut ctx = ProcessContext::new("bench", "check", &telemetry);
    let mut f = processor(&*profcol_processors::filter::factory(), FILTER);
    assert_eq!(f.process(&mut check, &mut ctx), Verdict::Keep);
    let left = check.data().resource_profiles.len();
    assert_eq!(left, RESOURCES / 2, "filter keeps half the profiles");
    let mut check = ProfileBatch::decode(bytes.clone()).expect("decode");
    let mut t = processor(&*profcol_processors::transform::factory(), TRANSFORM);
    assert_eq!(t.process(&mut check, &mut ctx), Verdict::Keep);
    let resource = check.data().resource_profiles[7].resource.as_ref().unwrap();
    let keys: Vec<&str> = resource
        .attributes
        .iter()
        .map(|kv| kv.key.as_str())
        .collect();
    assert!(keys.contains(&"deployment.environment.name"), "{keys:?}");
    let data = check.data();
    let dict = data.dictionary.as_ref().expect("a dictionary");
    let profile = &data.resource_profiles[7].scope_profiles[0].profiles[0];
    let keys: Vec<&str> = profile
        .attribute_indices
        .iter()
        .map(|&i| {
            dict.string_table[dict.attribute_table[i as usize].key_strindex as usize].as_str()
        })
        .collect();
    assert!(
        keys.contains(&"team") && keys.contains(&"instance"),
        "{keys:?}"
    );

    let transform = profcol_processors::transform::factory();
    let filter = profcol_processors::filter::factory();
    let rows = vec![
        (
            configured::bench(
                c,
                "ottl",
                "transform_five_statements",
                &bytes,
                SAMPLES,
                processor(&*transform, TRANSFORM),
            ),
            0.3,
        ),
        (
            configured::bench(
                c,
                "ottl",
                "filter_drop_half",
                &bytes,
                SAMPLES,
                processor(&*filter, FILTER),
            ),
            0.1,
        ),
    ];
    println!("{}", turns::header(SAMPLES, STACKS));
    for ((name, timing), target) in rows {
        println!("{}", turns::line(&name, &timing, target));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1));
    targets = ottl
}
criterion_main!(benches);
