//! `Time(target, format, location, locale)`: a time read as the Collector
//! reads it. Its `ctimefmt` turns each `%` directive into a piece of a Go
//! layout, trying laxer pieces where one fails (`%m` as `1`, so `3` and
//! `03` both read, leading spaces, three `%z` forms), and Go's
//! `time.ParseInLocation` reads the value; a zone abbreviation the
//! location does not know is then looked up as a location of that name
//! (`EST`; `PST`, which is none, fails). Both are kept here as Go has
//! them, layout pieces and errors included, so that what one reads the
//! other reads.

mod layout;
mod location;

use chrono::{Datelike as _, NaiveDate, Timelike as _};

use layout::{parse_in_location, wall_seconds, Error, Parsed};
use location::{local, Location};

use super::ctime::directive_spans;

/// `timeutils.ParseGotime`: the parse, a zone abbreviation looked up as a
/// location, and a time without a year put in the current one.
fn parse_gotime(layout: &str, value: &str, loc: &Location) -> Result<Parsed, Error> {
    let result = parse_in_location(layout, value, loc);
    let result = match result {
        Ok(r) if r.offset == 0 && r.zone != "UTC" && r.zone != loc.lookup(r.secs).0 => {
            let zloc = Location::load(&r.zone)
                .map_err(|e| Error::Other(format!("failed to load location {}: {e}", r.zone)))?;
            parse_in_location(layout, value, &zloc).unwrap_or(r)
        }
        other => other?,
    };
    Ok(set_year(result))
}

/// `SetTimestampYear`: a time of year 0 is put in the current year, or
/// the last one if that puts it more than a week ahead.
fn set_year(t: Parsed) -> Parsed {
    let wall = t.secs + i64::from(t.offset);
    let Some(date) = chrono::DateTime::from_timestamp(wall, 0) else {
        return t;
    };
    if date.year() > 0 {
        return t;
    }
    let now = chrono::Utc::now();
    let local_now = now.timestamp() + i64::from(local().lookup(now.timestamp()).1);
    let this_year = chrono::DateTime::from_timestamp(local_now, 0).map_or(1970, |d| d.year());
    let at_year = |y: i32| -> Option<i64> {
        // Go's Date normalises 29 February of a common year to 1 March.
        let (m, d) = (date.month(), date.day());
        let day = NaiveDate::from_ymd_opt(y, m, 1)?
            .checked_add_days(chrono::Days::new(u64::from(d - 1)))?;
        let tod = i64::from(date.num_seconds_from_midnight());
        let wall = wall_seconds(
            i64::from(day.year()),
            i64::from(day.month()),
            i64::from(day.day()),
            0,
            0,
            0,
        )? + tod;
        Some(t.loc.date(wall))
    };
    let Some(mut secs) = at_year(this_year) else {
        return t;
    };
    if secs > now.timestamp() + 7 * 86_400 {
        secs = at_year(this_year - 1).unwrap_or(secs);
    }
    let (zone, offset) = t.loc.lookup(secs);
    Parsed {
        secs,
        zone,
        offset,
        ..t
    }
}
/// `ctimefmt`'s layout piece of each directive, and the laxer ones its
/// parse tries instead (`ctimeParseSubstitutes`), element by element.
fn substitutes(directive: char) -> Option<&'static [&'static [&'static str]]> {
    Some(match directive {
        'm' | 'o' | 'q' => &[&["1"]],
        'd' | 'e' | 'g' => &[&["2"]],
        'I' => &[&["3"]],
        'M' => &[&["4"]],
        'S' => &[&["5"]],
        'D' | 'x' => &[&["1", "/", "2", "/", "2006"], &["1", "/", "2", "/", "06"]],
        'F' => &[&["2006", "-", "1", "-", "2"]],
        'T' | 'X' => &[&["15", ":", "4", ":", "5"]],
        'r' => &[&["3", ":", "4", ":", "5", " ", "pm"]],
        'R' => &[&["15", ":", "4"]],
        'c' => &[&[
            "Mon", " ", "Jan", " ", "2", " ", "15", ":", "4", ":", "5", " ", "2006",
        ]],
        'z' => &[&["Z0700"], &["Z07:00"], &["Z07"]],
        'Y' => &[&["2006"]],
        'y' => &[&["06"]],
        'b' | 'h' => &[&["Jan"]],
        'B' => &[&["January"]],
        'a' => &[&["Mon"]],
        'A' => &[&["Monday"]],
        'H' => &[&["15"]],
        'l' => &[&["3"]],
        'p' => &[&["PM"]],
        'P' => &[&["pm"]],
        'L' => &[&["999"]],
        'f' => &[&["999999"]],
        's' => &[&["999999999"]],
        'Z' => &[&["MST"]],
        'w' => &[&["-070000"]],
        'i' => &[&["-07"]],
        'j' => &[&["-07:00"]],
        'k' => &[&["-07:00:00"]],
        'n' => &[&["\n"]],
        't' => &[&["\t"]],
        '%' => &[&["%"]],
        _ => return None,
    })
}

