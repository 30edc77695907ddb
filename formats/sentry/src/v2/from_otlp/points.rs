//! OTLP samples as points (one per future Sentry sample): timestamps
//! taken as they are, aggregated values spread over the profile's time
//! range (see `expand`) once they pass a plausibility check.

use super::expand::{expand, Aggregated, Point};
use super::frames::Frames;
use super::threads::Threads;
use super::{Dropped, ExportOptions};
use crate::otlp_builder::DEFAULT_PERIOD_NS;
use crate::v2::relay_rules::MAX_CHUNK_DURATION_NS;
use crate::Reason;
use profcol_model::bounds::{MAX_POINTS_PER_SAMPLE_PER_SEC, MAX_PROFILE_DURATION_NS};
use profcol_model::dictionary::Lookup;
use profcol_model::proto::Profile;

/// Chunk windows' worth of points that aggregated values are spread into
/// at once (a bound on memory that no input value moves).
const MAX_EXPANDED_WINDOWS: u64 = 16;

/// All points of the profile, and what could not become points.
pub(super) fn points(
    d: Lookup<'_>,
    p: &Profile,
    opts: &ExportOptions,
    frames: &mut Frames,
    threads: &mut Threads,
) -> (Vec<Point>, Vec<Dropped>) {
    let period_ns = period_ns(d, p);
    let unit = p
        .sample_type
        .map(|t| d.string(t.unit_strindex))
        .unwrap_or("");
    let per_point = points_per_value(unit, period_ns);
    let mut points = Vec::new();
    let mut aggregated = Vec::new();
    let mut empty = 0u64;
    let mut unsupported = 0u64;
    for s in &p.samples {
        let stack = frames.stack(s.stack_index);
        let thread = threads.thread(&s.attribute_indices);
        if !s.timestamps_unix_nano.is_empty() {
            points.extend(
                s.timestamps_unix_nano
                    .iter()
                    .enumerate()
                    .map(|(j, &ts)| Point {
                        ts,
                        stack,
                        thread,
                        home: j == 0,
                    }),
            );
            continue;
        }
        let Some(per_point) = per_point else {
            unsupported += 1;
            continue;
        };
        let value = s
            .values
            .iter()
            .filter(|v| **v > 0)
            .fold(0u64, |t, &v| t.saturating_add(v as u64));
        let n = match per_point {
            PerPoint::Count => value,
            PerPoint::Nanos { unit_ns, period_ns } => {
                let ns = value as u128 * unit_ns as u128;
                let n = (ns + period_ns as u128 / 2) / period_ns as u128;
                if n == 0 && value > 0 {
                    1
                } else {
                    u64::try_from(n).unwrap_or(u64::MAX)
                }
            }
        };
        if n == 0 {
            empty += 1;
        } else {
            aggregated.push(Aggregated { stack, thread, n });
        }
    }
    let mut dropped = Vec::new();
    if unsupported > 0 {
        dropped.push(Dropped {
            reason: Reason::UnsupportedSampleType,
            sentry_samples: 0,
            otlp_samples: unsupported,
        });
    }
    if empty > 0 {
        dropped.push(Dropped {
            reason: Reason::EmptySample,
            sentry_samples: 0,
            otlp_samples: empty,
        });
    }
    if !aggregated.is_empty() {
        let total: u64 = aggregated.iter().fold(0, |t, a| t.saturating_add(a.n));
        let duration = if p.duration_nano > 0 {
            p.duration_nano
        } else {
            total.saturating_mul(period_ns)
        };
        if let Some(reason) = implausible(aggregated.len(), total, duration) {
            // Nothing of the profile is sent; what was unsupported stays so.
            dropped.retain(|d| d.reason == Reason::UnsupportedSampleType);
            dropped.push(Dropped {
                reason,
                sentry_samples: points.len() as u64,
                otlp_samples: p.samples.len() as u64 - unsupported,
            });
            return (Vec::new(), dropped);
        }
        let t0 = if p.time_unix_nano > 0 {
            p.time_unix_nano
        } else {
            opts.now_unix_nano.saturating_sub(duration)
        };
        let window = opts.max_chunk_duration_ns.clamp(1, MAX_CHUNK_DURATION_NS);
        // The points of at most 16 chunks are spread at once, whatever
        // the duration: a longer profile is thinned in proportion.
        let windows = duration.div_ceil(window).clamp(1, MAX_EXPANDED_WINDOWS);
        let capacity = windows.saturating_mul(opts.max_samples_per_chunk.max(1) as u64);
        let capped = expand(&aggregated, t0, duration, capacity, &mut points);
        if capped.points > 0 {
            dropped.push(Dropped {
                reason: Reason::MaxSamplesPerChunk,
                sentry_samples: capped.points,
                otlp_samples: capped.samples,
            });
        }
    }
    (points, dropped)
}

/// The profile's sampling period in nanoseconds (1/101 s if unknown).
fn period_ns(d: Lookup<'_>, p: &Profile) -> u64 {
    let unit = p
        .period_type
        .map(|t| d.string(t.unit_strindex))
        .unwrap_or("");
    match (time_unit_ns(unit), u64::try_from(p.period)) {
        (Some(f), Ok(period)) if period > 0 => period.saturating_mul(f),
        _ => DEFAULT_PERIOD_NS,
    }
}

#[derive(Clone, Copy)]
enum PerPoint {
    Count,
    Nanos { unit_ns: u64, period_ns: u64 },
}

pub(crate) fn time_unit_ns(unit: &str) -> Option<u64> {
    Some(match unit {
        "nanoseconds" | "nanosecond" | "ns" => 1,
        "microseconds" | "microsecond" | "us" => 1_000,
        "milliseconds" | "millisecond" | "ms" => 1_000_000,
        "seconds" | "second" | "s" => 1_000_000_000,
        _ => return None,
    })
}

/// Why aggregated values are no recording, if they are not: `samples`
/// OTLP samples worth `points` in all over `duration_ns` are more than 1 kHz
/// per sample, or a duration (given, or made up from the values) over a day.
/// Checked before any point is made, since both drive the work.
fn implausible(samples: usize, points: u64, duration_ns: u64) -> Option<Reason> {
    if duration_ns > MAX_PROFILE_DURATION_NS {
        return Some(Reason::ImplausibleTime);
    }
    let per_sample = (duration_ns / (1_000_000_000 / MAX_POINTS_PER_SAMPLE_PER_SEC)).max(1);
    (points > (samples as u64).saturating_mul(per_sample)).then_some(Reason::ImplausibleValues)
}

/// How many points one unit of a sample value is worth; `None` for units
/// that are not occurrences or time (bytes, ...).
fn points_per_value(unit: &str, period_ns: u64) -> Option<PerPoint> {
    match unit {
        "" | "count" | "samples" => Some(PerPoint::Count),
        u => time_unit_ns(u).map(|unit_ns| PerPoint::Nanos {
            unit_ns,
            period_ns: period_ns.max(1),
        }),
    }
}
