//! Checking what an exporter received against a test's expectations.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use profcol_model::resolved::{folded, ResolvedProfile};
use profcol_model::ProfileBatch;

use super::spec::Expectation;

/// What one exporter ended up with.
pub struct Received {
    pub batches: Vec<Arc<ProfileBatch>>,
    pub sentry_chunks: Option<u64>,
    pub pprof_files: Option<u64>,
}

pub struct Outcome {
    pub failures: Vec<String>,
    /// Snapshots that `--update` rewrote.
    pub updated: Vec<String>,
}

pub fn check(
    exporter: &str,
    got: &Received,
    want: &Expectation,
    base: &Path,
    update: bool,
) -> Outcome {
    let mut failures = Vec::new();
    let mut updated = Vec::new();
    let mut fail = |msg: String| failures.push(format!("exporter {exporter}: {msg}"));
    let profiles: Vec<ResolvedProfile> =
        got.batches.iter().flat_map(|b| folded(b.data())).collect();

    let mut count = |what: &str, want: Option<u64>, got: Option<u64>| {
        if let Some(w) = want {
            match got {
                Some(g) if g == w => {}
                Some(g) => fail(format!("expected {w} {what}, got {g}")),
                None => fail(format!("{what} are only counted for that exporter type")),
            }
        }
    };
    count("profiles", want.profiles, Some(profiles.len() as u64));
    let samples = got.batches.iter().map(|b| b.sample_count()).sum();
    count("samples", want.samples, Some(samples));
    count("sentry chunks", want.sentry_chunks, got.sentry_chunks);
    count("pprof files", want.pprof_files, got.pprof_files);

    let mut totals: BTreeMap<&str, i64> = BTreeMap::new();
    for p in &profiles {
        *totals.entry(p.sample_type.as_str()).or_default() += p.samples.values().sum::<i64>();
    }
    for (ty, w) in &want.sample_totals {
        let g: Option<i64> = totals
            .iter()
            .filter(|(k, _)| *k == ty || k.split('/').next() == Some(ty.as_str()))
            .map(|(_, v)| *v)
            .reduce(|a, b| a + b);
        match g {
            Some(g) if g == *w => {}
            Some(g) => fail(format!(
                "sample type {ty}: expected a total of {w}, got {g}"
            )),
            None => fail(format!(
                "no profile of sample type {ty} (got: {})",
                totals.keys().copied().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    let lines: Vec<(&str, i64)> = profiles
        .iter()
        .flat_map(|p| p.samples.iter().map(|(k, v)| (k.as_str(), *v)))
        .collect();
    for entry in &want.stacks {
        let (pattern, value) = split_value(entry);
        let matched: Vec<&(&str, i64)> =
            lines.iter().filter(|(l, _)| matches(l, pattern)).collect();
        let total: i64 = matched.iter().map(|(_, v)| v).sum();
        if matched.is_empty() {
            fail(format!(
                "missing stack {pattern:?}{}",
                closest(&lines, pattern)
            ));
        } else if let Some(v) = value {
            if total != v {
                fail(format!(
                    "stack {pattern:?}: expected {v}, got {total}{}",
                    if matched.len() > 1 {
                        format!(" (sum of {} lines)", matched.len())
                    } else {
                        String::new()
                    }
                ));
            }
        }
    }
    for entry in &want.absent_stacks {
        let (pattern, value) = split_value(entry);
        for (l, v) in lines.iter().filter(|(l, _)| matches(l, pattern)) {
            if value.is_none_or(|w| w == *v) {
                fail(format!("stack {pattern:?} must be absent, got {l} {v}"));
            }
        }
    }

    let has_attr = |want: &str| {
        profiles.iter().any(|p| {
            p.resource
                .iter()
                .chain(&p.scope_attributes)
                .chain(&p.attributes)
                .any(|a| attr_matches(a, want))
                || p.samples
                    .keys()
                    .any(|l| sample_attrs(l).iter().any(|a| attr_matches(a, want)))
        })
    };
    for a in &want.attributes {
        if !has_attr(a) {
            fail(format!("attribute {a:?} is missing"));
        }
    }
    for a in &want.absent_attributes {
        if has_attr(a) {
            fail(format!("attribute {a:?} must be absent"));
        }
    }

    if let Some(snap) = &want.snapshot {
        let path = base.join(snap);
        let text = snapshot_text(&profiles);
        let old = std::fs::read_to_string(&path).ok();
        if old.as_deref() != Some(text.as_str()) {
            if update {
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|_| std::fs::write(&path, &text));
                match written {
                    Ok(()) => updated.push(path.display().to_string()),
                    Err(e) => fail(format!("cannot write {}: {e}", path.display())),
                }
            } else if let Some(old) = old {
                fail(format!(
                    "differs from snapshot {} (run with --update to accept):\n{}",
                    path.display(),
                    similar::TextDiff::from_lines(&old, &text)
                        .unified_diff()
                        .context_radius(2)
                        .header("expected", "got")
                ));
            } else {
                fail(format!(
                    "snapshot {} does not exist (run with --update to write it)",
                    path.display()
                ));
            }
        }
    }
    Outcome { failures, updated }
}

/// `a;b [t=1] 42` -> (`a;b [t=1]`, Some(42)).
fn split_value(entry: &str) -> (&str, Option<i64>) {
    let entry = entry.trim();
    if let Some((head, last)) = entry.rsplit_once(' ') {
        if let Ok(v) = last.parse() {
            return (head.trim_end(), Some(v));
        }
    }
    (entry, None)
}

/// A pattern matches a line of the same stack that has at least the
/// attributes it lists in `[...]` (none listed: any).
fn matches(line: &str, pattern: &str) -> bool {
    let stack = pattern.split_once(" [").map_or(pattern, |(s, _)| s);
    let Some(rest) = line.strip_prefix(stack) else {
        return false;
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return false;
    }
    let have = sample_attrs(line);
    sample_attrs(pattern)
        .iter()
        .all(|w| have.iter().any(|a| attr_matches(a, w)))
}

fn closest(lines: &[(&str, i64)], pattern: &str) -> String {
    let leaf = pattern
        .split(' ')
        .next()
        .unwrap_or("")
        .rsplit(';')
        .next()
        .unwrap_or("");
    let near: Vec<String> = lines
        .iter()
        .filter(|(l, _)| !leaf.is_empty() && l.split(' ').next().is_some_and(|s| s.contains(leaf)))
        .take(5)
        .map(|(l, v)| format!("\n    got: {l} {v}"))
        .collect();
    if near.is_empty() {
        format!(" ({} stacks received, none with {leaf:?})", lines.len())
    } else {
        near.concat()
    }
}

/// The `k=v` items of a folded line's `[...]`.
fn sample_attrs(line: &str) -> Vec<&str> {
    let Some(start) = line.find(" [") else {
        return Vec::new();
    };
    let rest = &line[start + 2..];
    let end = rest.rfind(']').unwrap_or(rest.len());
    rest[..end].split(", ").collect()
}

/// `want` is `key` or `key=value`; a value may carry ` (unit)`.
fn attr_matches(attr: &str, want: &str) -> bool {
    if want.contains('=') {
        attr == want || attr.strip_prefix(want).is_some_and(|r| r.starts_with(" ("))
    } else {
        attr.split_once('=').is_some_and(|(k, _)| k == want)
    }
}

/// Profiles sorted, so that the order batches arrived in does not matter.
fn snapshot_text(profiles: &[ResolvedProfile]) -> String {
    let mut blocks: Vec<String> = profiles.iter().map(|p| p.to_string()).collect();
    blocks.sort();
    blocks.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_patterns() {
        assert_eq!(split_value("a;b [t=1] 42"), ("a;b [t=1]", Some(42)));
        assert_eq!(split_value("a;b"), ("a;b", None));
        assert!(matches("a;b [t=1]", "a;b"));
        assert!(matches("a;b", "a;b"));
        assert!(!matches("a;bc", "a;b"));
        assert!(!matches("a;b;c [t=1]", "a;b"));
        // Listed attributes must be there; others may be.
        assert!(matches("a;b [t=1, u=2]", "a;b [u=2]"));
        assert!(matches("a;b [t=1, u=2] {trace_id=0}", "a;b [t=1, u=2]"));
        assert!(!matches("a;b [t=1, u=2]", "a;b [u=3]"));
        assert!(!matches("a;b", "a;b [u=2]"));
        assert_eq!(
            sample_attrs("a;b [t=1, u=x y] {trace_id=0}"),
            ["t=1", "u=x y"]
        );
        assert!(attr_matches("thread.id=5", "thread.id"));
        assert!(attr_matches("size=5 (By)", "size=5"));
        assert!(!attr_matches("thread.idx=5", "thread.id"));
    }
}
