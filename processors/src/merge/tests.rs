//! [`SampleMerger::merge`] against a model: a map from each sample's rewritten
//! identity and shape to the first sample's position. Stacks here are seen
//! with many identities (attribute sets, links, shapes), more than the
//! per-stack slots hold, so every way to a group is taken: the slots, the
//! table of coded identities, and the hash table of uncoded ones.

use std::collections::BTreeMap;

use proptest::prelude::*;

use profcol_model::dictionary::{SampleMarks, SampleShape};
use profcol_model::proto::{Profile, Sample};

use super::{SampleMerger, Tables, DROP};

const ATTRIBUTES: usize = 6;

/// (stack, attributes, link, shape, points) per sample.
type Spec = (i32, Vec<i32>, i32, u8, usize);

fn sample(&(stack, ref attrs, link, shape, points): &Spec, k: usize) -> Sample {
    let k = k as u64 * 10;
    let times: Vec<u64> = (0..points as u64).map(|p| k + p).collect();
    let (values, timestamps_unix_nano) = match shape {
        _ if points == 0 => (vec![], vec![]),
        0 => (vec![k as i64 + 1], vec![]),
        1 => (vec![], times),
        _ => (times.iter().map(|&t| t as i64).collect(), times),
    };
    Sample {
        stack_index: stack,
        attribute_indices: attrs.clone(),
        link_index: link,
        values,
        timestamps_unix_nano,
    }
}

/// What `map` makes of `attrs`, as a multiset.
fn rewritten(map: &[u32], attrs: &[i32]) -> Vec<i32> {
    let mut out: Vec<i32> = attrs
        .iter()
        .filter_map(
            |&a| match usize::try_from(a).ok().and_then(|i| map.get(i)) {
                Some(&DROP) => None,
                Some(&m) => Some(m as i32),
                None => Some(a),
            },
        )
        .collect();
    out.sort_unstable();
    out
}

fn arb_case() -> impl Strategy<Value = (Vec<Spec>, Vec<u32>, usize)> {
    // Indices one past each table (or negative) take the uncoded way.
    let attrs = prop::collection::vec(-1..ATTRIBUTES as i32 + 1, 0..4);
    // Stack 2 and links past `links` are outside their tables; two stacks
    // in the table see more identities than they have slots.
    // No points: an invalid sample, left alone.
    let spec = (0..3i32, attrs, 0..7i32, 0..3u8, 0..4usize);
    let map = prop::collection::vec(
        prop_oneof![Just(DROP), (0..ATTRIBUTES as u32)],
        0..ATTRIBUTES,
    );
    (prop::collection::vec(spec, 0..160), map, 1..8usize)
}

proptest! {
    #[test]
    fn merge_folds_exactly_the_samples_of_one_identity_in_order((specs, map, links) in arb_case()) {
        let samples: Vec<Sample> = specs.iter().enumerate().map(|(k, s)| sample(s, k)).collect();
        // The model: groups in the order of their first samples, each
        // the first sample rewritten, with the later members' points after.
        let mut index: BTreeMap<(i32, Vec<i32>, i32, u8), usize> = BTreeMap::new();
        let mut want: Vec<Sample> = Vec::new();
        for s in &samples {
            let attrs = rewritten(&map, &s.attribute_indices);
            if s.values.is_empty() && s.timestamps_unix_nano.is_empty() {
                want.push(Sample { attribute_indices: attrs, ..s.clone() });
                continue;
            }
            let key = (s.stack_index, attrs.clone(), s.link_index, SampleShape::of(s) as u8);
            match index.get(&key) {
                Some(&g) => {
                    want[g].values.extend_from_slice(&s.values);
                    want[g].timestamps_unix_nano.extend_from_slice(&s.timestamps_unix_nano);
                }
                None => {
                    index.insert(key, want.len());
                    want.push(Sample { attribute_indices: attrs, ..s.clone() });
                }
            }
        }

        let mut profile = Profile { samples, ..Profile::default() };
        let tables = Tables { stacks: 2, attributes: ATTRIBUTES, links };
        let mut marks = SampleMarks::default();
        marks.reset(tables.stacks, tables.links, tables.attributes);
        let mut merger = SampleMerger::default();
        // Twice with one merger: buffers reused from a call must not leak
        // into the next.
        for _ in 0..2 {
            let mut p = profile.clone();
            let merged = merger.merge(&mut p, tables, &map, Some(&mut marks));
            prop_assert_eq!(merged, specs.len() - want.len());
            for s in &mut p.samples {
                s.attribute_indices.sort_unstable();
            }
            prop_assert_eq!(&p.samples, &want);
        }
        profile.samples.clear();
        prop_assert_eq!(merger.merge(&mut profile, tables, &map, None), 0);
    }
}
