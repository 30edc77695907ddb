//! The reader of `file` exporter output (`profcol test` inputs): any bytes
//! give requests or an error, never a panic, and a zstd bomb stops at the
//! decompression limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = profcol_otlp::file::read_requests(bytes);
});
