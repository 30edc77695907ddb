//! Stack expectations of `profcol test`. A string is the exact folded line
//! (`root;...;leaf [attributes] VALUE`); a map is a form written by hand
//! against real 30-frame stacks: a leaf-side suffix, a root-side prefix,
//! consecutive frames anywhere or one function, each frame matched by its
//! function name, with a value or a share of its sample type's total.

use std::fmt;

use serde::Deserialize;

/// One entry of `stacks:` or `absent_stacks:`.
#[derive(Debug, Deserialize)]
#[serde(try_from = "serde_yaml_ng::Value")]
pub struct StackSpec {
    /// What the user wrote, for messages.
    text: String,
    how: How,
    frames: Vec<String>,
    /// `key` or `key=value` the sample must have (it may have more).
    attributes: Vec<String>,
    value: Option<i64>,
    share: Option<Share>,
    /// `type` or `type/unit`; lines of other types never match.
    sample_type: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// The whole stack, each frame spelled exactly (the string form).
    Exact,
    /// The whole stack, root to leaf.
    Stack,
    EndsWith,
    StartsWith,
    Contains,
}

#[derive(Debug, Clone, Copy)]
struct Share {
    op: Op,
    percent: f64,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Ge,
    Gt,
    Le,
    Lt,
}

impl Share {
    fn holds(self, share: f64) -> bool {
        match self.op {
            Op::Ge => share >= self.percent,
            Op::Gt => share > self.percent,
            Op::Le => share <= self.percent,
            Op::Lt => share < self.percent,
        }
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
        };
        write!(f, "{op} {}%", self.percent)
    }
}

/// `>= 20%`, `< 0.5 %`.
fn parse_share(s: &str) -> Result<Share, String> {
    let t = s.trim();
    let (op, rest) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
        .into_iter()
        .find_map(|(p, op)| t.strip_prefix(p).map(|r| (op, r)))
        .ok_or_else(|| format!("share {s:?} needs a comparison first: \">= 20%\", \"< 5%\""))?;
    let num = rest.trim().strip_suffix('%').ok_or_else(|| {
        format!("share {s:?} is a percentage of the sample type's total: end it with %")
    })?;
    let percent: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("share {s:?}: {num:?} is not a number"))?;
    if !(0.0..=100.0).contains(&percent) {
        return Err(format!("share {s:?} must lie between 0% and 100%"));
    }
    Ok(Share { op, percent })
}

/// `a;b [t=1] 42` -> (`a;b [t=1]`, Some(42)).
pub fn split_value(entry: &str) -> (&str, Option<i64>) {
    let entry = entry.trim();
    if let Some((head, last)) = entry.rsplit_once(' ') {
        if let Ok(v) = last.parse() {
            return (head.trim_end(), Some(v));
        }
    }
    (entry, None)
}

/// The `k=v` items of a folded line's `[...]`.
pub fn sample_attrs(line: &str) -> Vec<&str> {
    let Some(start) = line.find(" [") else {
        return Vec::new();
    };
    let rest = &line[start + 2..];
    let end = rest.rfind(']').unwrap_or(rest.len());
    rest[..end].split(", ").collect()
}

/// `want` is `key` or `key=value`; a value may carry ` (unit)`.
pub fn attr_matches(attr: &str, want: &str) -> bool {
    if want.contains('=') {
        attr == want || attr.strip_prefix(want).is_some_and(|r| r.starts_with(" ("))
    } else {
        attr.split_once('=').is_some_and(|(k, _)| k == want)
    }
}

/// The frames of a folded line, root first.
pub fn frames_of(line: &str) -> Vec<&str> {
    let stack = line.split_once(" [").map_or(line, |(s, _)| s);
    let stack = stack.split_once(" {").map_or(stack, |(s, _)| s);
    stack.split(';').collect()
}

