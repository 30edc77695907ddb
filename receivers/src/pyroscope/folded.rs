//! Folded stacks (`format=folded`, the default of `/ingest`: one
//! `root;...;leaf COUNT` per line, pyroscope-rs and Python 0.8.x) and
//! `format=lines` (one stack per line, each worth 1) into one OTLP Profile.
//! Each distinct frame becomes a Function named by the frame's text with a
//! Location of its own (no address); identical stacks are summed.

use std::borrow::Cow;

use ahash::HashMap;

use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{Line, Location, Profile, Sample, ValueType};

/// The two text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    /// `frame;frame COUNT`.
    Folded,
    /// `frame;frame`, each line one sample.
    Lines,
}

/// The profile the text describes, from the query and the name's suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub sample_type: (String, String),
    pub period_type: Option<(String, String)>,
    pub period: i64,
    pub time_unix_nano: u64,
    pub duration_nano: u64,
}

/// The samples of a text body: folded stacks into `dict`, values summed per
/// stack. Lines are split at `\n` (a trailing `\r` and a final newline are
/// optional; empty lines are skipped), a folded line at its last space (so
/// frames may hold spaces), frames at `;`, root first. A line without a
/// count, or with a count that is not a non-negative integer, refuses the
/// whole body with its line number.
pub fn parse(
    body: &[u8],
    text: Text,
    shape: &Shape,
    dict: &mut DictionaryBuilder,
    sample_attributes: &[i32],
) -> Result<Profile, String> {
    // Valid UTF-8 (the usual case) is checked by the fast validator; other
    // bytes become U+FFFD, as pprof strings do.
    let body: Cow<'_, str> = match std::str::from_utf8(body) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(body),
    };
    let lines = memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1;
    let mut frames: HashMap<&str, i32> = HashMap::default();
    let mut by_stack: HashMap<i32, usize> = HashMap::default();
    by_stack.reserve(lines);
    let mut samples: Vec<Sample> = Vec::with_capacity(lines);
    let mut stack: Vec<i32> = Vec::new();
    for (n, line) in body.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let (frames_text, count) = match text {
            Text::Lines => (line, 1),
            Text::Folded => {
                let Some((f, c)) = line.rsplit_once(' ') else {
                    return Err(format!(
                        "line {}: no count after the stack (expected \"frame;frame COUNT\"): {:?}",
                        n + 1,
                        clip(line)
                    ));
                };
                (f, count(c).map_err(|e| format!("line {}: {e}", n + 1))?)
            }
        };
        stack.clear();
        // Root first in the text, leaf first in OTLP.
        for frame in frames_text.rsplit(';') {
            let loc = match frames.get(frame) {
                Some(&l) => l,
                None => {
                    let f = dict.function_named(frame, "", "", 0);
                    let l = dict.location(Location {
                        lines: vec![Line {
                            function_index: f,
                            line: 0,
                            column: 0,
                        }],
                        ..Default::default()
                    });
                    frames.insert(frame, l);
                    l
                }
            };
            stack.push(loc);
        }
        let stack_index = dict.stack(&stack);
        match by_stack.get(&stack_index) {
            Some(&i) => {
                let v = &mut samples[i].values[0];
                *v = v.saturating_add(count);
            }
            None => {
                by_stack.insert(stack_index, samples.len());
                samples.push(Sample {
                    stack_index,
                    values: vec![count],
                    attribute_indices: sample_attributes.to_vec(),
                    ..Default::default()
                });
            }
        }
    }
    let value_type = |dict: &mut DictionaryBuilder, (t, u): &(String, String)| ValueType {
        type_strindex: dict.string(t),
        unit_strindex: dict.string(u),
    };
    Ok(Profile {
        sample_type: Some(value_type(dict, &shape.sample_type)),
        period_type: shape.period_type.as_ref().map(|p| value_type(dict, p)),
        period: shape.period,
        time_unix_nano: shape.time_unix_nano,
        duration_nano: shape.duration_nano,
        samples,
        ..Default::default()
    })
}

fn count(c: &str) -> Result<i64, String> {
    if c.starts_with('-') {
        return Err(format!("negative count {c:?}"));
    }
    c.parse::<i64>().map_err(|_| {
        if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) {
            format!("the count {c:?} is over 2^63")
        } else {
            format!(
                "the count {:?} is not an integer (expected \"frame;frame COUNT\")",
                clip(c)
            )
        }
    })
}

