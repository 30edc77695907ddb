//! Checking what an exporter received against a test's expectations.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use profcol_model::resolved::{folded, ResolvedProfile};
use profcol_model::ProfileBatch;

use super::spec::Expectation;
use super::stacks::{attr_matches, sample_attrs, Line};

/// What one exporter ended up with.
pub(super) struct Received {
    pub batches: Vec<Arc<ProfileBatch>>,
    pub sentry_chunks: Option<u64>,
    pub pprof_files: Option<u64>,
}

pub(super) struct Outcome {
    pub failures: Vec<String>,
    /// Snapshots that `--update` rewrote.
    pub updated: Vec<String>,
}

pub(super) fn check(
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

    let lines: Vec<Line> = profiles
        .iter()
        .flat_map(|p| {
            p.samples
                .iter()
                .map(|(k, v)| Line::new(&p.sample_type, k, *v))
        })
        .collect();
    for entry in &want.stacks {
        if let Some(msg) = entry.check_present(&lines) {
            fail(msg);
        }
    }
    for entry in &want.absent_stacks {
        if let Some(msg) = entry.check_absent(&lines) {
            fail(msg);
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

/// Profiles sorted, so that the order batches arrived in does not matter.
fn snapshot_text(profiles: &[ResolvedProfile]) -> String {
    let mut blocks: Vec<String> = profiles.iter().map(|p| p.to_string()).collect();
    blocks.sort();
    blocks.concat()
}
