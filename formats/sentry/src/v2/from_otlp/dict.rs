//! Dictionary reads the exporter needs beyond [`Lookup`]'s: any scalar
//! value as text (a `thread.id` may be an int), resource attributes, and
//! entries that may be absent.

use std::borrow::Cow;

use profcol_model::dictionary::Lookup;
use profcol_model::proto::{any_value::Value, AnyValue, KeyValue};

/// Key and value of attribute `i`; `None` out of range or without a value.
pub(super) fn attr<'d>(d: Lookup<'d>, i: i32) -> Option<(&'d str, &'d AnyValue)> {
    let a = d.attribute(i);
    Some((d.string(a.key_strindex), a.value.as_ref()?))
}

/// A scalar value as Sentry's JSON strings hold it.
pub(super) fn text<'d>(d: Lookup<'d>, v: &'d AnyValue) -> Option<Cow<'d, str>> {
    match v.value.as_ref()? {
        Value::StringValue(s) => Some(Cow::Borrowed(s)),
        Value::StringValueStrindex(i) => Some(Cow::Borrowed(d.string(*i))),
        Value::IntValue(i) => Some(Cow::Owned(i.to_string())),
        Value::BoolValue(b) => Some(Cow::Owned(b.to_string())),
        Value::DoubleValue(d) => Some(Cow::Owned(d.to_string())),
        _ => None,
    }
}

/// [`text`] of the first attribute named `key` among `indices`.
pub(super) fn attr_text<'d>(d: Lookup<'d>, indices: &[i32], key: &str) -> Option<Cow<'d, str>> {
    d.attribute_value(indices, key).and_then(|v| text(d, v))
}

pub(super) fn resource_text<'r>(attrs: &'r [KeyValue], key: &str) -> Option<Cow<'r, str>> {
    let v = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match v.value.as_ref()? {
        Value::StringValue(s) => Some(Cow::Borrowed(s)),
        Value::IntValue(i) => Some(Cow::Owned(i.to_string())),
        _ => None,
    }
}

pub(super) fn nonempty(s: Option<Cow<'_, str>>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(Cow::into_owned)
}

/// Entry `i` of a dictionary table; `None` out of range. Where absence
/// differs from [`Lookup`]'s zero value: no Location yields no frame (the
/// zero one yields an empty frame), and no function or mapping names
/// nothing, whatever string 0 holds.
pub(super) fn entry<T>(table: &[T], i: i32) -> Option<&T> {
    usize::try_from(i).ok().and_then(|i| table.get(i))
}

/// An Android profile that goes back as a method trace (it came from an
/// Android chunk or legacy profile); one from sample format v2 (a Perfetto
/// or ANR chunk, `sentry.version` 2) goes back as sample format v2.
pub(super) fn android_trace(d: Lookup<'_>, pa: &[i32]) -> bool {
    attr_text(d, pa, crate::keys::SENTRY_PLATFORM).as_deref() == Some(crate::android::PLATFORM)
        && attr_text(d, pa, crate::keys::SENTRY_VERSION).as_deref() != Some("2")
}
