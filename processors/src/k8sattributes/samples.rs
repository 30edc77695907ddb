//! Per-sample association (`pod_association` sources `from:
//! sample_attribute`): an eBPF profiler on a node sends one resource for
//! every process; each sample (or its profile) names its process
//! (`process.pid`), container (`container.id`) or pod (`k8s.pod.uid`).
//! The pod's attributes go on the sample: interned in the dictionary once
//! per pod per batch and shared by every sample of that pod. Work per
//! sample is a few array reads: what an attribute entry means (a source,
//! which key) and which pod a source value names are worked out once per
//! distinct entry, not per sample.

use std::collections::HashMap;
use std::path::PathBuf;

use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValueAndUnit, ProfilesData};

use super::cache::State;
use super::config::{Plan, Source};
use super::pod::{identifier_key, IdPart, Pod};

/// `attr_slot` of an attribute entry not looked at yet, or no source.
const UNSEEN: u8 = u8::MAX;
const NONE: u8 = u8::MAX - 1;
/// `pod_of` of a source entry not looked up yet, or naming no known pod.
const UNRESOLVED: u32 = u32::MAX;
const NO_POD: u32 = u32::MAX - 1;

/// What one batch's pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Outcome {
    pub associated: u64,
    pub unassociated: u64,
}

/// `process.pid` to container id, from `<proc_root>/<pid>/cgroup`.
pub(super) struct Procfs {
    pub root: PathBuf,
}

impl Procfs {
    /// The container id in a process's cgroup path: the last run of 64
    /// hex digits (`.../cri-containerd-<id>.scope`, `.../docker/<id>`,
    /// `.../pod<uid>/<id>`).
    pub(super) fn container_of(&self, pid: i64) -> Option<String> {
        if pid <= 0 {
            return None;
        }
        let text = std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup")).ok()?;
        container_in_cgroup(&text)
    }
}

pub fn container_in_cgroup(text: &str) -> Option<String> {
    let mut found = None;
    for line in text.lines() {
        let path = line.splitn(3, ':').nth(2).unwrap_or("");
        let b = path.as_bytes();
        let mut run = 0;
        for (i, c) in b.iter().enumerate() {
            if c.is_ascii_hexdigit() {
                run += 1;
                let end = i + 1 == b.len() || !b[i + 1].is_ascii_hexdigit();
                if end && run == 64 {
                    found = Some(path[i + 1 - 64..=i].to_ascii_lowercase());
                }
            } else {
                run = 0;
            }
        }
    }
    found
}

/// The per-sample associations of the plan: those with a
/// `sample_attribute` source.
pub(super) fn sample_associations(plan: &Plan) -> Vec<&Vec<Source>> {
    plan.associations
        .iter()
        .filter(|a| a.iter().any(|s| matches!(s, Source::SampleAttribute(_))))
        .collect()
}

/// One pod's attributes as interned in this batch.
struct Interned {
    /// (key id, attribute index).
    attrs: Vec<(u32, i32)>,
    /// The attribute indexes alone, appended at once to a sample that has
    /// none of the keys.
    indexes: Vec<i32>,
    /// Bit `k` for each key id `k` < 64 of `attrs`.
    mask: u64,
    /// Some key id is 64 or more: `mask` does not say it all.
    wide: bool,
}

/// Bit of key id `key` in a key mask, 0 for ids past 63.
fn key_bit(key: u32) -> u64 {
    if key < 64 {
        1 << key
    } else {
        0
    }
}

struct Pass<'a> {
    state: &'a State,
    procfs: Option<&'a Procfs>,
    assocs: Vec<&'a Vec<Source>>,
    /// The distinct sample-attribute names the associations read.
    names: Vec<&'a str>,
    /// Per attribute entry: which of `names` its key is (or `NONE`).
    attr_slot: Vec<u8>,
    /// Per attribute entry: its key's id (for "the sample has it").
    attr_key: Vec<u32>,
    key_ids: HashMap<String, u32>,
    /// Per (association, attribute entries of its sources): the pod.
    memo: HashMap<(u8, [i32; 4]), u32>,
    pods: Vec<Interned>,
    pod_slot: HashMap<*const Pod, u32>,
    strings: HashMap<String, i32>,
    pids: HashMap<i64, Option<String>>,
}

const NO_KEY: u32 = u32::MAX;

impl<'a> Pass<'a> {
    fn key_id(&mut self, key: &str) -> u32 {
        if let Some(id) = self.key_ids.get(key) {
            return *id;
        }
        let id = self.key_ids.len() as u32;
        self.key_ids.insert(key.to_string(), id);
        id
    }

    fn classify(&mut self, a: usize, dict: &profcol_model::proto::ProfilesDictionary) {
        let key = dict
            .attribute_table
            .get(a)
            .and_then(|kv| dict.string_table.get(kv.key_strindex.max(0) as usize))
            .map(String::as_str)
            .unwrap_or("");
        self.attr_slot[a] = self
            .names
            .iter()
            .position(|n| *n == key)
            .map(|p| p as u8)
            .unwrap_or(NONE);
        self.attr_key[a] = if key.is_empty() {
            NO_KEY
        } else {
            self.key_id(key)
        };
    }

