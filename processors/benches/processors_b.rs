//! `thread_pruning` and `sampling` on a 100k-sample, 20k-stack request,
//! against the prost decode every request pays anyway. Ends with a summary:
//! each as a ratio to prost decode (issue target: within 0.3x), both timed
//! without dropping what they leave, on a fresh and a steady heap
//! ([`turns`]).
//!
//! `cargo bench -p profcol-processors --bench processors_b -- --warm-up-time 1 --measurement-time 3`

use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::synth;

mod configured;
mod turns;

use configured::processor;

/// The binary's allocator: freeing the `Vec`s of merged or dropped samples
/// is a large part of this work, and mimalloc frees several times faster.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;

fn processors(c: &mut Criterion) {
    let data = synth::request(SAMPLES, STACKS);
    let bytes = Bytes::from(data.encode_to_vec());
    // Ten resources of one profile each, for per-profile decisions.
    let ten = synth::Config {
        samples: SAMPLES,
        stacks: STACKS,
        resources: 10,
        ..synth::Config::default()
    }
    .build();
    let ten_bytes = Bytes::from(ten.encode_to_vec());
    println!(
        "request: {} bytes, {} samples, {} stacks",
        bytes.len(),
        SAMPLES,
        data.dictionary.as_ref().map_or(0, |d| d.stack_table.len())
    );

    {
        let mut g = c.benchmark_group("processors_b");
        g.throughput(Throughput::Elements(SAMPLES as u64));
        g.bench_function("prost_decode", |b| {
            b.iter(|| ProfilesData::decode(&bytes[..]).unwrap())
        });
        g.finish();
    }

    let mut rows = Vec::new();
    let tp = profcol_processors::thread_pruning::factory();
    rows.push(configured::bench(
        c,
        "processors_b",
        "thread_pruning_default",
        &bytes,
        SAMPLES,
        processor(&*tp, "{}"),
    ));
    rows.push(configured::bench(
        c,
        "processors_b",
        "thread_pruning_rename",
        &bytes,
        SAMPLES,
        processor(
            &*tp,
            r#"
rename_threads:
  - pattern: 'worker-\d+'
    replacement: 'worker-*'
"#,
        ),
    ));
    rows.push(configured::bench(
        c,
        "processors_b",
        "thread_pruning_drop_and_min",
        &bytes,
        SAMPLES,
        processor(
            &*tp,
            r#"
drop_threads: ['worker-1\d']
min_samples_per_thread: 2
"#,
        ),
    ));

    let s = profcol_processors::sampling::factory();
    rows.push(configured::bench(
        c,
        "processors_b",
        "sampling_trace_50",
        &bytes,
        SAMPLES,
        processor(
            &*s,
            "{sampling_percentage: 50, mode: trace, fail_closed: false}",
        ),
    ));
    rows.push(configured::bench(
        c,
        "processors_b",
        "sampling_trace_50_fail_closed",
        &bytes,
        SAMPLES,
        processor(&*s, "{sampling_percentage: 50, mode: trace}"),
    ));
    rows.push(configured::bench(
        c,
        "processors_b",
        "sampling_session_50_ten_resources",
        &ten_bytes,
        SAMPLES,
        processor(&*s, "{sampling_percentage: 50, mode: session}"),
    ));

    println!("{}", turns::header(SAMPLES, STACKS));
    for (name, timing) in rows {
        println!("{}", turns::line(&name, &timing, 0.3));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1));
    targets = processors
}
criterion_main!(benches);
