//! Perfetto chunks: traces built here with the same field numbers the
//! Python test (`tests/python/perfetto_chunk.py`, Perfetto's own generated
//! classes) checks end to end.

use serde_json::{json, Value as Json};

use super::support::{attrs, folded, profile, resource_attrs};
use crate::perfetto::proto::{self, Data, TracePacket};
use crate::perfetto::{convert, CONTENT_TYPE};
use crate::{chunk_item_to_otlp, parse_envelope, ItemError, Reason, ReceiveOptions};

const BOOT_NS: u64 = 1_000_000_000;
const REAL_NS: u64 = 1_700_000_001_000_000_000;
const CHUNK_ID: &str = "0432a0a4c25f4697bf9f0a2fcbe6a814";
const PROFILER_ID: &str = "4d229f1d3807421ba62a5f8bc295d836";

fn packet(seq: u32, data: Option<Data>) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(seq),
        data,
        ..TracePacket::default()
    }
}

fn clock() -> TracePacket {
    let c = |id, ts| proto::Clock {
        clock_id: Some(id),
        timestamp: Some(ts),
    };
    packet(
        0,
        Some(Data::ClockSnapshot(proto::ClockSnapshot {
            clocks: vec![c(3, 5), c(6, BOOT_NS), c(1, REAL_NS)],
        })),
    )
}

fn string(iid: u64, s: &str) -> proto::InternedString {
    proto::InternedString {
        iid: Some(iid),
        str: Some(s.as_bytes().to_vec()),
    }
}

fn frame(iid: u64, name: u64, mapping: Option<u64>, rel_pc: u64) -> proto::Frame {
    proto::Frame {
        iid: Some(iid),
        function_name_id: Some(name),
        mapping_id: mapping,
        rel_pc: Some(rel_pc),
    }
}

fn callstack(iid: u64, frames: &[u64]) -> proto::Callstack {
    proto::Callstack {
        iid: Some(iid),
        frame_ids: frames.to_vec(),
    }
}

fn interned(seq: u32, cleared: bool, data: proto::InternedData) -> TracePacket {
    TracePacket {
        interned_data: Some(data),
        sequence_flags: cleared.then_some(1),
        ..packet(seq, None)
    }
}

fn sample(seq: u32, ts: u64, pid: u32, tid: u32, cs: u64) -> TracePacket {
    TracePacket {
        timestamp: Some(ts),
        ..packet(
            seq,
            Some(Data::PerfSample(proto::PerfSample {
                pid: Some(pid),
                tid: Some(tid),
                callstack_iid: Some(cs),
            })),
        )
    }
}

fn encode(packets: &[TracePacket]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in packets {
        prost::encoding::message::encode(1, p, &mut out);
    }
    out
}

/// An app: `main` -> `onDraw` (Java, in an .oat) -> `memcpy` (native, libc
/// with a build id), on thread 42 (the pid) and a named worker 43.
fn app_trace(samples: usize) -> Vec<u8> {
    let data = proto::InternedData {
        function_names: vec![
            string(1, "main"),
            string(2, "io.sentry.samples.MainActivity.onDraw"),
            string(3, "memcpy"),
        ],
        mapping_paths: vec![
            string(10, "system"),
            string(11, "lib64"),
            string(12, "libc.so"),
            string(13, "data"),
            string(14, "app.oat"),
        ],
        build_ids: vec![proto::InternedString {
            iid: Some(20),
            str: Some(vec![
                0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
            ]),
        }],
        mappings: vec![
            proto::Mapping {
                iid: Some(30),
                build_id: Some(20),
                start: Some(0x7000_0000),
                end: Some(0x7010_0000),
                load_bias: Some(0),
                path_string_ids: vec![10, 11, 12],
            },
            proto::Mapping {
                iid: Some(31),
                path_string_ids: vec![13, 14],
                ..proto::Mapping::default()
            },
        ],
        frames: vec![
            frame(1, 1, None, 0x10),
            frame(2, 2, Some(31), 0x20),
            frame(3, 3, Some(30), 0x1234),
        ],
        callstacks: vec![callstack(1, &[1, 2, 3]), callstack(2, &[1, 2])],
    };
    let mut packets = vec![
        clock(),
        interned(7, true, data),
        packet(
            0,
            Some(Data::ProcessTree(proto::ProcessTree {
                threads: vec![proto::ProcessThread {
                    tid: Some(43),
                    name: Some("RenderThread".into()),
                }],
            })),
        ),
    ];
    for i in 0..samples as u64 {
        let (tid, cs) = if i % 4 == 3 { (43, 2) } else { (42, 1) };
        packets.push(sample(7, BOOT_NS + 10_000_000 * i, 42, tid, cs));
    }
    encode(&packets)
}

