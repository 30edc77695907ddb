//! Lenient field types for Sentry payloads. Real SDKs are looser than the
//! spec: v1 sends numbers as strings, `thread_id` comes as a string or a
//! number, addresses as `"0x..."` strings or numbers. Strings borrow from the
//! input whenever they hold no escapes.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A string borrowed from the payload when possible (serde's own
/// `Option<Cow<str>>` never borrows).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CowStr<'a>(pub Cow<'a, str>);

impl Deref for CowStr<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// Lets maps keyed by `CowStr` be searched with a `&str`.
impl std::borrow::Borrow<str> for CowStr<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CowStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for CowStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A thread id as sent: the spec says string, some SDKs send a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadId<'a> {
    Str(Cow<'a, str>),
    Num(u64),
}

impl ThreadId<'_> {
    /// The id as Sentry spells it (a string), formatted into `buf` when numeric.
    pub fn as_str<'s>(&'s self, buf: &'s mut DecimalBuf) -> &'s str {
        match self {
            ThreadId::Str(s) => s,
            ThreadId::Num(n) => buf.format(*n),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ThreadId<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ThreadId<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a thread id (string or non-negative integer)")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ThreadId::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ThreadId::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(ThreadId::Num(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                match u64::try_from(v) {
                    Ok(v) => Ok(ThreadId::Num(v)),
                    Err(_) => Ok(ThreadId::Str(Cow::Owned(v.to_string()))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Formats a `u64` in decimal without allocating.
#[derive(Default)]
pub struct DecimalBuf([u8; 20]);

impl DecimalBuf {
    pub fn format(&mut self, mut n: u64) -> &str {
        let mut i = self.0.len();
        loop {
            i -= 1;
            self.0[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        // Only ASCII digits were written.
        std::str::from_utf8(&self.0[i..]).unwrap_or("0")
    }
}

/// A non-negative integer sent as a number or a decimal string.
struct U64Visitor;

impl Visitor<'_> for U64Visitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a non-negative integer or a string holding one")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("negative number {v}")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 1.8e19 {
            Ok(v as u64)
        } else {
            Err(E::custom(format!(
                "expected a non-negative integer, got {v}"
            )))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        v.trim()
            .parse()
            .map_err(|_| E::custom(format!("expected an integer, got {v:?}")))
    }
}

pub fn u64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(U64Visitor)
}

pub fn usize_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let v = d.deserialize_any(U64Visitor)?;
    usize::try_from(v).map_err(|_| de::Error::custom("index out of range"))
}

pub fn opt_u64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an optional non-negative integer")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(U64Visitor).map(Some)
        }
    }
    d.deserialize_option(V)
}

/// A signed integer sent as a number or a string; `null` is none.
pub fn opt_i64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    struct I;
    impl Visitor<'_> for I {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an integer")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom("integer out of range"))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.2e18 {
                Ok(v as i64)
            } else {
                Err(E::custom(format!("expected an integer, got {v}")))
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
            v.trim()
                .parse()
                .map_err(|_| E::custom(format!("expected an integer, got {v:?}")))
        }
    }
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an optional integer")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(I).map(Some)
        }
    }
    d.deserialize_option(V)
}

/// A float sent as a number or a numeric string.
pub fn f64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number or a string holding one")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            v.trim()
                .parse()
                .map_err(|_| E::custom(format!("expected a number, got {v:?}")))
        }
    }
    d.deserialize_any(V)
}

/// `true`/`false`, also as the strings SDKs sometimes send; `null` is none.
pub fn opt_bool_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<bool>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a boolean")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "true" | "1" => Ok(Some(true)),
                "false" | "0" => Ok(Some(false)),
                _ => Err(E::custom(format!("expected a boolean, got {v:?}"))),
            }
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    d.deserialize_option(V)
}

/// Parses an address as Sentry writes it: `"0x1a2b"`, a decimal string or a number.
pub fn parse_addr(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

pub fn opt_addr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct A;
    impl Visitor<'_> for A {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an address (\"0x...\" or a number)")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            // Some SDKs print addresses as signed 64-bit numbers.
            Ok(v as u64)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            parse_addr(v).ok_or_else(|| E::custom(format!("invalid address {v:?}")))
        }
    }
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an optional address")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(A).map(Some)
        }
    }
    d.deserialize_option(V)
}

/// The `version` field: `"1"`, `"2"` (also as numbers).
pub fn version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a format version such as \"2\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::custom("version out of range"))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u32, E> {
            v.trim()
                .parse()
                .map_err(|_| E::custom(format!("unknown version {v:?}")))
        }
    }
    d.deserialize_any(V)
}

/// The `version` field as a type, for optional use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version(pub u32);

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        version(d).map(Version)
    }
}

/// A point in time as SDKs write it: RFC 3339 text or float unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub u64);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp or unix seconds")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Timestamp, E> {
                super::time::secs_to_unix_nanos(v)
                    .map(Timestamp)
                    .ok_or_else(|| E::custom(format!("timestamp {v} out of range")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Timestamp, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Timestamp, E> {
                self.visit_f64(v as f64)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                if let Some(ns) = super::time::parse_rfc3339(v) {
                    return Ok(Timestamp(ns));
                }
                match v.trim().parse::<f64>() {
                    Ok(secs) => self.visit_f64(secs),
                    Err(_) => Err(E::custom(format!("invalid timestamp {v:?}"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A parse error of `payload` as `T`, with the path of the field that
/// broke (`profile.samples[3].stack_id: invalid type ...`). The path is
/// found by parsing again with tracking, only once a parse has failed, so
/// the parse that succeeds pays nothing for it.
pub fn located<'a, T: Deserialize<'a>>(payload: &'a [u8], first: serde_json::Error) -> String {
    let mut de = serde_json::Deserializer::from_slice(payload);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(e) if e.path().iter().next().is_some() => format!("{}: {}", e.path(), e.inner()),
        _ => first.to_string(),
    }
}
