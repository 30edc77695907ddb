//! Reading back what a `file` exporter wrote, profcol's or the Collector's:
//! JSON lines, length-prefixed records (protobuf, or zstd frames of
//! protobuf or JSON), and a whole file compressed as one zstd stream (the
//! Collector's `exporter.file.nativeCompression` gate, or `zstd` run on a
//! file).

use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_otlp::json as otlp_json;

/// The first bytes of every zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Every request of a file a `file` exporter wrote.
pub fn read_requests(bytes: &[u8]) -> Result<Vec<ProfilesData>, String> {
    if bytes.starts_with(&ZSTD_MAGIC) {
        let plain = zstd::stream::decode_all(bytes)
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
        return ProfilesData::decode(body).map_err(|e| e.to_string());
    }
    let plain = zstd::stream::decode_all(body).map_err(|e| format!("zstd: {e}"))?;
    if first_non_blank(&plain) == Some(b'{') {
        otlp_json::decode(&plain).map_err(|e| e.to_string())
    } else {
        ProfilesData::decode(plain.as_slice()).map_err(|e| e.to_string())
    }
}

fn first_non_blank(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}
