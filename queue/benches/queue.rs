//! What a request costs in the sending queue, one full trip: reserve, write,
//! commit, take, settle. The in-memory queue against the persistent one
//! (`file_storage`) with `fsync: false` and `fsync: true`, beside raw prost
//! decode+encode of the same request (the baseline every figure is a ratio
//! to) and the receiver's decode+validate that each request costs anyway.
//!
//! The disk queue writes the bytes the request arrived as (a batch nobody
//! mutated keeps them) and reads nothing back while it keeps up, so its
//! cost is one `write` (+ one `fdatasync`) per request and per ack.
//!
//! `cargo bench -p profcol-queue --bench queue`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_model::memory::MemoryBudget;
use profcol_model::proto::ExportProfilesServiceRequest;
use profcol_model::ProfileBatch;
use profcol_model::{synth, validate};
use profcol_queue::{DiskQueue, DiskQueueOptions, MemoryQueue, Queue, Sizer};

fn raw_prost(bytes: &[u8]) -> usize {
    let req = ExportProfilesServiceRequest::decode(bytes).unwrap();
    req.encode_to_vec().len()
}

fn receive(bytes: &Bytes) -> Arc<ProfileBatch> {
    let batch = ProfileBatch::decode(bytes.clone()).unwrap();
    validate(batch.data()).unwrap();
    Arc::new(batch)
}

/// One request through the queue and out again, settled.
async fn trip(q: &dyn Queue, batch: &Arc<ProfileBatch>) {
    let mut slot = q.try_reserve(batch).unwrap();
    slot.write(batch).await.unwrap();
    slot.commit();
    let (req, ack) = q.take().await.unwrap();
    black_box(&req.batch);
    ack.done().await;
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let budget = MemoryBudget::new(1 << 30);
    let disk = |name: &str, fsync: bool| -> Arc<dyn Queue> {
        let opts = DiskQueueOptions {
            directory: dir.path().join(name),
            fsync,
            capacity: 1000,
            sizer: Sizer::Requests,
            resident: 20,
            segment_bytes: 64 << 20,
        };
        Arc::new(
            rt.block_on(DiskQueue::open(
                opts,
                name,
                budget.clone(),
                Arc::new(|_| {}),
            ))
            .unwrap(),
        )
    };
    let queues: Vec<(&str, Arc<dyn Queue>)> = vec![
        ("memory", Arc::new(MemoryQueue::new(1000, Sizer::Requests))),
        ("disk_fsync_false", disk("nofsync", false)),
        ("disk_fsync_true", disk("fsync", true)),
    ];
    let sizes = [(1_000, 400), (100_000, 20_000)];
    let requests: Vec<(usize, Bytes)> = sizes
        .iter()
        .map(|&(n, stacks)| (n, Bytes::from(synth::request(n, stacks).encode_to_vec())))
        .collect();
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    for (n, bytes) in &requests {
        let batch = receive(bytes);
        let mut g = c.benchmark_group(format!("queue_{n}"));
        g.throughput(Throughput::Elements(*n as u64));
        g.bench_function("prost_decode_encode", |b| {
            b.iter(|| raw_prost(black_box(bytes)))
        });
        g.bench_function("decode_validate", |b| b.iter(|| receive(black_box(bytes))));
        for (name, q) in &queues {
            g.bench_function(*name, |b| b.iter(|| rt.block_on(trip(&**q, &batch))));
        }
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of 15 runs), ratio to raw prost decode+encode:");
    for (n, bytes) in &requests {
        let batch = receive(bytes);
        let raw = best_of(15, || {
            black_box(raw_prost(black_box(bytes)));
        });
        let received = best_of(15, || {
            black_box(receive(black_box(bytes)));
        });
        let mut line = format!(
            "  {n:>7} samples, {:>9} bytes: prost {raw:>9.2?}; decode+validate {:.2}x",
            bytes.len(),
            received.as_secs_f64() / raw.as_secs_f64()
        );
        let mut per_request = Vec::new();
        for (name, q) in &queues {
            let t = best_of(15, || rt.block_on(trip(&**q, &batch)));
            line += &format!(
                "; {name} {t:>9.2?} = {:.3}x",
                t.as_secs_f64() / raw.as_secs_f64()
            );
            per_request.push((name, received + t));
        }
        println!("{line}");
        // The target: a request's cost (the receiver's decode and the
        // queue) with each persistent queue, against the memory queue.
        let memory = per_request[0].1.as_secs_f64();
        for (name, t) in &per_request[1..] {
            println!(
                "  {n:>7} samples: decode+validate+{name} = {:.2}x decode+validate+memory",
                t.as_secs_f64() / memory
            );
        }
    }
}
