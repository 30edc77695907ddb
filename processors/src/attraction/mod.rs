//! The Collector's `internal/coreinternal/attraction` (v0.161.0): the
//! actions `insert`, `update`, `upsert`, `delete`, `hash`, `extract` and
//! `convert` on one attribute map, shared by the `resource` processor (on
//! each resource's attributes) and `attributes` (on each profile's).

mod config;

#[cfg(test)]
mod tests;

use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use profcol_model::BatchMeta;
use profcol_ottl::value::{any_as_string, map_put, map_remove};

pub use config::{
    any_value, compile, regex_error, Action, ActionConfig, ActionKind, Converted, Source,
};

/// Runs every action in order on `attrs`; `meta` answers `from_context`.
pub fn apply_all(actions: &[Action], attrs: &mut Vec<KeyValue>, meta: &BatchMeta) {
    for a in actions {
        apply(a, attrs, meta);
    }
}

fn find<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    profcol_ottl::value::map_get(attrs, key)
}

/// The value an insert/update/upsert writes, if its source has one.
fn source(a: &Action, attrs: &[KeyValue], meta: &BatchMeta) -> Option<AnyValue> {
    let v = match &a.source {
        Source::Value(v) => Some(v.clone()),
        Source::Attribute(k) => find(attrs, k).cloned(),
        Source::Context(k) => from_context(k, meta),
        Source::None => None,
    };
    v.or_else(|| a.default.clone())
}

/// `from_context`: `metadata.<header>` (or a bare header name) from the
/// receiver's `include_metadata`, `client.address`; `auth.*` attributes
/// are not kept by profcol's authenticators.
fn from_context(k: &str, meta: &BatchMeta) -> Option<AnyValue> {
    let s = |v: String| AnyValue {
        value: Some(A::StringValue(v)),
    };
    if k == "client.address" {
        return meta.client_addr.map(|a| s(a.ip().to_string()));
    }
    if k.starts_with("auth.") {
        return None;
    }
    let header = k
        .strip_prefix("metadata.")
        .unwrap_or(k)
        .to_ascii_lowercase();
    let vals: Vec<&String> = meta
        .metadata
        .iter()
        .filter(|(h, _)| *h == header)
        .map(|(_, v)| v)
        .collect();
    match vals.len() {
        0 => None,
        1 => Some(s(vals[0].clone())),
        // Several values: the Collector joins them with ";".
        _ => Some(s(vals
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(";"))),
    }
}

fn apply(a: &Action, attrs: &mut Vec<KeyValue>, meta: &BatchMeta) {
    match a.kind {
        ActionKind::Insert => {
            if find(attrs, &a.key).is_none() {
                if let Some(v) = source(a, attrs, meta) {
                    attrs.push(KeyValue {
                        key: a.key.clone(),
                        value: Some(v),
                        ..Default::default()
                    });
                }
            }
        }
        ActionKind::Update => {
            if find(attrs, &a.key).is_some() {
                if let Some(v) = source(a, attrs, meta) {
                    map_put(attrs, &a.key, v);
                }
            }
        }
        ActionKind::Upsert => {
            if let Some(v) = source(a, attrs, meta) {
                map_put(attrs, &a.key, v);
            }
        }
        ActionKind::Delete => {
            if !a.key.is_empty() {
                map_remove(attrs, &a.key);
            }
            if let Some(re) = &a.pattern {
                attrs.retain(|kv| !re.is_match(&kv.key));
            }
        }
        ActionKind::Hash => {
            for kv in attrs.iter_mut() {
                let by_key = !a.key.is_empty() && kv.key == a.key;
                let times = by_key as usize
                    + a.pattern.as_ref().is_some_and(|re| re.is_match(&kv.key)) as usize;
                for _ in 0..times {
                    let v = kv.value.get_or_insert_with(Default::default);
                    *v = AnyValue {
                        value: Some(A::StringValue(hash(v))),
                    };
                }
            }
        }
        ActionKind::Extract => {
            let Some(re) = &a.pattern else { return };
            let Some(A::StringValue(s)) = find(attrs, &a.key).and_then(|v| v.value.clone()) else {
                return;
            };
            let Some(caps) = re.captures(&s) else { return };
            for name in re.capture_names().flatten() {
                let v = caps.name(name).map_or("", |m| m.as_str()).to_string();
                map_put(
                    attrs,
                    name,
                    AnyValue {
                        value: Some(A::StringValue(v)),
                    },
                );
            }
        }
        ActionKind::Convert => {
            let Some(to) = a.converted else { return };
            let Some(slot) = attrs
                .iter_mut()
                .find(|kv| kv.key == a.key)
                .and_then(|kv| kv.value.as_mut())
            else {
                return;
            };
            if let Some(v) = convert(slot, to) {
                *slot = v;
            }
        }
    }
}

/// `attraction`'s hash: SHA-256 of the value's bytes (ints and doubles
/// little-endian), lowercase hex; other types become "".
fn hash(v: &AnyValue) -> String {
    let bytes: Vec<u8> = match &v.value {
        Some(A::StringValue(s)) => s.as_bytes().to_vec(),
        Some(A::BoolValue(b)) => vec![*b as u8],
        Some(A::IntValue(i)) => i.to_le_bytes().to_vec(),
        Some(A::DoubleValue(d)) => d.to_bits().to_le_bytes().to_vec(),
        _ => return String::new(),
    };
    profcol_ottl::funcs::sha256_hex(&bytes)
}

fn convert(v: &AnyValue, to: Converted) -> Option<AnyValue> {
    let out = match (to, &v.value) {
        (Converted::String, _) => A::StringValue(any_as_string(v)),
        (Converted::Int, Some(A::IntValue(i))) => A::IntValue(*i),
        (Converted::Int, Some(A::DoubleValue(d))) => A::IntValue(*d as i64),
        (Converted::Int, Some(A::BoolValue(b))) => A::IntValue(*b as i64),
        (Converted::Int, Some(A::StringValue(s))) => A::IntValue(s.parse().ok()?),
        (Converted::Double, Some(A::DoubleValue(d))) => A::DoubleValue(*d),
        (Converted::Double, Some(A::IntValue(i))) => A::DoubleValue(*i as f64),
        (Converted::Double, Some(A::BoolValue(b))) => A::DoubleValue(*b as i64 as f64),
        (Converted::Double, Some(A::StringValue(s))) => A::DoubleValue(s.parse().ok()?),
        _ => return None,
    };
    Some(AnyValue { value: Some(out) })
}
