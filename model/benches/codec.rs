//! `profcol_model::codec` against prost, its baseline and oracle: decoding
//! `ProfilesData` from its bytes and encoding it, at 1k, 100k and 400k
//! samples.
//!
//! `cargo bench -p profcol-model --bench codec`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::testing::best_of;
use profcol_model::{codec, synth};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let requests: Vec<(usize, Vec<u8>)> = ["small", "medium", "large"]
        .map(|name| synth::sized(name).expect("a bench size"))
        .iter()
        .map(|d| {
            let n = profcol_model::ProfileBatch::new(d.clone()).sample_count() as usize;
            (n, d.encode_to_vec())
        })
        .collect();
    let mut c = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    for (n, bytes) in &requests {
        // Sanity: the same message as prost's.
        let data = ProfilesData::decode(&bytes[..]).unwrap();
        assert_eq!(codec::decode(bytes).unwrap(), data);
        assert_eq!(codec::encode(&data), *bytes);
        let mut g = c.benchmark_group(format!("codec_{n}"));
        g.throughput(Throughput::Elements(*n as u64));
        g.bench_function("prost_decode", |b| {
            b.iter(|| ProfilesData::decode(black_box(&bytes[..])).unwrap())
        });
        g.bench_function("decode", |b| {
            b.iter(|| codec::decode(black_box(bytes)).unwrap())
        });
        g.bench_function("prost_encode", |b| {
            b.iter(|| black_box(&data).encode_to_vec())
        });
        g.bench_function("encode", |b| b.iter(|| codec::encode(black_box(&data))));
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of 15 runs, drop included), ratio to prost:");
    for (n, bytes) in &requests {
        let prost = best_of(15, || {
            black_box(ProfilesData::decode(black_box(&bytes[..])).unwrap());
        });
        let ours = best_of(15, || {
            black_box(codec::decode(black_box(bytes)).unwrap());
        });
        let data = ProfilesData::decode(&bytes[..]).unwrap();
        let prost_out = best_of(15, || {
            black_box(black_box(&data).encode_to_vec());
        });
        let out = best_of(15, || {
            black_box(codec::encode(black_box(&data)));
        });
        println!(
            "  {n:>7} samples, {:>9} bytes: decode {ours:>9.2?} against prost {prost:>9.2?} = {:.2}x; encode {out:>9.2?} against {prost_out:>9.2?} = {:.2}x",
            bytes.len(),
            ours.as_secs_f64() / prost.as_secs_f64(),
            out.as_secs_f64() / prost_out.as_secs_f64(),
        );
    }
}
