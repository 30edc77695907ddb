//! Which profiles of a request share chunks: those of one resource (by
//! value, wherever it appears in the request) with the same attributes and
//! sample type are one process's profiler session, whose samples Sentry
//! takes in one chunk per window. An OTLP producer may send a session in
//! many small profiles (one per collection tick, or tens of thousands in
//! one request); a chunk each would cost a request each.
//!
//! Not grouped: Android profiles (their own trace format, one chunk per
//! trace) and legacy v1 profiles (one transaction each).

use std::collections::HashMap;

use super::dict::{android_trace, attr_text};
use crate::keys as k;
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{KeyValue, Profile};

/// Resource (canonical index), profile attributes, sample type and unit.
type Key = (usize, Vec<i32>, i32, i32);

#[derive(Default)]
pub(super) struct Sessions<'d> {
    /// Resources by value (their attributes' debug text): canonical index.
    resources: HashMap<String, usize>,
    groups: Vec<(&'d [KeyValue], Vec<&'d Profile>)>,
    index: HashMap<Key, usize>,
    /// The last resource seen and its canonical index (profiles come
    /// resource by resource: one lookup per resource, not per profile).
    last: Option<(*const KeyValue, usize, usize)>,
}

impl<'d> Sessions<'d> {
    pub(super) fn add(&mut self, dict: Lookup<'d>, resource: &'d [KeyValue], profile: &'d Profile) {
        let pa = &profile.attribute_indices;
        let alone = android_trace(dict, pa)
            || attr_text(dict, pa, k::SENTRY_VERSION).as_deref() == Some("1");
        if alone {
            self.groups.push((resource, vec![profile]));
            return;
        }
        let r = self.resource(resource);
        let st = profile.sample_type.unwrap_or_default();
        let key = (r, pa.clone(), st.type_strindex, st.unit_strindex);
        match self.index.get(&key) {
            Some(&g) => self.groups[g].1.push(profile),
            None => {
                self.index.insert(key, self.groups.len());
                self.groups.push((resource, vec![profile]));
            }
        }
    }

    fn resource(&mut self, resource: &'d [KeyValue]) -> usize {
        if let Some((ptr, len, r)) = self.last {
            if ptr == resource.as_ptr() && len == resource.len() {
                return r;
            }
        }
        let next = self.resources.len();
        let r = *self
            .resources
            .entry(format!("{resource:?}"))
            .or_insert(next);
        self.last = Some((resource.as_ptr(), resource.len(), r));
        r
    }

    /// Each session's resource and profiles, in order of first appearance.
    pub(super) fn into_groups(self) -> Vec<(&'d [KeyValue], Vec<&'d Profile>)> {
        self.groups
    }
}
