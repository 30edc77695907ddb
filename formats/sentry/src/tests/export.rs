use std::collections::{BTreeMap, BTreeSet};

use prost::Message;
use serde_json::Value as Json;

use super::support::*;
use crate::{
    chunk_to_otlp, envelope, ids, otlp_to_chunks, profile_v1_to_otlp, ChunkResult, ExportOptions,
    Reason, ReceiveOptions,
};
use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value, AnyValue, KeyValue, Line, Location, Profile, ProfilesData, Resource,
    ResourceProfiles, Sample, ScopeProfiles, ValueType,
};

fn sent(results: &[ChunkResult]) -> Vec<&ChunkResult> {
    results.iter().filter(|r| r.chunk.is_some()).collect()
}

/// OTLP samples sent plus dropped over all results.
fn otlp_accounted(results: &[ChunkResult]) -> u64 {
    results
        .iter()
        .map(|r| r.otlp_samples + r.dropped.iter().map(|d| d.otlp_samples).sum::<u64>())
        .sum()
}

/// `data` cut into chunks of at most `window_ns`, nothing dropped, and the
/// number of samples of each.
fn sent_whole(data: &ProfilesData, window_ns: u64) -> (Vec<ChunkResult>, Vec<usize>) {
    let opts = ExportOptions {
        max_chunk_duration_ns: window_ns,
        ..ExportOptions::default()
    };
    let results = otlp_to_chunks(data, &opts);
    assert!(dropped_by_reason(&results).is_empty(), "{results:?}");
    let sizes = sent(&results)
        .iter()
        .map(|r| r.chunk.as_ref().unwrap().profile.samples.len())
        .collect();
    (results, sizes)
}

/// A sent chunk as Relay reads it, and its sample timestamps (float
/// seconds, as sent).
fn as_sent(r: &ChunkResult) -> (Json, Vec<f64>) {
    let out: Json = serde_json::from_slice(&r.payload).unwrap();
    let ts = out["profile"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["timestamp"].as_f64().unwrap())
        .collect();
    (out, ts)
}

fn dropped_by_reason(results: &[ChunkResult]) -> BTreeMap<Reason, u64> {
    let mut out = BTreeMap::new();
    for d in results.iter().flat_map(|r| &r.dropped) {
        *out.entry(d.reason).or_default() += d.sentry_samples;
    }
    out
}

#[test]
fn recorded_chunks_round_trip_through_otlp() {
    for (rel, platform) in [
        ("sentry-python/manual/0001.envelope", "python"),
        ("sentry-node/manual/0001.envelope", "node"),
        // Its JVM methods go back named as the SDK named them.
        ("sentry-java/jvm-8.43.0-jdk-17.0.15/0001.envelope", "java"),
    ] {
        let (payload, item_platform) = item_payload(rel, "profile_chunk");
        let conv = chunk_to_otlp(
            &payload,
            item_platform.as_deref(),
            &ReceiveOptions::default(),
        )
        .unwrap();
        let results = otlp_to_chunks(&conv.data, &ExportOptions::default());
        assert_eq!(
            results.len(),
            1,
            "{rel}: one chunk, no refusals: {results:?}"
        );
        let r = &results[0];
        let chunk = r.chunk.as_ref().unwrap();
        let input: Json = serde_json::from_slice(&payload).unwrap();

        // Same samples (microseconds), stacks and threads as Relay would keep.
        let want = chunk_samples(&payload, true);
        let got = chunk_samples(&r.payload, false);
        assert_eq!(got, want, "{rel}");
        let removed = chunk_samples(&payload, false).len() - want.len();
        assert_eq!(r.sentry_samples as usize, want.len());
        assert_eq!(
            dropped_by_reason(&results)
                .get(&Reason::SingleSampleThread)
                .copied()
                .unwrap_or(0) as usize,
            removed,
            "{rel}"
        );
        assert_eq!(
            otlp_accounted(&results),
            conv.otlp_samples(),
            "{rel}: OTLP accounting is exact"
        );

        // Thread names: the input's, pruned to threads with samples.
        let threads: BTreeSet<String> = want.iter().map(|s| s.1.clone()).collect();
        let mut names = chunk_thread_names(&payload);
        names.retain(|id, _| threads.contains(id));
        assert_eq!(chunk_thread_names(&r.payload), names, "{rel}");

        // Metadata back from the attributes.
        assert_eq!(chunk.platform, platform);
        assert_eq!(chunk.chunk_id, input["chunk_id"]);
        assert_eq!(chunk.profiler_id, input["profiler_id"]);
        assert_eq!(chunk.release.as_deref(), input["release"].as_str());
        assert_eq!(chunk.environment.as_deref(), input["environment"].as_str());
        // Relay's chunk keeps the SDK's name and version (sentry-java sends
        // its integrations and packages too).
        assert_eq!(
            serde_json::to_value(&chunk.client_sdk).unwrap(),
            serde_json::json!({"name": input["client_sdk"]["name"], "version": input["client_sdk"]["version"]})
        );
        let out: Json = serde_json::from_slice(&r.payload).unwrap();
        assert_eq!(out["version"], "2");
        assert_eq!(
            out["measurements"],
            input.get("measurements").cloned().unwrap_or(Json::Null)
        );

        // And it reads back as a valid chunk.
        let again = chunk_to_otlp(
            &r.payload,
            Some(&chunk.platform),
            &ReceiveOptions::default(),
        )
        .unwrap();
        assert_eq!(again.sentry_samples, r.sentry_samples);
    }
}

#[test]
fn v1_profile_becomes_a_chunk() {
    let bytes = fixture("sentry-python/v1/0001.envelope");
    let env = envelope::parse(&bytes).unwrap();
    let mut with_measurements: Json = serde_json::from_slice(env.items[0].payload).unwrap();
    with_measurements["measurements"] = serde_json::json!({"cpu_usage": {"unit": "percent", "values": [{"elapsed_since_start_ns": "1", "value": 1.0}]}});
    let with_measurements = serde_json::to_vec(&with_measurements).unwrap();
    let conv = profile_v1_to_otlp(
        &with_measurements,
        None,
        Some(env.items[1].payload),
        &env.header,
        &ReceiveOptions::default(),
    )
    .unwrap();
    let pa = attrs(&conv.data, &profile(&conv.data).attribute_indices);
    assert!(pa.contains_key("sentry.measurements"), "kept on receive");
    let results = otlp_to_chunks(&conv.data, &ExportOptions::default());
    let chunks = sent(&results);
    assert_eq!(chunks.len(), 1);
    let c = chunks[0].chunk.as_ref().unwrap();
    assert_eq!(c.chunk_id, "658ec8e9f50748f189579c29ebf417e5");
    // Its own profiler session, stable across attempts: two concurrent
    // transactions' profiles do not share a thread timeline.
    let session = |event_id: &str| {
        let mut p: Json = serde_json::from_slice(&with_measurements).unwrap();
        p["event_id"] = event_id.into();
        let conv = profile_v1_to_otlp(
            &serde_json::to_vec(&p).unwrap(),
            None,
            Some(env.items[1].payload),
            &env.header,
            &ReceiveOptions::default(),
        )
        .unwrap();
        let results = otlp_to_chunks(&conv.data, &ExportOptions::default());
        sent(&results)[0]
            .chunk
            .as_ref()
            .unwrap()
            .profiler_id
            .clone()
    };
    let other = "0123456789abcdef0123456789abcdef";
    assert_eq!(session("658ec8e9f50748f189579c29ebf417e5"), c.profiler_id);
    assert_ne!(session(other), c.profiler_id);
    assert_eq!(session(other), session(other));
    assert_ne!(c.profiler_id, c.chunk_id);
    assert!(
        c.measurements.is_none(),
        "v1 measurements have a shape chunks may not carry"
    );
    assert_eq!(c.platform, "python");
    let total: u64 = results.iter().map(|r| r.sentry_samples).sum::<u64>()
        + dropped_by_reason(&results).values().sum::<u64>();
    assert_eq!(total, 498);
    assert_eq!(otlp_accounted(&results), conv.otlp_samples());
    // The first sample: profile start plus 11958514 ns, to the microsecond.
    let first = c.profile.samples[0].timestamp_unix_nano;
    assert_eq!(first, 1_795_318_604_638_532_000 + 11_958_514);
    let out: Json = serde_json::from_slice(&chunks[0].payload).unwrap();
    let ts = out["profile"]["samples"][0]["timestamp"].as_f64().unwrap();
    assert_eq!(
        crate::time::secs_to_unix_nanos(ts),
        Some(1_795_318_604_650_491_000)
    );
}

