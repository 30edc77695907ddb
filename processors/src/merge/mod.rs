//! Combining the samples of a profile that have one identity (stack,
//! attribute set, link) and shape, after rewriting their attributes:
//! `thread_pruning` renames or drops thread attributes and combines the
//! samples that became identical; `dictionary_dedup` combines those that
//! were identical once equal entries share one index (with no rewrite).
//! Samples with neither values nor timestamps (invalid: no observation) are
//! left alone, rewritten but not combined.
//!
//! As the proto asks ("Samples having the same identity SHOULD be combined by
//! inserting timestamps and values to the data arrays"), the data points of
//! the later sample are appended to the first one, in every shape:
//! aggregated values too, rather than summed, as every consumer sums a
//! sample's values, and the number of observations (the unit every profcol
//! metric counts) stays the same, so a merge never looks like a loss in the
//! accounting.
//!
//! Cost. A 100k-sample profile is far larger than the caches (and the
//! TLB) a random-access structure over its samples would need, so every
//! structure looked up at random here is small: a sample's identity other
//! than its stack is numbered exactly, without hashing ([`identity`]), and
//! grouping looks first in a few slots per stack, one cache line, then in a
//! hash table of the few identities left over ([`groups`]). A sample
//! folded into another is never rewritten, only read; the later members'
//! data points are set aside, each tagged with its group (one push per
//! point, no record per member), in flat buffers as the members are
//! removed, then ordered by group with a counting sort, so each first
//! sample grows at most once, to its final size ([`points`]). The per-stack
//! slots a sample looks up, the sample's own blocks, and the first
//! samples' blocks the points are appended to, are prefetched a few samples
//! ahead ([`prefetch`]).
//!
//! The pass over the samples does only the work that needs the sample at
//! hand: counting what each group receives (a random access per member) is
//! left to the counting sort, a tight loop over small arrays; and a sample
//! with one attribute (most are) gets its rest's number with one load from a
//! table made per call ([`Singles`]) instead of rewriting and combining the
//! parts. The pass can also mark what the samples it keeps refer to
//! ([`SampleMarks`]), so that a garbage collection after it need not visit
//! them again.

mod groups;
mod identity;
mod points;
#[cfg(test)]
mod tests;

use profcol_model::dictionary::SampleMarks;
use profcol_prefetch::{prefetch, retain_ahead};

use crate::prefetch_sample;
use profcol_model::proto::{Profile, ProfilesDictionary, Sample};

use groups::Groups;
use identity::{mapped, rest_of, RestCode, Singles};
use points::{by_group, grow_all, stage};

const NONE: u32 = u32::MAX;

/// In a rewrite map: the attribute is removed.
pub(crate) const DROP: u32 = u32::MAX;

/// Sizes of the dictionary tables a sample's identity indexes, once
/// rewritten.
#[derive(Clone, Copy, Default)]
pub(crate) struct Tables {
    pub stacks: usize,
    pub attributes: usize,
    pub links: usize,
}

impl Tables {
    /// The sizes of `dict`'s tables (all 0 without a dictionary).
    pub(crate) fn of(dict: Option<&ProfilesDictionary>) -> Self {
        dict.map_or(Self::default(), |d| Self {
            stacks: d.stack_table.len(),
            attributes: d.attribute_table.len(),
            links: d.link_table.len(),
        })
    }
}

fn rewrite(map: &[u32], attrs: &mut Vec<i32>) {
    if let [a] = attrs[..] {
        // Most samples hold one attribute (a thread name).
        match mapped(map, a) {
            None => attrs.clear(),
            Some(m) => attrs[0] = m,
        }
        return;
    }
    attrs.retain_mut(|a| match mapped(map, *a) {
        None => false,
        Some(m) => {
            *a = m;
            true
        }
    });
}

/// Buffers reused from batch to batch, so a steady stream allocates nothing
/// here.
#[derive(Default)]
pub(crate) struct SampleMerger {
    groups: Groups,
    /// The points of the removed samples, in order, each with its group.
    staged_times: Vec<(u32, u64)>,
    staged_values: Vec<(u32, i64)>,
    /// Per group, where its added points end in `times` / `values`, which
    /// hold them group by group.
    tpos: Vec<u32>,
    vpos: Vec<u32>,
    times: Vec<u64>,
    values: Vec<i64>,
    /// A sample's attributes once rewritten.
    attrs: Vec<i32>,
    singles: Singles,
}

