//! Reading a request body, shared by every HTTP receiver: decompressed while
//! streaming, stopped at the limit so a compression bomb costs at most
//! `limit` bytes of memory, and readable in two steps so that a receiver can
//! decide on the first line (a Sentry envelope's header, which may carry the
//! only credential) before it reads the rest.

use std::sync::Arc;
use std::time::Duration;

use async_compression::tokio::bufread::{
    BrotliDecoder, GzipDecoder, Lz4Decoder, ZlibDecoder, ZstdDecoder,
};
use axum::body::Body;
use futures::TryStreamExt;
use tokio::io::{AsyncReadExt, BufReader};
use tokio_util::io::StreamReader;

use profcol_model::memory::{Exhausted, MemoryBudget, Reservation, Wire};
use profcol_model::snappy;

#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Over the limit, compressed or not: 413.
    TooLarge { limit: u64 },
    /// An encoding we do not know: 415.
    UnsupportedEncoding(String),
    /// Truncated or corrupt compressed data, or a broken connection: 400.
    Corrupt(String),
    /// The client stopped sending (or sent too slowly): 408.
    TimedOut(String),
    /// The collector's memory budget cannot hold more: retry later.
    MemoryLimit,
    /// The collector's whole memory budget could never hold the body: 413.
    OverBudget { wanted: usize, limit: usize },
}

/// An HTTP body as bytes as they arrive.
pub type RawReader = profcol_model::snappy::RawReader;

/// The body's bytes as they arrive, before any decoding.
pub fn raw(body: Body) -> RawReader {
    Box::new(StreamReader::new(
        body.into_data_stream().map_err(std::io::Error::other),
    ))
}

/// A body being read: decompressed (every encoding listed, undone in
/// reverse order of application), limited, and charged to the memory
/// budget as it grows.
pub struct BodyReader {
    reader: tokio::io::Take<RawReader>,
    limit: u64,
    read: Vec<u8>,
    memory: Reservation,
}

impl BodyReader {
    /// Reads `body` with its `Content-Encoding`.
    pub fn new(
        body: Body,
        content_encoding: Option<&str>,
        limit: u64,
        budget: &Arc<MemoryBudget>,
    ) -> Result<Self, BodyError> {
        Self::from_reader(raw(body), content_encoding, limit, budget)
    }

    /// Reads what `raw` yields, encoded with `encodings` (comma-separated,
    /// as in `Content-Encoding` or `grpc-encoding`).
    pub fn from_reader(
        raw: RawReader,
        encodings: Option<&str>,
        limit: u64,
        budget: &Arc<MemoryBudget>,
    ) -> Result<Self, BodyError> {
        let reader = decoders(raw, encodings, limit)?;
        let memory = budget.try_admit(0).map_err(|_| BodyError::MemoryLimit)?;
        Ok(Self::with_memory(reader, limit, memory))
    }

    /// As [`BodyReader::from_reader`] for a body of `wire` bytes on the
    /// wire when that is known (`Content-Length`, a gRPC message's length):
    /// what it is expected to need is reserved before a byte of it is
    /// read, waiting its turn for room ([`MemoryBudget::admit`]), so that
    /// a request the budget cannot hold is refused before any work.
    pub async fn admitted(
        raw: RawReader,
        encodings: Option<&str>,
        limit: u64,
        budget: &Arc<MemoryBudget>,
        wire: Option<usize>,
    ) -> Result<Self, BodyError> {
        let reader = decoders(raw, encodings, limit)?;
        let plain = encodings
            .unwrap_or("")
            .split(',')
            .all(|e| matches!(e.trim(), "" | "identity"));
        let how = if plain { Wire::Plain } else { Wire::Compressed };
        let memory = match wire {
            Some(n) if plain && n as u64 > limit => return Err(BodyError::TooLarge { limit }),
            Some(n) => admit(budget, n, how).await?,
            None => budget.admit(0, PATIENCE).await.map_err(over_budget)?,
        };
        Ok(Self::with_memory(reader, limit, memory))
    }

    pub(crate) fn with_memory(reader: RawReader, limit: u64, memory: Reservation) -> Self {
        Self {
            reader: reader.take(limit + 1),
            limit,
            read: Vec::new(),
            memory,
        }
    }
}

