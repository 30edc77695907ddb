use crate::proto::{ProfilesData, ProfilesDictionary};

use super::canonical::{is_canonical, zero_values_as_default};
use super::{intern_live, mark_parts, DictionaryBuilder, GcStats, Live, PerTable};

/// Rebuilds the dictionary by value, bottom up (strings, attributes, mappings,
/// functions, locations, stacks, links): entries equal by value get one index
/// and unreferenced entries are dropped. What the `dictionary_dedup`
/// processor runs.
///
/// Entries keep their relative order and no index grows, so the encoded size
/// never grows; an input table that was empty stays empty. Idempotent.
pub fn dedup(data: &mut ProfilesData) -> GcStats {
    dedup_with(data, true)
}

/// [`dedup`], or with `gc == false` a rebuild by value that keeps
/// unreferenced entries (still merging them with their equals). A
/// dictionary the rebuild would give back unchanged is left in place.
pub fn dedup_with(data: &mut ProfilesData, gc: bool) -> GcStats {
    rebuild(data, gc, true)
}

/// [`dedup_with`] rebuilding even a dictionary it would leave in place:
/// what the tests hold the shortcut to.
#[cfg(any(test, feature = "testing"))]
pub fn dedup_rebuilding(data: &mut ProfilesData, gc: bool) -> GcStats {
    rebuild(data, gc, false)
}

fn rebuild(data: &mut ProfilesData, gc: bool, shortcut: bool) -> GcStats {
    let Some(mut dict) = data.dictionary.take() else {
        return GcStats::default();
    };
    let before = PerTable::lens(&dict);
    let live = if gc {
        mark_parts(&dict, &data.resource_profiles)
    } else {
        Live::all(before)
    };
    if shortcut && is_canonical(&dict, &live) {
        zero_values_as_default(&mut dict);
        data.dictionary = Some(dict);
        return GcStats {
            before,
            after: before,
        };
    }
    let mut b = DictionaryBuilder::with_capacity_for(&dict);
    let remap = intern_live(&mut b, dict, &live);
    remap.apply_to_resources(&mut data.resource_profiles);
    let mut out = b.finish();
    keep_empty_tables(&mut out, before);
    let after = PerTable::lens(&out);
    data.dictionary = Some(out);
    GcStats { before, after }
}

/// The builder always holds a zero value; a table that arrived empty was only
/// referenced through the null index 0, so leaving it empty keeps the meaning.
fn keep_empty_tables(d: &mut ProfilesDictionary, before: PerTable) {
    fn clear<T>(table: &mut Vec<T>, was: usize) {
        if was == 0 && table.len() == 1 {
            table.clear();
        }
    }
    clear(&mut d.string_table, before.strings);
    clear(&mut d.mapping_table, before.mappings);
    clear(&mut d.location_table, before.locations);
    clear(&mut d.function_table, before.functions);
    clear(&mut d.link_table, before.links);
    clear(&mut d.attribute_table, before.attributes);
    clear(&mut d.stack_table, before.stacks);
}
