//! The pass itself: a read-only plan over the dictionary and the samples,
//! then, only when the plan changes something, one mutation of the batch
//! (an unchanged batch keeps its received encoding).
//!
//! Order, all per profile:
//! 1. `drop_threads` / `keep_threads` and `min_samples_per_thread` decide on
//!    the attributes as received (before renaming or dropping);
//! 2. `drop_attributes` and `rename_threads` rewrite the kept samples, and
//!    samples that became identical are combined ([`super::merge`]);
//! 3. the thread table keeps the threads a kept sample names by `thread.id`
//!    (after `drop_attributes`), with renamed names;
//! 4. the attribute entries the rewrite orphans are removed with it
//!    ([`super::compaction`]: the merge writes final indices), empty
//!    profiles are removed and the dictionary garbage-collected, without
//!    visiting again the samples the merge, or the decisions of step 1,
//!    marked.

use hashbrown::HashMap;

use profcol_model::dictionary::{gc_with, remove_empty_profiles, GcOptions, Lookup, SampleMarks};
use profcol_pipeline::component::{ProcessContext, Verdict};
use profcol_prefetch::{ahead, prefetch_slice, retain_ahead};

use crate::prefetch_sample;
use profcol_model::proto::{
    any_value::Value, KeyValueAndUnit, Profile, ProfilesData, Sample, Stack,
};
use profcol_model::{profiles, profiles_mut, sample_observations, ProfileBatch};

use super::compaction::Compaction;
use super::config::Rules;
use super::thread_table::{self, TableChange};
use crate::merge::{SampleMerger, Tables, DROP};

/// Drop reasons, the `reason` label of the dropped-samples metric.
pub const THREAD_DROPPED: &str = "thread_dropped";
pub const MIN_SAMPLES_PER_THREAD: &str = "min_samples_per_thread";

pub(crate) const THREAD_ID: &str = "thread.id";
pub(crate) const THREAD_NAME: &str = "thread.name";
pub(crate) const THREAD_METADATA: &str = "sentry.thread_metadata";

const NONE: u32 = u32::MAX;

/// Per-sample decision of a profile planned to the end (one where no
/// sample is dropped by name, see [`ProfilePlan::deferred`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Decision {
    Keep,
    /// Its thread has fewer samples than `min_samples_per_thread`.
    DropByCount,
}

/// What the rules do to one entry of the attribute table.
#[derive(Clone, Copy)]
struct AttrPlan {
    /// Canonical number of the thread id text (a `thread.id` entry).
    thread_id: u32,
    /// Canonical number of the thread name (a string `thread.name` entry).
    thread_name: u32,
    /// A `thread.name` that `drop_threads` / `keep_threads` reject.
    name_rejected: bool,
    /// Removed from samples by `drop_attributes`.
    dropped: bool,
    /// The index samples use instead (a renamed `thread.name`).
    target: i32,
    /// A `sentry.thread_metadata` table.
    thread_table: bool,
}

/// The plan over a batch's attribute table.
struct AttrPlans {
    attrs: Vec<AttrPlan>,
    /// Thread id text -> canonical number.
    ids: HashMap<String, u32>,
    /// How many canonical thread names there are.
    names: usize,
    /// Renamed `thread.name` entries to append to the table.
    new_attrs: Vec<KeyValueAndUnit>,
    /// Some entry is dropped or renamed: sample attribute lists may change.
    rewrites: bool,
}

impl AttrPlans {
    #[inline]
    fn get(&self, i: i32) -> Option<&AttrPlan> {
        usize::try_from(i).ok().and_then(|i| self.attrs.get(i))
    }

    /// Whether the rewrite changes this attribute list.
    #[inline]
    fn changes(&self, attrs: &[i32]) -> bool {
        self.rewrites
            && attrs
                .iter()
                .any(|&a| self.get(a).is_some_and(|p| p.dropped || p.target != a))
    }
}

