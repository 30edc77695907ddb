//! Validation on the wire: whether an `ExportProfilesServiceRequest` /
//! `ProfilesData` of the current revision is valid as it is, read off its
//! bytes without decoding, so that a batch nobody changes can be forwarded
//! as received without ever being materialized.
//!
//! The check is sound, not complete: when it answers [`Clean`], prost
//! decodes the bytes, [`super::findings`] finds nothing, and revision
//! detection reads them as the current revision (a differential property
//! test holds it to that). Anything it does not follow exactly (a field it
//! does not know, another wire type, a dictionary or another singular
//! message, string or bytes field sent twice, an entry at index 0 that is
//! not all zeros, a oneof set twice, deep nesting) answers
//! `None`, and the request takes the decoding path, which says what is
//! wrong or repairs it.
//!
//! The same walk measures what decoding would take (the heap behind every
//! `Vec` and `String` prost would fill, as [`super::footprint`] counts a
//! decoded batch), so memory is reserved without a second pass.

use std::mem::size_of;

use bytes::Bytes;

use super::bounds::MAX_UNIX_NANO;
use super::codec::read::{Reader, FIXED64, LEN, VARINT};
use super::footprint::{heap_bytes, pushed, text_heap};
use super::ProfileBatch;
use crate::proto::{
    common::EntityRef, AnyValue, KeyValue, KeyValueAndUnit, Line, Link, Location, Mapping, Profile,
    ResourceProfiles, Sample, ScopeProfiles, Stack,
};

/// What the walk learned of a clean request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clean {
    /// Observations, as [`super::ProfileBatch::sample_count`] counts them.
    pub samples: u64,
    pub profiles: u64,
    /// Heap bytes the decoded messages will hold.
    pub heap: usize,
}

/// [`Clean`] if the bytes are a valid request of the current revision as
/// they are; `None` if deciding takes decoding them.
pub fn check(bytes: &[u8]) -> Option<Clean> {
    let mut resources = Vec::new();
    let mut dictionary: Option<&[u8]> = None;
    let mut r = Reader::new(bytes);
    while let Some((field, wire)) = r.next_key()? {
        match (field, wire) {
            (1, LEN) => resources.push(r.bytes()?),
            // prost merges a second dictionary into the first.
            (2, LEN) if dictionary.is_none() => dictionary = Some(r.bytes()?),
            _ => return None,
        }
    }
    let mut w = Walk {
        n: match dictionary {
            Some(d) => dictionary_lens(d)?,
            None => Lens::default(),
        },
        out: Clean::default(),
    };
    w.out.heap = pushed(resources.len(), size_of::<ResourceProfiles>());
    if let Some(d) = dictionary {
        w.check_dictionary(d)?;
    }
    for rp in resources {
        w.resource_profiles(rp)?;
    }
    Some(w.out)
}

/// The request decoded, as a batch that keeps `bytes`, and what [`check`]
/// would have learned, if it is clean: for a request that a processor
/// decodes anyway, one pass over the bytes where the check and the decode
/// made two (validation then reads the messages, a tenth of the walk).
/// The same differential test holds it to the decoding path. It answers
/// `None` for more than [`check`] does: any field of the profiles
/// messages, or of an attribute's value, that prost reads other than as
/// written sends the request down the decoding path.
pub fn decode_clean(bytes: &Bytes) -> Option<(ProfileBatch, Clean)> {
    let data = crate::codec::exact(bytes)?;
    if !crate::findings(&data).is_valid() {
        return None;
    }
    let heap = heap_bytes(&data);
    let batch = ProfileBatch::measured(data, bytes.clone(), heap);
    let clean = Clean {
        samples: batch.sample_count(),
        profiles: batch.profile_count(),
        heap,
    };
    Some((batch, clean))
}

/// AnyValue nesting followed (prost allows 100).
const MAX_DEPTH: u32 = 16;

