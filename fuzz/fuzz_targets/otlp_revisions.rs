//! Any bytes as a request of any proto revision, as the receiver reads them
//! with `on_invalid: repair`: detection, translation, repair. What comes
//! out valid is written in every revision and reads back valid, with the
//! same number of observations unless the revision said it lost some.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

use profcol_model::repair::repair;
use profcol_model::validate;
use profcol_model::ProfileBatch;
use profcol_otlp::revisions::{decode, encode_as, Revision};

fuzz_target!(|bytes: &[u8]| {
    let Ok(mut d) = decode(&Bytes::copy_from_slice(bytes)) else {
        return;
    };
    repair(&mut d.data);
    if validate(&d.data).is_err() {
        return;
    }
    let n = ProfileBatch::new(d.data.clone()).sample_count();
    for r in Revision::ALL {
        let mut buf = Vec::new();
        let lost = encode_as(&d.data, r, &mut buf).expect("a Vec takes any message");
        let again = decode(&Bytes::from(buf)).expect("what profcol writes reads back");
        assert!(again.findings.is_valid(), "{r}: {:?}", again.findings);
        if lost.is_empty() {
            assert_eq!(ProfileBatch::new(again.data).sample_count(), n, "{r}");
        }
    }
});
