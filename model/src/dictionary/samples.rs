//! Helpers for processors that filter or combine samples.

use std::hash::{Hash, Hasher};

use crate::proto::{Profile, ProfilesData, ProfilesDictionary, Sample};
use crate::{profiles_mut, ProfileAt};

use super::{multiset_hash, Lookup};

/// A sample's identity per the proto: `{stack_index, set_of(attribute_indices),
/// link_index}`. Equality and hashing ignore the order of the attributes.
/// Indices are compared, so run [`super::dedup`] first for identity by value.
#[derive(Clone, Copy, Debug)]
pub struct SampleIdentity<'a> {
    pub stack_index: i32,
    pub attribute_indices: &'a [i32],
    pub link_index: i32,
}

pub fn samples_identity(s: &Sample) -> SampleIdentity<'_> {
    SampleIdentity {
        stack_index: s.stack_index,
        attribute_indices: &s.attribute_indices,
        link_index: s.link_index,
    }
}

impl PartialEq for SampleIdentity<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.stack_index == o.stack_index
            && self.link_index == o.link_index
            && same_multiset(self.attribute_indices, o.attribute_indices)
    }
}

impl Eq for SampleIdentity<'_> {}

impl Hash for SampleIdentity<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (
            self.stack_index,
            self.link_index,
            self.attribute_indices.len(),
            multiset_hash(self.attribute_indices),
        )
            .hash(h);
    }
}

fn same_multiset(a: &[i32], b: &[i32]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a == b {
        return true;
    }
    if a.len() <= 16 {
        let count = |s: &[i32], x: i32| s.iter().filter(|&&y| y == x).count();
        return a.iter().all(|&x| count(a, x) == count(b, x));
    }
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// How a sample records its observations (see the proto's `Sample` comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SampleShape {
    /// No timestamps: `values` holds an aggregated total.
    Aggregated,
    /// Timestamps only: each one counts 1.
    Timestamps,
    /// One value per timestamp.
    TimedValues,
}

impl SampleShape {
    pub fn of(s: &Sample) -> Self {
        match (s.timestamps_unix_nano.is_empty(), s.values.is_empty()) {
            (true, _) => SampleShape::Aggregated,
            (false, true) => SampleShape::Timestamps,
            (false, false) => SampleShape::TimedValues,
        }
    }
}

/// The total a sample stands for: the sum of its values, or the number of its
/// timestamps when it has no values (each counts 1, per the proto).
pub fn sample_total(s: &Sample) -> i64 {
    if s.values.is_empty() {
        s.timestamps_unix_nano.len() as i64
    } else {
        s.values.iter().fold(0i64, |a, &v| a.wrapping_add(v))
    }
}

/// Keeps the samples for which `keep` returns true, in every profile.
/// Returns the number removed. Follow with [`super::gc`] to drop the
/// dictionary entries only the removed samples used.
pub fn retain_samples(
    data: &mut ProfilesData,
    mut keep: impl FnMut(&Lookup<'_>, &Sample) -> bool,
) -> u64 {
    let empty = ProfilesDictionary::default();
    let lookup = Lookup::new(data.dictionary.as_ref().unwrap_or(&empty));
    let mut removed = 0;
    for p in profiles_mut(&mut data.resource_profiles) {
        let before = p.samples.len();
        p.samples.retain(|s| keep(&lookup, s));
        removed += (before - p.samples.len()) as u64;
    }
    removed
}

/// Removes profiles without samples, then scopes without profiles and
/// resources without scopes. Returns the number of profiles removed.
pub fn remove_empty_profiles(data: &mut ProfilesData) -> u64 {
    retain_profiles(data, |_, p| !p.samples.is_empty())
}

/// Keeps the profiles for which `keep` (given the profile's position:
/// resource, scope, profile) returns true, then removes scopes left without
/// profiles and resources left without scopes. Returns the number of
/// profiles removed.
pub fn retain_profiles(
    data: &mut ProfilesData,
    mut keep: impl FnMut(ProfileAt, &Profile) -> bool,
) -> u64 {
    let mut removed = 0;
    for (r, rp) in data.resource_profiles.iter_mut().enumerate() {
        for (s, sp) in rp.scope_profiles.iter_mut().enumerate() {
            let before = sp.profiles.len();
            let mut p = 0;
            sp.profiles.retain(|prof| {
                p += 1;
                keep((r, s, p - 1), prof)
            });
            removed += (before - sp.profiles.len()) as u64;
        }
        rp.scope_profiles.retain(|s| !s.profiles.is_empty());
    }
    data.resource_profiles
        .retain(|r| !r.scope_profiles.is_empty());
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ResourceProfiles, ScopeProfiles};

    fn s(stack: i32, attrs: &[i32], values: &[i64], ts: &[u64]) -> Sample {
        Sample {
            stack_index: stack,
            attribute_indices: attrs.to_vec(),
            link_index: 0,
            values: values.to_vec(),
            timestamps_unix_nano: ts.to_vec(),
        }
    }

    #[test]
    fn identity_is_stack_attribute_set_and_link() {
        let a = s(1, &[2, 3], &[1], &[]);
        let b = s(1, &[3, 2], &[], &[5]);
        assert_eq!(samples_identity(&a), samples_identity(&b));
        let hash =
            |x: &Sample| ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(samples_identity(x));
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(
            samples_identity(&a),
            samples_identity(&s(1, &[2, 2], &[1], &[]))
        );
        assert_ne!(
            samples_identity(&a),
            samples_identity(&s(2, &[2, 3], &[1], &[]))
        );
        let mut linked = a.clone();
        linked.link_index = 1;
        assert_ne!(samples_identity(&a), samples_identity(&linked));
    }

    #[test]
    fn retaining_and_removing_empty_profiles() {
        let profile = |samples| Profile {
            samples,
            ..Default::default()
        };
        let mut d = ProfilesData {
            resource_profiles: vec![
                ResourceProfiles {
                    scope_profiles: vec![ScopeProfiles {
                        profiles: vec![profile(vec![s(1, &[], &[1], &[]), s(2, &[], &[1], &[])])],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ResourceProfiles {
                    scope_profiles: vec![ScopeProfiles {
                        profiles: vec![
                            profile(vec![s(2, &[], &[1], &[])]),
                            profile(vec![s(1, &[], &[1], &[])]),
                        ],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            dictionary: None,
        };
        assert_eq!(retain_samples(&mut d, |_, s| s.stack_index == 1), 2);
        assert_eq!(remove_empty_profiles(&mut d), 1);
        assert_eq!(d.resource_profiles.len(), 2);
        assert_eq!(d.resource_profiles[1].scope_profiles[0].profiles.len(), 1);
        assert_eq!(retain_samples(&mut d, |_, _| false), 2);
        assert_eq!(remove_empty_profiles(&mut d), 2);
        assert!(d.resource_profiles.is_empty());
    }
}
