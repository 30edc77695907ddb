//! What an OTLP-in, OTLP-out pipeline without mutating processors costs per
//! request: decode, validate every dictionary index, encode for the
//! exporter. The baseline is raw prost decode + encode of the same bytes.
//!
//! A batch nobody mutates keeps the bytes it arrived as, so "encode" is a
//! reference-count bump; `decode_validate_reencode` is the cost once a
//! processor has changed the batch.
//!
//! `cargo bench -p profcol-model --bench passthrough`

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_model::footprint::{estimate_decoded, heap_bytes};
use profcol_model::proto::{ExportProfilesServiceRequest, ProfilesData};
use profcol_model::testing::best_of;
use profcol_model::ProfileBatch;
use profcol_model::{synth, validate};

fn raw_prost(bytes: &[u8]) -> usize {
    let req = ExportProfilesServiceRequest::decode(bytes).unwrap();
    req.encode_to_vec().len()
}

/// What the receiver does with a request: reserve memory for the decoded
/// size read off the wire, decode, validate, count what the batch holds.
fn pass_through(bytes: &Bytes) -> usize {
    let estimate = estimate_decoded(bytes);
    let batch = ProfileBatch::decode(bytes.clone()).unwrap();
    validate(batch.data()).unwrap();
    black_box(estimate + batch.held_bytes());
    batch.encode_to_bytes().len()
}

fn reencode(bytes: &Bytes) -> usize {
    let mut batch = ProfileBatch::decode(bytes.clone()).unwrap();
    validate(batch.data()).unwrap();
    // Any mutation drops the received bytes.
    batch.data_mut();
    batch.encode_to_bytes().len()
}

fn main() {
    // (samples, distinct stacks)
    let sizes = [(1_000, 400), (100_000, 20_000)];
    let requests: Vec<(usize, Bytes)> = sizes
        .iter()
        .map(|&(n, stacks)| (n, Bytes::from(synth::request(n, stacks).encode_to_vec())))
        .collect();
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    for (n, bytes) in &requests {
        // Sanity: the pass-through answer is the request, byte for byte.
        let batch = ProfileBatch::decode(bytes.clone()).unwrap();
        assert_eq!(batch.encode_to_bytes(), *bytes);
        assert_eq!(
            ProfilesData::decode(bytes.clone()).unwrap().encode_to_vec(),
            bytes.to_vec()
        );
        let mut g = c.benchmark_group(format!("passthrough_{n}"));
        g.throughput(Throughput::Elements(*n as u64));
        g.bench_function("prost_decode_encode", |b| {
            b.iter(|| raw_prost(black_box(bytes)))
        });
        g.bench_function("decode_validate_passthrough", |b| {
            b.iter(|| pass_through(black_box(bytes)))
        });
        g.bench_function("decode_validate_reencode", |b| {
            b.iter(|| reencode(black_box(bytes)))
        });
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of 15 runs), ratio to raw prost decode+encode:");
    for (n, bytes) in &requests {
        let raw = best_of(15, || {
            black_box(raw_prost(black_box(bytes)));
        });
        let pass = best_of(15, || {
            black_box(pass_through(black_box(bytes)));
        });
        let re = best_of(15, || {
            black_box(reencode(black_box(bytes)));
        });
        let rate = |d: Duration| *n as f64 / d.as_secs_f64() / 1e6;
        let estimate = best_of(15, || {
            black_box(estimate_decoded(black_box(bytes)));
        });
        let decoded = ProfilesData::decode(bytes.clone()).unwrap();
        let heap = best_of(15, || {
            black_box(heap_bytes(black_box(&decoded)));
        });
        println!(
            "  {n:>7} samples: memory estimate off the wire {estimate:>9.2?} = {:.2}x, heap size of the decoded batch {heap:>9.2?} = {:.2}x",
            estimate.as_secs_f64() / raw.as_secs_f64(),
            heap.as_secs_f64() / raw.as_secs_f64(),
        );
        println!(
            "  {n:>7} samples, {:>9} bytes: prost {raw:>9.2?} ({:.1} M samples/s); decode+validate+pass-through {pass:>9.2?} = {:.2}x; decode+validate+re-encode {re:>9.2?} = {:.2}x",
            bytes.len(),
            rate(raw),
            pass.as_secs_f64() / raw.as_secs_f64(),
            re.as_secs_f64() / raw.as_secs_f64(),
        );
    }
}
