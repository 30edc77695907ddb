//! Decoding a figment value into a config struct with otelcol-style key paths.
//!
//! figment's own deserializer gives key paths for maps but not for list
//! items, and cannot hand a string field the original text of a typed
//! `${env:...}` expansion; this one does both. A failed field is removed and
//! decoding retried, so every bad key of a section is reported at once and
//! the rest still decode with their defaults.

use std::fmt;

use figment::value::{Empty, Num, Value};
use serde::de::{self, DeserializeOwned, DeserializeSeed, Error as _, IntoDeserializer, Visitor};

use super::expand::Originals;
use super::ConfigErrors;

/// Bounds the retries; each one removes a key, so a config would need this
/// many bad keys in one section to reach it.
const MAX_PASSES: usize = 256;

/// Decodes `value` (at key path `base`) into `T`, reporting every problem
/// with its full path. `originals` is keyed by paths relative to `value`.
pub(super) fn decode_value<T: DeserializeOwned>(
    value: &Value,
    originals: &Originals,
    base: &str,
) -> Result<T, ConfigErrors> {
    match decode_partial(value, originals, base) {
        (Some(v), errs) => errs.into_result(v),
        (None, errs) => Err(errs),
    }
}

/// As [`decode_value`], but also returns what decoded once the failed keys
/// were dropped (they take their defaults), so later checks can go on.
pub(super) fn decode_partial<T: DeserializeOwned>(
    value: &Value,
    originals: &Originals,
    base: &str,
) -> (Option<T>, ConfigErrors) {
    let partial = decode_lenient(value, originals, base);
    (partial.value, partial.errors)
}

/// What [`decode_lenient`] could decode.
pub(super) struct Partial<T> {
    /// `None` only when nothing could be decoded (the value's own shape is
    /// wrong, or a required field is missing).
    pub value: Option<T>,
    pub errors: ConfigErrors,
    /// Full key paths of the values that failed to decode, were reported in
    /// `errors` and now hold their defaults in `value`.
    pub defaulted: Vec<String>,
}

/// As [`decode_partial`], also naming the keys that took their defaults.
pub(super) fn decode_lenient<T: DeserializeOwned>(
    value: &Value,
    originals: &Originals,
    base: &str,
) -> Partial<T> {
    let mut value = std::borrow::Cow::Borrowed(value);
    let mut errs = ConfigErrors::default();
    let mut removed: Vec<Vec<String>> = Vec::new();
    let mut defaulted = Vec::new();
    for _ in 0..MAX_PASSES {
        let root = PathNode::root();
        let err = match T::deserialize(ValueDe::new(&value, &root, originals)) {
            Ok(v) => {
                return Partial {
                    value: Some(v),
                    errors: errs,
                    defaulted,
                }
            }
            Err(e) => e,
        };
        // A required field we removed ourselves was already reported.
        if let Kind::MissingField(f) = &err.kind {
            let mut p = err.path.clone();
            p.push((*f).to_owned());
            if removed.contains(&p) {
                break;
            }
        }
        let silent = matches!(err.kind, Kind::NullFromExpansion);
        match err.removal_target() {
            Some(p) if remove(value.to_mut(), &p) => {
                if !silent {
                    errs.push(join(base, &err.path), err.to_string());
                    defaulted.push(join(base, &p));
                }
                removed.push(p);
            }
            _ => {
                errs.push(join(base, &err.path), err.to_string());
                break;
            }
        }
    }
    Partial {
        value: None,
        errors: errs,
        defaulted,
    }
}

fn join(base: &str, path: &[String]) -> String {
    let mut s = base.to_owned();
    for seg in path {
        if !s.is_empty() {
            s.push_str("::");
        }
        s.push_str(seg);
    }
    s
}

