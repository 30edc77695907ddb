//! What the `profilez` tap costs against a pass-through pipeline's work on
//! a medium request (10k samples, 2k distinct stacks): receive (decode,
//! validate) and encode for the exporter. Two costs: what the pipeline
//! itself pays per batch (`Tap::accepted`: queue the batch or skip it; the
//! issue's target is <= 5%), and the folding the tap's own thread does
//! off the pipeline's path, for a batch a processor decoded and for one
//! forwarded as received bytes (which the tap decodes into a copy).
//!
//! Runs with mimalloc, the allocator of the `profcol` binary.
//!
//! `cargo bench -p profcol-extensions --bench profilez_tap -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_extensions::profilez::fold::fold;
use profcol_extensions::profilez::store::Store;
use profcol_extensions::profilez::tap::{Shared, Tap};
use profcol_model::memory::MemoryBudget;
use profcol_model::proto::ProfilesData;
use profcol_model::{synth, validate, ProfileBatch};
use profcol_pipeline::component::Observer;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn pass_through(bytes: &Bytes) -> usize {
    let mut batch = ProfileBatch::decode(bytes.clone()).unwrap();
    validate(batch.data()).unwrap();
    batch.data_mut();
    batch.encode_to_bytes().len()
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
        store.add("profiles", key, series, 0, Instant::now());
    }
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
    let data = synth::request(10_000, 2_000);
    let bytes = Bytes::from(data.encode_to_vec());
    let decoded = Arc::new(ProfileBatch::new(data.clone()));
    let shared = Arc::new(Shared {
        store: Mutex::new(store()),
        skipped: Mutex::default(),
    });
    let tap = Tap::start(shared, 16).unwrap();

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("profilez_tap");
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("pass_through", |b| {
        b.iter(|| pass_through(black_box(&bytes)))
    });
    g.bench_function("tap_accepted", |b| {
        b.iter(|| tap.accepted("profiles", &decoded))
    });
    let mut s = store();
    g.bench_function("fold_decoded", |b| b.iter(|| fold_into(&mut s, &data)));
    g.bench_function("fold_undecoded", |b| {
        b.iter(|| fold_into(&mut s, &ProfilesData::decode(bytes.clone()).unwrap()))
    });
    g.finish();

    let base = best_of(50, || {
        black_box(pass_through(&bytes));
    });
    let on_path = best_of(50, || {
        for _ in 0..100 {
            tap.accepted("profiles", &decoded);
        }
    }) / 100;
    let mut s = store();
    let folded = best_of(50, || fold_into(&mut s, &data));
    let undecoded = best_of(50, || {
        fold_into(&mut s, &ProfilesData::decode(bytes.clone()).unwrap())
    });
    let ratio = |d: Duration| d.as_secs_f64() / base.as_secs_f64();
    println!(
        "\nsummary (medium request, 10k samples): pass-through {:?}; on the pipeline's path the tap costs {:?} = {:.4}x; folding off the path {:?} = {:.2}x (decoded), {:?} = {:.2}x (forwarded bytes)",
        base,
        on_path,
        ratio(on_path),
        folded,
        ratio(folded),
        undecoded,
        ratio(undecoded)
    );
}
