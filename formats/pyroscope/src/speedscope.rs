//! speedscope JSON on `/ingest` (`format=speedscope`; py-spy, rbspy and
//! others write it), read as Pyroscope reads it
//! (`pkg/og/convert/speedscope`): the file's `$schema` must be speedscope's,
//! profiles with the same name, type, unit and start are merged, a
//! `sampled` profile's samples (frame indices, root first) weigh their
//! `weights`, and an `evented` profile's open and close events give each
//! stack the time it was on top.
//!
//! Each profile becomes folded text, with its unit:
//! time units as nanoseconds (Pyroscope keeps them in a rate-scaled unit
//! of its own), `bytes` as bytes, `none` as counts.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{Charge, Error, FoldedWriter};

const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Deserialize)]
struct File {
    #[serde(rename = "$schema")]
    schema: String,
    shared: Shared,
    profiles: Vec<Profile>,
}

#[derive(Deserialize)]
struct Shared {
    frames: Vec<Frame>,
}

#[derive(Deserialize)]
struct Frame {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Profile {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    name: String,
    unit: String,
    #[serde(default)]
    start_value: f64,
    #[serde(default)]
    events: Vec<Event>,
    #[serde(default)]
    samples: Vec<Vec<i64>>,
    #[serde(default)]
    weights: Vec<f64>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    frame: i64,
    at: f64,
}

/// What a profile's values count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// `none`: samples.
    Count,
    /// A time unit, converted to nanoseconds.
    Nanoseconds,
    Bytes,
}

/// One speedscope profile as folded text.
#[derive(Debug)]
pub struct Part {
    pub name: String,
    pub unit: Unit,
    pub folded: Vec<u8>,
}

fn bad<E>(what: impl std::fmt::Display) -> Error<E> {
    Error::Malformed(format!("invalid speedscope file: {what}"))
}

/// Nanoseconds per unit, or what else a unit counts.
fn unit<E>(name: &str) -> Result<(Unit, f64), Error<E>> {
    Ok(match name {
        "none" => (Unit::Count, 1.0),
        "nanoseconds" => (Unit::Nanoseconds, 1.0),
        "microseconds" => (Unit::Nanoseconds, 1e3),
        "milliseconds" => (Unit::Nanoseconds, 1e6),
        "seconds" => (Unit::Nanoseconds, 1e9),
        "bytes" => (Unit::Bytes, 1.0),
        other => return Err(bad(format_args!("unknown unit {other:?}"))),
    })
}

