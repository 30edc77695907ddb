//! Converters: functions whose names start uppercase, used as values and
//! as conditions.

use std::borrow::Cow;

use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue, KeyValueList};

use super::args::{self, bind, opt, req, Kind, P};
use super::strings::{parse_duration, sha256_hex, sprintf, to_camel, to_snake};
use super::{decode, uri, Pattern};
use crate::ast;
use crate::compile::{Compiler, Expr};
use crate::context::{any_type, Ctx};
use crate::error::{EvalResult, ParseError};
use crate::fail;
use crate::value::Val;

#[derive(Debug, Clone, Copy)]
pub enum Case {
    Lower,
    Upper,
    Snake,
    Camel,
}

#[derive(Debug)]
pub enum Converter {
    IsMatch(Expr, Pattern),
    Concat(Expr, Expr),
    ConvertCase(Expr, Case),
    ToLowerCase(Expr),
    ToUpperCase(Expr),
    Split(Expr, Expr),
    Substring(Expr, Expr, Expr, bool),
    Len(Expr),
    Int(Expr),
    Double(Expr),
    String(Expr),
    IsString(Expr),
    IsMap(Expr),
    IsInt(Expr),
    IsDouble(Expr),
    IsBool(Expr),
    IsList(Expr),
    Sha256(Expr),
    Hex(Expr),
    ParseJson(Expr),
    Format(String, Vec<Expr>),
    Now,
    UnixNano(Expr),
    UnixMicro(Expr),
    UnixMilli(Expr),
    UnixSeconds(Expr),
    TruncateTime(Expr, Expr),
    Duration(Expr),
    /// `strings.Trim` with a cutset (a space unless given).
    Trim(Expr, String),
    TrimPrefix(Expr, Expr),
    TrimSuffix(Expr, Expr),
    HasPrefix(Expr, Expr),
    HasSuffix(Expr, Expr),
    Keys(Expr),
    Values(Expr),
    Base64Encode(Expr, Option<Expr>),
    Digest(Expr, Digest),
    /// A duration in `Unit`s, as Go's `Duration` methods give it.
    DurationIn(Expr, Unit),
    Unix(Expr, Option<Expr>),
    /// A part of a time, in UTC.
    TimePart(Expr, Part),
    ExtractPatterns(Expr, Pattern),
    /// `Sort(target, order)`: descending when `true`.
    Sort(Expr, bool),
    /// `Decode(target, encoding)`, the encoding read at load when literal.
    Decode(Expr, DecodeWith),
    /// `ParseSeverity(target, severityMapping)`.
    ParseSeverity(Expr, super::severity::Mapping),
    Url(Expr),
    /// `Time(time, format, location, locale)`.
    Time(Expr, super::strptime::TimeParser),
    /// `ProfileID(target)`, folded at load for a literal.
    ProfileId(Expr),
    /// `ParseKeyValue(target, delimiter, pair_delimiter)`.
    ParseKeyValue(Expr, String, String),
    /// `ParseCSV(target, header, delimiter, header_delimiter, mode)`.
    ParseCsv(Expr, Expr, char, String, super::csv::Mode),
    /// `ToKeyValueString(target, delimiter, pair_delimiter, sort_output)`.
    ToKeyValueString(Expr, String, String, bool),
    /// `SliceToMap(target, key_path, value_path)`.
    SliceToMap(Expr, Option<Vec<String>>, Option<Vec<String>>),
    IsEmpty(Expr),
    /// A random (version 4) UUID, or a time-ordered (version 7) one.
    Uuid {
        v7: bool,
    },
    ContainsValue(Expr, Expr),
    Index(Expr, Expr),
    Fnv(Expr),
    Bool(Expr),
    IsInCidr(Expr, Vec<Expr>),
    FormatTime(Expr, String),
    ParseInt(Expr, Expr),
    Coalesce(Vec<Expr>),
    Log(Expr),
    IsValidLuhn(Expr),
}

#[derive(Debug, Clone, Copy)]
pub enum Digest {
    Md5,
    Sha1,
    Sha512,
    Murmur3,
    Murmur3x128,
    Xxh3,
    Xxh128,
}

#[derive(Debug, Clone, Copy)]
pub enum Part {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Nanosecond,
    /// Sunday is 0.
    Weekday,
}

#[derive(Debug, Clone, Copy)]
pub enum Unit {
    Hours,
    Minutes,
    Seconds,
    Milliseconds,
    Microseconds,
    Nanoseconds,
}

/// `Decode`'s encoding.
#[derive(Debug)]
pub enum DecodeWith {
    Fixed(decode::Decoder),
    Dynamic(Expr),
}

/// Converters the Collector has that profcol does not implement yet.
const NOT_YET: &[&str] = &[
    "ExtractGrokPatterns",
    "GetXML",
    "InsertXML",
    "ParseSimplifiedXML",
    "ParseXML",
    "RemoveXML",
    "SpanID",
    "TraceID",
    "UserAgent",
    "ConvertAttributesToElementsXML",
    "ConvertTextToElementsXML",
    "CommunityID",
    // Converters of the Collector (v0.161.0) profcol has none of yet; the
    // lambda ones (All, Any, Filter, Find, MapEach, MapKeys, Reduce, When)
    // take arguments profcol's parser does not read.
    "All",
    "Any",
    "Filter",
    "Find",
    "MapEach",
    "MapKeys",
    "Reduce",
    "When",
];

