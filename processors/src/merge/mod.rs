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
//! than its stack is numbered exactly, without hashing ([`RestCode`]), and
//! grouping looks first in [`SLOTS`] slots per stack, 8 bytes each, then
//! in a hash table of the few identities left over. A sample folded into
//! another is never rewritten, only read; the later members' data points
//! are set aside, each tagged with its group (one push per point, no record
//! per member), in flat buffers as the members are removed, then ordered by
//! group with a counting sort, so each first sample grows at most once, to
//! its final size.
//! The per-stack slots a sample looks up, the sample's own blocks, and the
//! first samples' blocks the points are appended to, are prefetched a few
//! samples ahead ([`prefetch`]).
//!
//! The pass over the samples does only the work that needs the sample at
//! hand: counting what each group receives (a random access per member) is
//! left to the counting sort, a tight loop over small arrays; and a sample
//! with one attribute (most are) gets its rest's number with one load from a
//! table made per call ([`Singles`]) instead of rewriting and combining the
//! parts. The pass can also mark what the samples it keeps refer to
//! ([`SampleMarks`]), so that a garbage collection after it need not visit
//! them again.

#[cfg(test)]
mod tests;

use hashbrown::HashTable;

use profcol_pipeline::model::dictionary::{
    samples_identity, SampleIdentity, SampleMarks, SampleShape,
};
use profcol_pipeline::model::prefetch::{prefetch, prefetch_sample, retain_ahead, AHEAD};
use profcol_pipeline::proto::{Profile, Sample};

/// Everything of a sample's identity and shape but its stack, packed so that
/// lookups compare keys held in the tables instead of following each
/// sample's attribute vector. Attribute sets of up to two entries (a thread
/// id and a name) are held exactly, sorted; larger ones as an order-free
/// hash, confirmed on the samples themselves.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Rest {
    link: i32,
    attrs: [u32; 2],
    /// Shape in bits 0-1, attribute count (saturated at 3) in bits 2-3.
    meta: u32,
}

fn shape_bits(s: &Sample) -> u32 {
    match SampleShape::of(s) {
        SampleShape::Aggregated => 0,
        SampleShape::Timestamps => 1,
        SampleShape::TimedValues => 2,
    }
}

