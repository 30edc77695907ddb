//! String helpers the functions share: the functions a `function`
//! argument may name, globs, case conversion, Go durations, `Sprintf`.

use sha2::{Digest, Sha256};

use crate::error::{EvalError, EvalResult};
use crate::fail;
use crate::value::{go_float, Val};

/// A converter named as an argument (`replace_pattern(..., SHA256)`),
/// called with one string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrFn {
    Sha256,
    ToLowerCase,
    ToUpperCase,
    Hex,
    String,
}

impl StrFn {
    pub fn named(n: &str) -> Result<StrFn, String> {
        Ok(match n {
            "SHA256" => StrFn::Sha256,
            "ToLowerCase" => StrFn::ToLowerCase,
            "ToUpperCase" => StrFn::ToUpperCase,
            "Hex" => StrFn::Hex,
            "String" => StrFn::String,
            "SHA1" | "SHA512" | "MD5" | "FNV" | "XXH3" | "XXH128" | "Murmur3Hash" | "Murmur3Hash128" | "Base64Encode" => {
                return Err(format!("function {n} is not supported by profcol yet (SHA256, ToLowerCase, ToUpperCase, Hex and String are)"))
            }
            _ => return Err(format!("undefined function {n}")),
        })
    }

    pub fn call(self, s: &str) -> String {
        match self {
            StrFn::Sha256 => sha256_hex(s.as_bytes()),
            StrFn::ToLowerCase => s.to_lowercase(),
            StrFn::ToUpperCase => s.to_uppercase(),
            StrFn::Hex => hex::encode(s.as_bytes()),
            StrFn::String => s.to_string(),
        }
    }
}

pub fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// `github.com/gobwas/glob` without separators as an anchored regular
/// expression: `*`, `?`, `[abc]`, `[!a]`, `[a-z]`, `{a,b}`, `\` escapes.
pub(super) fn glob_to_regex(g: &str) -> EvalResult<String> {
    let mut out = String::from("(?s)^");
    let mut chars = g.chars().peekable();
    let mut depth = 0;
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '\\' => match chars.next() {
                Some(e) => out.push_str(&regex::escape(&e.to_string())),
                None => fail!("the regex pattern supplied to the function is not a valid pattern: unexpected end of input"),
            },
            '[' => {
                out.push('[');
                if chars.peek() == Some(&'!') {
                    chars.next();
                    out.push('^');
                }
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == ']' {
                        closed = true;
                        break;
                    }
                    if matches!(c, '\\' | '[' | '^' | '&' | '~') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                if !closed {
                    fail!("the regex pattern supplied to the function is not a valid pattern: unexpected end of input");
                }
                out.push(']');
            }
            '{' => {
                depth += 1;
                out.push_str("(?:");
            }
            '}' if depth > 0 => {
                depth -= 1;
                out.push(')');
            }
            ',' if depth > 0 => out.push('|'),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    if depth > 0 {
        fail!("the regex pattern supplied to the function is not a valid pattern: unclosed {{");
    }
    out.push('$');
    Ok(out)
}

fn words(s: &str) -> Vec<String> {
    // iancoleman/strcase: split at separators, lower→upper and
    // letter↔digit boundaries, and before the last of an uppercase run.
    let mut words = Vec::new();
    let mut cur = String::new();
    let cs: Vec<char> = s.chars().collect();
    for (i, &c) in cs.iter().enumerate() {
        if c == '_' || c == '-' || c == ' ' || c == '.' {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if let Some(&p) = cur.chars().last().as_ref() {
            let next_lower = cs.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_ascii_digit() != c.is_ascii_digit()
                    && c.is_alphabetic() != p.is_alphabetic()
                    && !p.is_ascii_digit());
            if boundary {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

pub(super) fn to_snake(s: &str) -> String {
    words(s)
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_")
}

pub(super) fn to_camel(s: &str) -> String {
    words(s)
        .iter()
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f
                    .to_uppercase()
                    .chain(c.flat_map(char::to_lowercase))
                    .collect(),
                None => String::new(),
            }
        })
        .collect()
}

/// Go's `time.ParseDuration`.
pub(super) fn parse_duration(s: &str) -> EvalResult<i64> {
    let bad = || EvalError(format!("time: invalid duration {s:?}"));
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let num: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..u] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += num * mult;
        rest = &rest[u..];
    }
    Ok(if neg { -(total as i64) } else { total as i64 })
}

/// Go's `fmt.Sprintf` for the verbs configs use: `%s %v %d %f %q %x %t %%`.
pub(super) fn sprintf(format: &str, args: &[Val]) -> String {
    let mut out = String::new();
    let mut it = format.chars().peekable();
    let mut n = 0;
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(verb) = it.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(a) = args.get(n) else {
            out.push_str(&format!("%!{verb}(MISSING)"));
            continue;
        };
        n += 1;
        let plain = go_value(a);
        let s = match (verb, a) {
            ('s' | 'v', Val::Str(s)) => s.to_string(),
            ('v', _) => plain,
            ('d', Val::Int(i)) => i.to_string(),
            ('f', Val::Double(d)) => format!("{d:.6}"),
            ('t', Val::Bool(b)) => b.to_string(),
            ('q', Val::Str(s)) => format!("{s:?}"),
            ('x', Val::Str(s)) => hex::encode(s.as_bytes()),
            ('x', Val::Int(i)) => format!("{i:x}"),
            ('x', Val::Bytes(b)) => hex::encode(b),
            ('s', Val::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
            (v, a) => format!("%!{v}({}={plain})", a.type_name()),
        };
        out.push_str(&s);
    }
    if n < args.len() {
        out.push_str("%!(EXTRA ");
        let extra: Vec<String> = args[n..]
            .iter()
            .map(|a| format!("{}={}", a.type_name(), go_value(a)))
            .collect();
        out.push_str(&extra.join(", "));
        out.push(')');
    }
    out
}

fn go_value(a: &Val) -> String {
    match a {
        Val::Nil => "<nil>".into(),
        Val::Str(s) => s.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Double(d) => go_float(*d),
        Val::Bool(b) => b.to_string(),
        Val::Bytes(b) => format!("{:?}", b.as_ref()).replace(',', ""),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let r = |g: &str| regex::Regex::new(&glob_to_regex(g).unwrap()).unwrap();
        assert!(r("*ecret*").is_match("my-secret-x"));
        assert!(!r("foo.*").is_match("fooX"));
        assert!(r("foo.*").is_match("foo.bar"));
        assert!(r("a?c").is_match("abc"));
        assert!(r("{x,y}z").is_match("yz"));
        assert!(r("[!a]b").is_match("cb") && !r("[!a]b").is_match("ab"));
    }

    #[test]
    fn cases_and_durations() {
        assert_eq!(to_snake("HelloWorld"), "hello_world");
        assert_eq!(to_camel("hello_world"), "HelloWorld");
        assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000_000_000);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500_000_000);
        assert!(parse_duration("1x").is_err());
        assert_eq!(
            sprintf("%s-%d", &[Val::Str("a".into()), Val::Int(2)]),
            "a-2"
        );
        assert_eq!(sprintf("%d", &[Val::Str("x".into())]), "%!d(string=x)");
    }
}
