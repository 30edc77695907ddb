//! A JFR recording (and a LabelsSnapshot in the input's last bytes) to
//! OTLP profiles: no panic, no allocation by a count the bytes cannot
//! hold, and what converts is a valid batch.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_jfr::{Converter, LabelsSnapshot, Options};
use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{ProfilesData, ResourceProfiles, ScopeProfiles};

fuzz_target!(|bytes: &[u8]| {
    // `JFR || labels || len(labels) as u8`.
    let (jfr, labels) = match bytes.split_last() {
        Some((&n, rest)) if usize::from(n) <= rest.len() => {
            rest.split_at(rest.len() - usize::from(n))
        }
        _ => (bytes, &[][..]),
    };
    let snapshot = LabelsSnapshot::decode_bytes(labels).ok();
    let mut dict = DictionaryBuilder::new();
    let opts = Options {
        sample_rate: 100,
        time_unix_nano: 1,
        duration_nano: 1,
    };
    let mut c = Converter::new(&mut dict, snapshot.as_ref(), opts);
    if c.add(jfr).is_err() {
        return;
    }
    let profiles = c.finish(&[]);
    let data = ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles,
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dict.finish()),
    };
    profcol_model::validate(&data).expect("a converted JFR is valid OTLP");
});
