//! The Collector's profile contexts (`pkg/ottl/contexts/ottlresource`,
//! `ottlscope`, `ottlprofile` at v0.161.0) over profcol's `ProfilesData`:
//! what each path reads and writes. Profile attributes live in the shared
//! dictionary: setting one interns a new entry and re-points this profile
//! only, so another profile sharing the old entry is not disturbed.

use std::borrow::Cow;

use profcol_model::dictionary::Interner;
use profcol_model::proto::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueAndUnit, KeyValueList,
    Profile, ProfilesDictionary, Resource, ValueType, ZeroEntry,
};

use crate::error::EvalResult;
use crate::fail;
use crate::value::{map_get, map_put, Owned, Val, EMPTY};

/// The level a statement runs at: each resource, each scope or each profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Resource,
    Scope,
    Profile,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Resource => "resource",
            Level::Scope => "scope",
            Level::Profile => "profile",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "resource" => Some(Level::Resource),
            "scope" | "instrumentation_scope" => Some(Level::Scope),
            "profile" => Some(Level::Profile),
            _ => None,
        }
    }

    /// The context names a path may start with at this level.
    pub fn context_names(self) -> &'static [&'static str] {
        match self {
            Level::Resource => &["resource"],
            Level::Scope => &["scope", "instrumentation_scope", "resource"],
            Level::Profile => &["profile", "scope", "instrumentation_scope", "resource"],
        }
    }
}

/// A field a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    ResourceAttrs,
    ResourceDropped,
    ResourceSchemaUrl,
    ScopeName,
    ScopeVersion,
    ScopeAttrs,
    ScopeDropped,
    ScopeSchemaUrl,
    ProfileAttrs,
    SampleType,
    SampleTypeType,
    SampleTypeUnit,
    PeriodType,
    PeriodTypeType,
    PeriodTypeUnit,
    TimeUnixNano,
    Time,
    DurationUnixNano,
    Period,
    ProfileId,
    ProfileIdString,
    AttributeIndices,
    ProfileDropped,
    OriginalPayloadFormat,
    OriginalPayload,
    Cache,
    /// `otelcol.client.addr`: the client's address, as the receiver saw it.
    ClientAddr,
    /// `otelcol.client.metadata`: its request headers (`include_metadata`),
    /// each a list of strings.
    ClientMetadata,
    /// `otelcol.client.auth.attributes`: what an authenticator learned of
    /// the client. Always empty: `bearertokenauth`, the one profcol has,
    /// sets none (neither does the Collector's).
    ClientAuthAttrs,
}

impl Field {
    /// Whether the field is a map that keys index.
    pub fn is_map(self) -> bool {
        matches!(
            self,
            Field::ResourceAttrs
                | Field::ScopeAttrs
                | Field::ProfileAttrs
                | Field::Cache
                | Field::ClientMetadata
                | Field::ClientAuthAttrs
        )
    }

    /// The `otelcol` paths: the request's, read at every level, never set.
    fn client_path(self) -> Option<&'static str> {
        match self {
            Field::ClientAddr => Some("otelcol.client.addr"),
            Field::ClientMetadata => Some("otelcol.client.metadata"),
            Field::ClientAuthAttrs => Some("otelcol.client.auth.attributes"),
            _ => None,
        }
    }

    pub fn level(self) -> Level {
        use Field::*;
        match self {
            ResourceAttrs | ResourceDropped | ResourceSchemaUrl => Level::Resource,
            ClientAddr | ClientMetadata | ClientAuthAttrs => Level::Resource,
            ScopeName | ScopeVersion | ScopeAttrs | ScopeDropped | ScopeSchemaUrl => Level::Scope,
            _ => Level::Profile,
        }
    }
}

