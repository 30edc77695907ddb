//! Go's `time.ParseInLocation`: a layout's chunks (`nextStdChunk`) read
//! off the value, with Go's errors, which `ctimefmt`'s lax retries read.

use chrono::NaiveDate;

use super::location::Location;
use crate::funcs::ctime::{DAYS, MONTHS};

/// Go's `time.ParseError`, which the lax retries read.
#[derive(Debug)]
pub(super) struct ParseError {
    pub(super) layout: String,
    pub(super) value: String,
    pub(super) layout_elem: String,
    pub(super) value_elem: String,
    pub(super) message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.is_empty() {
            write!(
                f,
                "parsing time {:?} as {:?}: cannot parse {:?} as {:?}",
                self.value, self.layout, self.value_elem, self.layout_elem
            )
        } else {
            write!(f, "parsing time {:?}{}", self.value, self.message)
        }
    }
}

#[derive(Debug)]
pub(super) enum Error {
    Parse(ParseError),
    Other(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Parse(e) => e.fmt(f),
            Error::Other(e) => f.write_str(e),
        }
    }
}

/// A chunk of a Go layout (`time/format.go`'s std values).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM,
    Pm,
    TZ,
    Iso8601TZ,
    Iso8601SecondsTZ,
    Iso8601ShortTZ,
    Iso8601ColonTZ,
    Iso8601ColonSecondsTZ,
    NumTZ,
    NumSecondsTz,
    NumShortTZ,
    NumColonTZ,
    NumColonSecondsTZ,
    /// `.000` (digits exactly) and `.999` (optional), with their length.
    FracSecond0(usize),
    FracSecond9,
}

fn starts_with_lower(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_lowercase)
}

/// `nextStdChunk`: the text before the first chunk, the chunk, the rest.
fn next_std_chunk(layout: &[u8]) -> (&[u8], Option<(Std, usize)>, &[u8]) {
    let at = |i: usize, s: &[u8]| layout.len() >= i + s.len() && &layout[i..i + s.len()] == s;
    for i in 0..layout.len() {
        let found: Option<(Std, usize)> = match layout[i] {
            b'J' if at(i, b"Jan") => {
                if at(i, b"January") {
                    Some((Std::LongMonth, 7))
                } else if !starts_with_lower(&layout[i + 3..]) {
                    Some((Std::Month, 3))
                } else {
                    None
                }
            }
            b'M' if layout.len() >= i + 3 => {
                if at(i, b"Mon") {
                    if at(i, b"Monday") {
                        Some((Std::LongWeekDay, 6))
                    } else if !starts_with_lower(&layout[i + 3..]) {
                        Some((Std::WeekDay, 3))
                    } else {
                        None
                    }
                } else if at(i, b"MST") {
                    Some((Std::TZ, 3))
                } else {
                    None
                }
            }
            b'0' if layout.len() >= i + 2 && (b'1'..=b'6').contains(&layout[i + 1]) => {
                let std = [
                    Std::ZeroMonth,
                    Std::ZeroDay,
                    Std::ZeroHour12,
                    Std::ZeroMinute,
                    Std::ZeroSecond,
                    Std::Year,
                ][(layout[i + 1] - b'1') as usize];
                Some((std, 2))
            }
            b'0' if at(i, b"002") => Some((Std::ZeroYearDay, 3)),
            b'1' if at(i, b"15") => Some((Std::Hour, 2)),
            b'1' => Some((Std::NumMonth, 1)),
            b'2' if at(i, b"2006") => Some((Std::LongYear, 4)),
            b'2' => Some((Std::Day, 1)),
            b'_' if at(i + 1, b"2006") => {
                // `_2006` is `_` and a year.
                return (&layout[..i + 1], Some((Std::LongYear, 0)), &layout[i + 5..]);
            }
            b'_' if at(i + 1, b"2") => Some((Std::UnderDay, 2)),
            b'_' if at(i + 1, b"_2") => Some((Std::UnderYearDay, 3)),
            b'3' => Some((Std::Hour12, 1)),
            b'4' => Some((Std::Minute, 1)),
            b'5' => Some((Std::Second, 1)),
            b'P' if at(i, b"PM") => Some((Std::PM, 2)),
            b'p' if at(i, b"pm") => Some((Std::Pm, 2)),
            b'-' => [
                (&b"-070000"[..], Std::NumSecondsTz),
                (b"-07:00:00", Std::NumColonSecondsTZ),
                (b"-0700", Std::NumTZ),
                (b"-07:00", Std::NumColonTZ),
                (b"-07", Std::NumShortTZ),
            ]
            .into_iter()
            .find(|(s, _)| at(i, s))
            .map(|(s, std)| (std, s.len())),
            b'Z' => [
                (&b"Z070000"[..], Std::Iso8601SecondsTZ),
                (b"Z07:00:00", Std::Iso8601ColonSecondsTZ),
                (b"Z0700", Std::Iso8601TZ),
                (b"Z07:00", Std::Iso8601ColonTZ),
                (b"Z07", Std::Iso8601ShortTZ),
            ]
            .into_iter()
            .find(|(s, _)| at(i, s))
            .map(|(s, std)| (std, s.len())),
            b'.' | b',' if i + 1 < layout.len() && matches!(layout[i + 1], b'0' | b'9') => {
                let ch = layout[i + 1];
                let mut j = i + 1;
                while j < layout.len() && layout[j] == ch {
                    j += 1;
                }
                if layout.get(j).is_some_and(u8::is_ascii_digit) {
                    None
                } else if ch == b'0' {
                    Some((Std::FracSecond0(j - i - 1), j - i))
                } else {
                    Some((Std::FracSecond9, j - i))
                }
            }
            _ => None,
        };
        if let Some((std, len)) = found {
            return (&layout[..i], Some((std, len)), &layout[i + len..]);
        }
    }
    (layout, None, b"")
}

