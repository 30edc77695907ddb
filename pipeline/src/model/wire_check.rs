//! Validation on the wire: whether an `ExportProfilesServiceRequest` /
//! `ProfilesData` of the current revision is valid as it is, read off its
//! bytes without decoding, so that a batch nobody changes can be forwarded
//! as received without ever being materialized.
//!
//! The check is sound, not complete: when it answers [`Clean`], prost
//! decodes the bytes, [`super::findings`] finds nothing, and revision
//! detection reads them as the current revision (a differential property
//! test holds it to that). Anything it does not follow exactly (a field it
//! does not know, another wire type, a dictionary sent twice, an entry at
//! index 0 that has any bytes, a oneof set twice, deep nesting) answers
//! `None`, and the request takes the decoding path, which says what is
//! wrong or repairs it.

use super::bounds::MAX_UNIX_NANO;

/// What the walk learned of a clean request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clean {
    /// Observations, as [`super::ProfileBatch::sample_count`] counts them.
    pub samples: u64,
    pub profiles: u64,
}

/// [`Clean`] if the bytes are a valid request of the current revision as
/// they are; `None` if deciding takes decoding them.
pub fn check(bytes: &[u8]) -> Option<Clean> {
    let mut resources = Vec::new();
    let mut dictionary: Option<&[u8]> = None;
    let mut r = Reader::new(bytes);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, LEN) => resources.push(r.bytes()?),
            // prost merges a second dictionary into the first.
            (2, LEN) if dictionary.is_none() => dictionary = Some(r.bytes()?),
            _ => return None,
        }
    }
    let lens = match dictionary {
        Some(d) => dictionary_lens(d)?,
        None => Lens::default(),
    };
    if let Some(d) = dictionary {
        check_dictionary(d, &lens)?;
    }
    let mut out = Clean::default();
    for rp in resources {
        resource_profiles(rp, &lens, &mut out)?;
    }
    Some(out)
}

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

/// AnyValue nesting followed (prost allows 100).
const MAX_DEPTH: u32 = 16;

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self { b, at: 0 }
    }

    /// The next field's number and wire type; `Some(None)` at the end.
    #[inline]
    fn key(&mut self) -> Option<Option<(u32, u8)>> {
        if self.at == self.b.len() {
            return Some(None);
        }
        let key = self.varint()?;
        let field = u32::try_from(key >> 3).ok().filter(|&f| f > 0)?;
        Some(Some((field, (key & 7) as u8)))
    }

    /// prost's varint: at most ten bytes, the tenth at most 1.
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let byte = *self.b.get(self.at)?;
            self.at += 1;
            if i == 9 && byte > 1 {
                return None;
            }
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    #[inline]
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let end = self.at.checked_add(len)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn text(&mut self) -> Option<()> {
        std::str::from_utf8(self.bytes()?).ok().map(drop)
    }

    fn fixed64(&mut self) -> Option<u64> {
        let end = self.at.checked_add(8)?;
        let v = u64::from_le_bytes(self.b.get(self.at..end)?.try_into().ok()?);
        self.at = end;
        Some(v)
    }

    /// Skips a scalar of the wire type a field of the schema has.
    fn scalar(&mut self, wire: u8, want: u8) -> Option<()> {
        if wire != want {
            return None;
        }
        match wire {
            VARINT => self.varint().map(drop),
            I64 => self.fixed64().map(drop),
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

/// A repeated `int32` index field, packed or one element.
fn indices(r: &mut Reader, wire: u8, len: usize) -> Option<()> {
    match wire {
        LEN => {
            let mut p = Reader::new(r.bytes()?);
            while p.at < p.b.len() {
                index(&mut p, VARINT, len)?;
            }
            Some(())
        }
        _ => index(r, wire, len),
    }
}

/// Counts the table entries; every entry 0 must be the zero value, which
/// an encoder writes as no bytes.
fn dictionary_lens(d: &[u8]) -> Option<Lens> {
    let mut n = Lens::default();
    let mut r = Reader::new(d);
    while let Some((field, wire)) = r.key()? {
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
        if *count == 0 && !entry.is_empty() {
            return None;
        }
        *count += 1;
    }
    Some(n)
}

fn check_dictionary(d: &[u8], n: &Lens) -> Option<()> {
    let mut r = Reader::new(d);
    while let Some((field, _)) = r.key()? {
        let mut e = Reader::new(r.bytes()?);
        match field {
            1 => mapping(&mut e, n)?,
            2 => location(&mut e, n)?,
            3 => function(&mut e, n)?,
            4 => link(&mut e)?,
            5 => std::str::from_utf8(e.b).ok().map(drop)?,
            6 => key_value_and_unit(&mut e, n)?,
            _ => stack(&mut e, n)?,
        }
    }
    Some(())
}

fn mapping(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match field {
            1..=3 => r.scalar(wire, VARINT)?,
            4 => index(r, wire, n.string)?,
            5 => indices(r, wire, n.attribute)?,
            _ => return None,
        }
    }
    Some(())
}

fn location(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, _) => index(r, wire, n.mapping)?,
            (2, _) => r.scalar(wire, VARINT)?,
            (3, LEN) => {
                let mut line = Reader::new(r.bytes()?);
                while let Some((field, wire)) = line.key()? {
                    match field {
                        1 => index(&mut line, wire, n.function)?,
                        2 | 3 => line.scalar(wire, VARINT)?,
                        _ => return None,
                    }
                }
            }
            (4, _) => indices(r, wire, n.attribute)?,
            _ => return None,
        }
    }
    Some(())
}