/// How long a request waits in line for room in the memory budget before
/// its client is told to retry (first come first served, at most
/// [`profcol_model::memory::MAX_WAITING`] at once). Waiting once collapsed
/// throughput (16 clients of large requests on one HTTP/2 connection under
/// `--memory-limit-mib 256`: 10 accepted in 10 s with a 250 ms wait, 4
/// with 2 s, 302 without waiting): a waiting request's unread body took
/// the whole connection window, so the admitted requests' bodies could not
/// arrive. With room in the window for the waiting (`net::serve`), the
/// same load gets 336–361 accepted and none refused (244–285 accepted, and
/// about 5000 refusals, when refused at once).
pub const PATIENCE: Duration = Duration::from_secs(2);

/// Room for a body of `wire` bytes on the wire (`how`), reserved before
/// a byte of it is read, waiting its turn ([`MemoryBudget::admit`]), so
/// that a request the budget cannot hold is refused before any work.
pub(crate) async fn admit(
    budget: &Arc<MemoryBudget>,
    wire: usize,
    how: Wire,
) -> Result<Reservation, BodyError> {
    // A plain body holds at least its bytes.
    let floor = if how == Wire::Plain { wire } else { 0 };
    let want = budget.expected(wire, how).max(floor);
    let mut memory = budget.admit(want, PATIENCE).await.map_err(over_budget)?;
    memory.for_wire(wire, how);
    Ok(memory)
}

/// The budget cannot hold what a body wants: now (retry later) or ever.
pub(crate) fn over_budget(e: Exhausted) -> BodyError {
    if e.never() {
        BodyError::OverBudget {
            wanted: e.wanted,
            limit: e.limit,
        }
    } else {
        BodyError::MemoryLimit
    }
}

/// `raw` with every encoding listed undone, in reverse order of
/// application: the encodings the Collector's clients send (configgrpc's
/// and confighttp's), and `br`. `limit` bounds what a snappy block, read
/// whole, may decode to.
pub(crate) fn decoders(
    raw: RawReader,
    encodings: Option<&str>,
    limit: u64,
) -> Result<RawReader, BodyError> {
    {
        let mut reader = raw;
        let encodings: Vec<String> = encodings
            .unwrap_or("")
            .split(',')
            .map(|e| e.trim().to_ascii_lowercase())
            .filter(|e| !e.is_empty() && e != "identity")
            .collect();
        // Every decoder reads its input to the end (`multiple_members`):
        // one that stopped at the end of the compressed stream would leave
        // the rest of a chunked body (its final empty chunk) unread, and
        // the connection could not be kept alive for the next request.
        // What follows the stream must be another stream, or it is an error.
        macro_rules! to_the_end {
            ($d:expr) => {{
                let mut d = $d;
                d.multiple_members(true);
                Box::new(d)
            }};
        }
        for enc in encodings.iter().rev() {
            let buf = BufReader::new(reader);
            reader = match enc.as_str() {
                "gzip" | "x-gzip" => to_the_end!(GzipDecoder::new(buf)),
                // zlib's format under both names, as confighttp reads them.
                "deflate" | "zlib" => to_the_end!(ZlibDecoder::new(buf)),
                "br" => to_the_end!(BrotliDecoder::new(buf)),
                "zstd" => to_the_end!(ZstdDecoder::new(buf)),
                "lz4" => to_the_end!(Lz4Decoder::new(buf)),
                "snappy" => snappy::decoder(Box::new(buf), snappy::Format::Detect, limit),
                "x-snappy-framed" => snappy::decoder(Box::new(buf), snappy::Format::Framed, limit),
                other => return Err(BodyError::UnsupportedEncoding(other.to_owned())),
            };
        }
        Ok(reader)
    }
}

impl BodyReader {
    /// Reserves room for `len` bytes at once, when the size is known (a
    /// gRPC message's length prefix): one allocation, no copies as it grows.
    pub fn expect_len(&mut self, len: usize) -> Result<(), BodyError> {
        if len as u64 > self.limit {
            return Err(BodyError::TooLarge { limit: self.limit });
        }
        self.room_for(len)
    }

