//! Test helpers: fixtures, a readable view of converted data, and a
//! Sentry-side model of samples read independently (through
//! `serde_json::Value`) from the payloads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::envelope;
use profcol_model::proto::{any_value::Value, AnyValue, ProfilesData};

pub(super) use profcol_model::testing::{fixture, fixtures_dir as fixtures};

/// Every recorded envelope under `tests/fixtures/sentry-*`.
pub(super) fn recorded_envelopes() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "envelope") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("sentry-")
        {
            walk(&p, &mut out);
        }
    }
    out.sort();
    assert!(out.len() >= 4, "recorded envelopes missing: {out:?}");
    out
}

/// The payload of the first item of `ty` in a recorded envelope.
pub(super) fn item_payload(rel: &str, ty: &str) -> (Vec<u8>, Option<String>) {
    let bytes = fixture(rel);
    let env = envelope::parse(&bytes).unwrap();
    let item = env.items.iter().find(|i| i.item_type() == ty).unwrap();
    (item.payload.to_vec(), item.platform().map(str::to_owned))
}

pub(super) fn python_chunk() -> Vec<u8> {
    item_payload("sentry-python/manual/0001.envelope", "profile_chunk").0
}

pub(super) fn node_chunk() -> Vec<u8> {
    item_payload("sentry-node/manual/0001.envelope", "profile_chunk").0
}

pub(super) fn show(v: &AnyValue) -> String {
    match &v.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// Resource attributes of the first resource, as text.
pub(super) fn resource_attrs(d: &ProfilesData) -> BTreeMap<String, String> {
    d.resource_profiles[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|kv| (kv.key.clone(), show(kv.value.as_ref().unwrap())))
        .collect()
}

/// Attributes named by `indices`.
pub(super) fn attr_values<'d>(
    d: &'d ProfilesData,
    indices: &[i32],
) -> BTreeMap<String, &'d AnyValue> {
    let dict = d.dictionary.as_ref().unwrap();
    indices
        .iter()
        .map(|&i| {
            let a = &dict.attribute_table[i as usize];
            (
                dict.string_table[a.key_strindex as usize].clone(),
                a.value.as_ref().unwrap(),
            )
        })
        .collect()
}

/// Attributes named by `indices`, as text.
pub(super) fn attrs(d: &ProfilesData, indices: &[i32]) -> BTreeMap<String, String> {
    attr_values(d, indices)
        .into_iter()
        .map(|(k, v)| (k, show(v)))
        .collect()
}

pub(super) fn profile(d: &ProfilesData) -> &profcol_model::proto::Profile {
    &d.resource_profiles[0].scope_profiles[0].profiles[0]
}

/// Folded stacks (root first) with the thread name, counted in
/// timestamps: `Thread._bootstrap;Thread.run;work [MainThread] 42`.
pub(super) fn folded(d: &ProfilesData) -> BTreeMap<String, usize> {
    let dict = d.dictionary.as_ref().unwrap();
    let mut out = BTreeMap::new();
    for rp in &d.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                for s in &p.samples {
                    let stack = &dict.stack_table[s.stack_index as usize];
                    let mut names: Vec<&str> = Vec::new();
                    for &l in stack.location_indices.iter().rev() {
                        for line in dict.location_table[l as usize].lines.iter().rev() {
                            let f = &dict.function_table[line.function_index as usize];
                            names.push(&dict.string_table[f.name_strindex as usize]);
                        }
                    }
                    let a = attrs(d, &s.attribute_indices);
                    let thread = a.get("thread.name").cloned().unwrap_or_else(|| {
                        format!("tid {}", a.get("thread.id").cloned().unwrap_or_default())
                    });
                    *out.entry(format!("{} [{thread}]", names.join(";")))
                        .or_default() += s.timestamps_unix_nano.len();
                }
            }
        }
    }
    out
}

/// Checks the dictionary rules every consumer relies on: zero values at
/// index 0 and every index in range.
pub(super) fn check_dictionary(d: &ProfilesData) {
    let dict = d.dictionary.as_ref().expect("dictionary");
    assert_eq!(dict.string_table[0], "");
    assert_eq!(dict.stack_table[0], Default::default());
    assert_eq!(dict.location_table[0], Default::default());
    assert_eq!(dict.function_table[0], Default::default());
    assert_eq!(dict.mapping_table[0], Default::default());
    assert_eq!(dict.attribute_table[0], Default::default());
    assert_eq!(dict.link_table[0], Default::default());
    let s = |i: i32| assert!((i as usize) < dict.string_table.len(), "string {i}");
    let a = |i: i32| assert!((i as usize) < dict.attribute_table.len(), "attribute {i}");
    for f in &dict.function_table {
        s(f.name_strindex);
        s(f.system_name_strindex);
        s(f.filename_strindex);
    }
    for m in &dict.mapping_table {
        s(m.filename_strindex);
        m.attribute_indices.iter().copied().for_each(a);
    }
    for l in &dict.location_table {
        assert!((l.mapping_index as usize) < dict.mapping_table.len());
        for line in &l.lines {
            assert!((line.function_index as usize) < dict.function_table.len());
        }
        l.attribute_indices.iter().copied().for_each(a);
    }
    for st in &dict.stack_table {
        for &l in &st.location_indices {
            assert!(l > 0 && (l as usize) < dict.location_table.len());
        }
    }
    for at in &dict.attribute_table {
        s(at.key_strindex);
        s(at.unit_strindex);
    }
    for rp in &d.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                p.attribute_indices.iter().copied().for_each(a);
                for smp in &p.samples {
                    assert!((smp.stack_index as usize) < dict.stack_table.len());
                    assert!((smp.link_index as usize) < dict.link_table.len());
                    smp.attribute_indices.iter().copied().for_each(a);
                    for &ts in &smp.timestamps_unix_nano {
                        assert!(ts >= p.time_unix_nano && ts < p.time_unix_nano + p.duration_nano);
                    }
                }
            }
        }
    }
}

