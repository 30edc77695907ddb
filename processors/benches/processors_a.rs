//! `dictionary_dedup` and `unit_normalization` on a 100k-sample, 20k-stack
//! request, against prost decode of the same request (the cost every
//! request pays anyway). Also merging 10 and 20 requests, to show that
//! merging dictionaries is linear in their total size.
//!
//! Ends with a summary: each processor as a ratio to prost decode (issue
//! target: `dictionary_dedup` within 1x, `unit_normalization` within 0.3x).
//!
//! Runs with mimalloc, the allocator of the `profcol` binary: combining
//! samples frees one allocation per folded sample, which the system
//! allocator makes several times dearer.
//!
//! `cargo bench -p profcol-processors --bench processors_a`

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use prost::Message;

use profcol_model::dictionary::{merge_all, DictionaryBuilder};
use profcol_model::proto::{ProfilesData, ValueType};
use profcol_model::{synth, ProfileBatch};
use profcol_pipeline::component::{ProcessContext, Processor};
use profcol_pipeline::telemetry::Telemetry;
use profcol_processors::dictionary_dedup::{DictionaryDedup, DictionaryDedupConfig};
use profcol_processors::unit_normalization::{normalize_batch, Options, Target};

mod turns;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;

fn processors(c: &mut Criterion) {
    let data = synth::request(SAMPLES, STACKS);
    let bytes = Bytes::from(data.encode_to_vec());
    println!(
        "request: {} bytes, {} samples, {} stacks",
        bytes.len(),
        SAMPLES,
        data.dictionary.as_ref().map_or(0, |d| d.stack_table.len())
    );
    let received = || ProfileBatch::decode(bytes.clone()).unwrap();

    let mut g = c.benchmark_group("processors_a");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.sample_size(20);
    g.bench_function("prost_decode", |b| {
        b.iter(|| ProfilesData::decode(&bytes[..]).unwrap())
    });

    for (name, cfg) in [
        ("dictionary_dedup", DictionaryDedupConfig::default()),
        // The table rebuild alone, without combining samples.
        (
            "dictionary_dedup_tables_only",
            DictionaryDedupConfig {
                merge_samples: false,
                ..Default::default()
            },
        ),
    ] {
        let (mut p, telemetry) = (DictionaryDedup::new(cfg), Telemetry::new());
        g.bench_function(name, |b| {
            b.iter_batched(
                received,
                |mut batch| {
                    p.process(
                        &mut batch,
                        &mut ProcessContext::new("bench", name, &telemetry),
                    );
                    batch
                },
                BatchSize::LargeInput,
            )
        });
    }

    for (name, opts) in [
        // Renames `nanoseconds` to `ns` in place: the common case.
        (
            "unit_normalization_ucum",
            Options {
                target: Target::Ucum,
                ..Options::default()
            },
        ),
        // Already in the pprof vocabulary: a read-only pass.
        (
            "unit_normalization_pprof_unchanged",
            Options {
                target: Target::Pprof,
                ..Options::default()
            },
        ),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                received,
                |mut batch| {
                    normalize_batch(&mut batch, &opts);
                    batch
                },
                BatchSize::LargeInput,
            )
        });
    }

    // A Sentry-style `samples`/`count` profile of timestamps: every sample
    // gets values, and the orphaned type strings are collected.
    let counted = Bytes::from(as_sample_counts(data.clone()).encode_to_vec());
    let to_time = Options {
        target: Target::Ucum,
        scale_to_base: true,
        samples_to_time: true,
    };
    summary(&bytes, &counted, &to_time);
    g.bench_function("prost_decode_sample_counts", |b| {
        b.iter(|| ProfilesData::decode(&counted[..]).unwrap())
    });
    g.bench_function("unit_normalization_samples_to_time", |b| {
        b.iter_batched(
            || ProfileBatch::decode(counted.clone()).unwrap(),
            |mut batch| {
                normalize_batch(&mut batch, &to_time);
                batch
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    // Same samples per request, twice the requests: twice the time if linear.
    // `distinct`: every request has its own locations and stacks (synth seeds
    // differ), so the merged dictionary grows with each one and soon outgrows
    // the CPU caches. `same_program`: requests of one binary with the same
    // dictionary, the steady state of batching one service.
    let mut m = c.benchmark_group("merge");
    m.sample_size(10);
    for n in [10, 20, 40] {
        let same = synth::request(SAMPLES / 10, STACKS / 10);
        for (kind, parts) in [
            ("distinct", synth::requests(n, SAMPLES / 10, STACKS / 10)),
            ("same_program", vec![same; n]),
        ] {
            m.throughput(Throughput::Elements((n * SAMPLES / 10) as u64));
            m.bench_function(format!("{kind}_{n}_requests"), |b| {
                b.iter_batched(|| parts.clone(), merge_all, BatchSize::LargeInput)
            });
        }
    }
    m.finish();
}

/// Each processor on a received batch, as a ratio to prost decode of the
/// same request (`counted`: the request as `samples`/`count` profiles),
/// timed in turns with it ([`turns`]).
fn summary(bytes: &Bytes, counted: &Bytes, to_time: &Options) {
    // The processor, which keeps its buffers from batch to batch.
    let dedup = |cfg| turns::processor(bytes, &mut DictionaryDedup::new(cfg));
    let normalize = |b: &Bytes, opts: Options| {
        turns::in_turns(b, |batch| {
            black_box(normalize_batch(batch, &opts));
        })
    };
    let rows = [
        (
            "dictionary_dedup",
            dedup(DictionaryDedupConfig::default()),
            1.0,
        ),
        (
            "dictionary_dedup_tables_only",
            dedup(DictionaryDedupConfig {
                merge_samples: false,
                ..Default::default()
            }),
            1.0,
        ),
        (
            "unit_normalization_ucum",
            normalize(bytes, Options::default()),
            0.3,
        ),
        (
            "unit_normalization_pprof_unchanged",
            normalize(
                bytes,
                Options {
                    target: Target::Pprof,
                    ..Options::default()
                },
            ),
            0.3,
        ),
        (
            "unit_normalization_samples_to_time",
            normalize(counted, *to_time),
            0.3,
        ),
    ];
    println!("{}", turns::header(SAMPLES, STACKS));
    for (name, timing, target) in rows {
        println!("{}", turns::line(name, &timing, target));
    }
}

/// `data` with its profiles' sample type set to `samples`/`count`.
fn as_sample_counts(mut data: ProfilesData) -> ProfilesData {
    let mut b = DictionaryBuilder::from_dictionary(data.dictionary.take().unwrap_or_default());
    let sample_type = ValueType {
        type_strindex: b.string("samples"),
        unit_strindex: b.string("count"),
    };
    for p in data
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles)
    {
        p.sample_type = Some(sample_type);
    }
    data.dictionary = Some(b.finish());
    data
}

criterion_group!(benches, processors);
criterion_main!(benches);