fn go_cpu() -> ProfilesData {
    ProfilesData::decode(&fixture("otlp/go-cpu.otlp.bin")[..]).unwrap()
}

#[test]
fn pprof_cpu_profile_is_expanded_into_timestamped_samples() {
    let data = go_cpu();
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let chunks = sent(&results);
    let profiles = &data.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 2, "samples/count and cpu/nanoseconds");
    assert_eq!(
        chunks.len(),
        1,
        "the two Profiles hold the same samples: Sentry gets them once"
    );
    // The count Profile goes; the cpu/nanoseconds one is the duplicate.
    let dup: Vec<_> = results.iter().flat_map(|r| &r.dropped).collect();
    assert_eq!(
        dup,
        [&crate::Dropped {
            reason: Reason::DuplicateSampleType,
            sentry_samples: 0,
            otlp_samples: profiles[1].samples.len() as u64,
        }]
    );
    assert_eq!(otlp_accounted(&results), 2 * 472);
    for (r, p) in chunks.iter().zip(profiles) {
        let c = r.chunk.as_ref().unwrap();
        // 590 = sum of counts = 5.9 s of CPU at a 10 ms period.
        assert_eq!(c.profile.samples.len(), 590);
        assert_eq!(r.otlp_samples, p.samples.len() as u64);
        assert!(r.dropped.is_empty(), "{:?}", r.dropped);
        let ts: Vec<u64> = c
            .profile
            .samples
            .iter()
            .map(|s| s.timestamp_unix_nano)
            .collect();
        assert!(
            ts.windows(2).all(|w| w[0] < w[1]),
            "distinct, sorted timestamps"
        );
        assert!(
            ts[0] >= p.time_unix_nano && *ts.last().unwrap() < p.time_unix_nano + p.duration_nano
        );
        assert_eq!(
            c.platform, "native",
            "no runtime information: the neutral platform"
        );
        assert_eq!(c.client_sdk.name, "profcol");
        assert_eq!(c.profile.thread_ids, ["0"]);
        assert!(c.release.is_none() && c.environment.is_none());
        assert_eq!(c.chunk_id.len(), 32);
    }

    // Per stack (root-first function names, inlined Lines as frames of
    // their own) the chunk holds as many samples as the OTLP count.
    let want = otlp_fold(&data, &profiles[0]);
    assert_eq!(chunk_fold(chunks[0].chunk.as_ref().unwrap()), want);
    let dict = data.dictionary.as_ref().unwrap();
    assert!(
        dict.location_table.iter().any(|l| l.lines.len() > 1),
        "the fixture has inlined frames"
    );
}

/// Root-first function names per OTLP sample, counted by value (or timestamps).
fn otlp_fold(data: &ProfilesData, p: &Profile) -> BTreeMap<String, u64> {
    let dict = data.dictionary.as_ref().unwrap();
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let mut names = Vec::new();
        for &l in dict.stack_table[s.stack_index as usize]
            .location_indices
            .iter()
            .rev()
        {
            for line in dict.location_table[l as usize].lines.iter().rev() {
                let f = &dict.function_table[line.function_index as usize];
                names.push(dict.string_table[f.name_strindex as usize].clone());
            }
        }
        let n = if s.timestamps_unix_nano.is_empty() {
            s.values.iter().sum::<i64>() as u64
        } else {
            s.timestamps_unix_nano.len() as u64
        };
        *out.entry(names.join(";")).or_default() += n;
    }
    out
}

fn chunk_fold(c: &crate::OutgoingChunk) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in &c.profile.samples {
        let names: Vec<&str> = c.profile.stacks[s.stack_id as usize]
            .iter()
            .rev()
            .map(|&f| {
                c.profile.frames[f as usize]
                    .function
                    .as_deref()
                    .unwrap_or("")
            })
            .collect();
        *out.entry(names.join(";")).or_default() += 1;
    }
    out
}

#[test]
fn long_aggregated_profile_splits_into_66_second_chunks() {
    let mut data = go_cpu();
    let p = &mut data.resource_profiles[0].scope_profiles[0].profiles[0];
    p.duration_nano = 200_000_000_000;
    let profile_id = p.profile_id.clone();
    data.resource_profiles[0].scope_profiles[0]
        .profiles
        .truncate(1);
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let chunks = sent(&results);
    assert_eq!(chunks.len(), 4, "200 s in windows of at most 66 s");
    let mut total = 0;
    let mut ids = BTreeSet::new();
    for r in &chunks {
        let c = r.chunk.as_ref().unwrap();
        assert!(c.duration_secs() <= 66.0, "{}", c.duration_secs());
        total += c.profile.samples.len();
        ids.insert(c.chunk_id.clone());
    }
    assert_eq!(total, 590);
    assert_eq!(ids.len(), 4);
    if profile_id.len() == 16 && profile_id.iter().any(|b| *b != 0) {
        assert_eq!(
            chunks[0].chunk.as_ref().unwrap().chunk_id,
            hex::encode(&profile_id)
        );
    }
    assert_eq!(otlp_accounted(&results), 472);
    // Deterministic chunk ids when the profile has an id.
    let again = otlp_to_chunks(&data, &ExportOptions::default());
    let order = |rs: &[ChunkResult]| -> Vec<String> {
        sent(rs)
            .iter()
            .map(|r| r.chunk.as_ref().unwrap().chunk_id.clone())
            .collect()
    };
    if profile_id.iter().any(|b| *b != 0) {
        assert_eq!(order(&again), order(&results));
    }
}

#[test]
fn expansion_is_capped_per_chunk_and_the_rest_counted() {
    let data = go_cpu();
    let opts = ExportOptions {
        max_samples_per_chunk: 100,
        ..ExportOptions::default()
    };
    let results = otlp_to_chunks(&data, &opts);
    for r in sent(&results) {
        assert!(r.chunk.as_ref().unwrap().profile.samples.len() <= 100);
    }
    let sent_samples: u64 = results.iter().map(|r| r.sentry_samples).sum();
    let dropped = dropped_by_reason(&results);
    assert!(dropped[&Reason::MaxSamplesPerChunk] > 0);
    // The cpu/nanoseconds Profile repeats the count one: never expanded.
    assert_eq!(sent_samples + dropped.values().sum::<u64>(), 590);
    assert_eq!(otlp_accounted(&results), 2 * 472);
}