fn function(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match field {
            1..=3 => index(r, wire, n.string)?,
            4 => r.scalar(wire, VARINT)?,
            _ => return None,
        }
    }
    Some(())
}

fn link(r: &mut Reader) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1 | 2, LEN) => r.bytes().map(drop)?,
            _ => return None,
        }
    }
    Some(())
}

fn key_value_and_unit(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1 | 3, _) => index(r, wire, n.string)?,
            (2, LEN) => any_value(&mut Reader::new(r.bytes()?), n, 0)?,
            _ => return None,
        }
    }
    Some(())
}

fn stack(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => indices(r, wire, n.location)?,
            _ => return None,
        }
    }
    Some(())
}

fn key_values_field(r: &mut Reader, wire: u8, n: &Lens, depth: u32) -> Option<()> {
    if wire != LEN {
        return None;
    }
    let mut kv = Reader::new(r.bytes()?);
    while let Some((field, wire)) = kv.key()? {
        match (field, wire) {
            (1, LEN) => kv.text()?,
            (2, LEN) => any_value(&mut Reader::new(kv.bytes()?), n, depth + 1)?,
            (3, _) => index(&mut kv, wire, n.string)?,
            _ => return None,
        }
    }
    Some(())
}

fn any_value(r: &mut Reader, n: &Lens, depth: u32) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut set = false;
    while let Some((field, wire)) = r.key()? {
        // A oneof set twice keeps the last (or merges): not followed.
        if std::mem::replace(&mut set, true) {
            return None;
        }
        match (field, wire) {
            (1, LEN) => r.text()?,
            (2 | 3, _) => r.scalar(wire, VARINT)?,
            (4, _) => r.scalar(wire, I64)?,
            (5, LEN) => {
                let mut a = Reader::new(r.bytes()?);
                while let Some((field, wire)) = a.key()? {
                    match (field, wire) {
                        (1, LEN) => any_value(&mut Reader::new(a.bytes()?), n, depth + 1)?,
                        _ => return None,
                    }
                }
            }
            (6, LEN) => {
                let mut l = Reader::new(r.bytes()?);
                while let Some((field, wire)) = l.key()? {
                    match field {
                        1 => key_values_field(&mut l, wire, n, depth + 1)?,
                        _ => return None,
                    }
                }
            }
            (7, LEN) => r.bytes().map(drop)?,
            (8, _) => index(r, wire, n.string)?,
            _ => return None,
        }
    }
    Some(())
}

