//! Go's `*time.Location` over chrono-tz's tz database: a zone's name and
//! offset at an instant, a zone looked up by name, a wall time placed.

use chrono::TimeZone as _;
use chrono_tz::{OffsetName as _, Tz};

/// Where a wall time is placed: Go's `*time.Location`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Location {
    Utc,
    Tz(Tz),
    /// `FixedZone(name, offset)`.
    Fixed(String, i32),
}

impl Location {
    /// `time.LoadLocation`.
    pub(super) fn load(name: &str) -> Result<Location, String> {
        match name {
            "" | "UTC" => Ok(Location::Utc),
            "Local" => Ok(local()),
            _ => name
                .parse::<Tz>()
                .map(Location::Tz)
                .map_err(|_| format!("unknown time zone {name}")),
        }
    }

    /// The zone name and offset in effect at `unix` (seconds).
    pub(super) fn lookup(&self, unix: i64) -> (String, i32) {
        match self {
            Location::Utc => ("UTC".into(), 0),
            Location::Fixed(n, o) => (n.clone(), *o),
            Location::Tz(tz) => {
                let Some(at) = chrono::DateTime::from_timestamp(unix, 0) else {
                    return ("UTC".into(), 0);
                };
                let off = tz.offset_from_utc_datetime(&at.naive_utc());
                let secs = chrono::Offset::fix(&off).local_minus_utc();
                let name = off
                    .abbreviation()
                    .map(str::to_owned)
                    .unwrap_or_else(|| numeric_zone_name(secs));
                (name, secs)
            }
        }
    }

    /// `Location.lookupName`: the offset of a zone of that name, the one
    /// in effect at `unix` if it is, else any (probed a year around).
    pub(super) fn lookup_name(&self, name: &str, unix: i64) -> Option<i32> {
        let Location::Tz(_) = self else {
            return match self.lookup(unix) {
                (n, o) if n == name && !matches!(self, Location::Utc) => Some(o),
                _ => None,
            };
        };
        const MONTH: i64 = 30 * 86_400;
        let candidates: Vec<i32> = (-13..=13)
            .map(|k| self.lookup(unix + k * MONTH))
            .filter(|(n, _)| n == name)
            .map(|(_, o)| o)
            .collect();
        candidates
            .iter()
            .copied()
            .find(|&o| self.lookup(unix - i64::from(o)).0 == name)
            .or_else(|| candidates.first().copied())
    }

    /// `time.Date` of a wall time (seconds as if UTC): its Unix seconds.
    pub(super) fn date(&self, wall: i64) -> i64 {
        let (_, first) = self.lookup(wall);
        if first == 0 {
            return wall;
        }
        let utc = wall - i64::from(first);
        let (_, at_utc) = self.lookup(utc);
        wall - i64::from(at_utc)
    }
}

/// How Go names a zone the database gives only an offset for (`+03`).
fn numeric_zone_name(secs: i32) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let (h, m) = (secs.abs() / 3600, secs.abs() / 60 % 60);
    if m == 0 {
        format!("{sign}{h:02}")
    } else {
        format!("{sign}{h:02}{m:02}")
    }
}

/// `time.Local`: `TZ`, else the zone `/etc/localtime` links to, else UTC.
pub(super) fn local() -> Location {
    let name = std::env::var("TZ").ok().or_else(|| {
        let target = std::fs::read_link("/etc/localtime").ok()?;
        let s = target.to_string_lossy().into_owned();
        s.split_once("zoneinfo/").map(|(_, n)| n.to_owned())
    });
    match name.as_deref().map(|n| n.trim_start_matches(':')) {
        None | Some("" | "UTC") => Location::Utc,
        Some(n) => n.parse().map(Location::Tz).unwrap_or(Location::Utc),
    }
}
