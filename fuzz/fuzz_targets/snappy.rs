//! Any bytes as a snappy body (`profcol_model::snappy`, the receivers'
//! reader of `snappy`, `x-snappy-framed` and gRPC's snappy), the first
//! byte choosing how it is read: it never panics, never yields more than
//! its limit, and what it yields is what the `snap` crate decodes from the
//! same bytes (the framing format, or one raw block).
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use tokio::io::AsyncReadExt;

use profcol_model::snappy::{decoder, Format};

const LIMIT: u64 = 1 << 20;

fuzz_target!(|input: &[u8]| {
    let Some((&how, body)) = input.split_first() else {
        return;
    };
    let format = if how & 1 == 0 {
        Format::Framed
    } else {
        Format::Detect
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut out = Vec::new();
    let read = rt.block_on(async {
        decoder(Box::new(std::io::Cursor::new(body.to_vec())), format, LIMIT)
            .take(LIMIT + 1)
            .read_to_end(&mut out)
            .await
    });
    let Ok(_) = read else { return };
    assert!(out.len() as u64 <= LIMIT + 1);
    if body.is_empty() {
        assert!(out.is_empty());
        return;
    }
    let framed = body.starts_with(b"\xff\x06\x00\x00sNaPpY");
    let expected = if framed {
        let mut e = Vec::new();
        snap::read::FrameDecoder::new(body)
            .take(LIMIT + 1)
            .read_to_end(&mut e)
            .map(|_| e)
    } else {
        assert_eq!(format, Format::Detect, "a framed read needs the identifier");
        snap::raw::Decoder::new()
            .decompress_vec(body)
            .map_err(std::io::Error::other)
    };
    let expected = expected.expect("what profcol decodes, snap decodes");
    assert_eq!(out, expected, "profcol and snap agree");
});
