//! Hashing for dictionary values. The generated prost types derive neither
//! `Hash` nor `Eq` (an `AnyValue` may hold a float), so hashing is spelled out
//! here; floats hash by their bits, which agrees with `PartialEq` for every
//! value except NaN (a NaN attribute is simply stored again).

use std::hash::{Hash, Hasher};

use crate::proto::{
    any_value::Value, AnyValue, Function, KeyValue, KeyValueAndUnit, Line, Link, Location, Mapping,
    Stack,
};

/// splitmix64's finalizer: every input bit moves every output bit (the
/// high ones that hash tables use included).
#[inline]
pub fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An order-free hash of a multiset of indices (an attribute set): the sum
/// of the indices, each mixed. No sorting.
#[inline]
pub fn multiset_hash(indices: &[i32]) -> u64 {
    indices
        .iter()
        .fold(0u64, |acc, &a| acc.wrapping_add(mix64(a as u32 as u64)))
}

pub trait DictHash {
    fn dict_hash<H: Hasher>(&self, h: &mut H);
}

impl DictHash for str {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        self.hash(h)
    }
}

impl DictHash for String {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl DictHash for [i32] {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        self.hash(h)
    }
}

impl DictHash for Stack {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        self.location_indices.as_slice().dict_hash(h)
    }
}

impl DictHash for Function {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (
            self.name_strindex,
            self.system_name_strindex,
            self.filename_strindex,
            self.start_line,
        )
            .hash(h)
    }
}

impl DictHash for Mapping {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (
            self.memory_start,
            self.memory_limit,
            self.file_offset,
            self.filename_strindex,
        )
            .hash(h);
        self.attribute_indices.hash(h);
    }
}

impl DictHash for Line {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (self.function_index, self.line, self.column).hash(h)
    }
}

impl DictHash for Location {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (self.mapping_index, self.address).hash(h);
        h.write_usize(self.lines.len());
        for l in &self.lines {
            l.dict_hash(h);
        }
        self.attribute_indices.hash(h);
    }
}

impl DictHash for Link {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (&self.trace_id, &self.span_id).hash(h)
    }
}

impl DictHash for KeyValueAndUnit {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (self.key_strindex, self.unit_strindex).hash(h);
        self.value.dict_hash(h);
    }
}

impl DictHash for KeyValue {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        (&self.key, self.key_strindex).hash(h);
        self.value.dict_hash(h);
    }
}

impl<T: DictHash> DictHash for Option<T> {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        match self {
            None => h.write_u8(0),
            Some(v) => {
                h.write_u8(1);
                v.dict_hash(h)
            }
        }
    }
}

impl DictHash for AnyValue {
    fn dict_hash<H: Hasher>(&self, h: &mut H) {
        match &self.value {
            None => h.write_u8(0),
            Some(Value::StringValue(s)) => (1u8, s).hash(h),
            Some(Value::BoolValue(b)) => (2u8, b).hash(h),
            Some(Value::IntValue(i)) => (3u8, i).hash(h),
            Some(Value::DoubleValue(d)) => (4u8, d.to_bits()).hash(h),
            Some(Value::ArrayValue(a)) => {
                (5u8, a.values.len()).hash(h);
                for v in &a.values {
                    v.dict_hash(h);
                }
            }
            Some(Value::KvlistValue(kv)) => {
                (6u8, kv.values.len()).hash(h);
                for v in &kv.values {
                    v.dict_hash(h);
                }
            }
            Some(Value::BytesValue(b)) => (7u8, b).hash(h),
            Some(Value::StringValueStrindex(i)) => (8u8, i).hash(h),
        }
    }
}