/// Resolves the segments after the context name. `Err` is the segment
/// that is not a path of the context.
pub fn resolve_field(ctx: &str, level: Level, segs: &[&str]) -> Result<Field, usize> {
    use Field::*;
    let f = match (ctx, segs) {
        ("resource", ["attributes"]) => ResourceAttrs,
        ("resource", ["dropped_attributes_count"]) => ResourceDropped,
        ("resource", ["schema_url"]) => ResourceSchemaUrl,
        ("scope" | "instrumentation_scope", ["name"]) => ScopeName,
        ("scope" | "instrumentation_scope", ["version"]) => ScopeVersion,
        ("scope" | "instrumentation_scope", ["attributes"]) => ScopeAttrs,
        ("scope" | "instrumentation_scope", ["dropped_attributes_count"]) => ScopeDropped,
        ("scope" | "instrumentation_scope", ["schema_url"]) => ScopeSchemaUrl,
        ("profile", ["attributes"]) => ProfileAttrs,
        ("profile", ["sample_type"]) => SampleType,
        ("profile", ["sample_type", "type"]) => SampleTypeType,
        ("profile", ["sample_type", "unit"]) => SampleTypeUnit,
        ("profile", ["period_type"]) => PeriodType,
        ("profile", ["period_type", "type"]) => PeriodTypeType,
        ("profile", ["period_type", "unit"]) => PeriodTypeUnit,
        ("profile", ["time_unix_nano"]) => TimeUnixNano,
        ("profile", ["time"]) => Time,
        ("profile", ["duration_unix_nano" | "duration"]) => DurationUnixNano,
        ("profile", ["period"]) => Period,
        ("profile", ["profile_id"]) => ProfileId,
        ("profile", ["profile_id", "string"]) => ProfileIdString,
        ("profile", ["attribute_indices"]) => AttributeIndices,
        ("profile", ["dropped_attributes_count"]) => ProfileDropped,
        ("profile", ["original_payload_format"]) => OriginalPayloadFormat,
        ("profile", ["original_payload"]) => OriginalPayload,
        (c, ["cache"]) if Level::parse(c) == Some(level) => Cache,
        ("otelcol", ["client", "addr"]) => ClientAddr,
        ("otelcol", ["client", "metadata"]) => ClientMetadata,
        ("otelcol", ["client", "auth", "attributes"]) => ClientAuthAttrs,
        _ => {
            // The first segment that no path of the context continues.
            let known: &[&[&str]] = &[
                &["attributes"],
                &["dropped_attributes_count"],
                &["schema_url"],
                &["name"],
                &["version"],
                &["sample_type", "type"],
                &["sample_type", "unit"],
                &["period_type", "type"],
                &["period_type", "unit"],
                &["profile_id", "string"],
                &["cache"],
                &["client", "addr"],
                &["client", "metadata"],
                &["client", "auth", "attributes"],
            ];
            let mut at = 0;
            for k in known {
                let n = k.iter().zip(segs).take_while(|(a, b)| a == b).count();
                at = at.max(n);
            }
            return Err(at.min(segs.len().saturating_sub(1)));
        }
    };
    Ok(f)
}

/// The dictionary's string and attribute tables, taken out of the batch
/// while statements run; interned (hash-consed, first entry wins as in the
/// Collector's linear `SetString`/`SetAttribute`) on the first write.
#[derive(Default)]
pub struct Dict {
    strings: Table<String>,
    attrs: Table<KeyValueAndUnit>,
}

enum Table<T> {
    Plain(Vec<T>),
    Interned(Interner<T>),
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table::Plain(Vec::new())
    }
}

impl<T: profcol_model::dictionary::DictHash + PartialEq + Default + ZeroEntry> Table<T> {
    fn values(&self) -> &[T] {
        match self {
            Table::Plain(v) => v,
            Table::Interned(i) => i.values(),
        }
    }

    fn interner(&mut self) -> &mut Interner<T> {
        if let Table::Plain(v) = self {
            *self = Table::Interned(Interner::from_values(std::mem::take(v)));
        }
        match self {
            Table::Interned(i) => i,
            Table::Plain(_) => unreachable!(),
        }
    }

    fn into_vec(self) -> Vec<T> {
        match self {
            Table::Plain(v) => v,
            Table::Interned(i) => i.into_values(),
        }
    }
}

