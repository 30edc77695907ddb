//! The wire check against the decoding path it stands in for: whenever it
//! finds a request clean, prost decodes it, validation finds nothing,
//! revision detection reads it as the current revision, and the counts
//! agree, down to the heap the decoded messages hold. Checked on random valid data, on the same data corrupted byte by
//! byte and index by index, and on recorded requests.

// The generators of profcol-model's own tests.
#[path = "../../../model/tests/generate/mod.rs"]
mod generate;

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;

use generate::{data, for_each_site, Sizes};
use profcol_model::footprint::heap_bytes;
use profcol_model::proto::{any_value, AnyValue, ProfilesData};
use profcol_model::wire_check::{check, decode_clean, Clean};
use profcol_model::{findings, ProfileBatch};
use profcol_otlp::revisions::{self as otlp_revisions, Revision};

/// What the decoding path says of `bytes`, as the wire check would.
fn decoding_path(bytes: &[u8]) -> Option<Clean> {
    let data = ProfilesData::decode(bytes).ok()?;
    if !findings(&data).is_valid() {
        return None;
    }
    let read = otlp_revisions::decode(&Bytes::copy_from_slice(bytes)).ok()?;
    if read.revision != Revision::CURRENT {
        return None;
    }
    let heap = heap_bytes(&data);
    let batch = ProfileBatch::new(data);
    Some(Clean {
        samples: batch.sample_count(),
        profiles: batch.profile_count(),
        heap,
    })
}

/// Sound: clean means clean, with the same counts; decoded clean, the
/// same data too, and the heap it holds.
fn agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Some(c) = check(bytes) {
        prop_assert_eq!(Some(c), decoding_path(bytes), "clean on the wire only");
    }
    if let Some((batch, c)) = decode_clean(&Bytes::copy_from_slice(bytes)) {
        let want = decoding_path(bytes);
        prop_assert!(want.is_some(), "decoded clean only");
        prop_assert_eq!(
            (c.samples, c.profiles),
            want.map(|w| (w.samples, w.profiles)).unwrap()
        );
        prop_assert_eq!(batch.data(), &ProfilesData::decode(bytes).unwrap());
        prop_assert_eq!(c.heap, heap_bytes(batch.data()));
        prop_assert_eq!(
            batch.encoded().map(|b| &b[..]),
            Some(bytes),
            "it keeps its bytes"
        );
        prop_assert_eq!(batch.held_bytes(), bytes.len() + c.heap);
        // Changed, it is measured again.
        let mut changed = batch;
        let dict = changed.data_mut().dictionary.get_or_insert_default();
        dict.string_table.push("x".repeat(100));
        prop_assert_eq!(changed.held_bytes(), heap_bytes(changed.data()));
    }
    Ok(())
}