impl SampleMerger {
    /// Rewrites the attributes of the samples of `profile` through `map`
    /// (`map[a]` replaces index `a`; [`DROP`] removes it; indices past the
    /// map stay), then folds the samples with the same identity and shape
    /// into the first of them, which keeps its position. `tables` are the
    /// sizes of the tables the rewritten samples index. What the samples
    /// left refer to is marked in `marks`, if given. Returns how many
    /// samples were folded.
    pub(crate) fn merge(
        &mut self,
        profile: &mut Profile,
        tables: Tables,
        map: &[u32],
        marks: Option<&mut SampleMarks>,
    ) -> usize {
        let samples = &mut profile.samples;
        let n = samples.len();
        u32::try_from(n).expect("over 2^32 samples in one profile");
        let groups = &mut self.groups;
        self.staged_times.clear();
        self.staged_values.clear();
        // Slots pay off when the profile revisits its stacks; a stack table
        // far larger than the profile would only cost its clearing.
        let code = RestCode::new(tables).filter(|_| tables.stacks <= 4 * n + 1024);
        groups.start(code.map_or(0, |_| tables.stacks));
        if let Some(c) = code {
            // Past both, an index stays as it is and out of the table.
            let len = map.len().max(tables.attributes);
            self.singles.fill(c, map, len, n);
        }

        // 1. In one pass: each sample's group; a group's first sample is
        // rewritten, marked and kept, the others' points set aside and the
        // samples removed (never rewritten unless compared as sets).
        let mut pass = Pass {
            code,
            tables,
            map,
            singles: &self.singles,
            groups,
            attrs: &mut self.attrs,
            staged_times: &mut self.staged_times,
            staged_values: &mut self.staged_values,
            marks,
        };
        retain_ahead(samples, |s, next| {
            if let Some(next) = next {
                pass.prefetch(next);
            }
            pass.keep(s)
        });
        self.groups.finish();
        let merged = n - samples.len();
        if merged == 0 {
            return 0;
        }

        // 2. The set-aside points, group by group (a counting sort).
        let groups = self.groups.count as usize;
        let (tpos, vpos) = (&mut self.tpos, &mut self.vpos);
        by_group(&self.staged_times, groups, tpos, &mut self.times);
        by_group(&self.staged_values, groups, vpos, &mut self.values);

        // 3. The samples left are the groups' first ones, in group order:
        // each grows at most once, to its final size.
        if !self.times.is_empty() {
            grow_all(samples, tpos, &self.times, |s| &mut s.timestamps_unix_nano);
        }
        if !self.values.is_empty() {
            grow_all(samples, vpos, &self.values, |s| &mut s.values);
        }
        merged
    }
}

/// Step 1 of [`SampleMerger::merge`], one sample at a time.
struct Pass<'a> {
    code: Option<RestCode>,
    tables: Tables,
    map: &'a [u32],
    singles: &'a Singles,
    groups: &'a mut Groups,
    attrs: &'a mut Vec<i32>,
    staged_times: &'a mut Vec<(u32, u64)>,
    staged_values: &'a mut Vec<(u32, i64)>,
    marks: Option<&'a mut SampleMarks>,
}

impl Pass<'_> {
    /// Fetches the group slots of a sample that comes soon.
    #[inline(always)]
    fn prefetch(&self, s: &Sample) {
        if let Some(slot) = usize::try_from(s.stack_index)
            .ok()
            .and_then(|st| self.groups.heads.get(st))
        {
            prefetch(slot);
        }
        prefetch_sample(s);
    }

    /// Whether `s` starts a group (and stays, rewritten and marked); if not,
    /// its points are set aside. Inlined: this runs once per sample.
    #[inline(always)]
    fn keep(&mut self, s: &mut Sample) -> bool {
        if s.timestamps_unix_nano.is_empty() && s.values.is_empty() {
            return self.alone(s);
        }
        let (map, tables) = (self.map, self.tables);
        let coded = self.code.and_then(|c| {
            let st = u32::try_from(s.stack_index)
                .ok()
                .filter(|&st| (st as usize) < tables.stacks)?;
            let code = match s.attribute_indices[..] {
                [a] if !self.singles.is_empty() => self.singles.of(c, s, a)?,
                _ => c.of(&rest_of(s, map, self.attrs)?)?,
            };
            Some((st, code))
        });
        let (g, new) = match coded {
            Some((st, code)) => self.groups.coded(st, code),
            None => return self.slow(s),
        };
        if new {
            rewrite(map, &mut s.attribute_indices);
            self.mark(s);
            return true;
        }
        self.member(s, g)
    }

    /// [`Self::keep`] for a sample whose identity cannot be coded.
    #[inline(never)]
    fn slow(&mut self, s: &mut Sample) -> bool {
        rewrite(self.map, &mut s.attribute_indices);
        let (g, new) = self.groups.slow(s);
        if new {
            self.mark(s);
            return true;
        }
        self.member(s, g)
    }

    /// [`Self::keep`] for a sample without points: rewritten and kept,
    /// never combined (a group of its own, so that the samples kept stay
    /// the groups in order).
    #[inline(never)]
    fn alone(&mut self, s: &mut Sample) -> bool {
        self.groups.new_group();
        rewrite(self.map, &mut s.attribute_indices);
        self.mark(s);
        true
    }

    #[inline(always)]
    fn mark(&mut self, s: &Sample) {
        if let Some(marks) = self.marks.as_deref_mut() {
            marks.sample(s);
        }
    }

    /// Sets aside the points of `s`, a later member of group `g`; returns
    /// false (the sample goes).
    #[inline(always)]
    fn member(&mut self, s: &Sample, g: u32) -> bool {
        stage(self.staged_times, g, &s.timestamps_unix_nano);
        stage(self.staged_values, g, &s.values);
        false
    }
}
