//! JFR -> OTLP per event against the nearest existing decoder: pprof ->
//! OTLP (decode + import) per sample.
//!
//! `cargo bench -p profcol-jfr --bench jfr -- --warm-up-time 1 --measurement-time 3`
//!
//! Inputs: the JDK 17 recording of tests/pyroscope_java/HotLoop.java (601
//! converted events among the JDK's own; the whole file is parsed: header,
//! metadata, pools, every event) and the Go CPU pprof fixture (gzip'd,
//! inflated once before timing). After criterion's group a summary gives
//! the cost per event and per sample and their ratio.

use std::hint::black_box;
use std::io::Read;
use std::time::{Duration, Instant};

use criterion::Criterion;

use profcol_jfr::{Converter, Options};
use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::testing::fixture;
use profcol_pprof::{decode_pprof, import_pprof};

const OPTS: Options = Options {
    sample_rate: 100,
    time_unix_nano: 1,
    duration_nano: 1,
};

fn jfr_once(jfr: &[u8]) -> u64 {
    let mut dict = DictionaryBuilder::new();
    let mut c = Converter::new(&mut dict, None, OPTS);
    c.add(jfr).unwrap();
    let n = c.stats.converted;
    black_box(c.finish(&[]));
    black_box(dict.finish());
    n
}

fn pprof_once(raw: &[u8]) -> usize {
    let p = decode_pprof(raw).unwrap();
    let mut dict = DictionaryBuilder::new();
    let scope = import_pprof(&p, &mut dict).unwrap();
    black_box(scope);
    black_box(dict.finish());
    p.sample.len()
}

fn best(runs: usize, f: &mut dyn FnMut()) -> Duration {
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
    let jfr = fixture("pyroscope/jfr/jdk-17.0.15-hotloop.jfr");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&fixture("pprof/go-cpu.pb.gz")[..])
        .read_to_end(&mut raw)
        .unwrap();
    let events = jfr_once(&jfr);
    let samples = pprof_once(&raw);

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("jfr");
    g.bench_function("jfr_to_otlp", |b| b.iter(|| jfr_once(&jfr)));
    g.bench_function("pprof_to_otlp", |b| b.iter(|| pprof_once(&raw)));
    g.finish();
    c.final_summary();

    let (mut tj, mut tp) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        tj = tj.min(best(20, &mut || {
            jfr_once(&jfr);
        }));
        tp = tp.min(best(20, &mut || {
            pprof_once(&raw);
        }));
    }
    let per_event = tj.as_nanos() as f64 / events as f64;
    let per_sample = tp.as_nanos() as f64 / samples as f64;
    println!(
        "summary: jfr {:.0} µs for {events} events ({} KB) = {per_event:.0} ns/event; \
         pprof {:.0} µs for {samples} samples = {per_sample:.0} ns/sample; ratio {:.2}x",
        tj.as_secs_f64() * 1e6,
        jfr.len() / 1024,
        tp.as_secs_f64() * 1e6,
        per_event / per_sample
    );
}