/// A frame written by hand matches a received one spelled the same, or
/// ending in it after a separator: `leafHash` matches `main.leafHash`,
/// `Server.handle` matches `com.example.Server.handle`, and `leaf_hash`
/// matches Pyroscope's `busy.py:16 - leaf_hash`.
fn frame_matches(got: &str, want: &str) -> bool {
    got == want
        || got.strip_suffix(want).is_some_and(|head| {
            head.ends_with(['.', ':', '/', '\\', ' ', '$', '>', ')', '!']) && !want.is_empty()
        })
}

impl TryFrom<serde_yaml_ng::Value> for StackSpec {
    type Error = String;

    fn try_from(v: serde_yaml_ng::Value) -> Result<Self, String> {
        use serde_yaml_ng::Value;
        match v {
            Value::String(s) => {
                let (pattern, value) = split_value(&s);
                let stack = pattern.split_once(" [").map_or(pattern, |(s, _)| s);
                Ok(StackSpec {
                    frames: stack.split(';').map(str::to_owned).collect(),
                    attributes: sample_attrs(pattern)
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                    how: How::Exact,
                    value,
                    share: None,
                    sample_type: None,
                    text: s,
                })
            }
            Value::Mapping(m) => {
                let text = serde_yaml_ng::to_string(&m)
                    .unwrap_or_default()
                    .trim()
                    .replace('\n', ", ");
                let mut spec = StackSpec {
                    text,
                    how: How::Exact,
                    frames: Vec::new(),
                    attributes: Vec::new(),
                    value: None,
                    share: None,
                    sample_type: None,
                };
                let mut forms = Vec::new();
                for (k, v) in m {
                    let key = k.as_str().ok_or("a stack's keys are strings")?.to_owned();
                    let string = |v: &Value| {
                        v.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| format!("{key}: expected a string"))
                    };
                    let how = match key.as_str() {
                        "stack" => Some(How::Stack),
                        "ends_with" => Some(How::EndsWith),
                        "starts_with" => Some(How::StartsWith),
                        "contains" | "function" => Some(How::Contains),
                        _ => None,
                    };
                    if let Some(how) = how {
                        let s = string(&v)?;
                        let frames: Vec<String> = if key == "function" {
                            vec![s.trim().to_owned()]
                        } else {
                            s.split(';').map(|f| f.trim().to_owned()).collect()
                        };
                        if frames.iter().any(String::is_empty) {
                            return Err(format!("{key}: {s:?} has an empty frame"));
                        }
                        spec.how = how;
                        spec.frames = frames;
                        forms.push(key);
                        continue;
                    }
                    match key.as_str() {
                        "attributes" => {
                            spec.attributes = serde_yaml_ng::from_value(v)
                                .map_err(|_| "attributes: expected a list of key or key=value")?
                        }
                        "value" => {
                            spec.value = Some(v.as_i64().ok_or("value: expected an integer")?)
                        }
                        "share" => spec.share = Some(parse_share(&string(&v)?)?),
                        "sample_type" => spec.sample_type = Some(string(&v)?),
                        _ => {
                            return Err(format!(
                                "unknown key {key:?} in a stack: expected one of stack, ends_with, starts_with, contains, function, attributes, value, share, sample_type"
                            ))
                        }
                    }
                }
                match forms.len() {
                    1 => Ok(spec),
                    0 => Err(format!(
                        "{}: a stack needs one of stack, ends_with, starts_with, contains, function",
                        spec.text
                    )),
                    _ => Err(format!(
                        "{}: a stack takes one of {} (not several)",
                        spec.text,
                        forms.join(", ")
                    )),
                }
            }
            other => Err(format!(
                "a stack is a folded line or a map, got {}",
                serde_yaml_ng::to_string(&other).unwrap_or_default().trim()
            )),
        }
    }
}

/// One received folded line with its profile's sample type.
pub struct Line<'a> {
    pub sample_type: &'a str,
    pub line: &'a str,
    pub value: i64,
    frames: Vec<&'a str>,
}

impl<'a> Line<'a> {
    pub fn new(sample_type: &'a str, line: &'a str, value: i64) -> Self {
        Line {
            sample_type,
            line,
            value,
            frames: frames_of(line),
        }
    }
}

fn type_matches(got: &str, want: &str) -> bool {
    got == want || got.split('/').next() == Some(want)
}

