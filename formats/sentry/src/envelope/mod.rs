//! Sentry envelope framing, as Relay parses it (`relay-server/src/envelope.rs`):
//! a JSON header line, then items: a JSON item header line and a payload of
//! `length` bytes, or up to the next newline without `length`. Whitespace
//! (blank lines) before an item header is skipped, the final newline may be
//! missing. Parsing borrows payloads from the input.

mod write;

use serde::Deserialize;

use super::de::CowStr;

pub use write::write_envelope;

#[derive(Debug)]
pub struct Envelope<'a> {
    /// The envelope header (`{}` is fine; SDKs add `event_id`, `sent_at`,
    /// `sdk`, `trace`, `dsn`).
    pub header: serde_json::Value,
    pub items: Vec<Item<'a>>,
    /// The header line as it came, without its newline.
    pub raw_header: &'a [u8],
}

#[derive(Debug)]
pub struct Item<'a> {
    pub header: ItemHeader<'a>,
    pub payload: &'a [u8],
    /// The item as it came: its header line, newline and payload (without
    /// the newline after it), to forward it unchanged.
    pub raw: &'a [u8],
}

#[derive(Debug, Deserialize)]
pub struct ItemHeader<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: CowStr<'a>,
    #[serde(default)]
    pub length: Option<u64>,
    #[serde(borrow, default)]
    pub platform: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub content_type: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub filename: Option<CowStr<'a>>,
    /// Bytes of JSON metadata before a Perfetto chunk's binary trace.
    #[serde(default)]
    pub meta_length: Option<u64>,
}

impl Item<'_> {
    pub fn item_type(&self) -> &str {
        &self.header.ty
    }

    pub fn platform(&self) -> Option<&str> {
        self.header.platform.as_deref()
    }
}

impl Envelope<'_> {
    /// Number of items of each type, in order of first appearance.
    pub fn count_by_type(&self) -> Vec<(&str, usize)> {
        let mut out: Vec<(&str, usize)> = Vec::new();
        for item in &self.items {
            match out.iter_mut().find(|(t, _)| *t == item.item_type()) {
                Some((_, n)) => *n += 1,
                None => out.push((item.item_type(), 1)),
            }
        }
        out
    }
}

/// A malformed envelope; the `Display` text is meant for a 400 `detail`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("empty envelope: missing the header line")]
    MissingHeader,
    #[error("invalid envelope header: {0}")]
    InvalidHeader(String),
    #[error("{what} at byte {offset} is not followed by a newline")]
    MissingNewline { what: &'static str, offset: usize },
    #[error("invalid header of item {index}: {message}")]
    InvalidItemHeader { index: usize, message: String },
    #[error("item {index} declares a payload of {length} bytes but only {available} remain")]
    UnexpectedEof {
        index: usize,
        length: u64,
        available: usize,
    },
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Byte just after the single JSON value at the start of `bytes`.
fn json_value_end<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
) -> Option<Result<(T, usize), serde_json::Error>> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
    match stream.next()? {
        Ok(v) => Some(Ok((v, stream.byte_offset()))),
        Err(e) => Some(Err(e)),
    }
}

/// Parses an envelope, borrowing item payloads from `bytes`.
pub fn parse(bytes: &[u8]) -> Result<Envelope<'_>, EnvelopeError> {
    let (header, mut pos) = match json_value_end::<serde_json::Value>(bytes) {
        None => return Err(EnvelopeError::MissingHeader),
        Some(Err(e)) => return Err(EnvelopeError::InvalidHeader(e.to_string())),
        Some(Ok(v)) => v,
    };
    if !header.is_object() {
        return Err(EnvelopeError::InvalidHeader(
            "expected a JSON object".into(),
        ));
    }
    let raw_header = &bytes[..pos];
    pos = terminated(bytes, pos, "envelope header")?;

    let mut items = Vec::new();
    loop {
        while pos < bytes.len() && is_ws(bytes[pos]) {
            pos += 1;
        }
        if pos >= bytes.len() {
            break;
        }
        let index = items.len();
        let rest = &bytes[pos..];
        let (header, len) = match json_value_end::<ItemHeader>(rest) {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                return Err(EnvelopeError::InvalidItemHeader {
                    index,
                    message: e.to_string(),
                })
            }
            None => break,
        };
        let header_end = pos + len;
        let start = terminated(bytes, header_end, "item header")?;
        let end = match header.length {
            Some(length) => {
                let available = bytes.len() - start;
                let end = usize::try_from(length)
                    .ok()
                    .filter(|&l| l <= available)
                    .map(|l| start + l)
                    .ok_or(EnvelopeError::UnexpectedEof {
                        index,
                        length,
                        available,
                    })?;
                terminated(bytes, end, "item payload")?;
                end
            }
            None => bytes[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| start + i),
        };
        items.push(Item {
            header,
            payload: &bytes[start..end],
            raw: &bytes[pos..end],
        });
        pos = (end + 1).min(bytes.len());
    }
    Ok(Envelope {
        header,
        items,
        raw_header,
    })
}

/// Position after the newline ending a line at `end` (or `end` at EOF).
fn terminated(bytes: &[u8], end: usize, what: &'static str) -> Result<usize, EnvelopeError> {
    match bytes.get(end) {
        None => Ok(end),
        Some(b'\n') => Ok(end + 1),
        Some(_) => Err(EnvelopeError::MissingNewline { what, offset: end }),
    }
}
