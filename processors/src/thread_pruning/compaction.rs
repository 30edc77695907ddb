//! Removing the attribute entries the rewrite orphans (renamed away, or
//! dropped) together with the rewrite: the merge then writes each kept
//! sample's final attribute indices, and the garbage collection after it has
//! nothing left to re-index in those samples, which would cost a second
//! pass over every kept sample's attribute list.

use profcol_model::dictionary::{retain_flagged, visit, Remap, Table, TableRemap};
use profcol_model::proto::{ProfilesDictionary, ResourceProfiles};

use crate::merge::DROP;

/// The attribute entries that go, planned before the samples are rewritten.
pub(crate) struct Compaction {
    /// Per attribute entry: whether it stays.
    keep: Vec<bool>,
}

impl Compaction {
    /// Plans the removal of the entries of the attribute table (`len`
    /// entries, renamed ones appended) that `map` sends elsewhere and that
    /// only samples refer to, and composes `map` with it: `map[a]` is then
    /// the index `a` has once those entries are removed. `None`, and `map`
    /// unchanged, when no entry goes.
    ///
    /// Samples can be left out of the search because every sample that
    /// names such an entry is rewritten through `map` (its attributes
    /// change), or dropped.
    pub(super) fn plan(
        map: &mut [u32],
        len: usize,
        dict: &ProfilesDictionary,
        resources: &[ResourceProfiles],
    ) -> Option<Self> {
        let mut keep = vec![true; len];
        let mut any = false;
        for (a, &m) in map.iter().enumerate() {
            if m != a as u32 {
                keep[a] = false;
                any = true;
            }
        }
        if !any {
            return None;
        }
        let mut other = |t: Table, &i: &i32| {
            if t == Table::Attribute {
                if let Some(k) = usize::try_from(i).ok().and_then(|i| keep.get_mut(i)) {
                    *k = true;
                }
            }
        };
        visit::resources_with(resources, &mut other, &mut || false);
        dict.mapping_table
            .iter()
            .for_each(|m| visit::mapping(m, &mut other));
        dict.location_table
            .iter()
            .for_each(|l| visit::location(l, &mut other));
        // A rename onto an entry that goes itself would leave a sample
        // naming it: such a batch is left to the garbage collection.
        let stays = |m: u32| m == DROP || keep.get(m as usize).copied().unwrap_or(true);
        if !keep.iter().any(|&k| !k) || !map.iter().all(|&m| stays(m)) {
            return None;
        }
        let shift = TableRemap::compacting(&keep);
        for m in map.iter_mut().filter(|m| **m != DROP) {
            *m = shift.get(*m as i32) as u32;
        }
        Some(Self { keep })
    }

    /// Removes the planned entries from the attribute table of `dict` (which
    /// may have grown past the plan since) and re-indexes every reference
    /// to it but those in the samples the merge rewrote: the samples of the
    /// profiles (in order) for which `rewritten` is true.
    pub(super) fn apply(
        mut self,
        dict: &mut ProfilesDictionary,
        resources: &mut [ResourceProfiles],
        rewritten: &[bool],
    ) {
        self.keep.resize(dict.attribute_table.len(), true);
        let remap = Remap {
            attributes: TableRemap::compacting(&self.keep),
            ..Remap::identity()
        };
        retain_flagged(&mut dict.attribute_table, &self.keep);
        remap.apply_to_dictionary(dict);
        let mut rewritten = rewritten.iter();
        visit::resources_mut_with(resources, &mut |t, i| *i = remap.map(t, *i), &mut || {
            !rewritten.next().copied().unwrap_or(false)
        });
    }
}
