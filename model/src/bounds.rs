//! Limits on values that drive work or allocation downstream (a window loop
//! over a time range, points spread over a duration). A value past them is
//! not a profile anyone recorded: it is refused where it arrives, with a
//! reason, instead of being turned into work.

use crate::proto::Profile;

/// The latest time that int64 nanoseconds since 1970 hold
/// (2262-04-11T23:47:16.854775807Z): pprof, Go's `time.Time` and Java's
/// `Instant` nanos cannot carry a later one.
pub const MAX_UNIX_NANO: u64 = i64::MAX as u64;

/// The longest profile an exporter spreads aggregated values over or cuts
/// into chunks: one day. Profilers flush every few seconds to minutes.
pub const MAX_PROFILE_DURATION_NS: u64 = 86_400_000_000_000;

/// The highest sampling rate a profile's values are believed at when they
/// become individual samples: 1 kHz per sample (stack and thread) over the
/// profile's duration. Real profilers sample at 10-1000 Hz.
pub const MAX_POINTS_PER_SAMPLE_PER_SEC: u64 = 1_000;

/// Which of a profile's times lies past [`MAX_UNIX_NANO`]: the field, the
/// sample and timestamp index when it is a sample's, and the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateTime {
    Start(u64),
    /// `time_unix_nano + duration_nano`.
    End(u64),
    Sample {
        sample: usize,
        index: usize,
        value: u64,
    },
}

/// The first time of `p` past [`MAX_UNIX_NANO`], if any.
pub fn late_time(p: &Profile) -> Option<LateTime> {
    if p.time_unix_nano > MAX_UNIX_NANO {
        return Some(LateTime::Start(p.time_unix_nano));
    }
    let end = p.time_unix_nano.saturating_add(p.duration_nano);
    if end > MAX_UNIX_NANO {
        return Some(LateTime::End(end));
    }
    for (sample, s) in p.samples.iter().enumerate() {
        // One comparison per timestamp in the common case.
        if s.timestamps_unix_nano.iter().any(|&t| t > MAX_UNIX_NANO) {
            let index = s
                .timestamps_unix_nano
                .iter()
                .position(|&t| t > MAX_UNIX_NANO)
                .unwrap_or(0);
            let value = s.timestamps_unix_nano[index];
            return Some(LateTime::Sample {
                sample,
                index,
                value,
            });
        }
    }
    None
}
