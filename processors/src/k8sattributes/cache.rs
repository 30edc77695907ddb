//! The pod cache the watches fill and batches read: pods by identifier,
//! namespaces and nodes by name, the queue of deleted pods waiting out
//! `pod_delete_grace_period`. Bounded by the memory budget: what it holds
//! is reserved there, and an object that does not fit is left out (and
//! counted) rather than growing past the limit.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Instant;

use profcol_model::memory::Reservation;

use super::config::Plan;
use super::pod::{identifiers, Meta, Pod};

/// Per map entry, beyond its key: the hash table's slot and the `Arc`.
const ENTRY: usize = 64;

#[derive(Default)]
pub(super) struct State {
    pub pods: HashMap<String, Arc<Pod>>,
    pub namespaces: HashMap<String, Arc<Meta>>,
    pub nodes: HashMap<String, Arc<Meta>>,
    delete_queue: VecDeque<(Instant, String, Arc<Pod>)>,
    bytes: usize,
}

pub(super) struct Cache {
    pub plan: Arc<Plan>,
    state: RwLock<State>,
    reservation: std::sync::Mutex<Option<Reservation>>,
    pods_synced: AtomicBool,
}

/// What applying one event did, for the metrics.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Applied {
    Added,
    Updated,
    /// Over the memory budget: left out.
    Refused,
}

