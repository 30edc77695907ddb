use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::support::*;
use crate::envelope;
use crate::{chunk_to_otlp, profile_v1_to_otlp, Converted, ItemError, Reason, ReceiveOptions};
use profcol_model::proto::any_value::Value;

fn opts() -> ReceiveOptions {
    ReceiveOptions::default()
}

/// Converted profiles with their payloads.
type ConvertedItems = Vec<(Converted, Vec<u8>)>;

/// Converts every profile item of a recorded envelope; counts the rest.
fn convert_envelope(bytes: &[u8]) -> (ConvertedItems, BTreeMap<String, usize>) {
    let env = envelope::parse(bytes).unwrap();
    let tx = env
        .items
        .iter()
        .find(|i| i.item_type() == "transaction")
        .map(|i| i.payload);
    let mut converted = Vec::new();
    let mut ignored = BTreeMap::new();
    for item in &env.items {
        let c = match item.item_type() {
            "profile_chunk" => chunk_to_otlp(item.payload, item.platform(), &opts()).unwrap(),
            "profile" => {
                profile_v1_to_otlp(item.payload, item.platform(), tx, &env.header, &opts()).unwrap()
            }
            other => {
                *ignored.entry(other.to_owned()).or_default() += 1;
                continue;
            }
        };
        converted.push((c, item.payload.to_vec()));
    }
    (converted, ignored)
}

#[test]
fn every_recorded_envelope_converts_with_all_samples_and_frames() {
    let mut profiles = 0;
    for path in recorded_envelopes() {
        let bytes = std::fs::read(&path).unwrap();
        let (converted, ignored) = convert_envelope(&bytes);
        for (c, payload) in converted {
            profiles += 1;
            let name = path.display();
            check_dictionary(&c.data);
            let input: Json = serde_json::from_slice(&payload).unwrap();
            let sent = input["profile"]["samples"].as_array().unwrap().len() as u64;
            let dropped: u64 = c.dropped.iter().map(|d| d.1).sum();
            assert_eq!(
                c.sentry_samples + dropped,
                sent,
                "{name}: every Sentry sample accounted for"
            );
            let timestamps: usize = profile(&c.data)
                .samples
                .iter()
                .map(|s| s.timestamps_unix_nano.len())
                .sum();
            assert_eq!(
                timestamps as u64, c.sentry_samples,
                "{name}: one timestamp per accepted Sentry sample"
            );
            assert_eq!(c.otlp_samples(), profile(&c.data).samples.len() as u64);

            // Every sample with its time, thread and frames survives (the v1
            // recording has no sample outside its transaction).
            let mut want = if input["version"] == "2" {
                chunk_samples(&payload, false)
            } else {
                v1_samples(&payload)
            };
            // sentry-java names a JVM method alone, its class in `filename`:
            // the function is `class.method`, as other JVM profilers name it.
            if input["platform"] == "java" {
                for f in want.iter_mut().flat_map(|(_, _, frames)| frames) {
                    if let (Some(name), Some(class)) = (&mut f.0, &f.2) {
                        if !name.contains('.') {
                            *name = format!("{class}.{name}");
                        }
                    }
                }
                want.sort();
            }
            assert_eq!(
                otlp_samples(&c.data),
                want,
                "{name}: samples and frames survive"
            );
            // Thread names of sampled threads come through as `thread.name`.
            let names: BTreeMap<String, String> = input["profile"]["thread_metadata"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(id, t)| (id.clone(), t["name"].as_str().unwrap().to_owned()))
                .collect();
            for s in &profile(&c.data).samples {
                let a = attrs(&c.data, &s.attribute_indices);
                assert_eq!(a.get("thread.name"), names.get(&a["thread.id"]), "{name}");
            }
        }
        if path.ends_with("sentry-node/manual/0002.envelope") {
            assert_eq!(ignored, BTreeMap::from([("session".to_owned(), 1)]));
        }
        if path.ends_with("sentry-python/v1/0001.envelope")
            || path.ends_with("sentry-python/v1-sdk-1.45.1/0001.envelope")
            || path.ends_with("sentry-node/v1-sdk-7.120.4/0001.envelope")
            || path.ends_with("sentry-node/v1-sdk-8.55.2/0001.envelope")
        {
            assert_eq!(ignored, BTreeMap::from([("transaction".to_owned(), 1)]));
        }
    }
    assert_eq!(profiles, 12);
}

#[test]
fn python_chunk_resource_profile_and_thread_table() {
    let payload = python_chunk();
    let o = ReceiveOptions {
        project_id: Some("1".into()),
        ..opts()
    };
    let c = chunk_to_otlp(&payload, Some("python"), &o).unwrap();
    assert_eq!(
        resource_attrs(&c.data),
        BTreeMap::from([
            ("service.name".into(), "holdout-py".into()),
            ("service.version".into(), "holdout-py@1.0.0".into()),
            ("deployment.environment.name".into(), "holdout".into()),
            ("telemetry.sdk.name".into(), "sentry.python".into()),
            ("telemetry.sdk.version".into(), "2.75.0".into()),
            ("telemetry.sdk.language".into(), "python".into()),
            ("sentry.project_id".into(), "1".into()),
        ])
    );
    let p = profile(&c.data);
    assert_eq!(
        hex::encode(&p.profile_id),
        "6e5283e1ce434eec8378198a9c1cc556"
    );
    let dict = c.data.dictionary.as_ref().unwrap();
    let vt = |v: Option<profcol_model::proto::ValueType>| {
        let v = v.unwrap();
        (
            dict.string_table[v.type_strindex as usize].as_str(),
            dict.string_table[v.unit_strindex as usize].as_str(),
        )
    };
    assert_eq!(vt(p.sample_type), ("samples", "count"));
    assert_eq!(vt(p.period_type), ("wall", "nanoseconds"));
    // The SDK aims at 101 Hz but this recording managed 272 ticks in 6 s:
    // the period is what the samples show (median interval), not the target.
    assert_eq!(p.period, 17_934_000);
    assert_eq!(p.time_unix_nano, 1_795_318_570_028_333_000);
    let last = 1_795_318_576_030_180_000u64; // 1795318576.0301797 at microsecond precision
    assert_eq!(p.duration_nano, last - p.time_unix_nano + p.period as u64);
    assert!(p.original_payload.is_empty() && p.original_payload_format.is_empty());

    let pa = attrs(&c.data, &p.attribute_indices);
    assert_eq!(pa["sentry.profiler_id"], "fe69b2d347794bdcbb69fc95fa89dc10");
    assert_eq!(pa["sentry.chunk_id"], "6e5283e1ce434eec8378198a9c1cc556");
    assert_eq!(pa["sentry.platform"], "python");
    assert_eq!(pa["sentry.release"], "holdout-py@1.0.0");
    assert_eq!(pa["sentry.environment"], "holdout");
    assert!(!pa.contains_key("sentry.measurements") && !pa.contains_key("sentry.debug_meta"));

    // The whole thread table, although two sampled threads are not in it.
    let table = attr_values(&c.data, &p.attribute_indices)["sentry.thread_metadata"];
    let Some(Value::KvlistValue(kv)) = &table.value else {
        panic!("{table:?}")
    };
    let ids: Vec<&str> = kv.values.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(ids, ["139751143519936", "139751172868992"]);
    let threads: std::collections::BTreeSet<String> = p
        .samples
        .iter()
        .map(|s| attrs(&c.data, &s.attribute_indices)["thread.id"].clone())
        .collect();
    assert_eq!(threads.len(), 4);

    // Same stack and thread: one OTLP sample.
    let mut keys = std::collections::HashSet::new();
    for s in &p.samples {
        assert!(
            keys.insert((s.stack_index, s.attribute_indices.clone())),
            "duplicate sample identity"
        );
    }
    assert!(p.samples.len() < 1085);

    let folded = folded(&c.data);
    assert_eq!(folded.values().sum::<usize>(), 1085);
    assert!(
        folded.keys().any(
            |k| k.starts_with("Thread._bootstrap;Thread._bootstrap_inner;")
                && k.ends_with("[sentry.profiler.ThreadContinuousScheduler]")
        ),
        "root-first fold of leaf-first stacks: {folded:#?}"
    );
}

