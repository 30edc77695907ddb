//! A consistent-hash ring, as the Collector's `loadbalancingexporter` has
//! one (Karger et al.): every endpoint owns [`POINTS_PER_ENDPOINT`] points
//! on a circle and a key belongs to the first point at or after its hash.
//! When an endpoint joins or leaves, only the keys of the arcs it gains or
//! loses change owner: about 1/N of them.
//!
//! Unlike the Collector's ring (CRC-32 reduced to 36,000 positions, where
//! colliding points are skipped), points here span the whole `u64` circle,
//! so collisions are negligible. The hash is seedless and fixed, so every
//! collector in front of the same backends routes a key the same way.

/// Points per endpoint: the Collector's weight. More points even out the
/// share of each endpoint (about ±10% at 100) at the cost of a larger ring.
pub const POINTS_PER_ENDPOINT: u32 = 100;

/// An immutable ring over a set of endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashRing {
    /// Sorted, without duplicates: the index is the endpoint's number.
    endpoints: Vec<String>,
    /// (position, endpoint number), sorted by position.
    points: Vec<(u64, u32)>,
}

impl HashRing {
    /// The ring of `endpoints` (any order; duplicates count once).
    pub fn new(endpoints: impl IntoIterator<Item = String>) -> Self {
        let mut endpoints: Vec<String> = endpoints.into_iter().collect();
        endpoints.sort_unstable();
        endpoints.dedup();
        let mut points = Vec::with_capacity(endpoints.len() * POINTS_PER_ENDPOINT as usize);
        for (n, e) in endpoints.iter().enumerate() {
            let base = hash_bytes(e.as_bytes());
            for i in 0..POINTS_PER_ENDPOINT {
                points.push((point(base, i), n as u32));
            }
        }
        // Ties (astronomically rare) break by endpoint name, so every
        // collector builds the same ring from the same set.
        points.sort_unstable();
        Self { endpoints, points }
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The number (index into [`Self::endpoints`]) of the endpoint that owns
    /// `key` (a [`hash_bytes`] value); `None` on an empty ring.
    #[inline]
    pub fn owner(&self, key: u64) -> Option<u32> {
        if self.points.is_empty() {
            return None;
        }
        let at = self.points.partition_point(|&(p, _)| p < key);
        // Past the last point: the circle wraps to the first.
        let (_, n) = self.points.get(at).unwrap_or(&self.points[0]);
        Some(*n)
    }

    /// The endpoint that owns `key`.
    pub fn endpoint_for(&self, key: u64) -> Option<&str> {
        self.owner(key).map(|n| self.endpoints[n as usize].as_str())
    }
}

/// Position of point `i` of the endpoint whose name hashes to `base`.
fn point(base: u64, i: u32) -> u64 {
    mix64(base ^ u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// A stable 64-bit hash of bytes: FNV-1a, then a finalizer so that keys
/// differing in one byte land far apart on the ring. Not `ahash` or
/// `DefaultHasher`: those are seeded per process or may change between
/// releases, and every collector must agree on where a key goes.
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = Fnv::new();
    h.write(bytes);
    h.finish()
}

/// FNV-1a, incrementally; [`Fnv::finish`] applies the finalizer.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    #[inline]
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    #[inline]
    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }

    #[inline]
    pub fn finish(self) -> u64 {
        mix64(self.0)
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

/// splitmix64's finalizer.
#[inline]
pub fn mix64(x: u64) -> u64 {
    profcol_model::dictionary::mix64(x)
}