/// `lookup`: the index of the name `value` starts with (ASCII letters in
/// any case; a `short` name is its first three), and the rest.
fn lookup<'v>(tab: &[&str], short: bool, value: &'v [u8]) -> Option<(usize, &'v [u8])> {
    tab.iter().enumerate().find_map(|(i, name)| {
        let n = if short {
            &name.as_bytes()[..3]
        } else {
            name.as_bytes()
        };
        (value.len() >= n.len() && value[..n.len()].eq_ignore_ascii_case(n))
            .then(|| (i, &value[n.len()..]))
    })
}

/// `getnum`: one or two digits (two when `fixed`).
fn getnum(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    let d = |i: usize| {
        s.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let a = d(0)?;
    match d(1) {
        Some(b) => Some((a * 10 + b, &s[2..])),
        None if fixed => None,
        None => Some((a, &s[1..])),
    }
}

fn getnum3(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    let n = s.iter().take(3).take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || (fixed && n != 3) {
        return None;
    }
    let v = s[..n].iter().fold(0, |a, c| a * 10 + i64::from(c - b'0'));
    Some((v, &s[n..]))
}

fn cutspace(s: &[u8]) -> &[u8] {
    &s[s.iter().take_while(|&&c| c == b' ').count()..]
}

/// `skip`: the layout's literal text at the start of the value, a run of
/// spaces in the layout matching any run in the value.
fn skip<'v>(mut value: &'v [u8], mut prefix: &[u8]) -> Result<&'v [u8], &'v [u8]> {
    while let Some(&p) = prefix.first() {
        if p == b' ' {
            if value.first().is_some_and(|&c| c != b' ') {
                return Err(value);
            }
            prefix = cutspace(prefix);
            value = cutspace(value);
            continue;
        }
        if value.first() != Some(&p) {
            return Err(value);
        }
        prefix = &prefix[1..];
        value = &value[1..];
    }
    Ok(value)
}

/// `parseTimeZone`: the length of a zone abbreviation at the start.
fn parse_time_zone(v: &[u8]) -> Option<usize> {
    if v.len() < 3 {
        return None;
    }
    if v.starts_with(b"ChST") || v.starts_with(b"MeST") {
        return Some(4);
    }
    if v.starts_with(b"GMT") {
        return Some(3 + parse_signed_offset(&v[3..]));
    }
    if matches!(v[0], b'+' | b'-') {
        return Some(parse_signed_offset(v)).filter(|&n| n > 0);
    }
    let upper = v
        .iter()
        .take(6)
        .take_while(|c| c.is_ascii_uppercase())
        .count();
    match upper {
        5 if v[4] == b'T' => Some(5),
        4 if v[3] == b'T' || v.starts_with(b"WITA") => Some(4),
        3 => Some(3),
        _ => None,
    }
}