#[test]
fn thread_id_is_an_integer_only_when_decimal() {
    let c = chunk_to_otlp(&python_chunk(), None, &opts()).unwrap();
    let s = &profile(&c.data).samples[0];
    let v = attr_values(&c.data, &s.attribute_indices)["thread.id"];
    assert!(
        matches!(v.value, Some(Value::IntValue(139751143519936))),
        "{v:?}"
    );

    for (id, want_int) in [
        (json!("0x1a2b"), None),
        (json!("007"), None),
        (json!("0"), Some(0)),
        (json!(42), Some(42)),
    ] {
        let payload = chunk_json(
            json!([
                {"timestamp": 1.5, "stack_id": 0, "thread_id": id},
                {"timestamp": 1.6, "stack_id": 0, "thread_id": id},
            ]),
            json!([[0]]),
            json!([{"function": "f"}]),
        );
        let c = chunk_to_otlp(&payload, None, &opts()).unwrap();
        let s = &profile(&c.data).samples[0];
        let v = &attr_values(&c.data, &s.attribute_indices)["thread.id"].value;
        match (want_int, v) {
            (Some(n), Some(Value::IntValue(got))) => assert_eq!(*got, n),
            (None, Some(Value::StringValue(got))) => assert_eq!(json!(got), id),
            other => panic!("{id}: {other:?}"),
        }
    }
}

/// sentry-java's JVM profiler (async-profiler, wall clock at 101 Hz) files
/// every thread without a Java frame under thread "0" with an empty stack,
/// many samples per tick: the period comes from the threads Relay keeps,
/// and thread "0" keeps all its samples. In time order or not.
#[test]
fn period_leaves_out_threads_relay_drops() {
    let t0 = 1795959341.0;
    let mut samples = Vec::new();
    for i in 0..40 {
        let tick = t0 + i as f64 * 0.0099;
        samples.push(json!({"timestamp": tick, "stack_id": 0, "thread_id": "15"}));
        for j in 0..8 {
            let t = tick + 0.000011 * (j + 1) as f64;
            samples.push(json!({"timestamp": t, "stack_id": 1, "thread_id": "0"}));
        }
    }
    let java = |v: &mut Json| v["platform"] = json!("java");
    for reversed in [false, true] {
        let mut samples = samples.clone();
        if reversed {
            samples.reverse();
        }
        let payload = chunk_with(
            java,
            json!(samples),
            json!([[0], []]),
            json!([{"function": "f"}]),
        );
        let c = chunk_to_otlp(&payload, None, &opts()).unwrap();
        let p = profile(&c.data);
        assert_eq!(p.period, 9_900_000, "reversed: {reversed}");
        let points: usize = p.samples.iter().map(|s| s.timestamps_unix_nano.len()).sum();
        assert_eq!(points, 40 * 9);
    }

    // No thread Relay would keep: every thread counts.
    let idle = json!([
        {"timestamp": 1.0, "stack_id": 0, "thread_id": "1"},
        {"timestamp": 1.01, "stack_id": 0, "thread_id": "1"},
        {"timestamp": 1.02, "stack_id": 0, "thread_id": "1"},
    ]);
    let c = chunk_to_otlp(&chunk_json(idle, json!([[]]), json!([])), None, &opts()).unwrap();
    assert_eq!(profile(&c.data).period, 10_000_000);
}

/// A minimal valid chunk with the given profile tables.
fn chunk_json(samples: Json, stacks: Json, frames: Json) -> Vec<u8> {
    chunk_with(|_| {}, samples, stacks, frames)
}

fn chunk_with(edit: impl FnOnce(&mut Json), samples: Json, stacks: Json, frames: Json) -> Vec<u8> {
    let mut v = json!({
        "chunk_id": "0c2a5e3bc5a24b4e9f3a0e1a22a6d5c1",
        "profiler_id": "d8f8e8b7a6b54b3c9a1d2e3f4a5b6c7d",
        "platform": "python",
        "version": "2",
        "release": "svc@2",
        "client_sdk": {"name": "sentry.python", "version": "2.0.0"},
        "profile": {"samples": samples, "stacks": stacks, "frames": frames,
                    "thread_metadata": {"1": {"name": "main", "priority": 31}, "9": {"name": "idle"}}}
    });
    edit(&mut v);
    serde_json::to_vec(&v).unwrap()
}

fn two_samples() -> Json {
    json!([
        {"timestamp": 1795318570.028333, "stack_id": 0, "thread_id": "1"},
        {"timestamp": 1795318570.038333, "stack_id": 0, "thread_id": "1"},
    ])
}

fn refused(payload: &[u8]) -> ItemError {
    chunk_to_otlp(payload, None, &opts()).unwrap_err()
}

