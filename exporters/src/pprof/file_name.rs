//! The `file_name` template: rendering names and recognising the files it
//! made, so retention never touches anything else in the directory.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    ServiceName,
    SampleType,
    ProfileId,
    Time,
}

/// A parsed `file_name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNameTemplate {
    parts: Vec<Part>,
}

/// What the placeholders stand for in one file's name.
#[derive(Debug, Clone, Default)]
pub struct NameValues {
    pub service_name: Option<String>,
    pub sample_type: String,
    pub profile_id: Vec<u8>,
    /// Unix nanoseconds; 0 means "now".
    pub time_unix_nano: u64,
}

const PLACEHOLDERS: &str = "{service.name}, {sample_type}, {profile_id}, {time}";
/// Longest value a placeholder expands to, so names stay under NAME_MAX.
const MAX_VALUE_LEN: usize = 64;

/// Keeps names portable and inside the directory: no separators, no leading
/// dot (temp files start with one), nothing a shell or URL would trip on.
fn sanitize(s: &str, empty: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-+=@,".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(MAX_VALUE_LEN)
        .collect();
    if out.starts_with('.') {
        out.replace_range(..1, "_");
    }
    if out.is_empty() {
        out = empty.to_owned();
    }
    out
}

/// `20261122T033851.827Z`: RFC 3339 UTC without the separators that are
/// awkward in file names.
fn format_time(unix_nano: u64) -> String {
    let t = if unix_nano == 0 {
        SystemTime::now()
    } else {
        UNIX_EPOCH + Duration::from_nanos(unix_nano)
    };
    humantime::format_rfc3339_millis(t)
        .to_string()
        .chars()
        .filter(|&c| c != '-' && c != ':')
        .collect()
}

impl FileNameTemplate {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("must not be empty".into());
        }
        if s.contains('/') || s.contains('\\') || s.contains('\0') {
            return Err(format!(
                "{s:?} must be a file name, without path separators"
            ));
        }
        if s.starts_with('.') {
            return Err(format!(
                "{s:?} must not start with '.' (reserved for temporary files)"
            ));
        }
        if s.ends_with(".tmp") {
            return Err(format!(
                "{s:?} must not end in .tmp (reserved for temporary files)"
            ));
        }
        let mut parts = Vec::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .ok_or_else(|| format!("{s:?}: unclosed '{{'"))?;
            parts.push(match &rest[open + 1..close] {
                "service.name" => Part::ServiceName,
                "sample_type" => Part::SampleType,
                "profile_id" => Part::ProfileId,
                "time" => Part::Time,
                other => {
                    return Err(format!(
                        "unknown placeholder {{{other}}}; use {PLACEHOLDERS}"
                    ))
                }
            });
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("{s:?}: '}}' without '{{'"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        if parts.iter().all(|p| matches!(p, Part::Literal(_))) {
            return Err(format!("{s:?} needs at least one of {PLACEHOLDERS}, or every file would have the same name"));
        }
        Ok(Self { parts })
    }

    /// The name for `v`; `attempt` > 0 adds `-attempt` after the last
    /// placeholder's value, for a name that is already taken.
    pub fn render(&self, v: &NameValues, attempt: u32) -> String {
        let last = self
            .parts
            .iter()
            .rposition(|p| !matches!(p, Part::Literal(_)));
        let mut out = String::new();
        for (i, p) in self.parts.iter().enumerate() {
            match p {
                Part::Literal(l) => out.push_str(l),
                Part::ServiceName => out.push_str(&sanitize(
                    v.service_name.as_deref().unwrap_or(""),
                    "unknown_service",
                )),
                Part::SampleType => out.push_str(&sanitize(&v.sample_type, "unknown")),
                Part::ProfileId => out.push_str(&if v.profile_id.is_empty() {
                    uuid::Uuid::new_v4().simple().to_string()
                } else {
                    sanitize(&hex::encode(&v.profile_id), "unknown")
                }),
                Part::Time => out.push_str(&format_time(v.time_unix_nano)),
            }
            if Some(i) == last && attempt > 0 {
                out.push_str(&format!("-{attempt}"));
            }
        }
        out
    }

    /// Whether `name` could have come from this template: literals in
    /// order, each placeholder standing for any non-empty text.
    pub fn matches(&self, name: &str) -> bool {
        if name.starts_with('.') {
            return false;
        }
        // Glob matching with a placeholder as "one char, then any": the
        // classic single-backtrack algorithm, O(len(name) * len(template)).
        enum Tok {
            Char(char),
            One,
            Any,
        }
        let mut pat = Vec::new();
        for p in &self.parts {
            match p {
                Part::Literal(l) => pat.extend(l.chars().map(Tok::Char)),
                _ => pat.extend([Tok::One, Tok::Any]),
            }
        }
        let text: Vec<char> = name.chars().collect();
        let (mut p, mut t) = (0, 0);
        let mut backtrack: Option<(usize, usize)> = None;
        while t < text.len() {
            match pat.get(p) {
                Some(Tok::Any) => {
                    backtrack = Some((p, t));
                    p += 1;
                }
                Some(Tok::One) => {
                    p += 1;
                    t += 1;
                }
                Some(Tok::Char(c)) if *c == text[t] => {
                    p += 1;
                    t += 1;
                }
                _ => match backtrack {
                    Some((bp, bt)) => {
                        p = bp + 1;
                        t = bt + 1;
                        backtrack = Some((bp, bt + 1));
                    }
                    None => return false,
                },
            }
        }
        pat[p..].iter().all(|tok| matches!(tok, Tok::Any))
    }
}
