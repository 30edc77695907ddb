//! An OTLP request as the receiver reads it: the memory estimate off the
//! wire, decode, validation; a valid batch re-encodes to what decodes to
//! the same data, and its heap is counted without a panic. profcol's own
//! codec (`profcol_model::codec`) against prost, its oracle: the same
//! message or the same error, and prost's bytes when encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::codec;
use profcol_model::footprint::{estimate_decoded, heap_bytes};
use profcol_model::proto::ProfilesData;
use profcol_model::{invalid_profiles, validate};

fuzz_target!(|bytes: &[u8]| {
    let _ = estimate_decoded(bytes);
    let ours = codec::decode(bytes);
    let data = match (ours, ProfilesData::decode(bytes)) {
        (Ok(ours), Ok(theirs)) => {
            assert_eq!(ours, theirs);
            theirs
        }
        (Err(ours), Err(theirs)) => {
            assert_eq!(ours.to_string(), theirs.to_string());
            return;
        }
        // The messages the codec hands to prost start its nesting limit
        // afresh (see `codec::decode`'s module).
        (Ok(_), Err(theirs)) if theirs.to_string().contains("recursion limit") => return,
        (ours, theirs) => panic!("codec {ours:?}, prost {theirs:?}"),
    };
    let encoded = data.encode_to_vec();
    assert_eq!(codec::encode(&data), encoded);
    assert_eq!(codec::encoded_len(&data), encoded.len());
    let _ = heap_bytes(&data);
    let _ = invalid_profiles(&data);
    if validate(&data).is_ok() {
        let again = ProfilesData::decode(&encoded[..]).expect("re-encoded decodes");
        assert_eq!(again, data);
    }
});
