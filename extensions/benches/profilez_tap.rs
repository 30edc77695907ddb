//! What the `profilez` tap costs against a pass-through pipeline's work on
//! a medium request (100k samples, 20k distinct stacks). Pass-through is
//! what a pipeline without mutating processors does: check the request on
//! the wire and forward the received bytes, never decoding them. The tap
//! pays `Tap::accepted` on the pipeline's path (queue the batch or skip
//! it), then its thread decodes and folds the batches it keeps, off the
//! path but on the same machine's CPU: the target is that both
//! together stay within 5% of the pass-through CPU.
//!
//! The criterion part times each piece on its own. The summary then runs
//! the pipeline's loop for a few seconds with and without the tap and
//! compares the process's CPU time per request (every thread, the tap's
//! folding included, its queue drained before the count closes).
//!
//! Runs with mimalloc, the allocator of the `profcol` binary.
//!
//! `cargo bench -p profcol-extensions --bench profilez_tap -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_extensions::profilez::clock;
use profcol_extensions::profilez::fold::fold;
use profcol_extensions::profilez::store::Store;
use profcol_extensions::profilez::tap::{Shared, Tap};
use profcol_extensions::profilez::ProfilezConfig;
use profcol_model::memory::MemoryBudget;
use profcol_model::proto::ProfilesData;
use profcol_model::{synth, wire_check, ProfileBatch};
use profcol_pipeline::component::Observer;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;

/// The receiver's check and the exporter's bytes of a batch nobody
/// changes: the batch handed to the tap.
fn pass_through(bytes: &Bytes) -> Arc<ProfileBatch> {
    let clean = wire_check::check(bytes).expect("a clean request");
    let batch = Arc::new(ProfileBatch::checked(bytes.clone(), clean));
    black_box(batch.encode_to_bytes());
    batch
}

fn store() -> Store {
    Store::new(
        Duration::from_secs(60),
        15,
        64 << 20,
        MemoryBudget::new(1 << 30).force(0),
    )
}

fn fold_into(store: &mut Store, data: &ProfilesData) {
    for (key, series) in fold(data) {
        let seen = series.samples;
        store.add("profiles", key, series, seen, 0, Instant::now());
    }
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared::new(store()))
}

/// What a round of the pipeline's loop with the tap cost.
struct Round {
    requests: u32,
    /// CPU of the pipeline's thread, less the time in `Tap::accepted`.
    pipeline: Duration,
    /// CPU in `Tap::accepted` (reading the clock twice included).
    on_path: Duration,
    /// CPU of the tap's thread (folding, and skipping what it does not).
    folding: Duration,
}

impl Round {
    /// The tap's cost against the pass-through's, in percent.
    fn cost(&self) -> f64 {
        (self.on_path + self.folding).as_secs_f64() / self.pipeline.as_secs_f64() * 100.0
    }
}

/// The pipeline's loop for `run`, each request handed to the tap; then
/// its queue is given time to drain (sleeping costs no CPU).
fn sustained(bytes: &Bytes, tap: &Tap, run: Duration) -> Round {
    let folding = || Duration::from_nanos(tap.shared().fold_cpu_ns.load(Ordering::Relaxed));
    let (own, folded) = (clock::thread(), folding());
    let started = Instant::now();
    let (mut requests, mut on_path) = (0, Duration::ZERO);
    while started.elapsed() < run {
        let batch = pass_through(bytes);
        let t = clock::thread();
        tap.accepted("profiles", &batch);
        on_path += clock::thread() - t;
        requests += 1;
    }
    let pipeline = (clock::thread() - own).saturating_sub(on_path);
    std::thread::sleep(Duration::from_secs(3));
    Round {
        requests,
        pipeline,
        on_path,
        folding: folding() - folded,
    }
}

fn main() {
    let data = synth::request(SAMPLES, STACKS);
    let bytes = Bytes::from(data.encode_to_vec());
    let checked = pass_through(&bytes);
    assert_eq!(checked.encode_to_bytes(), bytes);

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("profilez_tap");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.bench_function("pass_through", |b| {
        b.iter(|| pass_through(black_box(&bytes)))
    });
    {
        let tap = Tap::start(shared(), 16, ProfilezConfig::default().max_cpu_share).unwrap();
        g.bench_function("tap_accepted", |b| {
            b.iter(|| tap.accepted("profiles", &checked))
        });
    }
    let mut s = store();
    g.bench_function("fold_decoded", |b| b.iter(|| fold_into(&mut s, &data)));
    g.bench_function("fold_undecoded", |b| {
        b.iter(|| fold_into(&mut s, &ProfilesData::decode(bytes.clone()).unwrap()))
    });
    g.finish();

    // Rounds of the pipeline's loop with the tap, after one that spends
    // the burst it starts with. Its cost is its own: the CPU in
    // `Tap::accepted` and the folding thread's, against the pipeline
    // thread's CPU for the rest, all in the same round.
    let tap = Tap::start(shared(), 16, ProfilezConfig::default().max_cpu_share).unwrap();
    let mut handed = sustained(&bytes, &tap, Duration::from_secs(2)).requests;
    let mut costs = Vec::new();
    for _ in 0..3 {
        let r = sustained(&bytes, &tap, Duration::from_secs(5));
        handed += r.requests;
        costs.push(r.cost());
        println!(
            "round: {} requests, pass-through {:?} CPU per request; the tap {:?} per request on the pipeline's thread and {:?} folding: {:.2}%",
            r.requests,
            r.pipeline / r.requests,
            r.on_path / r.requests,
            r.folding / r.requests,
            r.cost(),
        );
    }
    let folded = handed - (tap_skipped(&tap) / SAMPLES as u64) as u32;
    costs.sort_by(f64::total_cmp);
    println!(
        "\nsummary (medium request, {SAMPLES} samples, {} bytes): the tap costs {:.1}% of pass-through CPU (median of {:.2?}; target <= 5%); {folded} of {handed} batches folded",
        bytes.len(),
        costs[1],
        costs,
    );
}

fn tap_skipped(tap: &Tap) -> u64 {
    tap.shared().skipped("profiles")
}
