//! `ProfilesData` encoded by hand where a profile's size lies, and by prost
//! elsewhere, into exactly the bytes prost writes.
//!
//! Why: prost writes a nested message's length before it, measuring it
//! again at every level it is nested in; a sample, four levels down, is
//! measured five times and written once. Here nothing is measured before
//! it is written: a small message (a sample, a stack, a location) is
//! written behind one byte set aside for its length, a large one behind
//! five ([`Slots`]), and the lengths filled in after.

use prost::Message;

use super::write::*;
use crate::proto::{
    Function, Location, Profile, ProfilesData, ProfilesDictionary, ResourceProfiles, Sample,
    ScopeProfiles, Stack,
};

/// What `ProfilesData::encode_to_vec` gives, sooner.
pub fn encode(d: &ProfilesData) -> Vec<u8> {
    let mut w = Slots::default();
    let mut out = Vec::with_capacity(size_hint(d));
    for rp in &d.resource_profiles {
        write_resource(&mut out, &mut w, rp);
    }
    if let Some(dict) = &d.dictionary {
        w.open(&mut out, 2);
        write_dictionary(&mut out, dict);
        w.close(&out);
    }
    w.compact(&mut out);
    out
}

/// About what `d` encodes to, from the lengths its tables and vectors
/// hold (no pass over the samples' own vectors): the output's capacity.
fn size_hint(d: &ProfilesData) -> usize {
    let samples: usize = crate::profiles(&d.resource_profiles)
        .map(|p| p.samples.len() * 24)
        .sum();
    let dict = d.dictionary.as_ref().map_or(0, |d| {
        d.string_table.iter().map(|s| s.len() + 2).sum::<usize>()
            + d.location_table.len() * 24
            + d.function_table.len() * 12
            + d.stack_table
                .iter()
                .map(|s| 3 + s.location_indices.len() * 2)
                .sum::<usize>()
            + (d.attribute_table.len() + d.mapping_table.len() + d.link_table.len()) * 32
    });
    samples + dict + 1024
}

/// The large messages (resources, scopes, profiles, the dictionary) are
/// written behind five bytes set aside for their length, the most a
/// length under 32 GiB takes (far over any batch the memory budget
/// admits); once all is written, one pass moves the
/// bytes back over what each length did not use. Measuring them first
/// would read every sample twice.
#[derive(Default)]
struct Slots {
    /// Where each set-aside length is, and the length, in written order.
    at: Vec<(usize, usize)>,
    /// The messages open: their slot, where their bytes start, and the
    /// bytes that slots inside them will give back.
    open: Vec<(usize, usize, usize)>,
}

const SLOT: usize = 5;

impl Slots {
    fn open(&mut self, out: &mut Vec<u8>, field: u32) {
        key(out, field, LEN);
        self.at.push((out.len(), 0));
        out.extend_from_slice(&[0; SLOT]);
        self.open.push((self.at.len() - 1, out.len(), 0));
    }

    fn close(&mut self, out: &[u8]) {
        let (slot, start, inner) = self.open.pop().expect("closed as opened");
        let len = out.len() - start - inner;
        self.at[slot].1 = len;
        if let Some(parent) = self.open.last_mut() {
            parent.2 += inner + SLOT - varint_len(len as u64);
        }
    }

    fn compact(self, out: &mut Vec<u8>) {
        debug_assert!(self.open.is_empty());
        let (mut read, mut write) = (0, 0);
        let mut len = Vec::with_capacity(10);
        for (at, n) in self.at {
            out.copy_within(read..at, write);
            write += at - read;
            len.clear();
            varint(&mut len, n as u64);
            out[write..write + len.len()].copy_from_slice(&len);
            write += len.len();
            read = at + SLOT;
        }
        let end = out.len();
        out.copy_within(read..end, write);
        out.truncate(write + end - read);
    }
}

/// What `ProfilesData::encoded_len` gives, each message measured once.
pub fn encoded_len(d: &ProfilesData) -> usize {
    let mut n = 0;
    for rp in &d.resource_profiles {
        n += field_len(resource_len(rp));
    }
    if let Some(dict) = &d.dictionary {
        n += field_len(dictionary_len(dict));
    }
    n
}

fn resource_len(rp: &ResourceProfiles) -> usize {
    let mut n = rp
        .resource
        .as_ref()
        .map_or(0, |r| field_len(r.encoded_len()));
    for sp in &rp.scope_profiles {
        n += field_len(scope_len(sp));
    }
    n + bytes_len(rp.schema_url.as_bytes())
}

fn scope_len(sp: &ScopeProfiles) -> usize {
    let mut n = sp.scope.as_ref().map_or(0, |s| field_len(s.encoded_len()));
    for p in &sp.profiles {
        n += field_len(profile_len(p));
    }
    n + bytes_len(sp.schema_url.as_bytes())
}

fn profile_len(p: &Profile) -> usize {
    p.sample_type
        .as_ref()
        .map_or(0, |v| field_len(v.encoded_len()))
        + p.samples
            .iter()
            .map(|s| field_len(sample_len(s)))
            .sum::<usize>()
        + if p.time_unix_nano != 0 { 9 } else { 0 }
        + uint64_len(p.duration_nano)
        + p.period_type
            .as_ref()
            .map_or(0, |v| field_len(v.encoded_len()))
        + uint64_len(p.period as u64)
        + bytes_len(&p.profile_id)
        + uint64_len(p.dropped_attributes_count as u64)
        + bytes_len(p.original_payload_format.as_bytes())
        + bytes_len(&p.original_payload)
        + packed_len(&p.attribute_indices, |v| v as u64)
}

