//! OTLP/JSON for profiles (<https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding>).
//!
//! The proto3 JSON mapping comes from `prost-reflect` over the descriptors
//! `opentelemetry-proto` ships; OTLP differs from it only in writing trace,
//! span and profile ids as hex rather than base64, which is fixed up here.
//! v1.10.0, what profcol writes unless told otherwise, is written straight
//! from the batch instead ([`write`]), to the same JSON.
//!
//! The older revisions of `profiles/v1development` (see
//! [`otlp_revisions`](crate::revisions)) are read and written with
//! their own descriptors. In JSON fields go by name, so text that one
//! revision reads means the same in every revision that reads it: v1.9.0
//! and v1.10.0 write the same names, and their text is read as v1.10.0.

use std::sync::LazyLock;

use base64::Engine;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use serde_json::Value;

use crate::revisions::{self as otlp_revisions, Decoded, Lost, Revision};
use profcol_model::proto::{ExportProfilesServiceRequest, ProfilesData};

mod write;

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

/// The request's message in each revision, newest first: v1.10.0's
/// `ExportProfilesServiceRequest`, the older revisions' `ProfilesData`
/// (which has the same fields).
static REVISIONS: LazyLock<Vec<(Revision, MessageDescriptor)>> = LazyLock::new(|| {
    Revision::ALL
        .into_iter()
        .map(|r| {
            let m = match r {
                Revision::CURRENT => REQUEST_DESCRIPTOR.clone(),
                _ => otlp_revisions::pool(r)
                    .get_message_by_name("opentelemetry.proto.profiles.v1development.ProfilesData")
                    .expect("every revision has ProfilesData"),
            };
            (r, m)
        })
        .collect()
});

fn descriptor(revision: Revision) -> MessageDescriptor {
    let (_, m) = REVISIONS
        .iter()
        .find(|(r, _)| *r == revision)
        .expect("every revision is in REVISIONS");
    m.clone()
}

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
    Ok(profcol_model::proto::request_into_data(req))
}

/// Decodes OTLP/JSON written with the profiles messages of any revision
/// profcol reads, into v1.10.0, as [`otlp_revisions::decode`] does bytes:
/// newest first, the first revision whose names and types all fit (no
/// field it does not know) and whose translation is valid (but for real
/// entries at index 0) wins. Text with fields no revision knows (a newer
/// producer) is read as v1.10.0 ignoring them, as OTLP receivers must; if
/// an older revision fits all of it, that one wins, as with bytes. The
/// error, when nothing reads the text, is v1.10.0's.
pub fn decode_any(json: &[u8]) -> Result<Decoded, OtlpJsonError> {
    let mut value: Value =
        serde_json::from_slice(json).map_err(|e| OtlpJsonError(e.to_string()))?;
    walk(&mut value, &|s| hex_to_base64(s));
    let strict = DeserializeOptions::new().deny_unknown_fields(true);
    let lenient = DeserializeOptions::new().deny_unknown_fields(false);
    let mut best: Option<Decoded> = None;
    let mut error = None;
    for (revision, m) in REVISIONS.iter() {
        let (msg, unknown_fields) =
            match DynamicMessage::deserialize_with_options(m.clone(), &value, &strict) {
                Ok(msg) => (msg, 0),
                Err(_) if *revision == Revision::CURRENT => {
                    match DynamicMessage::deserialize_with_options(m.clone(), &value, &lenient) {
                        // At least one: the strict reading refused it.
                        Ok(msg) => (msg, 1),
                        Err(e) => {
                            error = Some(located(json, &lenient, e));
                            continue;
                        }
                    }
                }
                Err(_) => continue,
            };
        let Ok(mut d) = otlp_revisions::read_as(*revision, &msg.encode_to_vec().into()) else {
            continue;
        };
        d.unknown_fields = unknown_fields;
        if d.fits() {
            return Ok(d);
        }
        if best.as_ref().is_none_or(|b| b.prefers(&d)) {
            best = Some(d);
        }
    }
    best.ok_or_else(|| error.unwrap_or_else(|| OtlpJsonError("no revision reads it".into())))
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
    let mut out = Vec::new();
    write::write(data, &mut out);
    out
}

/// Encodes as [`encode`] does, in the names and shapes of `revision`, as
/// [`otlp_revisions::encode_as`] writes it; with what it could not hold.
pub fn encode_as(data: &ProfilesData, revision: Revision) -> (Vec<u8>, Lost) {
    match revision {
        // v1.10.0 holds everything; written without the reflective copies.
        Revision::CURRENT => (encode(data), Lost::default()),
        _ => reflective(data, revision),
    }
}