#[test]
fn structural_validation_uses_relay_reasons() {
    let frames = json!([{"function": "a"}, {"function": "b"}]);
    assert_eq!(refused(b"{not json").reason, Reason::InvalidJson);
    for field in ["profiler_id", "chunk_id", "platform", "profile"] {
        let p = chunk_with(
            |v| drop(v.as_object_mut().unwrap().remove(field)),
            two_samples(),
            json!([[0, 1]]),
            frames.clone(),
        );
        let e = refused(&p);
        assert_eq!(e.reason, Reason::InvalidJson, "{field}");
        assert!(e.message.contains(field), "{field}: {}", e.message);
    }
    // Relay routes a chunk by its version: none is no format it knows.
    let p = chunk_with(
        |v| drop(v.as_object_mut().unwrap().remove("version")),
        two_samples(),
        json!([[0, 1]]),
        frames.clone(),
    );
    assert_eq!(refused(&p).reason, Reason::PlatformNotSupported);
    // A field of the wrong type is named by its path.
    let p = chunk_with(
        |v| v["profile"]["samples"][1]["stack_id"] = json!("zero"),
        two_samples(),
        json!([[0, 1]]),
        frames.clone(),
    );
    let e = refused(&p);
    assert_eq!(e.reason, Reason::InvalidJson);
    assert!(
        e.message
            .contains("profile.samples[1].stack_id: expected an integer"),
        "{}",
        e.message
    );
    let p = chunk_with(
        |v| v["chunk_id"] = json!("not-a-uuid"),
        two_samples(),
        json!([[0]]),
        frames.clone(),
    );
    assert_eq!(refused(&p).reason, Reason::InvalidJson);

    let p = chunk_json(json!([]), json!([[0]]), frames.clone());
    assert_eq!(refused(&p).reason, Reason::NotEnoughSamples);

    let bad_stack = json!([{"timestamp": 1.0, "stack_id": 5, "thread_id": "1"}]);
    assert_eq!(
        refused(&chunk_json(bad_stack.clone(), json!([[0]]), frames.clone())).reason,
        Reason::MalformedSamples
    );
    // Relay checks samples before stacks.
    assert_eq!(
        refused(&chunk_json(bad_stack, json!([[7]]), frames.clone())).reason,
        Reason::MalformedSamples
    );
    // An unknown frame index, even in a stack no sample uses.
    let e = refused(&chunk_json(
        two_samples(),
        json!([[0, 1], [2]]),
        frames.clone(),
    ));
    assert_eq!(e.reason, Reason::MalformedStacks);

    let p = chunk_with(
        |v| v["version"] = json!("1"),
        two_samples(),
        json!([[0]]),
        frames.clone(),
    );
    assert_eq!(refused(&p).reason, Reason::PlatformNotSupported);
    // An `android` chunk of version 2 without a method trace is sample
    // format v2 (an ANR profile), as newer Relays read it.
    let p = chunk_with(
        |v| v["platform"] = json!("android"),
        two_samples(),
        json!([[0]]),
        frames.clone(),
    );
    assert_eq!(chunk_to_otlp(&p, None, &opts()).unwrap().sentry_samples, 2);
    // What the Android SDK sends, here with a trace that is none.
    let android = serde_json::to_vec(&json!({
        "version": "2", "platform": "android", "sampled_profile": "AAAA",
        "profiler_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "chunk_id": "1f1e2d3c4b5a69788796a5b4c3d2e1f0",
    }))
    .unwrap();
    assert_eq!(refused(&android).reason, Reason::InvalidSampledProfile);
    let e = chunk_to_otlp(&android, Some("android"), &opts()).unwrap_err();
    assert_eq!(e.reason, Reason::InvalidSampledProfile);

    let ok = chunk_json(two_samples(), json!([[0, 1]]), frames);
    // The item header's platform must be the payload's.
    let e = chunk_to_otlp(&ok, Some("cocoa"), &opts()).unwrap_err();
    assert_eq!(e.reason, Reason::InvalidProfileType);
    assert!(
        e.message.contains("cocoa") && e.message.contains("python"),
        "{e}"
    );
    for header in ["javascript", "android"] {
        let e = chunk_to_otlp(&ok, Some(header), &opts()).unwrap_err();
        assert_eq!(e.reason, Reason::InvalidProfileType, "{header}");
    }
    let small = ReceiveOptions {
        max_item_size: ok.len() - 1,
        ..opts()
    };
    assert_eq!(
        chunk_to_otlp(&ok, None, &small).unwrap_err().reason,
        Reason::TooLarge
    );
    chunk_to_otlp(&ok, Some("python"), &opts()).unwrap();
}

#[test]
fn off_spec_payloads_real_sdks_send_are_accepted() {
    // String numbers, numeric thread ids, `column`/`line` aliases, no thread table.
    let p = chunk_with(
        |v| {
            v["version"] = json!(2);
            v["profile"]
                .as_object_mut()
                .unwrap()
                .remove("thread_metadata");
        },
        json!([
            {"timestamp": "1795318570.5", "stack_id": "0", "thread_id": 7},
            {"timestamp": 1795318570.6, "stack_id": 0, "thread_id": "7"},
        ]),
        json!([[0]]),
        json!([{"function": "f", "line": 3, "column": 4, "in_app": "true"}]),
    );
    let c = chunk_to_otlp(&p, None, &opts()).unwrap();
    let prof = profile(&c.data);
    assert_eq!(
        prof.samples.len(),
        1,
        "number 7 and string \"7\" are one thread"
    );
    assert_eq!(
        prof.samples[0].timestamps_unix_nano,
        [1_795_318_570_500_000_000, 1_795_318_570_600_000_000]
    );
    let dict = c.data.dictionary.as_ref().unwrap();
    let loc = &dict.location_table
        [dict.stack_table[prof.samples[0].stack_index as usize].location_indices[0] as usize];
    assert_eq!((loc.lines[0].line, loc.lines[0].column), (3, 4));
    assert_eq!(
        attrs(&c.data, &loc.attribute_indices)["sentry.in_app"],
        "true"
    );
    assert_eq!(prof.period, 100_000_000);
}

#[test]
fn frame_fields_and_debug_images_survive() {
    let frames = json!([
        {"function": "main", "raw_function": "_main", "symbol": "_main.cold", "abs_path": "/src/app/main.py", "filename": "app/main.py",
         "module": "app.main", "lineno": 10, "colno": 2, "in_app": true},
        {"function": "helper", "filename": "Helper.java", "module": "com.x.Helper", "lineno": 5, "in_app": false},
        {"function": "native_fn", "symbol": "_ZN6native2fnE", "instruction_addr": "0x7fff0010", "package": "/usr/lib/libx.so"},
        {"instruction_addr": "0x10", "platform": "javascript"},
        {"function": "same", "abs_path": "/a.js", "filename": "/a.js"},
    ]);
    let p = chunk_with(
        |v| {
            v["debug_meta"] = json!({"images": [
                {"type": "symbolic", "code_file": "/usr/lib/libx.so", "debug_id": "e45db8df-af2d-09fd-640c-8fe377d572de",
                 "code_id": "dfb85de42daffd09640c8fe377d572de3e168920", "image_addr": "0x7fff0000", "image_size": 4096}
            ]});
        },
        two_samples(),
        json!([[0, 1, 2, 3, 4]]),
        frames,
    );
    let c = chunk_to_otlp(&p, None, &opts()).unwrap();
    check_dictionary(&c.data);
    let dict = c.data.dictionary.as_ref().unwrap();
    let s = &profile(&c.data).samples[0];
    let locs: Vec<_> = dict.stack_table[s.stack_index as usize]
        .location_indices
        .iter()
        .map(|&l| &dict.location_table[l as usize])
        .collect();
    let func = |l: &profcol_model::proto::Location| {
        let f = &dict.function_table[l.lines[0].function_index as usize];
        let st = |i: i32| dict.string_table[i as usize].as_str();
        (
            st(f.name_strindex),
            st(f.system_name_strindex),
            st(f.filename_strindex),
        )
    };
    assert_eq!(func(locs[0]), ("main", "_main", "/src/app/main.py"));
    assert_eq!((locs[0].lines[0].line, locs[0].lines[0].column), (10, 2));
    let a0 = attrs(&c.data, &locs[0].attribute_indices);
    assert_eq!(a0["profile.frame.type"], "cpython");
    assert_eq!(a0["sentry.in_app"], "true");
    assert_eq!(a0["sentry.module"], "app.main");
    assert_eq!(a0["sentry.filename"], "app/main.py");
    assert!(!a0.contains_key("sentry.abs_path"));
    assert_eq!(
        a0["sentry.symbol"], "_main.cold",
        "raw_function took system_name"
    );

    assert_eq!(func(locs[1]), ("helper", "", "Helper.java"));
    let a1 = attrs(&c.data, &locs[1].attribute_indices);
    assert!(!a1.contains_key("sentry.symbol"));
    assert_eq!(a1["sentry.abs_path"], "", "marks the missing abs_path");
    assert!(!a1.contains_key("sentry.filename"));

    assert_eq!(func(locs[2]), ("native_fn", "_ZN6native2fnE", ""));
    assert_eq!(locs[2].address, 0x7fff0010);
    let m = &dict.mapping_table[locs[2].mapping_index as usize];
    assert_eq!((m.memory_start, m.memory_limit), (0x7fff0000, 0x7fff1000));
    assert_eq!(
        dict.string_table[m.filename_strindex as usize],
        "/usr/lib/libx.so"
    );
    let ma = attrs(&c.data, &m.attribute_indices);
    assert_eq!(
        ma["process.executable.build_id.gnu"],
        "dfb85de42daffd09640c8fe377d572de3e168920"
    );
    assert_eq!(
        ma["sentry.debug_id"],
        "e45db8df-af2d-09fd-640c-8fe377d572de"
    );
    assert_eq!(
        attrs(&c.data, &locs[2].attribute_indices)["sentry.package"],
        "/usr/lib/libx.so"
    );

    assert_eq!(
        (locs[3].address, locs[3].mapping_index),
        (0x10, 0),
        "outside every image"
    );
    assert!(locs[3].lines.is_empty());
    let a3 = attrs(&c.data, &locs[3].attribute_indices);
    assert_eq!(
        (
            a3["sentry.platform"].as_str(),
            a3["profile.frame.type"].as_str()
        ),
        ("javascript", "v8js")
    );

    let a4 = attrs(&c.data, &locs[4].attribute_indices);
    assert!(
        !a4.contains_key("sentry.filename") && !a4.contains_key("sentry.abs_path"),
        "{a4:?}"
    );

    let pa = attrs(&c.data, &profile(&c.data).attribute_indices);
    let kept: Json = serde_json::from_str(&pa["sentry.debug_meta"]).unwrap();
    assert_eq!(kept["images"][0]["image_size"], 4096);
}

