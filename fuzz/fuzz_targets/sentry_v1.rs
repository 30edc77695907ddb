//! A legacy `profile` (v1) with its `transaction`: the input is split at
//! its first NUL into the two payloads. No panic; what converts is valid.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_model::validate;
use profcol_sentry::{profile_v1_to_otlp, ReceiveOptions};

fuzz_target!(|bytes: &[u8]| {
    let (profile, transaction) = match bytes.iter().position(|&b| b == 0) {
        Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
        None => (bytes, None),
    };
    let header = serde_json::Value::Object(Default::default());
    if let Ok(c) = profile_v1_to_otlp(
        profile,
        None,
        transaction,
        &header,
        &ReceiveOptions::default(),
    ) {
        validate(&c.data).expect("a converted v1 profile is valid OTLP");
    }
});