#[test]
fn oversized_chunks_are_split_by_bytes() {
    let conv = chunk_to_otlp(&python_chunk(), None, &ReceiveOptions::default()).unwrap();
    let whole = otlp_to_chunks(&conv.data, &ExportOptions::default());
    let opts = ExportOptions {
        max_chunk_bytes: 40_000,
        ..ExportOptions::default()
    };
    let results = otlp_to_chunks(&conv.data, &opts);
    let chunks = sent(&results);
    assert!(chunks.len() > 1);
    for r in &chunks {
        assert!(r.payload.len() <= 40_000, "{}", r.payload.len());
    }
    assert_eq!(
        chunks[0].chunk.as_ref().unwrap().chunk_id,
        "6e5283e1ce434eec8378198a9c1cc556"
    );
    let total = |rs: &[ChunkResult]| -> u64 {
        rs.iter().map(|r| r.sentry_samples).sum::<u64>()
            + dropped_by_reason(rs).values().sum::<u64>()
    };
    assert_eq!(total(&results), total(&whole));
    assert_eq!(otlp_accounted(&results), conv.otlp_samples());
}

/// A small OTLP profile built by hand: timestamped samples on named threads.
fn hand_built(
    resource: Vec<(&str, &str)>,
    threads: &[(&str, Option<Value>, usize)],
) -> ProfilesData {
    let mut b = DictionaryBuilder::new();
    let main = b.function_named("main", "", "/src/main.rs", 0);
    let inner = b.function_named("inlined_helper", "", "/src/helper.rs", 0);
    let loc = b.location(Location {
        mapping_index: 0,
        address: 0x1000,
        lines: vec![
            Line {
                function_index: inner,
                line: 7,
                column: 0,
            },
            Line {
                function_index: main,
                line: 3,
                column: 0,
            },
        ],
        attribute_indices: vec![],
    });
    let stack = b.stack(&[loc]);
    let mut samples = Vec::new();
    for (name, id, n) in threads {
        let mut attrs = vec![b.attribute_kv(
            "thread.name",
            AnyValue {
                value: Some(Value::StringValue(name.to_string())),
            },
            "",
        )];
        if let Some(id) = id {
            attrs.push(b.attribute_kv(
                "thread.id",
                AnyValue {
                    value: Some(id.clone()),
                },
                "",
            ));
        }
        samples.push(Sample {
            stack_index: stack,
            attribute_indices: attrs,
            link_index: 0,
            values: vec![],
            timestamps_unix_nano: (0..*n as u64)
                .map(|i| 1_000_000_000_000 + i * 10_000_000)
                .collect(),
        });
    }
    let sample_type = ValueType {
        type_strindex: b.string("samples"),
        unit_strindex: b.string("count"),
    };
    let resource = resource
        .into_iter()
        .map(|(k, v)| KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(v.into())),
            }),
            ..Default::default()
        })
        .collect();
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: resource,
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    sample_type: Some(sample_type),
                    samples,
                    time_unix_nano: 1_000_000_000_000,
                    duration_nano: 10_000_000_000,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(b.finish()),
    }
}

#[test]
fn otel_resource_fills_sentry_metadata_and_inlined_lines_become_frames() {
    let data = hand_built(
        vec![
            ("service.name", "api"),
            ("service.version", "1.2.3"),
            ("deployment.environment.name", "prod"),
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.name", "opentelemetry"),
            ("host.name", "h1"),
        ],
        &[
            ("worker-1", Some(Value::IntValue(11)), 5),
            ("worker-2", Some(Value::StringValue("0x7f".into())), 3),
            ("lonely", Some(Value::IntValue(12)), 1),
        ],
    );
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let chunks = sent(&results);
    let c = chunks[0].chunk.as_ref().unwrap();
    assert_eq!(c.platform, "rust");
    // `service.name@service.version`, as Sentry names releases.
    assert_eq!(c.release.as_deref(), Some("api@1.2.3"));
    assert_eq!(c.environment.as_deref(), Some("prod"));
    assert_eq!(
        c.client_sdk.name, "profcol",
        "an SDK without a version is not named"
    );
    // A version with its own package stays as it is; the SDK that made the
    // profile is named with its version.
    let named = hand_built(
        vec![
            ("service.name", "api"),
            ("service.version", "shop@2.0"),
            ("telemetry.sdk.name", "opentelemetry"),
            ("telemetry.sdk.version", "1.39.0"),
        ],
        &[("worker-1", Some(Value::IntValue(11)), 5)],
    );
    let named = otlp_to_chunks(&named, &ExportOptions::default());
    let n = sent(&named)[0].chunk.clone().unwrap();
    assert_eq!(n.release.as_deref(), Some("shop@2.0"));
    assert_eq!(
        (n.client_sdk.name.as_str(), n.client_sdk.version.as_str()),
        ("opentelemetry", "1.39.0")
    );
    assert!(ids::parse_uuid(&c.chunk_id).is_some() && ids::parse_uuid(&c.profiler_id).is_some());

    // The Location's two Lines are two frames, inlined function first.
    assert_eq!(c.profile.stacks, vec![vec![0, 1]]);
    let f = &c.profile.frames;
    assert_eq!(
        (
            f[0].function.as_deref(),
            f[0].lineno,
            f[0].abs_path.as_deref()
        ),
        (Some("inlined_helper"), Some(7), Some("/src/helper.rs"))
    );
    assert_eq!(
        (f[1].function.as_deref(), f[1].lineno),
        (Some("main"), Some(3))
    );
    assert_eq!(f[0].instruction_addr, Some(0x1000));

    // Threads: ids as strings, names from `thread.name`; the thread with a
    // single sample is dropped as Relay would.
    let threads: BTreeSet<&str> = c
        .profile
        .samples
        .iter()
        .map(|s| c.profile.thread_ids[s.thread as usize].as_str())
        .collect();
    assert_eq!(threads, ["11", "0x7f"].into());
    let names: BTreeMap<&str, &str> = c
        .profile
        .thread_metadata
        .iter()
        .map(|(id, t)| (id.as_str(), t.name.as_deref().unwrap()))
        .collect();
    assert_eq!(names, [("11", "worker-1"), ("0x7f", "worker-2")].into());
    assert_eq!(chunks[0].sentry_samples, 8);
    assert_eq!(
        results[0].dropped,
        vec![crate::Dropped {
            reason: Reason::SingleSampleThread,
            sentry_samples: 1,
            otlp_samples: 1
        }]
    );
    assert_eq!(chunks[0].otlp_samples, 2);
    let out: Json = serde_json::from_slice(&chunks[0].payload).unwrap();
    assert_eq!(out["profile"]["frames"][0]["instruction_addr"], "0x1000");
    assert_eq!(out["profile"]["samples"][0]["thread_id"], "11");
}

#[test]
fn profiler_id_is_derived_stably_from_the_resource() {
    let threads = [("t", Some(Value::IntValue(1)), 3)];
    let id = |res: Vec<(&str, &str)>| {
        let results = otlp_to_chunks(&hand_built(res, &threads), &ExportOptions::default());
        results[0].chunk.as_ref().unwrap().profiler_id.clone()
    };
    let a = id(vec![
        ("service.name", "api"),
        ("host.name", "h1"),
        ("service.instance.id", "i-1"),
    ]);
    assert_eq!(
        a,
        id(vec![
            ("service.name", "api"),
            ("host.name", "h1"),
            ("service.instance.id", "i-1")
        ])
    );
    assert_ne!(
        a,
        id(vec![
            ("service.name", "api"),
            ("host.name", "h2"),
            ("service.instance.id", "i-1")
        ])
    );
    assert_ne!(
        a,
        id(vec![
            ("service.name", "api"),
            ("host.name", "h1"),
            ("service.instance.id", "i-2")
        ])
    );
    assert!(ids::parse_uuid(&a).is_some());
}