    /// Reads up to the end of the first line (its `\n` included), at most
    /// `max` bytes, or to the end of the body if that comes first; returns
    /// the line without its `\n`. What was read stays part of the body.
    pub async fn first_line(&mut self, max: usize) -> Result<&[u8], BodyError> {
        loop {
            if let Some(end) = self.read.iter().position(|&b| b == b'\n') {
                return Ok(&self.read[..end]);
            }
            if self.read.len() >= max || self.fill(max - self.read.len()).await? == 0 {
                let end = self.read.len().min(max);
                return Ok(&self.read[..end]);
            }
        }
    }

    /// Reads the rest of the body and returns all of it, with the memory it
    /// holds in the budget.
    pub async fn finish(mut self) -> Result<(Vec<u8>, Reservation), BodyError> {
        while self.fill(64 << 10).await? > 0 {}
        Ok((self.read, self.memory))
    }

    /// Reads at most `max` more bytes straight into the buffer's spare
    /// room; 0 at the end. A full buffer grows only once more data came (a
    /// body of known length fits its buffer exactly).
    async fn fill(&mut self, max: usize) -> Result<usize, BodyError> {
        let limit = self.limit;
        // A decoder that can tell before decoding (a snappy block's
        // header) says the body is over the limit as this kind of error.
        let read_error = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::FileTooLarge => BodyError::TooLarge { limit },
            _ => read_error(e),
        };
        let spare = self.read.capacity() - self.read.len();
        let n = if spare > 0 {
            (&mut self.reader)
                .take(spare.min(max) as u64)
                .read_buf(&mut self.read)
                .await
                .map_err(read_error)?
        } else {
            let mut probe = [0u8; 8 << 10];
            let want = probe.len().min(max);
            let n = self
                .reader
                .read(&mut probe[..want])
                .await
                .map_err(read_error)?;
            if n > 0 {
                self.room_for(self.read.len() + n)?;
                self.read.extend_from_slice(&probe[..n]);
            }
            n
        };
        if self.read.len() as u64 > self.limit {
            return Err(BodyError::TooLarge { limit: self.limit });
        }
        Ok(n)
    }

    /// Grows the buffer to hold `len` bytes, its new room reserved in the
    /// budget before it is allocated. The buffer doubles, but never past
    /// the limit (a body at the limit of 200 MiB holds 200 MiB, not 256).
    fn room_for(&mut self, len: usize) -> Result<(), BodyError> {
        if len <= self.read.capacity() {
            return Ok(());
        }
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        // One byte past the limit, to see a body that is over it.
        let cap = (self.read.capacity() * 2)
            .min(limit.saturating_add(1))
            .max(len);
        self.memory.try_grow_to(cap).map_err(over_budget)?;
        self.read.reserve_exact(cap - self.read.len());
        Ok(())
    }
}

pub(crate) fn read_error(e: std::io::Error) -> BodyError {
    let timed_out = profcol_pipeline::net::is_body_timeout(&e)
        || e.get_ref()
            .is_some_and(|inner| profcol_pipeline::net::is_body_timeout(inner));
    if timed_out {
        BodyError::TimedOut(e.to_string())
    } else {
        BodyError::Corrupt(format!("cannot read the body: {e}"))
    }
}

