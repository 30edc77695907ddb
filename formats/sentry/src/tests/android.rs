//! Android chunks and legacy profiles: what the trace states arrives in
//! OTLP, and goes back out as Android chunks Relay would take.
//!
//! The payloads are written by the trace format's own writer (`synth`);
//! what is expected is what the generator meant, worked out beside it, not
//! read back through the receiver's replay.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::super::android::synth::{self, Expected, THREADS};
use super::super::android::trace;
use super::super::{
    chunk_to_otlp_in_envelope, keys as k, otlp_to_chunks, profile_v1_to_otlp, ExportOptions,
    Reason, ReceiveOptions,
};
use super::support::{attrs, check_dictionary, profile, resource_attrs};
use profcol_model::dictionary::Lookup;
use profcol_model::proto::ProfilesData;

const START_US: i64 = 1_700_000_000_123_456;
const CHUNK_ID: &str = "07e927e936ba40c58751bf36db09bcd9";
const PROFILER_ID: &str = "128082665abf46afb04c416b7ff50e56";
const PROFILE_ID: &str = "9bd24eb4fd814a008ddefd035d363570";
const EVENT_ID: &str = "8c3e0bc0518540b3ad1aa70d08f1ca7a";
const TRACE_ID: &str = "4b45d297ef404fb89e8fdf418c8f38a2";
const SPAN_ID: &str = "a1b2c3d4e5f60718";

fn opts() -> ReceiveOptions {
    ReceiveOptions::default()
}

fn chunk(ticks: u32) -> (Vec<u8>, Vec<Expected>) {
    let (log, expected) = synth::sampled_trace(7, START_US, ticks, 10_000);
    let payload = synth::chunk_json(&log, CHUNK_ID, PROFILER_ID);
    (serde_json::to_vec(&payload).unwrap(), expected)
}

fn legacy(ticks: u32, edit: impl FnOnce(&mut Json)) -> (Vec<u8>, Vec<u8>, Vec<Expected>) {
    let (log, expected) = synth::sampled_trace(11, START_US, ticks, 10_000);
    let mut p = synth::legacy_json(&log, PROFILE_ID, EVENT_ID, TRACE_ID);
    edit(&mut p);
    let tx = synth::transaction_json(EVENT_ID, TRACE_ID, SPAN_ID);
    (
        serde_json::to_vec(&p).unwrap(),
        serde_json::to_vec(&tx).unwrap(),
        expected,
    )
}

/// Every point of the OTLP data as the generator states spans: thread,
/// nanoseconds since `start_unix_ns`, wall nanoseconds, `class.method`
/// names outermost first.
fn spans_of(d: &ProfilesData, start_unix_ns: u64) -> Vec<Expected> {
    let l = Lookup::of(d);
    let p = profile(d);
    let st = p.sample_type.unwrap();
    assert_eq!(
        (l.string(st.type_strindex), l.string(st.unit_strindex)),
        ("wall", "nanoseconds")
    );
    let mut out = Vec::new();
    for s in &p.samples {
        assert_eq!(s.values.len(), s.timestamps_unix_nano.len());
        let thread = match l.attribute_value(&s.attribute_indices, k::THREAD_ID) {
            Some(v) => match v.value {
                Some(profcol_model::proto::any_value::Value::IntValue(i)) => i as u16,
                _ => panic!("thread.id is an integer"),
            },
            None => panic!("every point names its thread"),
        };
        let mut stack: Vec<String> = l
            .stack(s.stack_index)
            .location_indices
            .iter()
            .map(|&i| {
                let f = l.function(l.location(i).lines[0].function_index);
                l.string(f.name_strindex).to_owned()
            })
            .collect();
        stack.reverse();
        for (&ts, &v) in s.timestamps_unix_nano.iter().zip(&s.values) {
            out.push(Expected {
                thread,
                start_ns: ts - start_unix_ns,
                duration_ns: v as u64,
                stack: stack.clone(),
            });
        }
    }
    out.sort();
    out
}

