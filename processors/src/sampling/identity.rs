//! The bytes each mode hashes. They must be the same on every instance that
//! sees the same session, profile or trace, whatever else the batch holds.

use std::borrow::Cow;

use profcol_model::dictionary::Lookup;
use profcol_model::proto::{any_value::Value, Link, Profile, Resource};
use profcol_model::resolved::format_value;

pub(crate) const PROFILER_ID: &str = "sentry.profiler_id";
pub(crate) const SERVICE_INSTANCE_ID: &str = "service.instance.id";

/// A session's bytes: the 16 bytes of `sentry.profiler_id` (its text when it
/// is not a UUID, so hyphenated and plain forms agree), else `resource`'s
/// identity.
pub(crate) fn session<'a>(lookup: &Lookup<'a>, p: &Profile, resource: &'a [u8]) -> Cow<'a, [u8]> {
    match lookup.attribute_str(&p.attribute_indices, PROFILER_ID) {
        Some(id) if !id.is_empty() => match parse_uuid(id) {
            Some(uuid) => Cow::Owned(uuid.to_vec()),
            None => Cow::Borrowed(id.as_bytes()),
        },
        _ => Cow::Borrowed(resource),
    }
}

/// A Sentry id's 16 bytes, read as `profcol_sentry::ids::parse_uuid` reads
/// it (hyphenated or not, in braces or after `urn:uuid:`; the nil id is no
/// id), without depending on the Sentry formats for it.
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    uuid::Uuid::try_parse(s.trim())
        .ok()
        .filter(|u| !u.is_nil())
        .map(uuid::Uuid::into_bytes)
}

/// A resource's bytes: `service.instance.id`, else every attribute as
/// `key=value`, sorted, one per line (the same resource from any producer
/// hashes the same whatever the attribute order).
pub(crate) fn resource(lookup: &Lookup<'_>, r: Option<&Resource>) -> Vec<u8> {
    let attrs = r.map(|r| r.attributes.as_slice()).unwrap_or_default();
    if let Some(v) = attrs
        .iter()
        .find(|kv| lookup.key_of(kv) == SERVICE_INSTANCE_ID)
        .and_then(|kv| kv.value.as_ref())
    {
        return match &v.value {
            Some(Value::StringValue(s)) => s.as_bytes().to_vec(),
            _ => format_value(v, lookup).into_bytes(),
        };
    }
    let mut lines: Vec<String> = attrs
        .iter()
        .map(|kv| {
            let value = kv
                .value
                .as_ref()
                .map(|v| format_value(v, lookup))
                .unwrap_or_default();
            format!("{}={value}", lookup.key_of(kv))
        })
        .collect();
    lines.sort_unstable();
    lines.join("\n").into_bytes()
}

/// A profile's bytes: its `profile_id`, unless unset (all zeros is invalid
/// per the proto).
pub(crate) fn profile(p: &Profile) -> Option<&[u8]> {
    valid_id(&p.profile_id)
}

/// A link's trace id, unless unset (the W3C invalid all-zero id included).
pub(crate) fn trace(link: &Link) -> Option<&[u8]> {
    valid_id(&link.trace_id)
}

fn valid_id(id: &[u8]) -> Option<&[u8]> {
    id.iter().any(|&b| b != 0).then_some(id)
}