fn parse_signed_offset(v: &[u8]) -> usize {
    if !matches!(v.first(), Some(b'+' | b'-')) {
        return 0;
    }
    let digits = v[1..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return 0;
    }
    let x = v[1..1 + digits].iter().try_fold(0u64, |a, c| {
        a.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    });
    match x {
        Some(x) if x <= 23 => 1 + digits,
        _ => 0,
    }
}

/// `parseNanoseconds` of `.ddd` (`n` bytes, the separator included).
fn parse_nanos(v: &[u8], n: usize) -> Option<i64> {
    let n = n.min(10);
    let digits = &v[1..n];
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ns = digits
        .iter()
        .fold(0i64, |a, c| a * 10 + i64::from(c - b'0'));
    Some(ns * 10i64.pow((10 - n) as u32))
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days before the first of `month` (1-based), in a common year.
fn days_before(month: i64) -> i64 {
    (1..month).map(|m| days_in(m, 1)).sum()
}

/// Seconds since 1970 of a civil date and time read as UTC.
pub(super) fn wall_seconds(y: i64, m: i64, d: i64, hh: i64, mm: i64, ss: i64) -> Option<i64> {
    let date = NaiveDate::from_ymd_opt(i32::try_from(y).ok()?, m as u32, d as u32)?;
    let days = date
        .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1)?)
        .num_days();
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// A parsed time: Unix seconds and nanoseconds, its year and month and
/// day as read, and the zone it is in (`Time.Zone()`) and its location.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    pub(super) secs: i64,
    pub(super) nsec: i64,
    pub(super) zone: String,
    pub(super) offset: i32,
    pub(super) loc: Location,
}

