//! The `batch` processor merging 10, 20 and 40 small requests (20 samples
//! each, as sidecars send them), from one service and from as many
//! services as requests: the time per input request must stay flat as the
//! batch grows (issue target: at most 1.1x from 10 to 40), since the merge
//! is linear in the total input. Ends with a summary of the time per
//! request and the merged request's encoded size against its inputs'.
//!
//! Runs with mimalloc, the allocator of the `profcol` binary.
//!
//! `cargo bench -p profcol-processors --bench batch`

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use prost::Message;

use profcol_model::{synth, ProfileBatch};
use profcol_pipeline::component::{StageContext, Stateful};
use profcol_pipeline::telemetry::Telemetry;
use profcol_processors::batch::{Batch, BatchConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: [usize; 3] = [10, 20, 40];
const SAMPLES: usize = 20;

/// The encoded requests: `n` from one service, or from `n` services.
fn inputs(n: usize, distinct: bool) -> Vec<Bytes> {
    let services = if distinct { n } else { 1 };
    synth::service_requests(n, services, SAMPLES)
        .into_iter()
        .map(|d| Bytes::from(d.encode_to_vec()))
        .collect()
}

fn decoded(inputs: &[Bytes]) -> Vec<ProfileBatch> {
    inputs
        .iter()
        .map(|b| ProfileBatch::decode(b.clone()).unwrap())
        .collect()
}

/// Everything `batch` does to merge the batches into one and send it.
fn merge(batches: Vec<ProfileBatch>, telemetry: &Telemetry) -> Vec<ProfileBatch> {
    let mut b = Batch::new(&BatchConfig {
        send_batch_size: 0,
        timeout: profcol_pipeline::config::Duration::from_secs(3600),
        ..BatchConfig::default()
    });
    let ctx = StageContext {
        pipeline: "profiles",
        processor: "batch",
        telemetry,
    };
    let mut out = Vec::new();
    let now = Instant::now();
    for batch in batches {
        b.accept(batch, now, &mut out, &ctx);
    }
    b.flush(&mut out, &ctx);
    out
}

fn bench(c: &mut Criterion) {
    let telemetry = Telemetry::new();
    let mut g = c.benchmark_group("batch");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_millis(500));
    for distinct in [false, true] {
        for n in SIZES {
            let bytes = inputs(n, distinct);
            g.throughput(Throughput::Elements(n as u64));
            let name = format!(
                "merge_{n}_{}",
                if distinct { "services" } else { "one_service" }
            );
            g.bench_function(&name, |b| {
                b.iter_batched(
                    || decoded(&bytes),
                    |batches| black_box(merge(batches, &telemetry)),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
    summary(&telemetry);
}

/// Time per input request (best of runs, so that the machine's load moves
/// little) and encoded sizes, per case.
fn summary(telemetry: &Telemetry) {
    println!("\nbatch merge: time per input request, merged size / inputs' size");
    for distinct in [false, true] {
        let mut per_request = Vec::new();
        for n in SIZES {
            let bytes = inputs(n, distinct);
            let best = (0..200)
                .map(|_| {
                    let batches = decoded(&bytes);
                    let t = Instant::now();
                    black_box(merge(batches, telemetry));
                    t.elapsed()
                })
                .min()
                .unwrap();
            let out = merge(decoded(&bytes), telemetry);
            let size_in: usize = bytes.iter().map(Bytes::len).sum();
            let size_out: usize = out.iter().map(|b| b.encoded_len()).sum();
            let each = best / n as u32;
            per_request.push(each);
            println!(
                "  {n:>2} requests, {:<11}: {:>7.1} us/request, {size_out} of {size_in} bytes ({:.0} %)",
                if distinct { "n services" } else { "one service" },
                each.as_secs_f64() * 1e6,
                size_out as f64 * 100.0 / size_in as f64
            );
        }
        println!(
            "  40 vs 10: {:.2}x per request (target <= 1.1x)",
            per_request[2].as_secs_f64() / per_request[0].as_secs_f64()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
