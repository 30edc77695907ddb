//! The unit table: every spelling real producers use, mapped to one unit
//! with its name in each vocabulary and its factor to the base unit.
//!
//! Spellings come from pprof (`internal/measurement`: `nanoseconds`, `ms`,
//! `kb`, `hrs`, matched case-insensitively with a plural `s` dropped), Sentry
//! (Relay's `MetricUnit`: `nanosecond`, `byte`, `kibibyte`, `percent`,
//! `none`; SDK measurements: `hz`, `hertz`) and UCUM as OpenTelemetry uses it
//! (`ns`, `By`, `KiBy`, `1`, `%`, `Hz`).
//!
//! Byte multiples follow pprof, the format that defines units for profiles:
//! `kb`/`kilobyte` mean 1024 bytes. Only UCUM's case-sensitive `kBy`, `MBy`,
//! `GBy` are decimal.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

/// The vocabulary units are written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// `ns`, `us`, `ms`, `s`, `By`, `KiBy`, `MiBy`, `1`, `%`, `Hz`.
    #[default]
    Ucum,
    /// `nanoseconds`, `microseconds`, `milliseconds`, `seconds`, `bytes`,
    /// `kilobytes`, `count`, `percent`, `hertz`.
    Pprof,
}

/// What a unit measures; units convert only within one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dimension {
    Time,
    Information,
    /// Dimensionless counts (`1`, `count`).
    Count,
    Percent,
    Frequency,
}

/// One unit: its names and how many base units it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub ucum: &'static str,
    pub pprof: &'static str,
    pub dimension: Dimension,
    /// Base units in one of this unit (ns, bytes, 1, %, Hz); exact.
    pub factor: i64,
}

impl Unit {
    const fn new(
        ucum: &'static str,
        pprof: &'static str,
        dimension: Dimension,
        factor: i64,
    ) -> Self {
        Self {
            ucum,
            pprof,
            dimension,
            factor,
        }
    }

    pub fn name(&self, target: Target) -> &'static str {
        match target {
            Target::Ucum => self.ucum,
            Target::Pprof => self.pprof,
        }
    }

    /// The unit values of this dimension are scaled to.
    pub fn base(&self) -> Unit {
        match self.dimension {
            Dimension::Time => NANOSECOND,
            Dimension::Information => BYTE,
            Dimension::Count => COUNT,
            Dimension::Percent => PERCENT,
            Dimension::Frequency => HERTZ,
        }
    }
}

pub const NANOSECOND: Unit = Unit::new("ns", "nanoseconds", Dimension::Time, 1);
pub const MICROSECOND: Unit = Unit::new("us", "microseconds", Dimension::Time, 1_000);
pub const MILLISECOND: Unit = Unit::new("ms", "milliseconds", Dimension::Time, 1_000_000);
pub const SECOND: Unit = Unit::new("s", "seconds", Dimension::Time, 1_000_000_000);
pub const MINUTE: Unit = Unit::new("min", "minutes", Dimension::Time, 60 * SECOND.factor);
pub const HOUR: Unit = Unit::new("h", "hours", Dimension::Time, 3_600 * SECOND.factor);
pub const DAY: Unit = Unit::new("d", "days", Dimension::Time, 86_400 * SECOND.factor);
pub const WEEK: Unit = Unit::new("wk", "weeks", Dimension::Time, 604_800 * SECOND.factor);

pub const BYTE: Unit = Unit::new("By", "bytes", Dimension::Information, 1);
pub const KIBIBYTE: Unit = Unit::new("KiBy", "kilobytes", Dimension::Information, 1 << 10);
pub const MEBIBYTE: Unit = Unit::new("MiBy", "megabytes", Dimension::Information, 1 << 20);
pub const GIBIBYTE: Unit = Unit::new("GiBy", "gigabytes", Dimension::Information, 1 << 30);
pub const TEBIBYTE: Unit = Unit::new("TiBy", "terabytes", Dimension::Information, 1 << 40);
pub const PEBIBYTE: Unit = Unit::new("PiBy", "petabytes", Dimension::Information, 1 << 50);
// pprof has no decimal byte multiples (its `kilobytes` is 1024), so these
// keep their UCUM names in both vocabularies.
pub const KILOBYTE_SI: Unit = Unit::new("kBy", "kBy", Dimension::Information, 1_000);
pub const MEGABYTE_SI: Unit = Unit::new("MBy", "MBy", Dimension::Information, 1_000_000);
pub const GIGABYTE_SI: Unit = Unit::new("GBy", "GBy", Dimension::Information, 1_000_000_000);

