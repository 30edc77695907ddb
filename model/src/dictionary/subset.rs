//! Parts of a batch, encoded straight from it: some of its profiles and
//! only the dictionary entries they use, re-indexed on the way out. What
//! the `loadbalancing` exporter sends each backend. [`super::extract`]
//! builds the same part as a `ProfilesData` of its own, which copies every
//! profile and sample first; here nothing is copied but the bytes written.
//!
//! [`Subset::to_data`] is that plain way, kept for peers on an older proto
//! revision and as the reference the tests compare the encoding with.

use prost::encoding::{self, encode_varint, encoded_len_varint};

use crate::codec::write::{field_len, key, varint, LEN};

use crate::proto::{
    dictionary_of, Profile, ProfilesData, ProfilesDictionary, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType,
};

use super::mark::close;
use super::split::extract_live;
use super::{visit, Live, PerTable, Remap, Table};
use crate::profile_sample_count;

/// Some profiles of a batch and what they use of its dictionary.
#[derive(Debug, Clone)]
pub struct Subset {
    /// Positions of its profiles in the batch (resources, their scopes,
    /// their profiles, in order), ascending.
    profiles: Vec<u32>,
    /// Observations of its profiles ([`crate::profile_sample_count`]).
    samples: u64,
    live: Live,
    remap: Remap,
}

/// One subset per group: `group[i]` is the group of the batch's `i`-th
/// profile (a value not below `groups`: none). `None` for a group without
/// profiles. One pass over the samples, then one over the dictionary per
/// group.
pub fn subsets(data: &ProfilesData, group: &[u32], groups: usize) -> Vec<Option<Subset>> {
    let dict = dictionary_of(data);
    let lens = PerTable::lens(dict);
    let mut marked: Vec<Option<(Vec<u32>, u64, Live)>> = (0..groups).map(|_| None).collect();
    for (pos, (r, s, p)) in profiles(data).enumerate() {
        let g = group.get(pos).copied().unwrap_or(u32::MAX);
        let Some(slot) = marked.get_mut(g as usize) else {
            continue;
        };
        let (positions, samples, live) =
            slot.get_or_insert_with(|| (Vec::new(), 0, Live::sized(lens)));
        positions.push(pos as u32);
        *samples += profile_sample_count(p);
        let f = &mut |t, i: &i32| live.set(t, *i);
        if let Some(res) = &r.resource {
            visit::key_values(&res.attributes, f);
        }
        if let Some(scope) = &s.scope {
            visit::key_values(&scope.attributes, f);
        }
        visit::profile(p, f, true);
    }
    marked
        .into_iter()
        .map(|m| {
            let (profiles, samples, mut live) = m?;
            close(dict, &mut live);
            let remap = Remap::compacting(&live);
            Some(Subset {
                profiles,
                samples,
                live,
                remap,
            })
        })
        .collect()
}

/// Every profile of `data` with its resource and scope, in order.
fn profiles(
    data: &ProfilesData,
) -> impl Iterator<Item = (&ResourceProfiles, &ScopeProfiles, &Profile)> {
    data.resource_profiles.iter().flat_map(|r| {
        r.scope_profiles
            .iter()
            .flat_map(move |s| s.profiles.iter().map(move |p| (r, s, p)))
    })
}

/// The runs of a subset's profiles: (resource, scope) positions and the
/// profiles, in order.
type Run<'a> = (usize, usize, Vec<&'a Profile>);

impl Subset {
    /// Positions of its profiles in the batch, ascending.
    pub fn profiles(&self) -> &[u32] {
        &self.profiles
    }

