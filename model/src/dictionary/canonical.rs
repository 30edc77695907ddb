//! Whether a dictionary is already what a rebuild by value would make of
//! it, so that the rebuild can be skipped: the eBPF profiler (and
//! beacon-profiling, and requests built with Python's opentelemetry-proto;
//! recorded in tests/fixtures/otlp-revisions) send tables with no
//! duplicate and no orphan, and moving every entry into new tables only to
//! find that no index changed costs more than looking. (async-profiler
//! repeats stacks: its requests get the rebuild.)

use std::hash::Hasher;

use hashbrown::hash_table::{Entry, HashTable};
use rustc_hash::FxHasher;

use super::{DictHash, Live};
use crate::proto::{ProfilesDictionary, ZeroEntry};

/// True when rebuilding `dict` by value keeping the `live` entries would
/// give it back unchanged but for its zero values written otherwise
/// ([`zero_values_as_default`]): every entry live, each non-empty table
/// starting with its zero value and holding no other and no two equal
/// entries. Tables are compared on their indices as written, which is
/// comparing by value once every table is known to hold each value once
/// (a false answer only sends the caller to the rebuild).
pub(crate) fn is_canonical(dict: &ProfilesDictionary, live: &Live) -> bool {
    if !live.all_live() {
        return false;
    }
    let mut p = Probe::default();
    p.unique(&dict.string_table)
        && p.unique(&dict.attribute_table)
        && p.unique(&dict.mapping_table)
        && p.unique(&dict.function_table)
        && p.unique(&dict.location_table)
        && p.unique(&dict.stack_table)
        && p.unique(&dict.link_table)
}

/// Each table's zero value (which [`is_canonical`] found first) written
/// as the default, as the rebuild writes it: pdata writes the zero
/// attribute with an empty `value`, and so the eBPF profiler sends it.
pub(crate) fn zero_values_as_default(dict: &mut ProfilesDictionary) {
    fn first<T: Default>(t: &mut [T]) {
        if let Some(z) = t.first_mut() {
            *z = T::default();
        }
    }
    first(&mut dict.string_table);
    first(&mut dict.attribute_table);
    first(&mut dict.mapping_table);
    first(&mut dict.function_table);
    first(&mut dict.location_table);
    first(&mut dict.stack_table);
    first(&mut dict.link_table);
}

/// The 64-bit hashes of one table's entries, reused from table to table.
/// Two equal hashes count as a duplicate: a collision only sends the
/// caller to the rebuild, so the hash needs speed more than a seed or the
/// values to compare (an input made to collide gets the rebuild it would
/// have had anyway).
#[derive(Default)]
struct Probe {
    seen: HashTable<u64>,
}

impl Probe {
    fn unique<T: DictHash + PartialEq + ZeroEntry + Default>(&mut self, values: &[T]) -> bool {
        let Some((first, rest)) = values.split_first() else {
            return true;
        };
        if !first.is_zero() {
            return false;
        }
        self.seen.clear();
        self.seen.reserve(rest.len(), |&h| h);
        rest.iter().all(|v| {
            if v.is_zero() {
                return false;
            }
            let mut hasher = FxHasher::default();
            v.dict_hash(&mut hasher);
            let h = hasher.finish();
            match self.seen.entry(h, |&s| s == h, |&s| s) {
                Entry::Occupied(_) => false,
                Entry::Vacant(slot) => {
                    slot.insert(h);
                    true
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dictionary::{dedup_rebuilding, dedup_with, mark_parts, PerTable};
    use crate::proto::{KeyValueAndUnit, Location, ProfilesData};
    use crate::synth;

    fn canonical(d: &ProfilesData) -> bool {
        let dict = d.dictionary.as_ref().unwrap();
        is_canonical(dict, &mark_parts(dict, &d.resource_profiles))
    }

    /// Canonical but for orphans, which a rebuild without gc keeps.
    fn unique(d: &ProfilesData) -> bool {
        let dict = d.dictionary.as_ref().unwrap();
        is_canonical(dict, &Live::all(PerTable::lens(dict)))
    }

    fn edited(f: impl FnOnce(&mut ProfilesDictionary)) -> ProfilesData {
        let mut d = synth::request(300, 100);
        f(d.dictionary.as_mut().unwrap());
        d
    }

    #[test]
    fn a_request_as_producers_write_it_is_canonical() {
        assert!(canonical(&synth::request(300, 100)));
    }

    #[test]
    fn a_zero_written_otherwise_is_canonical_once_written_as_the_default() {
        // pdata's zero attribute, an empty `value` rather than none.
        let mut d = edited(|d| {
            d.attribute_table[0] = KeyValueAndUnit {
                value: Some(Default::default()),
                ..Default::default()
            };
        });
        assert!(canonical(&d));
        // Left in place, it comes out as the rebuild writes it.
        let mut rebuilt = d.clone();
        dedup_rebuilding(&mut rebuilt, true);
        dedup_with(&mut d, true);
        assert_eq!(d, rebuilt);
        let dict = d.dictionary.as_ref().unwrap();
        assert_eq!(dict.attribute_table[0], KeyValueAndUnit::default());
    }

    #[test]
    fn a_duplicate_or_a_second_zero_is_not() {
        // One duplicate at the bottom, one at the top of the tables.
        assert!(!unique(&edited(|d| {
            let s = d.string_table[1].clone();
            d.string_table.push(s);
        })));
        assert!(!unique(&edited(|d| {
            let l = d.location_table[1].clone();
            d.location_table.push(l);
        })));
        assert!(!unique(&edited(|d| d
            .location_table
            .push(Location::default()))));
    }

    #[test]
    fn an_orphan_is_not_unless_orphans_stay() {
        let d = edited(|d| d.string_table.push("nobody's".into()));
        assert!(!canonical(&d));
        assert!(unique(&d));
    }
}
