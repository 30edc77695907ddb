//! Editing resources in the bytes against its oracle: decode, edit every
//! resource (created where absent), compare what the two decode to.

use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::proto::{KeyValue, ProfilesData, ResourceProfiles};
use crate::synth;

fn string(s: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(Value::StringValue(s.into())),
    })
}

fn upsert(key: &str, value: &str) -> impl Fn(&mut Resource, &mut String) {
    let kv = KeyValue {
        key: key.into(),
        value: string(value),
        key_strindex: 0,
    };
    move |r: &mut Resource, _: &mut String| match r.attributes.iter_mut().find(|a| a.key == kv.key)
    {
        Some(a) => a.value = kv.value.clone(),
        None => r.attributes.push(kv.clone()),
    }
}

/// An absent resource and an empty one mean the same.
fn normalized(mut data: ProfilesData) -> ProfilesData {
    for rp in &mut data.resource_profiles {
        rp.resource.get_or_insert_with(Default::default);
    }
    data
}

/// What decoding `bytes`, editing and encoding give.
fn oracle(bytes: &[u8], edit: &impl Fn(&mut Resource, &mut String)) -> ProfilesData {
    let mut data = ProfilesData::decode(bytes).expect("the oracle decodes");
    for rp in &mut data.resource_profiles {
        edit(
            rp.resource.get_or_insert_with(Default::default),
            &mut rp.schema_url,
        );
    }
    normalized(data)
}

/// `bytes` edited in place decode as the oracle has them, and their
/// resources read as decoded; returns the edited bytes.
fn edits_as_decoded(bytes: &[u8], edit: impl Fn(&mut Resource, &mut String)) -> Vec<u8> {
    let decoded = ProfilesData::decode(bytes).expect("the oracle decodes");
    let resources: Vec<_> = decoded
        .resource_profiles
        .into_iter()
        .map(|rp| rp.resource)
        .collect();
    assert_eq!(read_resources(bytes), Some(resources));
    let Edited::Bytes(out) = edit_resources(bytes, &edit) else {
        panic!("the edit changes the resources");
    };
    let ours = normalized(ProfilesData::decode(&out[..]).expect("edited bytes decode"));
    assert_eq!(ours, oracle(bytes, &edit));
    out
}

#[test]
fn synthetic_requests_edit_as_decoded() {
    for resources in [1, 3] {
        let data = synth::Config {
            samples: 2_000,
            resources,
            ..Default::default()
        }
        .build();
        let bytes = data.encode_to_vec();
        let out = edits_as_decoded(&bytes, upsert("deployment.environment", "prod"));
        // Everything but the resources is copied: the edited bytes are
        // what encoding the edited messages gives.
        assert_eq!(
            out,
            super::super::encode(&oracle(&bytes, &upsert("deployment.environment", "prod")))
        );
        // An existing key, rewritten.
        edits_as_decoded(&bytes, upsert("service.name", "renamed"));
    }
}

#[test]
fn recorded_requests_edit_as_decoded() {
    let mut seen = 0;
    for bytes in super::super::tests::recorded_requests() {
        if ProfilesData::decode(&bytes[..]).is_ok()
            && edit_resources(&bytes, |_, _| {}) != Edited::Decode
        {
            edits_as_decoded(&bytes, upsert("k8s.pod.name", "p-1"));
            seen += 1;
        }
    }
    assert!(seen >= 10, "only {seen} recorded requests edited");
}

#[test]
fn an_edit_that_changes_nothing_leaves_the_bytes() {
    let bytes = synth::request(500, 100).encode_to_vec();
    assert_eq!(edit_resources(&bytes, |_, _| {}), Edited::Unchanged);
    // Setting what is there already changes nothing either.
    let edited = edits_as_decoded(&bytes, upsert("team", "a"));
    assert_eq!(
        edit_resources(&edited, upsert("team", "a")),
        Edited::Unchanged
    );
    // A resource-less `ResourceProfiles` stays without one.
    let bare = ProfilesData {
        resource_profiles: vec![ResourceProfiles::default()],
        ..Default::default()
    }
    .encode_to_vec();
    assert_eq!(edit_resources(&bare, |_, _| {}), Edited::Unchanged);
    edits_as_decoded(&bare, upsert("team", "a"));
}

