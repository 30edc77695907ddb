use std::sync::Arc;

use profcol_pipeline::ProfileBatch;

use super::super::progress::Progress;

#[test]
fn progress_survives_a_failed_attempt_and_is_forgotten_when_settled() {
    let p = Arc::new(Progress::default());
    let batch = Arc::new(ProfileBatch::default());
    let mut c = p.claim(&batch, 7);
    c.state.done = 2;
    c.state.rejected = 3;
    c.save();
    drop(c); // a failed (or cancelled) attempt
    let c = p.claim(&batch, 99);
    assert_eq!(
        (c.state.done, c.state.now_unix_nano, c.state.rejected),
        (2, 7, 3)
    );
    c.finish();
    assert!(p.is_empty());
    assert_eq!(
        p.claim(&batch, 99).state.done,
        0,
        "settled: a new export starts over"
    );
}

#[test]
fn a_concurrent_copy_starts_from_scratch_and_records_nothing() {
    let p = Arc::new(Progress::default());
    let batch = Arc::new(ProfileBatch::default());
    let mut first = p.claim(&batch, 1);
    first.state.done = 1;
    first.save();
    let mut second = p.claim(&batch, 2);
    assert_eq!(second.state.done, 0);
    second.state.done = 5;
    second.save();
    second.finish();
    assert_eq!(
        p.len(),
        1,
        "the copy does not settle the first export's entry"
    );
    drop(first);
    assert_eq!(p.claim(&batch, 3).state.done, 1);
}

#[test]
fn entries_of_dropped_batches_are_pruned() {
    let p = Arc::new(Progress::default());
    for _ in 0..100 {
        let batch = Arc::new(ProfileBatch::default());
        drop(p.claim(&batch, 0)); // left unsettled, then the runtime gives up
    }
    let live = Arc::new(ProfileBatch::default());
    drop(p.claim(&live, 0));
    assert_eq!(p.len(), 1, "only the live batch is remembered");
}
