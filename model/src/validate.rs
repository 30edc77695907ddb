//! Structural validation of a batch: every index in range, zero values at 0,
//! sample shapes as the proto requires. Runs on every received request, so it
//! is one pass over the data and allocates only to describe an error.
//!
//! Index 0 is the proto's null reference: it is accepted even into an empty
//! table (real producers send empty dictionaries when they have no samples),
//! and [`super::dictionary::Lookup`] reads it as the zero value.

use std::fmt;

use crate::proto::{
    any_value::Value, AnyValue, KeyValue, Profile, ProfilesData, ProfilesDictionary,
    ResourceProfiles, ValueType, ZeroEntry,
};

use super::bounds::{late_time, LateTime};
use super::dictionary::{PerTable, Table};

/// Where the data breaks a rule, and which rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ValidationError {
    /// Path to the field, e.g. `resource_profiles[0].scope_profiles[0].profiles[1].samples[7].stack_index`.
    pub path: String,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    OutOfRange {
        index: i32,
        table: Table,
        len: usize,
    },
    /// `table[0]` is not the zero value.
    NotZeroValue { table: Table },
    /// Both `values` and `timestamps_unix_nano` are set with different lengths.
    ValueCountMismatch { values: usize, timestamps: usize },
    /// Neither `values` nor `timestamps_unix_nano` has an entry.
    EmptySample,
    /// A time past [`super::bounds::MAX_UNIX_NANO`] (year 2262), which no
    /// recording has and which would turn into unbounded work downstream;
    /// `end`: the profile's end, `time_unix_nano + duration_nano`.
    TimeOutOfRange { value: u64, end: bool },
    /// A rule of an older revision that its translation to v1.10.0 checks
    /// (a sample's slice of `location_indices`, its number of values).
    Malformed(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::OutOfRange { index, table, len } => {
                write!(f, "{index} out of range ({table} has {len} entries)")
            }
            Problem::NotZeroValue { table: Table::String } => {
                f.write_str("must be the empty string (string_table[0] is the zero value)")
            }
            Problem::NotZeroValue { table } => {
                write!(f, "must be the zero value ({table}[0] is the null entry)")
            }
            Problem::ValueCountMismatch { values, timestamps } => write!(
                f,
                "{values} values but {timestamps} timestamps (when both are set they must have the same length)"
            ),
            Problem::EmptySample => {
                f.write_str("neither values nor timestamps (a sample needs at least one)")
            }
            Problem::TimeOutOfRange { value, end } => write!(
                f,
                "{}{value} is after 2262-04-11T23:47:16Z, the latest time int64 nanoseconds hold",
                if *end { "the profile ends at time_unix_nano + duration_nano = " } else { "" }
            ),
            Problem::Malformed(what) => f.write_str(what),
        }
    }
}

/// Checks every index of `data` against its table and the invariants of the
/// dictionary and of samples. Returns the first problem found.
pub fn validate(data: &ProfilesData) -> Result<(), ValidationError> {
    let dict = crate::proto::dictionary_of(data);
    zero_values(dict)?;
    checked(data, &mut |_, e| Err(e))
}

/// Where a Profile is: (resource, scope, profile) indices.
pub type ProfileAt = (usize, usize, usize);

/// As [`validate`], but a problem inside one Profile (its sample type,
/// attributes or samples) only marks that Profile: returns each invalid
/// Profile with its first problem, in order. `Err` for a problem no Profile
/// can be kept through (the dictionary, a resource's or a scope's
/// attributes).
pub fn invalid_profiles(
    data: &ProfilesData,
) -> Result<Vec<(ProfileAt, ValidationError)>, ValidationError> {
    findings(data).into_result()
}

/// What validation found, kept apart by what a caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Findings {
    /// Tables whose entry 0 is a real entry rather than the zero value: the
    /// rule every revision since v1.8.0 states and some producers (and all
    /// of v1.7.0) do not follow. Indices are checked as they are, so these
    /// are the only problem when the table is otherwise consistent.
    pub not_zero: Vec<Table>,
    /// As [`invalid_profiles`], but with the zero values left out.
    pub rest: Result<Vec<(ProfileAt, ValidationError)>, ValidationError>,
}

impl Findings {
    /// Nothing to object to.
    pub fn is_valid(&self) -> bool {
        self.not_zero.is_empty() && self.consistent()
    }

