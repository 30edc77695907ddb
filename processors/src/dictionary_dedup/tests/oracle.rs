//! `dictionary_dedup` against a reference model: the resolved content of
//! every profile is what it was, except that with `merge_samples` the
//! samples of one identity (resolved stack, attribute multiset, link, shape)
//! are one sample, the first, with the later ones' points appended in
//! order (samples without points stay alone); and the dictionary it leaves
//! has no two equal entries in any table, the zero value at index 0 of
//! each, with `gc` no entry nothing refers to, and with
//! `resolve_references` no string reference.

use profcol_model::dictionary::{gc, resolve_references};

use crate::oracle::{self, Attr, Frame, RProfile, RSample};

use super::*;

/// The shape a sample records its points in (the merge never mixes them).
fn shape(s: &RSample) -> (bool, bool) {
    (s.timestamps.is_empty(), s.values.is_empty())
}

type Identity<'a> = (
    &'a [Frame],
    Vec<&'a Attr>,
    &'a (Vec<u8>, Vec<u8>),
    (bool, bool),
);

fn identity(s: &RSample) -> Identity<'_> {
    let mut attrs: Vec<_> = s.attributes.iter().collect();
    attrs.sort();
    (&s.stack, attrs, &s.link, shape(s))
}

/// The profiles with their samples merged, and how many samples went.
fn merged(input: &[RProfile]) -> (Vec<RProfile>, u64) {
    let mut gone = 0;
    let out = input
        .iter()
        .map(|p| {
            let mut samples: Vec<RSample> = Vec::new();
            for s in &p.samples {
                let points = !(s.values.is_empty() && s.timestamps.is_empty());
                let first = samples
                    .iter_mut()
                    .find(|t| points && identity(t) == identity(s));
                match first {
                    Some(t) => {
                        t.values.extend_from_slice(&s.values);
                        t.timestamps.extend_from_slice(&s.timestamps);
                        gone += 1;
                    }
                    None => samples.push(s.clone()),
                }
            }
            RProfile {
                samples,
                ..p.clone()
            }
        })
        .collect();
    (out, gone)
}

/// Whether a table has two equal entries.
fn has_duplicates<T: PartialEq>(t: &[T]) -> bool {
    t.iter()
        .enumerate()
        .any(|(i, a)| t[i + 1..].iter().any(|b| a == b))
}

/// Whether a non-empty table starts with anything but its zero value.
fn zero_first<T: Default + PartialEq>(t: &[T]) -> bool {
    t.first().is_none_or(|z| *z == T::default())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn dictionary_dedup_matches_the_reference_model(
        mut d in testdata::data(),
        gc_on in any::<bool>(),
        merge in any::<bool>(),
        resolve_refs in any::<bool>(),
    ) {
        if !resolve_refs {
            // Unresolved, a reference and the plain string it names are
            // different entries (equal once resolved): the model's identity
            // holds for data without references.
            resolve_references(&mut d);
        }
        let cfg = DictionaryDedupConfig { gc: gc_on, merge_samples: merge, resolve_references: resolve_refs };
        let input = oracle::resolve(&d);
        let (want, gone) = if merge { merged(&input) } else { (input, 0) };
        let mut batch = ProfileBatch::new(d);
        let mut p = DictionaryDedup::new(cfg);
        let (verdict, drops, events) = oracle::run(&mut p, &mut batch);
        prop_assert_eq!(verdict, profcol_pipeline::component::Verdict::Keep);
        prop_assert!(drops.is_empty());
        prop_assert_eq!(events.get("samples_merged").copied().unwrap_or(0), gone);
        let out = batch.data();
        validate(out).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            oracle::normalized(oracle::resolve(out)),
            oracle::normalized(want)
        );
        let t = out.dictionary.as_ref().unwrap();
        prop_assert!(!has_duplicates(&t.string_table), "strings {:?}", t.string_table);
        prop_assert!(!has_duplicates(&t.mapping_table), "mappings {:?}", t.mapping_table);
        prop_assert!(!has_duplicates(&t.function_table), "functions {:?}", t.function_table);
        prop_assert!(!has_duplicates(&t.location_table), "locations {:?}", t.location_table);
        prop_assert!(!has_duplicates(&t.stack_table), "stacks {:?}", t.stack_table);
        prop_assert!(!has_duplicates(&t.attribute_table), "attributes {:?}", t.attribute_table);
        prop_assert!(!has_duplicates(&t.link_table), "links {:?}", t.link_table);
        prop_assert!(
            zero_first(&t.string_table)
                && zero_first(&t.mapping_table)
                && zero_first(&t.function_table)
                && zero_first(&t.location_table)
                && zero_first(&t.stack_table)
                && zero_first(&t.attribute_table)
                && zero_first(&t.link_table),
            "{:?}",
            t
        );
        if gc_on {
            prop_assert_eq!(gc(&mut out.clone()).removed_total(), 0);
        }
        if resolve_refs {
            prop_assert!(!has_references(out));
        }
    }
}