fn plan_attributes(lookup: &Lookup<'_>, rules: &Rules) -> AttrPlans {
    let table = &lookup.dictionary().attribute_table;
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut names: HashMap<&str, u32> = HashMap::new();
    // Existing `thread.name` entries by (name, unit): a rename onto a name
    // that already has an entry reuses it, so renamed samples meet their peers.
    let mut by_name: HashMap<(&str, i32), i32> = HashMap::new();
    let mut rewrites = false;
    let mut attrs: Vec<AttrPlan> = Vec::with_capacity(table.len());
    for (i, a) in table.iter().enumerate() {
        let key = lookup.string(a.key_strindex);
        let mut p = AttrPlan {
            thread_id: NONE,
            thread_name: NONE,
            name_rejected: false,
            dropped: rules.drop_attributes.iter().any(|k| k == key),
            target: i as i32,
            thread_table: false,
        };
        rewrites |= p.dropped;
        let value = a.value.as_ref();
        match key {
            THREAD_ID => {
                let text = match value.and_then(|v| v.value.as_ref()) {
                    Some(Value::IntValue(n)) => n.to_string(),
                    _ => value
                        .and_then(|v| lookup.str_value(v))
                        .unwrap_or("")
                        .to_owned(),
                };
                let next = ids.len() as u32;
                p.thread_id = *ids.entry(text).or_insert(next);
            }
            THREAD_NAME => {
                if let Some(name) = value.and_then(|v| lookup.str_value(v)) {
                    let next = names.len() as u32;
                    p.thread_name = *names.entry(name).or_insert(next);
                    p.name_rejected = !rules.name_kept(Some(name));
                    by_name.entry((name, a.unit_strindex)).or_insert(i as i32);
                }
            }
            THREAD_METADATA => p.thread_table = value.and_then(thread_table::entries).is_some(),
            _ => {}
        }
        attrs.push(p);
    }
    let mut new_attrs = Vec::new();
    if !rules.rename.is_empty() {
        // Renamed names not in the table yet, by (name, unit).
        let mut added: HashMap<(String, i32), i32> = HashMap::new();
        for (i, a) in table.iter().enumerate() {
            if attrs[i].thread_name == NONE || attrs[i].dropped {
                continue;
            }
            let Some(name) = a.value.as_ref().and_then(|v| lookup.str_value(v)) else {
                continue;
            };
            let Some(new) = rules.renamed(name) else {
                continue;
            };
            let target = match by_name.get(&(new.as_str(), a.unit_strindex)) {
                Some(&j) => j,
                None => {
                    let next = (table.len() + new_attrs.len()) as i32;
                    *added
                        .entry((new.clone(), a.unit_strindex))
                        .or_insert_with(|| {
                            new_attrs.push(KeyValueAndUnit {
                                key_strindex: a.key_strindex,
                                value: Some(profcol_model::proto::AnyValue {
                                    value: Some(Value::StringValue(new)),
                                }),
                                unit_strindex: a.unit_strindex,
                            });
                            next
                        })
                }
            };
            if target != i as i32 {
                attrs[i].target = target;
                rewrites = true;
            }
        }
    }
    AttrPlans {
        attrs,
        ids,
        names: names.len(),
        new_attrs,
        rewrites,
    }
}

/// What happens to one profile.
struct ProfilePlan {
    /// One decision per sample; empty when every sample is kept.
    decisions: Vec<Decision>,
    /// Some kept sample's attribute list changes.
    rewrite: bool,
    table: Option<(usize, TableChange)>,
    /// Planning stopped at the first sample dropped by name: the profile
    /// changes, and its decisions are taken while its samples are removed
    /// (one pass over them instead of two).
    deferred: bool,
}

/// Buffers the processor keeps from batch to batch.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The thread (group number) of each sample counted.
    groups: Vec<u32>,
    /// Non-idle observations per group number, counted up to the minimum.
    counts: Vec<u64>,
    /// (id, name) -> group number, when there are too many pairs to number
    /// them directly.
    numbers: HashMap<u64, u32>,
    referenced: Vec<bool>,
    merger: SampleMerger,
    /// What the samples of merged (or premarked, see `decided`) profiles
    /// refer to, and, per profile left once empty ones are removed (in
    /// order), whether its samples are in `marks`.
    marks: SampleMarks,
    marked: Vec<bool>,
    /// What the samples a deferred profile keeps refer to, added to `marks`
    /// once no sample goes by count.
    decided: SampleMarks,
    /// [`ThreadRules::singles`].
    singles: Vec<Single>,
    /// Per profile (in order, empty ones too), whether its samples were
    /// rewritten.
    rewritten: Vec<bool>,
}

