//! OTLP/JSON written straight from the batch's own structs, through serde,
//! into any writer: no copy of the batch in another shape. Going through
//! `prost-reflect` (protobuf bytes, then a `DynamicMessage`, then a JSON
//! value tree) took about 72 times the batch's size for one encoding
//! (docs/operations.md "Memory"); this takes nothing beyond the output.
//!
//! It writes what the proto3 JSON mapping writes with OTLP's rules, as
//! [`super::encode_as`] does for the older revisions: lowerCamelCase
//! names, fields in their proto order, scalars at their default and empty
//! lists left out, a set message written even when empty, the member of a
//! oneof written even at its default, 64-bit integers as strings, bytes as
//! base64 but ids as hex, non-finite doubles as `"NaN"` and
//! `"[-]Infinity"`. The tests compare it with that reflective encoding,
//! on a message with every field of every type set.

use std::fmt;

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use profcol_model::proto::common::EntityRef;
use profcol_model::proto::{
    any_value, AnyValue, ArrayValue, Function, InstrumentationScope, KeyValue, KeyValueAndUnit,
    KeyValueList, Line, Link, Location, Mapping, Profile, ProfilesData, ProfilesDictionary,
    Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};

/// Writes `data` as an OTLP/JSON `ExportProfilesServiceRequest`.
pub(super) fn write(data: &ProfilesData, out: &mut Vec<u8>) {
    let mut ser = serde_json::Serializer::new(out);
    Json(data)
        .serialize(&mut ser)
        .expect("writing into a Vec does not fail");
}

/// A message's fields, each written only when the proto3 JSON mapping
/// writes it.
trait Message {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error>;
}

/// A message as a JSON object.
struct Json<'a, T>(&'a T);

impl<T: Message> Serialize for Json<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut f = Fields(s.serialize_map(None)?);
        self.0.fields(&mut f)?;
        f.0.end()
    }
}

/// A list of messages.
struct Messages<'a, T>(&'a [T]);

impl<T: Message> Serialize for Messages<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(Json))
    }
}

/// A 64-bit integer as a string, formatted straight into the output.
struct Big<T>(T);

impl<T: fmt::Display> Serialize for Big<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A list of 64-bit integers, each a string.
struct Bigs<'a, T>(&'a [T]);

impl<T: fmt::Display + Copy> Serialize for Bigs<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|v| Big(*v)))
    }
}

struct Base64<'a>(&'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&Base64Display::new(self.0, &STANDARD))
    }
}

/// Trace, span and profile ids: hex in OTLP/JSON.
struct Hex<'a>(&'a [u8]);

impl Serialize for Hex<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// A double; JSON has no number for NaN and the infinities.
struct Double(f64);

impl Serialize for Double {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            v if v.is_nan() => s.serialize_str("NaN"),
            f64::INFINITY => s.serialize_str("Infinity"),
            f64::NEG_INFINITY => s.serialize_str("-Infinity"),
            v => s.serialize_f64(v),
        }
    }
}

struct Fields<M>(M);

impl<M: SerializeMap> Fields<M> {
    fn entry<V: Serialize + ?Sized>(&mut self, key: &str, v: &V) -> Result<(), M::Error> {
        self.0.serialize_entry(key, v)
    }

    /// `v` under `key` unless the field is at its default (`set` false):
    /// proto3 JSON leaves defaults out.
    fn unless_default<V: Serialize + ?Sized>(
        &mut self,
        key: &str,
        set: bool,
        v: &V,
    ) -> Result<(), M::Error> {
        if set {
            self.entry(key, v)
        } else {
            Ok(())
        }
    }

    /// A 32-bit integer, as a number.
    fn number<T: Serialize + Default + PartialEq>(
        &mut self,
        key: &str,
        v: T,
    ) -> Result<(), M::Error> {
        self.unless_default(key, v != T::default(), &v)
    }

    /// A 64-bit integer, as a string.
    fn big<T: fmt::Display + Default + PartialEq>(
        &mut self,
        key: &str,
        v: T,
    ) -> Result<(), M::Error> {
        self.unless_default(key, v != T::default(), &Big(v))
    }