    /// Every index in range and every sample well formed; entry 0 of some
    /// table may still be a real entry.
    pub fn consistent(&self) -> bool {
        matches!(&self.rest, Ok(bad) if bad.is_empty())
    }

    /// As [`invalid_profiles`] reports it: a table without its zero value
    /// spoils every Profile.
    pub fn into_result(self) -> Result<Vec<(ProfileAt, ValidationError)>, ValidationError> {
        match self.not_zero.first() {
            Some(&table) => Err(not_zero_value(table)),
            None => self.rest,
        }
    }
}

/// One pass over `data`, every rule checked (see [`Findings`]).
pub fn findings(data: &ProfilesData) -> Findings {
    let dict = crate::proto::dictionary_of(data);
    let mut bad = Vec::new();
    let rest = checked(data, &mut |at, e| {
        bad.push((at, e));
        Ok(())
    })
    .map(|()| bad);
    Findings {
        not_zero: tables_without_zero_value(dict),
        rest,
    }
}

type OnProfileError<'a> = dyn FnMut(ProfileAt, ValidationError) -> Result<(), ValidationError> + 'a;

fn checked(
    data: &ProfilesData,
    on_profile: &mut OnProfileError<'_>,
) -> Result<(), ValidationError> {
    let dict = crate::proto::dictionary_of(data);
    let lens = PerTable::lens(dict);
    dictionary(dict, &lens)?;
    resources(&data.resource_profiles, &lens, on_profile)
}

/// Index 0 is always valid (the null reference); others must be in the table.
#[inline(always)]
fn ok(i: i32, len: usize) -> bool {
    i == 0 || (i > 0 && (i as usize) < len)
}

/// Checks one index; builds the path only on failure.
macro_rules! check {
    ($lens:expr, $table:expr, $i:expr, $($path:tt)+) => {{
        let (i, table) = ($i, $table);
        let len = $lens.get(table);
        if !ok(i, len) {
            return Err(ValidationError {
                path: format!($($path)+),
                problem: Problem::OutOfRange { index: i, table, len },
            });
        }
    }};
}

fn zero_values(d: &ProfilesDictionary) -> Result<(), ValidationError> {
    match tables_without_zero_value(d).first() {
        Some(&table) => Err(not_zero_value(table)),
        None => Ok(()),
    }
}

fn not_zero_value(table: Table) -> ValidationError {
    ValidationError {
        path: format!("dictionary.{table}[0]"),
        problem: Problem::NotZeroValue { table },
    }
}

/// The tables of `d` whose entry 0 is not the zero value, in [`Table::ALL`] order.
pub fn tables_without_zero_value(d: &ProfilesDictionary) -> Vec<Table> {
    fn real<T: ZeroEntry>(t: &[T]) -> bool {
        t.first().is_some_and(|z| !z.is_zero())
    }
    Table::ALL
        .into_iter()
        .filter(|&t| match t {
            Table::String => real(&d.string_table),
            Table::Mapping => real(&d.mapping_table),
            Table::Location => real(&d.location_table),
            Table::Function => real(&d.function_table),
            Table::Link => real(&d.link_table),
            Table::Attribute => real(&d.attribute_table),
            Table::Stack => real(&d.stack_table),
        })
        .collect()
}

fn dictionary(d: &ProfilesDictionary, n: &PerTable) -> Result<(), ValidationError> {
    for (i, m) in d.mapping_table.iter().enumerate() {
        check!(
            n,
            Table::String,
            m.filename_strindex,
            "dictionary.mapping_table[{i}].filename_strindex"
        );
        for (k, &a) in m.attribute_indices.iter().enumerate() {
            check!(
                n,
                Table::Attribute,
                a,
                "dictionary.mapping_table[{i}].attribute_indices[{k}]"
            );
        }
    }
    for (i, l) in d.location_table.iter().enumerate() {
        check!(
            n,
            Table::Mapping,
            l.mapping_index,
            "dictionary.location_table[{i}].mapping_index"
        );
        for (k, line) in l.lines.iter().enumerate() {
            check!(
                n,
                Table::Function,
                line.function_index,
                "dictionary.location_table[{i}].lines[{k}].function_index"
            );
        }
        for (k, &a) in l.attribute_indices.iter().enumerate() {
            check!(
                n,
                Table::Attribute,
                a,
                "dictionary.location_table[{i}].attribute_indices[{k}]"
            );
        }
    }
    for (i, f) in d.function_table.iter().enumerate() {
        check!(
            n,
            Table::String,
            f.name_strindex,
            "dictionary.function_table[{i}].name_strindex"
        );
        check!(
            n,
            Table::String,
            f.system_name_strindex,
            "dictionary.function_table[{i}].system_name_strindex"
        );
        check!(
            n,
            Table::String,
            f.filename_strindex,
            "dictionary.function_table[{i}].filename_strindex"
        );
    }
    for (i, a) in d.attribute_table.iter().enumerate() {
        check!(
            n,
            Table::String,
            a.key_strindex,
            "dictionary.attribute_table[{i}].key_strindex"
        );
        check!(
            n,
            Table::String,
            a.unit_strindex,
            "dictionary.attribute_table[{i}].unit_strindex"
        );
        if let Some(v) = &a.value {
            any_value(v, n)
                .map_err(|e| e.under(|| format!("dictionary.attribute_table[{i}].value")))?;
        }
    }
    for (i, s) in d.stack_table.iter().enumerate() {
        for (k, &l) in s.location_indices.iter().enumerate() {
            check!(
                n,
                Table::Location,
                l,
                "dictionary.stack_table[{i}].location_indices[{k}]"
            );
        }
    }
    Ok(())
}