#[test]
fn node_chunk_keeps_measurements_verbatim() {
    let payload = node_chunk();
    let c = chunk_to_otlp(&payload, Some("node"), &opts()).unwrap();
    let p = profile(&c.data);
    let pa = attrs(&c.data, &p.attribute_indices);
    let input: Json = serde_json::from_slice(&payload).unwrap();
    let kept: Json = serde_json::from_str(&pa["sentry.measurements"]).unwrap();
    assert_eq!(kept, input["measurements"]);
    assert!(
        !pa.contains_key("sentry.debug_meta"),
        "an empty image list is not kept"
    );
    assert_eq!(resource_attrs(&c.data)["telemetry.sdk.language"], "nodejs");
    assert_eq!(resource_attrs(&c.data)["service.name"], "holdout-node");
    assert!(
        (9_000_000..13_000_000).contains(&p.period),
        "period {}",
        p.period
    );
    let dict = c.data.dictionary.as_ref().unwrap();
    let types: std::collections::BTreeSet<String> = dict.location_table[1..]
        .iter()
        .map(|l| attrs(&c.data, &l.attribute_indices)["profile.frame.type"].clone())
        .collect();
    assert_eq!(types, ["v8js".to_owned()].into());
}

#[test]
fn service_name_and_original_payload_options() {
    let payload = python_chunk();
    let o = ReceiveOptions {
        service_name: Some("checkout".into()),
        include_original_payload: true,
        ..opts()
    };
    let c = chunk_to_otlp(&payload, None, &o).unwrap();
    assert_eq!(resource_attrs(&c.data)["service.name"], "checkout");
    let p = profile(&c.data);
    assert_eq!(p.original_payload, payload);
    assert_eq!(p.original_payload_format, "sentry_profile_chunk");

    let p = chunk_with(
        |v| drop(v.as_object_mut().unwrap().remove("release")),
        two_samples(),
        json!([[0]]),
        json!([{"function": "f"}]),
    );
    let c = chunk_to_otlp(&p, None, &opts()).unwrap();
    assert_eq!(resource_attrs(&c.data)["service.name"], "unknown_service");
}

fn v1_parts() -> (Vec<u8>, Vec<u8>, Json) {
    let bytes = fixture("sentry-python/v1/0001.envelope");
    let env = envelope::parse(&bytes).unwrap();
    (
        env.items[0].payload.to_vec(),
        env.items[1].payload.to_vec(),
        env.header.clone(),
    )
}

#[test]
fn v1_profile_links_to_its_transaction() {
    let (profile_bytes, tx, header) = v1_parts();
    let c =
        profile_v1_to_otlp(&profile_bytes, Some("python"), Some(&tx), &header, &opts()).unwrap();
    check_dictionary(&c.data);
    assert_eq!((c.sentry_samples, c.dropped.clone()), (498, vec![]));
    // Relay does not check a v1 `profile` item's header platform at all.
    for other in ["node", "cocoa"] {
        let again =
            profile_v1_to_otlp(&profile_bytes, Some(other), Some(&tx), &header, &opts()).unwrap();
        assert_eq!(again.sentry_samples, 498, "{other}");
    }
    let dict = c.data.dictionary.as_ref().unwrap();
    let p = profile(&c.data);
    assert_eq!(
        hex::encode(&p.profile_id),
        "658ec8e9f50748f189579c29ebf417e5"
    );
    for s in &p.samples {
        let link = &dict.link_table[s.link_index as usize];
        assert_eq!(
            hex::encode(&link.trace_id),
            "9558c43617dd4a2b9bcde612fb8eb31c"
        );
        assert_eq!(hex::encode(&link.span_id), "9f04ed82547963b4");
    }
    // Profile start 03:36:44.638532Z plus the first sample's 11958514 ns.
    assert_eq!(p.time_unix_nano, 1_795_318_604_638_532_000 + 11_958_514);
    let r = resource_attrs(&c.data);
    assert_eq!(r["host.arch"], "amd64");
    assert_eq!(r["os.name"], "Linux");
    assert_eq!(r["os.version"], "6.18.44-fc-v769");
    assert_eq!(r["process.runtime.name"], "CPython");
    assert_eq!(r["process.runtime.version"], "3.11.7");
    assert_eq!(
        r["telemetry.sdk.name"], "sentry.python",
        "from the transaction's sdk"
    );
    assert_eq!(r["service.name"], "holdout-py");
    let pa = attrs(&c.data, &p.attribute_indices);
    assert_eq!(pa["sentry.event_id"], "658ec8e9f50748f189579c29ebf417e5");
    assert_eq!(pa["sentry.transaction.name"], "holdout-v1-tx");
    assert_eq!(pa["sentry.version"], "1");

    // Thread names from the v1 table; five threads sampled, three named.
    let named = p
        .samples
        .iter()
        .filter(|s| attrs(&c.data, &s.attribute_indices).contains_key("thread.name"))
        .count();
    assert!(named > 0 && named < p.samples.len());
}

