//! Editing the resources of `ProfilesData` in its protobuf bytes. A
//! processor that only touches resource attributes (`resource`,
//! `k8sattributes`, `resourcedetection`) would otherwise decode and encode
//! every sample of the batch to change a few strings at its top: here only
//! each `ResourceProfiles.resource` is decoded, and the rest (scopes,
//! profiles, the dictionary) is copied as it came.

use prost::Message;

use super::read::{Reader, LEN};
use super::write;
use crate::proto::{any_value::Value, AnyValue, KeyValue, Resource};

/// `ProfilesData.resource_profiles`, and `ResourceProfiles`' `resource`
/// and `schema_url`.
const RESOURCE_PROFILES: u32 = 1;
const RESOURCE: u32 = 1;
const SCHEMA_URL: u32 = 3;

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
    let mut out = Vec::with_capacity(bytes.len() + 256);
    let mut changed = false;
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        let start = r.rest();
        let Some((field, wire)) = r.key() else {
            return Edited::Decode;
        };
        if field == RESOURCE_PROFILES && wire == LEN {
            let Some(rp) = r.bytes() else {
                return Edited::Decode;
            };
            match resource_profiles(rp, &mut edit, &mut out) {
                Some(c) => changed |= c,
                None => return Edited::Decode,
            }
        } else {
            if r.skip(wire).is_none() {
                return Edited::Decode;
            }
            out.extend_from_slice(&start[..start.len() - r.rest().len()]);
        }
    }
    if changed {
        Edited::Bytes(out)
    } else {
        Edited::Unchanged
    }
}

/// Writes one `ResourceProfiles` field, its resource and schema URL
/// edited, to `out`; whether they changed, `None` if `rp` must be decoded
/// instead.
fn resource_profiles(
    rp: &[u8],
    edit: &mut impl FnMut(&mut Resource, &mut String),
    out: &mut Vec<u8>,
) -> Option<bool> {
    let mut resource = Resource::default();
    let mut found: Vec<&[u8]> = Vec::new();
    // The schema URL: the last one given, as prost reads it.
    let mut url = String::new();
    let mut urls: Vec<&[u8]> = Vec::new();
    // The other fields, key and value as they came, in their order.
    let mut rest: Vec<&[u8]> = Vec::new();
    let mut r = Reader::new(rp);
    while !r.is_empty() {
        let start = r.rest();
        let (field, wire) = r.key()?;
        let read = |r: &Reader<'_>| &start[..start.len() - r.rest().len()];
        match (field, wire) {
            (RESOURCE, LEN) => {
                let payload = r.bytes()?;
                resource.merge(payload).ok()?;
                found.push(payload);
            }
            (SCHEMA_URL, LEN) => {
                url = std::str::from_utf8(r.bytes()?).ok()?.to_owned();
                urls.push(read(&r));
            }
            _ => {
                r.skip(wire)?;
                rest.push(read(&r));
            }
        }
    }
    if resource.attributes.iter().any(refers) {
        return None;
    }
    let was = url.clone();
    edit(&mut resource, &mut url);
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