/// `time.ParseInLocation(layout, value, loc)` (`parse` with the same
/// default and local location).
pub(super) fn parse_in_location(
    layout_s: &str,
    value_s: &str,
    loc: &Location,
) -> Result<Parsed, Error> {
    let perr = |layout_elem: &[u8], value_elem: &[u8], message: &str| {
        Error::Parse(ParseError {
            layout: layout_s.into(),
            value: value_s.into(),
            layout_elem: String::from_utf8_lossy(layout_elem).into_owned(),
            value_elem: String::from_utf8_lossy(value_elem).into_owned(),
            message: message.into(),
        })
    };
    let (mut layout, mut value) = (layout_s.as_bytes(), value_s.as_bytes());
    let (mut am, mut pm) = (false, false);
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0i64, 0i64, 0i64, 0i64);
    let mut utc = false;
    let mut zone_offset: Option<i32> = None;
    let mut zone_name: Vec<u8> = Vec::new();
    loop {
        let (prefix, chunk, suffix) = next_std_chunk(layout);
        let stdstr = &layout[prefix.len()..layout.len() - suffix.len()];
        value = skip(value, prefix).map_err(|v| perr(prefix, v, ""))?;
        let Some((std, _)) = chunk else {
            if !value.is_empty() {
                let rest = String::from_utf8_lossy(value);
                return Err(perr(b"", value, &format!(": extra text: {rest:?}")));
            }
            break;
        };
        layout = suffix;
        let hold = value;
        let mut range_err = "";
        let ok: Option<()> = (|| {
            match std {
                Std::Year => {
                    let p = value.get(..2)?;
                    value = &value[2..];
                    year = std::str::from_utf8(p).ok()?.parse::<i64>().ok()?;
                    year += if year >= 69 { 1900 } else { 2000 };
                }
                Std::LongYear => {
                    if value.len() < 4 || !value[0].is_ascii_digit() {
                        return None;
                    }
                    let p = &value[..4];
                    value = &value[4..];
                    year = std::str::from_utf8(p).ok()?.parse::<i64>().ok()?;
                }
                Std::Month | Std::LongMonth => {
                    let (i, rest) = lookup(&MONTHS, std == Std::Month, value)?;
                    month = i as i64 + 1;
                    value = rest;
                }
                Std::NumMonth | Std::ZeroMonth => {
                    let (m, rest) = getnum(value, std == Std::ZeroMonth)?;
                    (month, value) = (m, rest);
                    if !(1..=12).contains(&month) {
                        range_err = "month";
                    }
                }
                Std::WeekDay => value = lookup(&DAYS, true, value)?.1,
                Std::LongWeekDay => value = lookup(&DAYS, false, value)?.1,
                Std::Day | Std::UnderDay | Std::ZeroDay => {
                    if std == Std::UnderDay && value.first() == Some(&b' ') {
                        value = &value[1..];
                    }
                    (day, value) = getnum(value, std == Std::ZeroDay)?;
                }
                Std::UnderYearDay | Std::ZeroYearDay => {
                    for _ in 0..2 {
                        if std == Std::UnderYearDay && value.first() == Some(&b' ') {
                            value = &value[1..];
                        }
                    }
                    (yday, value) = getnum3(value, std == Std::ZeroYearDay)?;
                }
                Std::Hour => {
                    (hour, value) = getnum(value, false)?;
                    if !(0..24).contains(&hour) {
                        range_err = "hour";
                    }
                }
                Std::Hour12 | Std::ZeroHour12 => {
                    (hour, value) = getnum(value, std == Std::ZeroHour12)?;
                    if !(0..=12).contains(&hour) {
                        range_err = "hour";
                    }
                }
                Std::Minute | Std::ZeroMinute => {
                    (min, value) = getnum(value, std == Std::ZeroMinute)?;
                    if !(0..60).contains(&min) {
                        range_err = "minute";
                    }
                }
                Std::Second | Std::ZeroSecond => {
                    (sec, value) = getnum(value, std == Std::ZeroSecond)?;
                    if !(0..60).contains(&sec) {
                        range_err = "second";
                        return Some(());
                    }
                    // A fraction the layout does not have is read too.
                    if value.len() >= 2
                        && matches!(value[0], b'.' | b',')
                        && value[1].is_ascii_digit()
                    {
                        let next = next_std_chunk(layout).1.map(|(s, _)| s);
                        if matches!(next, Some(Std::FracSecond0(_) | Std::FracSecond9)) {
                            return Some(());
                        }
                        let n = 2 + value[2..].iter().take_while(|c| c.is_ascii_digit()).count();
                        nsec = parse_nanos(value, n)?;
                        value = &value[n..];
                    }
                }
                Std::PM | Std::Pm => {
                    let p = value.get(..2)?;
                    value = &value[2..];
                    let (pm_text, am_text): (&[u8], &[u8]) = if std == Std::PM {
                        (b"PM", b"AM")
                    } else {
                        (b"pm", b"am")
                    };
                    if p == pm_text {
                        pm = true;
                    } else if p == am_text {
                        am = true;
                    } else {
                        return None;
                    }
                }
                Std::Iso8601TZ
                | Std::Iso8601ShortTZ
                | Std::Iso8601ColonTZ
                | Std::Iso8601SecondsTZ
                | Std::Iso8601ColonSecondsTZ
                    if value.first() == Some(&b'Z') =>
                {
                    value = &value[1..];
                    utc = true;
                }
                Std::Iso8601TZ
                | Std::Iso8601ShortTZ
                | Std::Iso8601ColonTZ
                | Std::Iso8601SecondsTZ
                | Std::Iso8601ColonSecondsTZ
                | Std::NumTZ
                | Std::NumShortTZ
                | Std::NumColonTZ
                | Std::NumSecondsTz
                | Std::NumColonSecondsTZ => {
                    let v = value;
                    // sign, hours, minutes, seconds and the length read.
                    let (h, m, s, n): (&[u8], &[u8], &[u8], usize) = match std {
                        Std::Iso8601ColonTZ | Std::NumColonTZ => {
                            if v.len() < 6 || v[3] != b':' {
                                return None;
                            }
                            (&v[1..3], &v[4..6], b"00", 6)
                        }
                        Std::NumShortTZ | Std::Iso8601ShortTZ => {
                            if v.len() < 3 {
                                return None;
                            }
                            (&v[1..3], b"00", b"00", 3)
                        }
                        Std::Iso8601ColonSecondsTZ | Std::NumColonSecondsTZ => {
                            if v.len() < 9 || v[3] != b':' || v[6] != b':' {
                                return None;
                            }
                            (&v[1..3], &v[4..6], &v[7..9], 9)
                        }
                        Std::Iso8601SecondsTZ | Std::NumSecondsTz => {
                            if v.len() < 7 {
                                return None;
                            }
                            (&v[1..3], &v[3..5], &v[5..7], 7)
                        }
                        _ => {
                            if v.len() < 5 {
                                return None;
                            }
                            (&v[1..3], &v[3..5], b"00", 5)
                        }
                    };
                    value = &v[n..];
                    let hr = getnum(h, true)?.0;
                    let mm = getnum(m, true)?.0;
                    let ss = getnum(s, true)?.0;
                    if hr > 24 {
                        range_err = "time zone offset hour";
                    }
                    if mm > 60 {
                        range_err = "time zone offset minute";
                    }
                    if ss > 60 {
                        range_err = "time zone offset second";
                    }
                    let off = ((hr * 60 + mm) * 60 + ss) as i32;
                    zone_offset = Some(match v[0] {
                        b'+' => off,
                        b'-' => -off,
                        _ => return None,
                    });
                }
                Std::TZ => {
                    if value.starts_with(b"UTC") {
                        utc = true;
                        value = &value[3..];
                        return Some(());
                    }
                    let n = parse_time_zone(value)?;
                    zone_name = value[..n].to_vec();
                    value = &value[n..];
                }
                Std::FracSecond0(digits) => {
                    let n = 1 + digits;
                    if value.len() < n {
                        return None;
                    }
                    nsec = parse_nanos(value, n)?;
                    value = &value[n..];
                }
                Std::FracSecond9 => {
                    if value.len() < 2
                        || !matches!(value[0], b'.' | b',')
                        || !value[1].is_ascii_digit()
                    {
                        return Some(());
                    }
                    let i = value[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    nsec = parse_nanos(value, 1 + i)?;
                    value = &value[1 + i..];
                }
            }
            Some(())
        })();
        if !range_err.is_empty() {
            return Err(perr(stdstr, value, &format!(": {range_err} out of range")));
        }
        if ok.is_none() {
            return Err(perr(stdstr, hold, ""));
        }
    }
    if pm && hour < 12 {
        hour += 12;
    } else if am && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        let mut yd = yday;
        let mut m = 0;
        let mut d = 0;
        if is_leap(year) {
            if yd == 31 + 29 {
                (m, d) = (2, 29);
            } else if yd > 31 + 29 {
                yd -= 1;
            }
        }
        if !(1..=365).contains(&yd) {
            return Err(perr(b"", value, ": day-of-year out of range"));
        }
        if m == 0 {
            m = (yd - 1) / 31 + 1;
            if days_before(m + 1) < yd {
                m += 1;
            }
            d = yd - days_before(m);
        }
        if month >= 0 && month != m {
            return Err(perr(b"", value, ": day-of-year does not match month"));
        }
        month = m;
        if day >= 0 && day != d {
            return Err(perr(b"", value, ": day-of-year does not match day"));
        }
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    if day < 1 || day > days_in(month, year) {
        return Err(perr(b"", value, ": day out of range"));
    }
    let wall = wall_seconds(year, month, day, hour, min, sec)
        .ok_or_else(|| Error::Other("time out of range".into()))?;
    let at = |secs: i64, loc: Location| {
        let (zone, offset) = loc.lookup(secs);
        Parsed {
            secs,
            nsec,
            zone,
            offset,
            loc,
        }
    };
    if utc {
        return Ok(at(wall, Location::Utc));
    }
    let name = String::from_utf8_lossy(&zone_name).into_owned();
    if let Some(off) = zone_offset {
        let t = wall - i64::from(off);
        let (lname, loff) = loc.lookup(t);
        if loff == off && (name.is_empty() || lname == name) {
            return Ok(at(t, loc.clone()));
        }
        return Ok(at(t, Location::Fixed(name, off)));
    }
    if !name.is_empty() {
        if let Some(off) = loc.lookup_name(&name, wall) {
            return Ok(at(wall - i64::from(off), loc.clone()));
        }
        let mut off = 0;
        if name.len() > 3 && name.starts_with("GMT") {
            off = name[3..].parse::<i32>().unwrap_or(0) * 3600;
        }
        // Go puts the wall time, read as UTC, in that zone: `GMT+3` names
        // the zone without moving the instant.
        return Ok(at(wall, Location::Fixed(name, off)));
    }
    Ok(at(loc.date(wall), loc.clone()))
}