impl Rest {
    /// The rest of a sample whose attributes are `attrs`.
    fn of(s: &Sample, attrs: &[i32]) -> Self {
        let pair = match attrs.len() {
            0 => [0, 0],
            1 => [attrs[0] as u32, 0],
            2 => [attrs[0].min(attrs[1]) as u32, attrs[0].max(attrs[1]) as u32],
            _ => {
                let set = attrs
                    .iter()
                    .fold(0u64, |acc, &x| acc.wrapping_add(mix(x as u32 as u64)));
                [set as u32, (set >> 32) as u32]
            }
        };
        Self {
            link: s.link_index,
            attrs: pair,
            meta: shape_bits(s) | (attrs.len().min(3) as u32) << 2,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    stack: i32,
    rest: Rest,
}

impl Key {
    fn of(s: &Sample) -> Self {
        Self {
            stack: s.stack_index,
            rest: Rest::of(s, &s.attribute_indices),
        }
    }

    /// Key equality is identity when the attribute set is held inline.
    fn exact(&self) -> bool {
        self.rest.meta >> 2 <= 2
    }

    fn hash(&self) -> u64 {
        let r = &self.rest;
        let a = (self.stack as u32 as u64) | ((r.link as u32 as u64) << 32);
        let b = (r.attrs[0] as u64) | ((r.attrs[1] as u64) << 32);
        mix(mix(a ^ r.meta as u64) ^ b)
    }
}

/// splitmix64's finalizer: every input bit moves the high bits the table uses.
#[inline]
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

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

/// Numbers [`Rest`]s exactly, without hashing, when the tables are small
/// enough for every combination to fit a `u32`: the common case, where
/// samples carry at most a thread id and a name.
#[derive(Clone, Copy)]
struct RestCode {
    attributes: u64,
    links: u64,
    /// What a step of the shape adds to a number (the shape is its most
    /// significant part).
    per_shape: u32,
}

impl RestCode {
    fn new(t: Tables) -> Option<Self> {
        let (a, l) = (t.attributes as u64 + 1, t.links as u64);
        // link, two attributes, 4 bits of meta.
        let combos = l.checked_mul(a)?.checked_mul(a)?.checked_mul(16)?;
        (combos < u64::from(NONE)).then_some(Self {
            attributes: a,
            links: l,
            per_shape: (a * a * l) as u32,
        })
    }

    /// The number of `r`, or `None` when it does not identify the sample's
    /// rest (more than two attributes, or an index outside its table).
    #[inline]
    fn of(&self, r: &Rest) -> Option<u32> {
        let link = u64::try_from(r.link).ok().filter(|&l| l < self.links)?;
        if r.meta >> 2 > 2 {
            return None;
        }
        let [a0, a1] = r.attrs;
        let (a0, a1) = (u64::from(a0) + 1, u64::from(a1) + 1);
        if a0 >= self.attributes || a1 >= self.attributes {
            // Also catches negative indices, which became large as u32.
            return None;
        }
        let code =
            ((u64::from(r.meta) * self.attributes + a1) * self.attributes + a0) * self.links + link;
        Some(code as u32)
    }
}

/// The numbers of the rests of samples with a single attribute, by the
/// attribute's index (before rewriting), for shape 0 and link 0: a sample's
/// is then `singles[a] + shape * per_shape + link`, as [`RestCode::of`]
/// numbers it. [`NONE`] where the attribute cannot be coded.
#[derive(Default)]
struct Singles(Vec<u32>);

impl Singles {
    /// Fills the table for the indices below `len` (none past it can be
    /// coded), unless a profile of `n` samples would not pay for that: then
    /// it stays empty and every sample takes the general way.
    fn fill(&mut self, c: RestCode, map: &[u32], len: usize, n: usize) {
        self.0.clear();
        if len > 4 * n + 1024 {
            return;
        }
        let len = i32::try_from(len).unwrap_or(i32::MAX);
        self.0.extend((0..len).map(|a| {
            let m = mapped(map, a);
            let rest = Rest {
                link: 0,
                attrs: [m.unwrap_or(0) as u32, 0],
                meta: u32::from(m.is_some()) << 2,
            };
            c.of(&rest).unwrap_or(NONE)
        }));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of the rest of `s`, whose only attribute is `a`, or `None`
    /// when it cannot be coded.
    #[inline]
    fn of(&self, c: RestCode, s: &Sample, a: i32) -> Option<u32> {
        let base = *self.0.get(usize::try_from(a).ok()?)?;
        let link = u32::try_from(s.link_index)
            .ok()
            .filter(|&l| u64::from(l) < c.links)?;
        (base != NONE).then(|| base + shape_bits(s) * c.per_shape + link)
    }
}

/// What attribute index `a` becomes: `map[a]` for the indices `map` covers
/// (`None` for [`DROP`]), others (even invalid ones) unchanged.
#[inline]
fn mapped(map: &[u32], a: i32) -> Option<i32> {
    match usize::try_from(a).ok().and_then(|i| map.get(i)) {
        Some(&DROP) => None,
        Some(&m) => Some(m as i32),
        None => Some(a),
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

/// Identities held per stack before the hash table: most stacks are seen
/// with a few thread names and links. Eight fill one cache line. On the
/// bench's request (16 threads, 32 links), four sent 1.6% of the samples to
/// the table under thread_pruning's rename and 30% under dictionary_dedup;
/// eight send 0.6% and 13% (dictionary_dedup 8-11% faster).
const SLOTS: usize = 8;

/// The slots of one stack: (rest code, group), group NONE when unused,
/// filled in order; aligned so that a lookup touches one line.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Slots([(u32, u32); SLOTS]);

impl Slots {
    const EMPTY: Slots = Slots([(0, NONE); SLOTS]);
}

/// Finds each sample's group: groups are numbered in the order of their
/// first samples.
#[derive(Default)]
struct Groups {
    /// How many groups there are.
    count: u32,
    /// The first [`SLOTS`] coded identities seen with each stack.
    heads: Vec<Slots>,
    /// Stacks whose slots are set, to clear them afterwards.
    touched: Vec<u32>,
    /// Other coded identities: (stack << 32 | code) -> group.
    coded: HashTable<(u64, u32)>,
    /// Identities that cannot be coded -> (group, where the first sample's
    /// attributes are in `attrs`).
    table: HashTable<(Key, u32, u32, u32)>,
    /// The attribute lists of the first samples of groups with more than two
    /// attributes, compared as sets.
    attrs: Vec<i32>,
}

impl Groups {
    fn new_group(&mut self) -> u32 {
        self.count += 1;
        self.count - 1
    }

    /// The group of a sample of stack `st` whose rest is coded `code`, and
    /// whether it is new: no earlier sample has its identity and shape.
    /// Exact: the code is the identity with the stack.
    #[inline]
    fn coded(&mut self, st: u32, code: u32) -> (u32, bool) {
        let next = self.count;
        // Slots fill in order: the first free one ends the search.
        for (i, w) in self.heads[st as usize].0.iter_mut().enumerate() {
            if w.1 == NONE {
                *w = (code, next);
                if i == 0 {
                    self.touched.push(st);
                }
                return (self.new_group(), true);
            }
            if w.0 == code {
                return (w.1, false);
            }
        }
        let key = (u64::from(st) << 32) | u64::from(code);
        let h = mix(key);
        if let Some(&(_, g)) = self.coded.find(h, |&(other, _)| other == key) {
            return (g, false);
        }
        self.coded.insert_unique(h, (key, next), |&(k, _)| mix(k));
        (self.new_group(), true)
    }

    /// [`Self::coded`] for a sample whose identity cannot be coded, through
    /// the hash table; `s` is rewritten.
    fn slow(&mut self, s: &Sample) -> (u32, bool) {
        let key = Key::of(s);
        let h = key.hash();
        let attrs = &self.attrs;
        let found = self.table.find(h, |(other, _, at, len)| {
            *other == key
                && (key.exact()
                    || samples_identity(s)
                        == SampleIdentity {
                            stack_index: key.stack,
                            attribute_indices: &attrs[*at as usize..(*at + *len) as usize],
                            link_index: key.rest.link,
                        })
        });
        if let Some(&(_, g, _, _)) = found {
            return (g, false);
        }
        let (at, len) = if key.exact() {
            (0, 0)
        } else {
            let at = self.attrs.len() as u32;
            self.attrs.extend_from_slice(&s.attribute_indices);
            (at, s.attribute_indices.len() as u32)
        };
        let g = self.new_group();
        self.table
            .insert_unique(h, (key, g, at, len), |(k, ..)| k.hash());
        (g, true)
    }
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
    pub fn merge(
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
        groups.count = 0;
        groups.coded.clear();
        groups.table.clear();
        groups.attrs.clear();
        self.staged_times.clear();
        self.staged_values.clear();
        // Slots pay off when the profile revisits its stacks; a stack table
        // far larger than the profile would only cost its clearing.
        let code = RestCode::new(tables).filter(|_| tables.stacks <= 4 * n + 1024);
        if let Some(c) = code {
            if groups.heads.len() < tables.stacks {
                groups.heads.resize(tables.stacks, Slots::EMPTY);
            }
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
        let groups = &mut self.groups;
        for &st in &groups.touched {
            groups.heads[st as usize] = Slots::EMPTY;
        }
        groups.touched.clear();
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

/// Appends to the points (`field`) of each sample `g` its group's share of
/// `points`, which ends at `ends[g]`. The appends write to the samples' own
/// blocks, at random in memory: each is fetched [`AHEAD`] groups early.
fn grow_all<T: Copy>(
    samples: &mut [Sample],
    ends: &[u32],
    points: &[T],
    field: impl Fn(&mut Sample) -> &mut Vec<T>,
) {
    let n = samples.len().min(ends.len());
    let mut start = 0;
    for g in 0..n {
        let ahead = g + AHEAD;
        if ahead < n && ends[ahead - 1] < ends[ahead] {
            prefetch(field(&mut samples[ahead]).as_ptr());
        }
        let end = ends[g];
        if start < end {
            grow(
                field(&mut samples[g]),
                &points[start as usize..end as usize],
            );
        }
        start = end;
    }
}

/// Orders the points set aside, `staged`, group by group into `out`,
/// keeping their order within a group; `pos[g]` is then where group `g`'s
/// points end (and `g + 1`'s start).
fn by_group<T: Copy + Default>(
    staged: &[(u32, T)],
    groups: usize,
    pos: &mut Vec<u32>,
    out: &mut Vec<T>,
) {
    out.clear();
    pos.clear();
    if staged.is_empty() {
        return;
    }
    pos.resize(groups, 0);
    for &(g, _) in staged {
        pos[g as usize] += 1;
    }
    let mut sum = 0;
    for p in pos.iter_mut() {
        let n = *p;
        *p = sum;
        sum += n;
    }
    out.resize(staged.len(), T::default());
    for &(g, x) in staged {
        let at = &mut pos[g as usize];
        out[*at as usize] = x;
        *at += 1;
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

/// `to.extend_from_slice(from)`; samples mostly hold one point: those skip
/// the call to `memcpy`.
#[inline]
fn push<T: Copy>(to: &mut Vec<T>, from: &[T]) {
    match from {
        [] => {}
        [x] => to.push(*x),
        _ => to.extend_from_slice(from),
    }
}

/// Appends the points `from` of group `g` to `to`; samples mostly hold one
/// point: those skip the loop.
#[inline]
fn stage<T: Copy>(to: &mut Vec<(u32, T)>, g: u32, from: &[T]) {
    match from {
        [] => {}
        [x] => to.push((g, *x)),
        _ => to.extend(from.iter().map(|&x| (g, x))),
    }
}

/// The rewritten [`Rest`] of `s` when it has at most two attributes once
/// rewritten (else `None`), without touching the sample.
#[inline]
fn rest_of(s: &Sample, map: &[u32], buf: &mut Vec<i32>) -> Option<Rest> {
    let a = &s.attribute_indices;
    let (m0, m1) = match a.len() {
        0 => (None, None),
        1 => (mapped(map, a[0]), None),
        2 => (mapped(map, a[0]), mapped(map, a[1])),
        _ => {
            buf.clear();
            buf.extend(a.iter().filter_map(|&x| mapped(map, x)));
            match buf[..] {
                [] => (None, None),
                [x] => (Some(x), None),
                [x, y] => (Some(x), Some(y)),
                _ => return None,
            }
        }
    };
    // As `Rest::of` on the rewritten list.
    let (count, pair) = match (m0, m1) {
        (None, None) => (0, [0, 0]),
        (Some(x), None) | (None, Some(x)) => (1, [x as u32, 0]),
        (Some(x), Some(y)) => (2, [x.min(y) as u32, x.max(y) as u32]),
    };
    Some(Rest {
        link: s.link_index,
        attrs: pair,
        meta: shape_bits(s) | count << 2,
    })
}

/// Appends `more` to `v`: in place when it fits (prost leaves decoded
/// vectors room for four points), else in one new allocation of the final
/// size (cheaper than growing the old one, which copies anyway).
fn grow<T: Copy>(v: &mut Vec<T>, more: &[T]) {
    if v.capacity() - v.len() >= more.len() {
        push(v, more);
        return;
    }
    let mut out = Vec::with_capacity(v.len() + more.len());
    push(&mut out, v);
    push(&mut out, more);
    *v = out;
}
