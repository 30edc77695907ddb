//! Request compression at level 1. tonic compresses at a fixed gzip level 6
//! / zstd level 3, which costs 10x or more of a decode (DESIGN.md); gzip and
//! zstd at level 1 cost a fraction of that for a little less compression.
//! So tonic sends the request plain and this layer compresses the one
//! message of the unary call, sets the frame's compressed flag and
//! `grpc-encoding`, off the async runtime. A message already compressed
//! as the exporter would compress it (the request as its client sent it)
//! is framed as it is.

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use tonic::body::Body;
use tonic::transport::Channel;

use super::config::Compression;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A gRPC frame's header: the compressed flag and the message length.
const HEADER: usize = 5;

/// A request extension: the message, compressed with the layer's
/// compression, to send in place of the (empty) one the codec wrote.
#[derive(Clone)]
pub(crate) struct Precompressed(pub Bytes);

#[derive(Clone)]
pub(crate) struct Compressing {
    inner: Channel,
    compression: Compression,
}

impl Compressing {
    pub(crate) fn new(inner: Channel, compression: Compression) -> Self {
        Self { inner, compression }
    }
}

impl tower::Service<http::Request<Body>> for Compressing {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        // The clone is not ready; the instance `poll_ready` readied is.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let compression = self.compression;
        Box::pin(async move {
            let Some(name) = encoding_name(compression) else {
                return inner.call(req).await.map_err(Into::into);
            };
            let (mut parts, body) = req.into_parts();
            let framed = body.collect().await?.to_bytes();
            let framed = match parts.extensions.remove::<Precompressed>() {
                Some(Precompressed(message)) => frame_compressed(&message)?,
                None => {
                    profcol_model::cpu::run(move || compress_frame(framed, compression)).await?
                }
            };
            parts
                .headers
                .insert("grpc-encoding", http::HeaderValue::from_static(name));
            let req = http::Request::from_parts(parts, Body::new(Full::new(framed)));
            inner.call(req).await.map_err(Into::into)
        })
    }
}

pub(crate) fn encoding_name(c: Compression) -> Option<&'static str> {
    match c {
        Compression::Gzip => Some("gzip"),
        Compression::Zstd => Some("zstd"),
        Compression::None => None,
    }
}

/// Rewrites one uncompressed gRPC frame as a compressed one.
pub(crate) fn compress_frame(framed: Bytes, compression: Compression) -> Result<Bytes, BoxError> {
    let Some((header, message)) = framed.split_at_checked(HEADER) else {
        return Err("gRPC frame shorter than its header".into());
    };
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if header[0] != 0 || len != message.len() {
        return Err("expected one uncompressed gRPC message".into());
    }
    if compression == Compression::None {
        return Ok(framed);
    }
    let mut out = BytesMut::with_capacity(HEADER + message.len() / 4).writer();
    out.write_all(&[1, 0, 0, 0, 0])?;
    let mut out = compress_into(out, message, compression, 0)?.into_inner();
    let compressed_len = u32::try_from(out.len() - HEADER)?;
    out[1..HEADER].copy_from_slice(&compressed_len.to_be_bytes());
    Ok(out.freeze())
}

/// A gRPC frame of one compressed message.
fn frame_compressed(message: &[u8]) -> Result<Bytes, BoxError> {
    let mut out = BytesMut::with_capacity(HEADER + message.len());
    out.put_u8(1);
    out.put_u32(u32::try_from(message.len())?);
    out.put_slice(message);
    Ok(out.freeze())
}

/// Appends `message` compressed to `out` (as it is for `None`), at
/// `level` (confighttp's `compression_params.level`, checked by
/// [`check_level`]), or at level 1 for 0.
pub(crate) fn compress_into<W: Write>(
    mut out: W,
    message: &[u8],
    compression: Compression,
    level: i32,
) -> std::io::Result<W> {
    match compression {
        Compression::Gzip => {
            let level = match level {
                0 => flate2::Compression::fast(),
                -1 => flate2::Compression::default(),
                l => flate2::Compression::new(l.clamp(1, 9) as u32),
            };
            let mut gz = flate2::write::GzEncoder::new(out, level);
            gz.write_all(message)?;
            gz.finish()
        }
        Compression::Zstd => {
            let range = zstd::compression_level_range();
            let level = match level {
                0 => 1,
                l => l.clamp(*range.start(), *range.end()),
            };
            let mut z = zstd::stream::write::Encoder::new(out, level)?;
            z.write_all(message)?;
            z.finish()
        }
        Compression::None => {
            out.write_all(message)?;
            Ok(out)
        }
    }
}

/// confighttp's check of `compression_params.level`: gzip takes -1 (its
/// default, 6) and 1 to 9 (0, unset, is profcol's 1); zstd any level,
/// taken to the nearest it has; none only 0. Huffman-only gzip (-2) is
/// refused: the deflate backend has no such mode.
pub(crate) fn check_level(compression: Compression, level: i32) -> Result<(), String> {
    let ok = match compression {
        Compression::Gzip => matches!(level, -1..=9),
        Compression::Zstd => true,
        Compression::None => level == 0,
    };
    if ok {
        return Ok(());
    }
    let name = encoding_name(compression).unwrap_or("none");
    Err(format!(
        "unsupported level {level} for compression {name:?}{}",
        if compression == Compression::Gzip {
            " (-1 or 1 to 9)"
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn frame(msg: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u8(0);
        b.put_u32(msg.len() as u32);
        b.put_slice(msg);
        b.freeze()
    }

    #[test]
    fn frames_are_compressed_with_the_flag_and_length_set() {
        let msg: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in [Compression::Gzip, Compression::Zstd] {
            let out = compress_frame(frame(&msg), c).unwrap();
            assert_eq!(out[0], 1);
            let len = u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, out.len() - 5);
            assert!(len < msg.len() / 4, "{c:?}: {len}");
            let mut back = Vec::new();
            match c {
                Compression::Gzip => {
                    flate2::read::GzDecoder::new(&out[5..])
                        .read_to_end(&mut back)
                        .unwrap();
                }
                _ => back = zstd::decode_all(&out[5..]).unwrap(),
            }
            assert_eq!(back, msg);
        }
        let plain = frame(b"abc");
        assert_eq!(
            compress_frame(plain.clone(), Compression::None).unwrap(),
            plain
        );
    }

    #[test]
    fn anything_but_one_plain_message_is_refused() {
        let mut two = frame(b"abc").to_vec();
        two.extend_from_slice(&frame(b"d"));
        let mut flagged = frame(b"abc").to_vec();
        flagged[0] = 1;
        for bad in [
            Bytes::from_static(b"\0\0"),
            Bytes::from(two),
            Bytes::from(flagged),
        ] {
            assert!(compress_frame(bad, Compression::Gzip).is_err());
        }
    }
}