/// Removes the map entry at `path`; false when there is none (the path ends
/// in a list index or goes through something other than maps and lists).
fn remove(value: &mut Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut cur = value;
    for seg in parents {
        cur = match cur {
            Value::Dict(_, d) => match d.get_mut(seg) {
                Some(v) => v,
                None => return false,
            },
            Value::Array(_, a) => match seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match cur {
        Value::Dict(_, d) => d.remove(last).is_some(),
        _ => false,
    }
}

/// A decoding error at a key path.
#[derive(Debug)]
pub(super) struct Error {
    /// Keys and list indices from the decoded value down to the problem.
    path: Vec<String>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Message(String),
    UnknownField {
        field: String,
        expected: Vec<&'static str>,
    },
    MissingField(&'static str),
    /// A whole `${...}` that read as null, decoded into a typed field:
    /// the field keeps its default, as in the Collector.
    NullFromExpansion,
}

impl Error {
    fn new(kind: Kind) -> Self {
        Self {
            path: Vec::new(),
            kind,
        }
    }

    fn at(mut self, seg: &str) -> Self {
        self.path.insert(0, seg.to_owned());
        self
    }

    /// The map entry whose removal lets decoding go on with the default.
    fn removal_target(&self) -> Option<Vec<String>> {
        match &self.kind {
            Kind::UnknownField { field, .. } => {
                let mut p = self.path.clone();
                p.push(field.clone());
                Some(p)
            }
            Kind::MissingField(_) => None,
            Kind::Message(_) | Kind::NullFromExpansion => {
                (!self.path.is_empty()).then(|| self.path.clone())
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Message(m) => f.write_str(m),
            Kind::UnknownField { field, expected } => {
                write!(f, "unknown field {field:?}")?;
                match expected.as_slice() {
                    [] => f.write_str(", there are no fields"),
                    [one] => write!(f, ", expected {one:?}"),
                    many => {
                        f.write_str(", expected one of ")?;
                        for (i, name) in many.iter().enumerate() {
                            if i > 0 {
                                f.write_str(", ")?;
                            }
                            write!(f, "{name:?}")?;
                        }
                        Ok(())
                    }
                }
            }
            Kind::MissingField(name) => write!(f, "missing required field {name:?}"),
            Kind::NullFromExpansion => {
                f.write_str("the environment variable it references is unset or empty")
            }
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::new(Kind::Message(msg.to_string()))
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::custom(format_args!(
            "invalid type: expected {exp}, got {}",
            Got(unexp)
        ))
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::custom(format_args!(
            "invalid value: expected {exp}, got {}",
            Got(unexp)
        ))
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        Self::custom(format_args!("invalid length {len}, expected {exp}"))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let list = expected
            .iter()
            .map(|v| format!("{v:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        Self::custom(format_args!(
            "unknown value {variant:?}, expected one of {list}"
        ))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Kind::UnknownField {
            field: field.to_owned(),
            expected: expected.to_vec(),
        })
    }

    fn missing_field(field: &'static str) -> Self {
        Self::new(Kind::MissingField(field))
    }

    fn duplicate_field(field: &'static str) -> Self {
        Self::custom(format_args!("duplicate field {field:?}"))
    }
}

/// serde's `Unexpected` in YAML words.
struct Got<'a>(de::Unexpected<'a>);

impl fmt::Display for Got<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use de::Unexpected as U;
        match self.0 {
            U::Bool(b) => write!(f, "boolean {b}"),
            U::Unsigned(n) => write!(f, "integer {n}"),
            U::Signed(n) => write!(f, "integer {n}"),
            U::Float(x) => write!(f, "number {x}"),
            U::Char(c) => write!(f, "string {:?}", c.to_string()),
            U::Str(s) => write!(f, "string {s:?}"),
            U::Unit | U::Option => f.write_str("null"),
            U::Seq => f.write_str("a list"),
            U::Map => f.write_str("a map"),
            ref other => write!(f, "{other}"),
        }
    }
}

/// The key path to the value being decoded, as a list on the stack.
struct PathNode<'a> {
    parent: Option<&'a PathNode<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> PathNode<'a> {
    fn root() -> Self {
        Self {
            parent: None,
            seg: Seg::Root,
        }
    }

    fn child(&'a self, seg: Seg<'a>) -> Self {
        Self {
            parent: Some(self),
            seg,
        }
    }

    fn to_vec(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut node = Some(self);
        while let Some(n) = node {
            match n.seg {
                Seg::Root => {}
                Seg::Key(k) => out.push(k.to_owned()),
                Seg::Index(i) => out.push(i.to_string()),
            }
            node = n.parent;
        }
        out.reverse();
        out
    }
}

struct ValueDe<'a> {
    value: &'a Value,
    path: &'a PathNode<'a>,
    originals: &'a Originals,
}

impl<'a> ValueDe<'a> {
    fn new(value: &'a Value, path: &'a PathNode<'a>, originals: &'a Originals) -> Self {
        Self {
            value,
            path,
            originals,
        }
    }

    /// The original text when this value came from a whole `${...}`.
    fn original(&self) -> Option<&'a str> {
        if self.originals.is_empty() {
            return None;
        }
        self.originals.get(&self.path.to_vec()).map(String::as_str)
    }

    fn empty_map<'de, V: Visitor<'de>>(visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(de::value::MapDeserializer::<
            std::iter::Empty<(&str, &str)>,
            Error,
        >::new(std::iter::empty()))
    }
}

