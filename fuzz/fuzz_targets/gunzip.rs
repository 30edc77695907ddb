//! Any bytes as a gzip body inflated in one call (`gunzip_into`, the
//! receivers' path for a gzip body of known length): nothing left in the
//! buffer when it refuses, and what it inflates is what zlib-rs inflates
//! from the same bytes. libdeflate's C is built without the sanitizers,
//! so the comparison is the check, not coverage inside it.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;

use profcol_model::compressed::{gunzip_into, gzip_trailer_size};

fuzz_target!(|gz: &[u8]| {
    let room = gzip_trailer_size(gz).unwrap_or(0).min(1 << 20);
    let mut out = Vec::with_capacity(room);
    if !gunzip_into(gz, &mut out) {
        assert!(out.is_empty(), "a refused stream leaves nothing behind");
        return;
    }
    assert!(out.len() <= room);
    let mut expected = Vec::new();
    let streamed = flate2::read::MultiGzDecoder::new(gz)
        .take(room as u64 + 1)
        .read_to_end(&mut expected);
    if streamed.is_ok() {
        assert_eq!(out, expected, "libdeflate and zlib-rs agree");
    }
});
