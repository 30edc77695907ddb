//! What a decoded batch holds in memory: the heap behind every `Vec` and
//! `String` of its messages, by capacity, plus the allocator's rounding.
//! One pass over the data without allocating (about a fiftieth of the
//! decode), so the byte budget can count what a batch really costs
//! rather than its encoded size, which is several times smaller.

use std::mem::size_of;

use crate::proto::{
    any_value::Value, AnyValue, KeyValue, Profile, ProfilesData, ProfilesDictionary,
};

/// Heap bytes of one allocation of `len` bytes: mimalloc's size classes
/// waste up to an eighth (an allocation of 0 bytes is none).
#[inline]
pub(super) fn alloc(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len + len / 8 + 8
    }
}

#[allow(clippy::ptr_arg)] // the capacity is the point
#[inline]
fn vec_heap<T>(v: &Vec<T>) -> usize {
    alloc(v.capacity() * size_of::<T>())
}

macro_rules! vec_bytes {
    ($v:expr) => {
        vec_heap(&$v)
    };
}

/// Heap bytes held by `data` (not counting `size_of::<ProfilesData>()`).
pub fn heap_bytes(data: &ProfilesData) -> usize {
    let mut n = vec_bytes!(data.resource_profiles);
    for rp in &data.resource_profiles {
        n += alloc(rp.schema_url.capacity());
        if let Some(r) = &rp.resource {
            n += key_values(&r.attributes) + vec_bytes!(r.entity_refs);
        }
        n += vec_bytes!(rp.scope_profiles);
        for sp in &rp.scope_profiles {
            n += alloc(sp.schema_url.capacity());
            if let Some(s) = &sp.scope {
                n += alloc(s.name.capacity()) + alloc(s.version.capacity());
                n += key_values(&s.attributes);
            }
            n += vec_bytes!(sp.profiles);
            n += sp.profiles.iter().map(profile).sum::<usize>();
        }
    }
    if let Some(d) = &data.dictionary {
        n += dictionary(d);
    }
    n
}

fn profile(p: &Profile) -> usize {
    let mut n = vec_bytes!(p.samples)
        + vec_bytes!(p.profile_id)
        + alloc(p.original_payload_format.capacity())
        + vec_bytes!(p.original_payload)
        + vec_bytes!(p.attribute_indices);
    for s in &p.samples {
        n += vec_bytes!(s.attribute_indices)
            + vec_bytes!(s.values)
            + vec_bytes!(s.timestamps_unix_nano);
    }
    n
}

/// Heap bytes held by a dictionary (what a copy of it takes).
pub fn dictionary(d: &ProfilesDictionary) -> usize {
    let mut n = vec_bytes!(d.mapping_table)
        + vec_bytes!(d.location_table)
        + vec_bytes!(d.function_table)
        + vec_bytes!(d.link_table)
        + vec_bytes!(d.string_table)
        + vec_bytes!(d.attribute_table)
        + vec_bytes!(d.stack_table);
    n += d
        .mapping_table
        .iter()
        .map(|m| vec_bytes!(m.attribute_indices))
        .sum::<usize>();
    for l in &d.location_table {
        n += vec_bytes!(l.lines) + vec_bytes!(l.attribute_indices);
    }
    for l in &d.link_table {
        n += vec_bytes!(l.trace_id) + vec_bytes!(l.span_id);
    }
    n += d
        .string_table
        .iter()
        .map(|s| alloc(s.capacity()))
        .sum::<usize>();
    n += d
        .attribute_table
        .iter()
        .filter_map(|a| a.value.as_ref())
        .map(any_value)
        .sum::<usize>();
    n += d
        .stack_table
        .iter()
        .map(|s| vec_bytes!(s.location_indices))
        .sum::<usize>();
    n
}

#[allow(clippy::ptr_arg)]
fn key_values(kvs: &Vec<KeyValue>) -> usize {
    let mut n = vec_bytes!(kvs);
    for kv in kvs {
        n += alloc(kv.key.capacity());
        if let Some(v) = &kv.value {
            n += any_value(v);
        }
    }
    n
}

