use std::fmt;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as Go's `time.ParseDuration` reads it (`5s`, `1m30s`,
/// `250ms`, `1.5h`), as in Collector configs. A bare integer is nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    pub const fn from_secs(s: u64) -> Self {
        Self(std::time::Duration::from_secs(s))
    }

    pub const fn from_millis(ms: u64) -> Self {
        Self(std::time::Duration::from_millis(ms))
    }

    /// Parses Go duration syntax: a sequence of decimal numbers, each with an
    /// optional fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`).
    /// Negative durations are refused: no Collector setting means one.
    pub fn parse(s: &str) -> Result<Self, String> {
        let err = || format!("invalid duration {s:?}");
        let mut rest = s.strip_prefix('+').unwrap_or(s);
        if rest == "0" {
            return Ok(Self::default());
        }
        if rest.is_empty() {
            return Err(err());
        }
        let mut total: f64 = 0.0;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(err)?;
            let (num, tail) = rest.split_at(num_len);
            if num.is_empty() || num == "." {
                return Err(err());
            }
            let value: f64 = num.parse().map_err(|_| err())?;
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let scale = match unit {
                "ns" => 1.0,
                "us" | "µs" | "μs" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                "m" => 60e9,
                "h" => 3600e9,
                _ => return Err(err()),
            };
            total += value * scale;
            rest = tail;
        }
        if !total.is_finite() || total > u64::MAX as f64 {
            return Err(err());
        }
        Ok(Self(std::time::Duration::from_nanos(total.round() as u64)))
    }

    pub fn get(self) -> std::time::Duration {
        self.0
    }

    /// `None` for zero, which Collector settings read as "no limit".
    pub fn nonzero(self) -> Option<std::time::Duration> {
        (!self.0.is_zero()).then_some(self.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            f.write_str("0s")
        } else if ns.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns.is_multiple_of(1_000_000) {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as \"5s\" or \"250ms\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                Duration::parse(s).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Duration, E> {
                Ok(Duration(std::time::Duration::from_nanos(n)))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Duration, E> {
                u64::try_from(n)
                    .map(|n| Duration(std::time::Duration::from_nanos(n)))
                    .map_err(|_| E::custom(format!("invalid duration {n}: negative")))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::Duration;
    use std::time::Duration as D;

    #[test]
    fn parses_go_durations() {
        for (s, want) in [
            ("5s", D::from_secs(5)),
            ("0", D::ZERO),
            ("250ms", D::from_millis(250)),
            ("1m30s", D::from_secs(90)),
            ("1.5h", D::from_secs(5400)),
            ("10us", D::from_micros(10)),
            ("7ns", D::from_nanos(7)),
        ] {
            assert_eq!(Duration::parse(s).unwrap().get(), want, "{s}");
        }
    }

    #[test]
    fn refuses_what_go_refuses() {
        for s in ["5 sec", "5", "", "s", "-5s", "5sec", "1d", "."] {
            assert_eq!(
                Duration::parse(s).unwrap_err(),
                format!("invalid duration {s:?}"),
                "{s}"
            );
        }
    }
}