    fn string(&mut self, key: &str, v: &str) -> Result<(), M::Error> {
        self.unless_default(key, !v.is_empty(), v)
    }

    fn bytes(&mut self, key: &str, v: &[u8]) -> Result<(), M::Error> {
        self.unless_default(key, !v.is_empty(), &Base64(v))
    }

    /// An id of zeros is no id, left out as pdata leaves it out.
    fn id(&mut self, key: &str, v: &[u8]) -> Result<(), M::Error> {
        self.unless_default(key, v.iter().any(|&b| b != 0), &Hex(v))
    }

    fn message<T: Message>(&mut self, key: &str, v: &Option<T>) -> Result<(), M::Error> {
        match v {
            Some(v) => self.entry(key, &Json(v)),
            None => Ok(()),
        }
    }

    fn messages<T: Message>(&mut self, key: &str, v: &[T]) -> Result<(), M::Error> {
        self.unless_default(key, !v.is_empty(), &Messages(v))
    }

    /// A list of 32-bit integers, or of strings.
    fn list<T: Serialize>(&mut self, key: &str, v: &[T]) -> Result<(), M::Error> {
        self.unless_default(key, !v.is_empty(), v)
    }

    fn bigs<T: fmt::Display + Copy>(&mut self, key: &str, v: &[T]) -> Result<(), M::Error> {
        self.unless_default(key, !v.is_empty(), &Bigs(v))
    }
}

impl Message for ProfilesData {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.messages("resourceProfiles", &self.resource_profiles)?;
        f.message("dictionary", &self.dictionary)
    }
}

impl Message for ResourceProfiles {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.message("resource", &self.resource)?;
        f.messages("scopeProfiles", &self.scope_profiles)?;
        f.string("schemaUrl", &self.schema_url)
    }
}

impl Message for Resource {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.messages("attributes", &self.attributes)?;
        f.number("droppedAttributesCount", self.dropped_attributes_count)?;
        f.messages("entityRefs", &self.entity_refs)
    }
}

impl Message for EntityRef {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.string("schemaUrl", &self.schema_url)?;
        f.string("type", &self.r#type)?;
        f.list("idKeys", &self.id_keys)?;
        f.list("descriptionKeys", &self.description_keys)
    }
}

impl Message for ScopeProfiles {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.message("scope", &self.scope)?;
        f.messages("profiles", &self.profiles)?;
        f.string("schemaUrl", &self.schema_url)
    }
}

impl Message for InstrumentationScope {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.string("name", &self.name)?;
        f.string("version", &self.version)?;
        f.messages("attributes", &self.attributes)?;
        f.number("droppedAttributesCount", self.dropped_attributes_count)
    }
}

impl Message for Profile {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.message("sampleType", &self.sample_type)?;
        f.messages("samples", &self.samples)?;
        f.big("timeUnixNano", self.time_unix_nano)?;
        f.big("durationNano", self.duration_nano)?;
        f.message("periodType", &self.period_type)?;
        f.big("period", self.period)?;
        f.id("profileId", &self.profile_id)?;
        f.number("droppedAttributesCount", self.dropped_attributes_count)?;
        f.string("originalPayloadFormat", &self.original_payload_format)?;
        f.bytes("originalPayload", &self.original_payload)?;
        f.list("attributeIndices", &self.attribute_indices)
    }
}

impl Message for ValueType {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.number("typeStrindex", self.type_strindex)?;
        f.number("unitStrindex", self.unit_strindex)
    }
}

impl Message for Sample {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.number("stackIndex", self.stack_index)?;
        f.list("attributeIndices", &self.attribute_indices)?;
        f.number("linkIndex", self.link_index)?;
        f.bigs("values", &self.values)?;
        f.bigs("timestampsUnixNano", &self.timestamps_unix_nano)
    }
}

impl Message for ProfilesDictionary {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.messages("mappingTable", &self.mapping_table)?;
        f.messages("locationTable", &self.location_table)?;
        f.messages("functionTable", &self.function_table)?;
        f.messages("linkTable", &self.link_table)?;
        f.list("stringTable", &self.string_table)?;
        f.messages("attributeTable", &self.attribute_table)?;
        f.messages("stackTable", &self.stack_table)
    }
}