impl StackSpec {
    fn frame(&self, got: &str, want: &str) -> bool {
        if self.how == How::Exact {
            got == want
        } else {
            frame_matches(got, want)
        }
    }

    fn matches_frames(&self, got: &[&str]) -> bool {
        let want = &self.frames;
        let eq = |g: &[&str]| g.iter().zip(want).all(|(g, w)| self.frame(g, w));
        match self.how {
            How::Exact | How::Stack => got.len() == want.len() && eq(got),
            How::EndsWith => got.len() >= want.len() && eq(&got[got.len() - want.len()..]),
            How::StartsWith => got.len() >= want.len() && eq(&got[..want.len()]),
            How::Contains => got.windows(want.len()).any(eq),
        }
    }

    fn matches(&self, l: &Line) -> bool {
        self.sample_type
            .as_deref()
            .is_none_or(|t| type_matches(l.sample_type, t))
            && self.matches_frames(&l.frames)
            && {
                let have = sample_attrs(l.line);
                self.attributes
                    .iter()
                    .all(|w| have.iter().any(|a| attr_matches(a, w)))
            }
    }

    /// The matching lines' total and its share of their sample type's total
    /// (percent), or why the share cannot be taken.
    fn measure(&self, lines: &[Line], matched: &[&Line]) -> (i64, Result<f64, String>) {
        let total: i64 = matched.iter().map(|l| l.value).sum();
        let mut types: Vec<&str> = matched.iter().map(|l| l.sample_type).collect();
        types.sort_unstable();
        types.dedup();
        let share = match types.as_slice() {
            [t] => {
                let all: i64 = lines
                    .iter()
                    .filter(|l| l.sample_type == *t)
                    .map(|l| l.value)
                    .sum();
                Ok(if all == 0 {
                    0.0
                } else {
                    100.0 * total as f64 / all as f64
                })
            }
            _ => Err(format!(
                "it matches samples of several types ({}): name one with sample_type",
                types.join(", ")
            )),
        };
        (total, share)
    }

    /// Failures of this entry under `stacks:`.
    pub fn check_present(&self, lines: &[Line]) -> Option<String> {
        let matched: Vec<&Line> = lines.iter().filter(|l| self.matches(l)).collect();
        if matched.is_empty() {
            return Some(format!("missing stack {self}{}", self.nearest(lines)));
        }
        let (total, share) = self.measure(lines, &matched);
        let sum_of = if matched.len() > 1 {
            format!(" (sum of {} lines)", matched.len())
        } else {
            String::new()
        };
        if let Some(v) = self.value.filter(|v| *v != total) {
            if let (Err(why), false) = (&share, self.how == How::Exact) {
                return Some(format!("stack {self}: no single total: {why}"));
            }
            return Some(format!("stack {self}: expected {v}, got {total}{sum_of}"));
        }
        if let Some(want) = self.share {
            return match share {
                Ok(s) if want.holds(s) => None,
                Ok(s) => Some(format!(
                    "stack {self}: expected a share {want}, got {s:.2}% ({total}{sum_of}){}",
                    self.nearest(lines)
                )),
                Err(why) => Some(format!("stack {self}: no share: {why}")),
            };
        }
        None
    }

    /// Failures of this entry under `absent_stacks:`: a matching line, or
    /// with `value` or `share`, matching lines whose total meets it.
    pub fn check_absent(&self, lines: &[Line]) -> Option<String> {
        let matched: Vec<&Line> = lines.iter().filter(|l| self.matches(l)).collect();
        if matched.is_empty() {
            return None;
        }
        let got = || {
            matched
                .iter()
                .take(5)
                .map(|l| format!("\n    got: {} {}", l.line, l.value))
                .collect::<String>()
        };
        if self.how == How::Exact {
            // A line per match, as before: with a value, the line's own.
            let bad: Vec<&&Line> = matched
                .iter()
                .filter(|l| self.value.is_none_or(|v| v == l.value))
                .collect();
            return bad
                .first()
                .map(|l| format!("stack {self} must be absent, got {} {}", l.line, l.value));
        }
        let (total, share) = self.measure(lines, &matched);
        let held = match (self.value, self.share) {
            (Some(v), _) if v != total => false,
            (_, Some(want)) => match share {
                Ok(s) if want.holds(s) => true,
                Ok(_) => false,
                Err(why) => return Some(format!("stack {self}: no share: {why}")),
            },
            _ => true,
        };
        held.then(|| format!("stack {self} must be absent, got {total}{}", got()))
    }

