//! `thread_pruning` against a reference model: the documented semantics
//! applied naively to resolved profiles (each sample its stack of frames,
//! attributes as key/value/unit, values and timestamps), compared with what
//! the optimized pass leaves once resolved.
//!
//! The model, per profile, in the documented order:
//! 1. `drop_threads` / `keep_threads` on `thread.name` as received (a full
//!    match; without a name a sample is dropped only when `keep_threads` is
//!    set);
//! 2. `min_samples_per_thread`: of the samples left, the non-idle
//!    observations of each thread (`thread.id` as text, `thread.name`) are
//!    counted, and threads below the minimum go; samples with neither
//!    attribute are no thread and stay;
//! 3. `drop_attributes` removes keys, `rename_threads` rewrites
//!    `thread.name` by the first rule that matches the whole name; when some
//!    sample's attributes changed, the samples of one identity (stack,
//!    attribute set, link, shape) are combined, points appended in order;
//! 4. the thread table keeps the entries whose id a kept sample names by a
//!    `thread.id` that `drop_attributes` left, with renamed names; an empty
//!    table goes, as does a profile left without samples.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use profcol_model::proto::Link;

use crate::oracle::{self, Attr, RProfile, RSample, V};

use super::*;

// ---- the model ----

struct Model {
    drop_attributes: Vec<String>,
    rename: Vec<(Regex, String)>,
    drop_threads: Vec<Regex>,
    keep_threads: Vec<Regex>,
    min: u64,
}

fn whole(pattern: &str) -> Regex {
    Regex::new(&format!("^(?:{pattern})$")).unwrap()
}

impl Model {
    fn of(c: &ThreadPruningConfig) -> Self {
        Self {
            drop_attributes: c.drop_attributes.clone(),
            rename: c
                .rename_threads
                .iter()
                .map(|r| (whole(&r.pattern), r.replacement.clone()))
                .collect(),
            drop_threads: c.drop_threads.iter().map(|p| whole(p)).collect(),
            keep_threads: c.keep_threads.iter().map(|p| whole(p)).collect(),
            min: c.min_samples_per_thread,
        }
    }

    fn renamed(&self, name: &str) -> String {
        for (re, replacement) in &self.rename {
            if let Some(caps) = re.captures(name) {
                let mut out = String::new();
                caps.expand(replacement, &mut out);
                return out;
            }
        }
        name.to_owned()
    }

    fn kept_by_name(&self, name: Option<&str>) -> bool {
        match name {
            None => self.keep_threads.is_empty(),
            Some(n) => {
                (self.keep_threads.is_empty() || self.keep_threads.iter().any(|r| r.is_match(n)))
                    && !self.drop_threads.iter().any(|r| r.is_match(n))
            }
        }
    }

    fn rewrite(&self, attrs: &[Attr]) -> Vec<Attr> {
        attrs
            .iter()
            .filter(|a| !self.drop_attributes.contains(&a.key))
            .map(|a| match (&a.key[..], &a.value) {
                ("thread.name", V::Str(name)) => Attr {
                    value: V::Str(self.renamed(name)),
                    ..a.clone()
                },
                _ => a.clone(),
            })
            .collect()
    }
}

fn id_text(v: &V) -> String {
    match v {
        V::Int(n) => n.to_string(),
        V::Str(s) => s.clone(),
        other => panic!("the generator makes no thread.id {other:?}"),
    }
}

/// (thread id as text, thread name) of a sample, as received.
fn thread(s: &RSample) -> (Option<String>, Option<String>) {
    let mut id = None;
    let mut name = None;
    for a in &s.attributes {
        match (&a.key[..], &a.value) {
            ("thread.id", v) => id = Some(id_text(v)),
            ("thread.name", V::Str(n)) => name = Some(n.clone()),
            _ => {}
        }
    }
    (id, name)
}

/// The shape a sample records its points in (the merge never mixes them).
fn shape(s: &RSample) -> (bool, bool) {
    (s.timestamps.is_empty(), s.values.is_empty())
}