fn meta() -> Json {
    json!({
        "profiler_id": PROFILER_ID,
        "chunk_id": CHUNK_ID,
        "client_sdk": {"name": "sentry.java.android", "version": "8.28.0"},
        "platform": "android",
        "release": "io.sentry.samples.android@8.28.0+1",
        "environment": "production",
        "version": "2",
        "timestamp": 1_700_000_001.0,
        "content_type": "perfetto",
    })
}

/// An envelope as sentry-java writes a Perfetto chunk: one item, the
/// chunk's JSON and the trace back to back, `meta_length` between them.
fn envelope(meta: &Json, trace: &[u8], header: impl FnOnce(&mut Json)) -> Vec<u8> {
    let meta = serde_json::to_vec(meta).unwrap();
    let mut h = json!({
        "type": "profile_chunk",
        "content_type": CONTENT_TYPE,
        "filename": "profile.pftrace",
        "platform": "android",
        "length": meta.len() + trace.len(),
        "meta_length": meta.len(),
    });
    header(&mut h);
    let mut out = br#"{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","sdk":{"name":"sentry.java.android","version":"8.28.0"}}"#.to_vec();
    out.push(b'\n');
    out.extend(serde_json::to_vec(&h).unwrap());
    out.push(b'\n');
    out.extend(meta);
    out.extend(trace);
    out.push(b'\n');
    out
}

fn receive(bytes: &[u8]) -> Result<crate::Converted, ItemError> {
    let env = parse_envelope(bytes).unwrap();
    chunk_item_to_otlp(&env.items[0], &env.header, &ReceiveOptions::default())
}

#[test]
fn a_trace_becomes_sample_v2_as_relay_reads_it() {
    let c = convert(&app_trace(8)).unwrap();
    let d = &c.data;
    // Leaf first; frames deduplicated across the two callstacks.
    assert_eq!(d.stacks, vec![vec![2, 1, 0], vec![1, 0]]);
    let names: Vec<_> = d.frames.iter().map(|f| f.function.as_deref()).collect();
    assert_eq!(names, [Some("main"), Some("onDraw"), Some("memcpy")]);
    let java = &d.frames[1];
    assert_eq!(
        java.module.as_deref(),
        Some("io.sentry.samples.MainActivity")
    );
    assert_eq!(java.platform.as_deref(), Some("java"));
    assert_eq!(java.package.as_deref(), Some("data/app.oat"));
    assert_eq!(java.instruction_addr, None);
    let native = &d.frames[2];
    assert_eq!(native.platform.as_deref(), Some("native"));
    assert_eq!(native.instruction_addr, Some(0x7000_1234));
    assert_eq!(native.package.as_deref(), Some("system/lib64/libc.so"));
    // Boot-clock times on the wall clock.
    assert_eq!(d.samples.len(), 8);
    assert_eq!(d.samples[0].timestamp, 1_700_000_001.0);
    assert!((d.samples[7].timestamp - 1_700_000_001.07).abs() < 1e-6);
    let threads: Vec<_> = d
        .thread_metadata
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_string(), v.name.as_deref().unwrap().to_owned()))
        .collect();
    assert_eq!(
        threads,
        [
            ("42".into(), "main".into()),
            ("43".into(), "RenderThread".into())
        ]
    );
    // The native mapping with a build id is an image; the .oat is not.
    assert_eq!(c.images.len(), 1);
    let img = &c.images[0];
    assert_eq!(img.code_file.as_deref(), Some("system/lib64/libc.so"));
    assert_eq!(
        img.debug_id.as_deref(),
        Some("efbeadde-0201-0403-0506-0708090a0b0c")
    );
    assert_eq!(
        img.code_id.as_deref(),
        Some("deadbeef0102030405060708090a0b0c0d0e")
    );
    assert_eq!(
        (img.image_addr, img.image_size),
        (Some(0x7000_0000), Some(0x10_0000))
    );
}