/// What the thread rules see in one sample's attributes.
struct Thread {
    id: u32,
    name: u32,
    rejected: bool,
    /// The thread id the sample names once `drop_attributes` applied.
    ref_id: u32,
}

impl Thread {
    const NONE: Thread = Thread {
        id: NONE,
        name: NONE,
        rejected: false,
        ref_id: NONE,
    };

    /// Adds what attribute `x` says of the thread.
    #[inline]
    fn add(&mut self, x: &AttrPlan) {
        if x.thread_id != NONE {
            self.id = x.thread_id;
            if !x.dropped {
                self.ref_id = x.thread_id;
            }
        }
        if x.thread_name != NONE {
            self.name = x.thread_name;
            self.rejected = x.name_rejected;
        }
    }
}

#[inline]
fn thread_of(s: &Sample, plans: &AttrPlans) -> Thread {
    let mut t = Thread::NONE;
    for x in s.attribute_indices.iter().filter_map(|&a| plans.get(a)) {
        t.add(x);
    }
    t
}

/// What [`ThreadRules::see`] makes of a sample whose only attribute is one
/// entry: its group, the thread id it refers to, or dropped by name. One
/// word per attribute entry (group in the low 31 bits, the drop flag in
/// bit 31, the id in the high half) so that the per-sample lookup is one
/// load.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct Single(u64);

impl Single {
    const DROPPED: u64 = 1 << 31;
    /// Groups numbered directly stay below this.
    const GROUPS: usize = Self::DROPPED as usize;

    #[inline(always)]
    fn new(group: usize, ref_id: u32, dropped: bool) -> Self {
        let flag = if dropped { Self::DROPPED } else { 0 };
        Self(group as u64 | flag | u64::from(ref_id) << 32)
    }

    /// `None` when dropped by name, else (group, referred id).
    #[inline(always)]
    fn outcome(self) -> Option<(usize, u32)> {
        let group = (self.0 & (Self::DROPPED - 1)) as usize;
        (self.0 & Self::DROPPED == 0).then_some((group, (self.0 >> 32) as u32))
    }
}

/// The rules of one profile, and how its threads are numbered for
/// `min_samples_per_thread`.
struct ThreadRules {
    filters: bool,
    by_count: bool,
    track_refs: bool,
    kept_without_name: bool,
    min: u64,
    /// Group numbers are (id + 1) * columns + name + 1 when `direct`.
    columns: usize,
    direct: bool,
}

impl ThreadRules {
    /// Also readies `scratch` for a profile of `samples` samples.
    fn new(
        plans: &AttrPlans,
        rules: &Rules,
        track_refs: bool,
        samples: usize,
        scratch: &mut Scratch,
    ) -> Self {
        let by_count = rules.min_samples_per_thread > 0;
        // Group number 0: samples without a thread, never counted nor
        // dropped by count. Others number (id, name) pairs directly when
        // there are few enough pairs.
        let columns = plans.names + 1;
        let direct = (plans.ids.len() + 1)
            .checked_mul(columns)
            .filter(|&cells| cells <= samples.max(1 << 12) && cells < Single::GROUPS);
        scratch.groups.clear();
        scratch.counts.clear();
        scratch.numbers.clear();
        if by_count {
            scratch.counts.resize(direct.unwrap_or(1), 0);
            scratch.counts[0] = u64::MAX;
        }
        if track_refs {
            scratch.referenced.clear();
            scratch.referenced.resize(plans.ids.len(), false);
        }
        Self {
            filters: !rules.keep_threads.is_empty() || !rules.drop_threads.is_empty(),
            by_count,
            track_refs,
            kept_without_name: rules.name_kept(None),
            min: rules.min_samples_per_thread,
            columns,
            direct: direct.is_some(),
        }
    }

