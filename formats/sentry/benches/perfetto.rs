//! A Perfetto `profile_chunk` -> OTLP, per sample, against the nearest
//! decoder: the sample format v2 chunk of the same shape (JSON parse and
//! conversion). Both are 60 s of 8 threads at 100 Hz (48,000 samples) over
//! 400 frames and 600 stacks 12 to 40 deep.
//!
//! `cargo bench -p profcol-sentry --bench perfetto`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

use profcol_sentry::perfetto::proto::{self, Data, TracePacket};
use profcol_sentry::{chunk_to_otlp, perfetto_chunk_to_otlp, ReceiveOptions};

const THREADS: u64 = 8;
const TICKS: u64 = 6_000;
const FRAMES: u64 = 400;
const STACKS: u64 = 600;

fn rng() -> impl FnMut(u64) -> u64 {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

/// The stacks (root first) both payloads share.
fn stacks() -> Vec<Vec<u64>> {
    let mut rand = rng();
    (0..STACKS)
        .map(|_| (0..12 + rand(29)).map(|_| rand(FRAMES)).collect())
        .collect()
}

const META: &str = r#"{"chunk_id":"6e5283e1ce434eec8378198a9c1cc556","profiler_id":"4d229f1d3807421ba62a5f8bc295d836","platform":"android","version":"2","release":"app@1"}"#;

fn perfetto(stacks: &[Vec<u64>]) -> Vec<u8> {
    let mut rand = rng();
    let packet = |data| TracePacket {
        trusted_packet_sequence_id: Some(1),
        data,
        ..TracePacket::default()
    };
    let clock = |id, ts| proto::Clock {
        clock_id: Some(id),
        timestamp: Some(ts),
    };
    let mut packets = vec![packet(Some(Data::ClockSnapshot(proto::ClockSnapshot {
        clocks: vec![clock(6, 1_000_000_000), clock(1, 1_795_000_000_000_000_000)],
    })))];
    let interned = proto::InternedData {
        function_names: (0..FRAMES)
            .map(|f| proto::InternedString {
                iid: Some(f + 1),
                str: Some(format!("com.example.app.Module{}.method{f}", f % 40).into_bytes()),
            })
            .collect(),
        mapping_paths: vec![proto::InternedString {
            iid: Some(1),
            str: Some(b"base.odex".to_vec()),
        }],
        mappings: vec![proto::Mapping {
            iid: Some(1),
            path_string_ids: vec![1],
            ..proto::Mapping::default()
        }],
        frames: (0..FRAMES)
            .map(|f| proto::Frame {
                iid: Some(f + 1),
                function_name_id: Some(f + 1),
                mapping_id: Some(1),
                rel_pc: Some(f * 16),
            })
            .collect(),
        callstacks: stacks
            .iter()
            .enumerate()
            .map(|(i, s)| proto::Callstack {
                iid: Some(i as u64 + 1),
                frame_ids: s.iter().map(|f| f + 1).collect(),
            })
            .collect(),
        ..proto::InternedData::default()
    };
    packets.push(TracePacket {
        interned_data: Some(interned),
        sequence_flags: Some(1),
        ..packet(None)
    });
    for tick in 0..TICKS {
        for t in 0..THREADS {
            packets.push(TracePacket {
                timestamp: Some(1_000_000_000 + tick * 10_000_000 + t),
                ..packet(Some(Data::PerfSample(proto::PerfSample {
                    pid: Some(100),
                    tid: Some(100 + t as u32),
                    callstack_iid: Some(rand(STACKS) + 1),
                })))
            });
        }
    }
    let mut out = META.as_bytes().to_vec();
    for p in &packets {
        prost::encoding::message::encode(1, p, &mut out);
    }
    out
}

/// The same samples as a sample format v2 chunk (stacks leaf first).
fn v2_json(stacks: &[Vec<u64>]) -> Vec<u8> {
    let mut rand = rng();
    let frames: Vec<serde_json::Value> = (0..FRAMES)
        .map(|f| serde_json::json!({"function": format!("method{f}"), "module": format!("com.example.app.Module{}", f % 40)}))
        .collect();
    let leaf_first: Vec<Vec<u64>> = stacks
        .iter()
        .map(|s| s.iter().rev().copied().collect())
        .collect();
    let samples: Vec<serde_json::Value> = (0..TICKS)
        .flat_map(|tick| (0..THREADS).map(move |t| (tick, t)))
        .map(|(tick, t)| {
            serde_json::json!({
                "timestamp": 1_795_000_000.0 + tick as f64 * 0.01,
                "stack_id": rand(STACKS),
                "thread_id": (100 + t).to_string(),
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "chunk_id": "6e5283e1ce434eec8378198a9c1cc556",
        "profiler_id": "4d229f1d3807421ba62a5f8bc295d836",
        "platform": "java", "version": "2", "release": "app@1",
        "profile": {"frames": frames, "stacks": leaf_first, "samples": samples},
    }))
    .unwrap()
}

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
    let stacks = stacks();
    let trace = perfetto(&stacks);
    let json = v2_json(&stacks);
    let opts = ReceiveOptions::default();
    let meta_len = META.len() as u64;
    let run_perfetto = || {
        perfetto_chunk_to_otlp(
            &trace,
            Some(meta_len),
            Some("android"),
            &serde_json::Value::Null,
            &opts,
        )
        .unwrap()
        .sentry_samples
    };
    let run_v2 = || {
        chunk_to_otlp(&json, Some("java"), &opts)
            .unwrap()
            .sentry_samples
    };
    assert_eq!(run_perfetto(), THREADS * TICKS);
    assert_eq!(run_v2(), THREADS * TICKS);
    let mut c = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let mut g = c.benchmark_group("perfetto_vs_v2");
    g.throughput(Throughput::Elements(THREADS * TICKS));
    g.bench_function("perfetto_chunk_to_otlp", |b| b.iter(run_perfetto));
    g.bench_function("v2_json_chunk_to_otlp", |b| b.iter(run_v2));
    g.finish();
    c.final_summary();
    let p = best_of(9, || {
        black_box(run_perfetto());
    });
    let v = best_of(9, || {
        black_box(run_v2());
    });
    let per = |d: Duration| d.as_secs_f64() * 1e9 / (THREADS * TICKS) as f64;
    println!(
        "summary: {} samples; Perfetto {} bytes {:.0} ns/sample, v2 JSON {} bytes {:.0} ns/sample: Perfetto / v2 = {:.2}x",
        THREADS * TICKS,
        trace.len(),
        per(p),
        json.len(),
        per(v),
        p.as_secs_f64() / v.as_secs_f64()
    );
}
