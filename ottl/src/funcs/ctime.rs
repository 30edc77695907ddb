//! `FormatTime`'s strptime-style formats, as the Collector's `ctimefmt`
//! reads them: each `%` directive stands for a piece of a Go layout, and
//! the time is written as Go's `time.Format` writes that piece. Times are
//! in UTC here (see the transform page).

use chrono::{DateTime, Datelike as _, Timelike as _, Utc};

use crate::error::EvalResult;
use crate::fail;

/// The directives `ctimefmt` knows.
const DIRECTIVES: &str = "YymoqbhBdegaAHlIpPMSLfsZzwijkDxFTXrRntc%";

/// `ctimefmt.Validate`: the errors the Collector gives when the config
/// loads, word for word.
pub(super) fn validate(format: &str) -> Result<(), String> {
    if format.is_empty() {
        return Err("format cannot be nil".into());
    }
    if format.chars().any(|c| c.is_ascii_digit()) {
        return Err("format string should not contain decimals".into());
    }
    // A fractional directive must follow '.' or ',' (Go's layout needs it).
    let chars: Vec<char> = format.chars().collect();
    for w in chars.windows(3) {
        if w[0] != '.' && w[0] != ',' && w[1] == '%' && "Lfs".contains(w[2]) {
            return Err(format!(
                "invalid fractional seconds directive: '{}'. must be preceded with '.' or ','",
                w.iter().collect::<String>()
            ));
        }
    }
    let unknown: Vec<String> = directive_spans(format)
        .map(|(_, d)| d)
        .filter(|d| !DIRECTIVES.contains(*d))
        .map(|d| format!("unsupported ctimefmt.toNative() directive: %{d}"))
        .collect();
    if !unknown.is_empty() {
        return Err(format!("invalid strptime format: [{}]", unknown.join(" ")));
    }
    Ok(())
}

/// Each directive of `format`: the byte its `%` is at and the character
/// after it, as the regexp `%.` finds them (a `%` at the very end, or
/// before a newline, is text).
pub(super) fn directive_spans(format: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut it = format.char_indices().peekable();
    std::iter::from_fn(move || loop {
        let (i, c) = it.next()?;
        if c == '%' {
            if let Some(&(_, d)) = it.peek() {
                if d != '\n' {
                    it.next();
                    return Some((i, d));
                }
            }
        }
    })
}

