//! Combining samples with one identity, as the proto recommends ("samples
//! having the same identity SHOULD be combined by inserting timestamps and
//! values to the data arrays").
//!
//! Unlike `model::dictionary::merge_samples`, which sums aggregated values
//! into one, this appends in every shape, so the number of observations
//! (`ProfileBatch::sample_count`) is unchanged and nothing has to be
//! counted as dropped.

use hashbrown::HashTable;

use profcol_pipeline::model::dictionary::{samples_identity, SampleShape};
use profcol_pipeline::proto::{Profile, Sample};

/// Appends the values and timestamps of each sample to the first earlier
/// sample with the same identity (stack, attribute set, link) and shape;
/// survivors keep their order. Samples with neither values nor timestamps
/// are left alone. Compares indices: run a dedup first for identity by value.
/// Returns how many samples were folded into others.
///
/// Two passes: the first finds where each sample goes and how many
/// observations each survivor receives, so the second grows every survivor
/// once instead of reallocating as it appends.
pub fn merge_observations(profile: &mut Profile) -> usize {
    const KEEP: u32 = u32::MAX;
    let samples = &mut profile.samples;
    let n = samples.len();
    assert!(n < KEEP as usize, "over 2^32 samples");
    let hasher = ahash::RandomState::new();
    let key = |s: &Sample| hasher.hash_one((samples_identity(s), SampleShape::of(s)));
    let mut firsts: HashTable<u32> = HashTable::with_capacity(n);
    // Per sample: the survivor it is folded into, or KEEP. Allocated at the
    // first merge, like `incoming` (observations each survivor receives).
    let mut into: Vec<u32> = Vec::new();
    let mut incoming: Vec<u32> = Vec::new();
    let mut merged = 0;
    for (i, s) in samples.iter().enumerate() {
        if s.values.is_empty() && s.timestamps_unix_nano.is_empty() {
            continue;
        }
        let (h, id, shape) = (key(s), samples_identity(s), SampleShape::of(s));
        let found = firsts.find(h, |&j| {
            let o = &samples[j as usize];
            SampleShape::of(o) == shape && samples_identity(o) == id
        });
        match found.copied() {
            Some(j) => {
                if into.is_empty() {
                    into = vec![KEEP; n];
                    incoming = vec![0; n];
                }
                into[i] = j;
                // A capacity hint: saturating is harmless.
                let obs = s.values.len().max(s.timestamps_unix_nano.len());
                let slot = &mut incoming[j as usize];
                *slot = slot.saturating_add(u32::try_from(obs).unwrap_or(u32::MAX));
                merged += 1;
            }
            None => {
                firsts.insert_unique(h, i as u32, |&j| key(&samples[j as usize]));
            }
        }
    }
    if merged == 0 {
        return 0;
    }
    drop(firsts);
    for (s, &extra) in samples.iter_mut().zip(&incoming) {
        if extra > 0 {
            if !s.values.is_empty() {
                s.values.reserve_exact(extra as usize);
            }
            if !s.timestamps_unix_nano.is_empty() {
                s.timestamps_unix_nano.reserve_exact(extra as usize);
            }
        }
    }
    for (i, &j) in into.iter().enumerate() {
        if j != KEEP {
            let (head, tail) = samples.split_at_mut(i);
            let (to, from) = (&mut head[j as usize], &mut tail[0]);
            to.values.append(&mut from.values);
            to.timestamps_unix_nano
                .append(&mut from.timestamps_unix_nano);
        }
    }
    let mut k = 0;
    samples.retain(|_| {
        k += 1;
        into[k - 1] == KEEP
    });
    merged
}
