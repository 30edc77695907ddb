//! Dictionary work against the baseline every request pays anyway: prost
//! decode + encode of the same request.
//!
//! `cargo bench -p profcol-pipeline --bench dictionary`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use prost::Message;

use profcol_pipeline::model::dictionary::{dedup, gc, merge_all};
use profcol_pipeline::model::{synth, validate};
use profcol_pipeline::proto::ProfilesData;

const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;

fn dictionary(c: &mut Criterion) {
    let data = synth::request(SAMPLES, STACKS);
    let bytes = data.encode_to_vec();
    // Ten requests holding as many samples in total, from the same program.
    let parts = synth::requests(10, SAMPLES / 10, STACKS / 10);
    // Half of the samples dropped, as a pruning processor would.
    let mut pruned = data.clone();
    for p in pruned
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles)
    {
        let mut k = 0;
        p.samples.retain(|_| {
            k += 1;
            k % 2 == 0
        });
    }

    let mut g = c.benchmark_group("dictionary");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.sample_size(20);
    println!(
        "request: {} bytes, {} samples, {} stacks",
        bytes.len(),
        SAMPLES,
        data.dictionary.as_ref().map_or(0, |d| d.stack_table.len())
    );

    g.bench_function("prost_decode_encode", |b| {
        b.iter(|| {
            let d = ProfilesData::decode(bytes.as_slice()).unwrap();
            d.encode_to_vec()
        })
    });
    g.bench_function("prost_decode", |b| {
        b.iter(|| ProfilesData::decode(bytes.as_slice()).unwrap())
    });
    let part_bytes: Vec<Vec<u8>> = parts.iter().map(|p| p.encode_to_vec()).collect();
    g.bench_function("prost_decode_encode_10_parts", |b| {
        b.iter(|| {
            part_bytes
                .iter()
                .map(|p| ProfilesData::decode(p.as_slice()).unwrap().encode_to_vec())
                .collect::<Vec<_>>()
        })
    });
    g.bench_function("validate", |b| b.iter(|| validate(&data).unwrap()));
    g.bench_function("merge_10", |b| {
        b.iter_batched(|| parts.clone(), merge_all, BatchSize::LargeInput)
    });
    g.bench_function("gc_after_dropping_half", |b| {
        b.iter_batched(
            || pruned.clone(),
            |mut d| {
                gc(&mut d);
                d
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("dedup", |b| {
        b.iter_batched(
            || data.clone(),
            |mut d| {
                dedup(&mut d);
                d
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, dictionary);
criterion_main!(benches);