fn len_field(field: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write::key(&mut out, field, LEN);
    write::varint(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    out
}

#[test]
fn a_resource_given_twice_is_merged_and_unknown_fields_are_kept() {
    let data = synth::request(50, 10);
    let rp = &data.resource_profiles[0];
    let first = Resource {
        attributes: vec![KeyValue {
            key: "a".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let second = rp.resource.clone().unwrap();
    // An unknown field (15, varint 1) in the `ResourceProfiles` and at the
    // top, around the resource's two halves and its scopes.
    let unknown = [15 << 3, 1];
    let mut body = len_field(1, &first.encode_to_vec());
    body.extend(unknown);
    for sp in &rp.scope_profiles {
        body.extend(len_field(2, &sp.encode_to_vec()));
    }
    body.extend(len_field(1, &second.encode_to_vec()));
    let mut bytes = len_field(1, &body);
    bytes.extend(unknown);
    bytes.extend(len_field(
        2,
        &data.dictionary.as_ref().unwrap().encode_to_vec(),
    ));

    let out = edits_as_decoded(&bytes, upsert("b", "2"));
    let merged = &ProfilesData::decode(&out[..]).unwrap().resource_profiles[0];
    let keys: Vec<_> = merged
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|a| a.key.as_str())
        .collect();
    assert_eq!(keys[0], "a");
    assert_eq!(keys.last(), Some(&"b"));
    assert_eq!(out.windows(2).filter(|w| *w == unknown).count(), 2);
    // Merged into one, even by an edit that adds nothing.
    assert!(matches!(
        edit_resources(&bytes, |_, _| {}),
        Edited::Bytes(_)
    ));
}

#[test]
fn resources_that_refer_to_the_dictionary_are_left_to_decoding() {
    let with = |kv: KeyValue| {
        let mut data = synth::request(50, 10);
        let r = data.resource_profiles[0].resource.as_mut().unwrap();
        r.attributes.push(kv);
        data.encode_to_vec()
    };
    let value = with(KeyValue {
        key: "k".into(),
        value: Some(AnyValue {
            value: Some(Value::StringValueStrindex(1)),
        }),
        key_strindex: 0,
    });
    assert_eq!(edit_resources(&value, |_, _| {}), Edited::Decode);
    let key = with(KeyValue {
        key_strindex: 1,
        ..Default::default()
    });
    assert_eq!(edit_resources(&key, |_, _| {}), Edited::Decode);
    // Truncated bytes, and a group, are left to decoding too.
    let bytes = synth::request(50, 10).encode_to_vec();
    assert_eq!(
        edit_resources(&bytes[..bytes.len() - 1], |_, _| {}),
        Edited::Decode
    );
    assert_eq!(
        edit_resources(&[(3 << 3) | 3, (3 << 3) | 4], |_, _| {}),
        Edited::Decode
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever prost reads in damaged bytes, the edit agrees with it (or
    /// leaves the bytes to decoding).
    #[test]
    fn damaged_requests_edit_as_decoded(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        let mut bytes = synth::Config { samples: 30, resources: 2, ..Default::default() }.build().encode_to_vec();
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        if ProfilesData::decode(&bytes[..]).is_ok() {
            let edit = upsert("x", "y");
            match edit_resources(&bytes, &edit) {
                Edited::Decode => {}
                Edited::Unchanged => prop_assert_eq!(
                    normalized(ProfilesData::decode(&bytes[..]).unwrap()),
                    oracle(&bytes, &edit)
                ),
                Edited::Bytes(out) => prop_assert_eq!(
                    normalized(ProfilesData::decode(&out[..]).unwrap()),
                    oracle(&bytes, &edit)
                ),
            }
        }
    }
}

#[test]
fn schema_urls_are_edited_with_the_resources() {
    let mut data = synth::Config {
        samples: 200,
        resources: 2,
        ..Default::default()
    }
    .build();
    data.resource_profiles[0].schema_url = "https://opentelemetry.io/schemas/1.30.0".into();
    let bytes = data.encode_to_vec();
    // Set, changed and cleared; and left as it is while the resource
    // changes.
    edits_as_decoded(&bytes, |_, url: &mut String| {
        *url = "https://x/1.38.0".into()
    });
    edits_as_decoded(&bytes, |_, url: &mut String| url.clear());
    let out = edits_as_decoded(&bytes, upsert("a", "b"));
    assert_eq!(
        ProfilesData::decode(&out[..]).unwrap().resource_profiles[0].schema_url,
        "https://opentelemetry.io/schemas/1.30.0"
    );
    assert_eq!(
        edit_resources(&bytes, |_, url: &mut String| *url = url.clone()),
        Edited::Unchanged
    );
    // Given twice, the last one counts, as prost reads it.
    let mut twice = bytes.clone();
    let extra = {
        let mut rp = Vec::new();
        rp.extend(len_field(3, b"https://first"));
        rp.extend(len_field(3, b"https://last"));
        len_field(1, &rp)
    };
    twice.extend(&extra);
    edits_as_decoded(&twice, upsert("a", "b"));
    edits_as_decoded(&twice, |_, url: &mut String| url.push('/'));
}

#[test]
fn dropped_resources_go_with_all_they_hold_and_are_counted() {
    let mut data = synth::Config {
        samples: 3_000,
        resources: 3,
        ..Default::default()
    }
    .build();
    // Packed and unpacked values, timestamps only, and neither.
    let samples = &mut data.resource_profiles[1].scope_profiles[0].profiles[0].samples;
    samples[0].values = vec![1, 2, 3];
    samples[1].values.clear();
    samples[1].timestamps_unix_nano = vec![5, 6];
    samples[2].values.clear();
    samples[2].timestamps_unix_nano.clear();
    // A resource without scopes.
    data.resource_profiles.push(ResourceProfiles::default());
    let bytes = data.encode_to_vec();
    let goes = |r: &Resource| r.attributes.iter().any(|a| a.value == string("instance-1"));
    let (edited, dropped) = retain_resources(&bytes, |r, _, scopes| !goes(r) && scopes > 0);
    let Edited::Bytes(out) = edited else {
        panic!("two resources go");
    };
    let mut want = data.clone();
    let gone: Vec<_> = want.resource_profiles.drain(1..2).collect();
    want.resource_profiles.pop();
    assert_eq!(ProfilesData::decode(&out[..]).unwrap(), want);
    let profiles = || crate::batch::profiles(&gone);
    assert_eq!(dropped.profiles, profiles().count() as u64);
    assert_eq!(
        dropped.samples,
        profiles()
            .map(crate::batch::profile_sample_count)
            .sum::<u64>()
    );
    // Keeping all of them, the bytes stand.
    assert_eq!(
        retain_resources(&bytes, |_, _, _| true),
        (Edited::Unchanged, Dropped::default())
    );
}