impl Dict {
    pub fn take(d: &mut Option<ProfilesDictionary>) -> Dict {
        match d {
            Some(d) => Dict {
                strings: Table::Plain(std::mem::take(&mut d.string_table)),
                attrs: Table::Plain(std::mem::take(&mut d.attribute_table)),
            },
            None => Dict::default(),
        }
    }

    /// Puts the tables back; a dictionary is made if a write needed one.
    pub fn restore(self, d: &mut Option<ProfilesDictionary>) {
        let (strings, attrs) = (self.strings.into_vec(), self.attrs.into_vec());
        if d.is_none() && strings.is_empty() && attrs.is_empty() {
            return;
        }
        let d = d.get_or_insert_with(Default::default);
        d.string_table = strings;
        d.attribute_table = attrs;
    }

    pub fn string(&self, i: i32) -> Option<&str> {
        self.strings
            .values()
            .get(usize::try_from(i).ok()?)
            .map(String::as_str)
    }

    pub fn intern_string(&mut self, s: &str) -> i32 {
        self.strings
            .interner()
            .intern_by(s, |a: &String, b: &str| a == b, |s: &str| s.to_string())
    }

    fn attr(&self, idx: i32) -> EvalResult<(&str, &AnyValue)> {
        let table = self.attrs.values();
        let Some(a) = usize::try_from(idx).ok().and_then(|i| table.get(i)) else {
            fail!("attribute index {idx} out of bounds [0, {})", table.len());
        };
        let Some(k) = self.string(a.key_strindex) else {
            fail!(
                "key string index {} out of bounds [0, {})",
                a.key_strindex,
                self.strings.values().len()
            );
        };
        Ok((k, a.value.as_ref().unwrap_or(&EMPTY)))
    }

    fn intern_attr(&mut self, key: &str, value: AnyValue) -> i32 {
        let key_strindex = self.intern_string(key);
        self.attrs.interner().intern(KeyValueAndUnit {
            key_strindex,
            value: Some(value),
            unit_strindex: 0,
        })
    }
}

/// What statements see of one item: its resource, scope and profile (as
/// the level has them), the dictionary and the item's cache.
/// What the `otelcol.client.*` paths read: the client of the request the
/// batch came in (`BatchMeta`), as the Collector's `client.Info`.
#[derive(Debug, Clone, Default)]
pub struct Client {
    addr: Option<String>,
    /// Header name (lower case) to its values, in the order they came.
    metadata: Vec<KeyValue>,
}

impl Client {
    pub fn of(meta: &profcol_model::BatchMeta) -> Self {
        let mut metadata: Vec<KeyValue> = Vec::new();
        for (k, v) in &meta.metadata {
            let value = AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            };
            match metadata.iter_mut().find(|kv| kv.key == *k) {
                Some(kv) => {
                    if let Some(AnyValue {
                        value: Some(any_value::Value::ArrayValue(a)),
                    }) = &mut kv.value
                    {
                        a.values.push(value);
                    }
                }
                None => metadata.push(KeyValue {
                    key: k.clone(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::ArrayValue(ArrayValue {
                            values: vec![value],
                        })),
                    }),
                    ..Default::default()
                }),
            }
        }
        Client {
            addr: meta.client_addr.map(|a| a.to_string()),
            metadata,
        }
    }
}

pub struct Ctx<'a> {
    pub client: &'a Client,
    pub resource: &'a mut Option<Resource>,
    pub resource_schema_url: &'a mut String,
    pub scope: Option<&'a mut Option<InstrumentationScope>>,
    pub scope_schema_url: Option<&'a mut String>,
    pub profile: Option<&'a mut Profile>,
    pub dict: &'a mut Dict,
    pub cache: &'a mut Vec<KeyValue>,
}

/// A key of a path or converter result: `["k"]` or `[0]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Key<'a> {
    Str(Cow<'a, str>),
    Int(i64),
}

static NO_ATTRS: Vec<KeyValue> = Vec::new();

impl<'a> Ctx<'a> {
    fn profile(&self) -> &Profile {
        self.profile
            .as_deref()
            .expect("profile paths compile only at profile level")
    }

