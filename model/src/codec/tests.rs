//! The codec against prost, its oracle: the same messages, the same errors,
//! and the hand-written path taken where it should be.

use proptest::prelude::*;
use prost::Message;

use super::decode::by_hand;
use super::*;
use crate::proto::{ProfilesData, ProfilesDictionary, Sample};
use crate::synth;

/// `bytes` decode as prost decodes them, or fail as prost fails.
fn same_as_prost(bytes: &[u8]) {
    match (decode(bytes), ProfilesData::decode(bytes)) {
        (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs),
        (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string()),
        (ours, theirs) => panic!("ours {ours:?}, prost {theirs:?}"),
    }
}

/// `bytes` are read by hand (not left to prost), as prost reads them.
fn read_by_hand(bytes: &[u8]) {
    let ours = by_hand(bytes).expect("read by hand");
    assert_eq!(ours, ProfilesData::decode(bytes).unwrap());
}

fn requests() -> Vec<ProfilesData> {
    vec![
        synth::request(1_000, 500),
        synth::request(20_000, 2_000),
        synth::Config {
            samples: 5_000,
            timestamps: false,
            resources: 3,
            ..Default::default()
        }
        .build(),
        ProfilesData::default(),
    ]
}

#[test]
fn synthetic_requests_are_read_by_hand_as_prost_reads_them() {
    for data in requests() {
        read_by_hand(&data.encode_to_vec());
    }
}