    /// The received stacks most like this one, for a failure message: most
    /// frames in common at the leaf end, then most frames found anywhere.
    fn nearest(&self, lines: &[Line]) -> String {
        let mut scored: Vec<((usize, usize), &Line)> = lines
            .iter()
            .map(|l| {
                let leaf = l
                    .frames
                    .iter()
                    .rev()
                    .zip(self.frames.iter().rev())
                    .take_while(|(g, w)| frame_matches(g, w))
                    .count();
                let anywhere = self
                    .frames
                    .iter()
                    .filter(|w| l.frames.iter().any(|g| frame_matches(g, w)))
                    .count();
                ((leaf, anywhere), l)
            })
            .filter(|(s, _)| *s != (0, 0))
            .collect();
        if scored.is_empty() {
            return format!(
                " ({} stacks received, none with any of its frames)",
                lines.len()
            );
        }
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.value.cmp(&a.1.value)));
        let mut out = String::from("; nearest received:");
        for (_, l) in scored.iter().take(5) {
            out.push_str(&format!("\n    {} {} ({})", l.line, l.value, l.sample_type));
        }
        out
    }
}

impl fmt::Display for StackSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.how {
            How::Exact => {
                let (pattern, _) = split_value(&self.text);
                write!(f, "{pattern:?}")
            }
            _ => write!(f, "{{{}}}", self.text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> StackSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn err(yaml: &str) -> String {
        serde_yaml_ng::from_str::<StackSpec>(yaml)
            .unwrap_err()
            .to_string()
    }

    /// A Go CPU profile and its allocation profile, as `folded` prints them.
    fn lines() -> Vec<Line<'static>> {
        vec![
            Line::new("cpu/nanoseconds", "runtime.main;main.main;main.serve;main.(*Server).handle;encoding/json.Marshal", 60),
            Line::new("cpu/nanoseconds", "runtime.main;main.main;main.serve;main.(*Server).handle;main.leafHash [thread.name=w1]", 30),
            Line::new("cpu/nanoseconds", "runtime.gcBgMarkWorker;runtime.gcDrain", 10),
            Line::new("alloc_space/bytes", "runtime.main;main.main;main.serve;main.(*Server).handle;encoding/json.Marshal", 4096),
            Line::new("cpu/nanoseconds", "busy.py:43 - <module>;busy.py:16 - leaf_hash", 5),
        ]
    }

    #[test]
    fn exact_lines_match_as_before() {
        let l = lines();
        assert!(spec("\"runtime.gcBgMarkWorker;runtime.gcDrain 10\"")
            .check_present(&l)
            .is_none());
        // Exact frames only: a function name alone is not the frame.
        let m = spec("\"gcBgMarkWorker;gcDrain\"")
            .check_present(&l)
            .unwrap();
        assert!(m.starts_with("missing stack"), "{m}");
        assert!(
            m.contains("runtime.gcBgMarkWorker;runtime.gcDrain 10"),
            "nearest shown: {m}"
        );
    }

    #[test]
    fn hand_written_forms_match_frames_by_function_name() {
        let l = lines();
        for ok in [
            "{ends_with: \"handle;leafHash\", value: 30}",
            "{ends_with: \"(*Server).handle;leafHash\", attributes: [thread.name=w1]}",
            "{starts_with: \"runtime.main;main\", sample_type: cpu, value: 90}",
            "{contains: \"serve;(*Server).handle\", sample_type: cpu, value: 90}",
            "{function: json.Marshal, sample_type: alloc_space, value: 4096}",
            "{function: leaf_hash, value: 5}",
            "{stack: \"gcBgMarkWorker;gcDrain\"}",
            // 90 of cpu's 105.
            "{function: handle, sample_type: cpu, share: \">= 85%\"}",
            "{function: gcDrain, sample_type: cpu/nanoseconds, share: \"< 10%\"}",
        ] {
            assert_eq!(spec(ok).check_present(&l), None, "{ok}");
        }
        // A frame name must end at a separator: `Hash` is not `leafHash`.
        assert!(spec("{function: Hash}").check_present(&l).is_some());
        assert!(spec("{ends_with: \"serve\"}").check_present(&l).is_some());
    }