pub fn converter(c: &Compiler, call: &ast::Call) -> Result<Converter, ParseError> {
    use Kind::*;
    let g = |k| P::Get(k);
    let one = |k: Kind, f: fn(Expr) -> Converter| -> Result<Converter, ParseError> {
        let mut a = bind(c, call, &[req("target", P::Get(k))])?;
        Ok(f(a.expr(0)))
    };
    Ok(match call.name.as_str() {
        "IsMatch" => {
            let mut a = bind(
                c,
                call,
                &[req("target", g(StrLike)), req("pattern", P::Regex)],
            )?;
            Converter::IsMatch(a.expr(0), a.pattern(1))
        }
        "Concat" => {
            let mut a = bind(c, call, &[req("vals", P::Slice), req("delimiter", g(Str))])?;
            Converter::Concat(a.expr(0), a.expr(1))
        }
        "ConvertCase" => {
            let mut a = bind(c, call, &[req("target", g(Str)), req("toCase", P::LitStr)])?;
            let case = match a.str(1).as_deref() {
                Some("lower") => Case::Lower,
                Some("upper") => Case::Upper,
                Some("snake") => Case::Snake,
                Some("camel") => Case::Camel,
                other => {
                    return Err(ParseError::new(
                        call.col,
                        format!(
                            "invalid case: {}, allowed cases are: lower, upper, snake, camel",
                            other.unwrap_or("")
                        ),
                    ))
                }
            };
            Converter::ConvertCase(a.expr(0), case)
        }
        "ToLowerCase" => one(Str, Converter::ToLowerCase)?,
        "ToUpperCase" => one(Str, Converter::ToUpperCase)?,
        "Split" => {
            let mut a = bind(c, call, &[req("target", g(Str)), req("delimiter", g(Str))])?;
            Converter::Split(a.expr(0), a.expr(1))
        }
        "Substring" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", g(Str)),
                    req("start", g(Int)),
                    req("length", g(Int)),
                    opt("utf8_safe", P::LitBool),
                ],
            )?;
            Converter::Substring(a.expr(0), a.expr(1), a.expr(2), a.bool(3).unwrap_or(false))
        }
        "Len" => one(Any, Converter::Len)?,
        "Int" => one(IntLike, Converter::Int)?,
        "Double" => one(FloatLike, Converter::Double)?,
        "String" => one(StrLike, Converter::String)?,
        "IsString" => one(Any, Converter::IsString)?,
        "IsMap" => one(Any, Converter::IsMap)?,
        "IsInt" => one(Any, Converter::IsInt)?,
        "IsDouble" => one(Any, Converter::IsDouble)?,
        "IsList" => one(Any, Converter::IsList)?,
        "SHA256" => one(Str, Converter::Sha256)?,
        "Hex" => one(BytesLike, Converter::Hex)?,
        "ParseJSON" => one(Str, Converter::ParseJson)?,
        "Time" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("time", g(Str)),
                    req("format", P::LitStr),
                    opt("location", P::LitStr),
                    opt("locale", P::LitStr),
                ],
            )?;
            let target = a.expr(0);
            let format = a.str(1).unwrap_or_default();
            let (location, locale) = (a.str(2), a.str(3));
            let parser =
                super::strptime::TimeParser::new(&format, location.as_deref(), locale.as_deref())
                    .map_err(|e| ParseError::new(call.col, e))?;
            Converter::Time(target, parser)
        }
        "URL" => {
            let mut a = bind(c, call, &[req("url_string", g(Str))])?;
            Converter::Url(a.expr(0))
        }
        "Format" => {
            let mut a = bind(c, call, &[req("format", P::LitStr), req("vals", P::List)])?;
            Converter::Format(a.str(0).unwrap_or_default(), a.list(1).unwrap_or_default())
        }
        "Now" => {
            bind(c, call, &[])?;
            Converter::Now
        }
        "UnixNano" => one(Time, Converter::UnixNano)?,
        "UnixMicro" => one(Time, Converter::UnixMicro)?,
        "UnixMilli" => one(Time, Converter::UnixMilli)?,
        "UnixSeconds" => one(Time, Converter::UnixSeconds)?,
        "TruncateTime" => {
            let mut a = bind(
                c,
                call,
                &[req("time", g(Time)), req("duration", g(Duration))],
            )?;
            Converter::TruncateTime(a.expr(0), a.expr(1))
        }
        "Duration" => one(Str, Converter::Duration)?,
        "IsBool" => one(Any, Converter::IsBool)?,
        "ToSnakeCase" => one(Str, |e| Converter::ConvertCase(e, Case::Snake))?,
        "ToCamelCase" => one(Str, |e| Converter::ConvertCase(e, Case::Camel))?,
        "Trim" => {
            let mut a = bind(
                c,
                call,
                &[req("target", g(Str)), opt("replacement", P::LitStr)],
            )?;
            Converter::Trim(a.expr(0), a.str(1).unwrap_or_else(|| " ".into()))
        }
        "TrimPrefix" | "TrimSuffix" | "HasPrefix" | "HasSuffix" => {
            let second = if call.name.ends_with("Prefix") {
                "prefix"
            } else {
                "suffix"
            };
            let mut a = bind(c, call, &[req("target", g(Str)), req(second, g(Str))])?;
            let (t, x) = (a.expr(0), a.expr(1));
            match call.name.as_str() {
                "TrimPrefix" => Converter::TrimPrefix(t, x),
                "TrimSuffix" => Converter::TrimSuffix(t, x),
                "HasPrefix" => Converter::HasPrefix(t, x),
                _ => Converter::HasSuffix(t, x),
            }
        }
        "Keys" => one(Map, Converter::Keys)?,
        "Values" => one(Map, Converter::Values)?,
        "Base64Encode" => {
            let mut a = bind(c, call, &[req("target", g(Str)), opt("variant", g(Str))])?;
            Converter::Base64Encode(a.expr(0), a.opt_expr(1))
        }
        "MD5" => one(Str, |e| Converter::Digest(e, Digest::Md5))?,
        "SHA1" => one(Str, |e| Converter::Digest(e, Digest::Sha1))?,
        "SHA512" => one(Str, |e| Converter::Digest(e, Digest::Sha512))?,
        "Murmur3Hash" => one(Str, |e| Converter::Digest(e, Digest::Murmur3))?,
        "Murmur3Hash128" => one(Str, |e| Converter::Digest(e, Digest::Murmur3x128))?,
        "XXH3" => one(Str, |e| Converter::Digest(e, Digest::Xxh3))?,
        "XXH128" => one(Str, |e| Converter::Digest(e, Digest::Xxh128))?,
        "FNV" => one(Str, Converter::Fnv)?,
        "Bool" => one(BoolLike, Converter::Bool)?,
        "IsInCIDR" => {
            let mut a = bind(c, call, &[req("target", g(Str)), req("networks", P::List)])?;
            let networks = a.list(1).unwrap_or_default();
            // Literal networks are read once, and a bad one refused at load.
            for n in &networks {
                match n.literal() {
                    Some(Val::Str(s)) => {
                        cidr(s).map_err(|e| ParseError::new(call.col, e.0))?;
                    }
                    Some(other) => {
                        return Err(ParseError::new(
                            call.col,
                            format!("expected string but got {}", other.type_name()),
                        ))
                    }
                    None => {}
                }
            }
            Converter::IsInCidr(a.expr(0), networks)
        }
        "FormatTime" => {
            let mut a = bind(c, call, &[req("time", g(Time)), req("format", P::LitStr)])?;
            let format = a.str(1).unwrap_or_default();
            super::ctime::validate(&format).map_err(|e| ParseError::new(call.col, e))?;
            Converter::FormatTime(a.expr(0), format)
        }
        "ParseInt" => {
            let mut a = bind(c, call, &[req("target", g(Str)), req("base", g(Int))])?;
            Converter::ParseInt(a.expr(0), a.expr(1))
        }
        "Coalesce" => {
            let mut a = bind(c, call, &[req("values", P::List)])?;
            let values = a.list(0).unwrap_or_default();
            if values.is_empty() {
                return Err(ParseError::new(
                    call.col,
                    "Coalesce requires at least one argument",
                ));
            }
            Converter::Coalesce(values)
        }
        "Log" => one(FloatLike, Converter::Log)?,
        "IsValidLuhn" => one(StrLike, Converter::IsValidLuhn)?,
        "Hours" => one(Duration, |e| Converter::DurationIn(e, Unit::Hours))?,
        "Minutes" => one(Duration, |e| Converter::DurationIn(e, Unit::Minutes))?,
        "Seconds" => one(Duration, |e| Converter::DurationIn(e, Unit::Seconds))?,
        "Milliseconds" => one(Duration, |e| Converter::DurationIn(e, Unit::Milliseconds))?,
        "Microseconds" => one(Duration, |e| Converter::DurationIn(e, Unit::Microseconds))?,
        "Nanoseconds" => one(Duration, |e| Converter::DurationIn(e, Unit::Nanoseconds))?,
        "Year" => one(Time, |e| Converter::TimePart(e, Part::Year))?,
        "Month" => one(Time, |e| Converter::TimePart(e, Part::Month))?,
        "Day" => one(Time, |e| Converter::TimePart(e, Part::Day))?,
        "Hour" => one(Time, |e| Converter::TimePart(e, Part::Hour))?,
        "Minute" => one(Time, |e| Converter::TimePart(e, Part::Minute))?,
        "Second" => one(Time, |e| Converter::TimePart(e, Part::Second))?,
        "Nanosecond" => one(Time, |e| Converter::TimePart(e, Part::Nanosecond))?,
        "Weekday" => one(Time, |e| Converter::TimePart(e, Part::Weekday))?,
        "Sort" => {
            let mut a = bind(c, call, &[req("target", g(Any)), opt("order", P::LitStr)])?;
            let desc = match a.str(1).as_deref() {
                None | Some("asc") => false,
                Some("desc") => true,
                Some(o) => {
                    return Err(ParseError::new(
                        call.col,
                        format!(
                            "invalid arguments: {o}. Order should be either \"asc\" or \"desc\""
                        ),
                    ))
                }
            };
            Converter::Sort(a.expr(0), desc)
        }
        "Decode" => {
            let mut a = bind(c, call, &[req("target", g(Any)), req("encoding", g(Str))])?;
            let (target, encoding) = (a.expr(0), a.expr(1));
            let with = match encoding.literal() {
                // As the Collector: a literal encoding is looked up at load.
                Some(v) => DecodeWith::Fixed(
                    args::get_str(v.clone())
                        .and_then(|e| decode::decoder(&e))
                        .map_err(|e| ParseError::new(call.col, e.to_string()))?,
                ),
                None => DecodeWith::Dynamic(encoding),
            };
            Converter::Decode(target, with)
        }
        "ParseSeverity" => {
            let mut a = bind(
                c,
                call,
                &[req("target", g(Any)), req("severityMapping", g(Map))],
            )?;
            let target = a.expr(0);
            Converter::ParseSeverity(target, super::severity::mapping(&a.expr(1)))
        }
        "ProfileID" => {
            let mut a = bind(c, call, &[req("target", g(BytesLike))])?;
            let target = a.expr(0);
            match target.literal() {
                // As the Collector: a literal is read when the statement is.
                Some(v) => {
                    let id = profile_id(v).map_err(|e| ParseError::new(call.col, e.to_string()))?;
                    Converter::ProfileId(Expr::Lit(id))
                }
                None => Converter::ProfileId(target),
            }
        }
        "ParseCSV" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", g(Str)),
                    req("header", g(Str)),
                    opt("delimiter", P::LitStr),
                    opt("header_delimiter", P::LitStr),
                    opt("mode", P::LitStr),
                ],
            )?;
            let e = |m: String| ParseError::new(call.col, m);
            let one = |s: &Option<String>, what: &str| match s {
                Some(s) if s.chars().count() != 1 => Err(e(format!(
                    "invalid arguments: {what} must be a single character"
                ))),
                _ => Ok(()),
            };
            let (d, hd, mode) = (a.str(2), a.str(3), a.str(4));
            one(&d, "delimiter")?;
            one(&hd, "header_delimiter")?;
            let d = d.and_then(|d| d.chars().next()).unwrap_or(',');
            let mode = match mode {
                None => super::csv::Mode::Strict,
                Some(m) => {
                    super::csv::Mode::parse(&m).ok_or_else(|| e(format!("unknown mode: {m}")))?
                }
            };
            Converter::ParseCsv(
                a.expr(0),
                a.expr(1),
                d,
                hd.unwrap_or_else(|| d.to_string()),
                mode,
            )
        }
        "ParseKeyValue" | "ToKeyValueString" => {
            let parse = call.name == "ParseKeyValue";
            let mut a = bind(
                c,
                call,
                &[
                    req("target", g(if parse { Str } else { Map })),
                    opt("delimiter", P::LitStr),
                    opt("pair_delimiter", P::LitStr),
                    opt("sort_output", P::LitBool),
                ][..if parse { 3 } else { 4 }],
            )?;
            let e = |m: String| ParseError::new(call.col, m);
            let d = a.str(1);
            let p = a.str(2);
            if d.as_deref() == Some("") {
                return Err(e("delimiter cannot be set to an empty string".into()));
            }
            if p.as_deref() == Some("") {
                return Err(e("pair delimiter cannot be set to an empty string".into()));
            }
            let (d, p) = (
                d.unwrap_or_else(|| "=".into()),
                p.unwrap_or_else(|| " ".into()),
            );
            if d == p {
                return Err(e(format!(
                    "pair delimiter {p:?} cannot be equal to delimiter {d:?}"
                )));
            }
            if parse {
                Converter::ParseKeyValue(a.expr(0), d, p)
            } else {
                let sort = a.bool(3).unwrap_or(false);
                Converter::ToKeyValueString(a.expr(0), d, p, sort)
            }
        }
        "SliceToMap" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", g(Any)),
                    opt("key_path", P::List),
                    opt("value_path", P::List),
                ],
            )?;
            let strings = |l: Option<Vec<Expr>>| -> Result<Option<Vec<String>>, ParseError> {
                l.map(|l| {
                    l.iter()
                        .map(|e| match e.literal() {
                            Some(Val::Str(s)) => Ok(s.to_string()),
                            _ => Err(ParseError::new(
                                call.col,
                                "key_path and value_path are lists of strings",
                            )),
                        })
                        .collect()
                })
                .transpose()
            };
            let target = a.expr(0);
            literal_slice(call, &target)?;
            Converter::SliceToMap(target, strings(a.list(1))?, strings(a.list(2))?)
        }
        "ExtractPatterns" => {
            let mut a = bind(c, call, &[req("target", g(Str)), req("pattern", P::Regex)])?;
            Converter::ExtractPatterns(a.expr(0), a.pattern(1))
        }
        "IsEmpty" => one(Any, Converter::IsEmpty)?,
        "UUID" | "UUIDv7" => {
            bind(c, call, &[])?;
            Converter::Uuid {
                v7: call.name == "UUIDv7",
            }
        }
        "ContainsValue" | "Index" => {
            let mut a = bind(c, call, &[req("target", g(Any)), req("value", g(Any))])?;
            let (t, v) = (a.expr(0), a.expr(1));
            if call.name == "Index" {
                Converter::Index(t, v)
            } else {
                literal_slice(call, &t)?;
                Converter::ContainsValue(t, v)
            }
        }
        "Unix" => {
            let mut a = bind(
                c,
                call,
                &[req("seconds", g(Int)), opt("nanoseconds", g(Int))],
            )?;
            Converter::Unix(a.expr(0), a.opt_expr(1))
        }
        n if NOT_YET.contains(&n) => {
            return Err(ParseError::new(
                call.col,
                format!("converter {n} is not supported by profcol yet"),
            ))
        }
        n => {
            return Err(ParseError::new(
                call.col,
                format!("undefined function {n:?}"),
            ))
        }
    })
}

