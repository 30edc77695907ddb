//! Relay's v2 rules, case by case (mirroring Relay's own tests in
//! `relay-profiling/src/sample/v2.rs`).

use std::collections::BTreeMap;

use crate::v2::outgoing::{
    ChunkFrame, ChunkProfile, ChunkSample, ClientSdk, ProfileChunk, ThreadMetadata,
};
use crate::v2::relay_rules::{
    check_v2, exceeds_max_duration, is_debug_id, relay_reads_image, Pruned,
};
use crate::Reason;

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
        android: None,
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
    assert_eq!(check_v2(&mut c), Err(Reason::NotEnoughSamples));
    let mut c = chunk(vec![]);
    assert_eq!(check_v2(&mut c), Err(Reason::NotEnoughSamples));

    // An unknown stack counts as idle for pruning, then refuses the chunk.
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0), sample(3, 9, 0)]);
    assert_eq!(check_v2(&mut c), Err(Reason::MalformedSamples));

    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0)]);
    c.profile.stacks.push(vec![5]);
    assert_eq!(check_v2(&mut c), Err(Reason::MalformedStacks));

    // Relay's test_is_above_max_duration cases.
    let mut c = chunk(vec![sample(10, 0, 0), sample(80, 0, 0)]);
    assert_eq!(check_v2(&mut c), Err(Reason::DurationTooLong));
    let mut c = chunk(vec![sample(50, 0, 0), sample(20, 0, 0)]);
    assert!(check_v2(&mut c).is_ok());
    let mut c = chunk(vec![sample(0, 0, 0), sample(66, 0, 0)]);
    assert!(check_v2(&mut c).is_ok(), "exactly 66 s is allowed");

    // What Relay's deserializer insists on.
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0)]);
    c.chunk_id = "nope".into();
    assert_eq!(check_v2(&mut c), Err(Reason::InvalidJson));
    let mut c = chunk(vec![sample(1, 0, 0), sample(2, 0, 0)]);
    // Newer Relays take an `android` chunk in sample format v2.
    c.platform = "android".into();
    assert!(check_v2(&mut c).is_ok());
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

#[test]
fn duration_is_measured_on_the_timestamps_as_serialized() {
    let at = |ns: u64, thread: u32| ChunkSample {
        timestamp_unix_nano: ns,
        stack_id: 0,
        thread,
        home: true,
    };
    // 66 s minus 300 ns, across 2^31 s (2038-01-19): the microseconds are
    // exactly 66 s apart, the float seconds Relay subtracts 66.00000024.
    let first = 2_147_483_618_000_006_100;
    let last = first + 66 * S - 300;
    let mut c = chunk(vec![at(first, 0), at(last, 0)]);
    let v: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
    let ts = |i: usize| v["profile"]["samples"][i]["timestamp"].as_f64().unwrap();
    assert!(ts(1) - ts(0) > 66.0, "what Relay computes");
    assert!(exceeds_max_duration(first, last));
    assert_eq!(check_v2(&mut c), Err(Reason::DurationTooLong));

    // The same span inside a binade is exactly 66.0: accepted.
    let first = 1_795_318_570_000_006_100;
    let mut c = chunk(vec![at(first, 0), at(first + 66 * S - 300, 0)]);
    assert!(!exceeds_max_duration(first, first + 66 * S - 300));
    assert!(check_v2(&mut c).is_ok());
    // And 66 s plus a few hundred ns that round to 66 s: Relay accepts it.
    let first = 1_795_318_570_000_006_400;
    let mut c = chunk(vec![at(first, 0), at(first + 66 * S + 50, 0)]);
    assert!(check_v2(&mut c).is_ok());
}

#[test]
fn debug_ids_as_relay_parses_them() {
    for ok in [
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75",
        "DFB8E43A-F242-3D73-A453-AEB6A777EF75",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75-a",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75-ffffffff",
        "dfb8e43af2423d73a453aeb6a777ef75",
        "DFB8E43AF2423D73A453AEB6A777EF75a",
    ] {
        assert!(is_debug_id(ok), "{ok}");
    }
    for bad in [
        "",
        "not-a-uuid",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef7",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75-",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75a",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75-123456789",
        "dfb8e43af2423d73a453aeb6a777ef75-a",
        "dfb8e43a-f2423d73-a453-aeb6a777ef75",
        "zfb8e43a-f242-3d73-a453-aeb6a777ef75",
        "dfb8e43a-f242-3d73-a453-aeb6a777ef75-é",
    ] {
        assert!(!is_debug_id(bad), "{bad}");
    }
    let img = |v: serde_json::Value| relay_reads_image(&v);
    assert!(img(serde_json::json!({"type": "symbolic"})));
    assert!(img(
        serde_json::json!({"type": "macho", "id": "dfb8e43af2423d73a453aeb6a777ef75"})
    ));
    assert!(!img(serde_json::json!({"type": "macho", "id": "x"})));
    assert!(!img(
        serde_json::json!({"type": "elf", "debug_id": "dfb8e43af2423d73a453aeb6a777ef75"})
    ));
    assert!(!img(serde_json::json!({"type": "symbolic", "debug_id": 7})));
    assert!(!img(
        serde_json::json!({"type": "proguard", "build_id": "x"})
    ));
}
