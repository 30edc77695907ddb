//! Snappy request bodies, as the Collector's clients send them: over gRPC
//! (`grpc-encoding: snappy`) and as `x-snappy-framed` the framing format;
//! as `Content-Encoding: snappy` a raw block (confighttp today) or, from
//! older Collectors, the framing format, which starts with its stream
//! identifier and is told apart by it, as confighttp's server does.
//!
//! The framing format is read one chunk at a time (at most 64 KiB of data
//! each), so memory stays small whatever the body's size; a raw block is
//! one piece, read whole (at most what `limit` decoded bytes can take
//! compressed) and decoded once its header says it fits in `limit`.

use bytes::Bytes;
use futures::stream::{self, Stream};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::io::StreamReader;

/// A body's bytes as they arrive (the receivers' `body::RawReader`).
pub type RawReader = Box<dyn AsyncRead + Send + Unpin>;

/// The framing format's stream identifier chunk, its first 10 bytes.
const STREAM_IDENTIFIER: [u8; 10] = *b"\xff\x06\x00\x00sNaPpY";
/// The most data one chunk of the framing format holds.
const MAX_CHUNK_DATA: usize = 65_536;

/// Which snappy a body is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    /// `x-snappy-framed` and gRPC's `snappy`: the framing format.
    Framed,
    /// `Content-Encoding: snappy`: a raw block, or the framing format.
    Detect,
}

/// `raw` decoded; decoding errors are `InvalidData`.
pub fn decoder(raw: RawReader, format: Format, limit: u64) -> RawReader {
    Box::new(StreamReader::new(chunks(raw, format, limit)))
}

fn corrupt(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("snappy: {}", what.into()),
    )
}

enum State {
    Start(RawReader),
    Framed(RawReader),
    Done,
}

fn chunks(
    raw: RawReader,
    format: Format,
    limit: u64,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + Unpin {
    Box::pin(stream::try_unfold(
        State::Start(raw),
        move |state| async move {
            match state {
                State::Done => Ok(None),
                State::Start(mut r) => {
                    let mut head = Vec::with_capacity(STREAM_IDENTIFIER.len());
                    (&mut r)
                        .take(STREAM_IDENTIFIER.len() as u64)
                        .read_to_end(&mut head)
                        .await?;
                    if head == STREAM_IDENTIFIER {
                        return Ok(Some((Bytes::new(), State::Framed(r))));
                    }
                    // An empty body: a framed stream of nothing has no
                    // identifier either.
                    if head.is_empty() {
                        return Ok(None);
                    }
                    if format == Format::Framed {
                        return Err(corrupt("the stream does not start with its identifier"));
                    }
                    Ok(Some((block(head, r, limit).await?, State::Done)))
                }
                State::Framed(mut r) => match frame_chunk(&mut r).await? {
                    Some(data) => Ok(Some((data, State::Framed(r)))),
                    None => Ok(None),
                },
            }
        },
    ))
}

/// A raw block whose first bytes are `head`.
async fn block(mut buf: Vec<u8>, r: RawReader, limit: u64) -> std::io::Result<Bytes> {
    // The most a block of `limit` decoded bytes takes compressed
    // (snappy's `MaxEncodedLen`), and one byte more to tell.
    let cap = 32 + limit + limit / 6 + 1;
    r.take(cap.saturating_sub(buf.len() as u64))
        .read_to_end(&mut buf)
        .await?;
    let len = snap::raw::decompress_len(&buf).map_err(|e| corrupt(e.to_string()))?;
    if len as u64 > limit || buf.len() as u64 >= cap {
        // Past the limit: the body reader refuses it as too large.
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("snappy: the block decodes to {len} bytes"),
        ));
    }
    snap::raw::Decoder::new()
        .decompress_vec(&buf)
        .map(Bytes::from)
        .map_err(|e| corrupt(e.to_string()))
}

