//! Reading a request body, shared by every HTTP receiver: decompressed while
//! streaming, stopped at the limit so a compression bomb costs at most
//! `limit` bytes of memory, and readable in two steps so that a receiver can
//! decide on the first line (a Sentry envelope's header, which may carry the
//! only credential) before it reads the rest.

use async_compression::tokio::bufread::{BrotliDecoder, GzipDecoder, ZlibDecoder, ZstdDecoder};
use axum::body::Body;
use futures::TryStreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio_util::io::StreamReader;

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
}

/// A body being read: decompressed (every `Content-Encoding` listed,
/// undone in reverse order of application) and limited.
pub struct BodyReader {
    reader: tokio::io::Take<Box<dyn AsyncRead + Send + Unpin>>,
    limit: u64,
    read: Vec<u8>,
}

impl BodyReader {
    pub fn new(body: Body, content_encoding: Option<&str>, limit: u64) -> Result<Self, BodyError> {
        let stream = body.into_data_stream().map_err(std::io::Error::other);
        let mut reader: Box<dyn AsyncRead + Send + Unpin> = Box::new(StreamReader::new(stream));
        let encodings: Vec<String> = content_encoding
            .unwrap_or("")
            .split(',')
            .map(|e| e.trim().to_ascii_lowercase())
            .filter(|e| !e.is_empty() && e != "identity")
            .collect();
        for enc in encodings.iter().rev() {
            let buf = BufReader::new(reader);
            reader = match enc.as_str() {
                "gzip" | "x-gzip" => Box::new(GzipDecoder::new(buf)),
                "deflate" => Box::new(ZlibDecoder::new(buf)),
                "br" => Box::new(BrotliDecoder::new(buf)),
                "zstd" => Box::new(ZstdDecoder::new(buf)),
                other => return Err(BodyError::UnsupportedEncoding(other.to_owned())),
            };
        }
        Ok(Self {
            reader: reader.take(limit + 1),
            limit,
            read: Vec::new(),
        })
    }

    /// Reads up to the end of the first line (its `\n` included), at most
    /// `max` bytes, or to the end of the body if that comes first; returns
    /// the line without its `\n`. What was read stays part of the body.
    pub async fn first_line(&mut self, max: usize) -> Result<&[u8], BodyError> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = self.read.iter().position(|&b| b == b'\n') {
                return Ok(&self.read[..end]);
            }
            if self.read.len() >= max {
                return Ok(&self.read[..]);
            }
            let want = chunk.len().min(max - self.read.len());
            let n = self
                .reader
                .read(&mut chunk[..want])
                .await
                .map_err(read_error)?;
            if n == 0 {
                return Ok(&self.read[..]);
            }
            self.read.extend_from_slice(&chunk[..n]);
            self.check_limit()?;
        }
    }

    /// Reads the rest of the body and returns all of it.
    pub async fn finish(mut self) -> Result<Vec<u8>, BodyError> {
        self.reader
            .read_to_end(&mut self.read)
            .await
            .map_err(read_error)?;
        self.check_limit()?;
        Ok(self.read)
    }

    fn check_limit(&self) -> Result<(), BodyError> {
        if self.read.len() as u64 > self.limit {
            return Err(BodyError::TooLarge { limit: self.limit });
        }
        Ok(())
    }
}

fn read_error(e: std::io::Error) -> BodyError {
    let timed_out = profcol_pipeline::net::is_body_timeout(&e)
        || e.get_ref()
            .is_some_and(|inner| profcol_pipeline::net::is_body_timeout(inner));
    if timed_out {
        BodyError::TimedOut(e.to_string())
    } else {
        BodyError::Corrupt(format!("cannot read the body: {e}"))
    }
}

/// Reads the whole body (see [`BodyReader`]).
pub async fn read(
    body: Body,
    content_encoding: Option<&str>,
    limit: u64,
) -> Result<Vec<u8>, BodyError> {
    BodyReader::new(body, content_encoding, limit)?
        .finish()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
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
            read(Body::from("x"), Some("lz4"), 1 << 20).await,
            Err(BodyError::UnsupportedEncoding("lz4".into()))
        );
    }
}
