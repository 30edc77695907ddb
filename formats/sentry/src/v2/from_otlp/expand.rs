//! Aggregated samples (a value, no timestamps: pprof, eBPF) become
//! timestamped Sentry samples spread evenly over the profile's time range.
//!
//! Each sample's `n` points sit at the fractions `(j + ½) / n` of the range;
//! all points are merged in that order and given equally spaced, distinct
//! timestamps, so every stack is spread over the whole range and no two
//! points of a thread share a timestamp.

/// One point to become a Sentry sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Point {
    pub ts: u64,
    /// Sentry stack id in the profile-wide table.
    pub stack: u32,
    /// Thread index in the profile-wide table.
    pub thread: u32,
    /// First point of its OTLP sample.
    pub home: bool,
}

/// An OTLP sample without timestamps and the number of points it stands for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Aggregated {
    pub stack: u32,
    pub thread: u32,
    pub n: u64,
}

/// What expansion could not place.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capped {
    /// Points left out to stay within `capacity`.
    pub points: u64,
    /// OTLP samples left with no point at all.
    pub samples: u64,
}

/// Appends the points of `items` spread over `[t0, t0 + duration)`, at most
/// `capacity` in all; counts scale down proportionally beyond that.
pub(crate) fn expand(
    items: &[Aggregated],
    t0: u64,
    duration: u64,
    capacity: u64,
    out: &mut Vec<Point>,
) -> Capped {
    let total: u128 = items.iter().map(|a| a.n as u128).sum();
    let mut capped = Capped::default();
    let scaled = |n: u64| -> u64 {
        if total > capacity as u128 {
            (n as u128 * capacity as u128 / total) as u64
        } else {
            n
        }
    };
    let mut order: Vec<(f64, u32, u32)> = Vec::new();
    for (i, a) in items.iter().enumerate() {
        let n = scaled(a.n);
        capped.points += a.n - n;
        if n == 0 {
            capped.samples += 1;
            continue;
        }
        let den = 2.0 * n as f64;
        order.extend((0..n).map(|j| ((2 * j + 1) as f64 / den, i as u32, j as u32)));
    }
    // Ties (equal fractions of different samples) go by sample order.
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let n = order.len() as u128;
    out.reserve(order.len());
    for (k, &(_, i, j)) in order.iter().enumerate() {
        let offset = ((2 * k as u128 + 1) * duration as u128) / (2 * n);
        let a = &items[i as usize];
        out.push(Point {
            ts: t0.saturating_add(offset as u64),
            stack: a.stack,
            thread: a.thread,
            home: j == 0,
        });
    }
    capped
}

/// Keeps `cap` of `points`, evenly: point `k` of `m` stays when
/// `floor((k+1)·cap/m) > floor(k·cap/m)`. Returns (points, homes) removed.
pub(crate) fn thin(points: &mut Vec<Point>, cap: usize) -> (u64, u64) {
    let m = points.len();
    if m <= cap {
        return (0, 0);
    }
    let (m128, cap128) = (m as u128, cap as u128);
    let mut k = 0u128;
    let mut homes = 0u64;
    points.retain(|p| {
        let keep = (k + 1) * cap128 / m128 > k * cap128 / m128;
        k += 1;
        if !keep && p.home {
            homes += 1;
        }
        keep
    });
    ((m - points.len()) as u64, homes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_each_sample_over_the_range() {
        let items = [
            Aggregated {
                stack: 1,
                thread: 0,
                n: 3,
            },
            Aggregated {
                stack: 2,
                thread: 0,
                n: 1,
            },
        ];
        let mut out = Vec::new();
        let capped = expand(&items, 1_000, 4_000, 100, &mut out);
        assert_eq!(capped, Capped::default());
        let ts: Vec<u64> = out.iter().map(|p| p.ts).collect();
        assert_eq!(
            ts,
            [1_500, 2_500, 3_500, 4_500],
            "distinct, evenly spaced, inside the range"
        );
        let stacks: Vec<u32> = out.iter().map(|p| p.stack).collect();
        assert_eq!(
            stacks,
            [1, 1, 2, 1],
            "the single point of stack 2 sits mid-range"
        );
        assert_eq!(
            out.iter().filter(|p| p.home).count(),
            2,
            "one home point per sample"
        );
    }

    #[test]
    fn caps_proportionally() {
        let items = [
            Aggregated {
                stack: 1,
                thread: 0,
                n: 900,
            },
            Aggregated {
                stack: 2,
                thread: 0,
                n: 100,
            },
            Aggregated {
                stack: 3,
                thread: 0,
                n: 1,
            },
        ];
        let mut out = Vec::new();
        let capped = expand(&items, 0, 1_000_000, 100, &mut out);
        assert_eq!(out.len() as u64 + capped.points, 1001);
        assert!(out.len() <= 100);
        assert_eq!(out.iter().filter(|p| p.stack == 1).count(), 89);
        assert_eq!(out.iter().filter(|p| p.stack == 2).count(), 9);
        assert_eq!(
            capped.samples, 1,
            "the one-point sample lost its only point"
        );
    }

    #[test]
    fn thinning_keeps_exactly_cap_evenly() {
        let mut pts: Vec<Point> = (0..10)
            .map(|i| Point {
                ts: i,
                stack: 0,
                thread: 0,
                home: i % 2 == 0,
            })
            .collect();
        let (removed, homes) = thin(&mut pts, 5);
        assert_eq!((removed, pts.len()), (5, 5));
        assert_eq!(
            pts.iter().map(|p| p.ts).collect::<Vec<_>>(),
            [1, 3, 5, 7, 9]
        );
        assert_eq!(homes, 5);
    }
}
