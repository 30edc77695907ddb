//! OTLP/JSON for profiles (<https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>).
//!
//! The proto3 JSON mapping comes from `prost-reflect` over the descriptors
//! `opentelemetry-proto` ships; OTLP differs from it only in writing trace,
//! span and profile ids as hex rather than base64, which is fixed up here.

use std::sync::LazyLock;

use base64::Engine;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use serde_json::Value;

use crate::proto::{ExportProfilesServiceRequest, ProfilesData};

const REQUEST: &str =
    "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest";
/// Bytes fields OTLP/JSON writes as hex.
const ID_KEYS: &[&str] = &[
    "traceId",
    "trace_id",
    "spanId",
    "span_id",
    "profileId",
    "profile_id",
];

static REQUEST_DESCRIPTOR: LazyLock<MessageDescriptor> = LazyLock::new(|| {
    DescriptorPool::decode(opentelemetry_proto::DESCRIPTORS)
        .expect("opentelemetry-proto ships valid descriptors")
        .get_message_by_name(REQUEST)
        .expect("the descriptors include the profiles service")
});

#[derive(Debug, thiserror::Error)]
#[error("invalid OTLP/JSON: {0}")]
pub struct OtlpJsonError(String);

/// Decodes an OTLP/JSON `ExportProfilesServiceRequest` (or `ProfilesData`,
/// which has the same shape). Field names may be lowerCamelCase or the
/// proto's snake_case; ids may be hex (OTLP) or base64 (proto3 JSON);
/// unknown fields are ignored, as OTLP receivers must.
pub fn decode(json: &[u8]) -> Result<ProfilesData, OtlpJsonError> {
    let mut value: Value =
        serde_json::from_slice(json).map_err(|e| OtlpJsonError(e.to_string()))?;
    walk(&mut value, &|s| hex_to_base64(s));
    let opts = DeserializeOptions::new().deny_unknown_fields(false);
    let msg = DynamicMessage::deserialize_with_options(REQUEST_DESCRIPTOR.clone(), value, &opts)
        .map_err(|e| located(json, &opts, e))?;
    let req = ExportProfilesServiceRequest::decode(msg.encode_to_vec().as_slice())
        .map_err(|e| OtlpJsonError(e.to_string()))?;
    Ok(crate::proto::request_into_data(req))
}

/// A `Value` has no positions, so a mapping error is found again on the
/// text, where serde_json adds the line and column and the path names the
/// field. Hex ids are valid base64, so that pass fails only where the first
/// one did.
fn located(json: &[u8], opts: &DeserializeOptions, first: serde_json::Error) -> OtlpJsonError {
    let mut de = serde_json::Deserializer::from_slice(json);
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(&mut de, &mut track);
    match DynamicMessage::deserialize_with_options(REQUEST_DESCRIPTOR.clone(), tracked, opts) {
        Err(e) => OtlpJsonError(format!("{}: {e}", track.path())),
        Ok(_) => OtlpJsonError(first.to_string()),
    }
}

/// Encodes as OTLP/JSON: lowerCamelCase names, 64-bit integers as strings,
/// enums as numbers, ids as hex, default values left out.
pub fn encode(data: &ProfilesData) -> Vec<u8> {
    let bytes = data.encode_to_vec();
    let msg = DynamicMessage::decode(REQUEST_DESCRIPTOR.clone(), bytes.as_slice())
        .expect("prost output decodes with the same descriptors");
    let opts = SerializeOptions::new()
        .stringify_64_bit_integers(true)
        .use_enum_numbers(true)
        .skip_default_fields(true);
    let mut value = msg
        .serialize_with_options(serde_json::value::Serializer, &opts)
        .expect("a message always serializes to a JSON value");
    walk(&mut value, &|s| base64_to_hex(s));
    serde_json::to_vec(&value).expect("a JSON value always serializes")
}