    /// Observations of its profiles.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Its profiles, grouped by scope in the batch's order.
    fn runs<'a>(&self, data: &'a ProfilesData) -> Vec<Run<'a>> {
        let mut want = self.profiles.iter().copied().peekable();
        let mut runs: Vec<Run<'a>> = Vec::new();
        let mut pos = 0u32;
        for (ri, r) in data.resource_profiles.iter().enumerate() {
            for (si, s) in r.scope_profiles.iter().enumerate() {
                for p in &s.profiles {
                    if want.next_if_eq(&pos).is_some() {
                        match runs.last_mut() {
                            Some((r0, s0, ps)) if (*r0, *s0) == (ri, si) => ps.push(p),
                            _ => runs.push((ri, si, vec![p])),
                        }
                    }
                    pos += 1;
                }
            }
        }
        runs
    }

    /// The subset as a `ProfilesData` of its own: what [`Subset::encode`]
    /// writes, built the plain way.
    pub fn to_data(&self, data: &ProfilesData) -> ProfilesData {
        let mut resources: Vec<ResourceProfiles> = Vec::new();
        let mut last = None;
        for (ri, si, ps) in self.runs(data) {
            let r = &data.resource_profiles[ri];
            if last != Some(ri) {
                resources.push(ResourceProfiles {
                    resource: r.resource.clone(),
                    scope_profiles: Vec::new(),
                    schema_url: r.schema_url.clone(),
                });
                last = Some(ri);
            }
            let s = &r.scope_profiles[si];
            let out = resources.last_mut().expect("pushed above");
            out.scope_profiles.push(ScopeProfiles {
                scope: s.scope.clone(),
                profiles: ps.into_iter().cloned().collect(),
                schema_url: s.schema_url.clone(),
            });
        }
        extract_live(dictionary_of(data), resources, &self.live, &self.remap)
    }

    /// The subset encoded as an `ExportProfilesServiceRequest` (the same
    /// bytes as a `ProfilesData`), into a buffer of its exact size: the
    /// lengths of the nested messages are summed first, from the profiles
    /// up, then everything is written once.
    pub fn encode(&self, data: &ProfilesData) -> Vec<u8> {
        let remap = &self.remap;
        let strings = |t, i: &mut i32| *i = remap.map(t, *i);
        let mut dict = Vec::new();
        dictionary_body(dictionary_of(data), &self.live, remap, &mut dict);

        // (resource, its length, its scopes: (scope, length, profiles)).
        let mut resources = Vec::new();
        let runs = self.runs(data);
        let mut k = 0;
        while k < runs.len() {
            let ri = runs[k].0;
            let n = runs[k..].iter().take_while(|run| run.0 == ri).count();
            let r = &data.resource_profiles[ri];
            let resource = r.resource.clone().map(|mut x| {
                visit::key_values_mut(&mut x.attributes, &mut { strings });
                x
            });
            let scopes: Vec<_> = runs[k..k + n]
                .iter()
                .map(|(_, si, ps)| {
                    let s = &r.scope_profiles[*si];
                    let scope = s.scope.clone().map(|mut x| {
                        visit::key_values_mut(&mut x.attributes, &mut { strings });
                        x
                    });
                    let profiles: Vec<_> = ps.iter().map(|p| ProfileParts::of(p, remap)).collect();
                    let len = scope
                        .as_ref()
                        .map_or(0, |x| encoding::message::encoded_len(1, x))
                        + profiles.iter().map(|p| field_len(p.len)).sum::<usize>()
                        + string_len(&s.schema_url);
                    (scope, len, profiles, &s.schema_url)
                })
                .collect();
            let len = resource
                .as_ref()
                .map_or(0, |x| encoding::message::encoded_len(1, x))
                + scopes.iter().map(|s| field_len(s.1)).sum::<usize>()
                + string_len(&r.schema_url);
            resources.push((resource, len, scopes, &r.schema_url));
            k += n;
        }

        let total = resources.iter().map(|r| field_len(r.1)).sum::<usize>() + field_len(dict.len());
        let mut out = Vec::with_capacity(total);
        // ProfilesData.resource_profiles = 1 { resource = 1,
        // scope_profiles = 2 { scope = 1, profiles = 2, schema_url = 3 },
        // schema_url = 3 }; ProfilesData.dictionary = 2.
        for (resource, len, scopes, schema_url) in resources {
            frame(1, len, &mut out);
            if let Some(x) = &resource {
                encoding::message::encode(1, x, &mut out);
            }
            for (scope, len, profiles, schema_url) in scopes {
                frame(2, len, &mut out);
                if let Some(x) = &scope {
                    encoding::message::encode(1, x, &mut out);
                }
                for p in profiles {
                    frame(2, p.len, &mut out);
                    p.write(remap, &mut out);
                }
                put_string(3, schema_url, &mut out);
            }
            put_string(3, schema_url, &mut out);
        }
        frame(2, dict.len(), &mut out);
        out.extend_from_slice(&dict);
        debug_assert_eq!(out.len(), total);
        out
    }
}

/// A length-delimited field's key and length (its body follows).
#[inline]
fn frame(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encoding::encode_key(tag, encoding::WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

/// [`frame`] for tags below 16 (a one-byte key), pushed byte by byte: no
/// call per value (prost's `encode_varint` is one through `BufMut`, a
/// slice copy one to `memmove`).
#[inline(always)]
fn frame_fast(tag: u8, len: usize, buf: &mut Vec<u8>) {
    key(buf, tag.into(), LEN);
    varint(buf, len as u64);
}

/// A proto3 string field: absent when empty.
fn string_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        field_len(s.len())
    }
}