/// What Sentry shows of a frame: (function, module, filename, abs_path,
/// lineno, in_app). Empty strings and line 0 read as absent, as they do to
/// Sentry (and OTLP's 0 means unset).
pub(super) type FrameKey = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u64>,
    Option<bool>,
);

/// One Sentry sample: (microseconds, thread id, frames leaf first).
pub(super) type SentrySample = (u64, String, Vec<FrameKey>);

fn json_str(v: Option<&Json>) -> Option<String> {
    v.and_then(Json::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

pub(super) fn json_frame(f: &Json) -> FrameKey {
    (
        json_str(f.get("function")),
        json_str(f.get("module")),
        json_str(f.get("filename")),
        json_str(f.get("abs_path")),
        f.get("lineno").and_then(Json::as_u64).filter(|l| *l > 0),
        f.get("in_app").and_then(Json::as_bool),
    )
}

fn json_u64(v: &Json) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| v.as_str().unwrap().parse().unwrap())
}

fn json_thread(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Samples of a v2 chunk JSON. With `relay`, after Relay's normalization
/// (threads with at most one non-idle sample removed).
pub(super) fn chunk_samples(payload: &[u8], relay: bool) -> Vec<SentrySample> {
    let v: Json = serde_json::from_slice(payload).unwrap();
    let p = &v["profile"];
    let frames = p["frames"].as_array().unwrap();
    let stacks = p["stacks"].as_array().unwrap();
    let stack_of = |id: usize| -> Vec<FrameKey> {
        stacks[id]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| json_frame(&frames[json_u64(f) as usize]))
            .collect()
    };
    let mut out: Vec<SentrySample> = p["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let us = (s["timestamp"].as_f64().unwrap() * 1e6).round() as u64;
            (
                us,
                json_thread(&s["thread_id"]),
                stack_of(json_u64(&s["stack_id"]) as usize),
            )
        })
        .collect();
    if relay {
        let mut non_idle: BTreeMap<String, usize> = BTreeMap::new();
        for (_, t, st) in &out {
            if !st.is_empty() {
                *non_idle.entry(t.clone()).or_default() += 1;
            }
        }
        out.retain(|(_, t, _)| non_idle.get(t).is_some_and(|&n| n > 1));
    }
    out.sort();
    out
}

/// Samples of a v1 profile JSON: start (`timestamp`) plus
/// `elapsed_since_start_ns`, all samples (no transaction window applied).
pub(super) fn v1_samples(payload: &[u8]) -> Vec<SentrySample> {
    let v: Json = serde_json::from_slice(payload).unwrap();
    let start = crate::time::parse_rfc3339(v["timestamp"].as_str().unwrap()).unwrap();
    let p = &v["profile"];
    let frames = p["frames"].as_array().unwrap();
    let stacks = p["stacks"].as_array().unwrap();
    let mut out: Vec<SentrySample> = p["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let stack = stacks[json_u64(&s["stack_id"]) as usize]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| json_frame(&frames[json_u64(f) as usize]))
                .collect();
            let ns = start + json_u64(&s["elapsed_since_start_ns"]);
            (ns / 1000, json_thread(&s["thread_id"]), stack)
        })
        .collect();
    out.sort();
    out
}

/// Thread names of a chunk JSON, for the given thread ids.
pub(super) fn chunk_thread_names(payload: &[u8]) -> BTreeMap<String, String> {
    let v: Json = serde_json::from_slice(payload).unwrap();
    v["profile"]["thread_metadata"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(id, t)| Some((id.clone(), t.get("name")?.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Samples of converted OTLP, read the way a Sentry exporter must.
pub(super) fn otlp_samples(d: &ProfilesData) -> Vec<SentrySample> {
    let dict = d.dictionary.as_ref().unwrap();
    let string = |i: i32| dict.string_table[i as usize].clone();
    let mut out = Vec::new();
    for s in &profile(d).samples {
        let mut frames = Vec::new();
        for &l in &dict.stack_table[s.stack_index as usize].location_indices {
            let loc = &dict.location_table[l as usize];
            let la = attr_values(d, &loc.attribute_indices);
            let text = |k: &str| la.get(k).map(|v| show(v));
            for line in &loc.lines {
                let f = &dict.function_table[line.function_index as usize];
                let file = Some(string(f.filename_strindex)).filter(|s| !s.is_empty());
                let pick = |attr: Option<String>| match attr {
                    Some(a) => Some(a).filter(|a| !a.is_empty()),
                    None => file.clone(),
                };
                frames.push((
                    Some(string(f.name_strindex)).filter(|s| !s.is_empty()),
                    text("sentry.module"),
                    pick(text("sentry.filename")),
                    pick(text("sentry.abs_path")),
                    u64::try_from(line.line).ok().filter(|l| *l > 0),
                    text("sentry.in_app").map(|b| b == "true"),
                ));
            }
            // A frame known by its address alone (a native SDK's).
            if loc.lines.is_empty() {
                let in_app = text("sentry.in_app").map(|b| b == "true");
                frames.push((None, None, None, None, None, in_app));
            }
        }
        let thread = attrs(d, &s.attribute_indices)
            .get("thread.id")
            .cloned()
            .unwrap_or_default();
        for &ts in &s.timestamps_unix_nano {
            out.push((ts / 1000, thread.clone(), frames.clone()));
        }
    }
    out.sort();
    out
}