const GO_ZERO_TO_UNIX_NS: i128 = 62_135_596_800 * 1_000_000_000;

impl Converter {
    pub fn call<'r>(&'r self, ctx: &'r Ctx) -> EvalResult<Val<'r>> {
        use Converter as C;
        Ok(match self {
            C::IsMatch(t, p) => match args::str_like(&t.eval(ctx)?)? {
                None => Val::Bool(false),
                Some(s) => p.with(ctx, |r| Ok(Val::Bool(r.is_match(&s))))?,
            },
            C::Concat(vals, d) => {
                let d = args::get_str(d.eval(ctx)?)?;
                Val::Str(Cow::Owned(args::slice_strings(&vals.eval(ctx)?)?.join(&d)))
            }
            C::ConvertCase(t, case) => {
                let s = args::get_str(t.eval(ctx)?)?;
                Val::Str(Cow::Owned(match case {
                    Case::Lower => s.to_lowercase(),
                    Case::Upper => s.to_uppercase(),
                    Case::Snake => to_snake(&s),
                    Case::Camel => to_camel(&s),
                }))
            }
            C::ToLowerCase(t) => Val::Str(Cow::Owned(args::get_str(t.eval(ctx)?)?.to_lowercase())),
            C::ToUpperCase(t) => Val::Str(Cow::Owned(args::get_str(t.eval(ctx)?)?.to_uppercase())),
            C::Split(t, d) => {
                let s = args::get_str(t.eval(ctx)?)?;
                let d = args::get_str(d.eval(ctx)?)?;
                let parts: Vec<Val> = if d.is_empty() {
                    s.chars()
                        .map(|c| Val::Str(Cow::Owned(c.to_string())))
                        .collect()
                } else {
                    s.split(d.as_ref())
                        .map(|p| Val::Str(Cow::Owned(p.to_string())))
                        .collect()
                };
                Val::List(parts)
            }
            C::Substring(t, start, len, utf8) => {
                let s = args::get_str(t.eval(ctx)?)?;
                let start = args::get_int(&start.eval(ctx)?)?;
                let len = args::get_int(&len.eval(ctx)?)?;
                if start < 0 {
                    fail!("invalid start for substring function, {start} cannot be negative");
                }
                if len <= 0 {
                    fail!(
                        "invalid length for substring function, {len} cannot be negative or zero"
                    );
                }
                let n = s.len() as i64;
                if start > n || len > n - start {
                    fail!("invalid range for substring function, {start}:{} cannot be past the end of the string", start + len);
                }
                let (mut a, mut b) = (start as usize, (start + len) as usize);
                if *utf8 {
                    while a < s.len() && !s.is_char_boundary(a) {
                        a += 1;
                    }
                    while b > a && !s.is_char_boundary(b) {
                        b -= 1;
                    }
                }
                let bytes = &s.as_bytes()[a..b.max(a)];
                Val::Str(Cow::Owned(String::from_utf8_lossy(bytes).into_owned()))
            }
            C::Len(t) => Val::Int(match t.eval(ctx)? {
                Val::Str(s) => s.len(),
                Val::Bytes(b) => b.len(),
                Val::Map(m) => m.len(),
                Val::Slice(s) => s.len(),
                Val::List(l) => l.len(),
                Val::Ints(v) => v.len(),
                other => fail!("unsupported type: {}", other.type_name()),
            } as i64),
            C::Int(t) => args::int_like(&t.eval(ctx)?)?.map_or(Val::Nil, Val::Int),
            C::Double(t) => args::float_like(&t.eval(ctx)?)?.map_or(Val::Nil, Val::Double),
            C::String(t) => args::str_like(&t.eval(ctx)?)?
                .map_or(Val::Nil, |s| Val::Str(Cow::Owned(s.into_owned()))),
            C::IsString(t) => Val::Bool(matches!(t.eval(ctx)?, Val::Str(_))),
            C::IsMap(t) => Val::Bool(matches!(t.eval(ctx)?, Val::Map(_))),
            C::IsInt(t) => Val::Bool(matches!(t.eval(ctx)?, Val::Int(_))),
            C::IsDouble(t) => Val::Bool(matches!(t.eval(ctx)?, Val::Double(_))),
            C::IsBool(t) => Val::Bool(matches!(t.eval(ctx)?, Val::Bool(_))),
            C::IsList(t) => Val::Bool(matches!(
                t.eval(ctx)?,
                Val::Slice(_) | Val::List(_) | Val::Ints(_)
            )),
            C::Sha256(t) => Val::Str(Cow::Owned(sha256_hex(
                args::get_str(t.eval(ctx)?)?.as_bytes(),
            ))),
            C::Hex(t) => Val::Str(Cow::Owned(
                args::bytes_like(&t.eval(ctx)?)?.map_or(String::new(), hex::encode),
            )),
            C::ParseJson(t) => {
                let s = args::get_str(t.eval(ctx)?)?;
                match serde_json::from_str::<serde_json::Value>(&s) {
                    Ok(serde_json::Value::Object(o)) => Val::Map(Cow::Owned(json_map(o))),
                    Ok(serde_json::Value::Array(a)) => Val::Slice(Cow::Owned(a.into_iter().map(json_any).collect())),
                    Ok(other) => fail!("could not convert parsed value of type {} into pcommon.Map or pcommon.Slice", json_type(&other)),
                    Err(e) => fail!("{e}"),
                }
            }
            C::Format(f, vals) => {
                let vals = vals
                    .iter()
                    .map(|v| v.eval(ctx))
                    .collect::<EvalResult<Vec<_>>>()?;
                Val::Str(Cow::Owned(sprintf(f, &vals)))
            }
            C::Now => Val::Time(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64),
            ),
            C::UnixNano(t) => Val::Int(time(&t.eval(ctx)?)?),
            C::UnixMicro(t) => Val::Int(time(&t.eval(ctx)?)?.div_euclid(1_000)),
            C::UnixMilli(t) => Val::Int(time(&t.eval(ctx)?)?.div_euclid(1_000_000)),
            C::UnixSeconds(t) => Val::Int(time(&t.eval(ctx)?)?.div_euclid(1_000_000_000)),
            C::TruncateTime(t, d) => {
                let t = time(&t.eval(ctx)?)?;
                let d = match d.eval(ctx)? {
                    Val::Duration(d) => d,
                    other => fail!("expected duration but got {}", other.type_name()),
                };
                if d <= 0 {
                    Val::Time(t)
                } else {
                    // Go truncates relative to its zero time (year 1).
                    let abs = t as i128 + GO_ZERO_TO_UNIX_NS;
                    Val::Time((abs - abs.rem_euclid(d as i128) - GO_ZERO_TO_UNIX_NS) as i64)
                }
            }
            C::Duration(t) => Val::Duration(parse_duration(&args::get_str(t.eval(ctx)?)?)?),
            C::Trim(t, cutset) => {
                let s = args::get_str(t.eval(ctx)?)?;
                Val::Str(Cow::Owned(
                    s.trim_matches(|c| cutset.contains(c)).to_owned(),
                ))
            }
            C::TrimPrefix(t, x) | C::TrimSuffix(t, x) => {
                let s = args::get_str(t.eval(ctx)?)?;
                let x = args::get_str(x.eval(ctx)?)?;
                let out = match self {
                    C::TrimPrefix(..) => s.strip_prefix(x.as_ref()),
                    _ => s.strip_suffix(x.as_ref()),
                };
                Val::Str(Cow::Owned(out.unwrap_or(&s).to_owned()))
            }
            C::HasPrefix(t, x) | C::HasSuffix(t, x) => {
                let s = args::get_str(t.eval(ctx)?)?;
                let x = args::get_str(x.eval(ctx)?)?;
                Val::Bool(match self {
                    C::HasPrefix(..) => s.starts_with(x.as_ref()),
                    _ => s.ends_with(x.as_ref()),
                })
            }
            // Every entry, in order, as pcommon.Map's iteration gives them.
            C::Keys(t) => Val::Slice(Cow::Owned(
                args::get_map(t.eval(ctx)?)?
                    .iter()
                    .map(|kv| AnyValue {
                        value: Some(A::StringValue(kv.key.clone())),
                    })
                    .collect(),
            )),
            C::Values(t) => Val::Slice(Cow::Owned(
                args::get_map(t.eval(ctx)?)?
                    .iter()
                    .map(|kv| kv.value.clone().unwrap_or_default())
                    .collect(),
            )),
            C::Base64Encode(t, variant) => {
                use base64::engine::general_purpose as b64;
                use base64::Engine as _;
                let s = args::get_str(t.eval(ctx)?)?;
                let variant = match variant {
                    Some(v) => args::get_str(v.eval(ctx)?)?.into_owned(),
                    None => "base64".into(),
                };
                let engine = match variant.as_str() {
                    "base64" => b64::STANDARD,
                    "base64-raw" => b64::STANDARD_NO_PAD,
                    "base64-url" => b64::URL_SAFE,
                    "base64-raw-url" => b64::URL_SAFE_NO_PAD,
                    other => fail!("unsupported base64 variant: {other}"),
                };
                Val::Str(Cow::Owned(engine.encode(s.as_bytes())))
            }
            C::Digest(t, d) => {
                let s = args::get_str(t.eval(ctx)?)?;
                Val::Str(Cow::Owned(digest_hex(*d, s.as_bytes())))
            }
            C::Fnv(t) => {
                // Go's `fnv.New64a`, its sum read as an int64.
                let mut h = fnv::FnvHasher::default();
                std::hash::Hasher::write(&mut h, args::get_str(t.eval(ctx)?)?.as_bytes());
                Val::Int(std::hash::Hasher::finish(&h) as i64)
            }
            C::FormatTime(t, f) => {
                Val::Str(Cow::Owned(super::ctime::format(f, time(&t.eval(ctx)?)?)?))
            }
            C::IsInCidr(t, networks) => {
                let s = args::get_str(t.eval(ctx)?)?;
                // Not an address: in no network (as net.ParseIP's nil).
                let Ok(ip) = s.parse::<std::net::IpAddr>() else {
                    return Ok(Val::Bool(false));
                };
                for n in networks {
                    if cidr(&args::get_str(n.eval(ctx)?)?)?.contains(ip) {
                        return Ok(Val::Bool(true));
                    }
                }
                Val::Bool(false)
            }
            C::Bool(t) => args::bool_like(&t.eval(ctx)?)?.map_or(Val::Nil, Val::Bool),
            C::ParseInt(t, base) => {
                let s = args::get_str(t.eval(ctx)?)?;
                if s.is_empty() {
                    fail!("invalid target value for ParseInt function, target cannot be empty");
                }
                let base = args::get_int(&base.eval(ctx)?)?;
                if base < 0 {
                    fail!(
                        "invalid base value: {base} for ParseInt function, base cannot be negative"
                    );
                }
                Val::Int(parse_int(&s, base)?)
            }
            C::Coalesce(values) => {
                for v in values {
                    let v = v.eval(ctx)?;
                    if !matches!(v, Val::Nil) {
                        return Ok(v);
                    }
                }
                Val::Nil
            }
            C::Log(t) => match args::float_like(&t.eval(ctx)?)? {
                None => fail!("invalid input: <nil>"),
                Some(v) if v <= 0.0 => fail!(
                    "invalid input: expected number greater than zero but got {}",
                    crate::value::go_float(v)
                ),
                Some(v) => Val::Double(v.ln()),
            },
            C::IsValidLuhn(t) => match args::str_like(&t.eval(ctx)?)? {
                None => fail!("invalid input: <nil>"),
                Some(s) => Val::Bool(luhn(&s.replace(' ', ""))?),
            },
            C::DurationIn(t, unit) => {
                let d = match t.eval(ctx)? {
                    Val::Duration(d) => d,
                    other => fail!("expected duration but got {}", other.type_name()),
                };
                duration_in(d, *unit)
            }
            C::TimePart(t, part) => {
                use chrono::{Datelike as _, Timelike as _};
                let t = chrono::DateTime::from_timestamp_nanos(time(&t.eval(ctx)?)?);
                Val::Int(i64::from(match part {
                    Part::Year => t.year(),
                    Part::Month => t.month() as i32,
                    Part::Day => t.day() as i32,
                    Part::Hour => t.hour() as i32,
                    Part::Minute => t.minute() as i32,
                    Part::Second => t.second() as i32,
                    Part::Nanosecond => t.nanosecond() as i32,
                    Part::Weekday => t.weekday().num_days_from_sunday() as i32,
                }))
            }
            C::ParseCsv(t, h, d, hd, mode) => {
                let row = match t.eval(ctx).and_then(args::get_str) {
                    Ok(s) => s.into_owned(),
                    Err(e) => fail!("error getting value for target in ParseCSV: {}", e.0),
                };
                let header = match h.eval(ctx).and_then(args::get_str) {
                    Ok(s) => s.into_owned(),
                    Err(e) => fail!("error getting value for header in ParseCSV: {}", e.0),
                };
                if header.is_empty() {
                    fail!("headers must not be an empty string");
                }
                let headers: Vec<&str> = header.split(hd.as_str()).collect();
                let fields = match super::csv::row(&row, *d, *mode) {
                    Ok(f) => f,
                    Err(e) => fail!("{e}"),
                };
                if fields.len() != headers.len() {
                    fail!(
                        "map csv headers: wrong number of fields: expected {}, found {}",
                        headers.len(),
                        fields.len()
                    );
                }
                let mut out = Vec::with_capacity(headers.len());
                for (k, v) in headers.into_iter().zip(fields) {
                    crate::value::map_put(
                        &mut out,
                        k,
                        AnyValue {
                            value: Some(A::StringValue(v)),
                        },
                    );
                }
                Val::Map(Cow::Owned(out))
            }
            C::ParseKeyValue(t, d, p) => {
                let s = args::get_str(t.eval(ctx)?)?;
                if s.is_empty() {
                    fail!("cannot parse from empty target");
                }
                let mut out = Vec::new();
                let mut bad = Vec::new();
                for pair in split_quoted(&s, p)? {
                    match pair.split_once(d.as_str()) {
                        Some((k, v)) => crate::value::map_put(
                            &mut out,
                            k.trim(),
                            AnyValue {
                                value: Some(A::StringValue(v.trim().to_owned())),
                            },
                        ),
                        None => {
                            bad.push(format!("cannot split {pair:?} into 2 items, got 1 item(s)"))
                        }
                    }
                }
                if !bad.is_empty() {
                    fail!("failed to split pairs into key-values: {}", bad.join("; "));
                }
                Val::Map(Cow::Owned(out))
            }
            C::Sort(t, desc) => match t.eval(ctx)? {
                Val::Slice(s) => sort_values(s.into_owned(), *desc),
                Val::List(l) => sort_values(from_raw(l)?, *desc),
                Val::Ints(mut v) => {
                    v.sort_unstable();
                    if *desc {
                        v.reverse();
                    }
                    Val::Ints(v)
                }
                other => fail!(
                    "sort with unsupported type: '{}'. Target is not a list",
                    other.type_name()
                ),
            },
            C::Decode(t, with) => {
                let d = match with {
                    DecodeWith::Fixed(d) => *d,
                    DecodeWith::Dynamic(e) => decode::decoder(&args::get_str(e.eval(ctx)?)?)?,
                };
                decode::decode(d, &t.eval(ctx)?)?
            }
            C::ParseSeverity(t, m) => super::severity::parse(m, &t.eval(ctx)?)?,
            C::Time(t, parser) => {
                let s = args::get_str(t.eval(ctx)?)?;
                Val::Time(parser.parse(&s).map_err(crate::error::EvalError)?)
            }
            C::Url(t) => {
                let s = args::get_str(t.eval(ctx)?)?;
                if s.is_empty() {
                    fail!("url cannot be empty");
                }
                Val::Map(Cow::Owned(
                    uri::attributes(&s).map_err(crate::error::EvalError)?,
                ))
            }
            C::ProfileId(t) => match t.eval(ctx)? {
                id @ Val::ProfileId(_) => id,
                v => profile_id(&v)?,
            },
            C::ToKeyValueString(t, d, p, sort) => {
                let m = args::get_map(t.eval(ctx)?)?;
                let mut pairs: Vec<&KeyValue> = m.iter().collect();
                if *sort {
                    pairs.sort_by(|a, b| a.key.cmp(&b.key));
                }
                let quote = |s: &str| {
                    let s = s.replace('"', "\\\"");
                    if s.contains(p.as_str()) || s.contains(d.as_str()) {
                        format!("\"{s}\"")
                    } else {
                        s
                    }
                };
                let text: Vec<String> = pairs
                    .iter()
                    .map(|kv| {
                        let v = kv
                            .value
                            .as_ref()
                            .map(crate::value::any_as_string)
                            .unwrap_or_default();
                        format!("{}{d}{}", quote(&kv.key), quote(&v))
                    })
                    .collect();
                Val::Str(Cow::Owned(text.join(p)))
            }
            C::SliceToMap(t, key_path, value_path) => {
                let items: Vec<AnyValue> = match t.eval(ctx)? {
                    Val::Slice(s) => s.into_owned(),
                    Val::List(l) => from_raw(l)?,
                    other => fail!("expected pcommon.Slice but got {}", other.type_name()),
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, elem) in items.into_iter().enumerate() {
                    let fields = match &elem.value {
                        Some(A::KvlistValue(m)) => Some(&m.values),
                        _ => None,
                    };
                    let fields = match (fields, key_path.is_some() || value_path.is_some()) {
                        (None, true) => fail!("slice elements must be maps when using `key_path` or `value_path`, but could not cast element of type `{}` to a map", any_type(&elem)),
                        (f, _) => f,
                    };
                    let key = match (key_path, fields) {
                        (Some(path), Some(f)) => match path_value(f, path) {
                            Some(AnyValue { value: Some(A::StringValue(s)) }) => s.clone(),
                            Some(other) => fail!("element {i}: extracted key attribute is not of type string, got {:?}", any_type(other)),
                            None => fail!("could not extract key from element {i}: provided object does not contain the path {path:?}"),
                        },
                        _ => i.to_string(),
                    };
                    let value = match (value_path, fields) {
                        (Some(path), Some(f)) => match path_value(f, path) {
                            Some(v) => v.clone(),
                            None => fail!("could not extract value from element {i}: provided object does not contain the path {path:?}"),
                        },
                        _ => elem.clone(),
                    };
                    crate::value::map_put(&mut out, &key, value);
                }
                Val::Map(Cow::Owned(out))
            }
            C::ExtractPatterns(t, p) => p.with(ctx, |r| {
                if r.capture_names().flatten().next().is_none() {
                    fail!("at least 1 named capture group must be supplied in the given regex");
                }
                let s = args::get_str(t.eval(ctx)?)?;
                let mut out = Vec::new();
                if let Some(caps) = r.captures(&s) {
                    for (i, name) in r.capture_names().enumerate().skip(1) {
                        if let Some(name) = name {
                            let v = caps.get(i).map_or("", |m| m.as_str());
                            crate::value::map_put(
                                &mut out,
                                name,
                                AnyValue {
                                    value: Some(A::StringValue(v.to_owned())),
                                },
                            );
                        }
                    }
                }
                Ok(Val::Map(Cow::Owned(out)))
            })?,
            // Go's reflection: nil, an empty container, a zero scalar
            // (-0.0 too, since Go 1.22).
            C::IsEmpty(t) => Val::Bool(match t.eval(ctx)? {
                Val::Nil => true,
                Val::Bool(b) => !b,
                Val::Int(i) | Val::Duration(i) => i == 0,
                Val::Double(d) => d == 0.0,
                Val::Str(s) => s.is_empty(),
                Val::Bytes(b) => b.is_empty(),
                Val::Map(m) => m.is_empty(),
                Val::Slice(s) => s.is_empty(),
                Val::List(l) => l.is_empty(),
                Val::Ints(v) => v.is_empty(),
                Val::ProfileId(id) => id == [0; 16],
                Val::Time(_) | Val::ValueType(..) => false,
            }),
            C::Uuid { v7 } => Val::Str(Cow::Owned(
                if *v7 {
                    uuid::Uuid::now_v7()
                } else {
                    uuid::Uuid::new_v4()
                }
                .to_string(),
            )),
            C::ContainsValue(t, v) => {
                let item = v.eval(ctx)?;
                let t = t.eval(ctx)?;
                Val::Bool(position(&t, &item)?.is_some())
            }
            C::Index(t, v) => {
                let value = v.eval(ctx)?;
                Val::Int(match t.eval(ctx)? {
                    Val::Str(s) => match value {
                        Val::Str(v) => s.find(v.as_ref()).map_or(-1, |i| i as i64),
                        _ => fail!("invalid value type for Index function, value must be a string"),
                    },
                    t => position(&t, &value)?.map_or(-1, |i| i as i64),
                })
            }
            C::Unix(s, ns) => {
                let s = args::get_int(&s.eval(ctx)?)?;
                let ns = match ns {
                    Some(ns) => args::get_int(&ns.eval(ctx)?)?,
                    None => 0,
                };
                match s.checked_mul(1_000_000_000).and_then(|t| t.checked_add(ns)) {
                    Some(t) => Val::Time(t),
                    None => fail!("Unix({s}, {ns}) is out of the range profcol keeps times in (years 1678 to 2262)"),
                }
            }
        })
    }
}

