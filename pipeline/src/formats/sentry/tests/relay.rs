//! Relay's v2 rules, case by case (mirroring Relay's own tests in
//! `relay-profiling/src/sample/v2.rs`).

use std::collections::BTreeMap;

use crate::formats::sentry::outgoing::{
    ChunkFrame, ChunkProfile, ChunkSample, ClientSdk, ProfileChunk, ThreadMetadata,
};
use crate::formats::sentry::reason;
use crate::formats::sentry::relay_rules::{check_v2, Pruned};

const S: u64 = 1_000_000_000;

fn sample(secs: u64, stack_id: u32, thread: u32) -> ChunkSample {
    ChunkSample {
        timestamp_unix_nano: secs * S,
        stack_id,
        thread,
        home: true,
    }
}

/// Stack 0 has a frame, stack 1 is empty (idle).
fn chunk(samples: Vec<ChunkSample>) -> ProfileChunk {
    ProfileChunk {
        chunk_id: "0c2a5e3bc5a24b4e9f3a0e1a22a6d5c1".into(),
        profiler_id: "d8f8e8b7a6b54b3c9a1d2e3f4a5b6c7d".into(),
        debug_meta: None,
        environment: None,
        platform: "python".into(),
        release: None,
        client_sdk: ClientSdk {
            name: "profcol".into(),
            version: "0".into(),
        },
        version: "2",
        measurements: None,
        profile: ChunkProfile {
            samples,
            stacks: vec![vec![0], vec![]],
            frames: vec![ChunkFrame::default()],
            thread_ids: vec!["1".into(), "2".into(), "3".into()],
            thread_metadata: BTreeMap::from([
                (
                    "1".into(),
                    ThreadMetadata {
                        name: Some("one".into()),
                        priority: None,
                    },
                ),
                (
                    "2".into(),
                    ThreadMetadata {
                        name: Some("two".into()),
                        priority: None,
                    },
                ),
                (
                    "3".into(),
                    ThreadMetadata {
                        name: Some("three".into()),
                        priority: Some(4),
                    },
                ),
            ]),
        },
    }
}

#[test]
fn threads_with_one_non_idle_sample_are_dropped() {
    // Relay's test_single_samples_are_removed: only thread 3 keeps its 4 samples.
    let mut c = chunk(vec![
        sample(60, 1, 0),
        sample(60, 1, 0),
        sample(60, 0, 0),
        sample(60, 1, 0),
        sample(30, 0, 1),
        sample(60, 1, 1),
        sample(60, 1, 1),
        sample(30, 0, 2),
        sample(30, 0, 2),
        sample(60, 1, 2),
        sample(60, 1, 2),
    ]);
    let pruned = check_v2(&mut c).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            samples: 7,
            homes: 7
        }
    );
    assert_eq!(c.profile.samples.len(), 4);
    assert!(c.profile.samples.iter().all(|s| s.thread == 2));
    // Metadata of threads without samples goes too.
    assert_eq!(c.profile.thread_metadata.keys().collect::<Vec<_>>(), ["3"]);
}

#[test]
fn samples_are_sorted_by_timestamp() {
    let mut c = chunk(vec![sample(60, 0, 0), sample(30, 0, 0)]);
    check_v2(&mut c).unwrap();
    let ts: Vec<u64> = c
        .profile
        .samples
        .iter()
        .map(|s| s.timestamp_unix_nano / S)
        .collect();
    assert_eq!(ts, [30, 60]);
}

#[test]
fn refusals_in_relays_order() {
    // Nothing left after pruning.
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 1)]);
    assert_eq!(check_v2(&mut c), Err(reason::NOT_ENOUGH_SAMPLES));
    let mut c = chunk(vec![]);
    assert_eq!(check_v2(&mut c), Err(reason::NOT_ENOUGH_SAMPLES));

    // An unknown stack counts as idle for pruning, then refuses the chunk.
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0), sample(3, 9, 0)]);
    assert_eq!(check_v2(&mut c), Err(reason::MALFORMED_SAMPLES));

    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0)]);
    c.profile.stacks.push(vec![5]);
    assert_eq!(check_v2(&mut c), Err(reason::MALFORMED_STACKS));

    // Relay's test_is_above_max_duration cases.
    let mut c = chunk(vec![sample(10, 0, 0), sample(80, 0, 0)]);
    assert_eq!(check_v2(&mut c), Err(reason::DURATION_TOO_LONG));
    let mut c = chunk(vec![sample(50, 0, 0), sample(20, 0, 0)]);
    assert!(check_v2(&mut c).is_ok());
    let mut c = chunk(vec![sample(0, 0, 0), sample(66, 0, 0)]);
    assert!(check_v2(&mut c).is_ok(), "exactly 66 s is allowed");

    // What Relay's deserializer insists on.
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0)]);
    c.chunk_id = "nope".into();
    assert_eq!(check_v2(&mut c), Err(reason::INVALID_JSON));
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0)]);
    c.platform = "android".into();
    assert_eq!(check_v2(&mut c), Err(reason::PLATFORM_NOT_SUPPORTED));
}

#[test]
fn serialized_chunk_has_relays_shape() {
    let mut c = chunk(vec![sample(1, 0, 2), sample(2, 0, 2)]);
    check_v2(&mut c).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "chunk_id": "0c2a5e3bc5a24b4e9f3a0e1a22a6d5c1",
            "profiler_id": "d8f8e8b7a6b54b3c9a1d2e3f4a5b6c7d",
            "platform": "python",
            "client_sdk": {"name": "profcol", "version": "0"},
            "version": "2",
            "profile": {
                "samples": [
                    {"timestamp": 1.0, "stack_id": 0, "thread_id": "3"},
                    {"timestamp": 2.0, "stack_id": 0, "thread_id": "3"}
                ],
                "stacks": [[0], []],
                "frames": [{}],
                "thread_metadata": {"3": {"name": "three", "priority": 4}}
            }
        })
    );
}
