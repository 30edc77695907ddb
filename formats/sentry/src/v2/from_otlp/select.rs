//! Which Profiles of a scope become chunks.
//!
//! A Sentry chunk holds stacks sampled over time (CPU or wall clock). So:
//! - a Profile whose sample type measures something else (allocations,
//!   bytes, lock contention, goroutines, off-CPU events) is not sent
//!   ([`Reason::UnsupportedSampleType`]);
//! - of Profiles holding the same samples under different sample types (a
//!   pprof CPU profile imports as `samples/count` and `cpu/nanoseconds`,
//!   a Node wall profile as `sample/count` and `wall/nanoseconds`) one is
//!   sent, a count type before a time type, so that Sentry does not see
//!   every sample twice; the others are [`Reason::DuplicateSampleType`].

use std::collections::HashMap;

use super::points::time_unit_ns;
use super::Dropped;
use crate::Reason;
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{Profile, Sample};

/// Sample types that are samples of running (or, for wall clock, live)
/// stacks, as pprof, the eBPF profiler, async-profiler and the Sentry
/// receiver name them; `""` is a Profile without a sample type.
const SAMPLED_TYPES: &[&str] = &[
    "",
    "samples",
    "sample",
    "cpu",
    "cpu_time",
    "wall",
    "wall_time",
    "itimer",
];

/// Per Profile (in order): `None` to send it, else why it is not sent.
pub(super) fn select(dict: Lookup<'_>, profiles: &[Profile]) -> Vec<Option<Reason>> {
    let mut verdicts = Vec::with_capacity(profiles.len());
    let mut candidates = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        match rank(dict, p) {
            Ok(r) => {
                candidates.push((r, i));
                verdicts.push(None);
            }
            Err(reason) => verdicts.push(Some(reason)),
        }
    }
    if candidates.len() > 1 {
        candidates.sort_unstable();
        // Kept Profiles by time range, size and first stack, then by
        // sample type: a Profile is compared only with kept ones of its
        // shape and another type, not with every one kept (tens of
        // thousands of tiny Profiles in a request made this quadratic).
        type Shape = (u64, u64, usize, Option<i32>);
        type ByType<'a> = Vec<((&'a str, &'a str), Vec<usize>)>;
        let mut kept: HashMap<Shape, ByType> = HashMap::new();
        for (_, i) in candidates {
            let p = &profiles[i];
            let ty = type_of(dict, p);
            let shape = (
                p.time_unix_nano,
                p.duration_nano,
                p.samples.len(),
                p.samples.first().map(|s| s.stack_index),
            );
            let by_type = kept.entry(shape).or_default();
            let repeats = by_type
                .iter()
                .filter(|(t, _)| *t != ty)
                .any(|(_, js)| js.iter().any(|&j| same_samples(p, &profiles[j])));
            if repeats {
                verdicts[i] = Some(Reason::DuplicateSampleType);
            } else {
                match by_type.iter_mut().find(|(t, _)| *t == ty) {
                    Some((_, js)) => js.push(i),
                    None => by_type.push((ty, vec![i])),
                }
            }
        }
    }
    verdicts
}

/// What a Profile that is not sent counts as dropped.
pub(super) fn all_dropped(p: &Profile, reason: Reason) -> Dropped {
    Dropped {
        reason,
        sentry_samples: p
            .samples
            .iter()
            .map(|s| s.timestamps_unix_nano.len() as u64)
            .sum(),
        otlp_samples: p.samples.len() as u64,
    }
}

/// 0 for counts of samples, 1 for time; `Err` for what is not sampling.
fn rank(dict: Lookup<'_>, p: &Profile) -> Result<u8, Reason> {
    let (ty, unit) = p.sample_type.map_or(("", ""), |t| {
        (dict.string(t.type_strindex), dict.string(t.unit_strindex))
    });
    if !SAMPLED_TYPES.iter().any(|t| t.eq_ignore_ascii_case(ty)) {
        return Err(Reason::UnsupportedSampleType);
    }
    match unit {
        "" | "count" | "samples" => Ok(0),
        u if time_unit_ns(u).is_some() => Ok(1),
        _ => Err(Reason::UnsupportedSampleType),
    }
}

/// A Profile's sample type and unit. One recording under two sample types
/// differs in type (two Profiles of one type are two recordings, both
/// sent), and maybe in values, but not in time range nor, sample by
/// sample, in stack, attributes, link and timestamps (`same_samples`).
fn type_of<'d>(dict: Lookup<'d>, p: &Profile) -> (&'d str, &'d str) {
    p.sample_type.map_or(("", ""), |t| {
        (dict.string(t.type_strindex), dict.string(t.unit_strindex))
    })
}

fn same_samples(a: &Profile, b: &Profile) -> bool {
    let same = |x: &Sample, y: &Sample| {
        x.stack_index == y.stack_index
            && x.link_index == y.link_index
            && x.attribute_indices == y.attribute_indices
            && x.timestamps_unix_nano == y.timestamps_unix_nano
    };
    a.time_unix_nano == b.time_unix_nano
        && a.duration_nano == b.duration_nano
        && a.samples.len() == b.samples.len()
        && a.samples.iter().zip(&b.samples).all(|(x, y)| same(x, y))
}
