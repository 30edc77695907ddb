//! The `pyroscope` receiver's conversions against the baseline every OTLP
//! receiver pays anyway: prost decode of the OTLP request they produce.
//! Folded ingest of a 10k-line body (Python-like frames), and pprof ingest
//! of the Go CPU fixture (gzip'd, as the Go SDK sends it: inflate, decode,
//! import, label mapping).
//!
//! `cargo bench -p profcol-receivers --bench pyroscope`
//!
//! After criterion's groups, a summary gives each conversion per sample
//! and as a ratio to prost decode (best of several interleaved runs).

use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_model::memory::MemoryBudget;
use profcol_model::proto::{data_into_request, ExportProfilesServiceRequest, ProfilesData};
use profcol_receivers::pyroscope::convert::{Converter, SampleTypes, Window, Work};
use profcol_receivers::pyroscope::folded::{Shape, Text};
use profcol_receivers::pyroscope::labels::{describe, Described};

const RUNS: usize = 15;

struct Case {
    name: &'static str,
    convert: Box<dyn Fn() -> ProfilesData>,
    /// Bytes of the body converted (the pprof as sent: gzip'd).
    input: usize,
    /// The OTLP request the conversion makes, encoded.
    otlp: Vec<u8>,
    samples: u64,
}

fn work() -> Work {
    Work {
        memory: MemoryBudget::new(usize::MAX / 2).try_admit(0).unwrap(),
        limit: 64 << 20,
    }
}

fn described() -> Described {
    let labels = [("env".to_owned(), "prod".to_owned())];
    describe(Some("pyapp"), &labels, None)
}

/// 10,000 distinct stacks 8 to 40 deep over 400 frames written as
/// pyroscope-rs writes Python frames, counts 1 to 100.
fn folded_body() -> Vec<u8> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut body = String::new();
    for line in 0..10_000 {
        if line > 0 {
            body.push('\n');
        }
        let depth = 8 + rand(33);
        for d in 0..depth {
            if d > 0 {
                body.push(';');
            }
            let f = if d < 3 { d } else { rand(400) };
            write!(
                body,
                "pkg{}/module_{f}.py:{} - handler_{f}",
                f % 40,
                100 + f * 7
            )
            .unwrap();
        }
        // The leaf makes every line its own stack.
        write!(body, ";leaf.py:{line} - leaf {}", 1 + rand(100)).unwrap();
    }
    body.into_bytes()
}

fn case(name: &'static str, input: usize, convert: impl Fn() -> ProfilesData + 'static) -> Case {
    let data = convert();
    let samples = data
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| p.samples.len() as u64)
        .sum();
    Case {
        name,
        input,
        otlp: data_into_request(data).encode_to_vec(),
        convert: Box::new(convert),
        samples,
    }
}

fn cases() -> Vec<Case> {
    let body = folded_body();
    let shape = Shape {
        sample_type: ("samples".into(), "count".into()),
        period_type: Some(("cpu".into(), "nanoseconds".into())),
        period: 10_000_000,
        time_unix_nano: 1_795_728_140_000_000_000,
        duration_nano: 10_000_000_000,
    };
    let folded = case("folded_10k_lines", body.len(), move || {
        let mut c = Converter::new();
        let d = described();
        c.text(
            &body,
            Text::Folded,
            &shape,
            &d,
            &SampleTypes::default(),
            &mut work(),
        )
        .unwrap();
        c.finish().unwrap()
    });
    let gz = profcol_model::testing::fixture("pprof/go-cpu.pb.gz");
    let pprof = case("pprof_go_cpu", gz.len(), move || {
        let mut c = Converter::new();
        let window = Window { from: 0, until: 0 };
        c.pprof(
            &gz,
            &described(),
            &SampleTypes::default(),
            window,
            &mut work(),
        )
        .unwrap();
        c.finish().unwrap()
    });
    vec![folded, pprof]
}

fn decode(otlp: &[u8]) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest::decode(otlp).unwrap()
}

fn main() {
    let cases = cases();
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    for k in &cases {
        println!(
            "{}: {} samples, input {} bytes, OTLP {} bytes",
            k.name,
            k.samples,
            k.input,
            k.otlp.len()
        );
        let mut g = c.benchmark_group(k.name);
        g.throughput(Throughput::Elements(k.samples));
        g.bench_function("otlp_prost_decode", |b| {
            b.iter(|| black_box(decode(&k.otlp)))
        });
        g.bench_function("convert", |b| b.iter(|| black_box((k.convert)())));
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of {RUNS} interleaved runs): cost per sample, and as a ratio to prost decode of the OTLP request it makes");
    for k in &cases {
        let mut best = [Duration::MAX; 2];
        for _ in 0..RUNS {
            let t = Instant::now();
            black_box(decode(&k.otlp));
            best[0] = best[0].min(t.elapsed());
            let t = Instant::now();
            black_box((k.convert)());
            best[1] = best[1].min(t.elapsed());
        }
        let per = |d: Duration| d.as_secs_f64() * 1e9 / k.samples as f64;
        println!(
            "  {:<18} {:>6} samples: prost decode {:>9.2?} ({:.0} ns/sample), convert {:>9.2?} ({:.0} ns/sample) = {:.2}x",
            k.name,
            k.samples,
            best[0],
            per(best[0]),
            best[1],
            per(best[1]),
            best[1].as_secs_f64() / best[0].as_secs_f64()
        );
    }
}
