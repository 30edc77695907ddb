//! Go's heap (`alloc_*`), allocs, mutex and block profiles count from the
//! process' start: sent as they are, every scrape would repeat all that
//! came before, and a backend that adds profiles up (as OTLP backends and
//! flame graphs over a time range do) would show totals that only grow.
//! As Grafana Alloy's scrape (`delta`) and Datadog's profiler do, each
//! scrape of such a profile is sent as its change since the previous one:
//! the first scrape of a target only sets the baseline, and a profile
//! whose counts went down (the process restarted) is sent whole and
//! becomes the new baseline. `inuse_*` and goroutine profiles are
//! snapshots and pass unchanged.
//!
//! A sample is matched to the previous scrape's by its sample type, its
//! stack (addresses, and function and line where there is no address) and
//! its attributes (pprof labels); the baselines are held per target and
//! profile in the memory budget, and dropped with a target that is no
//! longer scraped.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use profcol_model::memory::{MemoryBudget, Reservation};
use profcol_model::proto::{any_value::Value, dictionary_of, Profile, ProfilesData};

use super::config::ProfileKind;

/// Whether `sample_type` of a `kind` profile counts from the start.
pub(super) fn cumulative(kind: ProfileKind, sample_type: &str) -> bool {
    match kind {
        ProfileKind::Heap | ProfileKind::Allocs => sample_type.starts_with("alloc_"),
        ProfileKind::Mutex | ProfileKind::Block => true,
        ProfileKind::Cpu | ProfileKind::Goroutine => false,
    }
}

/// What a scrape of a cumulative profile turned into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delta {
    /// The first scrape: kept as the baseline, its cumulative profiles
    /// not sent.
    Baseline,
    /// The change since the previous scrape.
    Change,
    /// Counts went down: sent whole, the new baseline.
    Restarted,
    /// No cumulative sample type in it.
    None,
}

/// One target's profile as last scraped: each sample's cumulative values.
struct Previous {
    /// `time_unix_nano` of the previous scrape's profiles.
    time: u64,
    values: HashMap<u64, i64>,
    memory: Reservation,
}

/// Baselines of every target and profile of one receiver.
pub(super) struct Deltas {
    hasher: ahash::RandomState,
    budget: Arc<MemoryBudget>,
    by_target: Mutex<HashMap<(String, ProfileKind), Previous>>,
}

/// The memory one baseline entry takes in its map.
const ENTRY_BYTES: usize = 24;

impl Deltas {
    pub(super) fn new(budget: Arc<MemoryBudget>) -> Self {
        Self {
            hasher: ahash::RandomState::new(),
            budget,
            by_target: Mutex::default(),
        }
    }