#[inline]
fn sample_len(s: &Sample) -> usize {
    int32_len(s.stack_index)
        + packed_len(&s.attribute_indices, |v| v as u64)
        + int32_len(s.link_index)
        + packed_len(&s.values, |v| v as u64)
        + packed_fixed64_len(&s.timestamps_unix_nano)
}

fn dictionary_len(d: &ProfilesDictionary) -> usize {
    fn all<T>(items: &[T], len: impl Fn(&T) -> usize) -> usize {
        items.iter().map(|t| field_len(len(t))).sum()
    }
    all(&d.mapping_table, Message::encoded_len)
        + all(&d.location_table, location_len)
        + all(&d.function_table, function_len)
        + all(&d.link_table, Message::encoded_len)
        + all(&d.string_table, String::len)
        + all(&d.attribute_table, Message::encoded_len)
        + all(&d.stack_table, |s: &Stack| {
            packed_len(&s.location_indices, |v| v as u64)
        })
}

fn location_len(l: &Location) -> usize {
    int32_len(l.mapping_index)
        + uint64_len(l.address)
        + l.lines
            .iter()
            .map(|line| {
                field_len(
                    int32_len(line.function_index)
                        + uint64_len(line.line as u64)
                        + uint64_len(line.column as u64),
                )
            })
            .sum::<usize>()
        + packed_len(&l.attribute_indices, |v| v as u64)
}

fn function_len(f: &Function) -> usize {
    int32_len(f.name_strindex)
        + int32_len(f.system_name_strindex)
        + int32_len(f.filename_strindex)
        + uint64_len(f.start_line as u64)
}

fn write_resource(out: &mut Vec<u8>, w: &mut Slots, rp: &ResourceProfiles) {
    w.open(out, 1);
    if let Some(r) = &rp.resource {
        prost::encoding::message::encode(1, r, out);
    }
    for sp in &rp.scope_profiles {
        w.open(out, 2);
        if let Some(s) = &sp.scope {
            prost::encoding::message::encode(1, s, out);
        }
        for p in &sp.profiles {
            w.open(out, 2);
            write_profile(out, p);
            w.close(out);
        }
        bytes(out, 3, sp.schema_url.as_bytes());
        w.close(out);
    }
    bytes(out, 3, rp.schema_url.as_bytes());
    w.close(out);
}

fn write_profile(out: &mut Vec<u8>, p: &Profile) {
    if let Some(v) = &p.sample_type {
        prost::encoding::message::encode(1, v, out);
    }
    for s in &p.samples {
        small(out, 2, |out| write_sample(out, s));
    }
    if p.time_unix_nano != 0 {
        key(out, 3, 1);
        out.extend_from_slice(&p.time_unix_nano.to_le_bytes());
    }
    uint64(out, 4, p.duration_nano);
    if let Some(v) = &p.period_type {
        prost::encoding::message::encode(5, v, out);
    }
    uint64(out, 6, p.period as u64);
    bytes(out, 7, &p.profile_id);
    uint64(out, 8, p.dropped_attributes_count as u64);
    bytes(out, 9, p.original_payload_format.as_bytes());
    bytes(out, 10, &p.original_payload);
    packed(out, 11, &p.attribute_indices, |v| v as u64);
}

#[inline]
fn write_sample(out: &mut Vec<u8>, s: &Sample) {
    int32(out, 1, s.stack_index);
    packed(out, 2, &s.attribute_indices, |v| v as u64);
    int32(out, 3, s.link_index);
    packed(out, 4, &s.values, |v| v as u64);
    packed_fixed64(out, 5, &s.timestamps_unix_nano);
}

fn write_dictionary(out: &mut Vec<u8>, d: &ProfilesDictionary) {
    for m in &d.mapping_table {
        prost::encoding::message::encode(1, m, out);
    }
    for l in &d.location_table {
        small(out, 2, |out| {
            int32(out, 1, l.mapping_index);
            uint64(out, 2, l.address);
            for line in &l.lines {
                small(out, 3, |out| {
                    int32(out, 1, line.function_index);
                    uint64(out, 2, line.line as u64);
                    uint64(out, 3, line.column as u64);
                });
            }
            packed(out, 4, &l.attribute_indices, |v| v as u64);
        });
    }
    for f in &d.function_table {
        small(out, 3, |out| {
            int32(out, 1, f.name_strindex);
            int32(out, 2, f.system_name_strindex);
            int32(out, 3, f.filename_strindex);
            uint64(out, 4, f.start_line as u64);
        });
    }
    for l in &d.link_table {
        prost::encoding::message::encode(4, l, out);
    }
    for s in &d.string_table {
        bytes_always(out, 5, s.as_bytes());
    }
    for a in &d.attribute_table {
        prost::encoding::message::encode(6, a, out);
    }
    for s in &d.stack_table {
        small(out, 7, |out| {
            packed(out, 1, &s.location_indices, |v| v as u64)
        });
    }
}
