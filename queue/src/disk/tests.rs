use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use prost::Message;

use super::*;
use profcol_model::synth;

fn opts(dir: &Path, resident: usize) -> DiskQueueOptions {
    DiskQueueOptions {
        directory: dir.to_owned(),
        fsync: false,
        capacity: 100,
        sizer: Sizer::Requests,
        resident,
        segment_bytes: 64 << 10,
    }
}

/// What the runtime's metric would count: the damage a queue reported.
#[derive(Clone, Default)]
struct Corrupt(Arc<AtomicU64>);

impl Corrupt {
    fn counter(&self) -> OnCorrupt {
        let n = self.0.clone();
        Arc::new(move |k| {
            n.fetch_add(k, Ordering::Relaxed);
        })
    }
}

async fn open(dir: &Path, resident: usize) -> (DiskQueue, Corrupt) {
    open_with(opts(dir, resident)).await
}

async fn open_with(o: DiskQueueOptions) -> (DiskQueue, Corrupt) {
    let corrupt = Corrupt::default();
    let q = DiskQueue::open(o, "otlp", MemoryBudget::new(1 << 30), corrupt.counter())
        .await
        .unwrap();
    (q, corrupt)
}

/// A batch as a receiver hands it on: decoded, its bytes kept.
fn batch(samples: usize) -> Arc<ProfileBatch> {
    let bytes = Bytes::from(synth::request(samples, samples / 4 + 1).encode_to_vec());
    Arc::new(ProfileBatch::decode(bytes).unwrap())
}

async fn put(q: &DiskQueue, b: &Arc<ProfileBatch>) {
    let mut slot = q.try_reserve(b).unwrap();
    slot.write(b).await.unwrap();
    slot.commit();
}

fn corrupt(t: &Corrupt) -> u64 {
    t.0.load(Ordering::Relaxed)
}

fn files(dir: &Path, ext: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(ext)
        })
        .count()
}

#[tokio::test]
async fn what_was_not_settled_is_queued_again_in_order_with_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<_> = (1..=6).map(|i| batch(i * 10)).collect();
    {
        let (q, _) = open(dir.path(), 2).await;
        for b in &batches {
            put(&q, b).await;
        }
        // 0 settled, 1 part-sent, 2 taken and lost with the process.
        let (r0, a0) = q.take().await.unwrap();
        assert_eq!(r0.batch.encoded(), batches[0].encoded());
        a0.done().await;
        let (_, mut a1) = q.take().await.unwrap();
        let progress = Progress {
            delivered: 3,
            rejected: 0,
            resume: Some(serde_json::json!({"done": 1})),
        };
        a1.progress(&progress).await;
        let _ = q.take().await.unwrap();
        // Dropped without close: as a kill -9 leaves it.
    }
    let (q, t) = open(dir.path(), 2).await;
    assert_eq!(q.size(), 5);
    assert_eq!(corrupt(&t), 0);
    let (r1, _) = q.take().await.unwrap();
    assert_eq!(r1.batch.encoded(), batches[1].encoded());
    assert_eq!(r1.progress().delivered, 3);
    assert_eq!(r1.progress().resume, Some(serde_json::json!({"done": 1})));
    for b in &batches[2..] {
        let (r, a) = q.take().await.unwrap();
        assert_eq!(r.batch.encoded(), b.encoded(), "read back byte for byte");
        assert_eq!(r.batch.data(), b.data());
        assert_eq!(r.progress(), Progress::default());
        a.done().await;
    }
}

#[tokio::test]
async fn settled_segments_are_deleted_and_a_drained_queue_holds_no_data() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _) = open(dir.path(), 0).await;
    // Several segments' worth (64 KiB each).
    for _ in 0..20 {
        put(&q, &batch(2000)).await;
    }
    assert!(files(dir.path(), ".seg") > 3);
    for _ in 0..20 {
        let (_, a) = q.take().await.unwrap();
        a.done().await;
    }
    assert_eq!(files(dir.path(), ".seg"), 1, "only the active one");
    assert_eq!(files(dir.path(), ".acks"), 0);
    let data: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(data, 0);
}

#[tokio::test]
async fn a_batch_written_but_not_committed_is_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (q, _) = open(dir.path(), 2).await;
        let b = batch(10);
        let mut slot = q.try_reserve(&b).unwrap();
        slot.write(&b).await.unwrap();
        drop(slot); // another queue refused the batch: the client was refused
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(q.size(), 0);
    }
    let (q, _) = open(dir.path(), 2).await;
    assert_eq!(q.size(), 0);
}

