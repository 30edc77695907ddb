//! What reading a request of an older opentelemetry-proto revision costs
//! against reading the same request written in v1.10.0, both through
//! `otlp_revisions::decode`, the receiver's path: the walk of the bytes,
//! the decode of each revision tried, the translation and the validation.
//! The target: an older revision at most 1.5x the same request written
//! in v1.10.0 (what the older request holds; for v1.7.0, which has a value
//! in every sample, timestamp-only samples get a value each). The summary
//! also gives each against the v1.10.0 request it was written from and
//! against prost decode + encode of that request (the baseline of the
//! other benches), and v1.10.0's path against prost decode + validate
//! alone, what the receiver did before it read other revisions. Times are
//! wall and thread CPU: on a busy machine the CPU time is steadier.
//!
//! `cargo bench -p profcol-otlp --bench revisions`

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::{synth, validate};
use profcol_otlp::revisions::{decode, encode_as, Revision};

/// The CPU time of this thread: on a busy machine, what a run cost
/// without the time it waited for a core.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The fastest of `runs` runs of `f`: (wall time, thread CPU time).
fn best_of(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    let (mut wall, mut cpu) = (Duration::MAX, Duration::MAX);
    for _ in 0..runs {
        let (t, c) = (Instant::now(), thread_cpu());
        f();
        cpu = cpu.min(thread_cpu() - c);
        wall = wall.min(t.elapsed());
    }
    (wall, cpu)
}

/// `a / b`, for wall time and for CPU time.
fn ratio(a: (Duration, Duration), b: (Duration, Duration)) -> String {
    format!(
        "{:.2}x ({:.2}x CPU)",
        a.0.as_secs_f64() / b.0.as_secs_f64(),
        a.1.as_secs_f64() / b.1.as_secs_f64()
    )
}

fn prost_validate(bytes: &Bytes) {
    let d = ProfilesData::decode(bytes.clone()).unwrap();
    validate(&d).unwrap();
    black_box(d);
}

fn prost_round_trip(bytes: &Bytes) {
    let d = ProfilesData::decode(bytes.clone()).unwrap();
    black_box(d.encode_to_vec());
}

fn read(bytes: &Bytes, revision: Revision) {
    let d = decode(bytes).unwrap();
    assert!(d.revision >= revision);
    black_box(d);
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let samples = 100_000;
    // Timestamp-only samples (what the eBPF profiler sends), and aggregated
    // values (what pprof-shaped producers send).
    let shapes = [("timestamps", true), ("values", false)];
    let mut summary = Vec::new();
    for (shape, timestamps) in shapes {
        let data = synth::Config {
            samples,
            stacks: 20_000,
            timestamps,
            ..Default::default()
        }
        .build();
        let requests: Vec<(Revision, Bytes)> = Revision::ALL
            .into_iter()
            .map(|r| {
                let mut buf = Vec::new();
                encode_as(&data, r, &mut buf).unwrap();
                (r, Bytes::from(buf))
            })
            .collect();
        let mut g = c.benchmark_group(format!("revisions_{shape}_{samples}"));
        g.throughput(Throughput::Elements(samples as u64));
        let current = &requests[0].1;
        g.bench_function("prost_decode_validate", |b| {
            b.iter(|| prost_validate(black_box(current)))
        });
        for (r, bytes) in &requests {
            g.bench_function(format!("read_{r}"), |b| {
                b.iter(|| read(black_box(bytes), *r))
            });
            // The same request in v1.10.0, where it is not the one above.
            let held = Bytes::from(decode(bytes).unwrap().data.encode_to_vec());
            if held != current {
                g.bench_function(format!("read_v1.10.0_as_held_by_{r}"), |b| {
                    b.iter(|| read(black_box(&held), Revision::V1_10_0))
                });
            }
        }
        g.finish();
        summary.push((shape, requests));
    }
    c.final_summary();

    println!(
        "\nsummary (best of 15 runs, wall time and thread CPU time), medium request ({samples} samples, 20k stacks):"
    );
    for (shape, requests) in &summary {
        let current = &requests[0].1;
        let base = best_of(15, || prost_validate(current));
        let round_trip = best_of(15, || prost_round_trip(current));
        let v10 = best_of(15, || read(current, Revision::V1_10_0));
        println!(
            "  {shape}: prost decode + encode (v1.10.0) {:.2?} ({:.2?} CPU)",
            round_trip.0, round_trip.1
        );
        println!(
            "  {shape}: v1.10.0 {:>9} bytes: read {:>9.2?} = {} prost decode + encode, {} prost decode + validate",
            current.len(),
            v10.0,
            ratio(v10, round_trip),
            ratio(v10, base),
        );
        for (r, bytes) in &requests[1..] {
            let t = best_of(15, || read(bytes, *r));
            // What this revision's request holds, written in v1.10.0: the
            // same request. v1.7.0 has a value in every sample, so its
            // timestamp-only samples come back with a value each.
            let held = Bytes::from(decode(bytes).unwrap().data.encode_to_vec());
            let same = best_of(15, || read(&held, Revision::V1_10_0));
            println!(
                "  {shape}: {r:>7} {:>9} bytes: read {:>9.2?} = {} the same request in v1.10.0 ({} bytes; target 1.5x), {} the v1.10.0 request it was written from, {} prost decode + encode, read as {}",
                bytes.len(),
                t.0,
                ratio(t, same),
                held.len(),
                ratio(t, v10),
                ratio(t, round_trip),
                decode(bytes).unwrap().revision
            );
        }
    }
}