/// What the model makes of `input`: the profiles left, and the observations
/// dropped by name and by count, and thread table entries removed.
fn model(input: &[RProfile], m: &Model) -> (Vec<RProfile>, u64, u64, u64) {
    let (mut by_name, mut by_count, mut pruned) = (0, 0, 0);
    let mut out = Vec::new();
    for p in input {
        let mut samples: Vec<RSample> = Vec::new();
        for s in &p.samples {
            if m.kept_by_name(thread(s).1.as_deref()) {
                samples.push(s.clone());
            } else {
                by_name += s.observations();
            }
        }
        if m.min > 0 {
            let mut counts: BTreeMap<(Option<String>, Option<String>), u64> = BTreeMap::new();
            for s in &samples {
                let t = thread(s);
                let n = counts.entry(t).or_default();
                if !s.stack.is_empty() {
                    *n += s.observations();
                }
            }
            samples.retain(|s| {
                let t = thread(s);
                let keep = t == (None, None) || counts[&t] >= m.min;
                if !keep {
                    by_count += s.observations();
                }
                keep
            });
        }
        let referenced: BTreeSet<String> = samples
            .iter()
            .filter(|_| !m.drop_attributes.iter().any(|k| k == "thread.id"))
            .filter_map(|s| thread(s).0)
            .collect();
        let mut changed = false;
        for s in &mut samples {
            let new = m.rewrite(&s.attributes);
            changed |= new != s.attributes;
            s.attributes = new;
        }
        if changed {
            let mut merged: Vec<RSample> = Vec::new();
            for s in samples {
                let mut key = s.attributes.clone();
                key.sort();
                let same = |t: &RSample| {
                    let mut k = t.attributes.clone();
                    k.sort();
                    t.stack == s.stack && k == key && t.link == s.link && shape(t) == shape(&s)
                };
                let has_points = !(s.values.is_empty() && s.timestamps.is_empty());
                match merged.iter_mut().find(|t| has_points && same(t)) {
                    Some(first) => {
                        first.values.extend_from_slice(&s.values);
                        first.timestamps.extend_from_slice(&s.timestamps);
                    }
                    None => merged.push(s),
                }
            }
            samples = merged;
        }
        // Entries no kept sample names are counted as pruned even when
        // the profile goes with its last sample.
        let mut attributes = Vec::new();
        for a in &p.attributes {
            let V::Kv(entries) = &a.value else {
                attributes.push(a.clone());
                continue;
            };
            if a.key != "sentry.thread_metadata" {
                attributes.push(a.clone());
                continue;
            }
            let mut kept = Vec::new();
            for (id, fields) in entries {
                if !referenced.contains(id) {
                    pruned += 1;
                    continue;
                }
                let fields = match fields {
                    V::Kv(fields) => V::Kv(
                        fields
                            .iter()
                            .map(|(k, v)| match (&k[..], v) {
                                ("name", V::Str(n)) => (k.clone(), V::Str(m.renamed(n))),
                                _ => (k.clone(), v.clone()),
                            })
                            .collect(),
                    ),
                    other => other.clone(),
                };
                kept.push((id.clone(), fields));
            }
            if !kept.is_empty() {
                attributes.push(Attr {
                    value: V::Kv(kept),
                    ..a.clone()
                });
            }
        }
        if samples.is_empty() {
            continue;
        }
        out.push(RProfile {
            attributes,
            samples,
            ..p.clone()
        });
    }
    (out, by_name, by_count, pruned)
}

// ---- the batches ----

