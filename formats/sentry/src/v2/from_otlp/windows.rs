//! A Profile's time cut into chunk windows, and its measurements shared
//! among them.

use std::ops::Range;

use super::expand::Point;
use crate::time::secs_to_unix_nanos;
use crate::v2::relay_rules::{exceeds_max_duration, MAX_CHUNK_DURATION_NS};

/// Windows of `points` (sorted by time) no longer than `max_ns` (at most
/// Relay's 66 s), as index ranges.
pub(super) fn windows(points: &[Point], max_ns: u64) -> Vec<Range<usize>> {
    let max = max_ns.clamp(1, MAX_CHUNK_DURATION_NS);
    // A Profile longer than `max` is cut into windows of equal length,
    // not into full ones and a sliver (an SDK's 60 s chunk often runs a
    // few ms over: its tail alone would be too few samples to send).
    let span = points[points.len() - 1].ts - points[0].ts;
    let window = if span < max {
        max
    } else {
        span / (span / max + 1) + 1
    };
    // A window also ends where Relay, subtracting the timestamps as
    // serialized, would find more than 66 s.
    let mut windows = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let start = points[i].ts;
        let end = start.saturating_add(window);
        // A window holds at least its first point, so the loop always
        // advances (an `end` saturated at `u64::MAX` holds none).
        let j = i
            + 1
            + points[i + 1..].partition_point(|p| p.ts < end && !exceeds_max_duration(start, p.ts));
        windows.push(i..j);
        i = j;
    }
    windows
}

/// A chunk's `measurements` (Sentry's JSON: per name a `unit` and `values`
/// of `{timestamp, value}`, timestamps in float seconds) shared among the
/// parts of a chunk cut at `starts` (unix ns, ascending; the first part also
/// takes what comes before, the last what comes after): one per part, `None`
/// where no value falls.
pub(super) fn split_measurements(
    all: &serde_json::value::RawValue,
    starts: &[u64],
) -> Vec<Option<Box<serde_json::value::RawValue>>> {
    use serde_json::{Map, Value};
    let mut parts: Vec<Map<String, Value>> = vec![Map::new(); starts.len()];
    let all: Map<String, Value> = serde_json::from_str(all.get()).unwrap_or_default();
    for (name, mut m) in all {
        let Some(Value::Array(values)) = m.get_mut("values").map(Value::take) else {
            continue;
        };
        for v in values {
            let secs = match v.get("timestamp") {
                Some(Value::Number(n)) => n.as_f64(),
                Some(Value::String(s)) => s.parse().ok(),
                _ => None,
            };
            let Some(t) = secs.and_then(secs_to_unix_nanos) else {
                continue;
            };
            let part = starts.partition_point(|&s| s <= t).saturating_sub(1);
            let entry = parts[part].entry(name.clone()).or_insert_with(|| {
                let mut e = m.clone();
                e["values"] = Value::Array(Vec::new());
                e
            });
            if let Some(Value::Array(vs)) = entry.get_mut("values") {
                vs.push(v);
            }
        }
    }
    parts
        .into_iter()
        .map(|p| {
            (!p.is_empty())
                .then(|| serde_json::value::to_raw_value(&p).ok())
                .flatten()
        })
        .collect()
}
