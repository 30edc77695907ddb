//! The four processors of `profcol-bench`'s `processors` case in process,
//! without the network: what the naive proxy does with a request (prost
//! decode, encode, drop) against what profcol's chain does with it (the
//! wire check and decode, in one pass for a small request as the receiver
//! does, `dictionary_dedup`, `unit_normalization`, `thread_pruning`,
//! `sampling`, encode, drop), on the bench's three requests, one thread,
//! warm. End to end the sides differ beyond this: the naive proxy's
//! transport copies more and its allocator is glibc's, so the end to end
//! ratio was lower (0.60–0.87x against 0.90–1.16x here on the evening
//! of 2026-12-01).
//!
//! `cargo bench -p profcol-processors --bench chain`

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use prost::Message;

use profcol_model::proto::ExportProfilesServiceRequest;
use profcol_model::testing::BENCH_PROCESSORS;
use profcol_model::{synth, wire_check, ProfileBatch};
use profcol_pipeline::component::{ProcessContext, Processor};
use profcol_pipeline::telemetry::Telemetry;

// Only `configured::processor` is used here.
#[allow(dead_code)]
mod configured;
#[allow(dead_code)]
mod turns;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn naive(bytes: &Bytes) -> usize {
    let req = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    req.encode_to_vec().len()
}

struct Chain {
    stages: Vec<(&'static str, Box<dyn Processor>)>,
    telemetry: Telemetry,
}

impl Chain {
    fn new() -> Self {
        use profcol_processors::{dictionary_dedup, sampling, thread_pruning, unit_normalization};
        let stages = BENCH_PROCESSORS
            .iter()
            .map(|&(name, yaml)| {
                let factory = match name {
                    "dictionary_dedup" => dictionary_dedup::factory(),
                    "unit_normalization" => unit_normalization::factory(),
                    "thread_pruning" => thread_pruning::factory(),
                    "sampling" => sampling::factory(),
                    other => panic!("no factory here for {other}"),
                };
                (name, configured::processor(&*factory, yaml))
            })
            .collect();
        Self {
            stages,
            telemetry: Telemetry::new(),
        }
    }

    fn run(&mut self, bytes: &Bytes) -> usize {
        // As the receiver reads it: a small request that the chain decodes
        // anyway is checked as it is decoded, a larger one checked first.
        let mut batch = if bytes.len() <= profcol_model::cpu::INLINE {
            wire_check::decode_clean(bytes).unwrap().0
        } else {
            ProfileBatch::checked(bytes.clone(), wire_check::check(bytes).unwrap())
        };
        for (name, p) in &mut self.stages {
            p.process(
                &mut batch,
                &mut ProcessContext::new("bench", name, &self.telemetry),
            );
        }
        batch.encode_to_bytes().len()
    }
}

/// `f` timed over `n` calls, per call, in ms.
fn per_call(n: usize, mut f: impl FnMut() -> usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        black_box(f());
    }
    t.elapsed().as_secs_f64() * 1e3 / n as f64
}

fn main() {
    // Calls per timing, by size.
    let sizes = [("small", 200), ("medium", 4), ("large", 1)];
    let mut chain = Chain::new();
    println!("| request | naive (prost) | profcol chain | ratio |");
    println!("|---|---|---|---|");
    for (name, n) in sizes {
        let data = synth::sized(name).expect("a bench size");
        let bytes = Bytes::from(data.encode_to_vec());
        let (mut a, mut b) = (f64::MAX, f64::MAX);
        // Interleaved, best of each.
        for _ in 0..8 {
            a = a.min(per_call(n, || naive(&bytes)));
            b = b.min(per_call(n, || chain.run(&bytes)));
        }
        println!("| {name} | {a:.3} ms | {b:.3} ms | {:.2}x |", b / a);
    }
}
