//! Any valid OTLP request to pprof and back: no panic, and what comes back
//! is valid.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::validate;
use profcol_pprof::{pprof_to_otlp, to_pprof, ToPprofOptions};

fuzz_target!(|bytes: &[u8]| {
    let Ok(data) = ProfilesData::decode(bytes) else {
        return;
    };
    if validate(&data).is_err() {
        return;
    }
    let Ok(files) = to_pprof(&data, &ToPprofOptions::default()) else {
        return;
    };
    for (_, p) in files {
        if let Ok(back) = pprof_to_otlp(&p) {
            validate(&back).expect("pprof written by profcol imports as valid OTLP");
        }
    }
});