    fn value_of(&mut self, name: &str, v: Option<&AnyValue>) -> Option<String> {
        match v.and_then(|v| v.value.as_ref())? {
            A::StringValue(s) if !s.is_empty() => {
                if name == "process.pid" {
                    let pid = s.parse().ok()?;
                    self.container_of_pid(pid)
                } else {
                    Some(s.clone())
                }
            }
            A::IntValue(n) if name == "process.pid" => self.container_of_pid(*n),
            A::IntValue(n) => Some(n.to_string()),
            _ => None,
        }
    }

    fn container_of_pid(&mut self, pid: i64) -> Option<String> {
        let procfs = self.procfs?;
        self.pids
            .entry(pid)
            .or_insert_with(|| procfs.container_of(pid))
            .clone()
    }

    /// The pod slot of the pod `assoc` finds with these source entries.
    fn resolve(
        &mut self,
        i: usize,
        entries: [i32; 4],
        dict: &mut profcol_model::proto::ProfilesDictionary,
    ) -> u32 {
        if let Some(slot) = self.memo.get(&(i as u8, entries)) {
            return *slot;
        }
        let assoc = self.assocs[i];
        let mut values = Vec::with_capacity(assoc.len());
        for (j, source) in assoc.iter().enumerate() {
            let Source::SampleAttribute(name) = source else {
                // Resource sources were resolved per resource: the caller
                // put the value's entry in; only sample sources reach here.
                values.push(None);
                continue;
            };
            let e = entries[j];
            let v = dict
                .attribute_table
                .get(e as usize)
                .and_then(|kv| kv.value.clone());
            values.push(self.value_of(name, v.as_ref()));
        }
        let slot = if values.iter().any(Option::is_none) {
            NO_POD
        } else {
            let parts: Vec<IdPart<'_>> = assoc
                .iter()
                .zip(&values)
                .map(|(s, v)| (s, v.as_deref().unwrap_or("")))
                .collect();
            let key = identifier_key(&parts);
            match self.state.pods.get(&key).filter(|p| !p.ignore) {
                Some(pod) => self.intern(pod.clone(), dict),
                None => NO_POD,
            }
        };
        self.memo.insert((i as u8, entries), slot);
        slot
    }

    /// The pod's attributes in the dictionary, once per batch.
    fn intern(
        &mut self,
        pod: std::sync::Arc<Pod>,
        dict: &mut profcol_model::proto::ProfilesDictionary,
    ) -> u32 {
        let ptr = std::sync::Arc::as_ptr(&pod);
        if let Some(slot) = self.pod_slot.get(&ptr) {
            return *slot;
        }
        let mut attrs = Vec::with_capacity(pod.attributes.len() + 2);
        let mut all: Vec<(String, String)> = pod.attributes.clone();
        // A pod of one container: its container's attributes too, as the
        // resource-level rule does.
        if pod.by_id.len() == 1 || pod.by_name.len() == 1 {
            let c = pod
                .by_id
                .first()
                .or(pod.by_name.first())
                .map(|(_, i)| &pod.containers[*i]);
            if let Some(c) = c {
                if !c.name.is_empty() {
                    all.push(("k8s.container.name".into(), c.name.clone()));
                }
                if !c.image_name.is_empty() {
                    all.push(("container.image.name".into(), c.image_name.clone()));
                }
            }
        }
        for (k, v) in all {
            let key_id = self.key_id(&k);
            let key_strindex = self.string(&k, dict);
            dict.attribute_table.push(KeyValueAndUnit {
                key_strindex,
                value: Some(AnyValue {
                    value: Some(A::StringValue(v)),
                }),
                unit_strindex: 0,
            });
            attrs.push((key_id, dict.attribute_table.len() as i32 - 1));
        }
        let slot = self.pods.len() as u32;
        self.pods.push(Interned {
            indexes: attrs.iter().map(|(_, i)| *i).collect(),
            mask: attrs.iter().fold(0, |m, (k, _)| m | key_bit(*k)),
            wide: attrs.iter().any(|(k, _)| *k >= 64),
            attrs,
        });
        self.pod_slot.insert(ptr, slot);
        slot
    }

    fn string(&mut self, s: &str, dict: &mut profcol_model::proto::ProfilesDictionary) -> i32 {
        if let Some(i) = self.strings.get(s) {
            return *i;
        }
        if dict.string_table.is_empty() {
            dict.string_table.push(String::new());
        }
        dict.string_table.push(s.to_string());
        let i = dict.string_table.len() as i32 - 1;
        self.strings.insert(s.to_string(), i);
        i
    }
}