    fn profile_mut(&mut self) -> &mut Profile {
        self.profile
            .as_deref_mut()
            .expect("profile paths compile only at profile level")
    }

    fn scope(&self) -> Option<&InstrumentationScope> {
        self.scope.as_deref().and_then(Option::as_ref)
    }

    fn scope_mut(&mut self) -> &mut InstrumentationScope {
        self.scope
            .as_deref_mut()
            .expect("scope paths compile only at scope level")
            .get_or_insert_with(Default::default)
    }

    fn plain_map(&self, f: Field) -> &[KeyValue] {
        match f {
            Field::ResourceAttrs => self.resource.as_ref().map_or(&NO_ATTRS, |r| &r.attributes),
            Field::ScopeAttrs => self.scope().map_or(&NO_ATTRS, |s| &s.attributes),
            _ => self.cache,
        }
    }

    fn plain_map_mut(&mut self, f: Field) -> &mut Vec<KeyValue> {
        match f {
            Field::ResourceAttrs => {
                &mut self
                    .resource
                    .get_or_insert_with(Default::default)
                    .attributes
            }
            Field::ScopeAttrs => &mut self.scope_mut().attributes,
            _ => self.cache,
        }
    }

    /// The value of one attribute of the profile, borrowed from the
    /// dictionary: with duplicate keys the last one wins, as the map the
    /// Collector builds from the indices.
    pub fn profile_attr(&self, key: &str) -> EvalResult<Option<&AnyValue>> {
        let mut found = None;
        for &i in &self.profile().attribute_indices {
            let (k, v) = self.dict.attr(i)?;
            if k == key {
                found = Some(v);
            }
        }
        Ok(found)
    }

    /// The profile's attributes as a map (`FromAttributeIndices`): a copy,
    /// units left out.
    pub fn profile_attrs(&self) -> EvalResult<Vec<KeyValue>> {
        let mut m = Vec::with_capacity(self.profile().attribute_indices.len());
        for &i in &self.profile().attribute_indices {
            let (k, v) = self.dict.attr(i)?;
            map_put(&mut m, k, v.clone());
        }
        Ok(m)
    }