/// A value in the words of [`Got`].
pub(super) fn describe(v: &Value) -> String {
    let unexpected = match v {
        Value::String(_, s) => de::Unexpected::Str(s),
        Value::Char(_, c) => de::Unexpected::Char(*c),
        Value::Bool(_, b) => de::Unexpected::Bool(*b),
        Value::Num(_, n) => match (n.to_u128(), n.to_i128(), n.to_f64()) {
            (Some(u), _, _) => return format!("integer {u}"),
            (None, Some(i), _) => return format!("integer {i}"),
            (None, None, Some(x)) => de::Unexpected::Float(x),
            (None, None, None) => de::Unexpected::Other("a number"),
        },
        Value::Empty(..) => de::Unexpected::Unit,
        Value::Dict(..) => de::Unexpected::Map,
        Value::Array(..) => de::Unexpected::Seq,
    };
    Got(unexpected).to_string()
}

fn visit_num<'de, V: Visitor<'de>>(n: Num, v: V) -> Result<V::Value, Error> {
    match n {
        Num::U8(x) => v.visit_u8(x),
        Num::U16(x) => v.visit_u16(x),
        Num::U32(x) => v.visit_u32(x),
        Num::U64(x) => v.visit_u64(x),
        Num::U128(x) => v.visit_u128(x),
        Num::USize(x) => v.visit_u64(x as u64),
        Num::I8(x) => v.visit_i8(x),
        Num::I16(x) => v.visit_i16(x),
        Num::I32(x) => v.visit_i32(x),
        Num::I64(x) => v.visit_i64(x),
        Num::I128(x) => v.visit_i128(x),
        Num::ISize(x) => v.visit_i64(x as i64),
        Num::F32(x) => v.visit_f32(x),
        Num::F64(x) => v.visit_f64(x),
    }
}

macro_rules! typed_scalar {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.deserialize_any(visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for ValueDe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::String(_, s) => visitor.visit_str(s),
            Value::Char(_, c) => visitor.visit_char(*c),
            Value::Bool(_, b) => visitor.visit_bool(*b),
            Value::Num(_, n) => visit_num(*n, visitor),
            Value::Empty(..) if self.original().is_some() => {
                Err(Error::new(Kind::NullFromExpansion))
            }
            Value::Empty(_, Empty::None) => visitor.visit_none(),
            Value::Empty(_, Empty::Unit) => visitor.visit_unit(),
            Value::Dict(_, dict) => visitor.visit_map(MapAcc {
                iter: dict.iter(),
                pending: None,
                path: self.path,
                originals: self.originals,
            }),
            Value::Array(_, items) => visitor.visit_seq(SeqAcc {
                iter: items.iter().enumerate(),
                path: self.path,
                originals: self.originals,
            }),
        }
    }

    typed_scalar!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_identifier
    );

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Bool(..) | Value::Num(..) | Value::Empty(..) => match self.original() {
                Some(text) => visitor.visit_str(text),
                None => self.deserialize_any(visitor),
            },
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Empty(..) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Empty(..) => visitor.visit_unit(),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    /// A null list is an empty list.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Empty(..) => visitor.visit_seq(de::value::SeqDeserializer::<
                std::iter::Empty<()>,
                Error,
            >::new(std::iter::empty())),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    /// A null map is an empty map (a section written `debug:` is defaults).
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Empty(..) => Self::empty_map(visitor),
            Value::Dict(..) => self.deserialize_any(visitor),
            other => Err(Error::custom(format_args!(
                "invalid type: expected a map, got {}",
                describe(other)
            ))),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Value::Dict(_, dict) if fields.contains(&SQUASH) => visitor.visit_map(SquashAcc {
                own: MapAcc {
                    iter: dict.iter(),
                    pending: None,
                    path: self.path,
                    originals: self.originals,
                },
                fields,
                rest: Some(dict),
                taking_rest: false,
            }),
            _ => self.deserialize_map(visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Value::String(_, s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::Dict(_, dict) if dict.len() == 1 => {
                let (key, value) = dict.iter().next().expect("one entry");
                visitor.visit_enum(EnumAcc {
                    key,
                    value,
                    path: self.path,
                    originals: self.originals,
                })
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

struct MapAcc<'a> {
    iter: std::collections::btree_map::Iter<'a, String, Value>,
    pending: Option<(&'a str, &'a Value)>,
    path: &'a PathNode<'a>,
    originals: &'a Originals,
}

impl<'de> de::MapAccess<'de> for MapAcc<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((k, v)) = self.iter.next() else {
            return Ok(None);
        };
        self.pending = Some((k.as_str(), v));
        seed.deserialize(de::value::StrDeserializer::<Error>::new(k))
            .map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        let (key, value) = self
            .pending
            .take()
            .expect("next_value_seed after next_key_seed");
        let path = self.path.child(Seg::Key(key));
        seed.deserialize(ValueDe::new(value, &path, self.originals))
            .map_err(|e| e.at(key))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// The field name that takes, squashed, every key its struct does not name
/// (as `mapstructure:",squash"` does in the Collector): the shared listener
/// keys of the HTTP receivers. serde's own `flatten` would decode that part
/// without this decoder, so without key paths, `${env:...}` originals or
/// the list of expected keys.
pub(crate) const SQUASH: &str = "__squash";

/// The entries a struct names, then the others as one map under
/// [`SQUASH`], decoded at the struct's own path.
struct SquashAcc<'a> {
    own: MapAcc<'a>,
    fields: &'static [&'static str],
    rest: Option<&'a figment::value::Dict>,
    taking_rest: bool,
}