/// The first element of a slice equal to `item`, as ottl's value
/// comparator finds it on each element's `AsRaw()`: as `==` compares, so
/// a map or slice element equals a map or slice with the same contents
/// (`reflect.DeepEqual` with the other's `AsRaw()` there).
fn position(slice: &Val, item: &Val) -> EvalResult<Option<usize>> {
    use crate::lexer::CmpOp;
    let eq = |v: Val| crate::value::compare(&v, item, CmpOp::Eq);
    Ok(match slice {
        Val::Slice(s) => s.iter().position(|a| eq(Val::from_any(a))),
        Val::List(l) => l.iter().position(|v| eq(v.clone())),
        Val::Ints(v) => v.iter().position(|i| eq(Val::Int(*i))),
        other => fail!("expected pcommon.Slice but got {}", other.type_name()),
    })
}

/// A Go slice as `pcommon.Slice.FromRaw` makes it, which takes no
/// `pcommon.Map` (a map literal's value).
fn from_raw(l: Vec<Val>) -> EvalResult<Vec<AnyValue>> {
    l.into_iter()
        .map(|v| match v {
            Val::Map(_) => fail!("<Invalid value type pcommon.Map>"),
            v => v.into_owned().into_any(),
        })
        .collect()
}

/// A slice parameter given a list literal with a map literal in it: the
/// Collector makes the slice when it parses the statement, and
/// `pcommon.Slice.FromRaw` takes no `pcommon.Map`.
fn literal_slice(call: &ast::Call, target: &Expr) -> Result<(), ParseError> {
    match target {
        Expr::List(items)
            if items.iter().any(|e| matches!(e, Expr::Map(_)))
                && items
                    .iter()
                    .all(|e| matches!(e, Expr::Map(_) | Expr::Lit(_))) =>
        {
            Err(ParseError::new(
                call.col,
                "invalid argument at position 0: <Invalid value type pcommon.Map>",
            ))
        }
        _ => Ok(()),
    }
}