fn resources(
    rps: &[ResourceProfiles],
    n: &PerTable,
    on_profile: &mut OnProfileError<'_>,
) -> Result<(), ValidationError> {
    for (r, rp) in rps.iter().enumerate() {
        if let Some(res) = &rp.resource {
            key_values(&res.attributes, n)
                .map_err(|e| e.under(|| format!("resource_profiles[{r}].resource.attributes")))?;
        }
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            if let Some(scope) = &sp.scope {
                key_values(&scope.attributes, n).map_err(|e| {
                    e.under(|| {
                        format!("resource_profiles[{r}].scope_profiles[{s}].scope.attributes")
                    })
                })?;
            }
            for (p, prof) in sp.profiles.iter().enumerate() {
                let at = || format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]");
                if let Err(e) = profile(prof, n, at) {
                    on_profile((r, s, p), e)?;
                }
            }
        }
    }
    Ok(())
}

fn profile(prof: &Profile, n: &PerTable, at: impl Fn() -> String) -> Result<(), ValidationError> {
    if let Some(late) = late_time(prof) {
        let (field, value, end) = match late {
            LateTime::Start(v) => ("time_unix_nano".to_owned(), v, false),
            LateTime::End(v) => ("duration_nano".to_owned(), v, true),
            LateTime::Sample {
                sample,
                index,
                value,
            } => (
                format!("samples[{sample}].timestamps_unix_nano[{index}]"),
                value,
                false,
            ),
        };
        return Err(ValidationError {
            path: format!("{}.{field}", at()),
            problem: Problem::TimeOutOfRange { value, end },
        });
    }
    value_type(prof.sample_type.as_ref(), n)
        .map_err(|e| e.under(|| format!("{}.sample_type", at())))?;
    value_type(prof.period_type.as_ref(), n)
        .map_err(|e| e.under(|| format!("{}.period_type", at())))?;
    for (k, &a) in prof.attribute_indices.iter().enumerate() {
        check!(n, Table::Attribute, a, "{}.attribute_indices[{k}]", at());
    }
    for (i, smp) in prof.samples.iter().enumerate() {
        check!(
            n,
            Table::Stack,
            smp.stack_index,
            "{}.samples[{i}].stack_index",
            at()
        );
        for (k, &a) in smp.attribute_indices.iter().enumerate() {
            check!(
                n,
                Table::Attribute,
                a,
                "{}.samples[{i}].attribute_indices[{k}]",
                at()
            );
        }
        check!(
            n,
            Table::Link,
            smp.link_index,
            "{}.samples[{i}].link_index",
            at()
        );
        let (values, timestamps) = (smp.values.len(), smp.timestamps_unix_nano.len());
        if values == 0 && timestamps == 0 {
            return Err(ValidationError {
                path: format!("{}.samples[{i}]", at()),
                problem: Problem::EmptySample,
            });
        }
        if values != 0 && timestamps != 0 && values != timestamps {
            return Err(ValidationError {
                path: format!("{}.samples[{i}].values", at()),
                problem: Problem::ValueCountMismatch { values, timestamps },
            });
        }
    }
    Ok(())
}

/// An error inside a nested value: the path relative to the value, completed
/// by the caller (allocates only on failure).
struct Nested {
    suffix: String,
    problem: Problem,
}

