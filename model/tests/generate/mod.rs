//! Random valid `ProfilesData` (duplicates, orphans, inlined lines,
//! attributes, links, timestamps) and every index site of one, for the
//! property tests of this crate.

#![allow(dead_code)]

use proptest::prelude::*;

use profcol_model::dictionary::Table;
use profcol_model::proto::{
    any_value::Value, AnyValue, ArrayValue, Function, InstrumentationScope, KeyValue,
    KeyValueAndUnit, KeyValueList, Line, Link, Location, Mapping, Profile, ProfilesData,
    ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};

// ---------------------------------------------------------------- generator

/// A small pool so that equal strings, and through them equal entries, are common.
pub(crate) const WORDS: &[&str] = &[
    "main",
    "run",
    "work",
    "leaf",
    "a.rs",
    "b.rs",
    "thread.name",
    "worker-1",
    "cpu",
    "ns",
    "bytes",
    "libc.so",
];

/// Table sizes, each including the zero value; 0 means an empty table (only
/// the null index 0 may point into it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    pub strings: usize,
    pub mappings: usize,
    pub functions: usize,
    pub locations: usize,
    pub stacks: usize,
    pub attributes: usize,
    pub links: usize,
}

pub(crate) fn idx(len: usize) -> impl Strategy<Value = i32> {
    (0..len.max(1) as i32).boxed()
}

pub(crate) fn idx_list(len: usize, max: usize) -> impl Strategy<Value = Vec<i32>> {
    prop::collection::vec(idx(len), 0..=max)
}

pub(crate) fn leaf_value(strings: usize) -> BoxedStrategy<AnyValue> {
    prop_oneof![
        prop::sample::select(WORDS).prop_map(|w| Value::StringValue(w.to_owned())),
        idx(strings).prop_map(Value::StringValueStrindex),
        (-2i64..3).prop_map(Value::IntValue),
        any::<bool>().prop_map(Value::BoolValue),
        prop::sample::select(vec![0.5f64, -2.0, 1e10]).prop_map(Value::DoubleValue),
        prop::collection::vec(any::<u8>(), 0..3).prop_map(Value::BytesValue),
    ]
    .prop_map(|v| AnyValue { value: Some(v) })
    .boxed()
}

pub(crate) fn key_value(strings: usize, value: BoxedStrategy<AnyValue>) -> BoxedStrategy<KeyValue> {
    (
        any::<bool>(),
        prop::sample::select(WORDS),
        1..strings.max(2) as i32,
        value,
    )
        .prop_map(move |(by_ref, word, k, value)| {
            if by_ref && strings > 1 {
                KeyValue {
                    key: String::new(),
                    value: Some(value),
                    key_strindex: k,
                }
            } else {
                KeyValue {
                    key: word.to_owned(),
                    value: Some(value),
                    key_strindex: 0,
                }
            }
        })
        .boxed()
}

pub(crate) fn any_value(strings: usize) -> BoxedStrategy<AnyValue> {
    prop_oneof![
        4 => leaf_value(strings),
        1 => prop::collection::vec(leaf_value(strings), 0..3)
            .prop_map(|values| AnyValue { value: Some(Value::ArrayValue(ArrayValue { values })) }),
        1 => prop::collection::vec(key_value(strings, leaf_value(strings)), 0..3)
            .prop_map(|values| AnyValue { value: Some(Value::KvlistValue(KeyValueList { values })) }),
    ]
    .boxed()
}