#[test]
fn a_perfetto_envelope_arrives_as_one_otlp_profile() {
    let c = receive(&envelope(&meta(), &app_trace(40), |_| {})).unwrap();
    assert_eq!(c.sentry_samples, 40);
    let f = folded(&c.data);
    assert_eq!(f["main;onDraw;memcpy [main]"], 30, "{f:?}");
    assert_eq!(f["main;onDraw [RenderThread]"], 10, "{f:?}");
    let p = attrs(&c.data, &profile(&c.data).attribute_indices);
    assert_eq!(p["sentry.platform"], "android");
    assert_eq!(p["sentry.chunk_id"], CHUNK_ID);
    let r = resource_attrs(&c.data);
    assert_eq!(r["service.name"], "io.sentry.samples.android");
    assert_eq!(r["telemetry.sdk.name"], "sentry.java.android");
}

#[test]
fn perfetto_items_are_refused_with_relays_reasons() {
    let trace = app_trace(4);
    let reason = |bytes: Vec<u8>| receive(&bytes).unwrap_err().reason;
    // meta_length missing, zero, or the whole payload.
    for ml in [json!(null), json!(0), json!(99_999)] {
        let env = envelope(&meta(), &trace, |h| h["meta_length"] = ml.clone());
        assert_eq!(reason(env), Reason::InvalidSampledProfile, "{ml}");
    }
    // No platform on the item header.
    let env = envelope(&meta(), &trace, |h| {
        h.as_object_mut().unwrap().remove("platform");
    });
    assert_eq!(reason(env), Reason::InvalidProfileType);
    // A JSON chunk that claims a meta_length.
    let env = envelope(&meta(), &trace, |h| {
        h.as_object_mut().unwrap().remove("content_type");
    });
    assert_eq!(reason(env), Reason::InvalidSampledProfile);
    // Metadata that is not a chunk's.
    let env = envelope(&json!({"platform": "android"}), &trace, |_| {});
    assert_eq!(reason(env), Reason::InvalidJson);
    // A trace that is not one, or has no clock to put it on the wall clock.
    let env = envelope(&meta(), b"\x0a\x05ab", |_| {});
    assert_eq!(reason(env), Reason::InvalidSampledProfile);
    let mut no_clock = app_trace(4);
    no_clock.drain(..encode(&[clock()]).len());
    assert_eq!(
        convert(&no_clock).unwrap_err().reason,
        Reason::InvalidSampledProfile
    );
    // Samples whose callstacks no sequence interned.
    let orphan = encode(&[clock(), sample(1, BOOT_NS, 1, 1, 99)]);
    assert_eq!(
        convert(&orphan).unwrap_err().reason,
        Reason::NotEnoughSamples
    );
}

#[test]
fn a_cleared_sequence_resolves_later_samples_against_its_new_tables() {
    let data = |name: &str| proto::InternedData {
        function_names: vec![string(1, name)],
        frames: vec![frame(1, 1, None, 0)],
        callstacks: vec![callstack(1, &[1])],
        ..proto::InternedData::default()
    };
    let trace = encode(&[
        clock(),
        interned(3, true, data("before")),
        sample(3, BOOT_NS, 9, 9, 1),
        interned(3, true, data("after")),
        sample(3, BOOT_NS + 1, 9, 9, 1),
        // Another sequence's ids are its own.
        sample(4, BOOT_NS + 2, 9, 9, 1),
    ]);
    let c = convert(&trace).unwrap();
    let leaf = |i: usize| {
        let s = &c.data.samples[i];
        c.data.frames[c.data.stacks[s.stack_id][0]]
            .function
            .as_deref()
            .unwrap()
            .to_owned()
    };
    assert_eq!(c.data.samples.len(), 2);
    assert_eq!((leaf(0), leaf(1)), ("before".into(), "after".into()));
}

#[test]
fn hostile_traces_stop_at_relays_bounds_before_the_work() {
    let limit = |trace: &[u8]| {
        let e = convert(trace).unwrap_err();
        assert_eq!(e.reason, Reason::ExceedSizeLimit, "{e}");
        e.message
    };
    // A packet that claims 2^40 bytes: refused by its length, not read.
    let mut huge = vec![0x0a];
    prost::encoding::encode_varint(1 << 40, &mut huge);
    assert!(limit(&huge).contains("bytes"));
    // 100,001 samples (tiny packets): refused at the cap.
    let one = encode(&[sample(1, 1, 1, 1, 1)]);
    let many: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 100_001)
        .collect();
    assert!(limit(&many).contains("100000 samples"));
    // A 1,001-frame stack.
    let deep = proto::InternedData {
        function_names: vec![string(1, "f")],
        frames: vec![frame(1, 1, None, 0)],
        callstacks: vec![callstack(1, &[1; 1001])],
        ..proto::InternedData::default()
    };
    let trace = encode(&[clock(), interned(1, true, deep), sample(1, 1, 1, 1, 1)]);
    assert!(limit(&trace).contains("1001 frames"));
    // 65 sequences.
    let seqs: Vec<_> = (0..65)
        .map(|s| interned(s, true, proto::InternedData::default()))
        .collect();
    assert!(limit(&encode(&seqs)).contains("sequences"));
    // Interned strings past the work budget, a few MiB at a time.
    let big = "x".repeat(3 << 20);
    let strings: Vec<_> = (0..6)
        .map(|i| {
            interned(
                1,
                false,
                proto::InternedData {
                    function_names: vec![string(i, &big)],
                    ..proto::InternedData::default()
                },
            )
        })
        .collect();
    assert!(limit(&encode(&strings)).contains("interned"));
}

