//! ${env:NAME}, ${env:NAME:-default}, ${NAME} and $$ expansion.
//!
//! Runs after parsing and merging, on string scalars only (never on keys), as
//! the Collector's confmap does:
//! - `${env:NAME}` and `${NAME}` read the environment; an unset variable
//!   without a default reads as empty (the Collector logs a warning and does
//!   the same); `${env:NAME:-default}` uses `default` only when NAME is unset.
//! - A value that is one whole reference is typed as if its text had been
//!   written in the YAML (`port: ${env:PORT}` gives an int); the text is kept
//!   so that a string field still receives it verbatim (`"0123"` stays
//!   `"0123"`), and a reference that reads as null (unset) leaves a typed
//!   field at its default.
//! - `$$` is a literal `$`; `$` followed by anything else, and `$NAME`
//!   without braces, stay as written.
//! - Any other scheme (`${file:...}`, `${http:...}`) is an error.
//!
//! Unlike the Collector, an expanded value is not scanned again: a secret
//! that contains `$` or `${` arrives unchanged.

use std::collections::BTreeMap;

use figment::value::{Empty, Num, Tag, Value};

use super::ConfigErrors;

/// Text of values that were one whole `${...}` reference and now hold a
/// typed scalar or null, keyed by their key path. A string field receives
/// this text instead of the typed value.
pub type Originals = BTreeMap<Vec<String>, String>;

/// Expands every string scalar under `value`. `path` is where `value` sits;
/// errors carry it joined with `::`.
pub(super) fn expand_tree(
    value: &mut Value,
    path: &mut Vec<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
    originals: &mut Originals,
    errs: &mut ConfigErrors,
) {
    match value {
        Value::String(tag, s) => match expand_str(s, lookup) {
            Ok(Expanded::Unchanged) => {}
            Ok(Expanded::Text(t)) => *s = t,
            Ok(Expanded::Whole(resolved)) => {
                let (typed, original) = type_whole(*tag, resolved);
                if let Some(original) = original {
                    originals.insert(path.clone(), original);
                }
                *value = typed;
            }
            Err(msg) => errs.push(path.join("::"), msg),
        },
        Value::Dict(_, dict) => {
            for (k, v) in dict.iter_mut() {
                path.push(k.clone());
                expand_tree(v, path, lookup, originals, errs);
                path.pop();
            }
        }
        Value::Array(_, items) => {
            for (i, v) in items.iter_mut().enumerate() {
                path.push(i.to_string());
                expand_tree(v, path, lookup, originals, errs);
                path.pop();
            }
        }
        Value::Char(..) | Value::Bool(..) | Value::Num(..) | Value::Empty(..) => {}
    }
}

/// What one `${...}` reference gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resolved {
    /// The variable's value.
    Set(String),
    /// The `:-` default of an unset variable.
    Default(String),
    /// Unset, with no default.
    Unset,
}

/// The result of expanding one string scalar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expanded {
    /// Nothing to expand and no `$$`.
    Unchanged,
    /// The string after expansion.
    Text(String),
    /// The string was exactly one reference.
    Whole(Resolved),
}

/// Expands one string.
pub(super) fn expand_str(
    s: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, String> {
    if !s.contains('$') {
        return Ok(Expanded::Unchanged);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(body_and_more) = tail.strip_prefix("${") {
            let Some(close) = body_and_more.find('}') else {
                // No closing brace: not a reference, as in the Collector.
                out.push_str(tail);
                rest = "";
                break;
            };
            let body = &body_and_more[..close];
            let resolved = resolve(body, lookup)?;
            let whole = tail.len() == s.len() && close + 3 == s.len();
            if whole {
                return Ok(Expanded::Whole(resolved));
            }
            rest = &body_and_more[close + 1..];
            match resolved {
                Resolved::Set(v) | Resolved::Default(v) => out.push_str(&v),
                Resolved::Unset => {}
            }
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(Expanded::Text(out))
}

/// Resolves the inside of `${...}`.
fn resolve(body: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Resolved, String> {
    if body.contains("${") {
        return Err(format!(
            "nested references are not supported in \"${{{body}}}\""
        ));
    }
    let (name, default) = match body.split_once(':') {
        None => (body, None),
        Some(("env", rest)) => match rest.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (rest, None),
        },
        Some((scheme, rest)) => {
            // `${NAME:-default}` is shell syntax the Collector does not
            // take (it reads NAME as a scheme): point at the form it takes.
            let hint = if rest.starts_with('-') && is_env_name(scheme) {
                format!("; did you mean \"${{env:{body}}}\"?")
            } else {
                String::new()
            };
            return Err(if is_scheme(scheme) {
                format!(
                    "unsupported scheme {scheme:?} in \"${{{body}}}\": only env is supported{hint}"
                )
            } else {
                format!("invalid reference \"${{{body}}}\"{hint}")
            });
        }
    };
    if !is_env_name(name) {
        return Err(format!(
            "environment variable {name:?} has invalid name: must match [a-zA-Z_][a-zA-Z0-9_]*"
        ));
    }
    Ok(match (lookup(name), default) {
        (Some(v), _) => Resolved::Set(v),
        (None, Some(d)) => Resolved::Default(d.to_owned()),
        (None, None) => Resolved::Unset,
    })
}

/// The Collector's (and RFC 3986's) scheme syntax, at least two characters.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Types a whole-value reference as its text would be typed in the YAML:
/// booleans and numbers become scalars, null (or unset) becomes null; maps
/// and lists stay text. Returns the original text when the type changed.
fn type_whole(tag: Tag, resolved: Resolved) -> (Value, Option<String>) {
    let text = match resolved {
        Resolved::Unset => return (Value::Empty(tag, Empty::None), Some(String::new())),
        // An explicit empty default means the empty string, not null.
        Resolved::Default(d) if d.is_empty() => return (Value::String(tag, d), None),
        Resolved::Set(t) | Resolved::Default(t) => t,
    };
    let typed = match serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text) {
        Ok(serde_yaml_ng::Value::Null) => Value::Empty(tag, Empty::None),
        Ok(serde_yaml_ng::Value::Bool(b)) => Value::Bool(tag, b),
        Ok(serde_yaml_ng::Value::Number(n)) => Value::Num(
            tag,
            if let Some(u) = n.as_u64() {
                Num::U64(u)
            } else if let Some(i) = n.as_i64() {
                Num::I64(i)
            } else {
                Num::F64(n.as_f64().unwrap_or(f64::NAN))
            },
        ),
        _ => return (Value::String(tag, text), None),
    };
    (typed, Some(text))
}