/// `sortSlice`: ints as ints, ints with doubles as doubles, anything with
/// a string, bool or empty value by `AsString`; a slice holding a map,
/// slice or bytes comes back as it is. The values keep their own types.
fn sort_values(items: Vec<AnyValue>, desc: bool) -> Val<'static> {
    use std::cmp::Ordering;
    enum Common {
        Int,
        Double,
        Str,
    }
    let mut common = match items.first().map(|v| &v.value) {
        Some(Some(A::DoubleValue(_))) => Common::Double,
        _ => Common::Int,
    };
    let (mut strings, mut doubles) = (false, false);
    for v in &items {
        match &v.value {
            Some(A::IntValue(_)) => doubles |= matches!(common, Common::Double),
            Some(A::DoubleValue(_)) => doubles |= matches!(common, Common::Int),
            Some(A::StringValue(_) | A::BoolValue(_)) | None => strings = true,
            _ => return Val::Slice(Cow::Owned(items)),
        }
    }
    if strings {
        common = Common::Str;
    } else if doubles {
        common = Common::Double;
    }
    // Go's cmp.Compare: NaN before every number.
    let float = |v: &AnyValue| match v.value {
        Some(A::IntValue(i)) => i as f64,
        Some(A::DoubleValue(d)) => d,
        _ => 0.0,
    };
    let go_cmp = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    };
    let mut keyed: Vec<(Key, AnyValue)> = items
        .into_iter()
        .map(|v| {
            let k = match common {
                Common::Int => Key::I(match v.value {
                    Some(A::IntValue(i)) => i,
                    _ => 0,
                }),
                Common::Double => Key::F(float(&v)),
                Common::Str => Key::S(crate::value::any_as_string(&v)),
            };
            (k, v)
        })
        .collect();
    keyed.sort_by(|(a, _), (b, _)| {
        let o = match (a, b) {
            (Key::I(x), Key::I(y)) => x.cmp(y),
            (Key::F(x), Key::F(y)) => go_cmp(*x, *y),
            (Key::S(x), Key::S(y)) => x.cmp(y),
            _ => Ordering::Equal,
        };
        if desc {
            o.reverse()
        } else {
            o
        }
    });
    Val::List(
        keyed
            .into_iter()
            .map(|(_, v)| Val::from_any(&v).into_owned())
            .collect(),
    )
}

