//! Properties of the dictionary operations on random valid `ProfilesData`
//! (duplicates, orphans, inlined lines, attributes, links, timestamps), and
//! the same operations on recorded OTLP payloads.

use proptest::prelude::*;
use prost::Message;

use profcol_pipeline::model::dictionary::{
    dedup, dedup_with, gc, mark, merge, merge_all, resolve_references, split_by_resource, subsets,
    DictionaryBuilder, PerTable, Table,
};
use profcol_pipeline::model::{folded, resolve, validate, Detail, ResolvedProfile};
use profcol_pipeline::proto::{
    any_value::Value, AnyValue, ArrayValue, ExportProfilesServiceRequest, Function,
    InstrumentationScope, KeyValue, KeyValueAndUnit, KeyValueList, Line, Link, Location, Mapping,
    Profile, ProfilesData, ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles,
    Stack, ValueType,
};

// ---------------------------------------------------------------- generator

/// A small pool so that equal strings, and through them equal entries, are common.
const WORDS: &[&str] = &[
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
struct Sizes {
    strings: usize,
    mappings: usize,
    functions: usize,
    locations: usize,
    stacks: usize,
    attributes: usize,
    links: usize,
}

fn idx(len: usize) -> impl Strategy<Value = i32> {
    (0..len.max(1) as i32).boxed()
}

fn idx_list(len: usize, max: usize) -> impl Strategy<Value = Vec<i32>> {
    prop::collection::vec(idx(len), 0..=max)
}

fn leaf_value(strings: usize) -> BoxedStrategy<AnyValue> {
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

fn key_value(strings: usize, value: BoxedStrategy<AnyValue>) -> BoxedStrategy<KeyValue> {
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

fn any_value(strings: usize) -> BoxedStrategy<AnyValue> {
    prop_oneof![
        4 => leaf_value(strings),
        1 => prop::collection::vec(leaf_value(strings), 0..3)
            .prop_map(|values| AnyValue { value: Some(Value::ArrayValue(ArrayValue { values })) }),
        1 => prop::collection::vec(key_value(strings, leaf_value(strings)), 0..3)
            .prop_map(|values| AnyValue { value: Some(Value::KvlistValue(KeyValueList { values })) }),
    ]
    .boxed()
}

fn dictionary(n: Sizes) -> impl Strategy<Value = ProfilesDictionary> {
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

fn sample(n: Sizes) -> impl Strategy<Value = Sample> {
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

fn value_type(n: Sizes) -> impl Strategy<Value = Option<ValueType>> {
    prop::option::of(
        (idx(n.strings), idx(n.strings)).prop_map(|(t, u)| ValueType {
            type_strindex: t,
            unit_strindex: u,
        }),
    )
}

fn profile(n: Sizes) -> impl Strategy<Value = Profile> {
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

fn resource(n: Sizes) -> impl Strategy<Value = ResourceProfiles> {
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

fn data() -> impl Strategy<Value = ProfilesData> {
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

fn full(data: &ProfilesData) -> Vec<ResolvedProfile> {
    resolve(data, Detail::Full).profiles
}

// ---------------------------------------------------------------- corruption

/// Every index field with its path and target table, enumerated by hand
/// (independently of the crate's walkers). Entries at index 0 are left out:
/// they are zero values and corrupting them is a different error.
fn for_each_site(d: &mut ProfilesData, f: &mut dyn FnMut(String, Table, &mut i32)) {
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

fn table_len(d: &ProfilesDictionary, t: Table) -> usize {
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

/// True when no two entries of any table are equal.
fn no_duplicates(d: &ProfilesDictionary) -> bool {
    fn distinct<T: PartialEq + Clone + profcol_pipeline::model::dictionary::DictHash + Default>(
        t: &[T],
    ) -> bool {
        let mut i = profcol_pipeline::model::dictionary::Interner::<T>::new();
        t.iter().skip(1).all(|v| {
            let before = i.len();
            i.intern(v.clone());
            i.len() == before + 1
        })
    }
    distinct(&d.string_table)
        && distinct(&d.mapping_table)
        && distinct(&d.location_table)
        && distinct(&d.function_table)
        && distinct(&d.link_table)
        && distinct(&d.attribute_table)
        && distinct(&d.stack_table)
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_data_is_valid(d in data()) {
        prop_assert_eq!(validate(&d), Ok(()));
    }

    #[test]
    fn merge_resolves_like_the_inputs_concatenated(a in data(), b in data(), c in data()) {
        let mut expected = full(&a);
        expected.extend(full(&b));
        let mut merged = a.clone();
        merge(&mut merged, b.clone());
        prop_assert_eq!(validate(&merged), Ok(()));
        prop_assert_eq!(full(&merged), expected.clone());

        expected.extend(full(&c));
        let all = merge_all([a, b, c]);
        prop_assert_eq!(validate(&all), Ok(()));
        prop_assert_eq!(full(&all), expected);
    }

    #[test]
    fn merge_keeps_the_first_inputs_indices(a in data(), b in data()) {
        let mut merged = a.clone();
        merge(&mut merged, b.clone());
        if !b.resource_profiles.is_empty() {
            let n = a.resource_profiles.len();
            prop_assert_eq!(&merged.resource_profiles[..n], &a.resource_profiles[..]);
        }
    }

    #[test]
    fn gc_keeps_the_view_and_leaves_no_orphans(d in data()) {
        let before = full(&d);
        let mut g = d.clone();
        let stats = gc(&mut g);
        prop_assert_eq!(validate(&g), Ok(()));
        prop_assert_eq!(full(&g), before);
        prop_assert!(mark(&g).all_live());
        prop_assert!(g.encoded_len() <= d.encoded_len());
        prop_assert_eq!(stats.after.total() + stats.removed_total(), stats.before.total());
        let again = gc(&mut g.clone());
        prop_assert_eq!(again.removed_total(), 0);
    }

    #[test]
    fn dedup_keeps_the_view_never_grows_and_is_idempotent(d in data()) {
        let before = full(&d);
        let mut once = d.clone();
        dedup(&mut once);
        prop_assert_eq!(validate(&once), Ok(()));
        prop_assert_eq!(full(&once), before);
        prop_assert!(once.encoded_len() <= d.encoded_len(),
            "{} > {}", once.encoded_len(), d.encoded_len());
        prop_assert!(no_duplicates(once.dictionary.as_ref().unwrap()));
        prop_assert!(mark(&once).all_live());
        let mut twice = once.clone();
        dedup(&mut twice);
        prop_assert_eq!(twice, once);

        // Without gc: orphans stay (deduplicated too), meaning and size hold.
        let mut keep = d.clone();
        let stats = dedup_with(&mut keep, false);
        prop_assert_eq!(validate(&keep), Ok(()));
        prop_assert_eq!(full(&keep), full(&d));
        prop_assert!(keep.encoded_len() <= d.encoded_len());
        prop_assert!(no_duplicates(keep.dictionary.as_ref().unwrap()));
        prop_assert_eq!(stats.after, PerTable::lens(keep.dictionary.as_ref().unwrap()));
        // With no duplicates left, gc and dedup agree exactly.
        let mut collected = keep.clone();
        gc(&mut collected);
        dedup(&mut keep);
        prop_assert_eq!(collected, keep);
    }

    #[test]
    fn split_parts_are_self_contained_and_merge_back(d in data()) {
        let before = full(&d);
        let parts = split_by_resource(d.clone());
        prop_assert_eq!(parts.len(), d.resource_profiles.len());
        for p in &parts {
            prop_assert_eq!(validate(p), Ok(()));
            prop_assert!(mark(p).all_live());
        }
        prop_assert_eq!(full(&merge_all(parts)), before);
    }

    /// A subset encoded straight from the batch is byte for byte its plain
    /// part, which is self-contained and resolves to the subset's profiles.
    #[test]
    fn subsets_encode_as_their_plain_parts(
        d in data(),
        groups in prop::collection::vec(0..4u32, 0..12),
    ) {
        let mut d = d;
        let mut n = 0usize;
        for r in &mut d.resource_profiles {
            r.schema_url = format!("r{n}");
            for s in &mut r.scope_profiles {
                for p in &mut s.profiles {
                    // The fields the generator leaves at their defaults.
                    p.profile_id = vec![n as u8 + 1; 16];
                    p.duration_nano = n as u64 * 10;
                    p.dropped_attributes_count = n as u32 % 2;
                    p.original_payload_format = if n.is_multiple_of(2) { "pprof".into() } else { String::new() };
                    p.original_payload = vec![7; n % 3];
                    n += 1;
                }
            }
        }
        // Group 3 is none of the three.
        let group: Vec<u32> = (0..n).map(|i| groups.get(i).copied().unwrap_or(3)).collect();
        let resolved = full(&d);
        for (g, part) in subsets(&d, &group, 3).into_iter().enumerate() {
            let want: Vec<u32> = (0..n as u32).filter(|&i| group[i as usize] == g as u32).collect();
            let Some(part) = part else {
                prop_assert!(want.is_empty());
                continue;
            };
            prop_assert_eq!(part.profiles(), &want[..]);
            let plain = part.to_data(&d);
            prop_assert_eq!(validate(&plain), Ok(()));
            prop_assert!(mark(&plain).all_live());
            prop_assert_eq!(part.encode(&d), plain.encode_to_vec());
            let expected: Vec<_> = want.iter().map(|&i| resolved[i as usize].clone()).collect();
            prop_assert_eq!(full(&plain), expected);
        }
    }

    #[test]
    fn resolving_references_keeps_the_view(d in data()) {
        let before = full(&d);
        let mut r = d.clone();
        resolve_references(&mut r);
        prop_assert_eq!(validate(&r), Ok(()));
        prop_assert_eq!(full(&r), before.clone());
        dedup(&mut r);
        prop_assert_eq!(full(&r), before);
    }

    #[test]
    fn validate_names_a_single_corrupted_index(
        d in data(),
        pick in any::<prop::sample::Index>(),
        negative in any::<bool>(),
    ) {
        let mut sites = 0;
        for_each_site(&mut d.clone(), &mut |_, _, _| sites += 1);
        prop_assume!(sites > 0);
        let target = pick.index(sites);
        let dict = d.dictionary.clone().unwrap_or_default();
        let mut bad = d.clone();
        let mut expected = String::new();
        let mut k = 0;
        for_each_site(&mut bad, &mut |path, table, i| {
            if k == target {
                let len = table_len(&dict, table);
                *i = if negative { -1 - (len as i32 % 3) } else { len.max(1) as i32 };
                expected = format!("{path}: {} out of range ({table} has {len} entries)", *i);
            }
            k += 1;
        });
        let err = validate(&bad).expect_err("a corrupted index must be rejected");
        prop_assert_eq!(err.to_string(), expected);
    }
}

// ---------------------------------------------------------------- fixtures

fn fixture(name: &str) -> ProfilesData {
    let bytes = profcol_pipeline::testing::fixture(&format!("otlp/{name}"));
    let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
    profcol_pipeline::proto::request_into_data(req)
}

const FIXTURES: &[&str] = &[
    "minimal-request.bin",
    "two-resources-request.bin",
    "go-cpu.otlp.bin",
];

#[test]
fn fixtures_validate_and_survive_every_operation() {
    for name in FIXTURES {
        let d = fixture(name);
        assert_eq!(validate(&d), Ok(()), "{name}");
        let view = full(&d);
        assert!(!view.is_empty(), "{name}");

        let mut g = d.clone();
        gc(&mut g);
        assert_eq!(validate(&g), Ok(()), "{name}");
        assert_eq!(full(&g), view, "{name}: gc");

        let mut u = d.clone();
        dedup(&mut u);
        assert_eq!(validate(&u), Ok(()), "{name}");
        assert_eq!(full(&u), view, "{name}: dedup");
        assert!(u.encoded_len() <= d.encoded_len(), "{name}");

        let mut r = d.clone();
        resolve_references(&mut r);
        dedup(&mut r);
        assert_eq!(full(&r), view, "{name}: resolve_references");
    }
}

#[test]
fn fixtures_merge_into_one_dictionary() {
    let inputs: Vec<ProfilesData> = FIXTURES.iter().map(|n| fixture(n)).collect();
    let expected: Vec<ResolvedProfile> = inputs.iter().flat_map(full).collect();
    let merged = merge_all(inputs.clone());
    assert_eq!(validate(&merged), Ok(()));
    assert_eq!(full(&merged), expected);
    assert!(no_duplicates(merged.dictionary.as_ref().unwrap()));

    // Merging a request with itself adds no dictionary entry.
    let go = fixture("go-cpu.otlp.bin");
    let mut deduped = go.clone();
    dedup(&mut deduped);
    let mut twice = deduped.clone();
    merge(&mut twice, go.clone());
    assert_eq!(twice.dictionary, deduped.dictionary);
    assert_eq!(
        twice.resource_profiles.len(),
        2 * go.resource_profiles.len()
    );
}

#[test]
fn minimal_fixture_resolves_to_folded_stacks() {
    let text = resolve(&fixture("minimal-request.bin"), Detail::Names).to_text();
    assert_eq!(
        text,
        "profile sample_type=cpu/nanoseconds period_type=cpu/nanoseconds period=10000000\n\
         \x20 resource: service.name=holdout-minimal\n\
         \x20 scope: holdout 1\n\
         \x20 main;work 10000000\n\
         \x20 main;work;leaf 30000000\n\
         \x20 main;work;leaf [thread.name=main] 20000000\n"
    );
}

#[test]
fn a_builder_continuing_a_dictionary_only_appends() {
    let d = fixture("two-resources-request.bin").dictionary.unwrap();
    let mut b = DictionaryBuilder::from_dictionary(d.clone());
    for (i, s) in d.string_table.iter().enumerate() {
        assert_eq!(b.string(s), i as i32, "{s}");
    }
    let fresh = b.string("a string no fixture has");
    assert_eq!(fresh as usize, d.string_table.len());
    let out = b.finish();
    assert_eq!(out.string_table[..d.string_table.len()], d.string_table[..]);
    assert_eq!(out.location_table, d.location_table);
}

/// Flat total of `leaf`: lines whose last frame it is.
fn flat(p: &ResolvedProfile, leaf: &str) -> i64 {
    p.samples
        .iter()
        .filter(|(line, _)| {
            let frames = line.split(" [").next().unwrap();
            frames.rsplit(';').next() == Some(leaf)
        })
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn go_fixture_agrees_with_go_tool_pprof() {
    // tests/fixtures/pprof/go-cpu.top.txt: Total samples = 5.90s,
    // main.fibRecursive 1.56s flat, crypto/sha256.block 1.04s flat,
    // runtime.nextFreeFast inlined (into runtime.mallocgc) 0.05s flat.
    let d = fixture("go-cpu.otlp.bin");
    let profiles = folded(&d);
    let of = |t: &str| profiles.iter().find(|p| p.sample_type == t).unwrap();
    let (count, cpu) = (of("samples/count"), of("cpu/nanoseconds"));
    assert_eq!(count.samples.values().sum::<i64>(), 590);
    assert_eq!(cpu.samples.values().sum::<i64>(), 5_900_000_000);
    assert_eq!(flat(count, "main.fibRecursive"), 156);
    assert_eq!(flat(cpu, "crypto/sha256.block"), 1_040_000_000);
    assert_eq!(flat(count, "runtime.nextFreeFast"), 5);
    assert!(count
        .samples
        .keys()
        .any(|l| l.contains(";runtime.mallocgc;runtime.nextFreeFast [")));

    // The inlined frames share one location: lines[0] is the callee.
    let lookup = profcol_pipeline::model::dictionary::Lookup::of(&d);
    let name = |l: &Line| lookup.string(lookup.function(l.function_index).name_strindex);
    let dict = d.dictionary.as_ref().unwrap();
    assert!(dict.location_table.iter().any(|loc| {
        loc.lines.len() == 2
            && name(&loc.lines[0]) == "runtime.nextFreeFast"
            && name(&loc.lines[1]) == "runtime.mallocgc"
    }));
}
