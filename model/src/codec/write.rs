//! Writing protobuf's wire format into a `Vec<u8>`, and measuring it.

pub(crate) const LEN: u8 = 2;

/// Bytes of `v` as a varint (prost's `encoded_len_varint`).
#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    ((((v | 1).leading_zeros() ^ 63) * 9 + 73) / 64) as usize
}

#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Every field of these messages is numbered below 16: a key is one byte.
#[inline]
pub(crate) fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    out.push((field << 3) as u8 | wire);
}

/// A length-delimited field of `n` bytes, key and length included.
#[inline]
pub(crate) fn field_len(n: usize) -> usize {
    1 + varint_len(n as u64) + n
}

/// An int32 varint field, left out at 0 (negative values take ten bytes,
/// sign-extended, as prost writes them).
#[inline]
pub(crate) fn int32(out: &mut Vec<u8>, field: u32, v: i32) {
    if v != 0 {
        key(out, field, 0);
        varint(out, v as u64);
    }
}

#[inline]
pub(crate) fn int32_len(v: i32) -> usize {
    if v == 0 {
        0
    } else {
        1 + varint_len(v as u64)
    }
}

#[inline]
pub(crate) fn uint64(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, 0);
        varint(out, v);
    }
}

#[inline]
pub(crate) fn uint64_len(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        1 + varint_len(v)
    }
}

/// A packed repeated varint field, left out when empty.
#[inline]
pub(crate) fn packed<T: Copy>(out: &mut Vec<u8>, field: u32, vs: &[T], wide: impl Fn(T) -> u64) {
    if vs.is_empty() {
        return;
    }
    key(out, field, LEN);
    varint(out, packed_body(vs, &wide) as u64);
    for &v in vs {
        varint(out, wide(v));
    }
}

#[inline]
fn packed_body<T: Copy>(vs: &[T], wide: impl Fn(T) -> u64) -> usize {
    vs.iter().map(|&v| varint_len(wide(v))).sum()
}

#[inline]
pub(crate) fn packed_len<T: Copy>(vs: &[T], wide: impl Fn(T) -> u64) -> usize {
    if vs.is_empty() {
        0
    } else {
        field_len(packed_body(vs, wide))
    }
}

pub(crate) fn packed_fixed64(out: &mut Vec<u8>, field: u32, vs: &[u64]) {
    if vs.is_empty() {
        return;
    }
    key(out, field, LEN);
    varint(out, vs.len() as u64 * 8);
    for v in vs {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

pub(crate) fn packed_fixed64_len(vs: &[u64]) -> usize {
    if vs.is_empty() {
        0
    } else {
        field_len(vs.len() * 8)
    }
}

/// A bytes or string field, left out when empty.
pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    if !b.is_empty() {
        bytes_always(out, field, b);
    }
}

/// A bytes field written even when empty (an element of a repeated one).
pub(crate) fn bytes_always(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub(crate) fn bytes_len(b: &[u8]) -> usize {
    if b.is_empty() {
        0
    } else {
        field_len(b.len())
    }
}

/// A small message field whose length is not known before it is written:
/// one byte is set aside for it, and the body moved on in the rare case
/// it needs more.
#[inline]
pub(crate) fn small(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, LEN);
    let at = out.len();
    out.push(0);
    body(out);
    let n = out.len() - at - 1;
    if n < 0x80 {
        out[at] = n as u8;
    } else {
        let mut prefix = Vec::with_capacity(10);
        varint(&mut prefix, n as u64);
        out.splice(at..at + 1, prefix);
    }
}
