//! Time conversions. Sentry v2 timestamps are float unix seconds; an `f64`
//! near 1.8e9 s resolves about 0.24 µs, so converting at microsecond
//! precision is exact both ways and is what profcol keeps.

const NS_PER_US: u64 = 1_000;

/// Float unix seconds to nanoseconds, rounded to the microsecond.
/// `None` for negative, non-finite or out-of-range values (past 2262, the
/// latest time int64 nanoseconds hold, which ingest refuses).
pub fn secs_to_unix_nanos(secs: f64) -> Option<u64> {
    let us = (secs * 1e6).round();
    let max_us = profcol_model::bounds::MAX_UNIX_NANO / NS_PER_US;
    if !us.is_finite() || us < 0.0 || us > max_us as f64 {
        return None;
    }
    Some(us as u64 * NS_PER_US)
}

/// Nanoseconds to float unix seconds at microsecond precision; parses back
/// through [`secs_to_unix_nanos`] to the same microsecond.
pub fn unix_nanos_to_secs(ns: u64) -> f64 {
    let us = ns.saturating_add(NS_PER_US / 2) / NS_PER_US;
    us as f64 / 1e6
}

/// Parses an RFC 3339 timestamp (`2026-11-22T03:36:44.638532Z`, also with an
/// offset, a space instead of `T`, or no zone, read as UTC) to unix nanoseconds.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.trim().as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in b.get(r)? {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ns = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let mut scale = 100_000_000i64;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            frac_ns += (c - b'0') as i64 * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset_secs = match b.get(i) {
        None => 0,
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let o = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    let ns = i128::from(secs) * 1_000_000_000 + i128::from(frac_ns);
    u64::try_from(ns).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_seconds_keep_microseconds() {
        for s in [
            "1795318570.028333",
            "1795318675.729",
            "1795318576.0301797",
            "1.000001",
        ] {
            let f: f64 = s.parse().unwrap();
            let ns = secs_to_unix_nanos(f).unwrap();
            let back = unix_nanos_to_secs(ns);
            assert_eq!(secs_to_unix_nanos(back), Some(ns), "{s}");
            let text = serde_json::to_string(&back).unwrap();
            assert_eq!(secs_to_unix_nanos(text.parse().unwrap()), Some(ns), "{s}");
        }
        assert_eq!(
            secs_to_unix_nanos(1795318570.028333),
            Some(1_795_318_570_028_333_000)
        );
        assert_eq!(secs_to_unix_nanos(-1.0), None);
        // Past 2262 (found by the fuzzer: a chunk converted into a profile
        // that ingest validation refuses).
        assert_eq!(secs_to_unix_nanos(17_953_185_700.0), None);
        assert!(secs_to_unix_nanos(9_223_372_035.0).is_some());
        assert_eq!(secs_to_unix_nanos(f64::NAN), None);
    }

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-11-22T03:36:44.638532Z"),
            Some(1_795_318_604_638_532_000)
        );
        assert_eq!(
            parse_rfc3339("2026-11-22T04:36:44.638532+01:00"),
            parse_rfc3339("2026-11-22T03:36:44.638532Z")
        );
        assert_eq!(
            parse_rfc3339("2026-11-22 03:36:44"),
            Some(1_795_318_604_000_000_000)
        );
        assert_eq!(parse_rfc3339("2026-13-22T03:36:44Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