pub(crate) fn dictionary(n: Sizes) -> impl Strategy<Value = ProfilesDictionary> {
    let strings = prop::collection::vec(prop::sample::select(WORDS), n.strings - 1).prop_map(|w| {
        std::iter::once("")
            .chain(w)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    let mappings = prop::collection::vec(
        (0..3u64, idx(n.strings), idx_list(n.attributes, 1)).prop_map(|(k, f, a)| Mapping {
            memory_start: k * 0x1000,
            memory_limit: (k + 1) * 0x1000,
            file_offset: 0,
            filename_strindex: f,
            attribute_indices: a,
        }),
        n.mappings.saturating_sub(1),
    );
    let functions = prop::collection::vec(
        (idx(n.strings), idx(n.strings), idx(n.strings), 0..2i64).prop_map(|(a, b, c, l)| {
            Function {
                name_strindex: a,
                system_name_strindex: b,
                filename_strindex: c,
                start_line: l,
            }
        }),
        n.functions - 1,
    );
    let line = (idx(n.functions), 0..3i64, 0..2i64).prop_map(|(f, line, column)| Line {
        function_index: f,
        line,
        column,
    });
    let locations = prop::collection::vec(
        (
            idx(n.mappings),
            0..4u64,
            prop::collection::vec(line, 0..3),
            idx_list(n.attributes, 1),
        )
            .prop_map(|(m, a, lines, attrs)| Location {
                mapping_index: m,
                address: a * 0x10,
                lines,
                attribute_indices: attrs,
            }),
        n.locations - 1,
    );
    let stacks = prop::collection::vec(
        idx_list(n.locations, 4).prop_map(|l| Stack {
            location_indices: l,
        }),
        n.stacks - 1,
    );
    let attributes = prop::collection::vec(
        (
            idx(n.strings),
            any_value(n.strings),
            prop_oneof![Just(0), idx(n.strings)],
        )
            .prop_map(|(k, v, u)| KeyValueAndUnit {
                key_strindex: k,
                value: Some(v),
                unit_strindex: u,
            }),
        n.attributes.saturating_sub(1),
    );
    let links = prop::collection::vec(
        (0..3u8, 0..2u8).prop_map(|(t, s)| Link {
            trace_id: vec![t + 1; 16],
            span_id: vec![s + 1; 8],
        }),
        n.links.saturating_sub(1),
    );
    (
        strings, mappings, functions, locations, stacks, attributes, links,
    )
        .prop_map(move |(strings, m, f, l, s, a, k)| {
            fn with_zero<T: Default>(len: usize, rest: Vec<T>) -> Vec<T> {
                if len == 0 {
                    return vec![];
                }
                std::iter::once(T::default()).chain(rest).collect()
            }
            ProfilesDictionary {
                string_table: strings,
                mapping_table: with_zero(n.mappings, m),
                function_table: with_zero(n.functions, f),
                location_table: with_zero(n.locations, l),
                stack_table: with_zero(n.stacks, s),
                attribute_table: with_zero(n.attributes, a),
                link_table: with_zero(n.links, k),
            }
        })
}

pub(crate) fn sample(n: Sizes) -> impl Strategy<Value = Sample> {
    let shape = prop_oneof![
        (1..4usize).prop_map(|k| (vec![], (0..k as u64).map(|t| 100 + t).collect())),
        (-5i64..50).prop_map(|v| (vec![v], vec![])),
        (1..4usize).prop_map(|k| (
            (1..=k as i64).collect(),
            (0..k as u64).map(|t| 7 + t).collect()
        )),
    ];
    (
        idx(n.stacks),
        idx_list(n.attributes, 2),
        idx(n.links),
        shape,
    )
        .prop_map(
            |(stack_index, attribute_indices, link_index, (values, timestamps_unix_nano))| Sample {
                stack_index,
                attribute_indices,
                link_index,
                values,
                timestamps_unix_nano,
            },
        )
}

pub(crate) fn value_type(n: Sizes) -> impl Strategy<Value = Option<ValueType>> {
    prop::option::of(
        (idx(n.strings), idx(n.strings)).prop_map(|(t, u)| ValueType {
            type_strindex: t,
            unit_strindex: u,
        }),
    )
}

pub(crate) fn profile(n: Sizes) -> impl Strategy<Value = Profile> {
    (
        value_type(n),
        value_type(n),
        0..3i64,
        idx_list(n.attributes, 2),
        prop::collection::vec(sample(n), 0..8),
    )
        .prop_map(
            |(sample_type, period_type, period, attribute_indices, samples)| Profile {
                sample_type,
                period_type,
                period,
                attribute_indices,
                samples,
                time_unix_nano: 1,
                ..Default::default()
            },
        )
}

pub(crate) fn resource(n: Sizes) -> impl Strategy<Value = ResourceProfiles> {
    let attrs = move || prop::collection::vec(key_value(n.strings, any_value(n.strings)), 0..3);
    let scope = (
        prop::sample::select(WORDS),
        attrs(),
        prop::collection::vec(profile(n), 0..3),
    )
        .prop_map(|(name, attributes, profiles)| ScopeProfiles {
            scope: Some(InstrumentationScope {
                name: name.to_owned(),
                attributes,
                ..Default::default()
            }),
            profiles,
            schema_url: String::new(),
        });
    (attrs(), prop::collection::vec(scope, 1..3)).prop_map(|(attributes, scope_profiles)| {
        ResourceProfiles {
            resource: Some(Resource {
                attributes,
                ..Default::default()
            }),
            scope_profiles,
            schema_url: String::new(),
        }
    })
}

pub(crate) fn data() -> impl Strategy<Value = ProfilesData> {
    let sizes = (
        1..10usize,
        0..4usize,
        1..6usize,
        1..8usize,
        1..8usize,
        0..6usize,
        0..3usize,
    )
        .prop_map(|(s, m, f, l, st, a, k)| Sizes {
            strings: s,
            mappings: m,
            functions: f,
            locations: l,
            stacks: st,
            attributes: a,
            links: k,
        });
    prop_oneof![
        20 => sizes.prop_flat_map(|n| (dictionary(n), prop::collection::vec(resource(n), 0..3)))
            .prop_map(|(d, resource_profiles)| ProfilesData { resource_profiles, dictionary: Some(d) }),
        // Producers with nothing to report send an empty dictionary.
        1 => Just(ProfilesData {
            resource_profiles: vec![ResourceProfiles::default()],
            dictionary: Some(ProfilesDictionary::default()),
        }),
    ]
}

// ---------------------------------------------------------------- corruption

/// Every index field with its path and target table, enumerated by hand
/// (independently of the crate's walkers). Entries at index 0 are left out:
/// they are zero values and corrupting them is a different error.
pub(crate) fn for_each_site(d: &mut ProfilesData, f: &mut dyn FnMut(String, Table, &mut i32)) {
    fn any(v: &mut AnyValue, path: String, f: &mut dyn FnMut(String, Table, &mut i32)) {
        match &mut v.value {
            Some(Value::StringValueStrindex(i)) => {
                f(format!("{path}.string_value_strindex"), Table::String, i)
            }
            Some(Value::ArrayValue(a)) => {
                for (k, x) in a.values.iter_mut().enumerate() {
                    any(x, format!("{path}.array_value.values[{k}]"), f);
                }
            }
            Some(Value::KvlistValue(kv)) => {
                kvs(&mut kv.values, format!("{path}.kvlist_value.values"), f)
            }
            _ => {}
        }
    }
    fn kvs(list: &mut [KeyValue], path: String, f: &mut dyn FnMut(String, Table, &mut i32)) {
        for (k, kv) in list.iter_mut().enumerate() {
            f(
                format!("{path}[{k}].key_strindex"),
                Table::String,
                &mut kv.key_strindex,
            );
            if let Some(v) = &mut kv.value {
                any(v, format!("{path}[{k}].value"), f);
            }
        }
    }
    let dict = d.dictionary.get_or_insert_with(Default::default);
    for (i, m) in dict.mapping_table.iter_mut().enumerate().skip(1) {
        f(
            format!("dictionary.mapping_table[{i}].filename_strindex"),
            Table::String,
            &mut m.filename_strindex,
        );
        for (k, a) in m.attribute_indices.iter_mut().enumerate() {
            f(
                format!("dictionary.mapping_table[{i}].attribute_indices[{k}]"),
                Table::Attribute,
                a,
            );
        }
    }
    for (i, l) in dict.location_table.iter_mut().enumerate().skip(1) {
        f(
            format!("dictionary.location_table[{i}].mapping_index"),
            Table::Mapping,
            &mut l.mapping_index,
        );
        for (k, line) in l.lines.iter_mut().enumerate() {
            f(
                format!("dictionary.location_table[{i}].lines[{k}].function_index"),
                Table::Function,
                &mut line.function_index,
            );
        }
        for (k, a) in l.attribute_indices.iter_mut().enumerate() {
            f(
                format!("dictionary.location_table[{i}].attribute_indices[{k}]"),
                Table::Attribute,
                a,
            );
        }
    }
    for (i, x) in dict.function_table.iter_mut().enumerate().skip(1) {
        f(
            format!("dictionary.function_table[{i}].name_strindex"),
            Table::String,
            &mut x.name_strindex,
        );
        f(
            format!("dictionary.function_table[{i}].system_name_strindex"),
            Table::String,
            &mut x.system_name_strindex,
        );
        f(
            format!("dictionary.function_table[{i}].filename_strindex"),
            Table::String,
            &mut x.filename_strindex,
        );
    }
    for (i, a) in dict.attribute_table.iter_mut().enumerate().skip(1) {
        f(
            format!("dictionary.attribute_table[{i}].key_strindex"),
            Table::String,
            &mut a.key_strindex,
        );
        f(
            format!("dictionary.attribute_table[{i}].unit_strindex"),
            Table::String,
            &mut a.unit_strindex,
        );
        if let Some(v) = &mut a.value {
            any(v, format!("dictionary.attribute_table[{i}].value"), f);
        }
    }
    for (i, s) in dict.stack_table.iter_mut().enumerate().skip(1) {
        for (k, l) in s.location_indices.iter_mut().enumerate() {
            f(
                format!("dictionary.stack_table[{i}].location_indices[{k}]"),
                Table::Location,
                l,
            );
        }
    }
    for (r, rp) in d.resource_profiles.iter_mut().enumerate() {
        if let Some(res) = &mut rp.resource {
            kvs(
                &mut res.attributes,
                format!("resource_profiles[{r}].resource.attributes"),
                f,
            );
        }
        for (s, sp) in rp.scope_profiles.iter_mut().enumerate() {
            if let Some(sc) = &mut sp.scope {
                kvs(
                    &mut sc.attributes,
                    format!("resource_profiles[{r}].scope_profiles[{s}].scope.attributes"),
                    f,
                );
            }
            for (p, prof) in sp.profiles.iter_mut().enumerate() {
                let at = format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]");
                for (name, vt) in [
                    ("sample_type", &mut prof.sample_type),
                    ("period_type", &mut prof.period_type),
                ] {
                    if let Some(vt) = vt {
                        f(
                            format!("{at}.{name}.type_strindex"),
                            Table::String,
                            &mut vt.type_strindex,
                        );
                        f(
                            format!("{at}.{name}.unit_strindex"),
                            Table::String,
                            &mut vt.unit_strindex,
                        );
                    }
                }
                for (k, a) in prof.attribute_indices.iter_mut().enumerate() {
                    f(format!("{at}.attribute_indices[{k}]"), Table::Attribute, a);
                }
                for (i, smp) in prof.samples.iter_mut().enumerate() {
                    f(
                        format!("{at}.samples[{i}].stack_index"),
                        Table::Stack,
                        &mut smp.stack_index,
                    );
                    for (k, a) in smp.attribute_indices.iter_mut().enumerate() {
                        f(
                            format!("{at}.samples[{i}].attribute_indices[{k}]"),
                            Table::Attribute,
                            a,
                        );
                    }
                    f(
                        format!("{at}.samples[{i}].link_index"),
                        Table::Link,
                        &mut smp.link_index,
                    );
                }
            }
        }
    }
}

pub(crate) fn table_len(d: &ProfilesDictionary, t: Table) -> usize {
    match t {
        Table::String => d.string_table.len(),
        Table::Mapping => d.mapping_table.len(),
        Table::Location => d.location_table.len(),
        Table::Function => d.function_table.len(),
        Table::Link => d.link_table.len(),
        Table::Attribute => d.attribute_table.len(),
        Table::Stack => d.stack_table.len(),
    }
}