/// Relay's `android/chunk.rs` reading of a chunk: the fields it requires,
/// the trace parsed, events present, a duration above zero and at most
/// 30 s. Returns the trace.
fn relay_reads(payload: &[u8]) -> android_trace_log::AndroidTraceLog {
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Sdk {
        name: String,
        version: String,
    }
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct RelayChunk {
        chunk_id: String,
        profiler_id: String,
        client_sdk: Sdk,
        platform: String,
        release: String,
        #[serde(default)]
        duration_ns: u64,
        #[serde(default)]
        timestamp: f64,
        sampled_profile: String,
    }
    let c: RelayChunk = serde_json::from_slice(payload).expect("Relay's chunk fields");
    assert!(uuid::Uuid::try_parse(&c.chunk_id).is_ok());
    assert!(uuid::Uuid::try_parse(&c.profiler_id).is_ok());
    assert_eq!(c.platform, "android");
    // Relay decodes with base64 without padding.
    assert!(!c.sampled_profile.ends_with('='));
    let log = trace::decode(&c.sampled_profile).expect("Relay parses the trace");
    assert!(!log.events.is_empty(), "Relay: not enough samples");
    assert!(!log.elapsed_time.is_zero(), "Relay: duration is zero");
    assert!(log.elapsed_time.as_secs_f64() <= 30.0, "Relay: too long");
    let start_ns = log.start_time.timestamp_nanos_opt().unwrap() as u64;
    assert_eq!(c.timestamp, start_ns as f64 / 1e9);
    assert_eq!(c.duration_ns, log.elapsed_time.as_nanos() as u64);
    log
}

/// The spans of chunks' traces, in absolute nanoseconds since `start`.
fn spans_of_chunks(payloads: &[Vec<u8>], start_unix_ns: u64) -> Vec<Expected> {
    let mut out = Vec::new();
    for p in payloads {
        let log = relay_reads(p);
        let offset = log.start_time.timestamp_nanos_opt().unwrap() as u64 - start_unix_ns;
        let names: BTreeMap<u32, String> = log
            .methods
            .iter()
            .map(|m| (m.id, format!("{}.{}", m.class_name, m.name)))
            .collect();
        let spans = trace::spans(&log);
        for s in &spans.spans {
            out.push(Expected {
                thread: s.thread,
                start_ns: offset + s.start_ns,
                duration_ns: s.duration_ns,
                stack: spans.stacks[s.stack as usize]
                    .iter()
                    .map(|m| names[m].clone())
                    .collect(),
            });
        }
    }
    out.sort();
    out
}

/// Wall time per (thread, stack): what a flame graph shows.
fn time_per_stack(spans: &[Expected]) -> BTreeMap<(u16, Vec<String>), u64> {
    let mut out = BTreeMap::new();
    for s in spans {
        *out.entry((s.thread, s.stack.clone())).or_default() += s.duration_ns;
    }
    out
}

const START_NS: u64 = START_US as u64 * 1000;

#[test]
fn an_android_chunk_arrives_as_the_time_its_threads_spent_per_stack() {
    let (payload, expected) = chunk(300);
    assert!(expected.len() > 500, "a trace worth testing");
    let c = chunk_to_otlp_in_envelope(&payload, Some("android"), &Json::Null, &opts()).unwrap();
    check_dictionary(&c.data);
    assert_eq!(spans_of(&c.data, START_NS), expected);
    assert_eq!(c.sentry_samples, expected.len() as u64);

    let p = profile(&c.data);
    let a = attrs(&c.data, &p.attribute_indices);
    assert_eq!(a[k::SENTRY_PLATFORM], "android");
    assert_eq!(a[k::SENTRY_CHUNK_ID], CHUNK_ID);
    assert_eq!(a[k::SENTRY_PROFILER_ID], PROFILER_ID);
    assert_eq!(a[k::SENTRY_RELEASE], "io.sentry.samples.android@8.13.2+1");
    assert_eq!(a[k::SENTRY_ENVIRONMENT], "production");
    assert!(a[k::SENTRY_MEASUREMENTS].contains("frozen_frame_renders"));
    assert_eq!(p.time_unix_nano, START_NS + expected[0].start_ns);
    let r = resource_attrs(&c.data);
    assert_eq!(r[k::SERVICE_NAME], "io.sentry.samples.android");
    assert_eq!(r[k::SDK_NAME], "sentry.java.android");

    // Threads keep their names; methods their signature, file and line.
    let l = Lookup::of(&c.data);
    let mut names = BTreeMap::new();
    for s in &p.samples {
        let a = attrs(&c.data, &s.attribute_indices);
        names.insert(a[k::THREAD_ID].clone(), a[k::THREAD_NAME].clone());
    }
    let want: BTreeMap<_, _> = THREADS
        .iter()
        .map(|(id, n)| (id.to_string(), n.to_string()))
        .collect();
    assert_eq!(names, want);
    let fib = (1..l.dictionary().function_table.len() as i32)
        .map(|i| l.function(i))
        .find(|f| l.string(f.name_strindex).ends_with(".fibonacci"))
        .unwrap();
    assert_eq!(
        l.string(fib.system_name_strindex),
        "io.sentry.samples.android.ProfilingActivity.fibonacci(I)I"
    );
    assert_eq!(l.string(fib.filename_strindex), "ProfilingActivity.kt");
    let line = l
        .dictionary()
        .location_table
        .iter()
        .flat_map(|loc| &loc.lines)
        .find(|line| l.function(line.function_index) == fib)
        .unwrap();
    assert_eq!(line.line, 112);
}