impl Nested {
    fn under(self, prefix: impl FnOnce() -> String) -> ValidationError {
        ValidationError {
            path: prefix() + &self.suffix,
            problem: self.problem,
        }
    }

    fn prepend(mut self, segment: impl fmt::Display) -> Self {
        self.suffix = format!("{segment}{}", self.suffix);
        self
    }
}

fn nested_range(n: &PerTable, table: Table, i: i32, field: &str) -> Result<(), Nested> {
    let len = n.get(table);
    if ok(i, len) {
        Ok(())
    } else {
        Err(Nested {
            suffix: format!(".{field}"),
            problem: Problem::OutOfRange {
                index: i,
                table,
                len,
            },
        })
    }
}

fn value_type(vt: Option<&ValueType>, n: &PerTable) -> Result<(), Nested> {
    if let Some(vt) = vt {
        nested_range(n, Table::String, vt.type_strindex, "type_strindex")?;
        nested_range(n, Table::String, vt.unit_strindex, "unit_strindex")?;
    }
    Ok(())
}

fn key_values(kvs: &[KeyValue], n: &PerTable) -> Result<(), Nested> {
    for (k, kv) in kvs.iter().enumerate() {
        nested_range(n, Table::String, kv.key_strindex, "key_strindex")
            .and_then(|()| {
                kv.value
                    .as_ref()
                    .map_or(Ok(()), |v| any_value(v, n).map_err(|e| e.prepend(".value")))
            })
            .map_err(|e| e.prepend(format_args!("[{k}]")))?;
    }
    Ok(())
}

