//! A gzip body whose length is known (a gRPC message's prefix,
//! `Content-Length`) read whole, then inflated in one call by libdeflate
//! into a buffer of the size its trailer gives: about 0.6x the CPU of
//! zlib-rs inflating it as it streams in 8 KiB reads into a growing
//! buffer, and the compressed bytes are at hand to be forwarded as they
//! came. Anything libdeflate does not take whole (several members, a
//! trailer that does not tell the size, corrupt data, over the limit) is
//! read by the streaming decoder instead, which says what is wrong.

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncReadExt;

use profcol_model::compressed::{gunzip_into, gzip_trailer_size, Compressed, Encoding};
use profcol_model::memory::{MemoryBudget, Reservation, Wire};

use crate::body::{self, BodyError, BodyReader, RawReader};

/// The most deflate expands: 258 bytes from about 2 bits of a match.
const MAX_DEFLATE_RATIO: usize = 1032;

/// A gzip body of `wire` bytes read from `raw`, inflated: (plain, the
/// body as it came, the memory holding both). At most `limit` plain bytes.
pub(crate) async fn read(
    mut raw: RawReader,
    wire: usize,
    limit: u64,
    budget: &Arc<MemoryBudget>,
) -> Result<(Vec<u8>, Compressed, Reservation), BodyError> {
    let mut memory = body::admit(budget, wire, Wire::Compressed).await?;
    memory.try_grow_to(wire).map_err(body::over_budget)?;
    // Read into the room it has (read_to_end would double a full buffer
    // to look for the end); fewer bytes than said is for the decoder to
    // find corrupt.
    let mut gz = Vec::with_capacity(wire);
    while gz.len() < wire {
        let n = raw.read_buf(&mut gz).await.map_err(body::read_error)?;
        if n == 0 {
            break;
        }
    }
    // The trailer is the client's word: believed only as far as deflate
    // can expand (1032:1), so that a few bytes claiming the limit do not
    // take it from the budget; past that the stream shows what it holds.
    let plausible = gz.len().saturating_mul(MAX_DEFLATE_RATIO);
    let size = gzip_trailer_size(&gz).filter(|&n| n > 0 && n as u64 <= limit && n <= plausible);
    if let Some(size) = size {
        memory
            .try_grow_to(gz.len() + size)
            .map_err(body::over_budget)?;
        let mut plain = Vec::with_capacity(size);
        if gunzip_into(&gz, &mut plain) {
            let gz = as_came(gz.into(), plain.len());
            return Ok((plain, gz, memory));
        }
    }
    let gz = Bytes::from(gz);
    let streamed = body::decoders(
        Box::new(std::io::Cursor::new(gz.clone())),
        Some("gzip"),
        limit,
    )?;
    let (plain, mut memory) = BodyReader::with_memory(streamed, limit, memory)
        .finish()
        .await?;
    memory
        .try_grow_to(plain.capacity() + gz.len())
        .map_err(body::over_budget)?;
    let gz = as_came(gz, plain.len());
    Ok((plain, gz, memory))
}

fn as_came(bytes: Bytes, plain_len: usize) -> Compressed {
    Compressed {
        encoding: Encoding::Gzip,
        bytes,
        plain_len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::tests::gzip;

    async fn read_all(gz: &[u8], limit: u64) -> Result<Vec<u8>, BodyError> {
        let budget = MemoryBudget::new(64 << 20);
        let raw: RawReader = Box::new(std::io::Cursor::new(gz.to_vec()));
        let (plain, compressed, memory) = read(raw, gz.len(), limit, &budget).await?;
        assert_eq!(compressed.bytes, gz, "the compressed bytes as they came");
        assert_eq!(compressed.plain_len, plain.len());
        assert!(budget.used() >= plain.len() + gz.len(), "both held");
        drop(memory);
        Ok(plain)
    }

    #[tokio::test]
    async fn every_member_and_every_odd_stream_comes_out_whole() {
        let (a, b) = (b"first member ".repeat(300), b"second ".repeat(10));
        // Two members: the trailer gives the last one's size only, so
        // the streaming decoder reads them.
        let two = [gzip(&a), gzip(&b)].concat();
        assert_eq!(
            read_all(&two, 1 << 20).await.unwrap(),
            [&a[..], &b[..]].concat()
        );
        // Two members of one size: one call inflates the first, the room
        // is then too small for the second, and the stream reads both.
        let twice = [gzip(&a), gzip(&a)].concat();
        assert_eq!(
            read_all(&twice, 1 << 20).await.unwrap(),
            [&a[..], &a[..]].concat()
        );
        // Empty data.
        assert_eq!(read_all(&gzip(b""), 1 << 20).await.unwrap(), b"");
        // A trailer that lies about the size, under and over.
        for claim in [7u32, 1 << 19] {
            let mut lying = gzip(&a);
            let n = lying.len();
            lying[n - 4..].copy_from_slice(&claim.to_le_bytes());
            assert!(matches!(
                read_all(&lying, 1 << 20).await,
                Err(BodyError::Corrupt(_))
            ));
        }
        // A claim past what deflate can expand to is not reserved: in a
        // budget of 1 MiB, 16 MiB claimed by 21 bytes is found corrupt,
        // not refused for memory.
        let budget = MemoryBudget::new(1 << 20);
        let mut tiny = gzip(b"x");
        let n = tiny.len();
        tiny[n - 4..].copy_from_slice(&(1u32 << 24).to_le_bytes());
        let raw: RawReader = Box::new(std::io::Cursor::new(tiny));
        let refused = read(raw, n, 32 << 20, &budget).await.map(|_| ());
        assert!(matches!(refused, Err(BodyError::Corrupt(_))), "{refused:?}");
    }

    #[tokio::test]
    async fn corrupt_truncated_and_oversized_bodies_are_refused_as_when_streamed() {
        let data = b"profile bytes ".repeat(5000);
        let gz = gzip(&data);
        assert!(matches!(
            read_all(&gz[..gz.len() - 9], 1 << 20).await,
            Err(BodyError::Corrupt(_))
        ));
        let mut flipped = gz.clone();
        flipped[gz.len() / 2] ^= 0xff;
        assert!(matches!(
            read_all(&flipped, 1 << 20).await,
            Err(BodyError::Corrupt(_))
        ));
        assert!(matches!(
            read_all(b"not gzip", 1 << 20).await,
            Err(BodyError::Corrupt(_))
        ));
        let limit = data.len() as u64 - 1;
        assert_eq!(
            read_all(&gz, limit).await,
            Err(BodyError::TooLarge { limit })
        );
        assert_eq!(read_all(&gz, data.len() as u64).await.unwrap(), data);
    }
}