enum Key {
    I(i64),
    F(f64),
    S(String),
}

/// `ProfileID`'s bytes: 16 raw, or 32 hex digits.
fn profile_id(v: &Val) -> EvalResult<Val<'static>> {
    let b = args::bytes_like(v)?.unwrap_or_default();
    let mut id = [0u8; 16];
    match b.len() {
        16 => id.copy_from_slice(&b),
        32 => {
            if let Err(e) = hex::decode_to_slice(&b[..], &mut id) {
                fail!("ProfileID: invalid hex ID: {e}");
            }
        }
        n => fail!("ProfileID: invalid ID length: expected 16 or 32 bytes, got {n}"),
    }
    Ok(Val::ProfileId(id))
}

/// `parseutils.SplitString`: `s` split at `delim` outside single or double
/// quotes (which are dropped; a backslash keeps the next quote), empty
/// parts left out.
fn split_quoted(s: &str, delim: &str) -> EvalResult<Vec<String>> {
    let (b, d) = (s.as_bytes(), delim.as_bytes());
    let mut out = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut quote = 0u8;
    let mut escaped = false;
    let mut i = 0;
    while i < b.len() {
        if quote == 0 && b[i..].starts_with(d) {
            if !cur.is_empty() {
                out.push(String::from_utf8_lossy(&cur).into_owned());
                cur.clear();
            }
            i += d.len();
            continue;
        }
        let c = b[i];
        i += 1;
        if !escaped {
            if quote == 0 && (c == b'"' || c == b'\'') {
                quote = c;
                continue;
            }
            if c == quote {
                quote = 0;
                continue;
            }
            escaped = c == b'\\';
        } else {
            escaped = false;
        }
        cur.push(c);
    }
    if quote != 0 {
        fail!("splitting source {s:?} into pairs failed: never reached the end of a quoted value");
    }
    if !cur.is_empty() {
        out.push(String::from_utf8_lossy(&cur).into_owned());
    }
    Ok(out)
}