    /// Whether `drop_threads` / `keep_threads` drop the sample.
    #[inline]
    fn by_name(&self, t: &Thread) -> bool {
        self.filters
            && if t.name == NONE {
                !self.kept_without_name
            } else {
                t.rejected
            }
    }

    /// The group number of thread `t` for `min_samples_per_thread`.
    #[inline]
    fn group(&self, t: &Thread, scratch: &mut Scratch) -> usize {
        if self.direct {
            self.direct_group(t)
        } else if t.id == NONE && t.name == NONE {
            0
        } else {
            let counts = &mut scratch.counts;
            let pair = (u64::from(t.id) << 32) | u64::from(t.name);
            *scratch.numbers.entry(pair).or_insert_with(|| {
                counts.push(0);
                (counts.len() - 1) as u32
            }) as usize
        }
    }

    /// [`Self::group`] when groups are numbered directly.
    #[inline]
    fn direct_group(&self, t: &Thread) -> usize {
        // NONE + 1 wraps to 0: (NONE, NONE) is group 0.
        t.id.wrapping_add(1) as usize * self.columns + t.name.wrapping_add(1) as usize
    }

    /// Fills `out`, per attribute entry, with what [`Self::see`] makes of a
    /// sample whose only attribute that is (most samples). Empty unless
    /// groups are numbered directly.
    fn singles(&self, plans: &AttrPlans, out: &mut Vec<Single>) {
        out.clear();
        if !self.direct {
            return;
        }
        out.extend(plans.attrs.iter().map(|x| {
            let mut t = Thread::NONE;
            t.add(x);
            Single::new(self.direct_group(&t), t.ref_id, self.by_name(&t))
        }));
    }

    /// What the rules make of the thread of `s`: `None` when
    /// `drop_threads` / `keep_threads` drop the sample, else its group
    /// (`by_count` only) and the thread id it refers to. A sample with one
    /// attribute takes one load from `singles` ([`Self::singles`]) instead
    /// of a walk of its attributes. Always inlined: it runs once per sample,
    /// and the call's overhead showed in the `drop_threads` + `min_samples`
    /// bench (`processors_b`).
    #[inline(always)]
    fn see(
        &self,
        s: &Sample,
        plans: &AttrPlans,
        singles: &[Single],
        scratch: &mut Scratch,
    ) -> Option<(usize, u32)> {
        if let [a] = s.attribute_indices[..] {
            if let Some(&v) = usize::try_from(a).ok().and_then(|a| singles.get(a)) {
                return v.outcome();
            }
        }
        let t = thread_of(s, plans);
        if self.by_name(&t) {
            return None;
        }
        let group = if self.by_count {
            self.group(&t, scratch)
        } else {
            0
        };
        Some((group, t.ref_id))
    }

    /// Counts a sample of group `group` (`by_count` only).
    #[inline]
    fn count(
        &self,
        s: &Sample,
        group: usize,
        non_idle: impl Fn(i32) -> bool,
        scratch: &mut Scratch,
    ) {
        // Counting stops at the minimum: only `count < min` is asked, and
        // the stack lookup is the costly part.
        if scratch.counts[group] < self.min && non_idle(s.stack_index) {
            scratch.counts[group] += sample_observations(s);
        }
        scratch.groups.push(group as u32);
    }

    /// Takes in a sample the thread rules keep, of group `group`, naming
    /// thread `ref_id`: counts it (`by_count`) and notes the id it refers
    /// to (`track_refs`). Returns whether its attribute list changes.
    #[inline(always)]
    fn tally(
        &self,
        s: &Sample,
        group: usize,
        ref_id: u32,
        plans: &AttrPlans,
        non_idle: impl Fn(i32) -> bool,
        scratch: &mut Scratch,
    ) -> bool {
        if self.by_count {
            self.count(s, group, non_idle, scratch);
        }
        if self.track_refs && ref_id != NONE {
            scratch.referenced[ref_id as usize] = true;
        }
        plans.changes(&s.attribute_indices)
    }

    /// Whether samples of group `g` go for `min_samples_per_thread`.
    #[inline]
    fn few(&self, g: u32, scratch: &Scratch) -> bool {
        scratch.counts[g as usize] < self.min
    }