fn any_value(v: &AnyValue) -> usize {
    match &v.value {
        Some(Value::StringValue(s)) => alloc(s.capacity()),
        Some(Value::BytesValue(b)) => vec_bytes!(b),
        Some(Value::ArrayValue(a)) => {
            vec_bytes!(a.values) + a.values.iter().map(any_value).sum::<usize>()
        }
        Some(Value::KvlistValue(kv)) => key_values(&kv.values),
        _ => 0,
    }
}

/// What decoding `bytes` (an `ExportProfilesServiceRequest` or
/// `ProfilesData`) with prost will allocate, read off the wire without
/// decoding: a walk over field headers that counts the elements of every
/// repeated field, so the memory can be reserved before it is taken. A
/// request of tiny samples decodes to 40 times its size, a typical one to 5
/// to 10 times. Malformed input ends the walk early; the decoder then says
/// what is wrong.
pub fn estimate_decoded(bytes: &[u8]) -> usize {
    let mut est = 0;
    let _ = walk(bytes, &wire::PROFILES_DATA, &mut est, 0);
    est
}

/// Heap of a `String` or `Vec<u8>` prost filled with `len` bytes (it
/// reserves them in an empty vector: at least 8).
#[inline]
pub(super) fn text_heap(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        alloc(len.max(8))
    }
}

/// Heap of the vector `n` pushes of `elem`-byte elements leave (Rust's
/// growth: a first allocation of 4, 8 for bytes, 1 for large elements,
/// then doubling).
pub(super) fn pushed(n: usize, elem: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let min = if elem == 1 {
        8
    } else if elem <= 1024 {
        4
    } else {
        1
    };
    alloc(n.max(min).next_power_of_two() * elem)
}

mod wire {
    //! The profiles messages as the walk needs them: per field number, what
    //! it holds. Numbers are those of opentelemetry-proto v1.10.0.

    use std::mem::size_of;

    use crate::proto::{
        AnyValue, Function, KeyValue, KeyValueAndUnit, Line, Link, Location, Mapping, Profile,
        ResourceProfiles, Sample, ScopeProfiles, Stack,
    };

    pub(super) enum Field {
        /// A message (repeated or not); `elem` its size when repeated.
        Message(&'static Schema, usize),
        /// `Profile.samples`: the bulk of every request, walked by a fast
        /// path of its own.
        Samples,
        /// Repeated scalars, packed or not: element size, varint or fixed.
        Scalars(usize, bool),
        /// A string or bytes; `repeated` ones (the string table) also count
        /// as elements of their `Vec`.
        Text {
            repeated: bool,
        },
        Scalar,
    }

