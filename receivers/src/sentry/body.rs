//! Reading a request body: decompressed while streaming, stopped at the limit
//! so a compression bomb costs at most `limit` bytes of memory.

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
}

/// Reads the body, undoing every `Content-Encoding` listed (in reverse order
/// of application), keeping at most `limit` decompressed bytes.
pub async fn read(
    body: Body,
    content_encoding: Option<&str>,
    limit: u64,
) -> Result<Vec<u8>, BodyError> {
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
    let mut out = Vec::new();
    let mut limited = reader.take(limit + 1);
    limited
        .read_to_end(&mut out)
        .await
        .map_err(|e| BodyError::Corrupt(format!("cannot read the body: {e}")))?;
    if out.len() as u64 > limit {
        return Err(BodyError::TooLarge { limit });
    }
    Ok(out)
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