#[test]
fn a_chunk_relay_would_refuse_is_not_sent() {
    // Every thread has a single sample: nothing survives Relay's first rule.
    let data = hand_built(
        vec![],
        &[
            ("a", Some(Value::IntValue(1)), 1),
            ("b", Some(Value::IntValue(2)), 1),
        ],
    );
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    assert!(sent(&results).is_empty());
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].dropped,
        vec![crate::Dropped {
            reason: Reason::NotEnoughSamples,
            sentry_samples: 2,
            otlp_samples: 2
        }]
    );
    assert!(envelope::parse(&crate::write_envelope(
        &results,
        None,
        std::time::SystemTime::now()
    ))
    .unwrap()
    .items
    .is_empty());
}

/// The debug images of a native profile whose frames all come from
/// `mapping` (given the build id below and its file name).
fn images_of_native(mapping: profcol_model::proto::Mapping, file_name: &str) -> serde_json::Value {
    let mut data = hand_built(
        vec![("telemetry.sdk.language", "cpp")],
        &[("main", Some(Value::IntValue(1)), 3)],
    );
    let dict = data.dictionary.as_mut().unwrap();
    let key = dict.string_table.len() as i32;
    dict.string_table
        .push("process.executable.build_id.gnu".into());
    let file = key + 1;
    dict.string_table.push(file_name.into());
    dict.attribute_table
        .push(profcol_model::proto::KeyValueAndUnit {
            key_strindex: key,
            value: Some(AnyValue {
                value: Some(Value::StringValue(
                    "dfb85de42daffd09640c8fe377d572de3e168920".into(),
                )),
            }),
            unit_strindex: 0,
        });
    let attr = dict.attribute_table.len() as i32 - 1;
    dict.mapping_table.push(profcol_model::proto::Mapping {
        filename_strindex: file,
        attribute_indices: vec![attr],
        ..mapping
    });
    let mapping = dict.mapping_table.len() as i32 - 1;
    for loc in dict.location_table.iter_mut().skip(1) {
        loc.mapping_index = mapping;
    }
    // A mapping without a build id gives no image.
    dict.mapping_table.push(profcol_model::proto::Mapping {
        memory_start: 0x600000,
        memory_limit: 0x700000,
        ..Default::default()
    });
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let c = results[0].chunk.as_ref().unwrap();
    assert_eq!(c.platform, "native");
    serde_json::Value::Array(c.debug_meta.clone().unwrap().images)
}

#[test]
fn mappings_with_build_ids_become_debug_images() {
    let images = images_of_native(
        profcol_model::proto::Mapping {
            memory_start: 0x400000,
            memory_limit: 0x500000,
            file_offset: 0,
            ..Default::default()
        },
        "/usr/bin/app",
    );
    assert_eq!(
        images,
        serde_json::json!([{
            "type": "symbolic",
            "debug_id": "e45db8df-af2d-09fd-640c-8fe377d572de",
            "code_id": "dfb85de42daffd09640c8fe377d572de3e168920",
            "code_file": "/usr/bin/app",
            "image_addr": "0x400000",
            "image_size": 0x100000,
        }])
    );
}

/// A pprof mapping of a library's text segment (process addresses, the
/// segment at file offset 0x28000): the image starts at the library's load
/// base, so `instruction_addr - image_addr` is the frame's address in the
/// file, as symbolicator reads it.
#[test]
fn a_segment_mapped_past_offset_0_gives_the_image_at_its_load_base() {
    let images = images_of_native(
        profcol_model::proto::Mapping {
            memory_start: 0x7f00_0002_8000,
            memory_limit: 0x7f00_0017_c000,
            file_offset: 0x28000,
            ..Default::default()
        },
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    );
    assert_eq!(images[0]["image_addr"], "0x7f0000000000");
    assert_eq!(images[0]["image_size"], 0x17c000);
    assert!(images[0].get("image_vmaddr").is_none(), "{images}");
}

