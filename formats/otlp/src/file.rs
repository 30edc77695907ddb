//! Reading back what a `file` exporter wrote, profcol's or the Collector's:
//! JSON lines, length-prefixed records (protobuf, or zstd frames of
//! protobuf or JSON), and a whole file compressed as one zstd stream (the
//! Collector's `exporter.file.nativeCompression` gate, or `zstd` run on a
//! file). Decompression stops at [`MAX_DECOMPRESSED`]: a small file must
//! not claim the machine's memory.

use std::io::Read;

use crate::json as otlp_json;
use profcol_model::proto::ProfilesData;

/// The most a file, or one record of it, may inflate to.
pub const MAX_DECOMPRESSED: u64 = 1 << 30;

/// The first bytes of every zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Every request of a file a `file` exporter wrote.
pub fn read_requests(bytes: &[u8]) -> Result<Vec<ProfilesData>, String> {
    if bytes.starts_with(&ZSTD_MAGIC) {
        let plain = inflate(bytes)
            .map_err(|e| format!("a zstd-compressed file that does not decompress: {e}"))?;
        return read_plain(&plain);
    }
    read_plain(bytes)
}

fn read_plain(bytes: &[u8]) -> Result<Vec<ProfilesData>, String> {
    if first_non_blank(bytes) == Some(b'{') {
        return bytes
            .split(|b| *b == b'\n')
            .enumerate()
            .filter(|(_, l)| l.iter().any(|b| !b.is_ascii_whitespace()))
            .map(|(i, l)| otlp_json::decode(l).map_err(|e| format!("line {}: {e}", i + 1)))
            .collect();
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let offset = bytes.len() - rest.len();
        let (len, body) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("truncated length prefix at byte {offset}"))?;
        let len = u32::from_be_bytes(*len) as usize;
        if body.len() < len {
            return Err(format!(
                "record at byte {offset} declares {len} bytes but only {} remain",
                body.len()
            ));
        }
        let data = record(&body[..len]).map_err(|e| format!("record at byte {offset}: {e}"))?;
        out.push(data);
        rest = &body[len..];
    }
    Ok(out)
}

/// One record: protobuf, or a zstd frame of protobuf or JSON (a protobuf
/// `ProfilesData` never starts with the zstd magic: its first byte would
/// be field 5, which it does not have).
fn record(body: &[u8]) -> Result<ProfilesData, String> {
    if !body.starts_with(&ZSTD_MAGIC) {
        return profcol_model::codec::decode(body).map_err(|e| e.to_string());
    }
    let plain = inflate(body).map_err(|e| format!("zstd: {e}"))?;
    if first_non_blank(&plain) == Some(b'{') {
        otlp_json::decode(&plain).map_err(|e| e.to_string())
    } else {
        profcol_model::codec::decode(&plain).map_err(|e| e.to_string())
    }
}

/// Every zstd frame of `bytes`, up to [`MAX_DECOMPRESSED`].
fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    inflate_at_most(bytes, MAX_DECOMPRESSED)
}

fn inflate_at_most(bytes: &[u8], limit: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(bytes)
        .map_err(|e| e.to_string())?
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() as u64 > limit {
        return Err(format!("inflates past {limit} bytes"));
    }
    Ok(out)
}

fn first_non_blank(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zstd_bomb_stops_at_the_limit() {
        let bomb = zstd::encode_all(&vec![0u8; 4 << 20][..], 3).unwrap();
        assert!(bomb.len() < 4096, "{}", bomb.len());
        let err = inflate_at_most(&bomb, 1 << 20).unwrap_err();
        assert_eq!(err, "inflates past 1048576 bytes");
        assert_eq!(inflate_at_most(&bomb, 4 << 20).unwrap().len(), 4 << 20);
    }
}
