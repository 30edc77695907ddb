//! Properties of the dictionary operations on random valid `ProfilesData`
//! (duplicates, orphans, inlined lines, attributes, links, timestamps), and
//! the same operations on recorded OTLP payloads.

mod generate;

use proptest::prelude::*;
use prost::Message;

use generate::*;

use profcol_model::dictionary::{
    dedup, dedup_rebuilding, dedup_with, gc, mark, merge, merge_all, resolve_references,
    split_by_resource, subsets, DictionaryBuilder, PerTable,
};
use profcol_model::proto::{
    AnyValue, ExportProfilesServiceRequest, Line, Link, ProfilesData, ProfilesDictionary,
};
use profcol_model::{folded, resolve, validate, Detail, ResolvedProfile};

fn full(data: &ProfilesData) -> Vec<ResolvedProfile> {
    resolve(data, Detail::Full).profiles
}

/// True when no two entries of any table are equal.
fn no_duplicates(d: &ProfilesDictionary) -> bool {
    fn distinct<T: PartialEq + Clone + profcol_model::dictionary::DictHash + Default>(
        t: &[T],
    ) -> bool {
        let mut i = profcol_model::dictionary::Interner::<T>::new();
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
        prop_assert_eq!(&twice, &once);
        // Leaving a dictionary that is already canonical in place gives
        // what rebuilding it gives, on a first pass or a second.
        for (input, gc) in [(&d, true), (&d, false), (&once, true), (&once, false)] {
            let (mut kept, mut rebuilt) = (input.clone(), input.clone());
            prop_assert_eq!(dedup_with(&mut kept, gc), dedup_rebuilding(&mut rebuilt, gc));
            prop_assert_eq!(kept, rebuilt);
        }

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
    let bytes = profcol_model::testing::fixture(&format!("otlp/{name}"));
    let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
    profcol_model::proto::request_into_data(req)
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

/// pdata writes the zero attribute with an empty `value` present and
/// async-profiler 4.5 the zero link as zero bytes: dedup and merge take
/// such an entry as the zero entry it is, adding no entry for it and
/// moving nothing that refers to it.
#[test]
fn zero_entries_written_otherwise_stay_the_zero_entry() {
    let plain = fixture("go-cpu.otlp.bin");
    let mut written = plain.clone();
    let dict = written.dictionary.as_mut().unwrap();
    dict.attribute_table[0].value = Some(AnyValue::default());
    dict.link_table = vec![Link {
        trace_id: vec![0; 16],
        span_id: vec![0; 8],
    }];
    assert_eq!(validate(&written), Ok(()));
    assert_eq!(full(&written), full(&plain));

    let (mut a, mut b) = (plain.clone(), written.clone());
    dedup(&mut a);
    dedup(&mut b);
    assert_eq!(b, a);

    let (mut a, mut b) = (plain.clone(), written.clone());
    merge(&mut a, plain);
    merge(&mut b, written);
    assert_eq!(b, a);
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
    let lookup = profcol_model::dictionary::Lookup::of(&d);
    let name = |l: &Line| lookup.string(lookup.function(l.function_index).name_strindex);
    let dict = d.dictionary.as_ref().unwrap();
    assert!(dict.location_table.iter().any(|loc| {
        loc.lines.len() == 2
            && name(&loc.lines[0]) == "runtime.nextFreeFast"
            && name(&loc.lines[1]) == "runtime.mallocgc"
    }));
}