/// Each (merged) profile of a speedscope file, in order of its start.
pub fn to_folded<E>(body: &[u8], charge: Charge<'_, E>) -> Result<Vec<Part>, Error<E>> {
    let file: File = serde_json::from_slice(body).map_err(bad)?;
    if file.schema != SCHEMA {
        return Err(bad(format_args!("unknown $schema {:?}", file.schema)));
    }
    // Frame names once, without the newlines folded text cannot hold.
    let names: Vec<String> = file
        .shared
        .frames
        .into_iter()
        .map(|f| f.name.replace(['\n', '\r'], " "))
        .collect();
    // Profiles that share name, type, unit and start are one, as in
    // Pyroscope (their series would otherwise collide).
    let mut merged: BTreeMap<(String, String, String, u64), Profile> = BTreeMap::new();
    for p in file.profiles {
        let key = (
            p.name.clone(),
            p.kind.clone(),
            p.unit.clone(),
            p.start_value.to_bits(),
        );
        match merged.get_mut(&key) {
            Some(m) => {
                m.samples.extend(p.samples);
                m.events.extend(p.events);
                m.weights.extend(p.weights);
            }
            None => {
                merged.insert(key, p);
            }
        }
    }
    let mut profiles: Vec<Profile> = merged.into_values().collect();
    profiles.sort_by(|a, b| a.start_value.total_cmp(&b.start_value));
    let mut parts = Vec::with_capacity(profiles.len());
    for p in profiles {
        parts.push({
            let (unit, scale) = unit(&p.unit)?;
            let mut out = FoldedWriter::new(&mut *charge);
            let mut stack: Vec<u8> = Vec::new();
            let push = |stack: &[u8], value: f64, out: &mut FoldedWriter<'_, E>| {
                let v = (value * scale).round();
                if !stack.is_empty() && v >= 1.0 {
                    out.line(stack, v as u64)?;
                }
                Ok::<_, Error<E>>(())
            };
            let frame = |i: i64| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| names.get(i))
                    .ok_or_else(|| bad(format_args!("frame {i} of {}", names.len())))
            };
            match p.kind.as_str() {
                "sampled" => {
                    if p.samples.len() != p.weights.len() {
                        return Err(bad(format_args!(
                            "{} samples but {} weights",
                            p.samples.len(),
                            p.weights.len()
                        )));
                    }
                    for (sample, &w) in p.samples.iter().zip(&p.weights) {
                        if !w.is_finite() || w < 0.0 {
                            return Err(bad(format_args!("weight {w}")));
                        }
                        stack.clear();
                        for &f in sample {
                            if !stack.is_empty() {
                                stack.push(b';');
                            }
                            stack.extend_from_slice(frame(f)?.as_bytes());
                        }
                        push(&stack, w, &mut out)?;
                    }
                }
                "evented" => {
                    // The open frames and where each one's name starts.
                    let mut open: Vec<(i64, usize)> = Vec::new();
                    let mut last = p.start_value;
                    for e in &p.events {
                        // NaN is out of order too.
                        if e.at.partial_cmp(&last).is_none_or(|o| o.is_lt()) {
                            return Err(bad(format_args!("events out of order at {}", e.at)));
                        }
                        let name = frame(e.frame)?;
                        push(&stack, e.at - last, &mut out)?;
                        match e.kind.as_str() {
                            "O" => {
                                open.push((e.frame, stack.len()));
                                if !stack.is_empty() {
                                    stack.push(b';');
                                }
                                stack.extend_from_slice(name.as_bytes());
                            }
                            "C" => match open.pop() {
                                Some((f, at)) if f == e.frame => stack.truncate(at),
                                _ => {
                                    return Err(bad(format_args!(
                                        "closing frame {} that is not open on top at {}",
                                        e.frame, e.at
                                    )))
                                }
                            },
                            other => return Err(bad(format_args!("event type {other:?}"))),
                        }
                        last = e.at;
                    }
                }
                other => return Err(bad(format_args!("profile type {other:?}"))),
            }
            Part {
                name: p.name,
                unit,
                folded: out.finish()?,
            }
        });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::budget;
    use serde_json::json;

    fn parts(file: serde_json::Value) -> Result<Vec<(String, Unit, String)>, Error<String>> {
        let body = serde_json::to_vec(&file).unwrap();
        let (_, mut charge) = budget(1 << 30);
        Ok(to_folded(&body, &mut charge)?
            .into_iter()
            .map(|p| (p.name, p.unit, String::from_utf8(p.folded).unwrap()))
            .collect())
    }

    fn file(profiles: serde_json::Value) -> serde_json::Value {
        json!({
            "$schema": SCHEMA,
            "shared": {"frames": [{"name": "main"}, {"name": "work (app.py:3)"}, {"name": "gc"}]},
            "profiles": profiles,
        })
    }

    #[test]
    fn sampled_profiles_weigh_their_stacks_and_merge_by_name() {
        let p = |name: &str, samples, weights| {
            json!({"type": "sampled", "name": name, "unit": "milliseconds", "startValue": 0,
                   "endValue": 10, "samples": samples, "weights": weights})
        };
        let got = parts(file(json!([
            p("t1", json!([[0, 1], [0]]), json!([2.5, 1])),
            p("t1", json!([[0, 2]]), json!([4])),
        ])))
        .unwrap();
        assert_eq!(
            got,
            [(
                "t1".into(),
                Unit::Nanoseconds,
                "main;work (app.py:3) 2500000\nmain 1000000\nmain;gc 4000000\n".into()
            )]
        );
    }

    #[test]
    fn evented_profiles_give_each_stack_its_time_on_top() {
        let ev = |t: &str, f: i64, at: f64| json!({"type": t, "frame": f, "at": at});
        let got = parts(file(json!([{
            "type": "evented", "name": "wall", "unit": "none", "startValue": 0, "endValue": 10,
            "events": [ev("O", 0, 0.0), ev("O", 1, 2.0), ev("C", 1, 7.0), ev("C", 0, 10.0)],
        }])))
        .unwrap();
        assert_eq!(got[0].2, "main 2\nmain;work (app.py:3) 5\nmain 3\n");
        assert_eq!(got[0].1, Unit::Count);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let sampled = |samples, weights| {
            file(
                json!([{"type": "sampled", "unit": "none", "samples": samples, "weights": weights}]),
            )
        };
        for (f, want) in [
            (
                json!({"$schema": "x", "shared": {"frames": []}, "profiles": []}),
                "$schema",
            ),
            (sampled(json!([[7]]), json!([1])), "frame 7"),
            (sampled(json!([[-1]]), json!([1])), "frame -1"),
            (sampled(json!([[0]]), json!([])), "weights"),
            (sampled(json!([[0]]), json!([-1])), "weight -1"),
            (
                file(json!([{"type": "evented", "unit": "none", "events": [
                    {"type": "O", "frame": 0, "at": 1}, {"type": "C", "frame": 1, "at": 2}]}])),
                "not open",
            ),
            (
                file(json!([{"type": "sampled", "unit": "furlongs"}])),
                "unit",
            ),
        ] {
            match parts(f) {
                Err(Error::Malformed(m)) => assert!(m.contains(want), "{want}: {m}"),
                other => panic!("{want}: {other:?}"),
            }
        }
    }

    /// A sample a million frames deep, repeated: the text it expands to is
    /// refused at the memory budget.
    #[test]
    fn a_deep_stack_stops_at_the_memory_budget() {
        let deep: Vec<i64> = vec![1; 1_000_000];
        let f = file(json!([{"type": "sampled", "unit": "none",
            "samples": [deep.clone(), deep.clone(), deep], "weights": [1, 1, 1]}]));
        let body = serde_json::to_vec(&f).unwrap();
        let (held, mut charge) = budget(32 << 20);
        let e = to_folded(&body, &mut charge).unwrap_err();
        assert!(held.get() <= 32 << 20);
        assert!(matches!(e, Error::Budget(_)), "{e:?}");
    }
}