/// `default_platform` fills in per Profile: a batch holding a Python chunk
/// and a profile whose data names no runtime keeps `python` for the first.
#[test]
fn default_platform_applies_per_profile() {
    let (payload, item_platform) =
        item_payload("sentry-python/manual/0001.envelope", "profile_chunk");
    let mut data = chunk_to_otlp(
        &payload,
        item_platform.as_deref(),
        &ReceiveOptions::default(),
    )
    .unwrap()
    .data;
    let dict = data.dictionary.as_mut().unwrap();
    dict.location_table.push(Location {
        address: 0x1234,
        ..Default::default()
    });
    dict.stack_table.push(profcol_model::proto::Stack {
        location_indices: vec![dict.location_table.len() as i32 - 1],
    });
    let stack_index = dict.stack_table.len() as i32 - 1;
    let python = &data.resource_profiles[0].scope_profiles[0].profiles[0];
    let bare = Profile {
        sample_type: python.sample_type,
        time_unix_nano: python.time_unix_nano,
        duration_nano: python.duration_nano,
        samples: vec![Sample {
            stack_index,
            // Relay wants more than one sample.
            timestamps_unix_nano: (1..=3)
                .map(|i| python.time_unix_nano + i * 10_000_000)
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    data.resource_profiles.push(ResourceProfiles {
        scope_profiles: vec![ScopeProfiles {
            profiles: vec![bare],
            ..Default::default()
        }],
        ..Default::default()
    });
    let platforms = |default: Option<&str>| -> Vec<String> {
        let opts = ExportOptions {
            default_platform: default.map(str::to_owned),
            ..ExportOptions::default()
        };
        sent(&otlp_to_chunks(&data, &opts))
            .iter()
            .map(|r| r.chunk.as_ref().unwrap().platform.clone())
            .collect()
    };
    assert_eq!(platforms(Some("go")), ["python", "go"]);
    assert_eq!(platforms(None), ["python", "native"]);
}

/// go-cpu with its two sample types renamed.
fn go_cpu_as(types: [(&str, &str); 2]) -> ProfilesData {
    let mut data = go_cpu();
    let dict = data.dictionary.as_mut().unwrap();
    let mut vts = Vec::new();
    for (ty, unit) in types {
        dict.string_table.push(ty.into());
        dict.string_table.push(unit.into());
        let n = dict.string_table.len() as i32;
        vts.push(ValueType {
            type_strindex: n - 2,
            unit_strindex: n - 1,
        });
    }
    let profiles = &mut data.resource_profiles[0].scope_profiles[0].profiles;
    for (p, vt) in profiles.iter_mut().zip(vts) {
        p.sample_type = Some(vt);
    }
    data
}

/// Heap, block and mutex profiles from pprof are not samples over time:
/// nothing is sent, and every sample is counted with the reason.
#[test]
fn profiles_that_are_not_sampled_stacks_are_not_sent() {
    for types in [
        [("alloc_objects", "count"), ("alloc_space", "bytes")],
        [("inuse_objects", "count"), ("inuse_space", "bytes")],
        [("contentions", "count"), ("delay", "nanoseconds")],
        [("goroutine", "count"), ("goroutine", "count")],
    ] {
        let results = otlp_to_chunks(&go_cpu_as(types), &ExportOptions::default());
        assert!(sent(&results).is_empty(), "{types:?}");
        let reasons: BTreeSet<Reason> = results
            .iter()
            .flat_map(|r| &r.dropped)
            .map(|d| d.reason)
            .collect();
        assert_eq!(reasons, [Reason::UnsupportedSampleType].into(), "{types:?}");
        assert_eq!(otlp_accounted(&results), 2 * 472, "{types:?}");
    }
    // Wall-clock profiles (Node's @datadog/pprof) are sampled stacks: the
    // count Profile goes (listed second here), the time one repeats it.
    let mut wall = go_cpu_as([("sample", "count"), ("wall", "nanoseconds")]);
    wall.resource_profiles[0].scope_profiles[0]
        .profiles
        .swap(0, 1);
    let results = otlp_to_chunks(&wall, &ExportOptions::default());
    let chunks = sent(&results);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].chunk.as_ref().unwrap().profile.samples.len(), 590);
    assert_eq!(
        dropped_by_reason(&results).keys().collect::<Vec<_>>(),
        [&Reason::DuplicateSampleType]
    );
}

/// Profiles of one scope with different samples are each sent; so are two
/// of the same sample type, whose values differ: two recordings, not one
/// under two types.
#[test]
fn only_profiles_with_the_same_samples_are_duplicates() {
    let mut data = go_cpu();
    let profiles = &mut data.resource_profiles[0].scope_profiles[0].profiles;
    profiles[1].samples.pop();
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    assert_eq!(sent(&results).len(), 2);
    assert!(dropped_by_reason(&results).is_empty());

    // Twice the counts of the first (not its nanoseconds, read as counts:
    // ten million samples per stack would be refused as implausible).
    let mut data = go_cpu_as([("samples", "count"), ("samples", "count")]);
    let profiles = &mut data.resource_profiles[0].scope_profiles[0].profiles;
    let counts: Vec<Vec<i64>> = profiles[0]
        .samples
        .iter()
        .map(|s| s.values.clone())
        .collect();
    for (s, c) in profiles[1].samples.iter_mut().zip(counts) {
        s.values = c.iter().map(|v| v * 2).collect();
    }
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    assert!(sent(&results).len() >= 2);
    let dropped = dropped_by_reason(&results);
    assert!(
        !dropped.contains_key(&Reason::DuplicateSampleType),
        "{dropped:?}"
    );
}

/// What the OpenTelemetry eBPF profiler sends: one Profile of `samples/count`
/// (timestamps, value 1) and one of off-CPU `events/nanoseconds`; stacks of
/// Python frames over unsymbolized native frames (an address in the file
/// and a mapping named by base name, in the file's own address space, with
/// a build id, no Line) and kernel frames; samples of several processes
/// named by `thread.name` (the comm) and `process.pid`.
fn ebpf_like() -> ProfilesData {
    let mut b = DictionaryBuilder::new();
    let text = |v: &str| AnyValue {
        value: Some(Value::StringValue(v.into())),
    };
    let ft = |b: &mut DictionaryBuilder, t: &str| b.attribute_kv("profile.frame.type", text(t), "");
    let build_id = b.attribute_kv(
        "process.executable.build_id.gnu",
        text("dfb85de42daffd09640c8fe377d572de3e168920"),
        "",
    );
    let libc_file = b.string("libc.so.6");
    let libc = b.mapping(profcol_model::proto::Mapping {
        memory_start: 0x26000,
        memory_limit: 0x17c000,
        file_offset: 0x26000,
        filename_strindex: libc_file,
        attribute_indices: vec![build_id],
    });
    let native_ft = ft(&mut b, "native");
    let native = b.location(Location {
        mapping_index: libc,
        address: 0x2a3f0,
        lines: vec![],
        attribute_indices: vec![native_ft],
    });
    let syscall = b.function_named("do_syscall_64", "", "", 0);
    let kernel_ft = ft(&mut b, "kernel");
    let kernel = b.location(Location {
        mapping_index: 0,
        address: 0xffff_ffff_8100_0000,
        lines: vec![Line {
            function_index: syscall,
            line: 0,
            column: 0,
        }],
        attribute_indices: vec![kernel_ft],
    });
    let py_ft = ft(&mut b, "cpython");
    let py = |b: &mut DictionaryBuilder, name: &str, line: i64| {
        let f = b.function_named(name, "", "/srv/app/app.py", 0);
        b.location(Location {
            mapping_index: 0,
            // The eBPF profiler's line number / bytecode offset.
            address: line as u64,
            lines: vec![Line {
                function_index: f,
                line,
                column: 0,
            }],
            attribute_indices: vec![py_ft],
        })
    };
    let handle = py(&mut b, "handle", 12);
    let main = py(&mut b, "main", 40);
    let stack = b.stack(&[kernel, native, handle, main]);
    let comm = b.attribute_kv("thread.name", text("python3"), "");
    let mut samples = Vec::new();
    for (pid, t0) in [(100, 0u64), (200, 5_000_000)] {
        let pid = b.attribute_kv(
            "process.pid",
            AnyValue {
                value: Some(Value::IntValue(pid)),
            },
            "",
        );
        samples.push(Sample {
            stack_index: stack,
            attribute_indices: vec![comm, pid],
            link_index: 0,
            values: vec![1; 3],
            timestamps_unix_nano: (0..3)
                .map(|i| 1_000_000_000_000 + t0 + i * 50_000_000)
                .collect(),
        });
    }
    let vt = |b: &mut DictionaryBuilder, t: &str, u: &str| ValueType {
        type_strindex: b.string(t),
        unit_strindex: b.string(u),
    };
    let on_cpu = Profile {
        sample_type: Some(vt(&mut b, "samples", "count")),
        period_type: Some(vt(&mut b, "cpu", "nanoseconds")),
        period: 50_000_000,
        samples: samples.clone(),
        time_unix_nano: 1_000_000_000_000,
        duration_nano: 1_000_000_000,
        ..Default::default()
    };
    let mut off = samples[0].clone();
    off.values = vec![2_000_000, 3_000_000, 4_000_000];
    let off_cpu = Profile {
        sample_type: Some(vt(&mut b, "events", "nanoseconds")),
        samples: vec![off],
        time_unix_nano: 1_000_000_000_000,
        duration_nano: 1_000_000_000,
        ..Default::default()
    };
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "host.name".into(),
                    value: Some(text("node-1")),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![on_cpu, off_cpu],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(b.finish()),
    }
}

