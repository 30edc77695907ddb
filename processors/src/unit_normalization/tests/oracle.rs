//! `unit_normalization` against a reference model on resolved profiles:
//! every unit spelling the table knows (`units::parse`, the documented
//! vocabulary) is written in the target vocabulary, wherever it is (sample
//! and period types, the attributes of samples, profiles, locations and
//! mappings); with `scale_to_base`, sample values, `period` and numeric
//! attribute values are multiplied into the base unit (saturating);
//! with `samples_to_time`, a `samples`/`count` profile with a time period
//! becomes a time profile named after its period type (`cpu` if unnamed)
//! worth one period per observation, unless its scope already holds a
//! profile of that name in a time unit over the same window. Nothing else
//! changes, whatever strings the units share with names or values.

use profcol_pipeline::component::Verdict;

use crate::oracle::{self, Attr, RProfile, V};

use super::*;

fn numeric(v: &V) -> bool {
    match v {
        V::Int(_) | V::Double(_) => true,
        V::Array(a) => a.iter().all(|x| matches!(x, V::Int(_) | V::Double(_))),
        _ => false,
    }
}

fn scaled(v: &V, f: i64) -> V {
    match v {
        V::Int(n) => V::Int(n.saturating_mul(f)),
        V::Double(d) => V::Double((f64::from_bits(*d) * f as f64).to_bits()),
        V::Array(a) => V::Array(a.iter().map(|x| scaled(x, f)).collect()),
        other => other.clone(),
    }
}

fn attr(a: &Attr, o: &Options) -> Attr {
    let Some(u) = parse(&a.unit) else {
        return a.clone();
    };
    if o.scale_to_base && numeric(&a.value) {
        Attr {
            value: scaled(&a.value, u.factor),
            unit: u.base().name(o.target).to_owned(),
            ..a.clone()
        }
    } else {
        Attr {
            unit: u.name(o.target).to_owned(),
            ..a.clone()
        }
    }
}

fn attrs(a: &[Attr], o: &Options) -> Vec<Attr> {
    a.iter().map(|a| attr(a, o)).collect()
}

/// Counts of the events a resolved model can tell (the others count
/// dictionary entries, which depend on the layout).
#[derive(Debug, Default, PartialEq, Eq)]
struct Events {
    scaled: u64,
    to_time: u64,
    skipped: u64,
}

fn model(input: &[Vec<RProfile>], o: &Options) -> (Vec<RProfile>, Events) {
    let mut ev = Events::default();
    let mut out = Vec::new();
    for scope in input {
        for p in scope {
            let mut q = p.clone();
            q.attributes = attrs(&p.attributes, o);
            for s in &mut q.samples {
                s.attributes = attrs(&s.attributes, o);
                for f in &mut s.stack {
                    f.attributes = attrs(&f.attributes, o);
                    f.mapping.4 = attrs(&f.mapping.4, o);
                }
            }
            let period_unit = p.period_type.as_ref().and_then(|(_, u)| parse(u));
            if let (Some((name, _)), Some(u)) = (&p.period_type, period_unit) {
                let (unit, f) = if o.scale_to_base {
                    (u.base(), u.factor)
                } else {
                    (u, 1)
                };
                q.period_type = Some((name.clone(), unit.name(o.target).to_owned()));
                q.period = p.period.saturating_mul(f);
            }
            let mut multiplier = 1;
            if let Some((ty, unit)) = &p.sample_type {
                if let Some(u) = parse(unit) {
                    let counts = u == units::COUNT
                        && matches!(ty.to_ascii_lowercase().as_str(), "samples" | "sample");
                    let period_ns = match period_unit {
                        Some(pu) if pu.dimension == Dimension::Time && p.period > 0 => {
                            Some(p.period.saturating_mul(pu.factor))
                        }
                        _ => None,
                    };
                    let time = match (o.samples_to_time && counts, period_ns, &p.period_type) {
                        (true, Some(ns), Some((name, _))) => {
                            let name = if name.is_empty() { "cpu" } else { name };
                            let sibling = scope.iter().any(|x| {
                                x.time == p.time
                                    && x.sample_type.as_ref().is_some_and(|(t, u)| {
                                        t.eq_ignore_ascii_case(name)
                                            && parse(u)
                                                .is_some_and(|u| u.dimension == Dimension::Time)
                                    })
                            });
                            if sibling {
                                ev.skipped += 1;
                                None
                            } else {
                                Some((ns, name.to_owned()))
                            }
                        }
                        _ => None,
                    };
                    match time {
                        Some((ns, name)) => {
                            ev.to_time += 1;
                            q.sample_type = Some((name, units::NANOSECOND.name(o.target).into()));
                            multiplier = ns;
                        }
                        None => {
                            let (unit, f) = if o.scale_to_base {
                                (u.base(), u.factor)
                            } else {
                                (u, 1)
                            };
                            q.sample_type = Some((ty.clone(), unit.name(o.target).to_owned()));
                            multiplier = f;
                        }
                    }
                }
            }
            if multiplier != 1 {
                ev.scaled += 1;
                for s in &mut q.samples {
                    if s.values.is_empty() {
                        s.values = vec![multiplier; s.timestamps.len()];
                    } else {
                        for v in &mut s.values {
                            *v = v.saturating_mul(multiplier);
                        }
                    }
                }
            }
            out.push(q);
        }
    }
    (out, ev)
}

