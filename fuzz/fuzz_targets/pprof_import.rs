//! A pprof file (gzip'd or not) to OTLP: no panic, and what imports is a
//! valid batch that writes back out as pprof.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_model::validate;
use profcol_pprof::{decode_pprof_limited, pprof_to_otlp, to_pprof, ToPprofOptions};

fuzz_target!(|bytes: &[u8]| {
    let Ok(p) = decode_pprof_limited(bytes, 16 << 20) else {
        return;
    };
    let Ok(data) = pprof_to_otlp(&p) else {
        return;
    };
    validate(&data).expect("an imported pprof is valid OTLP");
    let _ = to_pprof(&data, &ToPprofOptions::default());
});
