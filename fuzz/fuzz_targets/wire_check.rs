//! The wire check against the decoding path it stands in for: bytes it
//! finds clean decode, validate, are read as the current revision, and
//! hold the samples and profiles it counted, in no more heap than it
//! measured (the memory reserved for them).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::findings;
use profcol_model::footprint::heap_bytes;
use profcol_model::proto::ProfilesData;
use profcol_model::wire_check::check;
use profcol_model::ProfileBatch;
use profcol_otlp::revisions::{self as otlp_revisions, Revision};

fuzz_target!(|bytes: &[u8]| {
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
    let batch = ProfileBatch::new(data);
    assert_eq!(clean.samples, batch.sample_count());
    assert_eq!(clean.profiles, batch.profile_count());
});