/// Reads of the fields the walk does not keep, on the codec's reader.
impl Reader<'_> {
    /// A `bytes` field: the heap of its `Vec<u8>`.
    fn blob(&mut self) -> Option<usize> {
        Some(text_heap(self.bytes()?.len()))
    }

    /// A `string` field: the heap of its `String`.
    fn text(&mut self) -> Option<usize> {
        let s = self.bytes()?;
        is_utf8(s).then_some(text_heap(s.len()))
    }

    /// Skips a scalar of the wire type a field of the schema has.
    fn scalar(&mut self, wire: u8, want: u8) -> Option<()> {
        if wire != want {
            return None;
        }
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed64().map(drop),
            _ => None,
        }
    }
}

/// Entries per dictionary table.
#[derive(Default, Clone, Copy)]
struct Lens {
    mapping: usize,
    location: usize,
    function: usize,
    link: usize,
    string: usize,
    attribute: usize,
    stack: usize,
}

/// An `int32` index as prost reads it (the varint truncated), checked as
/// validation does: 0, or within the table.
#[inline]
fn index(r: &mut Reader, wire: u8, len: usize) -> Option<()> {
    if wire != VARINT {
        return None;
    }
    let i = r.varint()? as i32;
    (i == 0 || (i > 0 && (i as usize) < len)).then_some(())
}

/// A repeated `int32` index field, packed or one element: how many.
fn indices(r: &mut Reader, wire: u8, len: usize) -> Option<usize> {
    match wire {
        LEN => {
            let mut p = Reader::new(r.bytes()?);
            let mut n = 0;
            while !p.is_empty() {
                index(&mut p, VARINT, len)?;
                n += 1;
            }
            Some(n)
        }
        _ => index(r, wire, len).map(|()| 1),
    }
}

/// A singular message, string or bytes field of a message (`field` under
/// 32, marked in `seen`), `None` the second time: prost merges two
/// messages (appending to their repeated fields) and keeps a string's last
/// value in the first one's buffer, grown for it; the heap count follows
/// neither, and no encoder writes either.
fn first_of(seen: &mut u32, field: u32) -> Option<()> {
    let bit = 1 << field;
    (*seen & bit == 0).then(|| *seen |= bit)
}

/// Heap of the `Vec<i32>` a repeated index field decodes to.
fn index_vec(n: usize) -> usize {
    pushed(n, size_of::<i32>())
}

/// Whether entry 0 of the table in dictionary field `table` decodes to the
/// zero value: zeros and empty lengths only. pdata (every Go producer)
/// writes the zero link's ids and the zero attribute's `value` so, and
/// async-profiler 4.5 the link's ids as zero bytes
/// ([`crate::proto::ZeroEntry`]); an
/// empty entry of a location's `lines` is a line, not nothing, and a
/// varint of a repeated field (a mapping's or location's
/// `attribute_indices`, a stack's `location_indices`, unpacked) is an
/// element, even 0.
fn zero_entry(table: u32, entry: &[u8]) -> bool {
    if table == 5 {
        // A string, not a message.
        return entry.is_empty();
    }
    let mut r = Reader::new(entry);
    loop {
        let zero = match r.next_key() {
            Some(None) => return true,
            Some(Some((3, LEN))) if table == 2 => false,
            Some(Some((field, VARINT))) if matches!((table, field), (1, 5) | (2, 4) | (7, 1)) => {
                false
            }
            Some(Some((_, VARINT))) => r.varint() == Some(0),
            Some(Some((_, FIXED64))) => r.fixed64() == Some(0),
            // A link's ids of zeros are no ids (async-profiler 4.5).
            Some(Some((_, LEN))) if table == 4 => {
                r.bytes().is_some_and(|b| b.iter().all(|&b| b == 0))
            }
            Some(Some((_, LEN))) => r.bytes().is_some_and(<[u8]>::is_empty),
            _ => false,
        };
        if !zero {
            return false;
        }
    }
}

/// Counts the table entries; every entry 0 must be the zero value, which
/// an encoder writes as no bytes, or as [`zero_entry`]'s.
fn dictionary_lens(d: &[u8]) -> Option<Lens> {
    let mut n = Lens::default();
    let mut r = Reader::new(d);
    while let Some((field, wire)) = r.next_key()? {
        if wire != LEN {
            return None;
        }
        let entry = r.bytes()?;
        let count = match field {
            1 => &mut n.mapping,
            2 => &mut n.location,
            3 => &mut n.function,
            4 => &mut n.link,
            5 => &mut n.string,
            6 => &mut n.attribute,
            7 => &mut n.stack,
            _ => return None,
        };
        if *count == 0 && !zero_entry(field, entry) {
            return None;
        }
        *count += 1;
    }
    Some(n)
}

