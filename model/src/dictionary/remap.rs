use crate::profiles_mut;
use crate::proto::{ProfilesData, ProfilesDictionary, ResourceProfiles};
use profcol_prefetch::{ahead, prefetch_slice};

use super::{visit, Live, Table};

/// Old index -> new index for one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRemap {
    map: Vec<i32>,
    identity: bool,
    /// Some entry that stays gets another index, so references need
    /// rewriting. False also when only entries past the last one kept go
    /// (often: entries appended, then orphaned).
    moves: bool,
    /// An index past the map stays as it is (a compaction: the table only
    /// shrinks, so it stays past the end) rather than becoming 0.
    keeps_unknown: bool,
}

impl TableRemap {
    /// Maps every index to itself.
    pub fn identity() -> Self {
        Self {
            map: Vec::new(),
            identity: true,
            moves: false,
            keeps_unknown: true,
        }
    }

    /// `map[old] = new`.
    pub fn from_vec(map: Vec<i32>) -> Self {
        let identity = map.iter().enumerate().all(|(i, &n)| n as usize == i);
        Self {
            map,
            identity,
            moves: !identity,
            keeps_unknown: false,
        }
    }

    /// Keeps the entries flagged in `keep`, in order: the new index of an
    /// entry is the number of kept entries before it. Dropped entries map to
    /// 0, unless no kept entry moves: then every index maps to itself (no
    /// reference to a dropped entry is left to rewrite).
    pub fn compacting(keep: &[bool]) -> Self {
        if keep.iter().all(|&k| k) {
            return Self::identity();
        }
        let first_dropped = keep.iter().position(|&k| !k);
        let last_kept = keep.iter().rposition(|&k| k);
        if last_kept.is_none_or(|l| first_dropped > Some(l)) {
            return Self {
                map: Vec::new(),
                identity: false,
                moves: false,
                keeps_unknown: true,
            };
        }
        let mut next = 0;
        let map = keep
            .iter()
            .map(|&k| {
                if k {
                    next += 1;
                    next - 1
                } else {
                    0
                }
            })
            .collect();
        // An entry dropped before a kept one: that one moves.
        Self {
            map,
            identity: false,
            moves: true,
            keeps_unknown: true,
        }
    }

    /// New index of `old`. An index the map does not know (only on
    /// unvalidated data) becomes the null index 0, or, after a compaction
    /// (which only shrinks the table, so it stays past the end), is left as
    /// it is: rewriting it or not when nothing moves gives the same result.
    #[inline]
    pub fn get(&self, old: i32) -> i32 {
        if !self.moves {
            return old;
        }
        match usize::try_from(old).ok().and_then(|i| self.map.get(i)) {
            Some(&new) => new,
            None if self.keeps_unknown => old,
            None => 0,
        }
    }

    /// Every entry stays where it is.
    pub fn is_identity(&self) -> bool {
        self.identity
    }

    /// Some entry that stays moves: references to the table change.
    pub fn moves(&self) -> bool {
        self.moves
    }

    /// Number of old indices the map holds (0 for [`TableRemap::identity`]
    /// and for a compaction where none moves).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Keeps the entries of `table` that `keep` flags, in order (entries past
/// `keep` stay): the move whose references [`TableRemap::compacting`] maps.
pub fn retain_flagged<T>(table: &mut Vec<T>, keep: &[bool]) {
    let mut flags = keep.iter();
    table.retain(|_| flags.next().copied().unwrap_or(true));
}

/// Old index -> new index for every table of a dictionary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remap {
    pub strings: TableRemap,
    pub mappings: TableRemap,
    pub locations: TableRemap,
    pub functions: TableRemap,
    pub links: TableRemap,
    pub attributes: TableRemap,
    pub stacks: TableRemap,
}

impl Default for Remap {
    fn default() -> Self {
        Self::identity()
    }
}

impl Remap {
    pub fn identity() -> Self {
        Self {
            strings: TableRemap::identity(),
            mappings: TableRemap::identity(),
            locations: TableRemap::identity(),
            functions: TableRemap::identity(),
            links: TableRemap::identity(),
            attributes: TableRemap::identity(),
            stacks: TableRemap::identity(),
        }
    }

    /// Keeps the entries `live` flags, in order ([`TableRemap::compacting`]).
    pub fn compacting(live: &Live) -> Self {
        Self {
            strings: TableRemap::compacting(&live.strings),
            mappings: TableRemap::compacting(&live.mappings),
            locations: TableRemap::compacting(&live.locations),
            functions: TableRemap::compacting(&live.functions),
            links: TableRemap::compacting(&live.links),
            attributes: TableRemap::compacting(&live.attributes),
            stacks: TableRemap::compacting(&live.stacks),
        }
    }