fn resource_profiles(b: &[u8], n: &Lens, out: &mut Clean) -> Option<()> {
    let mut r = Reader::new(b);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, LEN) => resource(&mut Reader::new(r.bytes()?), n)?,
            (2, LEN) => scope_profiles(&mut Reader::new(r.bytes()?), n, out)?,
            (3, LEN) => r.text()?,
            _ => return None,
        }
    }
    Some(())
}

fn resource(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => key_values_field(r, wire, n, 0)?,
            2 => r.scalar(wire, VARINT)?,
            3 if wire == LEN => {
                let mut e = Reader::new(r.bytes()?);
                while let Some((field, wire)) = e.key()? {
                    match (field, wire) {
                        (1..=4, LEN) => e.text()?,
                        _ => return None,
                    }
                }
            }
            _ => return None,
        }
    }
    Some(())
}

fn scope_profiles(r: &mut Reader, n: &Lens, out: &mut Clean) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, LEN) => {
                let mut s = Reader::new(r.bytes()?);
                while let Some((field, wire)) = s.key()? {
                    match (field, wire) {
                        (1 | 2, LEN) => s.text()?,
                        (3, _) => key_values_field(&mut s, wire, n, 0)?,
                        (4, _) => s.scalar(wire, VARINT)?,
                        _ => return None,
                    }
                }
            }
            (2, LEN) => {
                profile(&mut Reader::new(r.bytes()?), n, out)?;
                out.profiles += 1;
            }
            (3, LEN) => r.text()?,
            _ => return None,
        }
    }
    Some(())
}

fn value_type(r: &mut Reader, n: &Lens) -> Option<()> {
    while let Some((field, wire)) = r.key()? {
        match field {
            1 | 2 => index(r, wire, n.string)?,
            _ => return None,
        }
    }
    Some(())
}

fn profile(r: &mut Reader, n: &Lens, out: &mut Clean) -> Option<()> {
    // prost keeps the last of a repeated singular scalar.
    let (mut time, mut duration) = (0u64, 0u64);
    let mut samples = 0u64;
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1 | 5, LEN) => value_type(&mut Reader::new(r.bytes()?), n)?,
            (2, LEN) => samples += sample(&mut Reader::new(r.bytes()?), n)?,
            (3, I64) => time = r.fixed64()?,
            (4, VARINT) => duration = r.varint()?,
            (6 | 8, _) => r.scalar(wire, VARINT)?,
            (7 | 10, LEN) => r.bytes().map(drop)?,
            (9, LEN) => r.text()?,
            (11, _) => indices(r, wire, n.attribute)?,
            _ => return None,
        }
    }
    if time > MAX_UNIX_NANO || time.saturating_add(duration) > MAX_UNIX_NANO {
        return None;
    }
    out.samples += samples;
    Some(())
}

/// One sample's observations, if it is valid.
#[inline]
fn sample(r: &mut Reader, n: &Lens) -> Option<u64> {
    let (mut values, mut stamps) = (0usize, 0usize);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, _) => index(r, wire, n.stack)?,
            (2, _) => indices(r, wire, n.attribute)?,
            (3, _) => index(r, wire, n.link)?,
            (4, LEN) => {
                let mut p = Reader::new(r.bytes()?);
                while p.at < p.b.len() {
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
            (5, I64) => {
                if r.fixed64()? > MAX_UNIX_NANO {
                    return None;
                }
                stamps += 1;
            }
            _ => return None,
        }
    }
    match (values, stamps) {
        (0, 0) => None,
        (v, t) if v != 0 && t != 0 && v != t => None,
        (v, t) => Some(v.max(t) as u64),
    }
}