    /// Recomputes `rewrite` and the referenced thread ids from the samples
    /// that survive.
    fn survivors<'s>(
        &self,
        samples: impl Iterator<Item = &'s Sample>,
        plans: &AttrPlans,
        scratch: &mut Scratch,
    ) -> bool {
        let mut rewrite = false;
        scratch.referenced.iter_mut().for_each(|r| *r = false);
        for s in samples {
            rewrite |= plans.changes(&s.attribute_indices);
            if self.track_refs {
                for &a in &s.attribute_indices {
                    if let Some(x) = plans.get(a) {
                        if x.thread_id != NONE && !x.dropped {
                            scratch.referenced[x.thread_id as usize] = true;
                        }
                    }
                }
            }
        }
        rewrite
    }
}

/// The profile's `sentry.thread_metadata` attribute (its position in the
/// profile's attributes), if any.
fn table_at(p: &Profile, plans: &AttrPlans) -> Option<usize> {
    p.attribute_indices
        .iter()
        .position(|&a| plans.get(a).is_some_and(|x| x.thread_table))
}

/// The change to the thread table `attr`, given the referenced ids in
/// `scratch`.
fn table_change(
    attr: &KeyValueAndUnit,
    plans: &AttrPlans,
    rules: &Rules,
    scratch: &Scratch,
) -> Option<TableChange> {
    let entries = attr.value.as_ref().and_then(thread_table::entries)?;
    let referenced = &scratch.referenced;
    let change = thread_table::prune(entries, rules, |id| {
        plans.ids.get(id).is_some_and(|&n| referenced[n as usize])
    });
    (!matches!(change, TableChange::Unchanged)).then_some(change)
}

fn non_idle(stacks: &[Stack]) -> impl Fn(i32) -> bool + '_ {
    |i| {
        usize::try_from(i)
            .ok()
            .and_then(|i| stacks.get(i))
            .is_some_and(|s| !s.location_indices.is_empty())
    }
}

fn plan_profile(
    p: &Profile,
    lookup: &Lookup<'_>,
    plans: &AttrPlans,
    rules: &Rules,
    scratch: &mut Scratch,
) -> ProfilePlan {
    let table_at = table_at(p, plans);
    let filters = !rules.keep_threads.is_empty() || !rules.drop_threads.is_empty();
    let by_count = rules.min_samples_per_thread > 0;
    let track_refs = table_at.is_some();
    let mut decisions = Vec::new();
    let mut rewrite = false;
    if !(filters || by_count || track_refs) {
        // Only whether some sample's attributes change.
        rewrite = plans.rewrites
            && p.samples
                .iter()
                .any(|s| plans.changes(&s.attribute_indices));
    } else {
        let r = ThreadRules::new(plans, rules, track_refs, p.samples.len(), scratch);
        let non_idle = non_idle(&lookup.dictionary().stack_table);
        let mut singles = std::mem::take(&mut scratch.singles);
        r.singles(plans, &mut singles);
        for (k, s) in p.samples.iter().enumerate() {
            if let Some(next) = ahead(&p.samples, k) {
                prefetch_slice(&next.attribute_indices);
            }
            let Some((group, ref_id)) = r.see(s, plans, &singles, scratch) else {
                // The profile changes: decided while applying.
                scratch.singles = singles;
                return ProfilePlan {
                    decisions: Vec::new(),
                    rewrite: false,
                    table: None,
                    deferred: true,
                };
            };
            rewrite |= r.tally(s, group, ref_id, plans, &non_idle, scratch);
        }
        scratch.singles = singles;
        if by_count {
            // Second pass: groups are known only once every sample was seen.
            let mut any_removed = false;
            decisions = scratch
                .groups
                .iter()
                .map(|&g| {
                    let few = r.few(g, scratch);
                    any_removed |= few;
                    if few {
                        Decision::DropByCount
                    } else {
                        Decision::Keep
                    }
                })
                .collect();
            if !any_removed {
                decisions = Vec::new();
            } else if track_refs || rewrite {
                // References and rewrites must only count surviving samples.
                let kept = p
                    .samples
                    .iter()
                    .zip(&decisions)
                    .filter(|(_, &d)| d == Decision::Keep);
                rewrite = r.survivors(kept.map(|(s, _)| s), plans, scratch);
            }
        }
    }
    let table = table_at.and_then(|at| {
        let attr = lookup.attribute(p.attribute_indices[at]);
        table_change(attr, plans, rules, scratch).map(|c| (at, c))
    });
    ProfilePlan {
        decisions,
        rewrite,
        table,
        deferred: false,
    }
}

