//! The Collector's `probabilistic_sampler` decision in `hash_seed` mode,
//! byte for byte (opentelemetry-collector-contrib,
//! `processor/probabilisticsamplerprocessor`: `fnvhasher.go` and
//! `sampler_mode.go`):
//!
//! - `computeHash(b, seed)`: FNV-1a 32 over the seed's 4 bytes, least
//!   significant first (`i32tob`), then `b`;
//! - 2^14 buckets: `bucket = hash & 0x3FFF`;
//! - `scaledSamplerate = uint32(pct * percentageScaleFactor)` with `pct` a
//!   float32 capped at 100 and `percentageScaleFactor = 0x4000 / 100.0`, so
//!   the product is taken in float32 and truncated;
//! - kept iff `bucket < scaledSamplerate`; 0 % (or a rate that truncates to
//!   0) keeps nothing, 100 % keeps everything.
//!
//! (The Collector phrases the comparison as a threshold on a 56-bit
//! randomness whose top 14 bits are `0x3FFF - bucket`, against
//! `(0x4000 - scaledSamplerate) << 42`; that holds exactly when
//! `bucket < scaledSamplerate`.)

const NUM_HASH_BUCKETS: u32 = 0x4000;
const BIT_MASK_HASH_BUCKETS: u32 = NUM_HASH_BUCKETS - 1;
/// `numHashBuckets / 100.0`, an untyped Go constant used as a float32.
const PERCENTAGE_SCALE_FACTOR: f32 = 163.84;

const FNV_OFFSET_BASIS: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a, 32 bits, continuing from `hash`.
#[inline]
fn fnv1a(mut hash: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// The Collector's `computeHash(b, seed)`.
pub fn compute_hash(bytes: &[u8], seed: u32) -> u32 {
    fnv1a(fnv1a(FNV_OFFSET_BASIS, &seed.to_le_bytes()), bytes)
}

/// A `hash_seed` sampler: the same percentage and seed decide like the
/// Collector and like every other profcol instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashSampler {
    seed: u32,
    /// Buckets kept, out of 2^14.
    scaled: u32,
}

impl HashSampler {
    /// `percentage` is in [0, 100] (config validation); above 100 counts
    /// as 100, as in the Collector.
    pub fn new(percentage: f32, seed: u32) -> Self {
        let pct = percentage.clamp(0.0, 100.0);
        Self {
            seed,
            // `as` truncates toward zero like Go's uint32(float32).
            scaled: (pct * PERCENTAGE_SCALE_FACTOR) as u32,
        }
    }

    /// The hash buckets kept, out of 16384.
    pub fn scaled_rate(&self) -> u32 {
        self.scaled
    }

    pub fn keeps_nothing(&self) -> bool {
        self.scaled == 0
    }

    pub fn keeps_everything(&self) -> bool {
        self.scaled >= NUM_HASH_BUCKETS
    }

    /// Whether the item identified by `bytes` (a trace id, a session id) is
    /// kept.
    #[inline]
    pub fn keeps(&self, bytes: &[u8]) -> bool {
        if self.keeps_nothing() {
            return false;
        }
        (compute_hash(bytes, self.seed) & BIT_MASK_HASH_BUCKETS) < self.scaled
    }
}
