//! The wire check against the decoding path it stands in for: bytes it
//! finds clean decode, validate, are read as the current revision, and
//! hold the samples and profiles it counted, in no more heap than it
//! measured (the memory reserved for them). Their resources, edited in the
//! bytes (what `resource` and `k8sattributes` do to a batch held as
//! received), decode as they do edited once decoded.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::codec::{edit_resources, Edited};
use profcol_model::findings;
use profcol_model::footprint::heap_bytes;
use profcol_model::proto::{any_value::Value, AnyValue, KeyValue, ProfilesData, Resource};
use profcol_model::wire_check::{check, decode_clean};
use profcol_model::ProfileBatch;
use profcol_otlp::revisions::{self as otlp_revisions, Revision};

fuzz_target!(|bytes: &[u8]| {
    one_pass_decode_agrees(bytes);
    let Some(clean) = check(bytes) else {
        return;
    };
    let data = ProfilesData::decode(bytes).expect("clean bytes decode");
    assert!(findings(&data).is_valid(), "clean bytes validate");
    let read =
        otlp_revisions::decode(&Bytes::copy_from_slice(bytes)).expect("a revision reads them");
    assert_eq!(read.revision, Revision::CURRENT);
    assert!(
        clean.heap >= heap_bytes(&data),
        "the reservation covers the decode"
    );
    let batch = ProfileBatch::new(data.clone());
    assert_eq!(clean.samples, batch.sample_count());
    assert_eq!(clean.profiles, batch.profile_count());
    resources_edit_as_decoded(bytes, data);
});

fn one_pass_decode_agrees(bytes: &[u8]) {
    let Some((batch, clean)) = decode_clean(&Bytes::copy_from_slice(bytes)) else {
        return;
    };
    let data = ProfilesData::decode(bytes).expect("bytes decoded clean decode");
    assert_eq!(batch.data(), &data, "read as prost reads them");
    assert!(findings(&data).is_valid(), "bytes decoded clean validate");
    let read =
        otlp_revisions::decode(&Bytes::copy_from_slice(bytes)).expect("a revision reads them");
    assert_eq!(read.revision, Revision::CURRENT);
    assert_eq!(clean.samples, batch.sample_count());
    assert_eq!(clean.profiles, batch.profile_count());
}

fn resources_edit_as_decoded(bytes: &[u8], mut data: ProfilesData) {
    let upsert = |r: &mut Resource, url: &mut String| {
        url.push('/');
        r.attributes.retain(|a| a.key != "fuzz");
        r.attributes.push(KeyValue {
            key: "fuzz".into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue("x".into())),
            }),
            key_strindex: 0,
        });
    };
    let edited = match edit_resources(bytes, upsert) {
        Edited::Decode => return,
        Edited::Unchanged => bytes.to_vec(),
        Edited::Bytes(b) => b,
    };
    let mut ours = ProfilesData::decode(&edited[..]).expect("edited bytes decode");
    for rp in &mut data.resource_profiles {
        upsert(
            rp.resource.get_or_insert_with(Default::default),
            &mut rp.schema_url,
        );
    }
    for rp in &mut ours.resource_profiles {
        rp.resource.get_or_insert_with(Default::default);
    }
    assert_eq!(ours, data);
}
