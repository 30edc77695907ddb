//! OTLP -> pprof (encode + gzip) against the baseline every export pays
//! anyway: prost encode of the same OTLP request. Target (issue 4): encode +
//! gzip level 1, the pprof exporter's default, within 2x.
//!
//! `cargo bench -p profcol-pprof --bench pprof`
//!
//! After criterion's groups, a summary gives each case as a ratio to prost
//! encode (best of several interleaved runs), and gzip level 1 of the
//! finished pprof bytes on its own: the part of the cost no encoder change
//! can remove.

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use profcol_model::proto::{data_into_request, ExportProfilesServiceRequest, ProfilesData};
use profcol_model::synth;
use profcol_pprof::{plan_files, write_pprof, write_pprof_gzip, PprofFile, ToPprofOptions};

const TARGET: f64 = 2.0;
const RUNS: usize = 15;
/// The summary's case the target is about: encode + gzip level 1.
const TARGET_CASE: usize = 2;

struct Input {
    samples: usize,
    data: ProfilesData,
    request: ExportProfilesServiceRequest,
    opts: ToPprofOptions,
    /// Uncompressed and level-1 sizes of all files.
    raw: usize,
    gz: usize,
}

impl Input {
    fn new(samples: usize) -> Self {
        let data = synth::request(samples, samples / 5);
        let request = data_into_request(data.clone());
        let opts = ToPprofOptions::default();
        let files = plan_files(&data, &opts).unwrap();
        let size = |f: &dyn Fn(&PprofFile) -> Vec<u8>| files.iter().map(|p| f(p).len()).sum();
        let raw = size(&|f| write_pprof(&data, f, &opts, Vec::new()).unwrap());
        let gz = size(&|f| write_pprof_gzip(&data, f, &opts, 1, Vec::new()).unwrap());
        Self {
            samples,
            data,
            request,
            opts,
            raw,
            gz,
        }
    }

    /// An output buffer every case reuses: a fresh multi-megabyte `Vec`
    /// per run would measure the allocator's page faults, which vary with
    /// its state from run to run, as much as the encoding.
    fn buffer(&self) -> Vec<u8> {
        Vec::with_capacity(self.raw.max(self.request.encoded_len()))
    }

    fn prost_encode(&self, out: &mut Vec<u8>) {
        out.clear();
        self.request.encode(out).unwrap();
        black_box(out);
    }

    /// The pprof files, as the exporter plans and writes them.
    fn pprof(&self, gzip_level: Option<u32>, out: &mut Vec<u8>) {
        for f in &plan_files(&self.data, &self.opts).unwrap() {
            out.clear();
            match gzip_level {
                None => black_box(write_pprof(&self.data, f, &self.opts, &mut *out).unwrap()),
                Some(level) => black_box(
                    write_pprof_gzip(&self.data, f, &self.opts, level, &mut *out).unwrap(),
                ),
            };
        }
    }
}

/// One case of the summary, writing into the buffer it is handed.
type Case<'a> = dyn FnMut(&mut Vec<u8>) + 'a;

/// gzip level 1 of finished pprof bytes.
fn gzip1(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut gz = GzEncoder::new(out, Compression::new(1));
    gz.write_all(raw).unwrap();
    black_box(gz.finish().unwrap());
}

fn main() {
    let inputs: Vec<Input> = [10_000, 100_000].into_iter().map(Input::new).collect();
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    for i in &inputs {
        println!(
            "{} samples: OTLP {} bytes, pprof {} bytes, pprof.gz (level 1) {} bytes",
            i.samples,
            i.request.encoded_len(),
            i.raw,
            i.gz
        );
        let mut out = i.buffer();
        let mut g = c.benchmark_group(format!("pprof_{}k", i.samples / 1000));
        g.throughput(Throughput::Elements(i.samples as u64));
        g.bench_function("otlp_prost_encode", |b| b.iter(|| i.prost_encode(&mut out)));
        g.bench_function("pprof_encode", |b| b.iter(|| i.pprof(None, &mut out)));
        for level in [1, 6] {
            g.bench_function(format!("pprof_encode_gzip{level}"), |b| {
                b.iter(|| i.pprof(Some(level), &mut out))
            });
        }
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of {RUNS} interleaved runs), ratio to prost encode of the OTLP request; target: encode + gzip 1 within {TARGET}x");
    for i in &inputs {
        let files = plan_files(&i.data, &i.opts).unwrap();
        let raw: Vec<Vec<u8>> = files
            .iter()
            .map(|f| write_pprof(&i.data, f, &i.opts, Vec::new()).unwrap())
            .collect();
        let mut out = i.buffer();
        let mut cases: [(&str, &mut Case); 5] = [
            ("prost encode", &mut |o| i.prost_encode(o)),
            ("pprof encode", &mut |o| i.pprof(None, o)),
            ("pprof encode + gzip 1", &mut |o| i.pprof(Some(1), o)),
            ("pprof encode + gzip 6", &mut |o| i.pprof(Some(6), o)),
            ("gzip 1 alone", &mut |o| {
                for r in &raw {
                    gzip1(r, o);
                }
            }),
        ];
        // Interleaved, so a busy moment of the machine hits every case.
        let mut best = [Duration::MAX; 5];
        for _ in 0..RUNS {
            for (b, (_, f)) in best.iter_mut().zip(&mut cases) {
                let t = Instant::now();
                f(&mut out);
                *b = (*b).min(t.elapsed());
            }
        }
        let base = best[0].as_secs_f64();
        println!(
            "  {:>7} samples: prost encode {:>9.2?} ({:.1} M samples/s)",
            i.samples,
            best[0],
            i.samples as f64 / base / 1e6
        );
        for (k, ((what, _), d)) in cases.iter().zip(best).enumerate().skip(1) {
            let ratio = d.as_secs_f64() / base;
            let verdict = match (k == TARGET_CASE, ratio <= TARGET) {
                (false, _) => "",
                (true, true) => "  (target met)",
                (true, false) => "  (over the target)",
            };
            println!("    {what:<22} {d:>9.2?} = {ratio:.2}x{verdict}");
        }
    }
}