    pub fn get<'r>(&'r self, f: Field, keys: &[Key]) -> EvalResult<Val<'r>> {
        if f.is_map() && !keys.is_empty() {
            let first = match &keys[0] {
                Key::Str(s) => s,
                Key::Int(_) => fail!("non-string indexing is not supported"),
            };
            let v = match f {
                Field::ProfileAttrs => self.profile_attr(first)?,
                // Header names are case-insensitive (`client.Metadata.Get`).
                Field::ClientMetadata => {
                    map_get(&self.client.metadata, &first.to_ascii_lowercase())
                }
                Field::ClientAuthAttrs => None,
                _ => map_get(self.plain_map(f), first),
            };
            return match v {
                None => Ok(Val::Nil),
                Some(v) => index_any(v, &keys[1..]),
            };
        }
        let p = || self.profile();
        let string = |i: i32, path: &str| -> EvalResult<Val<'r>> {
            match self.dict.string(i) {
                Some(s) => Ok(Val::Str(Cow::Borrowed(s))),
                None => fail!("path \"{path}\" with strindex {i} is out of range"),
            }
        };
        let vt = |v: &Option<ValueType>| {
            v.as_ref()
                .map_or((0, 0), |v| (v.type_strindex, v.unit_strindex))
        };
        Ok(match f {
            Field::ResourceAttrs | Field::ScopeAttrs | Field::Cache => {
                Val::Map(Cow::Borrowed(self.plain_map(f)))
            }
            Field::ClientAddr => self
                .client
                .addr
                .as_deref()
                .map_or(Val::Nil, |a| Val::Str(Cow::Borrowed(a))),
            Field::ClientMetadata => Val::Map(Cow::Borrowed(&self.client.metadata)),
            Field::ClientAuthAttrs => Val::Map(Cow::Borrowed(&NO_ATTRS)),
            Field::ProfileAttrs => Val::Map(Cow::Owned(self.profile_attrs()?)),
            Field::ResourceDropped => Val::Int(
                self.resource
                    .as_ref()
                    .map_or(0, |r| r.dropped_attributes_count) as i64,
            ),
            Field::ResourceSchemaUrl => Val::Str(Cow::Borrowed(self.resource_schema_url)),
            Field::ScopeName => Val::Str(Cow::Borrowed(self.scope().map_or("", |s| &s.name))),
            Field::ScopeVersion => Val::Str(Cow::Borrowed(self.scope().map_or("", |s| &s.version))),
            Field::ScopeDropped => {
                Val::Int(self.scope().map_or(0, |s| s.dropped_attributes_count) as i64)
            }
            Field::ScopeSchemaUrl => Val::Str(Cow::Borrowed(
                self.scope_schema_url.as_deref().map_or("", |s| s),
            )),
            Field::SampleType => {
                let (t, u) = vt(&p().sample_type);
                Val::ValueType(t, u)
            }
            Field::SampleTypeType => string(vt(&p().sample_type).0, "profile.sample_type.type")?,
            Field::SampleTypeUnit => string(vt(&p().sample_type).1, "profile.sample_type.unit")?,
            Field::PeriodType => {
                let (t, u) = vt(&p().period_type);
                Val::ValueType(t, u)
            }
            Field::PeriodTypeType => string(vt(&p().period_type).0, "profile.period_type.type")?,
            Field::PeriodTypeUnit => string(vt(&p().period_type).1, "profile.period_type.unit")?,
            Field::TimeUnixNano => Val::Int(p().time_unix_nano as i64),
            Field::Time => Val::Time(p().time_unix_nano as i64),
            Field::DurationUnixNano => Val::Int(p().duration_nano as i64),
            Field::Period => Val::Int(p().period),
            Field::ProfileId => Val::ProfileId(profile_id(&p().profile_id)),
            Field::ProfileIdString => {
                Val::Str(Cow::Owned(hex::encode(profile_id(&p().profile_id))))
            }
            Field::AttributeIndices => {
                Val::Ints(p().attribute_indices.iter().map(|&i| i as i64).collect())
            }
            Field::ProfileDropped => Val::Int(p().dropped_attributes_count as i64),
            Field::OriginalPayloadFormat => Val::Str(Cow::Borrowed(&p().original_payload_format)),
            Field::OriginalPayload => Val::Bytes(Cow::Borrowed(&p().original_payload)),
        })
    }

    pub fn set(&mut self, f: Field, keys: &[Key], v: Owned) -> EvalResult<()> {
        if let Some(path) = f.client_path() {
            fail!("{path:?} is read-only and cannot be modified");
        }
        if f.is_map() && !keys.is_empty() {
            let first = match &keys[0] {
                Key::Str(s) => s.as_ref(),
                Key::Int(_) => fail!("non-string indexing is not supported"),
            };
            return match f {
                Field::ProfileAttrs => self.set_profile_attr(first, &keys[1..], v),
                _ => {
                    let m = self.plain_map_mut(f);
                    let i = match m.iter().position(|kv| kv.key == first) {
                        Some(i) => i,
                        None => {
                            m.push(KeyValue {
                                key: first.to_string(),
                                value: Some(AnyValue::default()),
                                ..Default::default()
                            });
                            m.len() - 1
                        }
                    };
                    let slot = m[i].value.get_or_insert_with(Default::default);
                    set_indexable(slot, &keys[1..], v)
                }
            };
        }
        match f {
            Field::ResourceAttrs | Field::ScopeAttrs | Field::Cache | Field::ProfileAttrs => {
                let m = match v {
                    Val::Nil => Vec::new(),
                    Val::Map(m) => m.into_owned(),
                    other => fail!(
                        "failed to convert type {} into pcommon.Map",
                        other.type_name()
                    ),
                };
                if f == Field::ProfileAttrs {
                    self.set_profile_attrs(m);
                } else {
                    *self.plain_map_mut(f) = m;
                }
            }
            Field::ResourceDropped => {
                self.resource
                    .get_or_insert_with(Default::default)
                    .dropped_attributes_count = expect_int(v)? as u32
            }
            Field::ResourceSchemaUrl => *self.resource_schema_url = expect_str(v)?,
            Field::ScopeName => self.scope_mut().name = expect_str(v)?,
            Field::ScopeVersion => self.scope_mut().version = expect_str(v)?,
            Field::ScopeDropped => {
                self.scope_mut().dropped_attributes_count = expect_int(v)? as u32
            }
            Field::ScopeSchemaUrl => {
                if let Some(s) = self.scope_schema_url.as_deref_mut() {
                    *s = expect_str(v)?
                }
            }
            Field::SampleType | Field::PeriodType => {
                let Val::ValueType(t, u) = v else {
                    fail!("expects pprofile.ValueType but got {}", v.type_name())
                };
                let p = self.profile_mut();
                let slot = if f == Field::SampleType {
                    &mut p.sample_type
                } else {
                    &mut p.period_type
                };
                *slot = Some(ValueType {
                    type_strindex: t,
                    unit_strindex: u,
                });
            }
            Field::SampleTypeType
            | Field::SampleTypeUnit
            | Field::PeriodTypeType
            | Field::PeriodTypeUnit => {
                let s = expect_str(v)?;
                let sample = matches!(f, Field::SampleTypeType | Field::SampleTypeUnit);
                let is_type = matches!(f, Field::SampleTypeType | Field::PeriodTypeType);
                let p = self.profile.as_deref().expect("profile level");
                let cur = {
                    let vt = if sample {
                        &p.sample_type
                    } else {
                        &p.period_type
                    };
                    vt.as_ref().map_or(0, |v| {
                        if is_type {
                            v.type_strindex
                        } else {
                            v.unit_strindex
                        }
                    })
                };
                // Keep the index if it already names the string; never
                // change a shared string in place.
                if cur != 0 && self.dict.string(cur) == Some(s.as_str()) {
                    return Ok(());
                }
                let idx = self.dict.intern_string(&s);
                let p = self.profile_mut();
                let vt = if sample {
                    &mut p.sample_type
                } else {
                    &mut p.period_type
                };
                let vt = vt.get_or_insert_with(Default::default);
                if is_type {
                    vt.type_strindex = idx;
                } else {
                    vt.unit_strindex = idx;
                }
            }
            Field::TimeUnixNano => self.profile_mut().time_unix_nano = expect_int(v)? as u64,
            Field::Time => match v {
                Val::Time(t) => self.profile_mut().time_unix_nano = t as u64,
                Val::Nil => fail!("setting a value to nil is not supported"),
                other => fail!("expects time.Time but got {}", other.type_name()),
            },
            Field::DurationUnixNano => {
                let d = expect_int(v)?;
                if d < 0 {
                    fail!("duration_unix_nano must be non-negative");
                }
                self.profile_mut().duration_nano = d as u64;
            }
            Field::Period => self.profile_mut().period = expect_int(v)?,
            Field::ProfileId => match v {
                Val::ProfileId(id) if id == [0; 16] => fail!("profile ids must not be empty"),
                Val::ProfileId(id) => self.profile_mut().profile_id = id.to_vec(),
                Val::Nil => fail!("setting a value to nil is not supported"),
                other => fail!("expects pprofile.ProfileID but got {}", other.type_name()),
            },
            Field::ProfileIdString => {
                let s = expect_str(v)?;
                let id = match hex::decode(&s) {
                    Ok(b) if b.len() == 16 => b,
                    _ => fail!("profile ids must be 32 hex characters"),
                };
                if id.iter().all(|&b| b == 0) {
                    fail!("profile ids must not be empty");
                }
                self.profile_mut().profile_id = id;
            }
            Field::AttributeIndices => {
                let ints: Vec<i32> = match v {
                    Val::Nil => Vec::new(),
                    Val::Ints(v) => v.into_iter().map(|i| i as i32).collect(),
                    Val::List(l) => l
                        .into_iter()
                        .map(|v| match v {
                            Val::Int(i) => Ok(i as i32),
                            o => Err(crate::error::EvalError(format!(
                                "invalid attribute index type {}",
                                o.type_name()
                            ))),
                        })
                        .collect::<EvalResult<_>>()?,
                    Val::Slice(s) => s
                        .iter()
                        .map(|v| match Val::from_any(v) {
                            Val::Int(i) => Ok(i as i32),
                            o => Err(crate::error::EvalError(format!(
                                "invalid attribute index type {}",
                                o.type_name()
                            ))),
                        })
                        .collect::<EvalResult<_>>()?,
                    other => fail!("expects []int64 but got {}", other.type_name()),
                };
                self.profile_mut().attribute_indices = ints;
            }
            Field::ProfileDropped => {
                self.profile_mut().dropped_attributes_count = expect_int(v)? as u32
            }
            Field::OriginalPayloadFormat => {
                self.profile_mut().original_payload_format = expect_str(v)?
            }
            Field::OriginalPayload => match v {
                Val::Bytes(b) => self.profile_mut().original_payload = b.into_owned(),
                Val::Nil => fail!("setting a value to nil is not supported"),
                other => fail!("expects []uint8 but got {}", other.type_name()),
            },
            // Refused above.
            Field::ClientAddr | Field::ClientMetadata | Field::ClientAuthAttrs => {}
        }
        Ok(())
    }

    /// `set(profile.attributes, m)`: every entry interned again without a
    /// unit, as the Collector's `SetAttributes`.
    fn set_profile_attrs(&mut self, m: Vec<KeyValue>) {
        let mut idx = Vec::with_capacity(m.len());
        for kv in m {
            idx.push(self.dict.intern_attr(&kv.key, kv.value.unwrap_or_default()));
        }
        self.profile_mut().attribute_indices = idx;
    }

    /// Points the profile at the entries of `m`, in its order. An entry the
    /// profile already has (same key and value) keeps its index and unit;
    /// any other is interned without a unit. No entry of the table is
    /// changed, so a profile sharing one is not disturbed. Attribute lists
    /// are short: each entry is looked up among the old ones linearly.
    pub fn replace_profile_attrs(&mut self, m: &[KeyValue]) -> EvalResult<()> {
        let old = std::mem::take(&mut self.profile_mut().attribute_indices);
        let mut idx = Vec::with_capacity(m.len());
        for kv in m {
            let v = kv.value.as_ref().unwrap_or(&EMPTY);
            let mut same = None;
            // The last entry of a key is the one the map read.
            for &i in old.iter().rev() {
                match self.dict.attr(i) {
                    Ok((k, ov)) if k == kv.key => {
                        if ov == v {
                            same = Some(i);
                        }
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.profile_mut().attribute_indices = old;
                        return Err(e);
                    }
                }
            }
            idx.push(match same {
                Some(i) => i,
                None => self.dict.intern_attr(&kv.key, v.clone()),
            });
        }
        self.profile_mut().attribute_indices = idx;
        Ok(())
    }

    /// `set(profile.attributes["k"]..., v)` (`ctxprofilecommon`): a new
    /// entry for this profile, replacing its entry of the key in place.
    fn set_profile_attr(&mut self, key: &str, rest: &[Key], v: Owned) -> EvalResult<()> {
        let mut cur = AnyValue::default();
        for &i in &self.profile().attribute_indices {
            let (k, val) = self.dict.attr(i)?;
            if k == key {
                cur = val.clone();
                break;
            }
        }
        set_indexable(&mut cur, rest, v)?;
        let idx = self.dict.intern_attr(key, cur);
        let key_idx = self.dict.intern_string(key);
        let table = self.dict.attrs.values();
        let indices = &mut self
            .profile
            .as_deref_mut()
            .expect("profile level")
            .attribute_indices;
        for slot in indices.iter_mut() {
            if *slot == idx {
                return Ok(());
            }
            if table
                .get(*slot as usize)
                .is_some_and(|a| a.key_strindex == key_idx)
            {
                *slot = idx;
                return Ok(());
            }
        }
        indices.push(idx);
        Ok(())
    }
}