impl<'de> de::MapAccess<'de> for SquashAcc<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        loop {
            let Some((k, v)) = self.own.iter.next() else {
                if self.rest.is_none() {
                    return Ok(None);
                }
                self.taking_rest = true;
                return seed
                    .deserialize(de::value::StrDeserializer::<Error>::new(SQUASH))
                    .map(Some);
            };
            if k != SQUASH && self.fields.contains(&k.as_str()) {
                self.own.pending = Some((k.as_str(), v));
                return seed
                    .deserialize(de::value::StrDeserializer::<Error>::new(k))
                    .map(Some);
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        if !self.taking_rest {
            return self.own.next_value_seed(seed);
        }
        let dict = self.rest.take().expect("the squashed keys are taken once");
        let rest: figment::value::Dict = dict
            .iter()
            .filter(|(k, _)| k.as_str() == SQUASH || !self.fields.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let value = Value::Dict(figment::value::Tag::Default, rest);
        let fields = self.fields;
        seed.deserialize(ValueDe::new(&value, self.own.path, self.own.originals))
            .map_err(|mut e| {
                // A key neither part knows: name what both take.
                if let (true, Kind::UnknownField { expected, .. }) =
                    (e.path.is_empty(), &mut e.kind)
                {
                    let own = fields.iter().filter(|f| **f != SQUASH).copied();
                    *expected = own.chain(expected.iter().copied()).collect();
                }
                e
            })
    }
}

struct SeqAcc<'a> {
    iter: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    path: &'a PathNode<'a>,
    originals: &'a Originals,
}

impl<'de> de::SeqAccess<'de> for SeqAcc<'_> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        let Some((i, value)) = self.iter.next() else {
            return Ok(None);
        };
        let path = self.path.child(Seg::Index(i));
        seed.deserialize(ValueDe::new(value, &path, self.originals))
            .map(Some)
            .map_err(|e| e.at(&i.to_string()))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// An enum written as a one-entry map: `variant: value`.
struct EnumAcc<'a> {
    key: &'a str,
    value: &'a Value,
    path: &'a PathNode<'a>,
    originals: &'a Originals,
}

impl<'de, 'a> de::EnumAccess<'de> for EnumAcc<'a> {
    type Error = Error;
    type Variant = VariantAcc<'a>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Error> {
        let variant = seed.deserialize(de::value::StrDeserializer::<Error>::new(self.key))?;
        Ok((
            variant,
            VariantAcc {
                key: self.key,
                value: self.value,
                path: self.path,
                originals: self.originals,
            },
        ))
    }
}

struct VariantAcc<'a> {
    key: &'a str,
    value: &'a Value,
    path: &'a PathNode<'a>,
    originals: &'a Originals,
}

impl<'de> de::VariantAccess<'de> for VariantAcc<'_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            Value::Empty(..) => Ok(()),
            _ => Err(
                Error::custom(format_args!("variant {:?} takes no value", self.key)).at(self.key),
            ),
        }
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, Error> {
        let path = self.path.child(Seg::Key(self.key));
        seed.deserialize(ValueDe::new(self.value, &path, self.originals))
            .map_err(|e| e.at(self.key))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        let path = self.path.child(Seg::Key(self.key));
        de::Deserializer::deserialize_seq(ValueDe::new(self.value, &path, self.originals), visitor)
            .map_err(|e| e.at(self.key))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let path = self.path.child(Seg::Key(self.key));
        de::Deserializer::deserialize_map(ValueDe::new(self.value, &path, self.originals), visitor)
            .map_err(|e| e.at(self.key))
    }
}