#[test]
fn json_chunks_are_routed_by_version_as_relay_routes_them() {
    use crate::android::synth;
    use crate::chunk_to_otlp_in_envelope as receive_json;
    let opts = ReceiveOptions::default();
    let (log, _) = synth::sampled_trace(3, 1_700_000_000_000_000, 20, 10_000);
    let android = synth::chunk_json(&log, CHUNK_ID, PROFILER_ID);
    let run = |c: &Json, platform: &str| {
        receive_json(
            &serde_json::to_vec(c).unwrap(),
            Some(platform),
            &Json::Null,
            &opts,
        )
    };
    for version in [json!("2"), json!("2.android-trace")] {
        let mut c = android.clone();
        c["version"] = version.clone();
        assert!(run(&c, "android").is_ok(), "{version}");
    }
    for version in [json!(null), json!("1"), json!("3")] {
        let mut c = android.clone();
        match &version {
            Json::Null => c.as_object_mut().unwrap().remove("version"),
            v => c
                .as_object_mut()
                .unwrap()
                .insert("version".into(), v.clone()),
        };
        let e = run(&c, "android").unwrap_err();
        assert_eq!(e.reason, Reason::PlatformNotSupported, "{version}: {e}");
    }
    // 2.android-trace without a trace; a v2 Android chunk (an ANR profile)
    // is sample format v2.
    let v2: Json = serde_json::from_slice(&super::support::python_chunk()).unwrap();
    let mut anr = v2.clone();
    anr["platform"] = json!("android");
    assert!(run(&anr, "android").is_ok());
    anr["version"] = json!("2.android-trace");
    assert_eq!(
        run(&anr, "android").unwrap_err().reason,
        Reason::PlatformNotSupported
    );
    // The item header's platform must be the payload's, not merely of the
    // same profile type.
    assert_eq!(
        run(&v2, "node").unwrap_err().reason,
        Reason::InvalidProfileType
    );
    assert!(run(&v2, "python").is_ok());
}

#[test]
fn a_perfetto_chunk_goes_back_to_sentry_as_sample_format_v2() {
    use crate::{otlp_to_chunks, ExportOptions};
    let c = receive(&envelope(&meta(), &app_trace(40), |_| {})).unwrap();
    let results = otlp_to_chunks(&c.data, &ExportOptions::default());
    let sent: Vec<Json> = results
        .iter()
        .filter(|r| r.chunk.is_some())
        .map(|r| serde_json::from_slice(&r.payload).unwrap())
        .collect();
    let why: Vec<_> = results.iter().map(|r| &r.dropped).collect();
    assert_eq!(sent.len(), 1, "{why:?}");
    let chunk = &sent[0];
    assert_eq!(chunk["platform"], "android");
    assert_eq!(chunk["version"], "2");
    assert!(chunk.get("sampled_profile").is_none());
    assert_eq!(chunk["chunk_id"], CHUNK_ID);
    let frames = chunk["profile"]["frames"].as_array().unwrap();
    let on_draw = frames.iter().find(|f| f["function"] == "onDraw").unwrap();
    assert_eq!(on_draw["module"], "io.sentry.samples.MainActivity");
    let memcpy = frames.iter().find(|f| f["function"] == "memcpy").unwrap();
    assert_eq!(memcpy["instruction_addr"], "0x70001234");
    let images = chunk["debug_meta"]["images"].as_array().unwrap();
    assert!(
        images
            .iter()
            .any(|i| i["debug_id"] == "efbeadde-0201-0403-0506-0708090a0b0c"),
        "{images:?}"
    );
    assert_eq!(chunk["profile"]["samples"].as_array().unwrap().len(), 40);
}