/// For a deferred profile: takes the thread decisions while removing the
/// samples they drop, in one pass (and a second only for
/// `min_samples_per_thread`); returns (observations dropped by name, by
/// count, whether a surviving sample's attributes change).
fn decide_and_drop(
    p: &mut Profile,
    stacks: &[Stack],
    plans: &AttrPlans,
    rules: &Rules,
    track_refs: bool,
    mark: bool,
    scratch: &mut Scratch,
) -> (u64, u64, bool) {
    let r = ThreadRules::new(plans, rules, track_refs, p.samples.len(), scratch);
    let non_idle = non_idle(stacks);
    let (mut by_name, mut by_count, mut rewrite) = (0u64, 0u64, false);
    let mut singles = std::mem::take(&mut scratch.singles);
    r.singles(plans, &mut singles);
    retain_ahead(&mut p.samples, |s, next| {
        if let Some(next) = next {
            prefetch_sample(next);
        }
        let Some((group, ref_id)) = r.see(s, plans, &singles, scratch) else {
            by_name += sample_observations(s);
            return false;
        };
        rewrite |= r.tally(s, group, ref_id, plans, &non_idle, scratch);
        if mark {
            scratch.decided.sample(s);
        }
        true
    });
    scratch.singles = singles;
    if r.by_count && scratch.groups.iter().any(|&g| r.few(g, scratch)) {
        let mut k = 0;
        p.samples.retain(|s| {
            let few = r.few(scratch.groups[k], scratch);
            k += 1;
            by_count += if few { sample_observations(s) } else { 0 };
            !few
        });
        if track_refs || rewrite {
            // References and rewrites must only count surviving samples.
            rewrite = r.survivors(p.samples.iter(), plans, scratch);
        }
    }
    (by_name, by_count, rewrite)
}

/// Runs the pass over `batch`; see the module docs.
pub(crate) fn prune(
    batch: &mut ProfileBatch,
    rules: &Rules,
    scratch: &mut Scratch,
    ctx: &mut ProcessContext<'_>,
) -> Verdict {
    let (plans, profiles) = {
        let data = batch.data();
        let lookup = Lookup::of(data);
        let plans = plan_attributes(&lookup, rules);
        let profiles: Vec<ProfilePlan> = profiles(&data.resource_profiles)
            .map(|p| plan_profile(p, &lookup, &plans, rules, scratch))
            .collect();
        (plans, profiles)
    };
    let changes = profiles
        .iter()
        .any(|p| p.deferred || !p.decisions.is_empty() || p.rewrite || p.table.is_some());
    if !changes {
        return Verdict::Keep;
    }
    apply(batch.data_mut(), plans, profiles, rules, scratch, ctx);
    if batch.is_empty() {
        Verdict::Drop
    } else {
        Verdict::Keep
    }
}