#[test]
fn v1_samples_outside_the_transaction_are_dropped_and_counted() {
    let (profile_bytes, tx, header) = v1_parts();
    let mut v: Json = serde_json::from_slice(&profile_bytes).unwrap();
    v["transactions"][0]["relative_end_ns"] = json!("1000000000");
    let inside = v["profile"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["elapsed_since_start_ns"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                <= 1_000_000_000
        })
        .count() as u64;
    let c = profile_v1_to_otlp(
        &serde_json::to_vec(&v).unwrap(),
        None,
        Some(&tx),
        &header,
        &opts(),
    )
    .unwrap();
    assert_eq!(c.sentry_samples, inside);
    assert_eq!(c.dropped, vec![(Reason::OutsideTransaction, 498 - inside)]);
    let ts: usize = profile(&c.data)
        .samples
        .iter()
        .map(|s| s.timestamps_unix_nano.len())
        .sum();
    assert_eq!(ts as u64, inside);

    // Without the transaction item the trace id still links the samples.
    let c = profile_v1_to_otlp(&profile_bytes, None, None, &json!({}), &opts()).unwrap();
    let dict = c.data.dictionary.as_ref().unwrap();
    let link = &dict.link_table[profile(&c.data).samples[0].link_index as usize];
    assert_eq!(
        hex::encode(&link.trace_id),
        "9558c43617dd4a2b9bcde612fb8eb31c"
    );
    assert!(link.span_id.is_empty());

    // No transaction at all: Relay refuses.
    v.as_object_mut().unwrap().remove("transactions");
    let e = profile_v1_to_otlp(
        &serde_json::to_vec(&v).unwrap(),
        None,
        Some(&tx),
        &header,
        &opts(),
    )
    .unwrap_err();
    assert_eq!(e.reason, Reason::NoTransaction);
}

/// Thread `priority` goes to OTLP and back; a thread without samples stays
/// in the OTLP table but is pruned from the outgoing chunk.
#[test]
fn thread_priority_survives_the_round_trip() {
    let frames = json!([{"function": "a"}]);
    let p = chunk_json(two_samples(), json!([[0]]), frames);
    let c = chunk_to_otlp(&p, None, &opts()).unwrap();
    let pa = attrs(&c.data, &profile(&c.data).attribute_indices);
    let table = &pa["sentry.thread_metadata"];
    assert!(
        table.contains("31") && table.contains("idle"),
        "every thread is kept: {table}"
    );
    let out = crate::otlp_to_chunks(&c.data, &crate::ExportOptions::default());
    let chunk = out[0].chunk.as_ref().unwrap();
    let meta = &chunk.profile.thread_metadata;
    assert_eq!(meta.len(), 1, "{meta:?}");
    assert_eq!(meta["1"].priority, Some(31));
    assert_eq!(meta["1"].name.as_deref(), Some("main"));
}

/// A v1 profile from a mobile SDK names its device.
#[test]
fn v1_device_becomes_resource_attributes() {
    let (profile_bytes, tx, header) = v1_parts();
    let mut v: Json = serde_json::from_slice(&profile_bytes).unwrap();
    v["device"] = json!({"architecture": "arm64e", "model": "iPhone14,2",
                         "manufacturer": "Apple", "is_emulator": false, "locale": "en_US"});
    let payload = serde_json::to_vec(&v).unwrap();
    let c = profile_v1_to_otlp(&payload, None, Some(&tx), &header, &opts()).unwrap();
    let r = resource_attrs(&c.data);
    assert_eq!(r["device.model.identifier"], "iPhone14,2");
    assert_eq!(r["device.manufacturer"], "Apple");
    assert_eq!(r["host.arch"], "arm64");
}

/// A v1 profile shaped like the Cocoa SDK's: numeric and hex thread ids,
/// dispatch queues, `timestamp` as RFC 3339, string numbers in the
/// transaction, a Mach-O image. Everything lands somewhere.
#[test]
fn v1_cocoa_shaped_profile_keeps_threads_queues_and_images() {
    let payload = serde_json::to_vec(&json!({
        "version": "1",
        "event_id": "41fed0925670468bb0457f61a74688ec",
        "platform": "cocoa",
        "timestamp": "2026-11-22T03:36:44.638532Z",
        "release": "app@1.0 (5)",
        "device": {"architecture": "arm64e", "is_emulator": false, "locale": "en_US",
                   "manufacturer": "Apple", "model": "iPhone14,2"},
        "os": {"name": "iOS", "version": "17.1", "build_number": "21B74"},
        "debug_meta": {"images": [{"type": "macho", "code_file": "/private/var/App.app/App",
            "debug_id": "32420279-25e2-34e6-8bc7-8a006a8f2425",
            "image_addr": "0x0000000102580000", "image_size": 1720320,
            "image_vmaddr": "0x0000000100000000"}]},
        "transactions": [{"id": "30976f2ddbe04ac9b6bffe6e35d4710c", "name": "launch",
            "trace_id": "4b25bc58f14243d8b208d1e22a054164", "active_thread_id": "259",
            "relative_start_ns": "0", "relative_end_ns": "90000000"}],
        "profile": {
            "samples": [
                {"stack_id": 0, "thread_id": 259, "elapsed_since_start_ns": "10000000", "queue_address": "0x000000016f3f2a80"},
                {"stack_id": 0, "thread_id": "259", "elapsed_since_start_ns": "20000000", "queue_address": "0x000000016f3f2a80"},
                {"stack_id": 1, "thread_id": "0x16b8f3000", "elapsed_since_start_ns": "20000000"},
                {"stack_id": 1, "thread_id": "0x16b8f3000", "elapsed_since_start_ns": "30000000"},
            ],
            "stacks": [[0, 1], [1]],
            "frames": [
                {"function": "-[AppDelegate launch]", "instruction_addr": "0x00000001025a1234", "in_app": true},
                {"function": "main", "instruction_addr": "0x0000000102581000"},
            ],
            "thread_metadata": {"259": {"name": "main", "priority": 31}},
            "queue_metadata": {"0x000000016f3f2a80": {"label": "com.apple.main-thread"}},
        }
    }))
    .unwrap();
    let c = profile_v1_to_otlp(&payload, Some("cocoa"), None, &json!({}), &opts()).unwrap();
    check_dictionary(&c.data);
    assert_eq!(c.sentry_samples, 4);
    let p = profile(&c.data);
    let threads: BTreeMap<String, BTreeMap<String, String>> = p
        .samples
        .iter()
        .map(|s| {
            let a = attrs(&c.data, &s.attribute_indices);
            (a["thread.id"].clone(), a)
        })
        .collect();
    // The numeric and the string "259" are one thread, an integer in OTLP.
    let main = &threads["259"];
    assert_eq!(main["thread.name"], "main");
    assert_eq!(main["sentry.queue_address"], "0x000000016f3f2a80");
    let s = p
        .samples
        .iter()
        .find(|s| attrs(&c.data, &s.attribute_indices)["thread.id"] == "259")
        .unwrap();
    assert!(matches!(
        attr_values(&c.data, &s.attribute_indices)["thread.id"].value,
        Some(Value::IntValue(259))
    ));
    assert_eq!(s.timestamps_unix_nano.len(), 2);
    // A hex id stays the string it was.
    let hex = p
        .samples
        .iter()
        .find(|s| attrs(&c.data, &s.attribute_indices)["thread.id"] == "0x16b8f3000")
        .unwrap();
    assert!(matches!(
        &attr_values(&c.data, &hex.attribute_indices)["thread.id"].value,
        Some(Value::StringValue(v)) if v == "0x16b8f3000"
    ));

    let pa = attrs(&c.data, &p.attribute_indices);
    let queues: Json = serde_json::from_str(&pa["sentry.queue_metadata"]).unwrap();
    assert_eq!(
        queues["0x000000016f3f2a80"]["label"],
        "com.apple.main-thread"
    );
    assert_eq!(pa["sentry.device.locale"], "en_US");
    let r = resource_attrs(&c.data);
    assert_eq!(r["os.name"], "iOS");
    assert_eq!(r["os.build_id"], "21B74");
    assert_eq!(r["host.arch"], "arm64");
    assert_eq!(r["telemetry.sdk.language"], "swift");

    // Frames map into the image by address.
    let dict = c.data.dictionary.as_ref().unwrap();
    let loc =
        &dict.location_table[dict.stack_table[s.stack_index as usize].location_indices[0] as usize];
    assert_eq!(loc.address, 0x1025a1234);
    let m = &dict.mapping_table[loc.mapping_index as usize];
    assert_eq!(
        dict.string_table[m.filename_strindex as usize],
        "/private/var/App.app/App"
    );
    assert_eq!(
        attrs(&c.data, &loc.attribute_indices)["profile.frame.type"],
        "native"
    );
    // Start: the RFC 3339 timestamp plus the first sample's 10 ms.
    assert_eq!(p.time_unix_nano, 1_795_318_604_638_532_000 + 10_000_000);
    // The Link carries the transaction's trace.
    let link = &dict.link_table[s.link_index as usize];
    assert_eq!(
        hex::encode(&link.trace_id),
        "4b25bc58f14243d8b208d1e22a054164"
    );
}