#[test]
fn ebpf_profiler_data_becomes_a_hybrid_chunk() {
    let results = otlp_to_chunks(&ebpf_like(), &ExportOptions::default());
    let chunks = sent(&results);
    assert_eq!(chunks.len(), 1, "{results:?}");
    let c = chunks[0].chunk.as_ref().unwrap();
    // Python frames on top: a Python chunk whose native and kernel frames
    // say they are native, as in Sentry's hybrid profiles.
    assert_eq!(c.platform, "python");
    let frames: Vec<_> = c.profile.stacks[0]
        .iter()
        .map(|&f| &c.profile.frames[f as usize])
        .collect();
    let view: Vec<_> = frames
        .iter()
        .map(|f| {
            (
                f.function.as_deref(),
                f.platform.as_deref(),
                f.instruction_addr,
                f.package.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            (
                Some("do_syscall_64"),
                Some("native"),
                Some(0xffff_ffff_8100_0000),
                None
            ),
            // Placed in libc's own region (mapping 1): files' own
            // address spaces overlap.
            (
                None,
                Some("native"),
                Some((1 << 40) + 0x2a3f0),
                Some("libc.so.6")
            ),
            (Some("handle"), None, None, None),
            (Some("main"), None, None, None),
        ],
        "leaf first; no addresses on Python frames"
    );
    let images = &c.debug_meta.as_ref().unwrap().images;
    assert_eq!(images[0]["code_file"], "libc.so.6");
    // At its load base (0) in its region, as large as the mapping reaches.
    assert_eq!(images[0]["image_addr"], "0x10000000000");
    assert_eq!(images[0]["image_size"], 0x17c000);
    assert!(images[0].get("image_vmaddr").is_none());

    // Two processes, one comm: two threads of the same name.
    let threads: BTreeSet<&str> = c
        .profile
        .samples
        .iter()
        .map(|s| c.profile.thread_ids[s.thread as usize].as_str())
        .collect();
    assert_eq!(threads.len(), 2);
    let names: BTreeSet<&str> = c
        .profile
        .thread_metadata
        .values()
        .map(|t| t.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["python3"].into());
    assert_eq!(chunks[0].sentry_samples, 6);

    // Off-CPU events are not CPU samples: counted, not sent.
    assert_eq!(
        results.iter().flat_map(|r| &r.dropped).collect::<Vec<_>>(),
        [&crate::Dropped {
            reason: Reason::UnsupportedSampleType,
            sentry_samples: 3,
            otlp_samples: 1,
        }]
    );
    // Relay reads it back.
    let back = chunk_to_otlp(
        &chunks[0].payload,
        Some("python"),
        &ReceiveOptions::default(),
    )
    .unwrap();
    assert_eq!(back.sentry_samples, 6);
}

fn text(v: &str) -> AnyValue {
    AnyValue {
        value: Some(Value::StringValue(v.into())),
    }
}

/// 2026-11-22, as in the recordings.
const T0: u64 = 1_795_318_570_000_000_000;

/// Unsymbolized native code: one Location (an address, no Line) in mapping
/// `/lib/libN.so` per entry of `mappings` (their attributes), one stack
/// each, and samples of stack `i` on thread `1` at `T0 + times[i]`.
fn native_stacks(
    mappings: &[&[(&str, &str)]],
    times: &[&[u64]],
    profile_attrs: &[(&str, AnyValue)],
) -> ProfilesData {
    let mut b = DictionaryBuilder::new();
    let thread = b.attribute_kv(
        "thread.id",
        AnyValue {
            value: Some(Value::IntValue(1)),
        },
        "",
    );
    let mut stacks = Vec::new();
    for (i, attrs) in mappings.iter().enumerate() {
        let attribute_indices = attrs
            .iter()
            .map(|(k, v)| b.attribute_kv(k, text(v), ""))
            .collect();
        let filename_strindex = b.string(&format!("/lib/lib{i}.so"));
        let base = 0x10_0000 * (i as u64 + 1);
        let mapping_index = b.mapping(profcol_model::proto::Mapping {
            memory_start: base,
            memory_limit: base + 0x1000,
            file_offset: 0,
            filename_strindex,
            attribute_indices,
        });
        let loc = b.location(Location {
            mapping_index,
            address: base + 0x10,
            lines: vec![],
            attribute_indices: vec![],
        });
        stacks.push(b.stack(&[loc]));
    }
    let samples = times
        .iter()
        .zip(&stacks)
        .filter(|(t, _)| !t.is_empty())
        .map(|(t, &stack_index)| Sample {
            stack_index,
            attribute_indices: vec![thread],
            link_index: 0,
            values: vec![],
            timestamps_unix_nano: t.iter().map(|t| T0 + t).collect(),
        })
        .collect();
    let attribute_indices = profile_attrs
        .iter()
        .map(|(k, v)| b.attribute_kv(k, v.clone(), ""))
        .collect();
    let sample_type = ValueType {
        type_strindex: b.string("samples"),
        unit_strindex: b.string("count"),
    };
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource::default()),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    sample_type: Some(sample_type),
                    samples,
                    time_unix_nano: T0,
                    duration_nano: 200_000_000_000,
                    attribute_indices,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(b.finish()),
    }
}

const MS: u64 = 1_000_000;
const BUILD_ID_A: &str = "dfb85de42daffd09640c8fe377d572de3e168920";
const BUILD_ID_B: &str = "0123456789abcdef0123456789abcdef01234567";
const BUILD_ID_C: &str = "fedcba9876543210fedcba9876543210fedcba98";

fn code_files(c: &crate::OutgoingChunk) -> Vec<&str> {
    c.debug_meta
        .iter()
        .flat_map(|m| &m.images)
        .map(|i| i["code_file"].as_str().unwrap())
        .collect()
}

#[test]
fn a_chunk_lists_only_the_images_its_frames_come_from() {
    let gnu = "process.executable.build_id.gnu";
    // lib0 is sampled in the first minute, lib1 100 s later, lib2 never.
    let data = native_stacks(
        &[
            &[(gnu, BUILD_ID_A)],
            &[(gnu, BUILD_ID_B)],
            &[(gnu, BUILD_ID_C)],
        ],
        &[
            &[0, 10 * MS, 20 * MS],
            &[100_000 * MS, 100_010 * MS, 100_020 * MS],
            &[],
        ],
        &[],
    );
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let chunks = sent(&results);
    assert_eq!(chunks.len(), 2, "{results:?}");
    let files: Vec<Vec<&str>> = chunks
        .iter()
        .map(|r| code_files(r.chunk.as_ref().unwrap()))
        .collect();
    assert_eq!(files, [["/lib/lib0.so"], ["/lib/lib1.so"]]);
    let c = chunks[1].chunk.as_ref().unwrap();
    assert_eq!(
        c.debug_meta.as_ref().unwrap().images[0]["debug_id"],
        ids::debug_id_from_build_id(&hex::decode(BUILD_ID_B).unwrap()).unwrap()
    );
}

/// Relay's `Frame` has no `package`: an unsymbolized frame named by its
/// mapping also gets the file's name as `module`, or Sentry would see only
/// an address.
#[test]
fn unsymbolized_native_frames_are_named_by_module_too() {
    let data = native_stacks(&[&[]], &[&[0, 10 * MS, 20 * MS]], &[]);
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let c = sent(&results)[0].chunk.as_ref().unwrap();
    let f = &c.profile.frames[0];
    assert_eq!(
        (
            f.module.as_deref(),
            f.package.as_deref(),
            f.function.as_deref()
        ),
        (Some("lib0.so"), Some("/lib/lib0.so"), None)
    );

    // The eBPF profiler's libc frame too; symbolized frames get no module.
    let results = otlp_to_chunks(&ebpf_like(), &ExportOptions::default());
    let c = sent(&results)[0].chunk.as_ref().unwrap();
    let modules: Vec<Option<&str>> = c.profile.stacks[0]
        .iter()
        .map(|&f| c.profile.frames[f as usize].module.as_deref())
        .collect();
    assert_eq!(modules, [None, Some("libc.so.6"), None, None]);
}

/// A debug id Relay cannot parse makes it refuse the whole chunk: only that
/// image is left out, from mappings and from a received `debug_meta` alike.
#[test]
fn images_with_unreadable_debug_ids_are_left_out_alone() {
    let id = "sentry.debug_id";
    let data = native_stacks(
        &[
            &[(id, "not-a-uuid")],
            &[(id, "dfb8e43a-f242-3d73-a453-aeb6a777ef75-a")],
            &[("process.executable.build_id.gnu", BUILD_ID_A)],
            &[(id, "DFB8E43AF2423D73A453AEB6A777EF75a")],
            &[(id, "dfb8e43a-f242-3d73-a453-aeb6a777ef75-")],
        ],
        &[
            &[0, 10 * MS],
            &[1, 11 * MS],
            &[2, 12 * MS],
            &[3, 13 * MS],
            &[4, 14 * MS],
        ],
        &[],
    );
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let chunks = sent(&results);
    assert_eq!(chunks.len(), 1, "{results:?}");
    let c = chunks[0].chunk.as_ref().unwrap();
    assert_eq!(
        code_files(c),
        ["/lib/lib1.so", "/lib/lib2.so", "/lib/lib3.so"]
    );
    assert_eq!(c.profile.samples.len(), 10, "every sample is still sent");

    let received = serde_json::json!({"images": [
        {"type": "macho", "debug_id": "bogus", "image_addr": "0x1000"},
        {"type": "macho", "debug_id": "32420279-25E2-34E6-8BC7-8A006A8F2425", "image_addr": "0x2000"},
        {"type": "proguard", "uuid": "not-a-uuid"},
        {"type": "proguard", "uuid": "32420279-25e2-34e6-8bc7-8a006a8f2425"},
    ]});
    let data = native_stacks(
        &[&[]],
        &[&[0, 10 * MS]],
        &[("sentry.debug_meta", text(&received.to_string()))],
    );
    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let c = sent(&results)[0].chunk.as_ref().unwrap();
    let images = &c.debug_meta.as_ref().unwrap().images;
    assert_eq!(
        images,
        &vec![received["images"][1].clone(), received["images"][3].clone()]
    );
}