    /// `fields[n]` describes field number `n`.
    pub(super) struct Schema(pub &'static [Field]);

    use Field::*;

    const REP: usize = 0; // not repeated: no Vec of its own

    pub(super) static PROFILES_DATA: Schema = Schema(&[
        Scalar,
        Message(&RESOURCE_PROFILES, size_of::<ResourceProfiles>()),
        Message(&DICTIONARY, REP),
    ]);
    static RESOURCE_PROFILES: Schema = Schema(&[
        Scalar,
        Message(&RESOURCE, REP),
        Message(&SCOPE_PROFILES, size_of::<ScopeProfiles>()),
        Text { repeated: false },
    ]);
    static RESOURCE: Schema = Schema(&[
        Scalar,
        Message(&KEY_VALUE, size_of::<KeyValue>()),
        Scalar,
        Message(&ENTITY_REF, 96),
    ]);
    static ENTITY_REF: Schema = Schema(&[
        Scalar,
        Text { repeated: false },
        Text { repeated: false },
        Text { repeated: true },
        Text { repeated: true },
    ]);
    static KEY_VALUE: Schema = Schema(&[
        Scalar,
        Text { repeated: false },
        Message(&ANY_VALUE, REP),
        Scalar,
    ]);
    static ANY_VALUE: Schema = Schema(&[
        Scalar,
        Text { repeated: false },
        Scalar,
        Scalar,
        Scalar,
        Message(&ARRAY_VALUE, REP),
        Message(&KEY_VALUE_LIST, REP),
        Text { repeated: false },
        Scalar,
    ]);
    static ARRAY_VALUE: Schema = Schema(&[Scalar, Message(&ANY_VALUE, size_of::<AnyValue>())]);
    static KEY_VALUE_LIST: Schema = Schema(&[Scalar, Message(&KEY_VALUE, size_of::<KeyValue>())]);
    static SCOPE_PROFILES: Schema = Schema(&[
        Scalar,
        Message(&SCOPE, REP),
        Message(&PROFILE, size_of::<Profile>()),
        Text { repeated: false },
    ]);
    static SCOPE: Schema = Schema(&[
        Scalar,
        Text { repeated: false },
        Text { repeated: false },
        Message(&KEY_VALUE, size_of::<KeyValue>()),
        Scalar,
    ]);
    static PROFILE: Schema = Schema(&[
        Scalar,
        Scalar, // sample_type: inline
        Samples,
        Scalar,
        Scalar,
        Scalar,
        Scalar,
        Text { repeated: false },
        Scalar,
        Text { repeated: false },
        Text { repeated: false },
        Scalars(4, true),
    ]);
    pub(super) static SAMPLE: Schema = Schema(&[
        Scalar,
        Scalar,
        Scalars(4, true),
        Scalar,
        Scalars(8, true),
        Scalars(8, false),
    ]);

    pub(super) const SAMPLE_SIZE: usize = size_of::<Sample>();
    static DICTIONARY: Schema = Schema(&[
        Scalar,
        Message(&MAPPING, size_of::<Mapping>()),
        Message(&LOCATION, size_of::<Location>()),
        Message(&SCALARS_ONLY, size_of::<Function>()),
        Message(&LINK, size_of::<Link>()),
        Text { repeated: true },
        Message(&KEY_VALUE_AND_UNIT, size_of::<KeyValueAndUnit>()),
        Message(&STACK, size_of::<Stack>()),
    ]);
    static MAPPING: Schema = Schema(&[Scalar, Scalar, Scalar, Scalar, Scalar, Scalars(4, true)]);
    static LOCATION: Schema = Schema(&[
        Scalar,
        Scalar,
        Scalar,
        Message(&SCALARS_ONLY, size_of::<Line>()),
        Scalars(4, true),
    ]);
    static SCALARS_ONLY: Schema = Schema(&[]);
    static LINK: Schema = Schema(&[Scalar, Text { repeated: false }, Text { repeated: false }]);
    static KEY_VALUE_AND_UNIT: Schema = Schema(&[Scalar, Scalar, Message(&ANY_VALUE, REP), Scalar]);
    static STACK: Schema = Schema(&[Scalar, Scalars(4, true)]);
}

/// Deepest nesting the walk follows (prost's own limit is 100).
const MAX_DEPTH: u32 = 100;

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The heap of one `Sample` (its three vectors), read in one pass over
/// its fields with no recursion; `None` for a shape the fast path does not
/// know (the general walk takes it). A packed varint field is counted as
/// one element per byte: exact for small numbers (indices), an over-count
/// for large values, which the minimum capacity of four mostly absorbs.
#[inline]
fn sample_heap(b: &[u8]) -> Option<usize> {
    let (mut attrs, mut values, mut stamps) = (0usize, 0usize, 0usize);
    let mut at = 0;
    while at < b.len() {
        let key = b[at];
        at += 1;
        match key {
            // stack_index, link_index; unpacked attribute index or value
            0x08 | 0x18 | 0x10 | 0x20 => {
                varint(b, &mut at)?;
                attrs += usize::from(key == 0x10);
                values += usize::from(key == 0x20);
            }
            // unpacked timestamp
            0x29 => {
                at += 8;
                stamps += 1;
            }
            // packed attribute indices, values, timestamps
            0x12 | 0x22 | 0x2a => {
                let len = varint(b, &mut at)? as usize;
                at = at.checked_add(len)?;
                match key {
                    0x12 => attrs += len,
                    0x22 => values += len,
                    _ => stamps += len / 8,
                }
            }
            _ => return None,
        }
    }
    (at == b.len()).then(|| pushed(attrs, 4) + pushed(values, 8) + pushed(stamps, 8))
}

/// Adds to `est` the heap of one message of `schema` encoded in `b`.
fn walk(b: &[u8], schema: &wire::Schema, est: &mut usize, depth: u32) -> Option<()> {
    use wire::Field;
    if depth > MAX_DEPTH {
        return None;
    }
    // Elements of each repeated field of this message.
    let mut counts = [0usize; 16];
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let (field, wire_type) = ((key >> 3) as usize, key & 7);
        let payload = match wire_type {
            0 => {
                varint(b, &mut at)?;
                None
            }
            1 => {
                at += 8;
                None
            }
            5 => {
                at += 4;
                None
            }
            2 => {
                let len = varint(b, &mut at)? as usize;
                let start = at;
                at = at.checked_add(len)?;
                Some(b.get(start..at)?)
            }
            _ => return None,
        };
        let Some(kind) = schema.0.get(field) else {
            continue;
        };
        let slot = field.min(15);
        match (kind, payload) {
            (Field::Samples, Some(p)) => {
                counts[slot] += 1;
                match sample_heap(p) {
                    Some(h) => *est += h,
                    None => walk(p, &wire::SAMPLE, est, depth + 1)?,
                }
            }
            (Field::Message(inner, elem), Some(p)) => {
                if *elem > 0 {
                    counts[slot] += 1;
                }
                walk(p, inner, est, depth + 1)?;
            }
            (Field::Scalars(_, varints), Some(p)) => {
                counts[slot] += if *varints {
                    p.iter().filter(|&&x| x < 0x80).count()
                } else {
                    p.len() / 8
                };
            }
            (Field::Scalars(..), None) => counts[slot] += 1,
            (Field::Text { repeated }, Some(p)) => {
                *est += text_heap(p.len());
                if *repeated {
                    counts[slot] += 1;
                }
            }
            _ => {}
        }
    }
    for (field, kind) in schema.0.iter().enumerate() {
        let n = counts[field.min(15)];
        *est += match kind {
            wire::Field::Message(_, elem) if *elem > 0 => pushed(n, *elem),
            wire::Field::Samples => pushed(n, wire::SAMPLE_SIZE),
            wire::Field::Scalars(elem, _) => pushed(n, *elem),
            wire::Field::Text { repeated: true } => pushed(n, size_of::<String>()),
            _ => 0,
        };
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn decoded_size_of_the_synthetic_requests() {
        for (samples, stacks) in [(1_000, 500), (100_000, 20_000)] {
            let data = crate::synth::request(samples, stacks);
            let bytes = data.encode_to_vec();
            let decoded = ProfilesData::decode(&bytes[..]).unwrap();
            let heap = heap_bytes(&decoded);
            eprintln!(
                "{samples} samples: encoded {} bytes, decoded heap {heap} bytes ({:.1}x)",
                bytes.len(),
                heap as f64 / bytes.len() as f64
            );
            assert!(
                heap > bytes.len(),
                "a decoded batch is larger than its bytes"
            );
            let est = estimate_decoded(&bytes);
            let ratio = est as f64 / heap as f64;
            assert!(
                (0.9..1.1).contains(&ratio),
                "estimate {est}, decoded {heap}"
            );
        }
    }

    #[test]
    fn the_estimate_sees_a_request_of_tiny_samples_for_what_it_is() {
        // 200k samples of one value each: ~7 bytes on the wire apiece, a
        // Sample struct and a heap block once decoded.
        let mut data = crate::synth::request(1_000, 100);
        let p = &mut data.resource_profiles[0].scope_profiles[0].profiles[0];
        let s = p.samples[0].clone();
        p.samples = vec![
            crate::proto::Sample {
                values: vec![1],
                timestamps_unix_nano: vec![],
                attribute_indices: vec![],
                ..s
            };
            200_000
        ];
        let bytes = data.encode_to_vec();
        let heap = heap_bytes(&ProfilesData::decode(&bytes[..]).unwrap());
        let est = estimate_decoded(&bytes);
        assert!(heap > 15 * bytes.len(), "{heap} for {} bytes", bytes.len());
        let ratio = est as f64 / heap as f64;
        assert!(
            (0.9..1.1).contains(&ratio),
            "estimate {est}, decoded {heap}"
        );
        // Garbage ends the walk without a panic.
        for cut in [1, 7, bytes.len() / 2] {
            let _ = estimate_decoded(&bytes[..cut]);
        }
        let _ = estimate_decoded(&[0xff; 64]);
    }
}
