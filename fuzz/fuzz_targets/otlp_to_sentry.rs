//! Any valid OTLP request to Sentry chunks (the probe's runaway lived here)
//! and back: bounded work, no panic, every OTLP sample accounted for, and
//! every chunk sent converts back to valid OTLP.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::{profiles, validate};
use profcol_sentry::{chunk_to_otlp, otlp_to_chunks, ExportOptions, ReceiveOptions};

fuzz_target!(|bytes: &[u8]| {
    let Ok(data) = ProfilesData::decode(bytes) else {
        return;
    };
    if validate(&data).is_err() {
        return;
    }
    let opts = ExportOptions {
        max_samples_per_chunk: 1_000,
        ..ExportOptions::default()
    };
    let results = otlp_to_chunks(&data, &opts);
    let otlp: u64 = profiles(&data.resource_profiles)
        .map(|p| p.samples.len() as u64)
        .sum();
    let accounted: u64 = results
        .iter()
        .map(|r| r.otlp_samples + r.dropped.iter().map(|d| d.otlp_samples).sum::<u64>())
        .sum();
    assert_eq!(
        accounted, otlp,
        "every OTLP sample is sent or dropped with a reason"
    );
    for r in results.iter().filter(|r| r.chunk.is_some()) {
        let back = chunk_to_otlp(&r.payload, None, &ReceiveOptions::default())
            .expect("a chunk profcol sends converts back");
        validate(&back.data).expect("and is valid OTLP");
    }
});