/// `t` (nanoseconds since 1970, UTC) written as `format` says.
pub(super) fn format(format: &str, t: i64) -> EvalResult<String> {
    if let Err(e) = validate(format) {
        fail!("{e}");
    }
    let t = DateTime::<Utc>::from_timestamp_nanos(t);
    let mut out = String::with_capacity(format.len() + 16);
    let mut it = format.chars().peekable();
    while let Some(c) = it.next() {
        match (c, it.peek().copied()) {
            ('%', Some(d)) if d != '\n' => {
                it.next();
                directive(&mut out, d, &t);
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// Go's month and day names (the short ones are their first three
/// letters).
pub(super) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(super) const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Writes one directive as Go writes the layout piece it stands for.
fn directive(out: &mut String, d: char, t: &DateTime<Utc>) {
    use std::fmt::Write as _;
    let month = MONTHS[t.month0() as usize];
    let day = DAYS[t.weekday().num_days_from_sunday() as usize];
    let hour12 = match t.hour() % 12 {
        0 => 12,
        h => h,
    };
    let pm = if t.hour() >= 12 { "PM" } else { "AM" };
    let _ = match d {
        'Y' => write!(out, "{:04}", t.year()),
        'y' => write!(out, "{:02}", t.year().rem_euclid(100)),
        'm' => write!(out, "{:02}", t.month()),
        // "_1" is no layout piece in Go: an underscore, then the month.
        'o' => write!(out, "_{}", t.month()),
        'q' => write!(out, "{}", t.month()),
        'b' | 'h' => write!(out, "{}", &month[..3]),
        'B' => write!(out, "{month}"),
        'd' => write!(out, "{:02}", t.day()),
        'e' => write!(out, "{:>2}", t.day()),
        'g' => write!(out, "{}", t.day()),
        'a' => write!(out, "{}", &day[..3]),
        'A' => write!(out, "{day}"),
        'H' => write!(out, "{:02}", t.hour()),
        'l' => write!(out, "{hour12}"),
        'I' => write!(out, "{hour12:02}"),
        'p' => write!(out, "{pm}"),
        'P' => write!(out, "{}", pm.to_ascii_lowercase()),
        'M' => write!(out, "{:02}", t.minute()),
        'S' => write!(out, "{:02}", t.second()),
        'L' => fraction(out, t.nanosecond(), 3),
        'f' => fraction(out, t.nanosecond(), 6),
        's' => fraction(out, t.nanosecond(), 9),
        'Z' => write!(out, "UTC"),
        // Go writes a UTC offset as "Z" where the layout starts with Z.
        'z' => write!(out, "Z"),
        'w' => write!(out, "+000000"),
        'i' => write!(out, "+00"),
        'j' => write!(out, "+00:00"),
        'k' => write!(out, "+00:00:00"),
        'D' | 'x' => write!(out, "{:02}/{:02}/{:04}", t.month(), t.day(), t.year()),
        'F' => write!(out, "{:04}-{:02}-{:02}", t.year(), t.month(), t.day()),
        'T' | 'X' => write!(out, "{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second()),
        'r' => write!(
            out,
            "{hour12:02}:{:02}:{:02} {}",
            t.minute(),
            t.second(),
            pm.to_ascii_lowercase()
        ),
        'R' => write!(out, "{:02}:{:02}", t.hour(), t.minute()),
        'n' => out.write_char('\n'),
        't' => out.write_char('\t'),
        '%' => out.write_char('%'),
        'c' => write!(
            out,
            "{} {} {:02} {:02}:{:02}:{:02} {:04}",
            &day[..3],
            &month[..3],
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.year()
        ),
        // `validate` refused anything else.
        _ => Ok(()),
    };
}

/// Go's ".999": `digits` of the fraction without its trailing zeros, and
/// without the separator before it when nothing is left.
fn fraction(out: &mut String, nanos: u32, digits: u32) -> std::fmt::Result {
    let scaled = nanos / 10u32.pow(9 - digits);
    let text = format!("{scaled:0width$}", width = digits as usize);
    let text = text.trim_end_matches('0');
    if text.is_empty() {
        if out.ends_with(['.', ',']) {
            out.pop();
        }
    } else {
        out.push_str(text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2023-05-26T12:34:56.120Z and its night twin.
    const T: i64 = 1_685_104_496_120_000_000;
    const NIGHT: i64 = 1_672_624_800_000_000_000; // 2023-01-02T02:00:00Z

    #[test]
    fn formats_as_go_writes_the_layout() {
        let f = |s: &str, t: i64| format(s, t).unwrap();
        assert_eq!(f("%Y-%m-%d %H:%M:%S", T), "2023-05-26 12:34:56");
        assert_eq!(f("%Y-%m-%dT%H:%M:%S.%L%z", T), "2023-05-26T12:34:56.12Z");
        assert_eq!(f("%H:%M:%S,%f", NIGHT), "02:00:00");
        assert_eq!(f("%a %b %e %l %p", NIGHT), "Mon Jan  2 2 AM");
        assert_eq!(f("%A, %B %g %I:%M %P", T), "Friday, May 26 12:34 pm");
        assert_eq!(f("%c", T), "Fri May 26 12:34:56 2023");
        assert_eq!(
            f("%D %F %T %r %R", NIGHT),
            "01/02/2023 2023-01-02 02:00:00 02:00:00 am 02:00"
        );
        assert_eq!(f("%y%o%q %Z %j %% end%", T), "23_55 UTC +00:00 % end%");
    }

    #[test]
    fn refuses_what_the_collector_refuses() {
        assert_eq!(validate("").unwrap_err(), "format cannot be nil");
        assert_eq!(
            validate("%Y-01").unwrap_err(),
            "format string should not contain decimals"
        );
        assert_eq!(
            validate("%S%L").unwrap_err(),
            "invalid fractional seconds directive: 'S%L'. must be preceded with '.' or ','"
        );
        assert_eq!(
            validate("%Q %Y %E").unwrap_err(),
            "invalid strptime format: [unsupported ctimefmt.toNative() directive: %Q unsupported ctimefmt.toNative() directive: %E]"
        );
    }
}