fn put_string(tag: u32, s: &String, buf: &mut Vec<u8>) {
    if !s.is_empty() {
        encoding::string::encode(tag, s, buf);
    }
}

/// An `int32` as protobuf writes it (negative values sign-extended).
#[inline]
fn int32_len(v: i32) -> usize {
    encoded_len_varint(v as i64 as u64)
}

/// A profile to write: its fields other than the samples, encoded (`head`
/// is `sample_type`, field 1; `tail` fields 3 to 11), and its length.
struct ProfileParts<'a> {
    profile: &'a Profile,
    head: Vec<u8>,
    tail: Vec<u8>,
    len: usize,
}

impl<'a> ProfileParts<'a> {
    /// Written field by field as prost would (tag order, proto3 defaults
    /// left out); the exhaustive pattern makes a field added to the proto a
    /// compile error here rather than a field silently dropped.
    fn of(profile: &'a Profile, remap: &Remap) -> Self {
        let Profile {
            sample_type,
            samples,
            time_unix_nano,
            duration_nano,
            period_type,
            period,
            profile_id,
            dropped_attributes_count,
            original_payload_format,
            original_payload,
            attribute_indices,
        } = profile;
        let value_type = |vt: &ValueType| {
            let ValueType {
                type_strindex,
                unit_strindex,
            } = vt;
            ValueType {
                type_strindex: remap.strings.get(*type_strindex),
                unit_strindex: remap.strings.get(*unit_strindex),
            }
        };
        let mut head = Vec::new();
        if let Some(vt) = sample_type {
            encoding::message::encode(1, &value_type(vt), &mut head);
        }
        let tail = &mut Vec::new();
        if *time_unix_nano != 0 {
            encoding::fixed64::encode(3, time_unix_nano, tail);
        }
        if *duration_nano != 0 {
            encoding::uint64::encode(4, duration_nano, tail);
        }
        if let Some(vt) = period_type {
            encoding::message::encode(5, &value_type(vt), tail);
        }
        if *period != 0 {
            encoding::int64::encode(6, period, tail);
        }
        if !profile_id.is_empty() {
            encoding::bytes::encode(7, profile_id, tail);
        }
        if *dropped_attributes_count != 0 {
            encoding::uint32::encode(8, dropped_attributes_count, tail);
        }
        put_string(9, original_payload_format, tail);
        if !original_payload.is_empty() {
            encoding::bytes::encode(10, original_payload, tail);
        }
        if !attribute_indices.is_empty() {
            let mapped: Vec<i32> = attribute_indices
                .iter()
                .map(|&a| remap.attributes.get(a))
                .collect();
            encoding::int32::encode_packed(11, &mapped, tail);
        }
        let samples: usize = samples
            .iter()
            .map(|s| field_len(SampleShape::of(s, remap).len()))
            .sum();
        Self {
            profile,
            len: head.len() + samples + tail.len(),
            head,
            tail: std::mem::take(tail),
        }
    }

    /// The body, its samples re-indexed by `remap`.
    fn write(&self, remap: &Remap, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.head);
        for s in &self.profile.samples {
            sample(s, remap, buf);
        }
        buf.extend_from_slice(&self.tail);
    }
}

/// A sample's re-indexed scalars and the lengths of its packed fields.
struct SampleShape {
    stack: i32,
    link: i32,
    attributes: usize,
    values: usize,
    timestamps: usize,
}

