//! Dictionary work against the baseline every request pays anyway: prost
//! decode + encode of the same request.
//!
//! `cargo bench -p profcol-model --bench dictionary`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};
use prost::Message;

use profcol_model::dictionary::{dedup, gc, merge_all};
use profcol_model::proto::ProfilesData;
use profcol_model::{synth, validate};

const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;

struct Inputs {
    data: ProfilesData,
    bytes: Vec<u8>,
    /// Ten requests holding as many samples in total, from the same program.
    parts: Vec<ProfilesData>,
    /// Half of the samples dropped, as a pruning processor would.
    pruned: ProfilesData,
}

fn inputs() -> Inputs {
    let data = synth::request(SAMPLES, STACKS);
    let bytes = data.encode_to_vec();
    let parts = synth::requests(10, SAMPLES / 10, STACKS / 10);
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
    Inputs {
        data,
        bytes,
        parts,
        pruned,
    }
}

fn dictionary(c: &mut Criterion, i: &Inputs) {
    let Inputs {
        data,
        bytes,
        parts,
        pruned,
    } = i;
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
    g.bench_function("validate", |b| b.iter(|| validate(data).unwrap()));
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

/// Fastest of `runs` timings of `f` on a fresh input from `setup`; what
/// `f` returns is dropped after the timing (freeing a batch is no part of
/// collecting or merging it).
fn best_of<T, O>(runs: usize, mut setup: impl FnMut() -> T, mut f: impl FnMut(T) -> O) -> Duration {
    (0..runs)
        .map(|_| {
            let input = setup();
            let t = Instant::now();
            let out = black_box(f(input));
            let took = t.elapsed();
            drop(out);
            took
        })
        .min()
        .unwrap()
}

fn main() {
    let i = inputs();
    let mut c = Criterion::default().configure_from_args();
    dictionary(&mut c, &i);
    c.final_summary();

    // The figures: each as a ratio to raw prost decode+encode of
    // the same bytes (the 100k-sample request).
    let raw = best_of(
        15,
        || (),
        |_| {
            let data = ProfilesData::decode(i.bytes.as_slice()).unwrap();
            let bytes = data.encode_to_vec();
            (data, bytes)
        },
    );
    let merge = best_of(15, || i.parts.clone(), merge_all);
    let collect = best_of(
        15,
        || i.pruned.clone(),
        |mut d| {
            gc(&mut d);
            d
        },
    );
    let check = best_of(15, || (), |_| validate(black_box(&i.data)).unwrap());
    println!("\nsummary (best of 15 runs), ratio to raw prost decode+encode ({raw:.2?}):");
    for (what, d) in [
        ("validate", check),
        ("merge of 10 requests", merge),
        ("gc after dropping half", collect),
    ] {
        println!(
            "  {what:<24} {d:>9.2?} = {:.2}x",
            d.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