/// The walk over one request: the table sizes indices are checked
/// against, and what it learns.
struct Walk {
    n: Lens,
    out: Clean,
}

impl Walk {
    fn check_dictionary(&mut self, d: &[u8]) -> Option<()> {
        let n = self.n;
        self.out.heap += pushed(n.mapping, size_of::<Mapping>())
            + pushed(n.location, size_of::<Location>())
            + pushed(n.function, size_of::<crate::proto::Function>())
            + pushed(n.link, size_of::<Link>())
            + pushed(n.string, size_of::<String>())
            + pushed(n.attribute, size_of::<KeyValueAndUnit>())
            + pushed(n.stack, size_of::<Stack>());
        let mut r = Reader::new(d);
        while let Some((field, _)) = r.next_key()? {
            let entry = r.bytes()?;
            let mut e = Reader::new(entry);
            match field {
                1 => self.mapping(&mut e)?,
                2 => self.location(&mut e)?,
                3 => self.function(&mut e)?,
                4 => self.link(&mut e)?,
                5 => {
                    is_utf8(entry).then_some(())?;
                    self.out.heap += text_heap(entry.len());
                }
                6 => self.key_value_and_unit(&mut e)?,
                _ => self.stack(&mut e)?,
            }
        }
        Some(())
    }

    fn mapping(&mut self, r: &mut Reader) -> Option<()> {
        let mut attrs = 0;
        while let Some((field, wire)) = r.next_key()? {
            match field {
                1..=3 => r.scalar(wire, VARINT)?,
                4 => index(r, wire, self.n.string)?,
                5 => attrs += indices(r, wire, self.n.attribute)?,
                _ => return None,
            }
        }
        self.out.heap += index_vec(attrs);
        Some(())
    }