#[test]
fn an_android_chunk_goes_back_as_one_relay_takes_with_the_same_spans() {
    let (payload, expected) = chunk(300);
    let c = chunk_to_otlp_in_envelope(&payload, Some("android"), &Json::Null, &opts()).unwrap();
    let results = otlp_to_chunks(&c.data, &ExportOptions::default());
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert!(r.dropped.is_empty(), "{:?}", r.dropped);
    assert_eq!(r.sentry_samples, expected.len() as u64);
    assert_eq!(r.otlp_samples, profile(&c.data).samples.len() as u64);
    let chunk = r.chunk.as_ref().unwrap();
    assert_eq!(chunk.platform, "android");
    let sent: Json = serde_json::from_slice(&r.payload).unwrap();
    let got = |key: &str| sent[key].clone();
    assert_eq!(got("chunk_id"), CHUNK_ID);
    assert_eq!(got("profiler_id"), PROFILER_ID);
    assert_eq!(got("release"), "io.sentry.samples.android@8.13.2+1");
    assert_eq!(got("environment"), "production");
    assert_eq!(
        got("client_sdk"),
        json!({"name": "sentry.java.android", "version": "8.13.2"})
    );
    assert!(got("measurements")["frozen_frame_renders"].is_object());
    // A method trace, as newer Relays take one (they refuse it without a
    // version); no `profile`.
    assert!(got("profile").is_null());
    assert_eq!(got("version"), "2.android-trace");
    assert_eq!(
        spans_of_chunks(std::slice::from_ref(&r.payload), START_NS),
        expected
    );

    // And it reads back as the same profile.
    let again =
        chunk_to_otlp_in_envelope(&r.payload, Some("android"), &Json::Null, &opts()).unwrap();
    assert_eq!(spans_of(&again.data, START_NS), expected);
}

#[test]
fn a_long_android_profile_goes_back_in_windows_of_at_most_30_s() {
    // 65 s at 100 Hz: three windows.
    let (payload, expected) = chunk(6_500);
    let c = chunk_to_otlp_in_envelope(&payload, Some("android"), &Json::Null, &opts()).unwrap();
    let results = otlp_to_chunks(&c.data, &ExportOptions::default());
    assert_eq!(results.len(), 3);
    let payloads: Vec<Vec<u8>> = results.iter().map(|r| r.payload.clone()).collect();
    let ids: std::collections::BTreeSet<_> = results
        .iter()
        .map(|r| r.chunk.as_ref().unwrap().chunk_id.clone())
        .collect();
    assert_eq!(ids.len(), 3, "each chunk its own id");
    // Spans running over a window's end are cut there: the time per
    // stack is what it was, and every span is counted once.
    let got = spans_of_chunks(&payloads, START_NS);
    assert_eq!(time_per_stack(&got), time_per_stack(&expected));
    let sent: u64 = results.iter().map(|r| r.sentry_samples).sum();
    assert_eq!(sent, expected.len() as u64);
    let homes: u64 = results.iter().map(|r| r.otlp_samples).sum();
    assert_eq!(homes, profile(&c.data).samples.len() as u64);
}

#[test]
fn a_legacy_android_profile_arrives_linked_to_its_transaction() {
    let (payload, tx, expected) = legacy(200, |_| {});
    let c = profile_v1_to_otlp(&payload, Some("android"), Some(&tx), &Json::Null, &opts()).unwrap();
    check_dictionary(&c.data);
    assert_eq!(spans_of(&c.data, START_NS), expected);
    let d = c.data.dictionary.as_ref().unwrap();
    let p = profile(&c.data);
    for s in &p.samples {
        let link = &d.link_table[s.link_index as usize];
        assert_eq!(hex::encode(&link.trace_id), TRACE_ID);
        assert_eq!(hex::encode(&link.span_id), SPAN_ID);
    }
    let a = attrs(&c.data, &p.attribute_indices);
    assert_eq!(a[k::SENTRY_EVENT_ID], PROFILE_ID);
    assert_eq!(a[k::SENTRY_TRANSACTION_NAME], "MainActivity");
    // The transaction event's release wins over the profile's
    // `version_name`, as in Relay.
    assert_eq!(a[k::SENTRY_RELEASE], "io.sentry.samples.android@8.13.2+1");
    assert_eq!(
        a[k::SENTRY_BUILD_ID],
        "0b6a7c4e-9bd1-4b4a-9b6c-2f1d3e4a5b6c"
    );
    let r = resource_attrs(&c.data);
    assert_eq!(r[k::DEVICE_MODEL], "Pixel 7");
    assert_eq!(r[k::OS_VERSION], "14");

    // Out as an Android chunk of its own profiler session.
    let results = otlp_to_chunks(&c.data, &ExportOptions::default());
    assert_eq!(results.len(), 1);
    let out = &results[0];
    assert_eq!(
        spans_of_chunks(std::slice::from_ref(&out.payload), START_NS),
        expected
    );
    let sent: Json = serde_json::from_slice(&out.payload).unwrap();
    assert_eq!(sent["build_id"], "0b6a7c4e-9bd1-4b4a-9b6c-2f1d3e4a5b6c");
    assert_ne!(sent["profiler_id"], Json::Null);
    // Legacy measurements count from the profile start: not a chunk's.
    assert!(sent.get("measurements").is_none());
}