/// The older revisions, which profcol holds no structs for, through their
/// descriptors: the protobuf bytes, a `DynamicMessage`, then a JSON value
/// tree (several dozen times the data's size, see [`write`]).
fn reflective(data: &ProfilesData, revision: Revision) -> (Vec<u8>, Lost) {
    let mut bytes = Vec::new();
    let lost =
        otlp_revisions::encode_as(data, revision, &mut bytes).expect("a Vec takes any message");
    let msg = DynamicMessage::decode(descriptor(revision), bytes.as_slice())
        .expect("the revision's own output decodes with its descriptors");
    let opts = SerializeOptions::new()
        .stringify_64_bit_integers(true)
        .use_enum_numbers(true)
        .skip_default_fields(true);
    let mut value = msg
        .serialize_with_options(serde_json::value::Serializer, &opts)
        .expect("a message always serializes to a JSON value");
    walk(&mut value, &|s| base64_to_hex(s));
    (
        serde_json::to_vec(&value).expect("a JSON value always serializes"),
        lost,
    )
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
        profcol_model::testing::fixture(&format!("otlp/{name}"))
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

    /// Ids of zeros are no ids: left out, as pdata leaves them out
    /// (async-profiler 4.5 writes its zero link with them).
    #[test]
    fn ids_of_zeros_are_left_out() {
        let mut data = ProfilesData::decode(
            &profcol_model::testing::fixture("otlp-revisions/async-profiler-4.5/cpu.binpb")[..],
        )
        .unwrap();
        let link = &data.dictionary.as_ref().unwrap().link_table[0];
        assert_eq!(
            (&link.trace_id[..], &link.span_id[..]),
            (&[0; 16][..], &[0; 8][..])
        );
        data.resource_profiles[0].scope_profiles[0].profiles[0].profile_id = vec![0; 16];
        let text = String::from_utf8(encode(&data)).unwrap();
        for key in ["traceId", "spanId", "profileId"] {
            assert!(!text.contains(key), "{key}: {text}");
        }
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

    fn revision_fixture(rel: &str) -> Vec<u8> {
        profcol_model::testing::fixture(&format!("otlp-revisions/{rel}"))
    }

    /// The hand-built request of each revision, as its own published
    /// Python classes write it in JSON (`MessageToJson`): read as its
    /// protobuf is, to the same v1.10.0 data.
    #[test]
    fn each_revision_s_json_reads_as_its_protobuf() {
        for (dir, stem, revision) in [
            ("python-proto-1.39.1", "request", Revision::V1_7_0),
            ("python-protoc-v1.8.0", "request", Revision::V1_8_0),
            // v1.9.0 and v1.10.0 write the same JSON.
            ("python-proto-1.42.1", "request", Revision::V1_10_0),
            ("python-proto-1.45.2", "request", Revision::V1_10_0),
            ("python-proto-1.45.2", "request-strindex", Revision::V1_10_0),
        ] {
            let file = format!("{dir}/{stem}");
            let json = decode_any(&revision_fixture(&format!("{file}.json")))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(json.revision, revision, "{file}");
            assert!(json.findings.is_valid(), "{file}: {:?}", json.findings);
            let binary =
                otlp_revisions::decode(&revision_fixture(&format!("{file}.binpb")).into()).unwrap();
            assert_eq!(json.data, binary.data, "{file}");
        }
    }

    /// What profcol writes in each revision's JSON reads back as that
    /// revision (v1.9.0 as v1.10.0: the same text), to the same data.
    #[test]
    fn every_fixture_in_every_revision_s_json_reads_back_the_same() {
        for file in ["two-resources-request.bin", "go-cpu.otlp.bin"] {
            let data = proto(file);
            for revision in Revision::ALL {
                let (json, lost) = encode_as(&data, revision);
                let d = decode_any(&json).unwrap_or_else(|e| panic!("{file} as {revision}: {e}"));
                let want = match revision {
                    Revision::V1_9_0 => Revision::V1_10_0,
                    r => r,
                };
                assert_eq!(d.revision, want, "{file} as {revision}");
                assert!(d.findings.is_valid(), "{file} as {revision}");
                let mut bytes = Vec::new();
                otlp_revisions::encode_as(&data, revision, &mut bytes).unwrap();
                let binary = otlp_revisions::decode(&bytes.into()).unwrap();
                assert_eq!(d.data, binary.data, "{file} as {revision}");
                if revision != Revision::V1_7_0 {
                    assert!(lost.is_empty());
                }
            }
        }
        // The names are each revision's own.
        let data = proto("go-cpu.otlp.bin");
        let text = |r| String::from_utf8(encode_as(&data, r).0).unwrap();
        assert!(text(Revision::V1_8_0).contains(r#""sample":["#));
        assert!(text(Revision::V1_10_0).contains(r#""samples":["#));
        assert!(text(Revision::V1_7_0).contains(r#""locationIndices":["#));
    }

    /// A field no revision knows, from a producer newer than profcol: read
    /// as v1.10.0 without it, as `decode` reads it.
    #[test]
    fn json_with_a_field_no_revision_knows_is_read_as_v1_10() {
        let json = br#"{"resourceProfiles":[{"scopeProfiles":[{"profiles":[
            {"sampleType":{"typeStrindex":1},"samples":[{"stackIndex":0,"values":["7"]}],
             "futureField":{"x":1}}]}]}],"dictionary":{"stringTable":["","cpu"],"stackTable":[{}]}}"#;
        let d = decode_any(json).unwrap();
        assert_eq!(d.revision, Revision::V1_10_0);
        assert!(d.findings.consistent() && !d.fits());
        assert_eq!(d.data, decode(json).unwrap());
        // Not JSON at all: v1.10.0's error, with the place.
        let e = decode_any(br#"{"resourceProfiles": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1 column"), "{e}");
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