fn profile_id(b: &[u8]) -> [u8; 16] {
    let mut id = [0; 16];
    if b.len() == 16 {
        id.copy_from_slice(b);
    }
    id
}

fn expect_int(v: Owned) -> EvalResult<i64> {
    match v {
        Val::Int(i) => Ok(i),
        Val::Nil => fail!("setting a value to nil is not supported"),
        other => fail!("expects int64 but got {}", other.type_name()),
    }
}

fn expect_str(v: Owned) -> EvalResult<String> {
    match v {
        Val::Str(s) => Ok(s.into_owned()),
        Val::Nil => fail!("setting a value to nil is not supported"),
        other => fail!("expects string but got {}", other.type_name()),
    }
}

/// Indexes a stored value: a missing map key reads nil, an index past a
/// slice's end is an error.
pub fn index_any<'r>(mut v: &'r AnyValue, keys: &[Key]) -> EvalResult<Val<'r>> {
    use profcol_model::proto::any_value::Value as A;
    for k in keys {
        v = match (k, &v.value) {
            (Key::Str(s), Some(A::KvlistValue(m))) => match map_get(&m.values, s) {
                Some(v) => v,
                None => return Ok(Val::Nil),
            },
            (Key::Int(i), Some(A::ArrayValue(a))) => {
                match usize::try_from(*i).ok().and_then(|i| a.values.get(i)) {
                    Some(v) => v,
                    None => fail!("index {i} out of bounds"),
                }
            }
            (Key::Str(_), _) => fail!("type {} does not support string indexing", any_type(v)),
            (Key::Int(_), _) => fail!("type {} does not support int indexing", any_type(v)),
        };
    }
    Ok(Val::from_any(v))
}

