//! OTLP names and values as Prometheus writes them: prometheus/otlptranslator's
//! `MetricNamer` and `LabelNamer` (escaping to `_`), pcommon's `AsString`,
//! and Go's `strconv.FormatFloat(f, 'g', -1, 64)` for sample values.

use profcol_model::proto::{any_value, AnyValue};

/// What the translator calls a metric's type: it picks the suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameType {
    Gauge,
    MonotonicCounter,
    NonMonotonicCounter,
    Histogram,
    ExponentialHistogram,
}

fn unit_name(u: &str) -> &str {
    match u {
        "d" => "days",
        "h" => "hours",
        "min" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" => "microseconds",
        "ns" => "nanoseconds",
        "By" => "bytes",
        "KiBy" => "kibibytes",
        "MiBy" => "mebibytes",
        "GiBy" => "gibibytes",
        "TiBy" => "tibibytes",
        "KBy" => "kilobytes",
        "MBy" => "megabytes",
        "GBy" => "gigabytes",
        "TBy" => "terabytes",
        "m" => "meters",
        "V" => "volts",
        "A" => "amperes",
        "J" => "joules",
        "W" => "watts",
        "g" => "grams",
        "Cel" => "celsius",
        "Hz" => "hertz",
        "1" => "",
        "%" => "percent",
        other => other,
    }
}

fn per_unit_name(u: &str) -> &str {
    match u {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "mo" => "month",
        "y" => "year",
        other => other,
    }
}

fn is_metric_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == ':'
}

/// The main and `per_` suffixes of a UCUM unit (`By/s`: bytes, per_second);
/// annotations (`{samples}`) give none.
fn unit_suffixes(unit: &str) -> (String, String) {
    let mut parts = unit.splitn(2, '/');
    let main = parts.next().unwrap_or("").trim();
    let main = if main.is_empty() || main.contains(['{', '}']) {
        String::new()
    } else {
        clean_unit(unit_name(main))
    };
    let per = match parts.next().map(str::trim) {
        Some(p) if !p.is_empty() && !p.contains(['{', '}']) => {
            clean_unit(&format!("per_{}", per_unit_name(p)))
        }
        _ => String::new(),
    };
    (main, per)
}

/// Invalid characters to `_`, runs of `_` to one, no leading `_`.
fn clean_unit(u: &str) -> String {
    let mut out = String::with_capacity(u.len());
    for c in u.chars() {
        let c = if is_metric_char(c) { c } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out.trim_start_matches('_').to_owned()
}

/// The Prometheus name of an OTLP metric, as the Collector's exporter
/// builds it; `None` when nothing valid is left.
pub fn metric_name(
    name: &str,
    unit: &str,
    ty: NameType,
    namespace: &str,
    suffixes: bool,
) -> Option<String> {
    let out = if suffixes {
        let mut tokens: Vec<String> = name
            .split(|c: char| !is_metric_char(c))
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        let (mut main, mut per) = unit_suffixes(unit);
        if tokens.contains(&main) {
            main.clear();
        }
        if per == "per_" {
            per.clear();
        } else {
            per = per.trim_end_matches('_').to_owned();
            if tokens.contains(&per) {
                per.clear();
            }
        }
        if !per.is_empty() {
            main = main.trim_end_matches('_').to_owned();
        }
        for s in [main, per] {
            if !s.is_empty() {
                tokens.push(s);
            }
        }
        let mut last = |s: &str| {
            tokens.retain(|t| t != s);
            tokens.push(s.to_owned());
        };
        if ty == NameType::MonotonicCounter {
            last("total");
        }
        if unit == "1" && ty == NameType::Gauge {
            last("ratio");
        }
        if !namespace.is_empty() {
            tokens.insert(0, namespace.to_owned());
        }
        let mut n = tokens.join("_");
        if n.starts_with(|c: char| c.is_ascii_digit()) {
            n.insert(0, '_');
        }
        n
    } else {
        let replaced = |s: &str| {
            s.split(|c: char| !(is_metric_char(c) || c == '_'))
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("_")
        };
        let n = replaced(name);
        if !namespace.is_empty() {
            format!("{}_{n}", replaced(namespace))
        } else if n.starts_with(|c: char| c.is_ascii_digit()) {
            format!("_{n}")
        } else {
            n
        }
    };
    (!out.is_empty() && (out == name || out.chars().any(|c| c != '_'))).then_some(out)
}

/// The Prometheus label name of an attribute key; `None` when empty.
pub fn label_name(key: &str) -> Option<String> {
    if key.is_empty() {
        return None;
    }
    let mut out: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "key_");
    } else if out.starts_with('_') && !out.starts_with("__") {
        out.insert_str(0, "key");
    }
    (out == key || out.chars().any(|c| c != '_')).then_some(out)
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
pub(super) fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not reserved (`__`).
pub(super) fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

/// A value as pcommon's `Value.AsString` writes it.
pub(super) fn value_string(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        None => String::new(),
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::DoubleValue(d)) => double_string(*d),
        Some(other) => json(other).map_or_else(String::new, |j| match j {
            serde_json::Value::String(s) => s,
            j => j.to_string(),
        }),
    }
}

fn json(v: &any_value::Value) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    Some(match v {
        any_value::Value::StringValue(s) => J::String(s.clone()),
        any_value::Value::BoolValue(b) => J::Bool(*b),
        any_value::Value::IntValue(i) => J::from(*i),
        any_value::Value::DoubleValue(d) => {
            serde_json::Number::from_f64(*d).map_or(J::Null, J::Number)
        }
        any_value::Value::BytesValue(b) => J::String(base64(b)),
        any_value::Value::ArrayValue(a) => J::Array(
            a.values
                .iter()
                .map(|v| v.value.as_ref().and_then(json).unwrap_or(J::Null))
                .collect(),
        ),
        any_value::Value::KvlistValue(l) => J::Object(
            l.values
                .iter()
                .map(|kv| {
                    let v = kv.value.as_ref().and_then(|v| v.value.as_ref());
                    (kv.key.clone(), v.and_then(json).unwrap_or(J::Null))
                })
                .collect(),
        ),
        any_value::Value::StringValueStrindex(_) => return None,
    })
}

/// pcommon's double as a string: ES6 number-to-string (`f` between 1e-6
/// and 1e21, else `e` with the exponent's sign).
fn double_string(d: f64) -> String {
    if d.is_nan() {
        return "json: unsupported value: NaN".into();
    }
    if d.is_infinite() {
        return format!(
            "json: unsupported value: {}",
            if d > 0.0 { "+Inf" } else { "-Inf" }
        );
    }
    let a = d.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let s = format!("{d:e}");
        match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => s,
        }
    } else {
        format!("{d}")
    }
}

fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` with Prometheus' spellings
/// of the infinities: the text format's sample values and `le` bounds.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as Go's.
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is an integer");
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let es = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{es}{:02}", exp.abs());
    }
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let int_len = exp as usize + 1;
    if digits.len() <= int_len {
        format!("{sign}{digits}{}", "0".repeat(int_len - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..int_len], &digits[int_len..])
    }
}

/// A label value in the text format: `\`, `"` and newlines escaped.
pub(super) fn escape_label_value(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP text in the text format: `\` and newlines escaped.
pub(super) fn escape_help(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}
