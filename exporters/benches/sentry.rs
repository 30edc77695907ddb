//! OTLP profile -> Sentry envelope bytes (what the `sentry` exporter does
//! per batch before the network), against `serde_json::to_vec` of the
//! finished chunk alone: the floor any JSON exporter pays.
//!
//! `cargo bench -p profcol-exporters --bench sentry`

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use profcol_exporters::sentry::{encode, Compression, EncodeOptions};
use profcol_model::synth;
use profcol_sentry::{otlp_to_chunks, ExportOptions};

const SAMPLES: usize = 100_000;

fn bench(c: &mut Criterion) {
    // 100k timestamped samples over 62.5 s on 16 threads, 20k stacks.
    let data = synth::Config {
        samples: SAMPLES,
        ..synth::Config::default()
    }
    .build();
    let opts = |compression| EncodeOptions {
        max_chunk_duration_ns: 66_000_000_000,
        compression,
        dsn: Some("https://key@o1.ingest.sentry.io/42".into()),
        ..EncodeOptions::default()
    };
    let now = 1_800_000_000_000_000_000;
    let chunks: Vec<_> = otlp_to_chunks(&data, &ExportOptions::default())
        .into_iter()
        .filter_map(|r| r.chunk)
        .collect();
    assert_eq!(chunks.len(), 1, "one 100k-sample chunk");
    let sent: usize = chunks.iter().map(|c| c.profile.samples.len()).sum();
    let gz = encode(&data, &opts(Compression::Gzip), now, SystemTime::now(), 0);
    let plain = encode(&data, &opts(Compression::None), now, SystemTime::now(), 0);
    let size = |e: &profcol_exporters::sentry::Encoded| -> usize {
        e.envelopes
            .iter()
            .filter_map(|e| e.body.as_ref())
            .map(Vec::len)
            .sum()
    };
    eprintln!(
        "{sent} samples in {} chunk(s); envelope {} bytes, gzip {} bytes",
        chunks.len(),
        size(&plain),
        size(&gz)
    );

    let mut g = c.benchmark_group("sentry_export");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.sample_size(10);
    g.bench_function("otlp_to_envelope_gzip", |b| {
        b.iter(|| {
            encode(
                black_box(&data),
                &opts(Compression::Gzip),
                now,
                SystemTime::now(),
                0,
            )
        })
    });
    g.bench_function("otlp_to_envelope_uncompressed", |b| {
        b.iter(|| {
            encode(
                black_box(&data),
                &opts(Compression::None),
                now,
                SystemTime::now(),
                0,
            )
        })
    });
    // The conversion alone (it serializes the chunk too): the rest of the
    // exporter's cost is the envelope framing and gzip.
    let convert = ExportOptions {
        now_unix_nano: now,
        ..ExportOptions::default()
    };
    g.bench_function("otlp_to_chunks_only", |b| {
        b.iter(|| otlp_to_chunks(black_box(&data), &convert))
    });
    g.bench_function("serde_json_to_vec_of_the_chunk", |b| {
        b.iter(|| {
            for chunk in &chunks {
                black_box(serde_json::to_vec(black_box(chunk)).unwrap());
            }
        })
    });
    g.finish();

    // Samples/s and the ratio to the serde floor, printed once.
    let best_of = |mut f: Box<dyn FnMut() + '_>| -> Duration {
        (0..10)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let floor = best_of(Box::new(|| {
        for chunk in &chunks {
            black_box(serde_json::to_vec(black_box(chunk)).unwrap());
        }
    }));
    println!("\nsummary (best of 10 runs, {SAMPLES} samples):");
    for (name, compression) in [
        ("uncompressed", Compression::None),
        ("gzip", Compression::Gzip),
    ] {
        let t = best_of(Box::new(|| {
            black_box(encode(
                black_box(&data),
                &opts(compression),
                now,
                SystemTime::now(),
                0,
            ));
        }));
        println!(
            "  otlp -> envelope ({name:<12}) {t:>9.2?} ({:.1} M samples/s) = {:.2}x serde_json::to_vec of the chunk ({floor:.2?})",
            SAMPLES as f64 / t.as_secs_f64() / 1e6,
            t.as_secs_f64() / floor.as_secs_f64()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