    #[test]
    fn shares_and_values_say_what_they_got() {
        let l = lines();
        let m = spec("{function: gcDrain, share: \">= 20%\"}")
            .check_present(&l)
            .unwrap();
        assert!(m.contains("expected a share >= 20%, got 9.52% (10)"), "{m}");
        let m = spec("{function: handle, share: \">= 20%\"}")
            .check_present(&l)
            .unwrap();
        assert!(
            m.contains("several types (alloc_space/bytes, cpu/nanoseconds)"),
            "{m}"
        );
        let m = spec("{function: handle, value: 60}")
            .check_present(&l)
            .unwrap();
        assert!(
            m.contains("no single total: it matches samples of several types"),
            "{m}"
        );
        let m = spec("{function: handle, sample_type: cpu, value: 1}")
            .check_present(&l)
            .unwrap();
        assert!(m.contains("expected 1, got 90 (sum of 2 lines)"), "{m}");
        let m = spec("{ends_with: \"handle;leafHsah\"}")
            .check_present(&l)
            .unwrap();
        assert!(
            m.contains(
                "nearest received:\n    runtime.main;main.main;main.serve;main.(*Server).handle;"
            ),
            "{m}"
        );
    }

    #[test]
    fn absent_forms_fail_only_when_they_hold() {
        let l = lines();
        assert_eq!(spec("{function: nowhere}").check_absent(&l), None);
        assert!(spec("{function: gcDrain}").check_absent(&l).is_some());
        assert_eq!(
            spec("{function: gcDrain, sample_type: cpu, share: \">= 10%\"}").check_absent(&l),
            None
        );
        assert!(
            spec("{function: gcDrain, sample_type: cpu, share: \">= 5%\"}")
                .check_absent(&l)
                .is_some()
        );
        assert!(spec("\"runtime.gcBgMarkWorker;runtime.gcDrain 10\"")
            .check_absent(&l)
            .is_some());
        assert_eq!(
            spec("\"runtime.gcBgMarkWorker;runtime.gcDrain 11\"").check_absent(&l),
            None
        );
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        assert!(err("{share: \">= 1%\"}").contains("needs one of stack, ends_with"));
        assert!(err("{function: a, contains: b}").contains("not several"));
        assert!(err("{function: a, share: \"20%\"}").contains("needs a comparison"));
        assert!(err("{function: a, share: \">= 20\"}").contains("end it with %"));
        assert!(err("{function: a, share: \">= 120%\"}").contains("between 0% and 100%"));
        assert!(err("{function: a, wieght: 1}").contains("unknown key \"wieght\""));
        assert!(err("{ends_with: \"a;;b\"}").contains("empty frame"));
        assert!(err("[a]").contains("a folded line or a map"));
    }

    #[test]
    fn attribute_helpers() {
        assert_eq!(split_value("a;b [t=1] 42"), ("a;b [t=1]", Some(42)));
        assert_eq!(split_value("a;b"), ("a;b", None));
        assert_eq!(
            sample_attrs("a;b [t=1, u=x y] {trace_id=0}"),
            ["t=1", "u=x y"]
        );
        assert!(attr_matches("thread.id=5", "thread.id"));
        assert!(attr_matches("size=5 (By)", "size=5"));
        assert!(!attr_matches("thread.idx=5", "thread.id"));
        assert_eq!(frames_of("a;b [t=1] {trace_id=0}"), ["a", "b"]);
        assert_eq!(frames_of("a;b {trace_id=0}"), ["a", "b"]);
    }
}