/// Rewrites the string value of every id key, at any depth.
fn walk(v: &mut Value, fix: &dyn Fn(&str) -> Option<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                match x {
                    Value::String(s) if ID_KEYS.contains(&k.as_str()) => {
                        if let Some(new) = fix(s) {
                            *s = new;
                        }
                    }
                    _ => walk(x, fix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| walk(x, fix)),
        _ => {}
    }
}

/// Hex of an 8- or 16-byte id to base64; anything else (already base64) is
/// left. Base64 of such ids is 12 or 24 characters, so the two never mix up.
fn hex_to_base64(s: &str) -> Option<String> {
    if !matches!(s.len(), 16 | 32) {
        return None;
    }
    let bytes = hex::decode(s).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn base64_to_hex(s: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    Some(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        crate::testing::fixture(&format!("otlp/{name}"))
    }

    fn proto(name: &str) -> ProfilesData {
        ProfilesData::decode(fixture(name).as_slice()).unwrap()
    }

    #[test]
    fn the_recorded_json_decodes_like_its_protobuf() {
        // Written by Python's MessageToJson: snake_case names, base64 ids.
        let got = decode(&fixture("minimal-request.json")).unwrap();
        assert_eq!(got, proto("minimal-request.bin"));
    }

    #[test]
    fn encode_then_decode_round_trips_with_hex_ids_and_camel_case() {
        let data = proto("two-resources-request.bin");
        let json = encode(&data);
        assert_eq!(decode(&json).unwrap(), data);
        let text = String::from_utf8(json).unwrap();
        assert!(
            text.contains(r#""resourceProfiles":["#) && !text.contains("resource_profiles"),
            "{text}"
        );
        let link = &data.dictionary.as_ref().unwrap().link_table[1];
        assert_eq!(link.trace_id.len(), 16);
        assert!(
            text.contains(&format!(r#""traceId":"{}""#, hex::encode(&link.trace_id))),
            "{text}"
        );
        assert!(
            text.contains(&format!(r#""spanId":"{}""#, hex::encode(&link.span_id))),
            "{text}"
        );
    }

    #[test]
    fn hand_written_otlp_json() {
        let json = br#"{"resourceProfiles":[{"scopeProfiles":[{"profiles":[
            {"profileId":"0102030405060708090a0b0c0d0e0f10","timeUnixNano":"1700000000000000000",
             "samples":[{"stackIndex":1,"values":["7"]}],"futureField":{"x":1}}]}]}],
            "dictionary":{"stringTable":["","cpu"],"linkTable":[{},{"traceId":"000102030405060708090a0b0c0d0e0f","spanId":"0001020304050607"}]}}"#;
        let d = decode(json).unwrap();
        let p = &d.resource_profiles[0].scope_profiles[0].profiles[0];
        assert_eq!(p.profile_id, (1u8..=16).collect::<Vec<_>>());
        assert_eq!(p.time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(p.samples[0].values, [7]);
        let link = &d.dictionary.as_ref().unwrap().link_table[1];
        assert_eq!(link.trace_id, (0u8..16).collect::<Vec<_>>());
        assert_eq!(link.span_id, (0u8..8).collect::<Vec<_>>());
    }

    #[test]
    fn errors_say_where() {
        let e = decode(b"{\n  \"resourceProfiles\": [\n  }")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        let e = decode(b"{\"resourceProfiles\": [{\"scopeProfiles\": [{\"profiles\": [\n  {\"samples\": [{\"values\": [\"x\"]}]}]}]}]}")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid OTLP/JSON") && e.contains("line 2 column"),
            "{e}"
        );
        let e = decode(br#"{"resourceProfiles": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1 column"), "{e}");
        // The path names the field.
        let e = decode(br#"{"resourceProfiles": [{"scopeProfiles": [{"profiles": [{"timeUnixNano": "soon"}]}]}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("resourceProfiles[0].scopeProfiles[0].profiles[0].timeUnixNano"),
            "{e}"
        );
    }
}
