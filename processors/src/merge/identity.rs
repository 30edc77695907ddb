//! A sample's identity and shape apart from its stack, numbered exactly
//! ([`RestCode`], [`Singles`]) or hashed ([`Key`]), for grouping.

use profcol_model::dictionary::{mix64, multiset_hash, SampleShape};
use profcol_model::proto::Sample;

use super::{Tables, DROP, NONE};

/// Everything of a sample's identity and shape but its stack, packed so that
/// lookups compare keys held in the tables instead of following each
/// sample's attribute vector. Attribute sets of up to two entries (a thread
/// id and a name) are held exactly, sorted; larger ones as an order-free
/// hash, confirmed on the samples themselves.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Rest {
    pub(super) link: i32,
    attrs: [u32; 2],
    /// Shape in bits 0-1, attribute count (saturated at 3) in bits 2-3.
    meta: u32,
}

#[inline]
fn shape_bits(s: &Sample) -> u32 {
    match SampleShape::of(s) {
        SampleShape::Aggregated => 0,
        SampleShape::Timestamps => 1,
        SampleShape::TimedValues => 2,
    }
}

impl Rest {
    /// The rest of a sample whose attributes are `attrs`.
    fn of(s: &Sample, attrs: &[i32]) -> Self {
        let pair = match attrs.len() {
            0 => [0, 0],
            1 => [attrs[0] as u32, 0],
            2 => [attrs[0].min(attrs[1]) as u32, attrs[0].max(attrs[1]) as u32],
            _ => {
                let set = multiset_hash(attrs);
                [set as u32, (set >> 32) as u32]
            }
        };
        Self {
            link: s.link_index,
            attrs: pair,
            meta: shape_bits(s) | (attrs.len().min(3) as u32) << 2,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) stack: i32,
    pub(super) rest: Rest,
}

impl Key {
    #[inline]
    pub(super) fn of(s: &Sample) -> Self {
        Self {
            stack: s.stack_index,
            rest: Rest::of(s, &s.attribute_indices),
        }
    }

    /// Key equality is identity when the attribute set is held inline.
    #[inline]
    pub(super) fn exact(&self) -> bool {
        self.rest.meta >> 2 <= 2
    }

    #[inline]
    pub(super) fn hash(&self) -> u64 {
        let r = &self.rest;
        let a = (self.stack as u32 as u64) | ((r.link as u32 as u64) << 32);
        let b = (r.attrs[0] as u64) | ((r.attrs[1] as u64) << 32);
        mix64(mix64(a ^ r.meta as u64) ^ b)
    }
}

/// Numbers [`Rest`]s exactly, without hashing, when the tables are small
/// enough for every combination to fit a `u32`: the common case, where
/// samples carry at most a thread id and a name.
#[derive(Clone, Copy)]
pub(super) struct RestCode {
    attributes: u64,
    links: u64,
    /// What a step of the shape adds to a number (the shape is its most
    /// significant part).
    per_shape: u32,
}

impl RestCode {
    pub(super) fn new(t: Tables) -> Option<Self> {
        let (a, l) = (t.attributes as u64 + 1, t.links as u64);
        // link, two attributes, 4 bits of meta.
        let combos = l.checked_mul(a)?.checked_mul(a)?.checked_mul(16)?;
        (combos < u64::from(NONE)).then_some(Self {
            attributes: a,
            links: l,
            per_shape: (a * a * l) as u32,
        })
    }

    /// The number of `r`, or `None` when it does not identify the sample's
    /// rest (more than two attributes, or an index outside its table).
    #[inline]
    pub(super) fn of(&self, r: &Rest) -> Option<u32> {
        let link = u64::try_from(r.link).ok().filter(|&l| l < self.links)?;
        if r.meta >> 2 > 2 {
            return None;
        }
        let [a0, a1] = r.attrs;
        let (a0, a1) = (u64::from(a0) + 1, u64::from(a1) + 1);
        if a0 >= self.attributes || a1 >= self.attributes {
            // Also catches negative indices, which became large as u32.
            return None;
        }
        let code =
            ((u64::from(r.meta) * self.attributes + a1) * self.attributes + a0) * self.links + link;
        Some(code as u32)
    }
}

/// The numbers of the rests of samples with a single attribute, by the
/// attribute's index (before rewriting), for shape 0 and link 0: a sample's
/// is then `singles[a] + shape * per_shape + link`, as [`RestCode::of`]
/// numbers it. [`NONE`] where the attribute cannot be coded.
#[derive(Default)]
pub(super) struct Singles(Vec<u32>);

impl Singles {
    /// Fills the table for the indices below `len` (none past it can be
    /// coded), unless a profile of `n` samples would not pay for that: then
    /// it stays empty and every sample takes the general way.
    pub(super) fn fill(&mut self, c: RestCode, map: &[u32], len: usize, n: usize) {
        self.0.clear();
        if len > 4 * n + 1024 {
            return;
        }
        let len = i32::try_from(len).unwrap_or(i32::MAX);
        self.0.extend((0..len).map(|a| {
            let m = mapped(map, a);
            let rest = Rest {
                link: 0,
                attrs: [m.unwrap_or(0) as u32, 0],
                meta: u32::from(m.is_some()) << 2,
            };
            c.of(&rest).unwrap_or(NONE)
        }));
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of the rest of `s`, whose only attribute is `a`, or `None`
    /// when it cannot be coded.
    #[inline]
    pub(super) fn of(&self, c: RestCode, s: &Sample, a: i32) -> Option<u32> {
        let base = *self.0.get(usize::try_from(a).ok()?)?;
        let link = u32::try_from(s.link_index)
            .ok()
            .filter(|&l| u64::from(l) < c.links)?;
        (base != NONE).then(|| base + shape_bits(s) * c.per_shape + link)
    }
}

/// What attribute index `a` becomes: `map[a]` for the indices `map` covers
/// (`None` for [`DROP`]), others (even invalid ones) unchanged.
#[inline]
pub(super) fn mapped(map: &[u32], a: i32) -> Option<i32> {
    match usize::try_from(a).ok().and_then(|i| map.get(i)) {
        Some(&DROP) => None,
        Some(&m) => Some(m as i32),
        None => Some(a),
    }
}

/// The rewritten [`Rest`] of `s` when it has at most two attributes once
/// rewritten (else `None`), without touching the sample.
#[inline]
pub(super) fn rest_of(s: &Sample, map: &[u32], buf: &mut Vec<i32>) -> Option<Rest> {
    let a = &s.attribute_indices;
    let (m0, m1) = match a.len() {
        0 => (None, None),
        1 => (mapped(map, a[0]), None),
        2 => (mapped(map, a[0]), mapped(map, a[1])),
        _ => {
            buf.clear();
            buf.extend(a.iter().filter_map(|&x| mapped(map, x)));
            match buf[..] {
                [] => (None, None),
                [x] => (Some(x), None),
                [x, y] => (Some(x), Some(y)),
                _ => return None,
            }
        }
    };
    // As `Rest::of` on the rewritten list.
    let (count, pair) = match (m0, m1) {
        (None, None) => (0, [0, 0]),
        (Some(x), None) | (None, Some(x)) => (1, [x as u32, 0]),
        (Some(x), Some(y)) => (2, [x.min(y) as u32, x.max(y) as u32]),
    };
    Some(Rest {
        link: s.link_index,
        attrs: pair,
        meta: shape_bits(s) | count << 2,
    })
}
