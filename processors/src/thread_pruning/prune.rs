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
//! 4. empty profiles are removed and the dictionary garbage-collected.

use hashbrown::HashMap;

use profcol_pipeline::component::{ProcessContext, Verdict};
use profcol_pipeline::model::dictionary::{gc, remove_empty_profiles, Lookup};
use profcol_pipeline::model::ProfileBatch;
use profcol_pipeline::proto::{any_value::Value, KeyValueAndUnit, Profile, ProfilesData, Sample};

use super::config::Rules;
use super::merge::{Key, Merger};
use super::thread_table::{self, TableChange};

/// Drop reasons, the `reason` label of the dropped-samples metric.
pub const THREAD_DROPPED: &str = "thread_dropped";
pub const MIN_SAMPLES_PER_THREAD: &str = "min_samples_per_thread";

pub(crate) const THREAD_ID: &str = "thread.id";
pub(crate) const THREAD_NAME: &str = "thread.name";
pub(crate) const THREAD_METADATA: &str = "sentry.thread_metadata";

const NONE: u32 = u32::MAX;

/// Per-sample decision.
const KEEP: u8 = 0;
const BY_NAME: u8 = 1;
const BY_COUNT: u8 = 2;

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
                                value: Some(profcol_pipeline::proto::AnyValue {
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
        new_attrs,
        rewrites,
    }
}

/// What happens to one profile.
struct ProfilePlan {
    /// One decision per sample; empty when every sample is kept.
    decisions: Vec<u8>,
    /// Some kept sample's attribute list changes.
    rewrite: bool,
    table: Option<(usize, TableChange)>,
}

/// Buffers the processor keeps from batch to batch.
#[derive(Default)]
pub(crate) struct Scratch {
    groups: Vec<u64>,
    counts: HashMap<u64, u64>,
    referenced: Vec<bool>,
    merger: Merger,
}

fn observations(s: &Sample) -> u64 {
    s.values.len().max(s.timestamps_unix_nano.len()).max(1) as u64
}

