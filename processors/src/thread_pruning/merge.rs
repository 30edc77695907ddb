//! Combining samples that became identical once thread attributes were
//! dropped or renamed.
//!
//! As the proto asks ("Samples having the same identity SHOULD be combined by
//! inserting timestamps and values to the data arrays"), the data points of
//! the later sample are appended to the first one, in every shape. Unlike
//! `model::dictionary::merge_samples`, aggregated values are appended rather
//! than summed: every consumer sums a sample's values, and the number of
//! observations (the unit every profcol metric counts) stays the same, so a
//! merge never looks like a loss in the accounting.

use hashbrown::HashTable;

use profcol_pipeline::model::dictionary::{samples_identity, SampleShape};
use profcol_pipeline::proto::{Profile, Sample};

/// A sample's identity and shape, packed so that the lookup compares keys
/// held in the table instead of following each sample's attribute vector.
/// Attribute sets of up to two entries (a thread id and a name) are held
/// exactly, sorted; larger ones as an order-free hash, confirmed on the
/// samples themselves.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    stack: i32,
    link: i32,
    attrs: [u32; 2],
    /// Shape in bits 0-1, attribute count (saturated at 3) in bits 2-3.
    meta: u32,
}

impl Key {
    pub fn of(s: &Sample) -> Self {
        let a = &s.attribute_indices;
        let attrs = match a.len() {
            0 => [0, 0],
            1 => [a[0] as u32, 0],
            2 => [a[0].min(a[1]) as u32, a[0].max(a[1]) as u32],
            _ => {
                let set = a
                    .iter()
                    .fold(0u64, |acc, &x| acc.wrapping_add(mix(x as u32 as u64)));
                [set as u32, (set >> 32) as u32]
            }
        };
        let shape = match SampleShape::of(s) {
            SampleShape::Aggregated => 0,
            SampleShape::Timestamps => 1,
            SampleShape::TimedValues => 2,
        };
        Self {
            stack: s.stack_index,
            link: s.link_index,
            attrs,
            meta: shape | (a.len().min(3) as u32) << 2,
        }
    }

    /// Key equality is identity when the attribute set is held inline.
    fn exact(&self) -> bool {
        self.meta >> 2 <= 2
    }

    fn hash(&self) -> u64 {
        let a = (self.stack as u32 as u64) | ((self.link as u32 as u64) << 32);
        let b = (self.attrs[0] as u64) | ((self.attrs[1] as u64) << 32);
        mix(mix(a ^ self.meta as u64) ^ b)
    }
}

/// splitmix64's finalizer: every input bit moves the high bits the table uses.
#[inline]
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Buffers reused from batch to batch, so a steady stream allocates nothing
/// here.
#[derive(Default)]
pub(crate) struct Merger {
    /// [`Key::of`] each sample of the profile, pushed by the caller while the
    /// sample is in cache.
    pub keys: Vec<Key>,
    /// first[k]: the first sample of k's group.
    first: Vec<u32>,
    /// extra[f]: the data points the rest of its group adds to sample f.
    extra: Vec<u32>,
    table: HashTable<(Key, u32)>,
}

impl Merger {
    /// Folds samples of `profile` with the same identity and shape into the
    /// first of them, which keeps its position; `self.keys` must hold one key
    /// per sample. Returns how many samples were folded.
    ///
    /// The first pass finds each sample's group without touching the samples
    /// (and stops there when every group has one sample); the second grows
    /// each group's first sample once, to its final size, appends the others
    /// to it and compacts in place.
    pub fn merge(&mut self, profile: &mut Profile) -> usize {
        let samples = &mut profile.samples;
        let n = samples.len();
        assert_eq!(self.keys.len(), n, "one key per sample");
        let (keys, first, extra, table) = (
            &self.keys,
            &mut self.first,
            &mut self.extra,
            &mut self.table,
        );
        first.clear();
        extra.clear();
        extra.resize(n, 0);
        table.clear();
        table.reserve(n, |(k, _)| k.hash());
        let mut merged = 0;
        for (k, key) in keys.iter().enumerate() {
            let h = key.hash();
            let same = |(other, i): &(Key, u32)| {
                other == key
                    && (key.exact()
                        || samples_identity(&samples[*i as usize]) == samples_identity(&samples[k]))
            };
            let k32 = u32::try_from(k).expect("over 2^32 samples in one profile");
            match table.find(h, same) {
                Some(&(_, f)) => {
                    first.push(f);
                    let s = &samples[k];
                    extra[f as usize] += s.values.len().max(s.timestamps_unix_nano.len()) as u32;
                    merged += 1;
                }
                None => {
                    first.push(k32);
                    table.insert_unique(h, (*key, k32), |(k, _)| k.hash());
                }
            }
        }
        self.keys.clear();
        if merged == 0 {
            return 0;
        }
        for k in 0..n {
            let f = first[k] as usize;
            if f == k {
                // Same shape throughout the group: only the non-empty
                // arrays grow, each by the group's other points.
                let s = &mut samples[k];
                let more = extra[k] as usize;
                if !s.values.is_empty() {
                    s.values.reserve_exact(more);
                }
                if !s.timestamps_unix_nano.is_empty() {
                    s.timestamps_unix_nano.reserve_exact(more);
                }
            } else {
                let (head, tail) = samples.split_at_mut(k);
                let (into, s) = (&mut head[f], std::mem::take(&mut tail[0]));
                into.values.extend_from_slice(&s.values);
                into.timestamps_unix_nano
                    .extend_from_slice(&s.timestamps_unix_nano);
            }
        }
        let mut k = 0;
        samples.retain(|_| {
            k += 1;
            first[k - 1] as usize == k - 1
        });
        merged
    }
}