impl Cache {
    pub(super) fn new(plan: Arc<Plan>, reservation: Option<Reservation>) -> Self {
        Self {
            plan,
            state: RwLock::default(),
            reservation: std::sync::Mutex::new(reservation),
            pods_synced: AtomicBool::new(false),
        }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves what the cache holds, from now on, in `r`'s budget.
    pub(super) fn attach(&self, mut r: Reservation) {
        r.set(self.bytes());
        *self.reservation.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }

    /// Whether the first list of pods has been applied.
    pub(super) fn synced(&self) -> bool {
        self.pods_synced.load(Ordering::Acquire)
    }

    pub(super) fn set_synced(&self) {
        self.pods_synced.store(true, Ordering::Release);
    }

    /// Bytes the cache holds (reserved in the budget).
    pub(super) fn bytes(&self) -> usize {
        self.read().bytes
    }

    /// Reserves `total` bytes; `false` when the budget cannot hold them.
    fn reserve(&self, total: usize) -> bool {
        let mut r = self.reservation.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_mut() {
            Some(r) if total > r.bytes() => r.try_grow_to(total).is_ok(),
            Some(r) => {
                r.set(total);
                true
            }
            None => true,
        }
    }

    /// An `Arc` leaving the map or the queue: its bytes go once nothing
    /// else holds it.
    fn release(state: &mut State, pod: Arc<Pod>) {
        if Arc::strong_count(&pod) == 1 {
            state.bytes = state.bytes.saturating_sub(pod.footprint());
        }
    }

    /// A pod added or changed (the Collector's `addOrUpdatePod`): it takes
    /// every identifier it has, unless the pod holding one started later;
    /// identifiers it no longer has wait out the grace period.
    pub(super) fn upsert_pod(&self, pod: Pod) -> Applied {
        let pod = Arc::new(pod);
        let ids = identifiers(&self.plan, &pod);
        let uid_key = identifiers_uid_key(&pod.uid);
        let s = self.write();
        let old = s.pods.get(&uid_key).filter(|p| p.uid == pod.uid).cloned();
        let new_keys: usize = ids
            .iter()
            .filter(|k| !s.pods.contains_key(*k))
            .map(|k| k.len() + ENTRY)
            .sum();
        let total = s.bytes + pod.footprint() + new_keys;
        drop(s);
        if !self.reserve(total) {
            return Applied::Refused;
        }
        let mut s = self.write();
        s.bytes += pod.footprint();
        for id in &ids {
            if let Some(p) = s.pods.get(id) {
                if let (Some(new), Some(cur)) = (pod.start_time, p.start_time) {
                    if new < cur {
                        continue;
                    }
                }
            } else {
                s.bytes += id.len() + ENTRY;
            }
            if let Some(prev) = s.pods.insert(id.clone(), pod.clone()) {
                Self::release(&mut s, prev);
            }
        }
        let applied = if old.is_some() {
            Applied::Updated
        } else {
            Applied::Added
        };
        if let Some(old) = old {
            if s.pods.get(&uid_key).is_some_and(|p| Arc::ptr_eq(p, &pod)) {
                let now = Instant::now();
                let keep: HashSet<&String> = ids.iter().collect();
                let stale: Vec<String> = identifiers(&self.plan, &old)
                    .into_iter()
                    .filter(|k| !keep.contains(k))
                    .filter(|k| s.pods.get(k).is_some_and(|p| p.uid == old.uid))
                    .collect();
                for k in stale {
                    let p = s.pods[&k].clone();
                    s.delete_queue.push_back((now, k, p));
                }
            }
            Self::release(&mut s, old);
        }
        // The pod was counted once; if no identifier took it, drop it.
        Self::release(&mut s, pod);
        let bytes = s.bytes;
        drop(s);
        self.reserve(bytes);
        applied
    }

    /// A pod deleted (the Collector's `forgetPod`): its identifiers wait
    /// out `pod_delete_grace_period`, still answering lookups meanwhile.
    pub(super) fn forget_pod(&self, uid: &str, fallback: Pod) {
        let mut s = self.write();
        let cached = s.pods.get(&identifiers_uid_key(uid)).cloned();
        let ids = match &cached {
            Some(p) => identifiers(&self.plan, p),
            None => identifiers(&self.plan, &fallback),
        };
        let now = Instant::now();
        for id in ids {
            if let Some(p) = s.pods.get(&id).filter(|p| p.uid == uid).cloned() {
                s.delete_queue.push_back((now, id, p));
            }
        }
    }

    /// Removes what has waited `grace` (the Collector's delete loop);
    /// returns how many identifiers went.
    pub(super) fn expire(&self, now: Instant, grace: std::time::Duration) -> usize {
        let mut s = self.write();
        let mut removed = 0;
        while let Some((at, _, _)) = s.delete_queue.front() {
            if *at + grace > now {
                break;
            }
            let (_, id, pod) = s.delete_queue.pop_front().expect("front");
            if s.pods.get(&id).is_some_and(|p| Arc::ptr_eq(p, &pod)) {
                let gone = s.pods.remove(&id).expect("present");
                s.bytes = s.bytes.saturating_sub(id.len() + ENTRY);
                Self::release(&mut s, gone);
                removed += 1;
            }
            Self::release(&mut s, pod);
        }
        if removed > 0 {
            s.pods.shrink_to_fit();
        }
        let bytes = s.bytes;
        drop(s);
        self.reserve(bytes);
        removed
    }

    /// After a relist: pods the list no longer has are deleted.
    pub(super) fn forget_pods_not_in(&self, uids: &HashSet<String>) -> usize {
        let gone: Vec<Arc<Pod>> = {
            let s = self.read();
            let mut seen = HashSet::new();
            s.pods
                .values()
                .filter(|p| !uids.contains(&p.uid) && seen.insert(p.uid.clone()))
                .cloned()
                .collect()
        };
        for p in &gone {
            self.forget_pod(&p.uid, Pod::default());
        }
        gone.len()
    }

    /// A namespace or node added or changed; `false` if over budget.
    pub(super) fn upsert_meta(&self, node: bool, name: String, meta: Meta) -> Applied {
        let s = self.write();
        let map = if node { &s.nodes } else { &s.namespaces };
        let old = map.get(&name).map(|m| m.footprint() + name.len() + ENTRY);
        let total = s.bytes - old.unwrap_or(0) + meta.footprint() + name.len() + ENTRY;
        drop(s);
        if !self.reserve(total) {
            return Applied::Refused;
        }
        let mut s = self.write();
        s.bytes = s.bytes - old.unwrap_or(0) + meta.footprint() + name.len() + ENTRY;
        let map = if node {
            &mut s.nodes
        } else {
            &mut s.namespaces
        };
        map.insert(name, Arc::new(meta));
        match old {
            Some(_) => Applied::Updated,
            None => Applied::Added,
        }
    }

    pub(super) fn delete_meta(&self, node: bool, name: &str) {
        let mut s = self.write();
        let map = if node {
            &mut s.nodes
        } else {
            &mut s.namespaces
        };
        if let Some(m) = map.remove(name) {
            s.bytes = s.bytes.saturating_sub(m.footprint() + name.len() + ENTRY);
        }
        let bytes = s.bytes;
        drop(s);
        self.reserve(bytes);
    }

    /// Namespaces or nodes a relist no longer has.
    pub(super) fn forget_meta_not_in(&self, node: bool, names: &HashSet<String>) {
        let gone: Vec<String> = {
            let s = self.read();
            let map = if node { &s.nodes } else { &s.namespaces };
            map.keys()
                .filter(|n| !names.contains(*n))
                .cloned()
                .collect()
        };
        for n in gone {
            self.delete_meta(node, &n);
        }
    }
}

pub(super) fn identifiers_uid_key(uid: &str) -> String {
    static UID: std::sync::LazyLock<super::config::Source> =
        std::sync::LazyLock::new(|| super::config::Source::ResourceAttribute("k8s.pod.uid".into()));
    super::pod::identifier_key(&[(&UID, uid)])
}