/// At most 200 characters of a line, for messages.
fn clip(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// What a text body will take once converted, reserved before it is: its
/// strings once more (at most) and a sample, a stack and a location per
/// line.
pub fn estimate(body: &[u8]) -> usize {
    let lines = memchr::memchr_iter(b'\n', body).count() + 1;
    body.len() * 2 + lines * 256
}

/// The profile type the last `.suffix` of an application name gives
/// folded and lines bodies, as Pyroscope's table has them: `(app, type
/// name, unit, period type)`. Other names are CPU profiles of the whole
/// name.
pub fn split_suffix(app: &str) -> (&str, &'static str, &'static str, Option<&'static str>) {
    if let Some((base, suffix)) = app.rsplit_once('.') {
        let known = match suffix {
            "cpu" | "itimer" => Some(("samples", "count", Some("cpu"))),
            "wall" | "seconds" | "milliseconds" | "microseconds" | "nanoseconds" => {
                Some(("samples", "count", Some("wall")))
            }
            "inuse_objects" => Some(("inuse_objects", "count", None)),
            "alloc_objects" => Some(("alloc_objects", "count", None)),
            "inuse_space" => Some(("inuse_space", "bytes", None)),
            "alloc_space" => Some(("alloc_space", "bytes", None)),
            "alloc_in_new_tlab_objects" => Some(("alloc_in_new_tlab_objects", "count", None)),
            "alloc_in_new_tlab_bytes" => Some(("alloc_in_new_tlab_bytes", "bytes", None)),
            "alloc_outside_tlab_objects" => Some(("alloc_outside_tlab_objects", "count", None)),
            "alloc_outside_tlab_bytes" => Some(("alloc_outside_tlab_bytes", "bytes", None)),
            "live" => Some(("live", "count", None)),
            "bytes" => Some(("bytes", "bytes", None)),
            "goroutines" => Some(("goroutines", "count", None)),
            "mutex_count" => Some(("mutex_count", "count", None)),
            "mutex_duration" => Some(("mutex_duration", "nanoseconds", None)),
            "block_count" => Some(("block_count", "count", None)),
            "block_duration" => Some(("block_duration", "nanoseconds", None)),
            "lock_count" => Some(("lock_count", "count", None)),
            "lock_duration" => Some(("lock_duration", "nanoseconds", None)),
            "exceptions" => Some(("exceptions", "count", None)),
            _ => None,
        };
        if let Some((t, u, p)) = known {
            if !base.is_empty() {
                return (base, t, u, p);
            }
        }
    }
    (app, "samples", "count", Some("cpu"))
}

/// The pprof unit of Pyroscope's legacy `units` vocabulary; `None` keeps
/// the unit of the profile type.
pub fn unit_of(units: &str) -> Option<&str> {
    Some(match units {
        "" => return None,
        "samples" | "objects" | "goroutines" | "lock_samples" => "count",
        "lock_nanoseconds" => "nanoseconds",
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use profcol_model::proto::{ProfilesData, ResourceProfiles, ScopeProfiles};

    fn shape() -> Shape {
        Shape {
            sample_type: ("samples".into(), "count".into()),
            period_type: Some(("cpu".into(), "nanoseconds".into())),
            period: 10_000_000,
            time_unix_nano: 1,
            duration_nano: 10,
        }
    }

    fn folded(body: &str, text: Text) -> Result<Vec<(String, i64)>, String> {
        let mut dict = DictionaryBuilder::new();
        let p = parse(body.as_bytes(), text, &shape(), &mut dict, &[])?;
        let data = ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                scope_profiles: vec![ScopeProfiles {
                    profiles: vec![p],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(dict.finish()),
        };
        profcol_model::validate::validate(&data).unwrap();
        let r = profcol_model::resolved::folded(&data);
        Ok(r[0].samples.iter().map(|(k, v)| (k.clone(), *v)).collect())
    }

    #[test]
    fn folded_lines_become_stacks_root_first() {
        let got = folded(
            "threading.py:1002 - _bootstrap;busy.py:16 - leaf_hash 77\r\na;b 2\n\na;b 3\nc 0\nx y;z w 4\n",
            Text::Folded,
        )
        .unwrap();
        assert_eq!(
            got,
            [
                ("a;b".to_owned(), 5),
                ("c".to_owned(), 0),
                (
                    "threading.py:1002 - _bootstrap;busy.py:16 - leaf_hash".to_owned(),
                    77
                ),
                ("x y;z w".to_owned(), 4),
            ]
        );
        let got = folded("a;b\na;b\nc", Text::Lines).unwrap();
        assert_eq!(got, [("a;b".to_owned(), 2), ("c".to_owned(), 1)]);
    }

    #[test]
    fn bad_lines_say_where_and_why() {
        for (body, want) in [
            ("a;b 1\na;b", "line 2: no count"),
            ("a;b -3", "line 1: negative count \"-3\""),
            ("a;b 1.5", "line 1: the count \"1.5\" is not an integer"),
            (
                "a;b 99999999999999999999",
                "line 1: the count \"99999999999999999999\" is over 2^63",
            ),
        ] {
            let e = folded(body, Text::Folded).unwrap_err();
            assert!(e.starts_with(want), "{body}: {e}");
        }
    }

    #[test]
    fn name_suffixes_give_the_profile_type() {
        assert_eq!(
            split_suffix("pyapp.cpu"),
            ("pyapp", "samples", "count", Some("cpu"))
        );
        assert_eq!(
            split_suffix("app.alloc_space"),
            ("app", "alloc_space", "bytes", None)
        );
        assert_eq!(
            split_suffix("my.service"),
            ("my.service", "samples", "count", Some("cpu"))
        );
        assert_eq!(
            split_suffix(".cpu"),
            (".cpu", "samples", "count", Some("cpu"))
        );
        assert_eq!(unit_of("objects"), Some("count"));
        assert_eq!(unit_of(""), None);
    }
}