pub fn any_type(v: &AnyValue) -> &'static str {
    use profcol_model::proto::any_value::Value as A;
    match &v.value {
        None => "Empty",
        Some(A::StringValue(_) | A::StringValueStrindex(_)) => "Str",
        Some(A::BoolValue(_)) => "Bool",
        Some(A::IntValue(_)) => "Int",
        Some(A::DoubleValue(_)) => "Double",
        Some(A::ArrayValue(_)) => "Slice",
        Some(A::KvlistValue(_)) => "Map",
        Some(A::BytesValue(_)) => "Bytes",
    }
}

/// `ctxutil.SetIndexableValue`: walks `keys` into `slot`, making maps and
/// slices where nothing is yet, and stores `v` there.
pub fn set_indexable(slot: &mut AnyValue, keys: &[Key], v: Owned) -> EvalResult<()> {
    use profcol_model::proto::any_value::Value as A;
    let mut cur = slot;
    for k in keys {
        match k {
            Key::Str(s) => {
                if cur.value.is_none() {
                    cur.value = Some(A::KvlistValue(KeyValueList::default()));
                }
                let ty = any_type(cur);
                let Some(A::KvlistValue(m)) = &mut cur.value else {
                    fail!("type {ty} does not support string indexing");
                };
                let i = match m.values.iter().position(|kv| kv.key == s.as_ref()) {
                    Some(i) => i,
                    None => {
                        m.values.push(KeyValue {
                            key: s.to_string(),
                            value: Some(AnyValue::default()),
                            ..Default::default()
                        });
                        m.values.len() - 1
                    }
                };
                cur = m.values[i].value.get_or_insert_with(Default::default);
            }
            Key::Int(i) => {
                if cur.value.is_none() {
                    let n = usize::try_from(*i).map_or(0, |i| i + 1);
                    cur.value = Some(A::ArrayValue(ArrayValue {
                        values: vec![AnyValue::default(); n],
                    }));
                }
                let ty = any_type(cur);
                let Some(A::ArrayValue(a)) = &mut cur.value else {
                    fail!("type {ty} does not support int indexing");
                };
                let len = a.values.len();
                cur = match usize::try_from(*i).ok().and_then(|i| a.values.get_mut(i)) {
                    Some(v) => v,
                    None => fail!("index {i} out of bounds [0, {len})"),
                };
            }
        }
    }
    *cur = v.into_any()?;
    Ok(())
}