impl SampleShape {
    #[inline(always)]
    fn of(s: &Sample, remap: &Remap) -> Self {
        let Sample {
            stack_index,
            attribute_indices,
            link_index,
            values,
            timestamps_unix_nano,
        } = s;
        Self {
            stack: remap.stacks.get(*stack_index),
            link: remap.links.get(*link_index),
            attributes: attribute_indices
                .iter()
                .map(|&a| int32_len(remap.attributes.get(a)))
                .sum(),
            values: values.iter().map(|&v| encoded_len_varint(v as u64)).sum(),
            timestamps: timestamps_unix_nano.len() * 8,
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        let scalar = |v: i32| if v == 0 { 0 } else { 1 + int32_len(v) };
        let packed = |n: usize| if n == 0 { 0 } else { field_len(n) };
        scalar(self.stack)
            + packed(self.attributes)
            + scalar(self.link)
            + packed(self.values)
            + packed(self.timestamps)
    }
}

/// One `Profile.samples` entry (field 2), re-indexed: the hot loop, so its
/// length is summed from the fields rather than encoded twice.
#[inline]
fn sample(s: &Sample, remap: &Remap, buf: &mut Vec<u8>) {
    let shape = SampleShape::of(s, remap);
    let len = shape.len();
    buf.reserve(len + 6);
    frame_fast(2, len, buf);
    // stack_index = 1, attribute_indices = 2, link_index = 3, values = 4,
    // timestamps_unix_nano = 5 (repeated fields packed, as proto3 writes).
    if shape.stack != 0 {
        buf.push(0x08);
        varint(buf, shape.stack as i64 as u64);
    }
    if shape.attributes != 0 {
        frame_fast(2, shape.attributes, buf);
        for &a in &s.attribute_indices {
            varint(buf, remap.attributes.get(a) as i64 as u64);
        }
    }
    if shape.link != 0 {
        buf.push(0x18);
        varint(buf, shape.link as i64 as u64);
    }
    if shape.values != 0 {
        frame_fast(4, shape.values, buf);
        for &v in &s.values {
            varint(buf, v as u64);
        }
    }
    if shape.timestamps != 0 {
        frame_fast(5, shape.timestamps, buf);
        for &t in &s.timestamps_unix_nano {
            buf.extend_from_slice(&t.to_le_bytes());
        }
    }
}

/// The live entries of every table, in order, their references re-indexed
/// by `remap`: `ProfilesDictionary`'s fields.
fn dictionary_body(dict: &ProfilesDictionary, live: &Live, remap: &Remap, buf: &mut Vec<u8>) {
    let ProfilesDictionary {
        mapping_table,
        location_table,
        function_table,
        link_table,
        string_table,
        attribute_table,
        stack_table,
    } = dict;
    let f = &mut |t: Table, i: &mut i32| *i = remap.map(t, *i);
    let kept = |table| live.table(table);
    // Room for the stacks (most of the bytes) and a guess for the rest, so
    // that the buffer does not grow (and copy) a dozen times; room never
    // touched costs nothing.
    let stacks: usize = live_entries(stack_table, kept(Table::Stack))
        .map(|s| 8 + 5 * s.location_indices.len())
        .sum();
    let counts = live.counts();
    buf.reserve(stacks + 48 * (counts.locations + counts.functions + counts.strings));
    for m in live_entries(mapping_table, kept(Table::Mapping)) {
        let mut m = m.clone();
        visit::mapping_mut(&mut m, f);
        encoding::message::encode(1, &m, buf);
    }
    for l in live_entries(location_table, kept(Table::Location)) {
        let mut l = l.clone();
        visit::location_mut(&mut l, f);
        encoding::message::encode(2, &l, buf);
    }
    for x in live_entries(function_table, kept(Table::Function)) {
        let mut x = *x;
        visit::function_mut(&mut x, f);
        encoding::message::encode(3, &x, buf);
    }
    for l in live_entries(link_table, kept(Table::Link)) {
        encoding::message::encode(4, l, buf);
    }
    // Every entry of a repeated string is written, the empty one too.
    for s in live_entries(string_table, kept(Table::String)) {
        encoding::string::encode(5, s, buf);
    }
    for a in live_entries(attribute_table, kept(Table::Attribute)) {
        let mut a = a.clone();
        visit::attribute_mut(&mut a, f);
        encoding::message::encode(6, &a, buf);
    }
    for s in live_entries(stack_table, kept(Table::Stack)) {
        let Stack { location_indices } = s;
        let packed: usize = location_indices
            .iter()
            .map(|&l| int32_len(remap.locations.get(l)))
            .sum();
        frame(7, if packed == 0 { 0 } else { field_len(packed) }, buf);
        if packed != 0 {
            frame(1, packed, buf);
            for &l in location_indices {
                varint(buf, remap.locations.get(l) as i64 as u64);
            }
        }
    }
}

/// The entries of `table` that `live` flags, in order.
fn live_entries<'a, T>(table: &'a [T], live: &'a [bool]) -> impl Iterator<Item = &'a T> {
    table.iter().zip(live).filter(|e| *e.1).map(|e| e.0)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::synth;

    /// A larger batch than the property test makes: many links,
    /// attributes and stacks, so every table's entries move.
    #[test]
    fn subsets_of_a_synthetic_batch_encode_as_their_plain_parts() {
        let data = synth::Config {
            samples: 3_000,
            resources: 7,
            ..synth::Config::default()
        }
        .build();
        let n = profiles(&data).count();
        let group: Vec<u32> = (0..n as u32).map(|i| i * 7 % 4).collect();
        let parts = subsets(&data, &group, 3);
        assert!(parts.iter().all(Option::is_some));
        for part in parts.iter().flatten() {
            let plain = part.to_data(&data);
            assert!(part.remap.moves());
            assert_eq!(part.encode(&data), plain.encode_to_vec());
        }
    }
}