/// The data of the next chunk that has some (padding and repeated stream
/// identifiers are skipped), `None` at the end of the stream.
async fn frame_chunk(r: &mut RawReader) -> std::io::Result<Option<Bytes>> {
    loop {
        let mut header = [0u8; 4];
        match r.read(&mut header[..1]).await? {
            0 => return Ok(None),
            _ => r.read_exact(&mut header[1..]).await?,
        };
        let len = u32::from_le_bytes([header[1], header[2], header[3], 0]) as usize;
        match header[0] {
            // Compressed or uncompressed data: a masked CRC-32C first.
            kind @ (0x00 | 0x01) => {
                if len < 4 || len > 4 + snap::raw::max_compress_len(MAX_CHUNK_DATA) {
                    return Err(corrupt(format!("a data chunk of {len} bytes")));
                }
                let mut chunk = vec![0u8; len];
                r.read_exact(&mut chunk).await?;
                let crc = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                let data = if kind == 0x00 {
                    let n = snap::raw::decompress_len(&chunk[4..])
                        .map_err(|e| corrupt(e.to_string()))?;
                    if n > MAX_CHUNK_DATA {
                        return Err(corrupt(format!("a chunk of {n} bytes decoded")));
                    }
                    snap::raw::Decoder::new()
                        .decompress_vec(&chunk[4..])
                        .map_err(|e| corrupt(e.to_string()))?
                } else {
                    if len - 4 > MAX_CHUNK_DATA {
                        return Err(corrupt(format!("a chunk of {} bytes", len - 4)));
                    }
                    chunk.split_off(4)
                };
                if masked_crc(&data) != crc {
                    return Err(corrupt("checksum mismatch"));
                }
                return Ok(Some(Bytes::from(data)));
            }
            0xff => {
                let mut id = [0u8; 6];
                if len != id.len() {
                    return Err(corrupt("a stream identifier of the wrong size"));
                }
                r.read_exact(&mut id).await?;
                if id != STREAM_IDENTIFIER[4..] {
                    return Err(corrupt("a wrong stream identifier"));
                }
            }
            0x02..=0x7f => return Err(corrupt(format!("reserved chunk type {:#04x}", header[0]))),
            // Padding and the other skippable chunks, no larger than a
            // data chunk (as Go's and the `snap` crate's readers).
            _ => {
                if len > 4 + snap::raw::max_compress_len(MAX_CHUNK_DATA) {
                    return Err(corrupt(format!("a skippable chunk of {len} bytes")));
                }
                let skipped =
                    tokio::io::copy(&mut (&mut *r).take(len as u64), &mut tokio::io::sink())
                        .await?;
                if skipped < len as u64 {
                    return Err(corrupt("a truncated chunk"));
                }
            }
        }
    }
}

/// The framing format's checksum: CRC-32C, masked.
fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c::crc32c(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    async fn decode(body: Vec<u8>, format: Format, limit: u64) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(Box::new(std::io::Cursor::new(body)), format, limit)
            .read_to_end(&mut out)
            .await?;
        Ok(out)
    }

    fn framed(data: &[u8]) -> Vec<u8> {
        let mut w = snap::write::FrameEncoder::new(Vec::new());
        w.write_all(data).unwrap();
        w.into_inner().unwrap()
    }

    /// Data over several chunks, compressible and not.
    fn data() -> Vec<u8> {
        let mut d = b"profiles ".repeat(20_000);
        let mut x = 1u64;
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            d.push((x >> 56) as u8);
        }
        d
    }

    #[tokio::test]
    async fn reads_framed_and_block_bodies() {
        let data = data();
        let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        for (body, format) in [
            (framed(&data), Format::Framed),
            (framed(&data), Format::Detect),
            (block, Format::Detect),
        ] {
            assert_eq!(
                decode(body, format, 1 << 22).await.unwrap(),
                data,
                "{format:?}"
            );
        }
        // Empty, and a block smaller than the stream identifier.
        assert_eq!(decode(framed(b""), Format::Framed, 10).await.unwrap(), b"");
        let tiny = snap::raw::Encoder::new().compress_vec(b"ab").unwrap();
        assert_eq!(decode(tiny, Format::Detect, 10).await.unwrap(), b"ab");
    }

    #[tokio::test]
    async fn refuses_corrupt_and_oversized_bodies() {
        let data = data();
        let mut bad = framed(&data);
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        assert_eq!(
            decode(bad, Format::Framed, 1 << 22)
                .await
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::InvalidData
        );
        let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decode(block.clone(), Format::Framed, 1 << 22)
                .await
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::InvalidData
        );
        assert_eq!(
            decode(block, Format::Detect, 1000)
                .await
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::FileTooLarge
        );
        let garbage = b"definitely not snappy at all".to_vec();
        assert!(decode(garbage, Format::Detect, 1 << 20).await.is_err());
    }
}
