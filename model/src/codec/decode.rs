//! `ProfilesData` decoded by hand where a profile's size lies (samples,
//! stacks, locations, functions, strings) and by prost elsewhere.
//!
//! Why: prost grows every repeated field one push at a time, so a
//! 100k-sample profile reallocates and copies its sample vector some
//! twenty times and each packed field starts at four elements; here each
//! repeated field is counted first and allocated once, at its size. Into
//! the same prost types, with prost's semantics: the last value of a
//! scalar wins, repeated fields append, packed and unpacked both read,
//! unknown fields skipped, a message field given twice merged.
//!
//! Anything this reader does not take as it is (a fault, a group, a wire
//! type a field does not have) hands the whole message to prost, so the
//! result, or the error, is prost's. One difference remains: the small
//! messages handed to prost (resources, scopes, attribute values) start
//! prost's nesting limit of 100 afresh, a few levels below the top.

use prost::Message;

use super::read::{count_fields, fixed64s, varints, Reader, FIXED64, LEN, VARINT};
use crate::proto::{
    Function, KeyValueAndUnit, Line, Link, Location, Profile, ProfilesData, ProfilesDictionary,
    ResourceProfiles, Sample, ScopeProfiles, Stack,
};

/// `ProfilesData` (or `ExportProfilesServiceRequest`, the same fields)
/// from its bytes: what `ProfilesData::decode` gives, sooner.
pub fn decode(bytes: &[u8]) -> Result<ProfilesData, prost::DecodeError> {
    match by_hand(bytes) {
        Some(data) => Ok(data),
        None => ProfilesData::decode(bytes),
    }
}

/// The hand-written path alone: `None` where it leaves `bytes` to prost.
pub(super) fn by_hand(bytes: &[u8]) -> Option<ProfilesData> {
    let mut data = ProfilesData::default();
    merge_data::<false>(&mut data, bytes)?;
    Some(data)
}

/// The hand-written path, `None` also on what the current revision's
/// profiles messages do not hold as written: a field they do not know
/// (an older or newer revision's), one not in prost's canonical form, a
/// singular message field given twice. `common` and `resource` messages
/// are taken as prost takes them: they only ever gained fields.
pub(crate) fn exact(bytes: &[u8]) -> Option<ProfilesData> {
    let mut data = ProfilesData::default();
    merge_data::<true>(&mut data, bytes)?;
    Some(data)
}

/// A message field handed to prost, merged as prost merges it.
fn by_prost<M: Message>(m: &mut M, b: &[u8]) -> Option<()> {
    m.merge(b).ok()
}

/// [`by_prost`] for a profiles message, which under `S` must hold no
/// field prost would drop: it encodes back to as many bytes as it came in.
fn known<const S: bool, M: Message>(m: &mut M, b: &[u8]) -> Option<()> {
    m.merge(b).ok()?;
    (!S || m.encoded_len() == b.len()).then_some(())
}

/// A singular message field to merge into: under `S`, only the first time.
fn once<const S: bool, M: Default>(field: &mut Option<M>) -> Option<&mut M> {
    if S && field.is_some() {
        return None;
    }
    Some(field.get_or_insert_default())
}

/// Skips a field the message does not know; under `S`, there is none.
#[inline]
fn skip<const S: bool>(r: &mut Reader<'_>, wire: u8) -> Option<()> {
    if S {
        return None;
    }
    r.skip(wire)
}

/// One element of a repeated message field.
fn element<M: Default>(b: &[u8], merge: impl FnOnce(&mut M, &[u8]) -> Option<()>) -> Option<M> {
    let mut m = M::default();
    merge(&mut m, b)?;
    Some(m)
}