    fn location(&mut self, r: &mut Reader) -> Option<()> {
        let (mut lines, mut attrs) = (0, 0);
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1, _) => index(r, wire, self.n.mapping)?,
                (2, _) => r.scalar(wire, VARINT)?,
                (3, LEN) => {
                    let mut line = Reader::new(r.bytes()?);
                    while let Some((field, wire)) = line.next_key()? {
                        match field {
                            1 => index(&mut line, wire, self.n.function)?,
                            2 | 3 => line.scalar(wire, VARINT)?,
                            _ => return None,
                        }
                    }
                    lines += 1;
                }
                (4, _) => attrs += indices(r, wire, self.n.attribute)?,
                _ => return None,
            }
        }
        self.out.heap += pushed(lines, size_of::<Line>()) + index_vec(attrs);
        Some(())
    }

    fn function(&mut self, r: &mut Reader) -> Option<()> {
        while let Some((field, wire)) = r.next_key()? {
            match field {
                1..=3 => index(r, wire, self.n.string)?,
                4 => r.scalar(wire, VARINT)?,
                _ => return None,
            }
        }
        Some(())
    }

    fn link(&mut self, r: &mut Reader) -> Option<()> {
        let mut seen = 0;
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1 | 2, LEN) => {
                    first_of(&mut seen, field)?;
                    self.out.heap += r.blob()?;
                }
                _ => return None,
            }
        }
        Some(())
    }

    fn key_value_and_unit(&mut self, r: &mut Reader) -> Option<()> {
        let mut seen = 0;
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1 | 3, _) => index(r, wire, self.n.string)?,
                (2, LEN) => {
                    first_of(&mut seen, field)?;
                    self.any_value(&mut Reader::new(r.bytes()?), 0)?;
                }
                _ => return None,
            }
        }
        Some(())
    }

    fn stack(&mut self, r: &mut Reader) -> Option<()> {
        let mut locations = 0;
        while let Some((field, wire)) = r.next_key()? {
            match field {
                1 => locations += indices(r, wire, self.n.location)?,
                _ => return None,
            }
        }
        self.out.heap += index_vec(locations);
        Some(())
    }

    /// One `KeyValue` of a repeated field (its caller counts them).
    fn key_value(&mut self, r: &mut Reader, wire: u8, depth: u32) -> Option<()> {
        if wire != LEN {
            return None;
        }
        let mut kv = Reader::new(r.bytes()?);
        let mut seen = 0;
        while let Some((field, wire)) = kv.next_key()? {
            match (field, wire) {
                (1, LEN) => {
                    first_of(&mut seen, field)?;
                    self.out.heap += kv.text()?;
                }
                (2, LEN) => {
                    first_of(&mut seen, field)?;
                    self.any_value(&mut Reader::new(kv.bytes()?), depth + 1)?;
                }
                (3, _) => index(&mut kv, wire, self.n.string)?,
                _ => return None,
            }
        }
        Some(())
    }

    fn any_value(&mut self, r: &mut Reader, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut set = false;
        while let Some((field, wire)) = r.next_key()? {
            // A oneof set twice keeps the last (or merges): not followed.
            if std::mem::replace(&mut set, true) {
                return None;
            }
            match (field, wire) {
                (1, LEN) => self.out.heap += r.text()?,
                (2 | 3, _) => r.scalar(wire, VARINT)?,
                (4, _) => r.scalar(wire, FIXED64)?,
                (5, LEN) => {
                    let mut a = Reader::new(r.bytes()?);
                    let mut values = 0;
                    while let Some((field, wire)) = a.next_key()? {
                        match (field, wire) {
                            (1, LEN) => {
                                self.any_value(&mut Reader::new(a.bytes()?), depth + 1)?;
                                values += 1;
                            }
                            _ => return None,
                        }
                    }
                    self.out.heap += pushed(values, size_of::<AnyValue>());
                }
                (6, LEN) => {
                    let mut l = Reader::new(r.bytes()?);
                    let mut values = 0;
                    while let Some((field, wire)) = l.next_key()? {
                        match field {
                            1 => self.key_value(&mut l, wire, depth + 1)?,
                            _ => return None,
                        }
                        values += 1;
                    }
                    self.out.heap += pushed(values, size_of::<KeyValue>());
                }
                (7, LEN) => self.out.heap += r.blob()?,
                (8, _) => index(r, wire, self.n.string)?,
                _ => return None,
            }
        }
        Some(())
    }

    fn resource_profiles(&mut self, b: &[u8]) -> Option<()> {
        let mut r = Reader::new(b);
        let (mut scopes, mut seen) = (0, 0);
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1, LEN) => {
                    first_of(&mut seen, field)?;
                    self.resource(&mut Reader::new(r.bytes()?))?;
                }
                (2, LEN) => {
                    self.scope_profiles(&mut Reader::new(r.bytes()?))?;
                    scopes += 1;
                }
                (3, LEN) => {
                    first_of(&mut seen, field)?;
                    self.out.heap += r.text()?;
                }
                _ => return None,
            }
        }
        self.out.heap += pushed(scopes, size_of::<ScopeProfiles>());
        Some(())
    }

    fn resource(&mut self, r: &mut Reader) -> Option<()> {
        let (mut attrs, mut entities) = (0, 0);
        while let Some((field, wire)) = r.next_key()? {
            match field {
                1 => {
                    self.key_value(r, wire, 0)?;
                    attrs += 1;
                }
                2 => r.scalar(wire, VARINT)?,
                3 if wire == LEN => {
                    let mut e = Reader::new(r.bytes()?);
                    let (mut ids, mut descriptions, mut seen) = (0, 0, 0);
                    while let Some((field, wire)) = e.next_key()? {
                        match (field, wire) {
                            (1 | 2, LEN) => {
                                first_of(&mut seen, field)?;
                                self.out.heap += e.text()?;
                            }
                            (3 | 4, LEN) => self.out.heap += e.text()?,
                            _ => return None,
                        }
                        ids += usize::from(field == 3);
                        descriptions += usize::from(field == 4);
                    }
                    self.out.heap += pushed(ids, size_of::<String>())
                        + pushed(descriptions, size_of::<String>());
                    entities += 1;
                }
                _ => return None,
            }
        }
        self.out.heap +=
            pushed(attrs, size_of::<KeyValue>()) + pushed(entities, size_of::<EntityRef>());
        Some(())
    }

    fn scope_profiles(&mut self, r: &mut Reader) -> Option<()> {
        let (mut profiles, mut seen) = (0, 0);
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1, LEN) => {
                    first_of(&mut seen, field)?;
                    let mut s = Reader::new(r.bytes()?);
                    let (mut attrs, mut scope_seen) = (0, 0);
                    while let Some((field, wire)) = s.next_key()? {
                        match (field, wire) {
                            (1 | 2, LEN) => {
                                first_of(&mut scope_seen, field)?;
                                self.out.heap += s.text()?;
                            }
                            (3, _) => {
                                self.key_value(&mut s, wire, 0)?;
                                attrs += 1;
                            }
                            (4, _) => s.scalar(wire, VARINT)?,
                            _ => return None,
                        }
                    }
                    self.out.heap += pushed(attrs, size_of::<KeyValue>());
                }
                (2, LEN) => {
                    self.profile(&mut Reader::new(r.bytes()?))?;
                    profiles += 1;
                }
                (3, LEN) => {
                    first_of(&mut seen, field)?;
                    self.out.heap += r.text()?;
                }
                _ => return None,
            }
        }
        self.out.profiles += profiles as u64;
        self.out.heap += pushed(profiles, size_of::<Profile>());
        Some(())
    }

    fn value_type(&mut self, r: &mut Reader) -> Option<()> {
        while let Some((field, wire)) = r.next_key()? {
            match field {
                1 | 2 => index(r, wire, self.n.string)?,
                _ => return None,
            }
        }
        Some(())
    }

    fn profile(&mut self, r: &mut Reader) -> Option<()> {
        // prost keeps the last of a repeated singular scalar.
        let (mut time, mut duration) = (0u64, 0u64);
        let (mut samples, mut observations, mut attrs, mut seen) = (0, 0, 0, 0);
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1 | 5, LEN) => self.value_type(&mut Reader::new(r.bytes()?))?,
                (2, LEN) => {
                    observations += self.sample(&mut Reader::new(r.bytes()?))?;
                    samples += 1;
                }
                (3, FIXED64) => time = r.fixed64()?,
                (4, VARINT) => duration = r.varint()?,
                (6 | 8, _) => r.scalar(wire, VARINT)?,
                (7 | 10, LEN) => {
                    first_of(&mut seen, field)?;
                    self.out.heap += r.blob()?;
                }
                (9, LEN) => {
                    first_of(&mut seen, field)?;
                    self.out.heap += r.text()?;
                }
                (11, _) => attrs += indices(r, wire, self.n.attribute)?,
                _ => return None,
            }
        }
        if time > MAX_UNIX_NANO || time.saturating_add(duration) > MAX_UNIX_NANO {
            return None;
        }
        self.out.samples += observations;
        self.out.heap += pushed(samples, size_of::<Sample>()) + index_vec(attrs);
        Some(())
    }

    /// One sample's observations, if it is valid.
    #[inline]
    fn sample(&mut self, r: &mut Reader) -> Option<u64> {
        let (mut attrs, mut values, mut stamps) = (0, 0, 0);
        while let Some((field, wire)) = r.next_key()? {
            match (field, wire) {
                (1, _) => index(r, wire, self.n.stack)?,
                (2, _) => attrs += indices(r, wire, self.n.attribute)?,
                (3, _) => index(r, wire, self.n.link)?,
                (4, LEN) => {
                    let mut p = Reader::new(r.bytes()?);
                    while !p.is_empty() {
                        p.varint()?;
                        values += 1;
                    }
                }
                (4, VARINT) => {
                    r.varint()?;
                    values += 1;
                }
                (5, LEN) => {
                    let p = r.bytes()?;
                    if p.len() % 8 != 0 {
                        return None;
                    }
                    for t in p.chunks_exact(8) {
                        if u64::from_le_bytes(t.try_into().ok()?) > MAX_UNIX_NANO {
                            return None;
                        }
                    }
                    stamps += p.len() / 8;
                }
                (5, FIXED64) => {
                    if r.fixed64()? > MAX_UNIX_NANO {
                        return None;
                    }
                    stamps += 1;
                }
                _ => return None,
            }
        }
        self.out.heap += index_vec(attrs) + pushed(values, 8) + pushed(stamps, 8);
        match (values, stamps) {
            (0, 0) => None,
            (v, t) if v != 0 && t != 0 && v != t => None,
            (v, t) => Some(v.max(t) as u64),
        }
    }
}
/// Valid UTF-8, as protobuf's `string` asks. Profile strings are mostly
/// ASCII, which `is_ascii` checks about 3x faster than `from_utf8` does
/// (7 against 22 µs for the 2,500 strings of a 1k-sample request).
fn is_utf8(s: &[u8]) -> bool {
    s.is_ascii() || std::str::from_utf8(s).is_ok()
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::check;
    use crate::synth;

    /// The request's bytes with one string of its dictionary replaced by
    /// `bytes` (of the same length, so every length prefix still holds).
    fn with_string(bytes: &[u8]) -> Vec<u8> {
        let mut data = synth::request(10, 5);
        let dict = data.dictionary.as_mut().unwrap();
        let marker = "x".repeat(bytes.len());
        dict.string_table.push(marker.clone());
        let mut wire = data.encode_to_vec();
        let at = wire
            .windows(marker.len())
            .rposition(|w| w == marker.as_bytes())
            .unwrap();
        wire[at..at + bytes.len()].copy_from_slice(bytes);
        wire
    }

    /// Entry 0 of a table holding an unpacked repeated index of 0 (found by
    /// the wire_check fuzzer) has one element: not the zero entry, so not
    /// clean, as validation says of it decoded. An empty packed list is.
    #[test]
    fn an_unpacked_repeated_zero_is_an_element() {
        // ProfilesData.dictionary { table { field varint 0 } }.
        let request = |table: u8, field: u8, wire: u8| {
            vec![0x12, 0x04, table << 3 | 2, 0x02, field << 3 | wire, 0x00]
        };
        for (table, field) in [(1, 5), (2, 4), (7, 1)] {
            let bytes = request(table, field, 0);
            assert!(check(&bytes).is_none(), "{bytes:x?}");
            let data = crate::proto::ProfilesData::decode(&bytes[..]).unwrap();
            assert!(!crate::findings(&data).is_valid(), "{bytes:x?}");
            let packed = request(table, field, 2);
            assert!(check(&packed).is_some(), "{packed:x?}");
        }
    }

    /// async-profiler 4.5 writes the zero link as 16 and 8 zero bytes:
    /// clean, and valid decoded, as pdata reads it; a byte of an id that is
    /// not zero makes it a real link, in neither.
    #[test]
    fn a_link_of_zero_ids_is_the_zero_link() {
        // ProfilesData.dictionary { link_table { trace_id, span_id } }.
        let request = |last: u8| {
            let mut b = vec![0x12, 30, 0x22, 28, 0x0a, 16];
            b.extend([0; 16]);
            b.extend([0x12, 8, 0, 0, 0, 0, 0, 0, 0, last]);
            b
        };
        let zero = request(0);
        assert!(check(&zero).is_some());
        let data = crate::proto::ProfilesData::decode(&zero[..]).unwrap();
        assert!(crate::findings(&data).is_valid());
        let real = request(1);
        assert!(check(&real).is_none());
        let data = crate::proto::ProfilesData::decode(&real[..]).unwrap();
        assert!(!crate::findings(&data).is_valid());
    }

    #[test]
    fn strings_must_be_utf8_ascii_or_not() {
        assert!(check(&with_string(b"plain_ascii_name")).is_some());
        assert!(check(&with_string("名前 ünïcode".as_bytes())).is_some());
        // A lone continuation byte, an overlong '/', a surrogate.
        for bad in [&b"name\x80"[..], b"\xc0\xaf", b"\xed\xa0\x80"] {
            assert!(check(&with_string(bad)).is_none(), "{bad:?}");
            assert!(crate::proto::ProfilesData::decode(&with_string(bad)[..]).is_err());
        }
    }
}