/// Relay reads `lineno`, `colno` and a thread's `priority` as `u32`: a
/// value out of that range would make it refuse the chunk as invalid JSON,
/// so it is left out.
#[test]
fn numbers_out_of_relays_range_are_left_out() {
    let mut data = hand_built(
        vec![],
        &[
            ("a", Some(Value::IntValue(11)), 3),
            ("b", Some(Value::IntValue(12)), 3),
            ("c", Some(Value::IntValue(13)), 3),
        ],
    );
    let dict = data.dictionary.as_mut().unwrap();
    let loc = dict
        .location_table
        .iter_mut()
        .find(|l| l.address == 0x1000)
        .unwrap();
    loc.lines[0].line = i64::from(u32::MAX) + 1;
    loc.lines[0].column = 5;
    loc.lines[1].line = i64::from(u32::MAX);
    loc.lines[1].column = 1 << 40;
    let thread = |priority: i64| AnyValue {
        value: Some(Value::KvlistValue(profcol_model::proto::KeyValueList {
            values: vec![KeyValue {
                key: "priority".into(),
                value: Some(AnyValue {
                    value: Some(Value::IntValue(priority)),
                }),
                ..Default::default()
            }],
        })),
    };
    let table = AnyValue {
        value: Some(Value::KvlistValue(profcol_model::proto::KeyValueList {
            values: [("11", -1), ("12", 1 << 33), ("13", 31)]
                .into_iter()
                .map(|(id, p)| KeyValue {
                    key: id.into(),
                    value: Some(thread(p)),
                    ..Default::default()
                })
                .collect(),
        })),
    };
    let key = dict.string_table.len() as i32;
    dict.string_table.push("sentry.thread_metadata".into());
    dict.attribute_table
        .push(profcol_model::proto::KeyValueAndUnit {
            key_strindex: key,
            value: Some(table),
            unit_strindex: 0,
        });
    let attr = dict.attribute_table.len() as i32 - 1;
    data.resource_profiles[0].scope_profiles[0].profiles[0]
        .attribute_indices
        .push(attr);

    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let out: Json = serde_json::from_slice(&sent(&results)[0].payload).unwrap();
    let frames = &out["profile"]["frames"];
    assert_eq!(frames[0]["lineno"], Json::Null);
    assert_eq!(frames[0]["colno"], 5);
    assert_eq!(frames[1]["lineno"], u32::MAX);
    assert_eq!(frames[1]["colno"], Json::Null);
    let meta = &out["profile"]["thread_metadata"];
    assert_eq!(meta["11"], serde_json::json!({"name": "a"}));
    assert_eq!(meta["12"], serde_json::json!({"name": "b"}));
    assert_eq!(meta["13"], serde_json::json!({"name": "c", "priority": 31}));
}

/// Relay subtracts the timestamps as it parsed them, float seconds. Across
/// a power of two (2^31 s is 2038-01-19) two timestamps exactly 66 s apart
/// in microseconds are more than 66.0 apart as floats: a window of 66 s
/// minus a few hundred ns in nanoseconds ends before such a sample.
#[test]
fn windows_end_where_relay_would_count_more_than_66_seconds() {
    let first: u64 = 2_147_483_618_000_006_100;
    let last = first + 66_000_000_000 - 300;
    let secs = crate::time::unix_nanos_to_secs;
    assert!(secs(last) - secs(first) > 66.0, "the case Relay refuses");

    let mut data = hand_built(vec![], &[("t", Some(Value::IntValue(1)), 1)]);
    let p = &mut data.resource_profiles[0].scope_profiles[0].profiles[0];
    p.time_unix_nano = first;
    p.duration_nano = 70_000_000_000;
    p.samples[0].timestamps_unix_nano = vec![
        first,
        first + 10 * MS,
        first + 20 * MS,
        last - 20 * MS,
        last - 10 * MS,
        last,
        // Under 66 s after `first` in nanoseconds: one window by length.
        last + 100,
    ];
    let (results, sizes) = sent_whole(&data, 66_000_000_000);
    let chunks = sent(&results);
    assert_eq!(sizes, [5, 2]);
    for r in chunks {
        let (_, ts) = as_sent(r);
        assert!(ts[ts.len() - 1] - ts[0] <= 66.0, "{ts:?}");
    }
}

/// Without `service.instance.id`, `host.name` or `process.pid`, replicas
/// of a service would share one profiler session: each exporter uses its
/// own (stable while it runs) instead.
#[test]
fn profiler_id_without_process_attributes_is_the_exporters_own() {
    let threads = [("t", Some(Value::IntValue(1)), 3)];
    let id = |res: Vec<(&str, &str)>, instance: u8| {
        let opts = ExportOptions {
            instance_id: [instance; 16],
            ..ExportOptions::default()
        };
        let results = otlp_to_chunks(&hand_built(res, &threads), &opts);
        results[0].chunk.as_ref().unwrap().profiler_id.clone()
    };
    let svc = || vec![("service.name", "api")];
    assert_eq!(id(svc(), 1), id(svc(), 1), "stable for one exporter");
    assert_ne!(id(svc(), 1), id(svc(), 2), "another replica's exporter");
    assert_ne!(
        id(svc(), 1),
        id(vec![("service.name", "web")], 1),
        "another service"
    );
    // A resource that names its process keeps the derived id.
    let host = || vec![("service.name", "api"), ("host.name", "h1")];
    assert_eq!(id(host(), 1), id(host(), 2));
    // So does one that names only its container or pod (the eBPF
    // profiler's): two containers are two sessions.
    for key in ["container.id", "k8s.pod.uid", "host.id"] {
        let one = || vec![(key, "aaaa")];
        assert_eq!(id(one(), 1), id(one(), 2), "{key}");
        assert_ne!(id(one(), 1), id(vec![(key, "bbbb")], 1), "{key}");
    }
    // The default is made once per process.
    let default = |res| {
        let results = otlp_to_chunks(&hand_built(res, &threads), &ExportOptions::default());
        results[0].chunk.as_ref().unwrap().profiler_id.clone()
    };
    assert_eq!(default(svc()), default(svc()));
}