/// Layouts tried for one value at most: each directive whose piece
/// fails tries its laxer ones, which multiplies over the directives where
/// a value fails late; a real format that reads needs a few.
const MAX_ATTEMPTS: u32 = 1024;

/// `Time`'s parser: the format and where a time without a zone is.
#[derive(Debug)]
pub struct TimeParser {
    format: String,
    loc: Location,
}

impl TimeParser {
    /// What the Collector checks when the statement loads.
    pub(super) fn new(
        format: &str,
        location: Option<&str>,
        locale: Option<&str>,
    ) -> Result<TimeParser, String> {
        if format.is_empty() {
            return Err("format cannot be nil".into());
        }
        let loc = match location.filter(|l| !l.is_empty()) {
            Some(l) => {
                Location::load(l).map_err(|e| format!("failed to load location {l}: {e}"))?
            }
            None if format.ends_with('Z') => Location::Utc,
            None => local(),
        };
        if let Some(l) = locale {
            // lunes translates other languages' names into English; only
            // English (which needs none) is read here.
            let lang = l.split(['-', '_']).next().unwrap_or("");
            if !lang.eq_ignore_ascii_case("en") {
                return Err(format!(
                    "unsupported locale '{l}': profcol reads English month and day names only"
                ));
            }
        }
        super::ctime::validate(format)?;
        Ok(TimeParser {
            format: format.to_owned(),
            loc,
        })
    }

    /// The time `value` stands for, nanoseconds since 1970.
    pub(super) fn parse(&self, value: &str) -> Result<i64, String> {
        if value.is_empty() {
            return Err("time cannot be nil".into());
        }
        let directives: Vec<_> = directive_spans(&self.format).collect();
        let budget = std::cell::Cell::new(MAX_ATTEMPTS);
        let (result, _) = self.iterate(String::new(), 0, &directives, value, &budget);
        let t = result.map_err(|e| match e {
            Error::Parse(mut p) => {
                p.layout = self.format.clone();
                p.to_string()
            }
            Error::Other(e) => e,
        })?;
        t.secs
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(t.nsec))
            .ok_or_else(|| "time out of range".to_owned())
    }

    /// `iterativeParse`: each directive's pieces in turn, a laxer one
    /// where the value failed at this directive's piece.
    fn iterate(
        &self,
        partial: String,
        start: usize,
        spans: &[(usize, char)],
        value: &str,
        budget: &std::cell::Cell<u32>,
    ) -> (Result<Parsed, Error>, String) {
        let Some((&(at, directive), rest)) = spans.split_first() else {
            if budget.get() == 0 {
                return (
                    Err(Error::Other(format!(
                        "the value did not match the format in {MAX_ATTEMPTS} layouts"
                    ))),
                    String::new(),
                );
            }
            budget.set(budget.get() - 1);
            let layout = partial + &self.format[start..];
            return (parse_gotime(&layout, value, &self.loc), layout);
        };
        let partial = partial + &self.format[start..at];
        let next = at + 1 + directive.len_utf8();
        let mut last = (Err(Error::Other(String::new())), String::new());
        // Where the value failed at one of `elements`: its index and the
        // value from there.
        let try_elements = |elements: &[String], last: &mut (Result<Parsed, Error>, String)| {
            *last = self.iterate(
                partial.clone() + &elements.concat(),
                next,
                rest,
                value,
                budget,
            );
            if let (Err(Error::Parse(e)), _) = last {
                if !e.layout_elem.is_empty() {
                    if let Some(i) = elements.iter().position(|x| *x == e.layout_elem) {
                        e.layout_elem = format!("%{directive}");
                        return Some((i, e.value_elem.clone()));
                    }
                }
            }
            None
        };
        let Some(substs) = substitutes(directive) else {
            return (
                Err(Error::Other(format!(
                    "unsupported ctimefmt.FlexibleParse() directive: %{directive}"
                ))),
                String::new(),
            );
        };
        for subst in substs {
            let mut elements: Vec<String> = subst.iter().map(|s| s.to_string()).collect();
            let failed_here = loop {
                match try_elements(&elements, &mut last) {
                    Some((i, remainder)) => {
                        let first = elements[i].as_bytes()[0];
                        let space: String = remainder
                            .chars()
                            .take_while(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c'))
                            .collect();
                        if (first.is_ascii_digit() || first == b'Z') && !space.is_empty() {
                            elements.insert(i, space);
                            continue;
                        }
                        break true;
                    }
                    None => break false,
                }
            };
            if !failed_here {
                break;
            }
        }
        last
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    proptest! {
        /// Any value under any format the config accepts is read or is an
        /// error, never a panic.
        #[test]
        fn any_value_is_read_or_refused(
            format in "(%[YymoqbhBdegaAHlIpPMSZzwijkDxFTXrRntc%]|[ :/T.,-]|Jan|MST){1,6}",
            value in "[ -~]{0,32}|[0-9 :/T.,+-]{0,32}",
        ) {
            if let Ok(p) = super::TimeParser::new(&format, None, None) {
                let _ = p.parse(&value);
            }
        }
    }
}
