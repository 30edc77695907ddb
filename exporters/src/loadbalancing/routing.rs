//! Routing a batch: a key per profile, its owner on the ring, and the
//! batch cut into one self-contained request per backend. The unit is the
//! profile (never cut apart from its samples); profiles of one resource
//! share a `service` or `resource` key, so a resource then goes whole.
//!
//! Also what a retry resumes from: the profiles already settled, by their
//! position in the batch (which never changes: a queued batch is immutable).

use profcol_model::dictionary::{subsets, Lookup, Subset};
use profcol_model::proto::{any_value::Value, AnyValue, KeyValue, Profile, ProfilesData};

use super::config::RoutingKey;
use super::ring::{mix64, Fnv, HashRing};
use crate::settled::Settled;

const SERVICE_NAME: &str = "service.name";
const SERVICE_INSTANCE_ID: &str = "service.instance.id";
const SENTRY_PROFILER_ID: &str = "sentry.profiler_id";

/// The routing key of every profile of `data`, in order (resources, their
/// scopes, their profiles), appended to `out`. One pass; resource-level
/// keys are computed once per resource.
pub fn profile_keys(data: &ProfilesData, key: RoutingKey, out: &mut Vec<u64>) {
    let lookup = Lookup::of(data);
    for r in &data.resource_profiles {
        let attrs: &[KeyValue] = r.resource.as_ref().map_or(&[], |r| &r.attributes);
        let service = || hash_str(resource_str(&lookup, attrs, SERVICE_NAME).unwrap_or(""));
        let profiles = r.scope_profiles.iter().flat_map(|s| &s.profiles);
        match key {
            RoutingKey::Service => {
                let h = service();
                out.extend(profiles.map(|_| h));
            }
            RoutingKey::Resource => {
                let h = resource_hash(&lookup, attrs);
                out.extend(profiles.map(|_| h));
            }
            RoutingKey::TraceId => {
                let fallback = service();
                out.extend(profiles.map(|p| first_trace_id(&lookup, p).unwrap_or(fallback)));
            }
            RoutingKey::ProfileSession => {
                let resource_level = resource_str(&lookup, attrs, SENTRY_PROFILER_ID)
                    .or_else(|| resource_str(&lookup, attrs, SERVICE_INSTANCE_ID))
                    .map_or_else(service, hash_str);
                out.extend(profiles.map(|p| {
                    lookup
                        .attribute_str(&p.attribute_indices, SENTRY_PROFILER_ID)
                        .map_or(resource_level, hash_str)
                }));
            }
        }
    }
}

fn hash_str(s: &str) -> u64 {
    super::ring::hash_bytes(s.as_bytes())
}

fn resource_str<'a>(lookup: &Lookup<'a>, attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|kv| lookup.key_of(kv) == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| lookup.str_value(v))
        .filter(|s| !s.is_empty())
}

/// The trace id of the first sample that links to a trace.
fn first_trace_id(lookup: &Lookup<'_>, p: &Profile) -> Option<u64> {
    p.samples
        .iter()
        .filter(|s| s.link_index > 0)
        .map(|s| &lookup.link(s.link_index).trace_id)
        .find(|t| t.iter().any(|&b| b != 0))
        .map(|t| super::ring::hash_bytes(t))
}

/// Every resource attribute, in any order: the sum of one hash per
/// attribute, so that no sorting (and no allocation) is needed.
fn resource_hash(lookup: &Lookup<'_>, attrs: &[KeyValue]) -> u64 {
    attrs.iter().fold(0u64, |acc, kv| {
        let mut h = Fnv::new();
        h.write(lookup.key_of(kv).as_bytes());
        h.write(&[0xff]);
        if let Some(v) = &kv.value {
            hash_value(lookup, v, &mut h);
        }
        acc.wrapping_add(h.finish())
    })
}

fn hash_value(lookup: &Lookup<'_>, v: &AnyValue, h: &mut Fnv) {
    match &v.value {
        None => h.write(&[0]),
        // A string by reference hashes as the string itself.
        Some(Value::StringValue(_)) | Some(Value::StringValueStrindex(_)) => {
            h.write(&[1]);
            h.write(lookup.str_value(v).unwrap_or("").as_bytes());
        }
        Some(Value::BoolValue(b)) => h.write(&[2, u8::from(*b)]),
        Some(Value::IntValue(i)) => {
            h.write(&[3]);
            h.write_u64(*i as u64);
        }
        Some(Value::DoubleValue(d)) => {
            h.write(&[4]);
            h.write_u64(d.to_bits());
        }
        Some(Value::ArrayValue(a)) => {
            h.write(&[5]);
            h.write_u64(a.values.len() as u64);
            for v in &a.values {
                hash_value(lookup, v, h);
            }
        }
        Some(Value::KvlistValue(l)) => {
            h.write(&[6]);
            h.write_u64(mix64(resource_hash(lookup, &l.values)));
        }
        Some(Value::BytesValue(b)) => {
            h.write(&[7]);
            h.write(b);
        }
    }
}

/// A profile that is settled (delivered or refused for good) and is not
/// routed again.
pub const SETTLED: u32 = u32::MAX;

/// The owner of each profile on `ring` (by its key), or [`SETTLED`].
/// `None` when the ring is empty.
pub fn assign(keys: &[u64], settled: &Settled, ring: &HashRing, out: &mut Vec<u32>) -> Option<()> {
    out.clear();
    out.reserve(keys.len());
    for (i, &k) in keys.iter().enumerate() {
        out.push(if settled.is_set(i) {
            SETTLED
        } else {
            ring.owner(k)?
        });
    }
    Some(())
}

/// One backend's share of a batch.
#[derive(Debug)]
pub struct Part {
    /// Its number on the ring.
    pub endpoint: u32,
    /// Its profiles and the dictionary entries they use: encoded straight
    /// from the batch ([`Subset::encode`]), positions in
    /// [`Subset::profiles`], observations in [`Subset::samples`].
    pub subset: Subset,
}

/// Cuts `data` by `owner` (one entry per profile, as [`profile_keys`]):
/// one part per backend that owns a profile, in the ring's order. Costs one
/// pass over the samples plus one over the dictionary per part; nothing is
/// copied until a part is encoded.
pub fn split(data: &ProfilesData, owner: &[u32], endpoints: usize) -> Vec<Part> {
    subsets(data, owner, endpoints)
        .into_iter()
        .enumerate()
        .filter_map(|(e, subset)| {
            Some(Part {
                endpoint: e as u32,
                subset: subset?,
            })
        })
        .collect()
}
