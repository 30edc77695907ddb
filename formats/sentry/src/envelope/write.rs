//! Writing envelopes: profcol's chunks, or a received envelope with some
//! of its items left out (byte for byte otherwise).

use std::borrow::Cow;
use std::time::SystemTime;

use super::{Envelope, Item};
use crate::v2::ChunkResult;

impl Envelope<'_> {
    /// The envelope with only the items `keep` selects, each byte for byte
    /// as it came, under `header_line` (the original: `raw_header`).
    pub fn write_selected(
        &self,
        header_line: &[u8],
        mut keep: impl FnMut(&Item<'_>) -> bool,
    ) -> Vec<u8> {
        let kept: Vec<&Item<'_>> = self.items.iter().filter(|i| keep(i)).collect();
        let size = header_line.len() + 1 + kept.iter().map(|i| i.raw.len() + 1).sum::<usize>();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(header_line);
        out.push(b'\n');
        for item in kept {
            out.extend_from_slice(item.raw);
            out.push(b'\n');
        }
        out
    }
}

/// Writes the chunks that passed Relay's rules as one envelope: a header with
/// `sent_at` (and `dsn`), then per chunk `{"type":"profile_chunk",
/// "platform":...,"length":N}` and the payload, each line ending in one newline.
pub fn write_envelope<'c>(
    chunks: impl IntoIterator<Item = &'c ChunkResult>,
    dsn: Option<&str>,
    sent_at: SystemTime,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Header<'x> {
        sent_at: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        dsn: Option<&'x str>,
    }
    #[derive(serde::Serialize)]
    struct ItemOut<'x> {
        #[serde(rename = "type")]
        ty: &'x str,
        platform: Cow<'x, str>,
        length: usize,
    }
    let chunks: Vec<&ChunkResult> = chunks.into_iter().filter(|c| c.chunk.is_some()).collect();
    let size: usize = chunks.iter().map(|c| c.payload.len() + 80).sum();
    let mut out = Vec::with_capacity(size + 128);
    let header = Header {
        sent_at: humantime::format_rfc3339_micros(sent_at).to_string(),
        dsn,
    };
    // Serializing these plain structs into a Vec cannot fail.
    serde_json::to_writer(&mut out, &header).expect("envelope header serializes");
    out.push(b'\n');
    for c in chunks {
        let Some(chunk) = &c.chunk else { continue };
        let item = ItemOut {
            ty: "profile_chunk",
            platform: Cow::Borrowed(&chunk.platform),
            length: c.payload.len(),
        };
        serde_json::to_writer(&mut out, &item).expect("item header serializes");
        out.push(b'\n');
        out.extend_from_slice(&c.payload);
        out.push(b'\n');
    }
    out
}