#[derive(Clone, Copy, Debug)]
enum Id {
    Int(i64),
    Str(&'static str),
}

#[derive(Clone, Copy, Debug)]
enum Name {
    /// (name, unit)
    Str(&'static str, &'static str),
    /// Not a string: no name to the rules.
    Int(i64),
    /// A string by reference to the string table (no sample names it
    /// plainly: the two would be different entries that resolve equal).
    Ref(&'static str),
}

/// Threads as samples name them: an id as int and as text that read the
/// same, an id with two names, names that renames collide on, a name with a
/// unit, a name that is not a string, one by string reference, and no
/// thread at all.
const THREADS: &[(Option<Id>, Option<Name>)] = &[
    (Some(Id::Int(1)), Some(Name::Str("MainThread", ""))),
    (Some(Id::Str("1")), Some(Name::Str("MainThread", ""))),
    (Some(Id::Int(2)), Some(Name::Str("worker-1", ""))),
    (Some(Id::Int(2)), Some(Name::Str("worker-2", ""))),
    (Some(Id::Int(3)), Some(Name::Str("worker-2", ""))),
    (Some(Id::Int(3)), Some(Name::Str("worker-2", "tid"))),
    (
        Some(Id::Str("0x5")),
        Some(Name::Str("sentry.profiler.Scheduler", "")),
    ),
    (Some(Id::Int(4)), None),
    (None, Some(Name::Str("worker-10", ""))),
    (None, Some(Name::Str("domain-worker", ""))),
    (Some(Id::Int(6)), Some(Name::Str("worker-*", ""))),
    (Some(Id::Int(7)), Some(Name::Int(7))),
    (Some(Id::Int(5)), Some(Name::Ref("worker-7"))),
    (None, None),
];

/// Thread table entries (id, name): one per id, one never named by a
/// sample, one without a name.
const TABLE: &[(&str, Option<&str>)] = &[
    ("1", Some("MainThread")),
    ("2", Some("worker-1")),
    ("3", Some("worker-2")),
    ("0x5", Some("sentry.profiler.Scheduler")),
    ("4", None),
    ("6", Some("worker-*")),
    ("5", Some("worker-7")),
    ("9", Some("worker-9")),
];

const STACKS: &[&str] = &["", "main", "main;work", "main;work;leaf", "main;other"];

const RULES: &[(&str, &str)] = &[
    (r"worker-\d+", "worker-*"),
    (r"worker-(\d+)", "w-$1"),
    (r"(?P<m>Main)Thread", "${m}"),
    // Onto a name samples already carry.
    (r"sentry\..*", "MainThread"),
    (".*", "all"),
    // Matches no whole name.
    ("worker", "never"),
    ("worker-1", "worker-1"),
];
const DROP_THREADS: &[&str] = &[
    r"sentry\.profiler\..*",
    "MainThread",
    "worker-2",
    "worker",
    "w-1",
];
const KEEP_THREADS: &[&str] = &["worker-.*", "Main.*", "domain-worker"];
const DROP_ATTRIBUTES: &[&str] = &["thread.id", "thread.name", "span.kind"];

/// (stack, thread, extra attribute, link, shape, points).
type Spec = (usize, usize, usize, usize, u8, u64);

/// Profiles of samples, whether each carries the thread table, and the
/// samples of threads `pool-K` (one to three each), enough threads that
/// the pass numbers them in a hash table rather than a grid.
type Case = (Vec<(Vec<Spec>, bool)>, Option<Vec<(usize, u64)>>);

fn arb_spec() -> impl Strategy<Value = Spec> {
    (
        0..STACKS.len(),
        0..THREADS.len(),
        0..3usize,
        0..3usize,
        0..3u8,
        1..4u64,
    )
}

fn arb_case() -> impl Strategy<Value = Case> {
    // A profile received empty is not one the pass leaves empty: not generated.
    let profile = (prop::collection::vec(arb_spec(), 1..30), any::<bool>());
    let pool = prop::collection::vec((0..STACKS.len(), 1..4u64), 80);
    (
        prop::collection::vec(profile, 1..4),
        prop::option::weighted(0.2, pool),
    )
}

fn subset(of: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    prop::sample::subsequence(of, 0..=of.len())
        .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn arb_config() -> impl Strategy<Value = ThreadPruningConfig> {
    let rename = prop::collection::vec(0..RULES.len(), 0..3).prop_map(|v| {
        v.into_iter()
            .map(|i| RenameRule {
                pattern: RULES[i].0.into(),
                replacement: RULES[i].1.into(),
            })
            .collect()
    });
    let keep = prop_oneof![3 => Just(Vec::new()), 1 => subset(KEEP_THREADS)];
    let drop = prop_oneof![1 => Just(Vec::new()), 1 => subset(DROP_THREADS)];
    let drop_attributes = prop_oneof![1 => Just(Vec::new()), 1 => subset(DROP_ATTRIBUTES)];
    (
        drop_attributes,
        rename,
        drop,
        keep,
        prop_oneof![1 => Just(0u64), 2 => 1..5u64],
    )
        .prop_map(
            |(drop_attributes, rename_threads, drop_threads, keep_threads, min)| {
                ThreadPruningConfig {
                    drop_attributes,
                    rename_threads,
                    drop_threads,
                    keep_threads,
                    min_samples_per_thread: min,
                }
            },
        )
}

fn id_value(id: Id) -> AnyValue {
    AnyValue {
        value: Some(match id {
            Id::Int(n) => Value::IntValue(n),
            Id::Str(s) => Value::StringValue(s.into()),
        }),
    }
}

fn build_case((profiles, pool): &Case) -> ProfileBatch {
    let mut b = Build::default();
    let links = [
        b.b.link(Link::default()),
        b.b.link(Link {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
        }),
        b.b.link(Link {
            trace_id: vec![3; 16],
            span_id: vec![4; 8],
        }),
    ];
    let mut k = 0u64;
    for (n, (specs, table)) in profiles.iter().enumerate() {
        for &(stack, thread, extra, link, shape, points) in specs {
            let stack = b.stack(STACKS[stack]);
            let (id, name) = THREADS[thread];
            let mut attrs = Vec::new();
            if let Some(id) = id {
                attrs.push(b.b.attribute_kv("thread.id", id_value(id), ""));
            }
            if let Some(name) = name {
                attrs.push(match name {
                    Name::Str(n, unit) => b.b.attribute_kv("thread.name", str_value(n), unit),
                    Name::Int(n) => b.b.attribute_kv("thread.name", id_value(Id::Int(n)), ""),
                    Name::Ref(n) => {
                        let value = AnyValue {
                            value: Some(Value::StringValueStrindex(b.b.string(n))),
                        };
                        b.b.attribute_kv("thread.name", value, "")
                    }
                });
            }
            if extra > 0 {
                let v = if extra == 1 { "server" } else { "client" };
                attrs.push(b.b.attribute_kv("span.kind", str_value(v), ""));
            }
            // Distinct points, so that a merge in the wrong order shows.
            let times: Vec<u64> = (0..points).map(|p| 1_000 + 10 * k + p).collect();
            k += 1;
            let (values, timestamps_unix_nano) = match shape {
                0 => (vec![10 * k as i64 + points as i64], vec![]),
                1 => (vec![], times),
                _ => (times.iter().map(|&t| t as i64 * 3).collect(), times),
            };
            b.samples.push(Sample {
                stack_index: stack,
                attribute_indices: attrs,
                link_index: links[link],
                values,
                timestamps_unix_nano,
            });
        }
        if n == 0 {
            for (j, &(stack, count)) in pool.iter().flatten().enumerate() {
                let stack = b.stack(STACKS[stack]);
                let attrs = vec![
                    b.b.attribute_kv("thread.id", id_value(Id::Int(100 + j as i64)), ""),
                    b.b.attribute_kv("thread.name", str_value(&format!("pool-{j}")), ""),
                ];
                for _ in 0..count {
                    k += 1;
                    b.samples.push(Sample {
                        stack_index: stack,
                        attribute_indices: attrs.clone(),
                        timestamps_unix_nano: vec![1_000 + 10 * k],
                        ..Default::default()
                    });
                }
            }
        }
        if *table {
            b.table(TABLE);
        }
        b.profile();
    }
    b.batch()
}

fn check(p: &mut ThreadPruning, m: &Model, batch: &mut ProfileBatch) -> Result<(), TestCaseError> {
    let input = oracle::resolve(batch.data());
    let (want, by_name, by_count, pruned) = model(&input, m);
    let (verdict, drops, events) = oracle::run(p, batch);
    let want_drops: BTreeMap<String, u64> = [
        (THREAD_DROPPED, by_name),
        (MIN_SAMPLES_PER_THREAD, by_count),
    ]
    .into_iter()
    .filter(|&(_, n)| n > 0)
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    prop_assert_eq!(drops, want_drops);
    prop_assert_eq!(
        events.get("thread_metadata_pruned").copied().unwrap_or(0),
        pruned
    );
    if want.is_empty() {
        prop_assert_eq!(verdict, Verdict::Drop);
        return Ok(());
    }
    prop_assert_eq!(verdict, Verdict::Keep);
    validate(batch.data()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let got = oracle::normalized(oracle::resolve(batch.data()));
    prop_assert_eq!(got, oracle::normalized(want));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Two batches through one processor: buffers kept from a batch must
    /// not change the next one's outcome.
    #[test]
    fn thread_pruning_matches_the_reference_model(
        config in arb_config(),
        first in arb_case(),
        second in arb_case(),
    ) {
        let rules = config::Rules::compile(&config, &section("{}").unwrap()).unwrap();
        let mut p = ThreadPruning { rules, scratch: prune::Scratch::default() };
        let m = Model::of(&config);
        check(&mut p, &m, &mut build_case(&first))?;
        check(&mut p, &m, &mut build_case(&second))?;
    }
}