fn apply(
    data: &mut ProfilesData,
    mut plans: AttrPlans,
    profiles: Vec<ProfilePlan>,
    rules: &Rules,
    scratch: &mut Scratch,
    ctx: &mut ProcessContext<'_>,
) {
    let ProfilesData {
        resource_profiles,
        dictionary,
    } = data;
    let (mut by_name, mut by_count, mut pruned) = (0u64, 0u64, 0u64);
    // What each attribute index becomes in samples.
    let mut map: Vec<u32> = plans
        .attrs
        .iter()
        .map(|x| if x.dropped { DROP } else { x.target as u32 })
        .collect();
    let mut tables = Tables::of(dictionary.as_ref());
    // The renamed entries are appended before the samples are rewritten.
    tables.attributes += plans.new_attrs.len();
    // The entries the rewrite orphans go with it (see `compaction`).
    let compaction = match dictionary.as_ref() {
        Some(d) if plans.rewrites => {
            Compaction::plan(&mut map, tables.attributes, d, resource_profiles)
        }
        _ => None,
    };
    let (stacks, mut attribute_table) = match dictionary.as_mut() {
        Some(d) => (&d.stack_table[..], Some(&mut d.attribute_table)),
        None => (&[][..], None),
    };
    if let Some(t) = attribute_table.as_deref_mut() {
        // New entries go at the end: no existing index moves until the
        // compaction.
        t.append(&mut plans.new_attrs);
    }
    scratch
        .marks
        .reset(tables.stacks, tables.links, tables.attributes);
    scratch.marked.clear();
    scratch.rewritten.clear();
    for (p, mut plan) in profiles_mut(resource_profiles).zip(profiles) {
        let mut premarked = false;
        if plan.deferred {
            let table_at = table_at(p, &plans);
            // Marking the samples kept spares the collection a walk of
            // them, unless they are rewritten, or go by count, or the
            // profile is small beside the marks to clear and add.
            let marks = tables.stacks + tables.links + tables.attributes;
            let mark = !plans.rewrites && marks <= 4 * p.samples.len() + 1024;
            if mark {
                scratch
                    .decided
                    .reset(tables.stacks, tables.links, tables.attributes);
            }
            let (n, c, rewrite) =
                decide_and_drop(p, stacks, &plans, rules, table_at.is_some(), mark, scratch);
            if mark && c == 0 {
                scratch.marks.add(&scratch.decided);
                premarked = true;
            }
            by_name += n;
            by_count += c;
            plan.rewrite = rewrite;
            plan.table = table_at.and_then(|at| {
                let table = attribute_table.as_deref()?;
                let attr = usize::try_from(p.attribute_indices[at])
                    .ok()
                    .and_then(|i| table.get(i))?;
                table_change(attr, &plans, rules, scratch).map(|c| (at, c))
            });
        } else if !plan.decisions.is_empty() {
            let mut k = 0;
            p.samples.retain(|s| {
                let d = plan.decisions[k];
                k += 1;
                if d == Decision::DropByCount {
                    by_count += sample_observations(s);
                }
                d == Decision::Keep
            });
        }
        if plan.rewrite {
            scratch
                .merger
                .merge(p, tables, &map, Some(&mut scratch.marks));
        }
        scratch.rewritten.push(plan.rewrite);
        if !p.samples.is_empty() {
            // Left after `remove_empty_profiles`, in order.
            scratch.marked.push(plan.rewrite || premarked);
        }
        let (Some((at, change)), Some(table)) = (plan.table, attribute_table.as_deref_mut()) else {
            continue;
        };
        match change {
            TableChange::Replaced { value, removed } => {
                pruned += removed;
                let old = &table[p.attribute_indices[at] as usize];
                let entry = KeyValueAndUnit {
                    key_strindex: old.key_strindex,
                    value: Some(value),
                    unit_strindex: old.unit_strindex,
                };
                // A new entry: another profile may share the old one.
                table.push(entry);
                p.attribute_indices[at] = (table.len() - 1) as i32;
            }
            TableChange::Removed { removed } => {
                pruned += removed;
                p.attribute_indices.remove(at);
            }
            TableChange::Unchanged => {}
        }
    }
    if let (Some(c), Some(d)) = (compaction, dictionary.as_mut()) {
        c.apply(d, resource_profiles, &scratch.rewritten);
    }
    ctx.dropped(by_name, THREAD_DROPPED);
    ctx.dropped(by_count, MIN_SAMPLES_PER_THREAD);
    if pruned > 0 {
        ctx.event("thread_metadata_pruned", pruned);
    }
    remove_empty_profiles(data);
    // The pass removes stacks only with the samples it drops; orphans the
    // input already had below the stacks are dictionary_dedup's to remove.
    gc_with(
        data,
        &GcOptions {
            premarked: Some((&scratch.marks, &scratch.marked)),
            whole_below_live_stacks: true,
        },
    );
}
