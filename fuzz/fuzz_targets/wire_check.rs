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
use profcol_model::wire_check::{check, decode_clean, Clean};
use profcol_model::ProfileBatch;
use profcol_otlp::revisions::{self as otlp_revisions, Revision};

fuzz_target!(|bytes: &[u8]| {
    if let Some((batch, clean)) = decode_clean(&Bytes::copy_from_slice(bytes)) {
        let data = as_decoded(bytes, "bytes decoded clean");
        assert_eq!(batch.data(), &data, "read as prost reads them");
        same_counts(&clean, &batch);
    }
    let Some(clean) = check(bytes) else {
        return;
    };
    let data = as_decoded(bytes, "clean bytes");
    assert!(
        clean.heap >= heap_bytes(&data),
        "the reservation covers the decode"
    );
    same_counts(&clean, &ProfileBatch::new(data.clone()));
    resources_edit_as_decoded(bytes, data);
});

/// What the decoding path makes of bytes a fast path found clean: they
/// decode, validate and are read as the current revision.
fn as_decoded(bytes: &[u8], what: &str) -> ProfilesData {
    let data = ProfilesData::decode(bytes).unwrap_or_else(|e| panic!("{what} decode: {e}"));
    assert!(findings(&data).is_valid(), "{what} validate");
    let read =
        otlp_revisions::decode(&Bytes::copy_from_slice(bytes)).expect("a revision reads them");
    assert_eq!(read.revision, Revision::CURRENT);
    data
}

fn same_counts(clean: &Clean, batch: &ProfileBatch) {
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