/// The item header's `platform`, when present, must be the payload's, as
/// newer Relays require of chunks: a `node` header on a `python` chunk is
/// refused as an invalid profile type, as a `python` one on `cocoa` is.
#[test]
fn item_header_platform_must_be_the_payloads() {
    let frames = json!([{"function": "a"}]);
    let python = chunk_json(two_samples(), json!([[0]]), frames.clone());
    for header in [None, Some("python")] {
        let c = chunk_to_otlp(&python, header, &opts()).unwrap();
        assert_eq!(c.sentry_samples, 2, "{header:?}");
    }
    let cocoa = chunk_with(
        |v| v["platform"] = json!("cocoa"),
        two_samples(),
        json!([[0]]),
        frames,
    );
    chunk_to_otlp(&cocoa, Some("cocoa"), &opts()).unwrap();
    for (payload, header) in [
        (&python, "node"),
        (&python, "go"),
        (&cocoa, "javascript"),
        (&cocoa, "python"),
    ] {
        let e = chunk_to_otlp(payload, Some(header), &opts()).unwrap_err();
        assert_eq!(e.reason, Reason::InvalidProfileType, "{header}");
    }
}

/// One frame of `addr` under a Mach-O image at 0x102580000..+1720320.
fn cocoa_frames_and_image(addr: &str) -> (Json, Json) {
    (
        json!([{"function": "-[AppDelegate launch]", "instruction_addr": addr}]),
        json!({"images": [{"type": "macho", "code_file": "/private/var/App.app/App",
            "debug_id": "32420279-25e2-34e6-8bc7-8a006a8f2425",
            "image_addr": "0x0000000102580000", "image_size": 1720320}]}),
    )
}

/// The first sample's leaf Location and its Mapping's file name.
fn leaf_location(c: &Converted) -> (u64, String) {
    let dict = c.data.dictionary.as_ref().unwrap();
    let p = profile(&c.data);
    let stack = &dict.stack_table[p.samples[0].stack_index as usize];
    let loc = &dict.location_table[stack.location_indices[0] as usize];
    let m = &dict.mapping_table[loc.mapping_index as usize];
    (
        loc.address,
        dict.string_table[m.filename_strindex as usize].clone(),
    )
}

/// Cocoa return addresses may carry a pointer-authentication code in their
/// upper bits. Relay masks them with 0x0000000FFFFFFFFF (v2: every Cocoa
/// chunk; v1: Cocoa on arm64/arm64e), so they land in their image.
#[test]
fn cocoa_pointer_authentication_bits_are_stripped() {
    const SIGNED: &str = "0x8a1d000102581234";
    const STRIPPED: u64 = 0x1_0258_1234;
    let (frames, images) = cocoa_frames_and_image(SIGNED);
    let chunk = |platform: &str| {
        let images = images.clone();
        chunk_with(
            |v| {
                v["platform"] = json!(platform);
                v["debug_meta"] = images;
            },
            two_samples(),
            json!([[0]]),
            frames.clone(),
        )
    };
    let c = chunk_to_otlp(&chunk("cocoa"), Some("cocoa"), &opts()).unwrap();
    check_dictionary(&c.data);
    assert_eq!(
        leaf_location(&c),
        (STRIPPED, "/private/var/App.app/App".to_owned())
    );
    // Other platforms keep the address as sent (and so miss the image).
    let c = chunk_to_otlp(&chunk("native"), None, &opts()).unwrap();
    assert_eq!(leaf_location(&c), (0x8a1d_0001_0258_1234, String::new()));

    // v1: only Cocoa profiles of arm64 and arm64e devices.
    let v1 = |arch: &str| {
        serde_json::to_vec(&json!({
            "version": "1", "platform": "cocoa",
            "event_id": "41fed0925670468bb0457f61a74688ec",
            "timestamp": "2026-11-22T03:36:44.638532Z",
            "device": {"architecture": arch, "is_emulator": false, "locale": "en_US",
                       "manufacturer": "Apple", "model": "iPhone14,2"},
            "os": {"name": "iOS", "version": "17.1", "build_number": "21B74"},
            "debug_meta": images,
            "transactions": [{"id": "30976f2ddbe04ac9b6bffe6e35d4710c", "name": "launch",
                "trace_id": "4b25bc58f14243d8b208d1e22a054164",
                "relative_start_ns": "0", "relative_end_ns": "90000000"}],
            "profile": {
                "samples": [
                    {"stack_id": 0, "thread_id": "259", "elapsed_since_start_ns": "10000000"},
                    {"stack_id": 0, "thread_id": "259", "elapsed_since_start_ns": "20000000"},
                ],
                "stacks": [[0]],
                "frames": frames,
            }
        }))
        .unwrap()
    };
    for (arch, want) in [
        ("arm64e", (STRIPPED, "/private/var/App.app/App")),
        ("arm64", (STRIPPED, "/private/var/App.app/App")),
        ("x86_64", (0x8a1d_0001_0258_1234, "")),
    ] {
        let c = profile_v1_to_otlp(&v1(arch), None, None, &json!({}), &opts()).unwrap();
        assert_eq!(leaf_location(&c), (want.0, want.1.to_owned()), "{arch}");
    }
}

