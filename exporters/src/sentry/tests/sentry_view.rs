//! A chunk as Sentry sees it, read independently of the exporter through
//! `serde_json::Value`: samples with their thread and resolved frames.

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// (function, module, filename, abs_path, lineno, in_app)
pub(super) type FrameKey = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u64>,
    Option<bool>,
);
/// (timestamp in µs, thread id, frames leaf first)
pub(super) type Sample = (u64, String, Vec<FrameKey>);

fn text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An empty string means "unknown" to Sentry, as an absent one does; OTLP
/// cannot tell them apart (string index 0 is `""`).
fn known(v: &Json) -> Option<String> {
    text(v).filter(|s| !s.is_empty())
}

fn index(v: &Json) -> usize {
    match v {
        Json::Number(n) => n.as_u64().unwrap() as usize,
        Json::String(s) => s.parse().unwrap(),
        other => panic!("not an index: {other}"),
    }
}

fn frame(f: &Json) -> FrameKey {
    (
        f.get("function").and_then(known),
        f.get("module").and_then(known),
        f.get("filename").and_then(known),
        f.get("abs_path").and_then(known),
        // Line 0 is "no line" in Sentry and in OTLP alike.
        f.get("lineno")
            .and_then(|l| l.as_u64().or_else(|| l.as_str()?.parse().ok()))
            .filter(|&l| l > 0),
        f.get("in_app").and_then(Json::as_bool),
    )
}

/// Samples sorted by thread, stack and time. With `relay`, as Relay keeps
/// them: threads with at most one non-idle sample are dropped.
pub(super) fn samples(chunk: &Json, relay: bool) -> Vec<Sample> {
    let p = &chunk["profile"];
    let frames: Vec<FrameKey> = p["frames"].as_array().unwrap().iter().map(frame).collect();
    let stacks: Vec<Vec<FrameKey>> = p["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s.as_array()
                .unwrap()
                .iter()
                .map(|f| frames[index(f)].clone())
                .collect()
        })
        .collect();
    let mut out: Vec<Sample> = p["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let secs = s["timestamp"]
                .as_f64()
                .or_else(|| s["timestamp"].as_str()?.parse().ok())
                .unwrap();
            (
                (secs * 1e6).round() as u64,
                text(&s["thread_id"]).unwrap(),
                stacks[index(&s["stack_id"])].clone(),
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
    out.sort_by(|a, b| (&a.1, &a.2, a.0).cmp(&(&b.1, &b.2, b.0)));
    out
}

/// Thread id -> name from `thread_metadata`.
pub(super) fn thread_names(chunk: &Json) -> BTreeMap<String, String> {
    chunk["profile"]["thread_metadata"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(id, t)| Some((id.clone(), t.get("name")?.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts the same samples, timestamps within a microsecond.
pub(super) fn assert_same_samples(got: &[Sample], want: &[Sample], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of samples");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            (&g.1, &g.2),
            (&w.1, &w.2),
            "{what}: sample {i} thread and stack"
        );
        assert!(
            g.0.abs_diff(w.0) <= 1,
            "{what}: sample {i} at {} µs, want {} µs",
            g.0,
            w.0
        );
    }
}
