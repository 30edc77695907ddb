//! The query parameters of `POST /ingest`, read as the Pyroscope server
//! reads them.

use std::time::{SystemTime, UNIX_EPOCH};

use super::labels::{parse_name, Name, Spy};

/// What `/ingest?...` says about its body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IngestParams {
    pub name: Name,
    /// Unix nanoseconds; the time of the request when absent.
    pub from: u64,
    pub until: u64,
    /// Hz; Pyroscope's 100 when absent or unreadable.
    pub sample_rate: u32,
    pub spy: Option<Spy>,
    /// Legacy metadata for text formats: `samples`, `objects`, `bytes`, ...
    pub units: String,
    /// `sum` or `average`.
    pub aggregation: String,
    pub format: String,
}

const DEFAULT_SAMPLE_RATE: u32 = 100;

impl IngestParams {
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, String> {
        let now = now_nanos();
        let (mut name, mut from, mut until) = (None, None, None);
        let mut p = IngestParams {
            name: Name {
                app: String::new(),
                labels: Vec::new(),
            },
            from: now,
            until: now,
            sample_rate: DEFAULT_SAMPLE_RATE,
            spy: None,
            units: String::new(),
            aggregation: String::new(),
            format: String::new(),
        };
        // `+` is a space, as Go's `url.Query()` reads it.
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*k {
                "name" => name = Some(v.into_owned()),
                "from" => from = Some(v.into_owned()),
                "until" => until = Some(v.into_owned()),
                // Invalid or negative: logged and 100 in Pyroscope.
                "sampleRate" => {
                    p.sample_rate = v.trim().parse().unwrap_or(DEFAULT_SAMPLE_RATE);
                }
                "spyName" => p.spy = Spy::from_param(Some(&v)),
                "units" => p.units = v.trim().to_owned(),
                "aggregationType" => p.aggregation = v.trim().to_owned(),
                "format" => p.format = v.trim().to_owned(),
                _ => {}
            }
        }
        let name = name.ok_or("the query has no name (the application name)")?;
        p.name = parse_name(&name)?;
        if let Some(f) = from {
            p.from = parse_time(&f, now).map_err(|e| format!("from: {e}"))?;
        }
        if let Some(u) = until {
            p.until = parse_time(&u, now).map_err(|e| format!("until: {e}"))?;
        }
        Ok(p)
    }
}

pub(crate) fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `from`/`until` as Pyroscope's `attime.Parse` reads them, in unix
/// nanoseconds: `_`, `,` and spaces are ignored; digits are seconds, except
/// 13 digits (milliseconds), 16 (microseconds), 19 (nanoseconds: what
/// pyroscope-go sends) and 8 that form a date `YYYYMMDD`; or `now`, with an
/// optional `+N`/`-N` and a unit (`s`, `m`/`min`, `h`, `d`, `w`, `mon`/`M`,
/// `y`).
pub(crate) fn parse_time(s: &str, now: u64) -> Result<u64, String> {
    let t: String = s
        .chars()
        .filter(|c| !matches!(c, '_' | ',' | ' '))
        .collect();
    let too_late = || format!("{s:?} is past 2262, the latest time unix nanoseconds hold");
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = t.parse().map_err(|_| too_late())?;
        let scale: u64 = match t.len() {
            8 => {
                if let Some(days) = date(&t) {
                    return Ok(days * 86_400 * 1_000_000_000);
                }
                1_000_000_000
            }
            13 => 1_000_000,
            16 => 1_000,
            19 => 1,
            _ => 1_000_000_000,
        };
        return n
            .checked_mul(scale)
            .filter(|ns| *ns <= i64::MAX as u64)
            .ok_or_else(too_late);
    }
    let Some(offset) = t.strip_prefix("now") else {
        return Err(format!(
            "cannot read {s:?} as a time (unix seconds, ms, µs or ns, or now-1h)"
        ));
    };
    if offset.is_empty() {
        return Ok(now);
    }
    let bad = || format!("cannot read the offset {offset:?} of {s:?}");
    let (sign, rest) = match offset.as_bytes()[0] {
        b'+' => (1i128, &offset[1..]),
        b'-' => (-1i128, &offset[1..]),
        _ => return Err(bad()),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let n: i128 = rest[..digits].parse().map_err(|_| bad())?;
    let secs: i128 = match &rest[digits..] {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        "M" | "mon" => 30 * 86_400,
        "y" => 365 * 86_400,
        _ => return Err(bad()),
    };
    let t = now as i128 + sign * n * secs * 1_000_000_000;
    u64::try_from(t)
        .ok()
        .filter(|ns| *ns <= i64::MAX as u64)
        .ok_or_else(too_late)
}

/// Days since 1970-01-01 of a valid `YYYYMMDD` on or after it.
fn date(t: &str) -> Option<u64> {
    let (y, m, d): (i64, i64, i64) = (
        t[..4].parse().ok()?,
        t[4..6].parse().ok()?,
        t[6..].parse().ok()?,
    );
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    u64::try_from(era * 146_097 + doe - 719_468).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_attime_reads_them() {
        let now = 1_795_728_000_000_000_000;
        let s = 1_795_728_140_000_000_000;
        assert_eq!(parse_time("1795728140", now), Ok(s));
        assert_eq!(parse_time("1795728140000", now), Ok(s));
        assert_eq!(parse_time("1795728140000000", now), Ok(s));
        // pyroscope-go: nanoseconds.
        assert_eq!(
            parse_time("1795728486382924359", now),
            Ok(1795728486382924359)
        );
        assert_eq!(parse_time("1_795_728_140", now), Ok(s));
        assert_eq!(parse_time("20261126", now), Ok(1_795_651_200_000_000_000));
        // Not a date: seconds.
        assert_eq!(parse_time("20261399", now), Ok(20_261_399_000_000_000));
        assert_eq!(parse_time("now", now), Ok(now));
        assert_eq!(parse_time("now-1h", now), Ok(now - 3_600_000_000_000));
        assert_eq!(parse_time("now+5min", now), Ok(now + 300_000_000_000));
        for bad in [
            "yesterday",
            "now-1x",
            "99999999999999999999",
            "10000000000",
            "12a",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_go_sdks_query_reads() {
        let q = "aggregationType=sum&from=1795728486382924359&name=goapp%7B__session_id__%3D77e425ea48b3919f%2Cenv%3Dtest%2Cregion%3Deu%7D&sampleRate=100&spyName=gospy&units=samples&until=1795728496567477558";
        let p = IngestParams::parse(Some(q)).unwrap();
        assert_eq!(p.name.app, "goapp");
        assert_eq!(p.name.labels.len(), 3);
        assert_eq!(
            (p.from, p.until),
            (1795728486382924359, 1795728496567477558)
        );
        assert_eq!(p.sample_rate, 100);
        assert_eq!(p.spy.unwrap().name, "gospy");
        assert_eq!(
            (p.units.as_str(), p.aggregation.as_str()),
            ("samples", "sum")
        );
        assert_eq!(p.format, "");
        // Node's bogus or absent rates and Go's 0 are kept as Pyroscope keeps them.
        assert_eq!(
            IngestParams::parse(Some("name=a&sampleRate=-3"))
                .unwrap()
                .sample_rate,
            100
        );
        assert_eq!(
            IngestParams::parse(Some("name=a&sampleRate=0"))
                .unwrap()
                .sample_rate,
            0
        );
        assert!(IngestParams::parse(Some("from=1"))
            .unwrap_err()
            .contains("no name"));
        assert!(IngestParams::parse(Some("name=a&from=x"))
            .unwrap_err()
            .starts_with("from: "));
    }
}
