//! Editing and dropping the resources of `ProfilesData` in its protobuf
//! bytes. A processor that only touches resources (`resource`,
//! `k8sattributes`, `resourcedetection`, `transform` and `filter` on the
//! resource context) would otherwise decode and encode every sample of the
//! batch to change a few strings at its top: here only each
//! `ResourceProfiles.resource` is decoded, and the rest (scopes, profiles,
//! the dictionary) is copied as it came, or only counted where dropped.

use prost::Message;

use super::read::{count_fields, Reader, FIXED64, LEN, VARINT};
use super::write;
use crate::proto::{any_value::Value, AnyValue, KeyValue, Resource};

/// `ProfilesData.resource_profiles`, and `ResourceProfiles`' `resource`
/// and `schema_url`.
const RESOURCE_PROFILES: u32 = 1;
const RESOURCE: u32 = 1;
const SCOPE_PROFILES: u32 = 2;
const SCHEMA_URL: u32 = 3;
/// `ScopeProfiles.profiles`, `Profile.samples`, and `Sample`'s `values`
/// and `timestamps_unix_nano`.
const PROFILES: u32 = 2;
const SAMPLES: u32 = 2;
const VALUES: u32 = 4;
const TIMESTAMPS: u32 = 5;

/// What [`edit_resources`] made of the bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Edited {
    /// No resource changed: the bytes stand as they are.
    Unchanged,
    /// The bytes with the edited resources.
    Bytes(Vec<u8>),
    /// The bytes must be decoded to be edited: a resource refers to the
    /// dictionary's strings (resolved once decoded), or the bytes hold
    /// what this reader leaves to prost (groups, malformed fields).
    Decode,
}

/// Runs `edit` on the resource and the schema URL of every
/// `ResourceProfiles` of `bytes`, a `ProfilesData` (or
/// `ExportProfilesServiceRequest`), with what decoding, editing and
/// encoding the whole would give: a resource that appears more than once
/// is merged into one as prost merges it, and an absent one is edited as
/// an empty one (left absent if it stays empty). Everything else is copied
/// byte for byte, unknown fields included.
pub fn edit_resources(bytes: &[u8], mut edit: impl FnMut(&mut Resource, &mut String)) -> Edited {
    retain_resources(bytes, |r, url, _| {
        edit(r, url);
        true
    })
    .0
}

/// What [`retain_resources`] dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Observations of the samples (`ProfileBatch::sample_count`'s unit).
    pub samples: u64,
    pub profiles: u64,
}

/// [`edit_resources`], where `keep` also tells whether each
/// `ResourceProfiles` stays; it is given the resource, its schema URL and
/// how many scopes it holds. What goes is counted, not copied.
pub fn retain_resources(
    bytes: &[u8],
    mut keep: impl FnMut(&mut Resource, &mut String, usize) -> bool,
) -> (Edited, Dropped) {
    let mut out = Vec::with_capacity(bytes.len() + 256);
    let mut changed = false;
    let mut dropped = Dropped::default();
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        let start = r.rest();
        let Some((field, wire)) = r.key() else {
            return (Edited::Decode, Dropped::default());
        };
        if field == RESOURCE_PROFILES && wire == LEN {
            let Some(rp) = r.bytes() else {
                return (Edited::Decode, Dropped::default());
            };
            match resource_profiles(rp, &mut keep, &mut out, &mut dropped) {
                Some(c) => changed |= c,
                None => return (Edited::Decode, Dropped::default()),
            }
        } else {
            if r.skip(wire).is_none() {
                return (Edited::Decode, Dropped::default());
            }
            out.extend_from_slice(&start[..start.len() - r.rest().len()]);
        }
    }
    let edited = if changed {
        Edited::Bytes(out)
    } else {
        Edited::Unchanged
    };
    (edited, dropped)
}

/// Writes one `ResourceProfiles` field, its resource and schema URL
/// edited, to `out`, or counts it in `dropped` if `keep` says it goes;
/// whether the bytes changed, `None` if `rp` must be decoded instead.
fn resource_profiles(
    rp: &[u8],
    keep: &mut impl FnMut(&mut Resource, &mut String, usize) -> bool,
    out: &mut Vec<u8>,
    dropped: &mut Dropped,
) -> Option<bool> {
    let Parsed {
        mut resource,
        found,
        mut url,
        mut urls,
        rest,
    } = parse(rp)?;
    if resource.attributes.iter().any(refers) {
        return None;
    }
    let was = url.clone();
    let scopes = count_fields::<3>(rp)?[SCOPE_PROFILES as usize];
    if !keep(&mut resource, &mut url, scopes) {
        for_each_field(rp, SCOPE_PROFILES, |sp| count_scope(sp, dropped))?;
        return Some(true);
    }
    let edited = resource.encode_to_vec();
    let resource_changed = match found[..] {
        [] => !edited.is_empty(),
        [one] => one != edited.as_slice(),
        _ => true,
    };
    let with_resource = resource_changed || !found.is_empty();
    let resource_len = if with_resource {
        write::field_len(edited.len())
    } else {
        0
    };
    // A changed URL replaces the ones given (left out when empty).
    let new_url = if url != was {
        urls.clear();
        url.as_bytes()
    } else {
        &[]
    };
    let len = resource_len
        + write::bytes_len(new_url)
        + rest.iter().chain(&urls).map(|f| f.len()).sum::<usize>();
    write::key(out, RESOURCE_PROFILES, LEN);
    write::varint(out, len as u64);
    if with_resource {
        write::bytes_always(out, RESOURCE, &edited);
    }
    for f in rest.iter().chain(&urls) {
        out.extend_from_slice(f);
    }
    write::bytes(out, SCHEMA_URL, new_url);
    Some(resource_changed || url != was)
}

