//! OTLP -> pprof (encode + gzip) against the baseline every export pays
//! anyway: prost encode of the same OTLP request. Target: within 2x.
//!
//! `cargo bench -p profcol-pipeline --bench pprof`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;

use profcol_pipeline::formats::pprof::{plan_files, write_pprof, write_pprof_gzip, ToPprofOptions};
use profcol_pipeline::model::synth;
use profcol_pipeline::proto::data_into_request;

fn pprof(c: &mut Criterion) {
    for samples in [10_000, 100_000] {
        let data = synth::request(samples, samples / 5);
        let request = data_into_request(data.clone());
        let opts = ToPprofOptions::default();
        let files = plan_files(&data, &opts).unwrap();
        let raw: usize = files
            .iter()
            .map(|f| write_pprof(&data, f, &opts, Vec::new()).unwrap().len())
            .sum();
        let gz: usize = files
            .iter()
            .map(|f| {
                write_pprof_gzip(&data, f, &opts, 1, Vec::new())
                    .unwrap()
                    .len()
            })
            .sum();
        println!(
            "{samples} samples: OTLP {} bytes, pprof {raw} bytes, pprof.gz (level 1) {gz} bytes",
            request.encoded_len()
        );

        let mut g = c.benchmark_group(format!("pprof_{}k", samples / 1000));
        g.throughput(Throughput::Elements(samples as u64));
        g.sample_size(20);
        g.bench_function("otlp_prost_encode", |b| b.iter(|| request.encode_to_vec()));
        g.bench_function("pprof_encode", |b| {
            b.iter(|| {
                for f in &plan_files(&data, &opts).unwrap() {
                    std::hint::black_box(
                        write_pprof(&data, f, &opts, Vec::with_capacity(raw)).unwrap(),
                    );
                }
            })
        });
        for level in [1, 6] {
            g.bench_function(format!("pprof_encode_gzip{level}"), |b| {
                b.iter(|| {
                    for f in &plan_files(&data, &opts).unwrap() {
                        std::hint::black_box(
                            write_pprof_gzip(&data, f, &opts, level, Vec::with_capacity(gz))
                                .unwrap(),
                        );
                    }
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, pprof);
criterion_main!(benches);