fn merge_data<const S: bool>(d: &mut ProfilesData, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, LEN) => d
                .resource_profiles
                .push(element(r.bytes()?, merge_resource::<S>)?),
            (2, LEN) => merge_dictionary::<S>(once::<S, _>(&mut d.dictionary)?, r.bytes()?)?,
            (1 | 2, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_resource<const S: bool>(m: &mut ResourceProfiles, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, LEN) => by_prost(once::<S, _>(&mut m.resource)?, r.bytes()?)?,
            (2, LEN) => m
                .scope_profiles
                .push(element(r.bytes()?, merge_scope::<S>)?),
            (3, LEN) => m.schema_url = r.string()?,
            (1..=3, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_scope<const S: bool>(m: &mut ScopeProfiles, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, LEN) => by_prost(once::<S, _>(&mut m.scope)?, r.bytes()?)?,
            (2, LEN) => m.profiles.push(element(r.bytes()?, merge_profile::<S>)?),
            (3, LEN) => m.schema_url = r.string()?,
            (1..=3, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_profile<const S: bool>(p: &mut Profile, b: &[u8]) -> Option<()> {
    let [_, _, samples] = count_fields::<3>(b)?;
    p.samples.reserve_exact(samples);
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, LEN) => known::<S, _>(once::<S, _>(&mut p.sample_type)?, r.bytes()?)?,
            (2, LEN) => p.samples.push(element(r.bytes()?, merge_sample::<S>)?),
            (3, FIXED64) => p.time_unix_nano = r.fixed64()?,
            (4, VARINT) => p.duration_nano = r.varint()?,
            (5, LEN) => known::<S, _>(once::<S, _>(&mut p.period_type)?, r.bytes()?)?,
            (6, VARINT) => p.period = r.varint()? as i64,
            (7, LEN) => p.profile_id = r.bytes()?.to_vec(),
            (8, VARINT) => p.dropped_attributes_count = r.varint()? as u32,
            (9, LEN) => p.original_payload_format = r.string()?,
            (10, LEN) => p.original_payload = r.bytes()?.to_vec(),
            (11, w) => varints(&mut r, w, &mut p.attribute_indices, |v| v as i32)?,
            (1..=10, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_sample<const S: bool>(s: &mut Sample, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, VARINT) => s.stack_index = r.varint()? as i32,
            (2, w) => varints(&mut r, w, &mut s.attribute_indices, |v| v as i32)?,
            (3, VARINT) => s.link_index = r.varint()? as i32,
            (4, w) => varints(&mut r, w, &mut s.values, |v| v as i64)?,
            (5, w) => fixed64s(&mut r, w, &mut s.timestamps_unix_nano)?,
            (1 | 3, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_dictionary<const S: bool>(d: &mut ProfilesDictionary, b: &[u8]) -> Option<()> {
    let n = count_fields::<8>(b)?;
    d.mapping_table.reserve_exact(n[1]);
    d.location_table.reserve_exact(n[2]);
    d.function_table.reserve_exact(n[3]);
    d.link_table.reserve_exact(n[4]);
    d.string_table.reserve_exact(n[5]);
    d.attribute_table.reserve_exact(n[6]);
    d.stack_table.reserve_exact(n[7]);
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, LEN) => d.mapping_table.push(element(r.bytes()?, known::<S, _>)?),
            (2, LEN) => d
                .location_table
                .push(element(r.bytes()?, merge_location::<S>)?),
            (3, LEN) => d
                .function_table
                .push(element(r.bytes()?, merge_function::<S>)?),
            (4, LEN) => d.link_table.push(element(r.bytes()?, merge_link::<S>)?),
            (5, LEN) => d.string_table.push(r.string()?),
            (6, LEN) => d
                .attribute_table
                .push(element(r.bytes()?, merge_attribute::<S>)?),
            (7, LEN) => d.stack_table.push(element(r.bytes()?, merge_stack::<S>)?),
            (1..=7, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

/// By hand, not [`known`]: pdata writes the zero link's empty ids, which
/// prost reads as written but does not write back.
fn merge_link<const S: bool>(l: &mut Link, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    let mut seen = [false; 2];
    while !r.is_empty() {
        match r.key()? {
            (f @ (1 | 2), LEN) => {
                // Under `S` once each: prost keeps the last.
                if S && std::mem::replace(&mut seen[f as usize - 1], true) {
                    return None;
                }
                let id = r.bytes()?.to_vec();
                *if f == 1 {
                    &mut l.trace_id
                } else {
                    &mut l.span_id
                } = id;
            }
            (1 | 2, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

/// By hand, not [`known`]: async-profiler 4.5 writes every length as a
/// padded 5-byte varint, so its attributes re-encode shorter than they
/// came, which [`known`] cannot tell from a field prost drops. The value
/// is a `common` message, taken as prost takes it.
fn merge_attribute<const S: bool>(a: &mut KeyValueAndUnit, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, VARINT) => a.key_strindex = r.varint()? as i32,
            (2, LEN) => by_prost(once::<S, _>(&mut a.value)?, r.bytes()?)?,
            (3, VARINT) => a.unit_strindex = r.varint()? as i32,
            (1..=3, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_stack<const S: bool>(s: &mut Stack, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, w) => varints(&mut r, w, &mut s.location_indices, |v| v as i32)?,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_location<const S: bool>(l: &mut Location, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, VARINT) => l.mapping_index = r.varint()? as i32,
            (2, VARINT) => l.address = r.varint()?,
            (3, LEN) => l.lines.push(element(r.bytes()?, merge_line::<S>)?),
            (4, w) => varints(&mut r, w, &mut l.attribute_indices, |v| v as i32)?,
            (1..=3, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_line<const S: bool>(l: &mut Line, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, VARINT) => l.function_index = r.varint()? as i32,
            (2, VARINT) => l.line = r.varint()? as i64,
            (3, VARINT) => l.column = r.varint()? as i64,
            (1..=3, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}

fn merge_function<const S: bool>(f: &mut Function, b: &[u8]) -> Option<()> {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match r.key()? {
            (1, VARINT) => f.name_strindex = r.varint()? as i32,
            (2, VARINT) => f.system_name_strindex = r.varint()? as i32,
            (3, VARINT) => f.filename_strindex = r.varint()? as i32,
            (4, VARINT) => f.start_line = r.varint()? as i64,
            (1..=4, _) => return None,
            (_, w) => skip::<S>(&mut r, w)?,
        }
    }
    Some(())
}
