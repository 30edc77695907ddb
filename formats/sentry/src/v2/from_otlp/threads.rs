//! Sentry threads of OTLP samples: a thread per (`thread.id`,
//! `thread.name`, `process.pid`) attribute triple, profile-wide.

use std::borrow::Cow;

use hashbrown::HashMap;

use super::dict::{attr, text};
use crate::ids;
use crate::keys as k;
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{any_value::Value, KeyValueList};

/// Thread as Sentry names it.
#[derive(Debug, Clone, Default)]
pub(super) struct ThreadInfo {
    pub id: String,
    pub name: Option<String>,
    pub priority: Option<u32>,
}

/// What a sample attribute means to the exporter (cached per index).
#[derive(Clone, Copy)]
enum AttrKind {
    ThreadId,
    ThreadName,
    ProcessPid,
    Other,
}

/// The profile's threads, by profile-wide index.
pub(super) struct Threads<'d> {
    dict: Lookup<'d>,
    pub threads: Vec<ThreadInfo>,
    /// (thread.id, thread.name, process.pid) attribute indices -> thread.
    thread_keys: HashMap<(i32, i32, i32), u32>,
    attr_kinds: HashMap<i32, AttrKind>,
}

impl<'d> Threads<'d> {
    pub(super) fn new(dict: Lookup<'d>) -> Self {
        Self {
            dict,
            threads: Vec::new(),
            thread_keys: HashMap::new(),
            attr_kinds: HashMap::new(),
        }
    }

    /// Thread (profile-wide index) named by a sample's attributes.
    pub(super) fn thread(&mut self, attrs: &[i32]) -> u32 {
        let d = self.dict;
        let (mut id_attr, mut name_attr, mut pid_attr) = (0, 0, 0);
        for &i in attrs {
            let kind = *self
                .attr_kinds
                .entry(i)
                .or_insert_with(|| match attr(d, i) {
                    Some((k::THREAD_ID, _)) => AttrKind::ThreadId,
                    Some((k::THREAD_NAME, _)) => AttrKind::ThreadName,
                    Some((k::PROCESS_PID, _)) => AttrKind::ProcessPid,
                    _ => AttrKind::Other,
                });
            match kind {
                AttrKind::ThreadId => id_attr = i,
                AttrKind::ThreadName => name_attr = i,
                AttrKind::ProcessPid => pid_attr = i,
                AttrKind::Other => {}
            }
        }
        let key = (id_attr, name_attr, pid_attr);
        if let Some(&t) = self.thread_keys.get(&key) {
            return t;
        }
        let text = |i: i32| {
            attr(d, i)
                .and_then(|(_, v)| text(d, v))
                .map(Cow::into_owned)
        };
        let name = text(name_attr).filter(|n| !n.is_empty());
        let pid = text(pid_attr).unwrap_or_default();
        let id = match (text(id_attr), &name) {
            (Some(id), _) if !id.is_empty() => id,
            (_, Some(name)) => id_from_name(&pid, name),
            _ if !pid.is_empty() => id_from_name(&pid, ""),
            _ => "0".to_owned(),
        };
        let t = self.threads.len() as u32;
        self.threads.push(ThreadInfo {
            id,
            name,
            priority: None,
        });
        self.thread_keys.insert(key, t);
        t
    }
}

/// Names and priorities from the profile's `sentry.thread_metadata` table.
pub(super) fn thread_table<'d>(
    d: Lookup<'d>,
    profile_attrs: &[i32],
) -> HashMap<&'d str, (Option<&'d str>, Option<u32>)> {
    let mut out = HashMap::new();
    let table = d
        .attribute_value(profile_attrs, k::SENTRY_THREAD_METADATA)
        .and_then(|v| match &v.value {
            Some(Value::KvlistValue(KeyValueList { values })) => Some(values),
            _ => None,
        });
    for kv in table.into_iter().flatten() {
        let mut name = None;
        let mut priority = None;
        if let Some(Value::KvlistValue(fields)) = kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            for f in &fields.values {
                match (
                    f.key.as_str(),
                    f.value.as_ref().and_then(|v| v.value.as_ref()),
                ) {
                    ("name", Some(Value::StringValue(s))) => name = Some(s.as_str()),
                    // Relay reads a `u32`: another number is left out.
                    ("priority", Some(Value::IntValue(p))) => priority = u32::try_from(*p).ok(),
                    _ => {}
                }
            }
        }
        out.insert(kv.key.as_str(), (name, priority));
    }
    out
}

/// A thread id for a thread known only by name (and process, when samples
/// of several processes share a Profile, as from the eBPF profiler):
/// stable, decimal, and small enough (53 bits) for any JSON reader.
fn id_from_name(pid: &str, name: &str) -> String {
    let h = ids::stable_uuid(&[pid.as_bytes(), name.as_bytes()]);
    let mut b = [0u8; 8];
    b.copy_from_slice(&h[..8]);
    (u64::from_be_bytes(b) >> 11).to_string()
}