impl Message for Mapping {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.big("memoryStart", self.memory_start)?;
        f.big("memoryLimit", self.memory_limit)?;
        f.big("fileOffset", self.file_offset)?;
        f.number("filenameStrindex", self.filename_strindex)?;
        f.list("attributeIndices", &self.attribute_indices)
    }
}

impl Message for Location {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.number("mappingIndex", self.mapping_index)?;
        f.big("address", self.address)?;
        f.messages("lines", &self.lines)?;
        f.list("attributeIndices", &self.attribute_indices)
    }
}

impl Message for Line {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.number("functionIndex", self.function_index)?;
        f.big("line", self.line)?;
        f.big("column", self.column)
    }
}

impl Message for Function {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.number("nameStrindex", self.name_strindex)?;
        f.number("systemNameStrindex", self.system_name_strindex)?;
        f.number("filenameStrindex", self.filename_strindex)?;
        f.big("startLine", self.start_line)
    }
}

impl Message for Link {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.id("traceId", &self.trace_id)?;
        f.id("spanId", &self.span_id)
    }
}

impl Message for Stack {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.list("locationIndices", &self.location_indices)
    }
}

impl Message for KeyValueAndUnit {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.number("keyStrindex", self.key_strindex)?;
        f.message("value", &self.value)?;
        f.number("unitStrindex", self.unit_strindex)
    }
}

impl Message for KeyValue {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.string("key", &self.key)?;
        f.message("value", &self.value)?;
        f.number("keyStrindex", self.key_strindex)
    }
}

impl Message for AnyValue {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        use any_value::Value as V;
        // A oneof's member is written whenever it is set, at its default too.
        match &self.value {
            None => Ok(()),
            Some(V::StringValue(v)) => f.entry("stringValue", v),
            Some(V::BoolValue(v)) => f.entry("boolValue", v),
            Some(V::IntValue(v)) => f.entry("intValue", &Big(*v)),
            Some(V::DoubleValue(v)) => f.entry("doubleValue", &Double(*v)),
            Some(V::ArrayValue(v)) => f.entry("arrayValue", &Json(v)),
            Some(V::KvlistValue(v)) => f.entry("kvlistValue", &Json(v)),
            Some(V::BytesValue(v)) => f.entry("bytesValue", &Base64(v)),
            Some(V::StringValueStrindex(v)) => f.entry("stringValueStrindex", v),
        }
    }
}

impl Message for ArrayValue {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.messages("values", &self.values)
    }
}

impl Message for KeyValueList {
    fn fields<M: SerializeMap>(&self, f: &mut Fields<M>) -> Result<(), M::Error> {
        f.messages("values", &self.values)
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;
    use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, Value as Field};
    use serde_json::Value;

    use super::*;
    use crate::revisions::Revision;

    /// What the reflective encoding, the proto3 JSON mapping of the
    /// descriptors, writes for `data`: the oracle.
    fn reflective(data: &ProfilesData) -> Value {
        let (json, lost) = super::super::reflective(data, Revision::CURRENT);
        assert!(lost.is_empty());
        serde_json::from_slice(&json).unwrap()
    }

    fn direct(data: &ProfilesData) -> Value {
        let mut out = Vec::new();
        write(data, &mut out);
        serde_json::from_str(std::str::from_utf8(&out).unwrap()).unwrap()
    }

    /// Every field of `desc` set, from the descriptors, so that a field a
    /// proto bump adds and the writer misses fails the comparison. A list
    /// of messages holds eight, the n-th setting the n-th member of each
    /// oneof (`AnyValue` has eight); nesting stops at `depth`.
    fn full(desc: &MessageDescriptor, n: usize, depth: usize) -> DynamicMessage {
        let mut m = DynamicMessage::new(desc.clone());
        for field in desc.fields() {
            if let Some(oneof) = field.containing_oneof() {
                let members: Vec<_> = oneof.fields().collect();
                if members[n % members.len()].number() != field.number() {
                    continue;
                }
            }
            let value = if field.is_list() {
                let len = if matches!(field.kind(), Kind::Message(_)) {
                    8
                } else {
                    3
                };
                let items: Vec<_> = (0..len)
                    .filter_map(|i| one(&field.kind(), i, depth))
                    .collect();
                (!items.is_empty()).then_some(Field::List(items))
            } else {
                one(&field.kind(), n, depth)
            };
            if let Some(v) = value {
                m.set_field(&field, v);
            }
        }
        m
    }

