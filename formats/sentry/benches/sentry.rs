//! Sentry envelope parse + conversion to OTLP, against the baseline any
//! receiver pays anyway: `serde_json::from_slice` of the same chunk bytes
//! into the typed chunk struct. Target: conversion adds at most 1x on top.
//! Also OTLP -> `profile_chunk` (with Relay's rules and JSON) for export.
//!
//! `cargo bench -p profcol-sentry --bench sentry`

use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

use profcol_sentry::v2::chunk::ProfileChunk;
use profcol_sentry::{chunk_to_otlp, envelope, otlp_to_chunks, ExportOptions, ReceiveOptions};

struct Case {
    name: &'static str,
    envelope: Vec<u8>,
    samples: u64,
}

impl Case {
    fn payload(&self) -> &[u8] {
        envelope::parse(&self.envelope).unwrap().items[0].payload
    }
}

fn recorded_python() -> Case {
    let envelope = profcol_model::testing::fixture("sentry-python/manual/0001.envelope");
    let samples = ProfileChunk::parse(envelope::parse(&envelope).unwrap().items[0].payload)
        .unwrap()
        .profile
        .samples
        .len() as u64;
    Case {
        name: "python_recorded",
        envelope,
        samples,
    }
}

/// 60 s, 8 threads, 100 Hz: 48,000 samples over 400 Python-like frames and
/// 600 stacks 12 to 40 deep, in the shape the Python SDK sends.
fn synthetic() -> Case {
    const THREADS: u64 = 8;
    const TICKS: u64 = 6_000;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut j = String::with_capacity(4 << 20);
    j.push_str(r#"{"chunk_id":"6e5283e1ce434eec8378198a9c1cc556","client_sdk":{"name":"sentry.python","version":"2.75.0"},"platform":"python","profile":{"frames":["#);
    for f in 0..400 {
        if f > 0 {
            j.push(',');
        }
        let m = f % 40;
        write!(
            j,
            r#"{{"abs_path":"/srv/app/.venv/lib/python3.11/site-packages/pkg{m}/module_{m}.py","module":"pkg{m}.module_{m}","filename":"pkg{m}/module_{m}.py","function":"Handler{f}.method_{f}","lineno":{},"in_app":{}}}"#,
            100 + f * 7,
            f % 3 == 0
        )
        .unwrap();
    }
    j.push_str(r#"],"stacks":["#);
    for s in 0..600 {
        if s > 0 {
            j.push(',');
        }
        j.push('[');
        let depth = 12 + rand(29);
        for d in 0..depth {
            if d > 0 {
                j.push(',');
            }
            write!(j, "{}", rand(400)).unwrap();
        }
        j.push(']');
    }
    j.push_str(r#"],"samples":["#);
    let start_us = 1_795_318_570_028_333u64;
    for t in 0..TICKS {
        let ts = (start_us + t * 10_000 + rand(400)) as f64 / 1e6;
        for th in 0..THREADS {
            if t > 0 || th > 0 {
                j.push(',');
            }
            write!(
                j,
                r#"{{"timestamp":{ts},"thread_id":"1397511435{th:05}","stack_id":{}}}"#,
                rand(600)
            )
            .unwrap();
        }
    }
    j.push_str(r#"],"thread_metadata":{"#);
    for th in 0..THREADS {
        if th > 0 {
            j.push(',');
        }
        write!(j, r#""1397511435{th:05}":{{"name":"worker-{th}"}}"#).unwrap();
    }
    j.push_str(r#"}},"profiler_id":"fe69b2d347794bdcbb69fc95fa89dc10","release":"svc@1.0.0","environment":"prod","version":"2"}"#);
    let mut envelope = format!(
        "{{}}\n{{\"type\":\"profile_chunk\",\"platform\":\"python\",\"length\":{}}}\n",
        j.len()
    )
    .into_bytes();
    envelope.extend_from_slice(j.as_bytes());
    envelope.push(b'\n');
    Case {
        name: "synthetic_60s_8threads_100hz",
        envelope,
        samples: THREADS * TICKS,
    }
}

fn parse_and_convert(envelope_bytes: &[u8]) -> u64 {
    let env = envelope::parse(envelope_bytes).unwrap();
    let item = &env.items[0];
    let c = chunk_to_otlp(item.payload, item.platform(), &ReceiveOptions::default()).unwrap();
    c.sentry_samples
}

fn typed_parse(payload: &[u8]) -> usize {
    ProfileChunk::parse(payload).unwrap().profile.samples.len()
}

/// Fastest of `runs` timings: the least noisy estimate on a shared machine.
fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let cases = [recorded_python(), synthetic()];
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    for case in &cases {
        let payload = case.payload().to_vec();
        let mut g = c.benchmark_group(format!("sentry_{}", case.name));
        g.throughput(Throughput::Elements(case.samples));
        g.bench_function("serde_typed_parse", |b| {
            b.iter(|| typed_parse(black_box(&payload)))
        });
        g.bench_function("envelope_parse_and_convert", |b| {
            b.iter(|| parse_and_convert(black_box(&case.envelope)))
        });
        let data = chunk_to_otlp(&payload, None, &ReceiveOptions::default())
            .unwrap()
            .data;
        let opts = ExportOptions::default();
        g.bench_function("otlp_to_chunk_json", |b| {
            b.iter(|| otlp_to_chunks(black_box(&data), &opts).len())
        });
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of 15 runs):");
    for case in &cases {
        let payload = case.payload().to_vec();
        let parse = best_of(15, || {
            black_box(typed_parse(black_box(&payload)));
        });
        let full = best_of(15, || {
            black_box(parse_and_convert(black_box(&case.envelope)));
        });
        let rate = |d: Duration| case.samples as f64 / d.as_secs_f64() / 1e6;
        println!(
            "  {:<30} {:>6} samples, {:>7} bytes: typed parse {:>8.2?} ({:.1} M samples/s), parse+convert {:>8.2?} ({:.1} M samples/s); conversion adds {:.2}x of the parse (target <= 1x)",
            case.name,
            case.samples,
            payload.len(),
            parse,
            rate(parse),
            full,
            rate(full),
            full.as_secs_f64() / parse.as_secs_f64() - 1.0
        );
    }
}