#[tokio::test]
async fn damage_is_skipped_and_counted_and_the_rest_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<_> = (0..4).map(|i| batch(300 + i)).collect();
    // One segment for all four.
    let one_segment = || DiskQueueOptions {
        segment_bytes: 64 << 20,
        ..opts(dir.path(), 0)
    };
    {
        let (q, _) = open_with(one_segment()).await;
        for b in &batches {
            put(&q, b).await;
        }
    }
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "seg") && std::fs::metadata(p).unwrap().len() > 0
        })
        .unwrap();
    let mut data = std::fs::read(&seg).unwrap();
    let scan = record::scan_requests(&data);
    // A zeroed page inside request 1, and request 3 cut in half.
    let r1 = &scan.records[1];
    let from = r1.offset as usize + 100;
    data[from..from + 4096.min(r1.len as usize - 100)].fill(0);
    let r3 = &scan.records[3];
    data.truncate((r3.offset + r3.len / 2) as usize);
    std::fs::write(&seg, data).unwrap();

    let (q, t) = open_with(one_segment()).await;
    assert_eq!(corrupt(&t), 2);
    assert_eq!(q.size(), 2);
    for want in [&batches[0], &batches[2]] {
        let (r, a) = q.take().await.unwrap();
        assert_eq!(r.batch.data(), want.data());
        a.done().await;
    }
}

#[tokio::test]
async fn a_directory_of_another_version_is_set_aside() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("exporter_otlp");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("queue.db"), b"a bbolt file from another program").unwrap();
    let (q, t) = open(&dir, 1).await;
    assert_eq!(corrupt(&t), 1);
    assert_eq!(q.size(), 0);
    let aside: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("exporter_otlp.unreadable-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert!(parent.path().join(&aside[0]).join("queue.db").exists());
    put(&q, &batch(5)).await;
    assert_eq!(q.size(), 1);
}

#[tokio::test]
async fn one_queue_directory_serves_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let (_q, _) = open(dir.path(), 1).await;
    let second = DiskQueue::open(
        opts(dir.path(), 1),
        "otlp",
        MemoryBudget::new(1 << 20),
        Corrupt::default().counter(),
    )
    .await;
    let err = second.err().unwrap().to_string();
    assert!(err.contains("in use by another process"), "{err}");
}

#[tokio::test]
async fn closing_keeps_what_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (q, _) = open(dir.path(), 4).await;
        put(&q, &batch(10)).await;
        put(&q, &batch(20)).await;
        q.close();
        assert!(q.take().await.is_none(), "no draining at shutdown");
        assert_eq!(q.try_reserve(&batch(1)).err(), Some(QueueError::Closed));
    }
    let (q, _) = open(dir.path(), 4).await;
    assert_eq!(q.size(), 2);
}

#[tokio::test]
async fn capacity_counts_requests_or_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let b = batch(100);
    let mut o = opts(dir.path(), 1);
    o.capacity = b.encoded_len() * 2 + 10;
    o.sizer = Sizer::Bytes;
    let q = DiskQueue::open(
        o,
        "otlp",
        MemoryBudget::new(1 << 30),
        Corrupt::default().counter(),
    )
    .await
    .unwrap();
    put(&q, &b).await;
    put(&q, &b).await;
    assert_eq!(q.try_reserve(&b).err(), Some(QueueError::Full));
    let (_, a) = q.take().await.unwrap();
    a.done().await;
    assert!(q.try_reserve(&b).is_ok());
}

/// A request handed back goes first, with its progress, and is still
/// settled on disk only once: after the next taker's `done`, a restart
/// finds nothing.
#[tokio::test]
async fn a_request_handed_back_is_taken_first_with_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (batch(10), batch(20));
    {
        let (q, _) = open(dir.path(), 1).await;
        put(&q, &a).await;
        put(&q, &b).await;
        let (r, ack) = q.take().await.unwrap();
        r.record(Progress {
            delivered: 4,
            ..Progress::default()
        });
        ack.requeue(r);
        assert_eq!(q.size(), 2);
        let (r, ack) = q.take().await.unwrap();
        assert_eq!(r.batch.encoded(), a.encoded());
        assert_eq!(r.progress().delivered, 4);
        ack.done().await;
        let (r, ack) = q.take().await.unwrap();
        assert_eq!(r.batch.encoded(), b.encoded());
        ack.done().await;
    }
    let (q, _) = open(dir.path(), 1).await;
    assert_eq!(q.size(), 0);
}