    fn one(kind: &Kind, i: usize, depth: usize) -> Option<Field> {
        let k = i as i64;
        Some(match kind {
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Field::I32(7 + i as i32),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Field::I64(-(1 << 40) - k),
            Kind::Uint32 | Kind::Fixed32 => Field::U32(9 + i as u32),
            Kind::Uint64 | Kind::Fixed64 => Field::U64(u64::MAX - i as u64),
            Kind::Double => Field::F64([1.5, -1e300, f64::INFINITY, f64::NAN][i % 4]),
            Kind::Float => Field::F32(2.5),
            Kind::Bool => Field::Bool(i.is_multiple_of(2)),
            Kind::String => Field::String(format!("s{i} \"q\" é\n\u{1}")),
            Kind::Bytes => Field::Bytes((0..16u8).map(|b| b.wrapping_mul(17) ^ i as u8).collect()),
            Kind::Enum(_) => Field::EnumNumber(1),
            Kind::Message(_) if depth == 0 => return None,
            Kind::Message(d) => Field::Message(full(d, i, depth - 1)),
        })
    }

    #[test]
    fn every_field_of_every_message_is_written_as_the_reflective_mapping_writes_it() {
        let msg = full(&super::super::REQUEST_DESCRIPTOR, 0, 6);
        let data = ProfilesData::decode(msg.encode_to_vec().as_slice()).unwrap();
        // The populator reached what it is there for.
        let attrs = &data.dictionary.as_ref().unwrap().attribute_table;
        assert!(attrs.len() == 8 && data.resource_profiles[0].resource.is_some());
        let want = reflective(&data);
        assert_eq!(direct(&data), want);
        let text = want.to_string();
        for field in [
            "stringValueStrindex",
            "entityRefs",
            "timestampsUnixNano",
            "\"NaN\"",
        ] {
            assert!(text.contains(field), "{field} not populated");
        }
    }

    #[test]
    fn a_oneof_member_at_its_default_and_doubles_json_has_no_number_for() {
        use any_value::Value as V;
        let values = [
            V::IntValue(0),
            V::BoolValue(false),
            V::StringValue(String::new()),
            V::DoubleValue(0.0),
            V::DoubleValue(f64::NEG_INFINITY),
            V::BytesValue(vec![]),
            V::StringValueStrindex(0),
            V::ArrayValue(ArrayValue::default()),
            V::KvlistValue(KeyValueList::default()),
        ];
        let data = ProfilesData {
            dictionary: Some(ProfilesDictionary {
                attribute_table: values
                    .into_iter()
                    .map(|v| KeyValueAndUnit {
                        value: Some(AnyValue { value: Some(v) }),
                        ..Default::default()
                    })
                    // A value that is set but holds nothing, and an unset one.
                    .chain([
                        KeyValueAndUnit {
                            value: Some(AnyValue::default()),
                            ..Default::default()
                        },
                        KeyValueAndUnit::default(),
                    ])
                    .collect(),
                string_table: vec![String::new()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(direct(&data), reflective(&data));
        let text = String::from_utf8(super::super::encode(&data)).unwrap();
        assert!(
            text.contains(r#"{"value":{"intValue":"0"}}"#)
                && text.contains(r#"{"value":{"doubleValue":"-Infinity"}}"#)
                && text.contains(r#"{"value":{}},{}"#)
                && text.contains(r#""stringTable":[""]"#),
            "{text}"
        );
    }

    #[test]
    fn recorded_profiles_are_written_as_the_reflective_mapping_writes_them() {
        for name in ["two-resources-request.bin", "go-cpu.otlp.bin"] {
            let bytes = profcol_model::testing::fixture(&format!("otlp/{name}"));
            let data = ProfilesData::decode(bytes.as_slice()).unwrap();
            assert_eq!(direct(&data), reflective(&data), "{name}");
        }
    }
}
