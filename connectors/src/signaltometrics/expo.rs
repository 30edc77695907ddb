//! The exponential histogram the Collector's `signaltometrics` fills
//! (`lightstep/go-expohisto` `structure.Histogram[float64]`): starts at
//! scale 20 and halves its resolution whenever the buckets of one sign
//! would span `max_size` indices or more.

const MAX_SCALE: i32 = 20;
const SIGNIFICAND_WIDTH: u32 = 52;
const SIGNIFICAND_MASK: u64 = (1 << SIGNIFICAND_WIDTH) - 1;
const EXPONENT_BIAS: i32 = 1023;
const MIN_NORMAL_EXPONENT: i32 = -1022;
const MAX_NORMAL_EXPONENT: i32 = 1023;

fn normal_base2(v: f64) -> i32 {
    ((v.to_bits() >> SIGNIFICAND_WIDTH) & 0x7ff) as i32 - EXPONENT_BIAS
}

fn significand(v: f64) -> u64 {
    v.to_bits() & SIGNIFICAND_MASK
}

/// The index of the bucket of `v` (> 0) at `scale`.
fn map_to_index(scale: i32, v: f64) -> i32 {
    if scale <= 0 {
        if v < f64::MIN_POSITIVE {
            return (MIN_NORMAL_EXPONENT) >> -scale;
        }
        let correction: i32 = if significand(v) == 0 { -1 } else { 0 };
        return (normal_base2(v) + correction) >> -scale;
    }
    if v <= f64::MIN_POSITIVE {
        return (MIN_NORMAL_EXPONENT << scale) - 1;
    }
    if significand(v) == 0 {
        return (normal_base2(v) << scale) - 1;
    }
    let factor = std::f64::consts::LOG2_E * 2f64.powi(scale);
    let index = (v.ln() * factor).floor() as i32;
    let max = ((MAX_NORMAL_EXPONENT + 1) << scale) - 1;
    index.min(max)
}

#[derive(Debug, Default, Clone)]
pub(super) struct Buckets {
    pub offset: i32,
    pub counts: Vec<u64>,
}

impl Buckets {
    fn end(&self) -> i32 {
        self.offset + self.counts.len() as i32 - 1
    }

    /// Adds `incr` at `index`, or the (low, high) span that does not fit.
    fn increment(&mut self, index: i32, incr: u64, max_size: i32) -> Result<(), (i32, i32)> {
        if self.counts.is_empty() {
            self.offset = index;
            self.counts.push(incr);
            return Ok(());
        }
        if index < self.offset {
            if self.end() - index >= max_size {
                return Err((index, self.end()));
            }
            let grow = (self.offset - index) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.offset = index;
        } else if index > self.end() {
            if index - self.offset >= max_size {
                return Err((self.offset, index));
            }
            self.counts.resize((index - self.offset + 1) as usize, 0);
        }
        let i = (index - self.offset) as usize;
        self.counts[i] = self.counts[i].wrapping_add(incr);
        Ok(())
    }

    fn downscale(&mut self, by: i32) {
        if self.counts.is_empty() {
            self.offset >>= by;
            return;
        }
        let start = self.offset >> by;
        let mut out = vec![0u64; ((self.end() >> by) - start + 1) as usize];
        for (i, c) in self.counts.iter().enumerate() {
            let at = ((self.offset + i as i32) >> by) - start;
            out[at as usize] += c;
        }
        self.offset = start;
        self.counts = out;
    }
}

#[derive(Debug, Clone)]
pub(super) struct ExpoHistogram {
    pub max_size: i32,
    pub scale: i32,
    pub count: u64,
    pub zero_count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub positive: Buckets,
    pub negative: Buckets,
}

impl ExpoHistogram {
    pub(super) fn new(max_size: i32) -> Self {
        Self {
            max_size,
            scale: MAX_SCALE,
            count: 0,
            zero_count: 0,
            sum: 0.0,
            min: 0.0,
            max: 0.0,
            positive: Buckets::default(),
            negative: Buckets::default(),
        }
    }

    pub(super) fn update(&mut self, v: f64, incr: u64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += incr;
        if v == 0.0 {
            self.zero_count += incr;
            return;
        }
        self.sum += v * incr as f64;
        let (positive, abs) = if v > 0.0 { (true, v) } else { (false, -v) };
        if incr == 0 {
            return;
        }
        let index = map_to_index(self.scale, abs);
        let b = if positive {
            &mut self.positive
        } else {
            &mut self.negative
        };
        let Err((mut low, mut high)) = b.increment(index, incr, self.max_size) else {
            return;
        };
        let mut change = 0;
        while high - low >= self.max_size {
            high >>= 1;
            low >>= 1;
            change += 1;
        }
        self.positive.downscale(change);
        self.negative.downscale(change);
        self.scale -= change;
        let index = map_to_index(self.scale, abs);
        let b = if positive {
            &mut self.positive
        } else {
            &mut self.negative
        };
        let fitted = b.increment(index, incr, self.max_size);
        debug_assert!(fitted.is_ok(), "downscale logic error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_powers_of_two_fall_below_their_boundary() {
        // (2^(i/2^scale), ...]: 1.0 is the last of the bucket before 0.
        assert_eq!(map_to_index(0, 1.0), -1);
        assert_eq!(map_to_index(0, 2.0), 0);
        assert_eq!(map_to_index(0, 3.0), 1);
        assert_eq!(map_to_index(1, 2.0), 1);
        assert_eq!(map_to_index(-1, 8.0), 1);
    }

    #[test]
    fn it_downscales_to_fit_max_size() {
        let mut h = ExpoHistogram::new(4);
        for v in [1.0, 2.0, 4.0, 1000.0] {
            h.update(v, 1);
        }
        assert!(h.positive.counts.len() <= 4, "{h:?}");
        assert_eq!(h.positive.counts.iter().sum::<u64>(), 4);
        assert_eq!((h.count, h.sum, h.min, h.max), (4, 1007.0, 1.0, 1000.0));
        let mut z = ExpoHistogram::new(160);
        z.update(0.0, 3);
        assert_eq!((z.zero_count, z.scale), (3, MAX_SCALE));
    }
}