    pub fn table(&self, t: Table) -> &TableRemap {
        match t {
            Table::String => &self.strings,
            Table::Mapping => &self.mappings,
            Table::Location => &self.locations,
            Table::Function => &self.functions,
            Table::Link => &self.links,
            Table::Attribute => &self.attributes,
            Table::Stack => &self.stacks,
        }
    }

    pub fn table_mut(&mut self, t: Table) -> &mut TableRemap {
        match t {
            Table::String => &mut self.strings,
            Table::Mapping => &mut self.mappings,
            Table::Location => &mut self.locations,
            Table::Function => &mut self.functions,
            Table::Link => &mut self.links,
            Table::Attribute => &mut self.attributes,
            Table::Stack => &mut self.stacks,
        }
    }

    #[inline]
    pub fn map(&self, t: Table, old: i32) -> i32 {
        self.table(t).get(old)
    }

    pub fn is_identity(&self) -> bool {
        Table::ALL.iter().all(|&t| self.table(t).is_identity())
    }

    /// Some reference changes ([`TableRemap::moves`]).
    pub fn moves(&self) -> bool {
        Table::ALL.iter().any(|&t| self.table(t).moves())
    }

    /// Rewrites every index outside the dictionary: samples, profiles and the
    /// string references of resource and scope attributes.
    pub fn apply(&self, data: &mut ProfilesData) {
        self.apply_to_resources(&mut data.resource_profiles);
    }

    pub fn apply_to_resources(&self, resources: &mut [ResourceProfiles]) {
        if !self.moves() {
            return;
        }
        visit::resources_mut_with(resources, &mut |t, i| *i = self.map(t, *i), &mut || false);
        // Samples, by far the most indices, only refer to these tables (the
        // sample fields `visit` lists): rewritten in a tight loop that skips
        // the tables that keep their order, not a visit of every index.
        let (stacks, links, attributes) = (&self.stacks, &self.links, &self.attributes);
        let ids = stacks.moves() || links.moves();
        let attrs = attributes.moves();
        if !ids && !attrs {
            return;
        }
        for p in profiles_mut(resources) {
            let samples = &mut p.samples;
            for k in 0..samples.len() {
                if let Some(next) = ahead(samples, k).filter(|_| attrs) {
                    prefetch_slice(&next.attribute_indices);
                }
                let s = &mut samples[k];
                if ids {
                    s.stack_index = stacks.get(s.stack_index);
                    s.link_index = links.get(s.link_index);
                }
                if attrs {
                    s.attribute_indices
                        .iter_mut()
                        .for_each(|a| *a = attributes.get(*a));
                }
            }
        }
    }

    /// Rewrites the references between dictionary entries (not the tables'
    /// order: pair this with moving the entries to their new places).
    pub fn apply_to_dictionary(&self, dict: &mut ProfilesDictionary) {
        let f = &mut |t, i: &mut i32| *i = self.map(t, *i);
        let (strings, attributes) = (self.strings.moves(), self.attributes.moves());
        if strings || attributes {
            dict.mapping_table
                .iter_mut()
                .for_each(|m| visit::mapping_mut(m, f));
        }
        if strings {
            dict.attribute_table
                .iter_mut()
                .for_each(|a| visit::attribute_mut(a, f));
            dict.function_table
                .iter_mut()
                .for_each(|x| visit::function_mut(x, f));
        }
        if attributes || self.mappings.moves() || self.functions.moves() {
            dict.location_table
                .iter_mut()
                .for_each(|l| visit::location_mut(l, f));
        }
        if self.locations.moves() {
            let stacks = &mut dict.stack_table;
            for k in 0..stacks.len() {
                if let Some(next) = ahead(stacks, k) {
                    prefetch_slice(&next.location_indices);
                }
                visit::stack_mut(&mut stacks[k], f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_moves_nothing_when_only_entries_past_the_last_kept_go() {
        let tail = TableRemap::compacting(&[true, true, false, false]);
        assert!(!tail.is_identity() && !tail.moves());
        assert_eq!([0, 1, 2, 3].map(|i| tail.get(i)), [0, 1, 2, 3]);
        let inner = TableRemap::compacting(&[true, false, true, false]);
        assert!(inner.moves());
        // Unknown indices stay past the end of the shrunk table.
        assert_eq!([0, 2, 7, -1].map(|i| inner.get(i)), [0, 1, 7, -1]);
        // A general map sends what it does not know to the null index.
        let general = TableRemap::from_vec(vec![1, 0]);
        assert!(general.moves());
        assert_eq!([0, 1, 5].map(|i| general.get(i)), [1, 0, 0]);
        let remap = Remap {
            attributes: tail,
            ..Remap::identity()
        };
        assert!(!remap.is_identity() && !remap.moves());
    }
}