/// The value at `path` through nested maps, as `SliceToMap` finds it.
fn path_value<'a>(m: &'a [KeyValue], path: &[String]) -> Option<&'a AnyValue> {
    let (first, rest) = path.split_first()?;
    let v = crate::value::map_get(m, first)?;
    if rest.is_empty() {
        return Some(v);
    }
    match &v.value {
        Some(A::KvlistValue(inner)) => path_value(&inner.values, rest),
        _ => None,
    }
}

/// A hash as lowercase hex, as the Collector's converters give it: the
/// digests as they are; Murmur3's words little-endian (`h1` first, for
/// 128 bits), as `binary.LittleEndian` writes them; XXH3's big-endian, as
/// `zeebo/xxh3` sums them.
fn digest_hex(d: Digest, b: &[u8]) -> String {
    use sha2::Digest as _;
    let mut reader = b;
    match d {
        Digest::Md5 => hex::encode(md5::Md5::digest(b)),
        Digest::Sha1 => hex::encode(sha1::Sha1::digest(b)),
        Digest::Sha512 => hex::encode(sha2::Sha512::digest(b)),
        // Reading a slice cannot fail.
        Digest::Murmur3 => hex::encode(
            murmur3::murmur3_32(&mut reader, 0)
                .unwrap_or_default()
                .to_le_bytes(),
        ),
        Digest::Murmur3x128 => hex::encode(
            murmur3::murmur3_x64_128(&mut reader, 0)
                .unwrap_or_default()
                .to_le_bytes(),
        ),
        Digest::Xxh3 => hex::encode(twox_hash::XxHash3_64::oneshot(b).to_be_bytes()),
        Digest::Xxh128 => hex::encode(twox_hash::XxHash3_128::oneshot(b).to_be_bytes()),
    }
}

