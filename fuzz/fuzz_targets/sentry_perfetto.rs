//! A Perfetto trace, as the binary half of a Perfetto `profile_chunk`, to
//! OTLP: no panic, Relay's bounds hold (no allocation by a claim), and what
//! converts is a valid batch whose samples are all accounted for.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_model::validate;
use profcol_sentry::{perfetto_chunk_to_otlp, ReceiveOptions};

const META: &[u8] = br#"{"profiler_id":"4d229f1d3807421ba62a5f8bc295d836","chunk_id":"0432a0a4c25f4697bf9f0a2fcbe6a814","platform":"android","version":"2","release":"app@1"}"#;

fuzz_target!(|trace: &[u8]| {
    let mut payload = META.to_vec();
    payload.extend_from_slice(trace);
    let converted = perfetto_chunk_to_otlp(
        &payload,
        Some(META.len() as u64),
        Some("android"),
        &serde_json::Value::Null,
        &ReceiveOptions::default(),
    );
    if let Ok(c) = converted {
        validate(&c.data).expect("a converted chunk is valid OTLP");
        let timestamps: u64 = profcol_model::profiles(&c.data.resource_profiles)
            .flat_map(|p| &p.samples)
            .map(|s| s.timestamps_unix_nano.len() as u64)
            .sum();
        assert_eq!(timestamps, c.sentry_samples);
    }
});