/// The Cocoa SDK sends chunks without `client_sdk`: the envelope header's
/// `sdk` names the SDK then (as it does for v1); the chunk's own wins.
#[test]
fn a_chunk_without_client_sdk_takes_the_envelope_header_sdk() {
    use crate::chunk_to_otlp_in_envelope;
    let header = json!({"event_id": "0c2a5e3bc5a24b4e9f3a0e1a22a6d5c1",
                        "sdk": {"name": "sentry.cocoa", "version": "8.40.1"}});
    let cocoa = chunk_with(
        |v| {
            v["platform"] = json!("cocoa");
            v.as_object_mut().unwrap().remove("client_sdk");
        },
        two_samples(),
        json!([[0]]),
        json!([{"function": "main"}]),
    );
    let c = chunk_to_otlp_in_envelope(&cocoa, Some("cocoa"), &header, &opts()).unwrap();
    let r = resource_attrs(&c.data);
    assert_eq!(r["telemetry.sdk.name"], "sentry.cocoa");
    assert_eq!(r["telemetry.sdk.version"], "8.40.1");
    assert_eq!(r["telemetry.sdk.language"], "swift");
    let scope = c.data.resource_profiles[0].scope_profiles[0]
        .scope
        .clone()
        .unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("sentry.cocoa", "8.40.1")
    );

    // Without a header sdk: no telemetry.sdk.name, scope "sentry".
    let c = chunk_to_otlp(&cocoa, Some("cocoa"), &opts()).unwrap();
    assert!(!resource_attrs(&c.data).contains_key("telemetry.sdk.name"));

    // The chunk's own client_sdk wins over the header's.
    let python = chunk_json(two_samples(), json!([[0]]), json!([{"function": "f"}]));
    let c = chunk_to_otlp_in_envelope(&python, None, &header, &opts()).unwrap();
    assert_eq!(
        resource_attrs(&c.data)["telemetry.sdk.name"],
        "sentry.python"
    );
}

/// Relay (`parse_sample_profile`) lets the transaction event's name,
/// `environment` and `dist` override the profile's; its `release` only
/// fills in when the profile has none.
#[test]
fn v1_transaction_event_metadata_takes_precedence_as_in_relay() {
    let (profile_bytes, tx, header) = v1_parts();
    let mut p: Json = serde_json::from_slice(&profile_bytes).unwrap();
    p["dist"] = json!("7");
    let mut t: Json = serde_json::from_slice(&tx).unwrap();
    t["transaction"] = json!("GET /checkout");
    t["environment"] = json!("production");
    t["dist"] = json!("42");
    t["release"] = json!("from-tx@2.0");
    let (pb, tb) = (
        serde_json::to_vec(&p).unwrap(),
        serde_json::to_vec(&t).unwrap(),
    );
    let c = profile_v1_to_otlp(&pb, None, Some(&tb), &header, &opts()).unwrap();
    let pa = attrs(&c.data, &profile(&c.data).attribute_indices);
    assert_eq!(pa["sentry.transaction.name"], "GET /checkout");
    assert_eq!(pa["sentry.environment"], "production");
    assert_eq!(pa["sentry.dist"], "42");
    assert_eq!(
        pa["sentry.release"], "holdout-py@1.0.0",
        "the profile's release wins"
    );
    // The transaction metadata stays as the SDK sent it.
    let sent: Json = serde_json::from_str(&pa["sentry.transaction"]).unwrap();
    assert_eq!(sent["name"], "holdout-v1-tx");
    let r = resource_attrs(&c.data);
    assert_eq!(r["deployment.environment.name"], "production");
    assert_eq!(r["service.version"], "holdout-py@1.0.0");

    // A profile without release takes the transaction's.
    p.as_object_mut().unwrap().remove("release");
    let pb = serde_json::to_vec(&p).unwrap();
    let c = profile_v1_to_otlp(&pb, None, Some(&tb), &header, &opts()).unwrap();
    let pa = attrs(&c.data, &profile(&c.data).attribute_indices);
    assert_eq!(pa["sentry.release"], "from-tx@2.0");
    assert_eq!(resource_attrs(&c.data)["service.name"], "from-tx");

    // Without those fields in the event, the profile's own stay.
    for key in ["transaction", "environment", "dist"] {
        t.as_object_mut().unwrap().remove(key);
    }
    let tb = serde_json::to_vec(&t).unwrap();
    let c = profile_v1_to_otlp(&pb, None, Some(&tb), &header, &opts()).unwrap();
    let pa = attrs(&c.data, &profile(&c.data).attribute_indices);
    assert_eq!(pa["sentry.transaction.name"], "holdout-v1-tx");
    assert_eq!(pa["sentry.environment"], "holdout");
    assert_eq!(pa["sentry.dist"], "7");
}

/// The recorded v1 profile, edited: each case is refused with Relay's
/// reason, or accepted where real SDKs are looser than Relay's types.
#[test]
fn v1_refusals_use_relay_reasons() {
    let (profile_bytes, tx, header) = v1_parts();
    let base: Json = serde_json::from_slice(&profile_bytes).unwrap();
    let convert = |edit: &dyn Fn(&mut Json), o: &ReceiveOptions| {
        let mut v = base.clone();
        edit(&mut v);
        profile_v1_to_otlp(
            &serde_json::to_vec(&v).unwrap(),
            None,
            Some(&tx),
            &header,
            o,
        )
    };
    let tx0 = |key: &'static str, value: Json| {
        move |v: &mut Json| v["transactions"][0][key] = value.clone()
    };
    type Edit = Box<dyn Fn(&mut Json)>;
    let cases: Vec<(&str, Edit, Reason)> = vec![
        (
            "unknown stack index",
            Box::new(|v| v["profile"]["samples"][3]["stack_id"] = json!(999)),
            Reason::MalformedSamples,
        ),
        (
            "unknown frame index",
            Box::new(|v| {
                v["profile"]["stacks"][2]
                    .as_array_mut()
                    .unwrap()
                    .push(json!(9999))
            }),
            Reason::MalformedStacks,
        ),
        (
            "no samples",
            Box::new(|v| v["profile"]["samples"] = json!([])),
            Reason::NotEnoughSamples,
        ),
        (
            "every sample outside the transaction",
            Box::new(|v| {
                v["transactions"][0]["relative_start_ns"] = json!("5000000000");
                v["transactions"][0]["relative_end_ns"] = json!("6000000000");
            }),
            Reason::NotEnoughSamples,
        ),
        (
            "transaction trace_id not a UUID",
            Box::new(tx0("trace_id", json!("nope"))),
            Reason::InvalidTransactionMetadata,
        ),
        (
            "transaction without a name",
            Box::new(tx0("name", json!(""))),
            Reason::InvalidTransactionMetadata,
        ),
        (
            "transaction id missing",
            Box::new(|v| drop(v["transactions"][0].as_object_mut().unwrap().remove("id"))),
            Reason::InvalidTransactionMetadata,
        ),
        (
            "transaction start after its end",
            Box::new(tx0("relative_start_ns", json!("3000000000"))),
            Reason::InvalidTransactionMetadata,
        ),
        (
            "transaction not an object",
            Box::new(|v| v["transactions"][0] = json!("tx")),
            Reason::InvalidTransactionMetadata,
        ),
        (
            "missing version",
            Box::new(|v| drop(v.as_object_mut().unwrap().remove("version"))),
            Reason::PlatformNotSupported,
        ),
        (
            "version 3",
            Box::new(|v| v["version"] = json!("3")),
            Reason::PlatformNotSupported,
        ),
        (
            // Android's legacy format: no version, no `profile` at all.
            "android legacy",
            Box::new(|v| {
                let o = v.as_object_mut().unwrap();
                o.remove("version");
                o.remove("profile");
                o.insert("platform".into(), json!("android"));
                o.insert("sampled_profile".into(), json!("AAAA"));
            }),
            // Read as Android's, whose trace this is not.
            Reason::InvalidSampledProfile,
        ),
        (
            "version 1 without its profile",
            Box::new(|v| drop(v.as_object_mut().unwrap().remove("profile"))),
            Reason::InvalidJson,
        ),
        (
            "event_id not a UUID",
            Box::new(|v| v["event_id"] = json!("x")),
            Reason::InvalidJson,
        ),
        (
            "samples not a list",
            Box::new(|v| v["profile"]["samples"] = json!({})),
            Reason::InvalidJson,
        ),
    ];
    for (case, edit, want) in &cases {
        let e = convert(edit.as_ref(), &opts()).unwrap_err();
        assert_eq!(e.reason, *want, "{case}: {e}");
    }
    let e = convert(
        &|_| {},
        &ReceiveOptions {
            max_item_size: profile_bytes.len() / 2,
            ..opts()
        },
    )
    .unwrap_err();
    assert_eq!(e.reason, Reason::TooLarge, "{e}");
    assert_eq!(
        profile_v1_to_otlp(b"{\"version\":\"1\",", None, Some(&tx), &header, &opts())
            .unwrap_err()
            .reason,
        Reason::InvalidJson
    );

    // `timestamp` as float unix seconds (v2's form) is read too.
    let c = convert(&|v| v["timestamp"] = json!(1795318604.638532), &opts()).unwrap();
    assert_eq!(c.sentry_samples, 498);
    assert_eq!(
        profile(&c.data).time_unix_nano,
        1_795_318_604_638_532_000 + 11_958_514
    );
}