fn any_value(v: &AnyValue, n: &PerTable) -> Result<(), Nested> {
    match &v.value {
        Some(Value::StringValueStrindex(i)) => {
            nested_range(n, Table::String, *i, "string_value_strindex")
        }
        Some(Value::ArrayValue(a)) => {
            for (k, x) in a.values.iter().enumerate() {
                any_value(x, n).map_err(|e| e.prepend(format_args!(".array_value.values[{k}]")))?;
            }
            Ok(())
        }
        Some(Value::KvlistValue(kv)) => {
            key_values(&kv.values, n).map_err(|e| e.prepend(".kvlist_value.values"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{KeyValueList, Profile, Resource, Sample, ScopeProfiles, Stack};

    fn dict(strings: usize, stacks: usize) -> ProfilesDictionary {
        ProfilesDictionary {
            string_table: (0..strings)
                .map(|i| {
                    if i == 0 {
                        String::new()
                    } else {
                        format!("s{i}")
                    }
                })
                .collect(),
            stack_table: vec![Stack::default(); stacks],
            ..Default::default()
        }
    }

    fn with_samples(d: ProfilesDictionary, profiles: Vec<Vec<Sample>>) -> ProfilesData {
        ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                scope_profiles: vec![ScopeProfiles {
                    profiles: profiles
                        .into_iter()
                        .map(|samples| Profile {
                            samples,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(d),
        }
    }

    fn sample(stack_index: i32, values: usize, timestamps: usize) -> Sample {
        Sample {
            stack_index,
            values: vec![1; values],
            timestamps_unix_nano: vec![1; timestamps],
            ..Default::default()
        }
    }

    fn err(d: &ProfilesData) -> String {
        validate(d).unwrap_err().to_string()
    }

    #[test]
    fn names_the_exact_place_of_a_bad_index() {
        let mut samples = vec![sample(1, 1, 0); 8];
        samples[7].stack_index = 42;
        let d = with_samples(dict(1, 10), vec![vec![sample(0, 1, 0)], samples]);
        assert_eq!(
            err(&d),
            "resource_profiles[0].scope_profiles[0].profiles[1].samples[7].stack_index: \
             42 out of range (stack_table has 10 entries)"
        );
        let mut d = d;
        d.resource_profiles[0].scope_profiles[0].profiles[1].samples[7].stack_index = -1;
        assert!(err(&d).ends_with("stack_index: -1 out of range (stack_table has 10 entries)"));
    }

    #[test]
    fn invalid_profiles_are_told_apart_from_what_spoils_everything() {
        let mut bad = sample(1, 1, 0);
        bad.stack_index = 42;
        let d = with_samples(
            dict(1, 10),
            vec![
                vec![sample(1, 1, 0)],
                vec![sample(1, 1, 0), bad],
                vec![sample(1, 0, 0)],
            ],
        );
        let found = invalid_profiles(&d).unwrap();
        let at: Vec<ProfileAt> = found.iter().map(|(at, _)| *at).collect();
        assert_eq!(at, [(0, 0, 1), (0, 0, 2)]);
        assert_eq!(found[1].1.problem, Problem::EmptySample);
        // The first of them is what `validate` reports.
        assert_eq!(err(&d), found[0].1.to_string());
        // A broken dictionary spoils every Profile.
        let mut d = d;
        d.dictionary.as_mut().unwrap().string_table[0] = "x".into();
        assert_eq!(
            invalid_profiles(&d).unwrap_err().problem,
            Problem::NotZeroValue {
                table: Table::String
            }
        );
    }

    #[test]
    fn empty_tables_are_fine_while_only_the_null_index_points_there() {
        // No samples and no dictionary at all, as idle producers send.
        assert_eq!(validate(&ProfilesData::default()), Ok(()));
        assert_eq!(
            validate(&with_samples(ProfilesDictionary::default(), vec![vec![]])),
            Ok(())
        );
        // Samples without links, and an empty link table.
        let mut d = with_samples(dict(1, 2), vec![vec![sample(1, 1, 0)]]);
        assert_eq!(validate(&d), Ok(()));
        d.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].link_index = 1;
        assert_eq!(
            err(&d),
            "resource_profiles[0].scope_profiles[0].profiles[0].samples[0].link_index: \
             1 out of range (link_table has 0 entries)"
        );
    }

    #[test]
    fn the_first_entry_of_every_table_is_the_zero_value() {
        let mut d = dict(2, 2);
        d.string_table[0] = "x".into();
        assert_eq!(
            err(&with_samples(d, vec![])),
            "dictionary.string_table[0]: must be the empty string (string_table[0] is the zero value)"
        );
        let mut d = dict(2, 2);
        d.stack_table[0].location_indices = vec![0];
        assert_eq!(
            err(&with_samples(d, vec![])),
            "dictionary.stack_table[0]: must be the zero value (stack_table[0] is the null entry)"
        );
    }

    #[test]
    fn samples_need_values_or_timestamps_of_equal_length() {
        let ok = [(1, 0), (3, 0), (0, 3), (3, 3)];
        for (v, t) in ok {
            assert_eq!(
                validate(&with_samples(dict(1, 1), vec![vec![sample(0, v, t)]])),
                Ok(()),
                "{v} {t}"
            );
        }
        let at = "resource_profiles[0].scope_profiles[0].profiles[0].samples[0]";
        assert_eq!(
            err(&with_samples(dict(1, 1), vec![vec![sample(0, 0, 0)]])),
            format!("{at}: neither values nor timestamps (a sample needs at least one)")
        );
        assert_eq!(
            err(&with_samples(dict(1, 1), vec![vec![sample(0, 2, 3)]])),
            format!("{at}.values: 2 values but 3 timestamps (when both are set they must have the same length)")
        );
    }

    #[test]
    fn nested_string_references_are_checked() {
        let kv = |key_strindex, value: Option<AnyValue>| KeyValue {
            key: String::new(),
            value,
            key_strindex,
        };
        let nested = AnyValue {
            value: Some(Value::KvlistValue(KeyValueList {
                values: vec![kv(1, None), kv(9, None)],
            })),
        };
        let mut d = with_samples(dict(3, 1), vec![]);
        d.resource_profiles[0].resource = Some(Resource {
            attributes: vec![kv(2, Some(nested))],
            ..Default::default()
        });
        assert_eq!(
            err(&d),
            "resource_profiles[0].resource.attributes[0].value.kvlist_value.values[1].key_strindex: \
             9 out of range (string_table has 3 entries)"
        );
        let array = AnyValue {
            value: Some(Value::ArrayValue(crate::proto::ArrayValue {
                values: vec![AnyValue {
                    value: Some(Value::StringValueStrindex(5)),
                }],
            })),
        };
        let mut dd = dict(3, 1);
        dd.attribute_table = vec![
            Default::default(),
            crate::proto::KeyValueAndUnit {
                key_strindex: 1,
                value: Some(array),
                unit_strindex: 0,
            },
        ];
        assert_eq!(
            err(&with_samples(dd, vec![])),
            "dictionary.attribute_table[1].value.array_value.values[0].string_value_strindex: \
             5 out of range (string_table has 3 entries)"
        );
    }
}