/// A few byte-level changes: flips, truncation, insertion, a duplicated span.
fn mutate(bytes: &[u8], ops: &[(u8, usize, u8)]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for &(op, at, v) in ops {
        if b.is_empty() {
            break;
        }
        let at = at % b.len();
        match op % 5 {
            0 => b[at] ^= v | 1,
            1 => b[at] = v,
            2 => b.truncate(at),
            3 => b.insert(at, v),
            _ => {
                let end = (at + usize::from(v % 16) + 1).min(b.len());
                let span = b[at..end].to_vec();
                b.splice(at..at, span);
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_requests_are_clean_with_their_counts(d in data()) {
        let bytes = d.encode_to_vec();
        let want = decoding_path(&bytes);
        prop_assert!(want.is_some());
        prop_assert_eq!(check(&bytes), want);
        prop_assert!(decode_clean(&Bytes::from(bytes.clone())).is_some(), "what prost writes");
        agrees(&bytes)?;
    }

    #[test]
    fn changed_bytes_are_never_clean_where_decoding_says_otherwise(
        d in data(),
        ops in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let bytes = mutate(&d.encode_to_vec(), &ops);
        agrees(&bytes)?;
    }

    #[test]
    fn a_broken_index_anywhere_is_not_clean(d in data(), pick in any::<usize>(), past in 0..3i32) {
        let mut d = d;
        let mut sites = 0usize;
        for_each_site(&mut d, &mut |_, _, _| sites += 1);
        prop_assume!(sites > 0);
        let target = pick % sites;
        let mut k = 0;
        let lens = table_lens(&d);
        for_each_site(&mut d, &mut |_, table, i| {
            if k == target {
                // Out of range (past the end; 0 is valid in an empty
                // table), or negative.
                let len = lens(table) as i32;
                *i = if past == 2 { -1 } else { len + past + i32::from(len == 0) };
            }
            k += 1;
        });
        let bytes = d.encode_to_vec();
        prop_assert_eq!(check(&bytes), None);
        prop_assert!(decode_clean(&Bytes::from(bytes.clone())).is_none());
        prop_assert_eq!(decoding_path(&bytes), None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_real_entry_at_index_0_is_not_clean(d in data(), table in 0..7usize) {
        let mut d = d;
        let dict = d.dictionary.get_or_insert_with(Default::default);
        let real = match table {
            0 => dict.string_table.first_mut().map(|s| *s = "x".into()),
            1 => dict.mapping_table.first_mut().map(|m| m.memory_start = 1),
            2 => dict.location_table.first_mut().map(|l| l.address = 1),
            3 => dict.function_table.first_mut().map(|f| f.start_line = 1),
            4 => dict.link_table.first_mut().map(|l| l.span_id = vec![1]),
            5 => dict.attribute_table.first_mut().map(|a| a.value = Some(AnyValue {
                value: Some(any_value::Value::IntValue(1)),
            })),
            _ => dict.stack_table.first_mut().map(|s| s.location_indices = vec![0]),
        };
        prop_assume!(real.is_some());
        let bytes = d.encode_to_vec();
        prop_assert_eq!(check(&bytes), None);
        prop_assert!(decode_clean(&Bytes::from(bytes.clone())).is_none());
        prop_assert_eq!(decoding_path(&bytes), None);
    }
}

fn table_lens(d: &ProfilesData) -> impl Fn(profcol_model::dictionary::Table) -> usize {
    use profcol_model::dictionary::Table;
    let dict = d.dictionary.clone().unwrap_or_default();
    move |t| match t {
        Table::String => dict.string_table.len(),
        Table::Mapping => dict.mapping_table.len(),
        Table::Location => dict.location_table.len(),
        Table::Function => dict.function_table.len(),
        Table::Link => dict.link_table.len(),
        Table::Attribute => dict.attribute_table.len(),
        Table::Stack => dict.stack_table.len(),
    }
}

/// Sizes are only named so the generator's type is in scope.
#[allow(dead_code)]
fn _sizes(_: Sizes) {}

#[test]
fn recorded_current_requests_are_clean_and_older_ones_are_not() {
    let dir = profcol_model::testing::fixtures_dir();
    let mut clean = 0;
    let mut files = Vec::new();
    for sub in ["otlp", "otlp-revisions"] {
        for entry in walk(&dir.join(sub)) {
            if entry
                .extension()
                .is_some_and(|e| e == "bin" || e == "binpb")
            {
                files.push(entry);
            }
        }
    }
    assert!(files.len() >= 4, "{files:?}");
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let got = check(&bytes);
        let want = decoding_path(&bytes);
        assert!(got.is_none() || got == want, "{}", f.display());
        agrees(&bytes).unwrap();
        let decoded =
            decode_clean(&Bytes::from(bytes.clone())).map(|(_, c)| (c.samples, c.profiles));
        assert_eq!(
            decoded,
            want.map(|w| (w.samples, w.profiles)),
            "{}",
            f.display()
        );
        if want.is_some() {
            assert_eq!(
                got,
                want,
                "{}: a clean recording takes the fast path",
                f.display()
            );
            clean += 1;
        }
    }
    // Three of tests/fixtures/otlp and python-proto-1.45.2's two.
    assert!(clean >= 5, "{clean} clean recordings");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_lazy_batch_reads_as_the_decoded_one() {
    let d = profcol_model::synth::request(2_000, 50);
    let bytes = Bytes::from(d.encode_to_vec());
    let clean = check(&bytes).expect("synthetic requests are clean");
    let lazy = ProfileBatch::checked(bytes.clone(), clean);
    assert!(!lazy.is_decoded());
    assert_eq!(
        lazy.sample_count(),
        ProfileBatch::new(d.clone()).sample_count()
    );
    assert_eq!(lazy.held_bytes(), clean.heap + bytes.len());
    assert_eq!(lazy.encoded(), Some(&bytes));
    assert!(!lazy.is_decoded(), "counting and forwarding decode nothing");
    assert_eq!(lazy.data(), &d);
    assert!(lazy.is_decoded());
    let mut changed = lazy.clone();
    changed.data_mut().resource_profiles.clear();
    assert_eq!(changed.encoded(), None);
    assert_eq!(changed.sample_count(), 0);
    assert_eq!(lazy.into_data(), d);
}

#[test]
fn a_forwarded_batch_holds_its_bytes_until_something_decodes_it() {
    use profcol_model::memory::{Held, MemoryBudget};
    let d = profcol_model::synth::request(2_000, 50);
    let bytes = Bytes::from(d.encode_to_vec());
    let clean = check(&bytes).expect("synthetic requests are clean");
    let budget = MemoryBudget::new(1 << 30);
    let full = bytes.len() + clean.heap;
    let mut lazy = ProfileBatch::checked(bytes.clone(), clean);
    lazy.meta.memory = Some(Held::new(budget.force(full)));
    lazy.hold_bytes_only(None);
    assert_eq!(budget.used(), bytes.len());
    assert!(!lazy.is_decoded());
    lazy.data();
    assert_eq!(budget.used(), full, "decoding reserves it again");
    lazy.hold_bytes_only(None);
    assert_eq!(
        budget.used(),
        full,
        "a decoded batch keeps its messages' share"
    );
}