#[test]
fn a_legacy_android_profile_without_a_version_list_uses_its_top_level_transaction() {
    let (payload, _, expected) = legacy(50, |p| {
        p.as_object_mut().unwrap().remove("transactions");
    });
    let c = profile_v1_to_otlp(&payload, Some("android"), None, &Json::Null, &opts()).unwrap();
    assert_eq!(spans_of(&c.data, START_NS), expected);
    let p = profile(&c.data);
    let a = attrs(&c.data, &p.attribute_indices);
    assert_eq!(a[k::SENTRY_TRANSACTION_NAME], "MainActivity");
    // Without the event: the profile's own release (`version_name`).
    assert_eq!(a[k::SENTRY_RELEASE], "8.13.2");
    let d = c.data.dictionary.as_ref().unwrap();
    let link = &d.link_table[p.samples[0].link_index as usize];
    assert_eq!(hex::encode(&link.trace_id), TRACE_ID);
}

#[test]
fn android_refusals_use_relays_reasons() {
    let legacy_with = |edit: &dyn Fn(&mut Json)| {
        let (payload, tx, _) = legacy(20, edit);
        profile_v1_to_otlp(&payload, Some("android"), Some(&tx), &Json::Null, &opts())
            .unwrap_err()
            .reason
    };
    assert_eq!(
        legacy_with(&|p| {
            let o = p.as_object_mut().unwrap();
            o.remove("transactions");
            o.remove("transaction_name");
        }),
        Reason::NoTransaction
    );
    assert_eq!(
        legacy_with(&|p| p["transactions"][0]["trace_id"] = json!("nope")),
        Reason::InvalidTransactionMetadata
    );
    assert_eq!(
        legacy_with(&|p| p["sampled_profile"] = json!("not base64!")),
        Reason::InvalidBase64Value
    );
    assert_eq!(
        legacy_with(&|p| p["sampled_profile"] = json!("")),
        Reason::NotEnoughSamples
    );
    assert_eq!(
        legacy_with(&|p| p["profile_id"] = json!(42)),
        Reason::InvalidJson
    );
    // A legacy trace over 30 s.
    let (log, _) = synth::sampled_trace(3, START_US, 3_100, 10_000);
    let mut p = synth::legacy_json(&log, PROFILE_ID, EVENT_ID, TRACE_ID);
    p["sampled_profile"] = json!(trace::encode(&log));
    let payload = serde_json::to_vec(&p).unwrap();
    let e = profile_v1_to_otlp(&payload, None, None, &Json::Null, &opts()).unwrap_err();
    assert_eq!(e.reason, Reason::DurationTooLong, "{e}");

    let chunk_with = |edit: &dyn Fn(&mut Json)| {
        let (log, _) = synth::sampled_trace(5, START_US, 20, 10_000);
        let mut c = synth::chunk_json(&log, CHUNK_ID, PROFILER_ID);
        edit(&mut c);
        let payload = serde_json::to_vec(&c).unwrap();
        chunk_to_otlp_in_envelope(&payload, Some("android"), &Json::Null, &opts())
            .unwrap_err()
            .reason
    };
    assert_eq!(
        chunk_with(&|c| c["chunk_id"] = json!("x")),
        Reason::InvalidJson
    );
    assert_eq!(
        chunk_with(&|c| c["sampled_profile"] = json!("AAAA")),
        Reason::InvalidSampledProfile
    );
    // The item header names a backend platform.
    let (payload, _) = chunk(20);
    let e = chunk_to_otlp_in_envelope(&payload, Some("python"), &Json::Null, &opts()).unwrap_err();
    assert_eq!(e.reason, Reason::InvalidProfileType);
}