    /// Forgets the baselines of targets not in `keep` (their `key`s).
    pub(super) fn retain(&self, keep: &std::collections::HashSet<String>) {
        self.lock().retain(|(target, _), _| keep.contains(target));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, ProfileKind), Previous>> {
        self.by_target.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns the cumulative profiles of `data` (a `kind` profile of
    /// `target`) into their change since the last scrape, dropping the
    /// samples that did not change and, on a first scrape, the cumulative
    /// profiles themselves.
    pub(super) fn apply(&self, target: &str, kind: ProfileKind, data: &mut ProfilesData) -> Delta {
        let now = self.values(kind, data);
        if now.is_empty() {
            return Delta::None;
        }
        let time = profiles(data)
            .filter(|p| p.sample_type.is_some())
            .map(|p| p.time_unix_nano)
            .max()
            .unwrap_or(0);
        let key = (target.to_owned(), kind);
        let previous = self.lock().remove(&key);
        let outcome = match &previous {
            None => Delta::Baseline,
            Some(p)
                if now
                    .iter()
                    .any(|(k, v)| p.values.get(k).is_some_and(|old| v < old)) =>
            {
                Delta::Restarted
            }
            Some(_) => Delta::Change,
        };
        let mut memory = previous.map(|p| {
            if outcome == Delta::Change {
                self.subtract(kind, data, &now, &p.values, p.time);
            }
            p.memory
        });
        if outcome != Delta::Restarted {
            // A first scrape's, and those where nothing changed.
            drop_cumulative(kind, data, outcome == Delta::Change);
        }
        // The new baseline, if the budget has room for it; else the next
        // scrape starts again from a baseline.
        let bytes = now.capacity() * ENTRY_BYTES;
        let held = match memory.as_mut() {
            Some(m) => m.try_resize_to(bytes).is_ok(),
            None => match self.budget.try_admit(bytes) {
                Ok(m) => {
                    memory = Some(m);
                    true
                }
                Err(_) => false,
            },
        };
        if let (true, Some(memory)) = (held, memory) {
            self.lock().insert(
                key,
                Previous {
                    time,
                    values: now,
                    memory,
                },
            );
        }
        outcome
    }

    /// Every cumulative sample's value, by its key.
    fn values(&self, kind: ProfileKind, data: &ProfilesData) -> HashMap<u64, i64> {
        let mut out = HashMap::new();
        for p in profiles(data) {
            let Some(type_name) = cumulative_type(kind, data, p) else {
                continue;
            };
            for s in &p.samples {
                let v: i64 = s.values.iter().sum();
                *out.entry(self.key(data, type_name, s)).or_insert(0) += v;
            }
        }
        out
    }

    /// `data`'s cumulative samples (`now`, by key) less `previous`, those
    /// left unchanged dropped; their profiles then span the time since
    /// `since`.
    fn subtract(
        &self,
        kind: ProfileKind,
        data: &mut ProfilesData,
        now: &HashMap<u64, i64>,
        previous: &HashMap<u64, i64>,
        since: u64,
    ) {
        // Keys first (they read the dictionary), then the change.
        let keys: Vec<Vec<u64>> = profiles(data)
            .map(|p| match cumulative_type(kind, data, p) {
                Some(t) => p.samples.iter().map(|s| self.key(data, t, s)).collect(),
                None => Vec::new(),
            })
            .collect();
        for (p, keys) in profiles_mut(data).zip(keys) {
            if keys.is_empty() {
                continue;
            }
            // Go may list one stack twice: the first sample takes the
            // change of both, the others go.
            let mut taken = std::collections::HashSet::new();
            let mut keys = keys.into_iter();
            p.samples.retain_mut(|s| {
                let key = keys.next().expect("a key per sample");
                if !taken.insert(key) {
                    return false;
                }
                let change = now[&key] - previous.get(&key).copied().unwrap_or(0);
                s.values.clear();
                s.values.push(change);
                change != 0
            });
            if since > 0 && p.time_unix_nano > since {
                p.duration_nano = p.time_unix_nano - since;
                p.time_unix_nano = since;
            }
        }
    }

    /// A sample's identity across scrapes.
    fn key(&self, data: &ProfilesData, type_name: &str, s: &profcol_model::proto::Sample) -> u64 {
        let d = dictionary_of(data);
        let text = |i: i32| usize::try_from(i).ok().and_then(|i| d.string_table.get(i));
        let mut h = self.hasher.build_hasher();
        type_name.hash(&mut h);
        let stack = usize::try_from(s.stack_index)
            .ok()
            .and_then(|i| d.stack_table.get(i));
        for &l in stack.map_or(&[][..], |s| &s.location_indices) {
            let Some(loc) = usize::try_from(l)
                .ok()
                .and_then(|i| d.location_table.get(i))
            else {
                continue;
            };
            loc.address.hash(&mut h);
            if loc.address == 0 {
                for line in &loc.lines {
                    let f = usize::try_from(line.function_index)
                        .ok()
                        .and_then(|i| d.function_table.get(i));
                    f.and_then(|f| text(f.name_strindex)).hash(&mut h);
                    line.line.hash(&mut h);
                }
            }
            0xffu8.hash(&mut h);
        }
        for &a in &s.attribute_indices {
            let Some(kv) = usize::try_from(a)
                .ok()
                .and_then(|i| d.attribute_table.get(i))
            else {
                continue;
            };
            text(kv.key_strindex).hash(&mut h);
            match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(v)) => v.hash(&mut h),
                Some(Value::IntValue(v)) => v.hash(&mut h),
                Some(Value::BoolValue(v)) => v.hash(&mut h),
                other => format!("{other:?}").hash(&mut h),
            }
        }
        h.finish()
    }
}

/// The sample type's name if it counts from the start.
fn cumulative_type<'a>(kind: ProfileKind, data: &'a ProfilesData, p: &Profile) -> Option<&'a str> {
    let d = dictionary_of(data);
    let t = p.sample_type.as_ref()?;
    let name = usize::try_from(t.type_strindex)
        .ok()
        .and_then(|i| d.string_table.get(i))?;
    cumulative(kind, name).then_some(name.as_str())
}

/// Removes the cumulative profiles, or only those without samples.
fn drop_cumulative(kind: ProfileKind, data: &mut ProfilesData, only_empty: bool) {
    let names: Vec<bool> = profiles(data)
        .map(|p| cumulative_type(kind, data, p).is_some() && (!only_empty || p.samples.is_empty()))
        .collect();
    let mut cumulative = names.into_iter();
    for rp in &mut data.resource_profiles {
        for sp in &mut rp.scope_profiles {
            sp.profiles.retain(|_| !cumulative.next().unwrap_or(false));
        }
    }
}

fn profiles(data: &ProfilesData) -> impl Iterator<Item = &Profile> {
    profcol_model::profiles(&data.resource_profiles)
}

fn profiles_mut(data: &mut ProfilesData) -> impl Iterator<Item = &mut Profile> {
    profcol_model::batch::profiles_mut(&mut data.resource_profiles)
}