/// A `ResourceProfiles` read for its resource and schema URL.
struct Parsed<'a> {
    /// The resource, merged from its fields (`found`) as prost merges them.
    resource: Resource,
    found: Vec<&'a [u8]>,
    /// The schema URL: the last one given (`urls`), as prost reads it.
    url: String,
    urls: Vec<&'a [u8]>,
    /// The other fields, key and value as they came, in their order.
    rest: Vec<&'a [u8]>,
}

fn parse(rp: &[u8]) -> Option<Parsed<'_>> {
    let mut p = Parsed {
        resource: Resource::default(),
        found: Vec::new(),
        url: String::new(),
        urls: Vec::new(),
        rest: Vec::new(),
    };
    let mut r = Reader::new(rp);
    while !r.is_empty() {
        let start = r.rest();
        let (field, wire) = r.key()?;
        let read = |r: &Reader<'_>| &start[..start.len() - r.rest().len()];
        match (field, wire) {
            (RESOURCE, LEN) => {
                let payload = r.bytes()?;
                p.resource.merge(payload).ok()?;
                p.found.push(payload);
            }
            (SCHEMA_URL, LEN) => {
                p.url = std::str::from_utf8(r.bytes()?).ok()?.to_owned();
                p.urls.push(read(&r));
            }
            _ => {
                r.skip(wire)?;
                p.rest.push(read(&r));
            }
        }
    }
    Some(p)
}

/// The resource of every `ResourceProfiles` of `bytes`, in order, as
/// decoding gives them (`None` where absent), without decoding anything
/// else; `None` if the bytes must be decoded.
pub fn read_resources(bytes: &[u8]) -> Option<Vec<Option<Resource>>> {
    let mut out = Vec::new();
    for_each_field(bytes, RESOURCE_PROFILES, |rp| {
        let p = parse(rp)?;
        out.push((!p.found.is_empty()).then_some(p.resource));
        Some(())
    })?;
    Some(out)
}

/// Adds the profiles and sample observations of a `ScopeProfiles` to
/// `dropped`.
fn count_scope(sp: &[u8], dropped: &mut Dropped) -> Option<()> {
    for_each_field(sp, PROFILES, |profile| {
        dropped.profiles += 1;
        for_each_field(profile, SAMPLES, |sample| {
            dropped.samples += observations(sample)?;
            Some(())
        })
    })
}

/// Calls `f` with the payload of every length-delimited field `field` of
/// `msg`.
fn for_each_field(msg: &[u8], field: u32, mut f: impl FnMut(&[u8]) -> Option<()>) -> Option<()> {
    let mut r = Reader::new(msg);
    while !r.is_empty() {
        match r.key()? {
            (n, LEN) if n == field => f(r.bytes()?)?,
            (_, wire) => r.skip(wire)?,
        }
    }
    Some(())
}

/// `max(values, timestamps, 1)` of a `Sample`, packed or not.
fn observations(sample: &[u8]) -> Option<u64> {
    let (mut values, mut timestamps) = (0u64, 0u64);
    let mut r = Reader::new(sample);
    while !r.is_empty() {
        match r.key()? {
            (VALUES, LEN) => values += r.bytes()?.iter().filter(|&&b| b < 0x80).count() as u64,
            (VALUES, VARINT) => {
                r.varint()?;
                values += 1;
            }
            (TIMESTAMPS, LEN) => timestamps += r.bytes()?.len() as u64 / 8,
            (TIMESTAMPS, FIXED64) => {
                r.fixed64()?;
                timestamps += 1;
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Some(values.max(timestamps).max(1))
}

/// Whether an attribute refers to the dictionary's strings
/// (`key_strindex`, `string_value_strindex`), anywhere in its value.
fn refers(kv: &KeyValue) -> bool {
    kv.key_strindex != 0 || kv.value.as_ref().is_some_and(value_refers)
}

fn value_refers(v: &AnyValue) -> bool {
    match &v.value {
        Some(Value::StringValueStrindex(_)) => true,
        Some(Value::ArrayValue(a)) => a.values.iter().any(value_refers),
        Some(Value::KvlistValue(l)) => l.values.iter().any(refers),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