/// An empty stack (a thread sampled while idle) is OTLP's empty stack 0;
/// its samples are counted like any other.
#[test]
fn a_chunk_with_an_empty_stack_converts_and_counts_its_samples() {
    let p = chunk_json(
        json!([
            {"timestamp": 1795318570.00, "stack_id": 0, "thread_id": "1"},
            {"timestamp": 1795318570.01, "stack_id": 1, "thread_id": "1"},
            {"timestamp": 1795318570.02, "stack_id": 0, "thread_id": "1"},
        ]),
        json!([[], [0]]),
        json!([{"function": "work"}]),
    );
    let c = chunk_to_otlp(&p, None, &opts()).unwrap();
    check_dictionary(&c.data);
    assert_eq!(c.sentry_samples, 3);
    let prof = profile(&c.data);
    let dict = c.data.dictionary.as_ref().unwrap();
    assert!(dict.stack_table[0].location_indices.is_empty());
    let idle = prof.samples.iter().find(|s| s.stack_index == 0).unwrap();
    assert_eq!(
        idle.timestamps_unix_nano,
        [1_795_318_570_000_000_000, 1_795_318_570_020_000_000]
    );
    let busy = prof.samples.iter().find(|s| s.stack_index != 0).unwrap();
    assert_eq!(busy.timestamps_unix_nano.len(), 1);
    let ts: usize = prof
        .samples
        .iter()
        .map(|s| s.timestamps_unix_nano.len())
        .sum();
    assert_eq!(ts, 3);
    assert_eq!(folded(&c.data).values().sum::<usize>(), 3);
}

/// Threads with one sample each show no interval: the period is the SDKs'
/// 101 Hz, and the duration covers the samples plus one period.
#[test]
fn the_period_defaults_to_101_hz_when_no_thread_has_two_samples() {
    let p = chunk_json(
        json!([
            {"timestamp": 1795318570.0, "stack_id": 0, "thread_id": "1"},
            {"timestamp": 1795318570.5, "stack_id": 0, "thread_id": "2"},
            {"timestamp": 1795318571.0, "stack_id": 0, "thread_id": "3"},
        ]),
        json!([[0]]),
        json!([{"function": "f"}]),
    );
    let c = chunk_to_otlp(&p, None, &opts()).unwrap();
    let prof = profile(&c.data);
    assert_eq!(prof.period, 1_000_000_000 / 101);
    assert_eq!(prof.period, 9_900_990);
    assert_eq!(prof.duration_nano, 1_000_000_000 + 9_900_990);
    assert_eq!(c.sentry_samples, 3);
}

/// A JVM frame as sentry-java sends it (the method alone, its class in
/// `filename`) is named `class.method`; a qualified name, a source file
/// name and another platform's frames are named as sent.
#[test]
fn jvm_methods_are_named_with_their_class() {
    let frames = json!([
        {"function": "run", "filename": "java.lang.Thread", "module": "java.lang.Thread"},
        {"function": "bar", "filename": "Foo.java"},
        {"function": "com.x.Foo.baz", "filename": "com.x.Foo"},
        {"function": "main"},
    ]);
    let names = |platform: &str| {
        let payload = chunk_with(
            |v| v["platform"] = json!(platform),
            two_samples(),
            json!([[0, 1, 2, 3]]),
            frames.clone(),
        );
        let c = chunk_to_otlp(&payload, None, &opts()).unwrap();
        let (_, _, stack) = otlp_samples(&c.data).remove(0);
        stack.into_iter().map(|f| f.0.unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(
        names("java"),
        ["java.lang.Thread.run", "bar", "com.x.Foo.baz", "main"]
    );
    assert_eq!(names("python"), ["run", "bar", "com.x.Foo.baz", "main"]);
}

/// The Rust SDK's v1 profile (sentry 0.31.5, recorded): frames known by
/// their address alone, each in the debug image holding it (the program,
/// libc) with the image's GNU build id, what a symbolizer reads them by.
#[test]
fn rust_sdk_frames_keep_their_address_and_image() {
    let bytes = fixture("sentry-rust/0.31.5/0001.envelope");
    let env = envelope::parse(&bytes).unwrap();
    let item = |ty: &str| env.items.iter().find(|i| i.item_type() == ty).unwrap();
    let c = profile_v1_to_otlp(
        item("profile").payload,
        Some("rust"),
        Some(item("transaction").payload),
        &env.header,
        &opts(),
    )
    .unwrap();
    check_dictionary(&c.data);
    assert_eq!(c.sentry_samples, 2);
    let text =
        profcol_model::resolved::resolve(&c.data, profcol_model::resolved::Detail::Full).to_text();
    for want in [
        "0x5615964251f3@0x5615964251f3 in /tmp/srs/target/release/srs[0x5615960bb000-0x561596511648+0x0]{process.executable.build_id.gnu=f40de29fe24865f7fe5ed9673833ed1c8064d990,",
        "0x7f602c25a050@0x7f602c25a050 in /lib/x86_64-linux-gnu/libc.so.6[0x7f602c21e000-",
        "sentry.image_type=symbolic} {profile.frame.type=rust}",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
}