/// An SDK's 60 s chunk that runs a little over (a timer, not a cut) is
/// split into halves, not into 60 s and a sliver too small to send; its
/// measurements go with the part of the chunk they fall in.
#[test]
fn a_chunk_slightly_over_the_window_is_split_evenly_with_its_measurements() {
    let start = 1_710_958_500.0_f64;
    // 101 Hz on two threads for 60.015 s.
    let n = 6063;
    let samples: Vec<Json> = (0..n)
        .flat_map(|i| {
            let t = start + i as f64 * 60.015 / (n - 1) as f64;
            ["1", "2"].map(|th| serde_json::json!({"stack_id": 0, "thread_id": th, "timestamp": t}))
        })
        .collect();
    let values = |every: f64| -> Vec<Json> {
        (0..)
            .map(|i| start + i as f64 * every)
            .take_while(|t| *t <= start + 60.015)
            .map(|t| serde_json::json!({"timestamp": t, "value": 16_700_000}))
            .collect()
    };
    let chunk = serde_json::json!({
        "version": "2",
        "chunk_id": "0123456789abcdef0123456789abcdef",
        "profiler_id": "fedcba9876543210fedcba9876543210",
        "platform": "cocoa",
        "release": "app@1.0",
        "client_sdk": {"name": "sentry.cocoa", "version": "8.40.0"},
        "measurements": {
            "slow_frame_renders": {"unit": "nanosecond", "values": values(7.5)},
            "frozen_frame_renders": {"unit": "nanosecond", "values": values(40.0)},
        },
        "profile": {
            "samples": samples,
            "stacks": [[0]],
            "frames": [{"function": "main", "in_app": true}],
            "thread_metadata": {"1": {"name": "main"}, "2": {"name": "worker"}},
        },
    });
    let conv = chunk_to_otlp(
        &serde_json::to_vec(&chunk).unwrap(),
        Some("cocoa"),
        &ReceiveOptions::default(),
    )
    .unwrap();
    // The sentry exporter's default window.
    let (results, sizes) = sent_whole(&conv.data, 60_000_000_000);
    let chunks = sent(&results);
    assert_eq!(sizes.iter().sum::<usize>(), 2 * n, "{sizes:?}");
    assert_eq!(sizes.len(), 2);
    assert!(sizes[0].abs_diff(sizes[1]) <= 4, "halves: {sizes:?}");

    // Each measurement value once, in the chunk whose samples it falls among.
    let mut seen: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (k, r) in chunks.iter().enumerate() {
        let (out, ts) = as_sent(r);
        let (first, next) = (ts[0], chunks.get(k + 1).map(|c| as_sent(c).1[0]));
        for (name, m) in out["measurements"].as_object().unwrap() {
            assert_eq!(m["unit"], "nanosecond");
            for v in m["values"].as_array().unwrap() {
                let t = v["timestamp"].as_f64().unwrap();
                assert!(k == 0 || t >= first, "{name} at {t} before chunk {k}");
                assert!(next.is_none_or(|n| t < n), "{name} at {t} after chunk {k}");
                seen.entry(name.clone()).or_default().push(t);
            }
        }
    }
    let count = |name: &str| {
        chunk["measurements"][name]["values"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(
        seen["slow_frame_renders"].len(),
        count("slow_frame_renders")
    );
    assert_eq!(
        seen["frozen_frame_renders"].len(),
        count("frozen_frame_renders")
    );
}

/// The eBPF profiler's pseudo-frames (an aborted unwind, an interpreter
/// error) have no line, address or mapping: their frame type names them,
/// so the two stay apart instead of both becoming an empty frame.
#[test]
fn ebpf_pseudo_frames_are_named_by_their_frame_type() {
    let mut data = ebpf_like();
    let d = data.dictionary.as_mut().unwrap();
    let key = d.string_table.len() as i32;
    d.string_table.push("profile.frame.type".into());
    let mut leaf = Vec::new();
    for t in ["abort-marker", "cpython-error"] {
        d.attribute_table
            .push(profcol_model::proto::KeyValueAndUnit {
                key_strindex: key,
                value: Some(AnyValue {
                    value: Some(Value::StringValue(t.into())),
                }),
                unit_strindex: 0,
            });
        d.location_table.push(Location {
            attribute_indices: vec![d.attribute_table.len() as i32 - 1],
            ..Default::default()
        });
        leaf.push(d.location_table.len() as i32 - 1);
    }
    // Each pseudo-frame on top of the first sample's stack.
    let base = d.stack_table[1].location_indices.clone();
    let samples = &mut data.resource_profiles[0].scope_profiles[0].profiles[0].samples;
    let mut more = Vec::new();
    for l in leaf {
        let mut locations = vec![l];
        locations.extend(&base);
        d.stack_table.push(profcol_model::proto::Stack {
            location_indices: locations,
        });
        let mut s = samples[0].clone();
        s.stack_index = d.stack_table.len() as i32 - 1;
        more.push(s);
    }
    samples.extend(more);
    profcol_model::validate(&data).unwrap();

    let results = otlp_to_chunks(&data, &ExportOptions::default());
    let c = sent(&results)[0].chunk.as_ref().unwrap();
    let names: BTreeSet<Option<&str>> = c
        .profile
        .frames
        .iter()
        .map(|f| f.function.as_deref())
        .collect();
    assert!(names.contains(&Some("[abort-marker]")), "{names:?}");
    assert!(names.contains(&Some("[cpython-error]")), "{names:?}");
}

/// Runs `f` on a thread and fails the test if it has not finished in 20 s,
/// so a runaway loop fails instead of hanging the suite.
pub(crate) fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("did not finish within 20 s")
}

#[test]
fn hostile_times_and_values_are_refused_with_a_reason_in_bounded_work() {
    for (name, data) in profcol_model::synth::hostile() {
        let samples = data.resource_profiles[0].scope_profiles[0].profiles[0]
            .samples
            .len() as u64;
        let results = within_seconds(move || otlp_to_chunks(&data, &ExportOptions::default()));
        assert_eq!(otlp_accounted(&results), samples, "{name}: {results:?}");
        let points: u64 = results.iter().map(|r| r.sentry_samples).sum();
        assert!(
            points <= 16 * 100_000,
            "{name}: {points} points, more than 16 chunks' worth"
        );
        let reasons = dropped_by_reason(&results);
        let expected = match name {
            "sample timestamp 2^64-1" | "time_unix_nano 2^64-1" | "duration_nano 2^64-1" => {
                Some(Reason::ImplausibleTime)
            }
            "duration 1e14, value 2^62 ns" | "no duration, value 2^63-1 count" => {
                Some(Reason::ImplausibleTime)
            }
            "duration 1e13, value 2^62 ns" | "value 2^63-1 twice" => {
                Some(Reason::ImplausibleValues)
            }
            _ => None,
        };
        if let Some(r) = expected {
            assert!(
                results.iter().all(|r| r.chunk.is_none()),
                "{name}: nothing is sent"
            );
            assert!(
                results
                    .iter()
                    .flat_map(|x| &x.dropped)
                    .any(|d| d.reason == r && d.otlp_samples == samples),
                "{name}: {reasons:?}"
            );
        }
    }
}

#[test]
fn a_long_plausible_profile_is_spread_over_at_most_sixteen_chunks_worth_of_points() {
    // Two hours of 1000 stacks at 100 Hz: 7.2 M points, as aggregated values.
    let mut data = profcol_model::synth::Config {
        samples: 1_000,
        stacks: 1_000,
        timestamps: false,
        ..Default::default()
    }
    .build();
    let dict = data.dictionary.clone().unwrap();
    let mut b = DictionaryBuilder::from_dictionary(dict);
    let (cpu, ns) = (b.string("cpu"), b.string("nanoseconds"));
    let p = &mut data.resource_profiles[0].scope_profiles[0].profiles[0];
    p.sample_type = Some(ValueType {
        type_strindex: cpu,
        unit_strindex: ns,
    });
    p.period_type = p.sample_type;
    p.period = 10_000_000;
    p.duration_nano = 7_200_000_000_000;
    for s in &mut p.samples {
        s.values = vec![7_200 * 10_000_000];
    }
    data.dictionary = Some(b.finish());
    let results = within_seconds(move || otlp_to_chunks(&data, &ExportOptions::default()));
    let points: u64 = results.iter().map(|r| r.sentry_samples).sum();
    assert!(points <= 1_600_000 && points > 1_000_000, "{points}");
    assert_eq!(
        dropped_by_reason(&results).get(&Reason::MaxSamplesPerChunk),
        Some(&(7_200_000 - points)),
        "the rest is counted"
    );
    assert_eq!(otlp_accounted(&results), 1_000);
}