/// Go's `strconv.ParseInt(s, base, 64)`, with its errors: base 0 reads
/// the prefix (`0x`, `0o`, `0b`, or `0` for octal) and takes underscores
/// between digits.
fn parse_int(s: &str, base: i64) -> EvalResult<i64> {
    let err = |why: &str| -> EvalResult<i64> { fail!("strconv.ParseInt: parsing {s:?}: {why}") };
    if base == 1 || base > 36 {
        return err(&format!("invalid base {base}"));
    }
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits, prefixed) = if base == 0 {
        let lower = body.to_ascii_lowercase();
        match lower.get(..2) {
            Some("0x") => (16, &body[2..], true),
            Some("0o") => (8, &body[2..], true),
            Some("0b") => (2, &body[2..], true),
            _ if body.len() > 1 && body.starts_with('0') => (8, &body[1..], true),
            _ => (10, body, false),
        }
    } else {
        (base as u32, body, false)
    };
    let digits = if base == 0 && digits.contains('_') {
        // As Go's underscoreOK: each underscore between two digits (or
        // after the prefix).
        let b = digits.as_bytes();
        let ok = b.iter().enumerate().all(|(i, &c)| {
            c != b'_'
                || ((i > 0 && b[i - 1] != b'_' || i == 0 && prefixed)
                    && b.get(i + 1).is_some_and(|&n| n != b'_'))
        });
        if !ok {
            return err("invalid syntax");
        }
        std::borrow::Cow::Owned(digits.replace('_', ""))
    } else {
        std::borrow::Cow::Borrowed(digits)
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return err("invalid syntax");
    }
    let Ok(magnitude) = u64::from_str_radix(&digits, radix) else {
        // Digits that all read, too many of them: out of range.
        return if digits.chars().all(|c| c.is_digit(radix)) {
            err("value out of range")
        } else {
            err("invalid syntax")
        };
    };
    let limit = if neg { 1u64 << 63 } else { (1u64 << 63) - 1 };
    if magnitude > limit {
        return err("value out of range");
    }
    Ok(if neg {
        (magnitude as i64).wrapping_neg()
    } else {
        magnitude as i64
    })
}

/// A network as Go's `net.ParseCIDR` reads it: its address masked to
/// the prefix.
struct Cidr {
    net: std::net::IpAddr,
    bits: u8,
}

impl Cidr {
    /// Go's `IPNet.Contains`: an IPv4 network holds IPv4 addresses, also
    /// written IPv4-mapped (`::ffff:a.b.c.d`); an IPv6 one, IPv6 ones.
    fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr as A;
        let ip = match ip {
            A::V6(v6) => v6.to_ipv4_mapped().map_or(ip, A::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (A::V4(n), A::V4(a)) => {
                masked(u32::from(a) as u128, 32, self.bits) == u32::from(n) as u128
            }
            (A::V6(n), A::V6(a)) => masked(u128::from(a), 128, self.bits) == u128::from(n),
            _ => false,
        }
    }
}

/// The first `bits` of a `width`-bit address.
fn masked(addr: u128, width: u32, bits: u8) -> u128 {
    match u32::from(bits) {
        0 => 0,
        b => addr & (u128::MAX << (width - b)) & (u128::MAX >> (128 - width)),
    }
}

fn cidr(s: &str) -> EvalResult<Cidr> {
    use std::net::IpAddr as A;
    let bad = || crate::error::EvalError(format!("invalid CIDR address: {s}"));
    let (addr, len) = s.split_once('/').ok_or_else(bad)?;
    let ip: A = addr.parse().map_err(|_| bad())?;
    let width = if ip.is_ipv4() { 32 } else { 128 };
    let bits = match len.parse::<u32>() {
        Ok(b) if b <= width && !len.starts_with('+') => b as u8,
        _ => return Err(bad()),
    };
    Ok(match ip {
        A::V4(v4) => Cidr {
            net: A::V4((masked(u32::from(v4) as u128, 32, bits) as u32).into()),
            bits,
        },
        // Go takes an IPv4-mapped network as the IPv4 one it maps.
        A::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) if bits >= 96 => Cidr {
                net: A::V4((masked(u32::from(v4) as u128, 32, bits - 96) as u32).into()),
                bits: bits - 96,
            },
            _ => Cidr {
                net: A::V6(masked(u128::from(v6), 128, bits).into()),
                bits,
            },
        },
    })
}

/// The Luhn check of `digits` (spaces taken out), as the Collector's
/// `IsValidLuhn`: false when empty, an error on anything but a digit.
fn luhn(digits: &str) -> EvalResult<bool> {
    if digits.is_empty() {
        return Ok(false);
    }
    let mut sum = 0;
    for (k, c) in digits.chars().rev().enumerate() {
        let Some(mut n) = c.to_digit(10) else {
            fail!("strconv.Atoi: parsing {:?}: invalid syntax", c.to_string());
        };
        // Every second digit from the check digit is doubled.
        if k % 2 == 1 {
            n *= 2;
            if n > 9 {
                n -= 9;
            }
        }
        sum += n;
    }
    Ok(sum % 10 == 0)
}

/// Go's `Duration.Hours()` (and the other units): the whole units plus
/// the rest as a fraction for the float ones, truncated toward zero for
/// the integer ones.
fn duration_in(d: i64, unit: Unit) -> Val<'static> {
    let float = |per: i64| Val::Double((d / per) as f64 + (d % per) as f64 / per as f64);
    match unit {
        Unit::Hours => float(3_600_000_000_000),
        Unit::Minutes => float(60_000_000_000),
        Unit::Seconds => float(1_000_000_000),
        Unit::Milliseconds => Val::Int(d / 1_000_000),
        Unit::Microseconds => Val::Int(d / 1_000),
        Unit::Nanoseconds => Val::Int(d),
    }
}

fn time(v: &Val) -> EvalResult<i64> {
    match v {
        Val::Time(t) => Ok(*t),
        other => fail!("expected time but got {}", other.type_name()),
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "<nil>",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "float64",
        serde_json::Value::String(_) => "string",
        _ => "",
    }
}

fn json_map(o: serde_json::Map<String, serde_json::Value>) -> Vec<KeyValue> {
    o.into_iter()
        .map(|(k, v)| KeyValue {
            key: k,
            value: Some(json_any(v)),
            ..Default::default()
        })
        .collect()
}

/// A parsed JSON value as the Collector stores it: every number a double.
fn json_any(v: serde_json::Value) -> AnyValue {
    use serde_json::Value as J;
    AnyValue {
        value: match v {
            J::Null => None,
            J::Bool(b) => Some(A::BoolValue(b)),
            J::Number(n) => Some(A::DoubleValue(n.as_f64().unwrap_or(0.0))),
            J::String(s) => Some(A::StringValue(s)),
            J::Array(a) => Some(A::ArrayValue(ArrayValue {
                values: a.into_iter().map(json_any).collect(),
            })),
            J::Object(o) => Some(A::KvlistValue(KeyValueList {
                values: json_map(o),
            })),
        },
    }
}