/// Sample types: counts in the spellings that convert, time and memory
/// units, a unit that is also the type's name, an unknown unit.
const TYPES: &[(&str, &str)] = &[
    ("samples", "count"),
    ("Sample", "1"),
    ("samples", "{sample}"),
    ("samples", "none"),
    ("cpu", "nanoseconds"),
    ("CPU", "ms"),
    ("wall", "us"),
    ("alloc_space", "kb"),
    ("ms", "ms"),
    ("samples", "furlongs"),
];
/// Period types: time ones (one unnamed), and ones that are not time.
const PERIODS: &[(&str, &str)] = &[
    ("cpu", "nanoseconds"),
    ("wall", "ms"),
    ("", "us"),
    ("cpu", "hz"),
    ("space", "bytes"),
    ("cpu", "furlongs"),
];
/// Periods, the last large enough to saturate once scaled.
const PERIOD_VALUES: &[i64] = &[0, 10, 10_000_000, i64::MAX / 3];

/// Per profile: a sample type, a period type and a period to set, if any.
type Retype = (Option<usize>, Option<usize>, Option<usize>);

fn string(d: &mut ProfilesDictionary, s: &str) -> i32 {
    match d.string_table.iter().position(|x| x == s) {
        Some(i) => i as i32,
        None => {
            d.string_table.push(s.to_owned());
            d.string_table.len() as i32 - 1
        }
    }
}

fn value_type(d: &mut ProfilesDictionary, (ty, unit): (&str, &str)) -> Option<ValueType> {
    Some(ValueType {
        type_strindex: string(d, ty),
        unit_strindex: string(d, unit),
    })
}

/// Gives profiles the types of `retype`, and windows from `windows`.
fn retype(data: &mut ProfilesData, retype: &[Retype], windows: &[u64]) {
    let d = data.dictionary.as_mut().unwrap();
    let all = data
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles);
    for (k, p) in all.enumerate() {
        let (ty, period_type, period) = retype[k % retype.len()];
        if let Some(t) = ty {
            p.sample_type = value_type(d, TYPES[t]);
        }
        if let Some(t) = period_type {
            p.period_type = value_type(d, PERIODS[t]);
        }
        if let Some(v) = period {
            p.period = PERIOD_VALUES[v];
        }
        p.duration_nano = windows[k % windows.len()];
    }
}

/// Per scope: whether to add a copy of its first profile under the time
/// sample type a conversion would make (name in capitals or not, unit from
/// `TWIN_UNITS`, the same window or another).
type Twin = (bool, bool, usize, bool);
/// The last is no time unit: such a profile is not the time sibling.
const TWIN_UNITS: &[&str] = &["nanoseconds", "ms", "us", "count"];

fn add_twins(data: &mut ProfilesData, twins: &[Twin]) {
    let d = data.dictionary.as_mut().unwrap();
    let scopes = data
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles);
    for (k, scope) in scopes.enumerate() {
        let (twin, capitals, unit, same_window) = twins[k % twins.len()];
        let Some(first) = scope.profiles.first() else {
            continue;
        };
        if !twin {
            continue;
        }
        let mut q = first.clone();
        let period_name = first
            .period_type
            .map(|t| d.string_table[t.type_strindex as usize].clone())
            .unwrap_or_default();
        let mut name = if period_name.is_empty() {
            "cpu".to_owned()
        } else {
            period_name
        };
        if capitals {
            name = name.to_uppercase();
        }
        q.sample_type = value_type(d, (&name, TWIN_UNITS[unit]));
        if !same_window {
            q.duration_nano += 7;
        }
        scope.profiles.push(q);
    }
}

fn arb_options() -> impl Strategy<Value = Options> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(pprof, scale, time)| Options {
        target: if pprof { Target::Pprof } else { Target::Ucum },
        scale_to_base: scale,
        samples_to_time: time,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Messy batches (units sharing strings with names and values,
    /// duplicate entries, string references), with sample and period types
    /// set to the interesting ones, and profiles over two windows so that a
    /// time sibling is sometimes over another one.
    #[test]
    fn unit_normalization_matches_the_reference_model(
        mut data in testdata::data().prop_filter("no profile", |d| {
            d.resource_profiles.iter().flat_map(|r| &r.scope_profiles).any(|s| !s.profiles.is_empty())
        }),
        types in prop::collection::vec(
            (
                // Mostly counts and times: count profiles with time siblings.
                prop::option::weighted(0.8, prop_oneof![3 => 0..4usize, 3 => 4..7usize, 1 => 7..TYPES.len()]),
                prop::option::weighted(0.8, prop_oneof![3 => 0..3usize, 1 => 3..PERIODS.len()]),
                prop::option::weighted(0.7, 0..PERIOD_VALUES.len()),
            ),
            1..8,
        ),
        windows in prop::collection::vec(0..2u64, 1..8),
        twins in prop::collection::vec((any::<bool>(), any::<bool>(), 0..TWIN_UNITS.len(), prop::bool::weighted(0.7)), 1..4),
        o in arb_options(),
    ) {
        retype(&mut data, &types, &windows);
        add_twins(&mut data, &twins);
        let input = oracle::resolve_scopes(&data);
        let (want, want_events) = model(&input, &o);
        let mut batch = ProfileBatch::new(data);
        let mut p = UnitNormalization {
            opts: o,
        };
        let (verdict, drops, events) = oracle::run(&mut p, &mut batch);
        prop_assert_eq!(verdict, Verdict::Keep);
        prop_assert!(drops.is_empty());
        let count = |e: &str| events.get(e).copied().unwrap_or(0);
        prop_assert_eq!(
            Events {
                scaled: count("profile_scaled"),
                to_time: count("profile_to_time"),
                skipped: count("profile_to_time_skipped"),
            },
            want_events
        );
        validate(batch.data()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = oracle::normalized(oracle::resolve(batch.data()));
        prop_assert_eq!(got, oracle::normalized(want));
    }
}
