//! Any bytes as a debug file for the `symbolizer`: refused or parsed,
//! never a panic, a hang or an allocation past the size limit (compressed
//! sections claiming huge sizes, forged DWARF).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    // Removed after each input: libFuzzer exits without running destructors.
    let Ok(dir) = tempfile::Builder::new().prefix("profcol-fuzz-sym-").tempdir() else {
        return;
    };
    let addrs: Vec<u64> = bytes
        .chunks(8)
        .take(16)
        .map(|c| c.iter().fold(0u64, |a, b| a << 8 | u64::from(*b)))
        .collect();
    profcol_processors::symbolizer::resolve_file_bytes(dir.path(), bytes, &addrs);
});