/// Adds pod attributes to the samples of `data` the per-sample
/// associations identify. References must be resolved.
pub(super) fn associate(
    plan: &Plan,
    state: &State,
    procfs: Option<&Procfs>,
    data: &mut ProfilesData,
) -> Outcome {
    let assocs = sample_associations(plan);
    let mut out = Outcome::default();
    if assocs.is_empty() {
        return out;
    }
    let mut names: Vec<&str> = Vec::new();
    for a in &assocs {
        for s in a.iter() {
            if let Source::SampleAttribute(n) = s {
                if !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
        }
    }
    let dict = data.dictionary.get_or_insert_with(Default::default);
    if dict.attribute_table.is_empty() {
        dict.attribute_table.push(KeyValueAndUnit::default());
    }
    let n = dict.attribute_table.len();
    let mut pass = Pass {
        state,
        procfs,
        assocs,
        names,
        attr_slot: vec![UNSEEN; n],
        attr_key: vec![NO_KEY; n],
        key_ids: HashMap::new(),
        memo: HashMap::new(),
        pods: Vec::new(),
        pod_slot: HashMap::new(),
        strings: HashMap::new(),
        pids: HashMap::new(),
    };
    // Each association's sources as slots of `names`, and for one-source
    // associations the pod of each attribute entry, filled as met.
    let assoc_slots: Vec<Vec<usize>> = pass
        .assocs
        .iter()
        .map(|a| {
            a.iter()
                .map(|s| match s {
                    Source::SampleAttribute(name) => {
                        pass.names.iter().position(|n| n == name).unwrap_or(0)
                    }
                    _ => 0,
                })
                .collect()
        })
        .collect();
    let mut single: Vec<Vec<u32>> = assoc_slots
        .iter()
        .map(|s| {
            if s.len() == 1 {
                vec![UNRESOLVED; n]
            } else {
                Vec::new()
            }
        })
        .collect();
    // Per association and sample: the entry of each source, from the
    // sample, else its profile.
    let n_names = pass.names.len();
    let mut found = [0i32; 8];
    let mut present: Vec<u32> = Vec::with_capacity(16);
    for rp in data.resource_profiles.iter_mut() {
        for profile in rp.scope_profiles.iter_mut().flat_map(|s| &mut s.profiles) {
            let mut from_profile = [0i32; 8];
            for &a in &profile.attribute_indices {
                let a = a as usize;
                if a >= n {
                    continue;
                }
                if pass.attr_slot[a] == UNSEEN {
                    pass.classify(a, dict);
                }
                let slot = pass.attr_slot[a];
                if (slot as usize) < n_names {
                    from_profile[slot as usize] = a as i32;
                }
            }
            for sample in &mut profile.samples {
                found[..n_names].copy_from_slice(&from_profile[..n_names]);
                let mut mask = 0u64;
                for &a in &sample.attribute_indices {
                    let a = a as usize;
                    if a >= n {
                        continue;
                    }
                    if pass.attr_slot[a] == UNSEEN {
                        pass.classify(a, dict);
                    }
                    let slot = pass.attr_slot[a];
                    if (slot as usize) < n_names {
                        found[slot as usize] = a as i32;
                    }
                    mask |= key_bit(pass.attr_key[a]);
                }
                let mut pod = NO_POD;
                for (i, slots) in assoc_slots.iter().enumerate() {
                    let mut entries = [0i32; 4];
                    let mut complete = true;
                    for (j, &slot) in slots.iter().enumerate() {
                        entries[j] = found[slot];
                        if entries[j] == 0 {
                            complete = false;
                            break;
                        }
                    }
                    if !complete {
                        continue;
                    }
                    // One source (the usual case): the pod by the entry,
                    // an array read; else by the entries, a hash lookup.
                    let p = if slots.len() == 1 {
                        let e = entries[0] as usize;
                        match single[i][e] {
                            UNRESOLVED => {
                                let p = pass.resolve(i, entries, dict);
                                single[i][e] = p;
                                p
                            }
                            p => p,
                        }
                    } else {
                        pass.resolve(i, entries, dict)
                    };
                    if p != NO_POD && p != UNRESOLVED {
                        pod = p;
                        break;
                    }
                }
                if pod == NO_POD {
                    out.unassociated += 1;
                    continue;
                }
                out.associated += 1;
                let interned = &pass.pods[pod as usize];
                // The usual case, the sample having none of the pod's
                // keys (told by the masks): one copy.
                if !interned.wide && mask & interned.mask == 0 {
                    // A new exact Vec: an allocation and a copy, cheaper
                    // than the allocator's realloc path.
                    let own = &sample.attribute_indices;
                    let mut v = Vec::with_capacity(own.len() + interned.indexes.len());
                    v.extend_from_slice(own);
                    v.extend_from_slice(&interned.indexes);
                    sample.attribute_indices = v;
                    continue;
                }
                // Else the keys it has, to skip those.
                present.clear();
                present.extend(
                    sample
                        .attribute_indices
                        .iter()
                        .filter(|&&a| (a as usize) < n)
                        .map(|&a| pass.attr_key[a as usize]),
                );
                sample.attribute_indices.reserve_exact(interned.attrs.len());
                for &(key, index) in &interned.attrs {
                    if !present.contains(&key) {
                        sample.attribute_indices.push(index);
                    }
                }
            }
        }
    }
    out
}