fn plan_profile(
    p: &Profile,
    lookup: &Lookup<'_>,
    plans: &AttrPlans,
    rules: &Rules,
    scratch: &mut Scratch,
) -> ProfilePlan {
    let table_at = p
        .attribute_indices
        .iter()
        .position(|&a| plans.get(a).is_some_and(|x| x.thread_table));
    let filters = !rules.keep_threads.is_empty() || !rules.drop_threads.is_empty();
    let by_count = rules.min_samples_per_thread > 0;
    let track_refs = table_at.is_some();
    let mut decisions = Vec::new();
    let mut rewrite = false;
    if filters || by_count || plans.rewrites || track_refs {
        if filters || by_count {
            decisions = vec![KEEP; p.samples.len()];
        }
        if track_refs {
            scratch.referenced.clear();
            scratch.referenced.resize(plans.ids.len(), false);
        }
        scratch.groups.clear();
        scratch.counts.clear();
        for (k, s) in p.samples.iter().enumerate() {
            let (mut id, mut name, mut rejected, mut ref_id) = (NONE, NONE, false, NONE);
            for &a in &s.attribute_indices {
                let Some(x) = plans.get(a) else { continue };
                if x.thread_id != NONE {
                    id = x.thread_id;
                    if !x.dropped {
                        ref_id = x.thread_id;
                    }
                }
                if x.thread_name != NONE {
                    name = x.thread_name;
                    rejected = x.name_rejected;
                }
            }
            if filters
                && (if name == NONE {
                    !rules.name_kept(None)
                } else {
                    rejected
                })
            {
                decisions[k] = BY_NAME;
                continue;
            }
            if by_count {
                let group = if id == NONE && name == NONE {
                    u64::MAX
                } else {
                    (u64::from(id) << 32) | u64::from(name)
                };
                scratch.groups.push(group);
                if group != u64::MAX && !lookup.stack(s.stack_index).location_indices.is_empty() {
                    *scratch.counts.entry(group).or_default() += observations(s);
                }
            }
            rewrite |= plans.changes(&s.attribute_indices);
            if track_refs && ref_id != NONE {
                scratch.referenced[ref_id as usize] = true;
            }
        }
        if by_count {
            // Second pass: groups are known only once every sample was seen.
            let min = rules.min_samples_per_thread;
            let mut groups = scratch.groups.iter();
            let mut any_removed = false;
            for d in decisions.iter_mut().filter(|d| **d == KEEP) {
                let g = *groups.next().expect("one group per sample kept by name");
                if g != u64::MAX && scratch.counts.get(&g).copied().unwrap_or(0) < min {
                    *d = BY_COUNT;
                    any_removed = true;
                }
            }
            if any_removed && (track_refs || rewrite) {
                // References and rewrites must only count surviving samples.
                rewrite = false;
                scratch.referenced.iter_mut().for_each(|r| *r = false);
                for (s, _) in p.samples.iter().zip(&decisions).filter(|(_, &d)| d == KEEP) {
                    rewrite |= plans.changes(&s.attribute_indices);
                    for &a in &s.attribute_indices {
                        if let Some(x) = plans.get(a) {
                            if track_refs && x.thread_id != NONE && !x.dropped {
                                scratch.referenced[x.thread_id as usize] = true;
                            }
                        }
                    }
                }
            }
        }
        if decisions.iter().all(|&d| d == KEEP) {
            decisions = Vec::new();
        }
    }
    let table = table_at.and_then(|at| {
        let attr = lookup.attribute(p.attribute_indices[at]);
        let entries = attr.value.as_ref().and_then(thread_table::entries)?;
        let referenced = &scratch.referenced;
        let change = thread_table::prune(entries, rules, |id| {
            plans.ids.get(id).is_some_and(|&n| referenced[n as usize])
        });
        (!matches!(change, TableChange::Unchanged)).then_some((at, change))
    });
    ProfilePlan {
        decisions,
        rewrite,
        table,
    }
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
        let profiles: Vec<ProfilePlan> = profiles(data)
            .map(|p| plan_profile(p, &lookup, &plans, rules, scratch))
            .collect();
        (plans, profiles)
    };
    let changes = profiles
        .iter()
        .any(|p| !p.decisions.is_empty() || p.rewrite || p.table.is_some());
    if !changes {
        return Verdict::Keep;
    }
    apply(batch.data_mut(), plans, profiles, &mut scratch.merger, ctx);
    if batch.is_empty() {
        Verdict::Drop
    } else {
        Verdict::Keep
    }
}

fn profiles(data: &ProfilesData) -> impl Iterator<Item = &Profile> {
    data.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
}

fn apply(
    data: &mut ProfilesData,
    mut plans: AttrPlans,
    profiles: Vec<ProfilePlan>,
    merger: &mut Merger,
    ctx: &mut ProcessContext<'_>,
) {
    let ProfilesData {
        resource_profiles,
        dictionary,
    } = data;
    let (mut by_name, mut by_count, mut pruned) = (0u64, 0u64, 0u64);
    let mut attribute_table = dictionary.as_mut().map(|d| &mut d.attribute_table);
    if let Some(t) = attribute_table.as_deref_mut() {
        // New entries go at the end: no existing index moves until `gc`.
        t.append(&mut plans.new_attrs);
    }
    let all = resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles);
    for (p, plan) in all.zip(profiles) {
        if !plan.decisions.is_empty() {
            let mut k = 0;
            p.samples.retain(|s| {
                let d = plan.decisions[k];
                k += 1;
                match d {
                    BY_NAME => by_name += observations(s),
                    BY_COUNT => by_count += observations(s),
                    _ => return true,
                }
                false
            });
        }
        if plan.rewrite {
            merger.keys.clear();
            for s in &mut p.samples {
                if plans.changes(&s.attribute_indices) {
                    s.attribute_indices
                        .retain(|&a| !plans.get(a).is_some_and(|x| x.dropped));
                    for a in &mut s.attribute_indices {
                        if let Some(x) = plans.get(*a) {
                            *a = x.target;
                        }
                    }
                }
                merger.keys.push(Key::of(s));
            }
            merger.merge(p);
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
    ctx.dropped(by_name, THREAD_DROPPED);
    ctx.dropped(by_count, MIN_SAMPLES_PER_THREAD);
    if pruned > 0 {
        ctx.event("thread_metadata_pruned", pruned);
    }
    remove_empty_profiles(data);
    gc(data);
}
