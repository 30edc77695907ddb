//! An OTLP request as the receiver reads it: the memory estimate off the
//! wire, decode, validation; a valid batch re-encodes to what decodes to
//! the same data, and its heap is counted without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::footprint::{estimate_decoded, heap_bytes};
use profcol_model::proto::ProfilesData;
use profcol_model::{invalid_profiles, validate};

fuzz_target!(|bytes: &[u8]| {
    let _ = estimate_decoded(bytes);
    let Ok(data) = ProfilesData::decode(bytes) else {
        return;
    };
    let _ = heap_bytes(&data);
    let _ = invalid_profiles(&data);
    if validate(&data).is_ok() {
        let again = ProfilesData::decode(&data.encode_to_vec()[..]).expect("re-encoded decodes");
        assert_eq!(again, data);
    }
});