/// Every recorded OTLP request of the fixtures, older revisions among them.
pub(super) fn recorded_requests() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut dirs = vec![crate::testing::fixtures_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "bin" || e == "binpb") {
                out.push(std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn every_recorded_request_decodes_as_prost_decodes_it() {
    // Older revisions among them: what the current types make of them, or
    // the same error.
    let recorded = recorded_requests();
    for bytes in &recorded {
        same_as_prost(bytes);
    }
    let seen = recorded.len();
    assert!(seen >= 10, "only {seen} recorded requests found");
    read_by_hand(&crate::testing::fixture("otlp/go-cpu.otlp.bin"));
}

/// A field's key.
fn key(field: u32, wire: u8) -> Vec<u8> {
    varint(((field as u64) << 3) | wire as u64)
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn len_field(field: u32, body: &[u8]) -> Vec<u8> {
    let mut out = key(field, 2);
    out.extend(varint(body.len() as u64));
    out.extend(body);
    out
}

/// A request of one profile holding `sample`'s bytes, and `dictionary`.
fn request_with(sample: &[u8], dictionary: &[u8]) -> Vec<u8> {
    let profile = len_field(2, sample);
    let scope = len_field(2, &profile);
    let resource = len_field(2, &scope);
    let mut out = len_field(1, &resource);
    out.extend(len_field(2, dictionary));
    out
}

#[test]
fn unpacked_repeated_fields_and_repeated_scalars_read_as_prost_reads_them() {
    let mut sample = Vec::new();
    // stack_index twice: the last wins.
    sample.extend(key(1, 0));
    sample.extend(varint(7));
    sample.extend(key(1, 0));
    sample.extend(varint(3));
    // attribute_indices unpacked, then packed: appended.
    sample.extend(key(2, 0));
    sample.extend(varint(1));
    sample.extend(len_field(2, &[2, 3]));
    // A negative value as int64 (ten bytes), unpacked.
    sample.extend(key(4, 0));
    sample.extend(varint(-5i64 as u64));
    // timestamps unpacked (fixed64) and packed.
    sample.extend(key(5, 1));
    sample.extend(9u64.to_le_bytes());
    sample.extend(len_field(
        5,
        &[10u64.to_le_bytes(), 11u64.to_le_bytes()].concat(),
    ));
    // An int32 from a varint over 32 bits: truncated as prost truncates.
    sample.extend(key(3, 0));
    sample.extend(varint(1 << 33 | 4));
    let bytes = request_with(&sample, &len_field(5, b""));
    read_by_hand(&bytes);
    let data = ProfilesData::decode(&bytes[..]).unwrap();
    let s = &data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
    assert_eq!(
        *s,
        Sample {
            stack_index: 3,
            attribute_indices: vec![1, 2, 3],
            link_index: 4,
            values: vec![-5],
            timestamps_unix_nano: vec![9, 10, 11],
        }
    );
}

#[test]
fn a_message_field_given_twice_is_merged_and_unknown_fields_skipped() {
    let mut dictionary = len_field(5, b"");
    dictionary.extend(len_field(5, b"a"));
    // Unknown fields of every wire type prost skips.
    dictionary.extend(key(99, 0));
    dictionary.extend(varint(300));
    dictionary.extend(key(98, 1));
    dictionary.extend([0; 8]);
    dictionary.extend(len_field(97, b"xyz"));
    dictionary.extend(key(96, 5));
    dictionary.extend([0; 4]);
    let mut bytes = request_with(&[], &dictionary);
    bytes.extend(len_field(2, &len_field(5, b"b")));
    read_by_hand(&bytes);
    let data = ProfilesData::decode(&bytes[..]).unwrap();
    assert_eq!(
        data.dictionary,
        Some(ProfilesDictionary {
            string_table: vec!["".into(), "a".into(), "b".into()],
            ..Default::default()
        })
    );
}

/// async-profiler 4.5 pads every length to five bytes, an attribute's and
/// its value's too: read exactly, as prost reads them. An attribute's
/// unknown field is still not.
#[test]
fn padded_lengths_of_attributes_are_read_exactly() {
    let padded = |field, body: &[u8]| {
        let n = body.len();
        let len = [n as u8 & 0x7f | 0x80, (n >> 7) as u8 | 0x80, 0x80, 0x80, 0];
        [key(field, 2), len.to_vec(), body.to_vec()].concat()
    };
    let value = padded(1, b"worker-1");
    let attribute = [key(1, 0), varint(1), padded(2, &value)].concat();
    let with = |attribute: &[u8]| {
        let dictionary = [
            len_field(5, b""),
            len_field(5, b"thread.name"),
            padded(6, &[]),
            padded(6, attribute),
        ]
        .concat();
        request_with(&[], &dictionary)
    };
    let bytes = with(&attribute);
    let data = super::decode::exact(&bytes).expect("exact");
    assert_eq!(data, ProfilesData::decode(&bytes[..]).unwrap());
    let kv = &data.dictionary.unwrap().attribute_table[1];
    assert_eq!(kv.key_strindex, 1);
    let unknown = [attribute, key(9, 0), varint(1)].concat();
    assert!(super::decode::exact(&with(&unknown)).is_none());
}

#[test]
fn what_the_hand_path_leaves_to_prost_comes_out_as_prost_has_it() {
    // A group (skipped by prost), bad UTF-8, a wrong wire type, a truncated
    // varint, a varint of eleven bytes, field number 0.
    let group = [key(50, 3), key(51, 0), varint(1), key(50, 4)].concat();
    let cases = [
        request_with(&group, &len_field(5, b"")),
        request_with(&[], &len_field(5, &[0xff, 0xfe])),
        request_with(&[key(1, 2), varint(0)].concat(), &[]),
        request_with(&[key(1, 0), vec![0x80]].concat(), &[]),
        request_with(&[key(1, 0), vec![0xff; 10], vec![1]].concat(), &[]),
        request_with(&[key(1, 0), vec![0xff; 9], vec![2]].concat(), &[]),
        [vec![0], varint(1)].concat(),
    ];
    for bytes in &cases {
        assert!(by_hand(bytes).is_none(), "{bytes:?}");
        same_as_prost(bytes);
    }
}

#[test]
fn every_truncation_of_a_request_fails_or_reads_as_prost_reads_it() {
    let bytes = synth::request(20, 10).encode_to_vec();
    for n in 0..bytes.len() {
        same_as_prost(&bytes[..n]);
    }
}

/// `data` encodes to prost's bytes, and measures their length.
fn encodes_as_prost(data: &ProfilesData) {
    let theirs = data.encode_to_vec();
    assert_eq!(encode(data), theirs);
    assert_eq!(encoded_len(data), theirs.len());
}

#[test]
fn requests_encode_to_prosts_bytes() {
    for data in requests() {
        encodes_as_prost(&data);
    }
    encodes_as_prost(
        &ProfilesData::decode(&crate::testing::fixture("otlp/go-cpu.otlp.bin")[..]).unwrap(),
    );
}

#[test]
fn edge_values_encode_to_prosts_bytes() {
    use crate::proto::{
        Function, Line, Location, Profile, ResourceProfiles, ScopeProfiles, ValueType,
    };
    let profile = Profile {
        // Present but empty: written as prost writes it.
        sample_type: Some(ValueType::default()),
        samples: vec![
            Sample::default(),
            Sample {
                stack_index: -1,
                attribute_indices: vec![0, -2, i32::MAX],
                link_index: i32::MIN,
                values: vec![i64::MIN, -1, 0, 1, i64::MAX],
                // Over 127 bytes: a length of two bytes.
                timestamps_unix_nano: (0..40).collect(),
            },
        ],
        time_unix_nano: u64::MAX,
        period: -3,
        original_payload: vec![0; 300],
        attribute_indices: vec![5],
        ..Default::default()
    };
    let data = ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Default::default()),
            scope_profiles: vec![ScopeProfiles {
                scope: None,
                profiles: vec![profile, Profile::default()],
                schema_url: "s".into(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(ProfilesDictionary {
            string_table: vec!["".into(), "x".repeat(200)],
            location_table: vec![Location {
                mapping_index: -7,
                address: u64::MAX,
                lines: vec![
                    Line::default(),
                    Line {
                        function_index: 1,
                        line: -1,
                        column: 9,
                    },
                ],
                attribute_indices: vec![],
            }],
            function_table: vec![Function {
                start_line: i64::MIN,
                ..Default::default()
            }],
            stack_table: vec![
                Default::default(),
                crate::proto::Stack {
                    location_indices: (0..100).collect(),
                },
            ],
            ..Default::default()
        }),
    };
    encodes_as_prost(&data);
    encodes_as_prost(&ProfilesData {
        dictionary: Some(Default::default()),
        ..Default::default()
    });
}

/// A small request with some of its bytes replaced.
fn damaged(flips: Vec<(prop::sample::Index, u8)>) -> Vec<u8> {
    let mut bytes = synth::request(30, 12).encode_to_vec();
    for (at, b) in flips {
        let i = at.index(bytes.len());
        bytes[i] = b;
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn damaged_requests_decode_as_prost_decodes_them(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        same_as_prost(&damaged(flips));
    }

    /// Whatever prost makes of damaged bytes, another shape each time.
    #[test]
    fn what_damaged_requests_decode_to_encodes_as_prost_encodes_it(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        if let Ok(data) = ProfilesData::decode(&damaged(flips)[..]) {
            encodes_as_prost(&data);
        }
    }
}