pub const COUNT: Unit = Unit::new("1", "count", Dimension::Count, 1);
pub const PERCENT: Unit = Unit::new("%", "percent", Dimension::Percent, 1);
pub const HERTZ: Unit = Unit::new("Hz", "hertz", Dimension::Frequency, 1);
pub const KILOHERTZ: Unit = Unit::new("kHz", "kilohertz", Dimension::Frequency, 1_000);
pub const MEGAHERTZ: Unit = Unit::new("MHz", "megahertz", Dimension::Frequency, 1_000_000);
pub const GIGAHERTZ: Unit = Unit::new("GHz", "gigahertz", Dimension::Frequency, 1_000_000_000);

/// Spellings whose case carries meaning (UCUM prefixes: `MBy` is decimal
/// megabytes, `MiBy` binary), matched as written.
const EXACT: &[(&str, Unit)] = &[
    ("By", BYTE),
    ("KiBy", KIBIBYTE),
    ("MiBy", MEBIBYTE),
    ("GiBy", GIBIBYTE),
    ("TiBy", TEBIBYTE),
    ("PiBy", PEBIBYTE),
    ("kBy", KILOBYTE_SI),
    ("MBy", MEGABYTE_SI),
    ("GBy", GIGABYTE_SI),
    ("kHz", KILOHERTZ),
    ("MHz", MEGAHERTZ),
    ("GHz", GIGAHERTZ),
    ("d", DAY),
    ("wk", WEEK),
    ("{sample}", COUNT),
    ("{samples}", COUNT),
    ("{count}", COUNT),
];

/// Spellings matched as pprof does: lower-cased, and with one trailing `s`
/// dropped from words longer than two letters (`seconds`, `hrs`, `bytes`).
const FOLDED: &[(&str, Unit)] = &[
    ("ns", NANOSECOND),
    ("nanosecond", NANOSECOND),
    ("us", MICROSECOND),
    ("µs", MICROSECOND), // U+00B5 MICRO SIGN
    ("μs", MICROSECOND), // U+03BC GREEK SMALL LETTER MU, as pprof writes it
    ("microsecond", MICROSECOND),
    ("ms", MILLISECOND),
    ("millisecond", MILLISECOND),
    ("s", SECOND),
    ("sec", SECOND),
    ("second", SECOND),
    ("min", MINUTE),
    ("minute", MINUTE),
    ("h", HOUR),
    ("hr", HOUR),
    ("hour", HOUR),
    ("day", DAY),
    ("week", WEEK),
    ("b", BYTE),
    ("byte", BYTE),
    ("kb", KIBIBYTE),
    ("kbyte", KIBIBYTE),
    ("kilobyte", KIBIBYTE),
    ("kib", KIBIBYTE),
    ("kibibyte", KIBIBYTE),
    ("mb", MEBIBYTE),
    ("mbyte", MEBIBYTE),
    ("megabyte", MEBIBYTE),
    ("mib", MEBIBYTE),
    ("mebibyte", MEBIBYTE),
    ("gb", GIBIBYTE),
    ("gbyte", GIBIBYTE),
    ("gigabyte", GIBIBYTE),
    ("gib", GIBIBYTE),
    ("gibibyte", GIBIBYTE),
    ("tb", TEBIBYTE),
    ("tbyte", TEBIBYTE),
    ("terabyte", TEBIBYTE),
    ("tib", TEBIBYTE),
    ("tebibyte", TEBIBYTE),
    ("pb", PEBIBYTE),
    ("pbyte", PEBIBYTE),
    ("petabyte", PEBIBYTE),
    ("pib", PEBIBYTE),
    ("pebibyte", PEBIBYTE),
    ("1", COUNT),
    ("count", COUNT),
    ("sample", COUNT),
    ("none", COUNT),
    ("%", PERCENT),
    ("percent", PERCENT),
    ("hz", HERTZ),
    ("hertz", HERTZ),
    ("kilohertz", KILOHERTZ),
    ("megahertz", MEGAHERTZ),
    ("gigahertz", GIGAHERTZ),
];

static EXACT_MAP: LazyLock<HashMap<&'static str, Unit>> =
    LazyLock::new(|| EXACT.iter().copied().collect());
static FOLDED_MAP: LazyLock<HashMap<&'static str, Unit>> =
    LazyLock::new(|| FOLDED.iter().copied().collect());

/// The unit `spelling` names, if it is one this table knows.
pub fn parse(spelling: &str) -> Option<Unit> {
    let s = spelling.trim();
    if s.is_empty() {
        return None;
    }
    if let Some(u) = EXACT_MAP.get(s) {
        return Some(*u);
    }
    let lower = s.to_lowercase();
    let folded = match lower.strip_suffix('s') {
        Some(stem) if lower.chars().count() > 2 => stem,
        _ => &lower,
    };
    FOLDED_MAP
        .get(folded)
        .or_else(|| FOLDED_MAP.get(lower.as_str()))
        .copied()
}

/// Every spelling the table knows, as written in it (for tests and docs).
pub fn spellings() -> impl Iterator<Item = (&'static str, Unit)> {
    EXACT.iter().chain(FOLDED).copied()
}