/// Reads the whole body (see [`BodyReader`]) under a budget of its own:
/// for tests.
#[cfg(test)]
pub async fn read(
    body: Body,
    content_encoding: Option<&str>,
    limit: u64,
) -> Result<Vec<u8>, BodyError> {
    let budget = MemoryBudget::new(usize::MAX / 2);
    Ok(BodyReader::new(body, content_encoding, limit, &budget)?
        .finish()
        .await?
        .0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[tokio::test]
    async fn decodes_each_encoding() {
        let data = b"hello envelope\n".repeat(100);
        assert_eq!(
            read(Body::from(gzip(&data)), Some("gzip"), 1 << 20)
                .await
                .unwrap(),
            data
        );
        let z = {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&data).unwrap();
            e.finish().unwrap()
        };
        assert_eq!(
            read(Body::from(z), Some("deflate"), 1 << 20).await.unwrap(),
            data
        );
        let zs = zstd::encode_all(&data[..], 1).unwrap();
        assert_eq!(
            read(Body::from(zs), Some("zstd"), 1 << 20).await.unwrap(),
            data
        );
        let mut br = Vec::new();
        brotli::BrotliCompress(&mut &data[..], &mut br, &Default::default()).unwrap();
        assert_eq!(
            read(Body::from(br), Some("br"), 1 << 20).await.unwrap(),
            data
        );
        assert_eq!(
            read(Body::from(data.clone()), None, 1 << 20).await.unwrap(),
            data
        );
        assert_eq!(
            read(Body::from(data.clone()), Some("identity"), 1 << 20)
                .await
                .unwrap(),
            data
        );
    }

    /// What the Collector's confighttp and configgrpc clients also send:
    /// `zlib`, `lz4` (the LZ4 frame format), `snappy` (a raw block, or the
    /// framing format older Collectors and gRPC send) and
    /// `x-snappy-framed`. A snappy block over the limit is refused as too
    /// large before it is decoded.
    #[tokio::test]
    async fn decodes_the_collectors_other_encodings() {
        use async_compression::tokio::bufread::Lz4Encoder;
        let data = b"hello profiles\n".repeat(1000);
        let zlib = {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&data).unwrap();
            e.finish().unwrap()
        };
        let mut lz4 = Vec::new();
        Lz4Encoder::new(&data[..])
            .read_to_end(&mut lz4)
            .await
            .unwrap();
        let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let framed = {
            let mut w = snap::write::FrameEncoder::new(Vec::new());
            w.write_all(&data).unwrap();
            w.into_inner().unwrap()
        };
        for (body, encoding) in [
            (zlib, "zlib"),
            (lz4, "lz4"),
            (block.clone(), "snappy"),
            (framed.clone(), "snappy"),
            (framed, "x-snappy-framed"),
        ] {
            assert_eq!(
                read(Body::from(body), Some(encoding), 1 << 20)
                    .await
                    .unwrap(),
                data,
                "{encoding}"
            );
        }
        assert_eq!(
            read(Body::from(block), Some("snappy"), 1000).await,
            Err(BodyError::TooLarge { limit: 1000 })
        );
    }

    #[tokio::test]
    async fn what_is_read_is_charged_to_the_memory_budget() {
        let data = vec![7u8; 4 << 20];
        // Held elsewhere: no room for this body now, retry later.
        let budget = MemoryBudget::new(8 << 20);
        let held = budget.try_admit(6 << 20).unwrap();
        let r = BodyReader::new(Body::from(gzip(&data)), Some("gzip"), 1 << 30, &budget)
            .unwrap()
            .finish()
            .await;
        assert_eq!(r.err(), Some(BodyError::MemoryLimit));
        assert_eq!(
            budget.used(),
            6 << 20,
            "a refused body gives its memory back"
        );
        drop(held);
        // Larger than the whole budget: never.
        let budget = MemoryBudget::new(2 << 20);
        let r = BodyReader::new(Body::from(gzip(&data)), Some("gzip"), 1 << 30, &budget)
            .unwrap()
            .finish()
            .await;
        assert!(
            matches!(r, Err(BodyError::OverBudget { limit, .. }) if limit == 2 << 20),
            "{r:?}"
        );
        let budget = MemoryBudget::new(64 << 20);
        let (bytes, held) = BodyReader::new(Body::from(data.clone()), None, 1 << 30, &budget)
            .unwrap()
            .finish()
            .await
            .unwrap();
        assert_eq!(bytes, data);
        assert!(held.bytes() >= data.len() && budget.used() == held.bytes());
    }

    #[tokio::test]
    async fn a_bomb_stops_at_the_limit() {
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20, "64 MiB of zeros compress well");
        assert_eq!(
            read(Body::from(bomb), Some("gzip"), 8 << 20).await,
            Err(BodyError::TooLarge { limit: 8 << 20 })
        );
    }

    #[tokio::test]
    async fn truncated_and_unknown_encodings_are_errors() {
        let mut g = gzip(&b"x".repeat(10_000));
        g.truncate(g.len() / 2);
        assert!(matches!(
            read(Body::from(g), Some("gzip"), 1 << 20).await,
            Err(BodyError::Corrupt(_))
        ));
        assert_eq!(
            read(Body::from("x"), Some("compress"), 1 << 20).await,
            Err(BodyError::UnsupportedEncoding("compress".into()))
        );
    }
}
