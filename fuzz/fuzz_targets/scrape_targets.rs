//! A target file of the `pprof` receiver (Prometheus' `file_sd` format,
//! YAML or JSON): any bytes give targets or an error, never a panic, and
//! what parses is within the limits and makes URLs that parse back.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_pipeline::config::scrape_targets::{parse_file, MAX_TARGETS_PER_FILE};

fuzz_target!(|bytes: &[u8]| {
    let Ok(targets) = parse_file(bytes) else {
        return;
    };
    assert!(targets.len() <= MAX_TARGETS_PER_FILE);
    for t in targets {
        assert!(t.labels.keys().all(|k| !k.starts_with("__")));
        let url = t.url("/debug/pprof", "heap");
        let again = profcol_pipeline::config::scrape_targets::Target::parse(
            url.trim_end_matches("/heap"),
            &t.labels,
        )
        .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(again.instance(), t.instance(), "{url}");
    }
});
