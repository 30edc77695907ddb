//! Request compression at level 1. tonic compresses at a fixed gzip level 6
//! / zstd level 3, which costs 10x or more of a decode (DESIGN.md); gzip and
//! zstd at level 1 cost a fraction of that for a little less compression.
//! So tonic sends the request plain and this layer compresses the one
//! message of the unary call, sets the frame's compressed flag and
//! `grpc-encoding`, off the async runtime (a small one in place). A
//! message the exporter already holds as bytes ([`Prebuilt`]: compressed
//! as the exporter would compress it, the request as its client sent it;
//! or plain, a batch's received or settled bytes) is framed as it is,
//! without the copy into tonic's buffer: the frame's header and the
//! message go as two chunks.
//!
//! configgrpc's `snappy` is the framing format; grpc-go answers in the
//! encoding of the request, and tonic reads no snappy, so this layer also
//! inflates a snappy answer.

use std::future::Future;
use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use tonic::body::Body;
use tonic::transport::Channel;

use super::config::Compression;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A gRPC frame's header: the compressed flag and the message length.
const HEADER: usize = 5;

/// A request extension: the message to send in place of the (empty) one
/// the codec wrote.
#[derive(Clone)]
pub(crate) enum Prebuilt {
    /// Compressed with the layer's compression.
    Compressed(Bytes),
    /// To compress with it, or to send as it is without one.
    Plain(Bytes),
}

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
        let compression = match self.compression {
            Compression::Snappy => Compression::SnappyFramed,
            c => c,
        };
        let name = encoding_name(self.compression);
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            let compressed = match (parts.extensions.remove::<Prebuilt>(), name) {
                (None, None) => {
                    let req = http::Request::from_parts(parts, body);
                    return inner.call(req).await.map_err(Into::into);
                }
                (Some(Prebuilt::Plain(message)), None) => {
                    let req = http::Request::from_parts(parts, framed(0, message)?);
                    return inner.call(req).await.map_err(Into::into);
                }
                (Some(Prebuilt::Compressed(_)), None) => {
                    return Err("a compressed message for a call without compression".into())
                }
                (Some(Prebuilt::Compressed(message)), Some(_)) => message,
                (Some(Prebuilt::Plain(message)), Some(_)) => {
                    compress_off(message, compression).await?
                }
                (None, Some(_)) => {
                    let message = message_of(body.collect().await?.to_bytes())?;
                    compress_off(message, compression).await?
                }
            };
            if let Some(name) = name {
                parts
                    .headers
                    .insert("grpc-encoding", http::HeaderValue::from_static(name));
            }
            let req = http::Request::from_parts(parts, framed(1, compressed)?);
            let res = inner.call(req).await?;
            if compression == Compression::SnappyFramed {
                return inflate_snappy_answer(res).await;
            }
            Ok(res)
        })
    }
}

pub(crate) fn encoding_name(c: Compression) -> Option<&'static str> {
    (c != Compression::None).then(|| c.name())
}

/// A gRPC answer in `snappy` as one tonic reads: its messages inflated and
/// flagged uncompressed, its trailers kept. Answers are a few bytes (an
/// export response), so it is read whole.
async fn inflate_snappy_answer(
    res: http::Response<Body>,
) -> Result<http::Response<Body>, BoxError> {
    let snappy = res
        .headers()
        .get("grpc-encoding")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"snappy"));
    if !snappy {
        return Ok(res);
    }
    let (mut parts, body) = res.into_parts();
    parts.headers.remove("grpc-encoding");
    let collected = body.collect().await?;
    let trailers = collected.trailers().cloned();
    let mut data = collected.to_bytes();
    let mut out = BytesMut::with_capacity(data.len());
    while !data.is_empty() {
        if data.len() < HEADER {
            return Err("gRPC answer cut inside a frame header".into());
        }
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        let flag = data[0];
        if data.len() < HEADER + len {
            return Err("gRPC answer cut inside a message".into());
        }
        let message = data.slice(HEADER..HEADER + len);
        data = data.slice(HEADER + len..);
        let message = if flag == 1 {
            let mut plain = Vec::new();
            snap::read::FrameDecoder::new(&message[..])
                .take(MAX_ANSWER)
                .read_to_end(&mut plain)?;
            Bytes::from(plain)
        } else {
            message
        };
        out.put_u8(0);
        out.put_u32(u32::try_from(message.len())?);
        out.put_slice(&message);
    }
    let mut frames: Vec<Result<_, tonic::Status>> = vec![Ok(http_body::Frame::data(out.freeze()))];
    if let Some(t) = trailers {
        frames.push(Ok(http_body::Frame::trailers(t)));
    }
    let body = http_body_util::StreamBody::new(futures::stream::iter(frames));
    Ok(http::Response::from_parts(parts, Body::new(body)))
}

/// The most an inflated answer may hold: an export response is a few bytes.
const MAX_ANSWER: u64 = 1 << 20;

/// The message of one uncompressed gRPC frame, as tonic writes a unary
/// call's.
fn message_of(framed: Bytes) -> Result<Bytes, BoxError> {
    let Some(header) = framed.get(..HEADER) else {
        return Err("gRPC frame shorter than its header".into());
    };
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if header[0] != 0 || len != framed.len() - HEADER {
        return Err("expected one uncompressed gRPC message".into());
    }
    Ok(framed.slice(HEADER..))
}

/// `message` compressed off the async runtime, or here when it is small.
async fn compress_off(message: Bytes, compression: Compression) -> Result<Bytes, BoxError> {
    profcol_model::cpu::run_sized(message.len(), move || {
        compress_message(&message, compression)
    })
    .await
}

/// `message` compressed at profcol's level.
pub(crate) fn compress_message(
    message: &[u8],
    compression: Compression,
) -> Result<Bytes, BoxError> {
    let out = Vec::with_capacity(message.len() / 4);
    Ok(compress_into(out, message, compression, 0)?.into())
}

/// A request body of one gRPC frame: its header, then `message` as it is
/// (h2 sends it without copying it).
fn framed(flag: u8, message: Bytes) -> Result<Body, BoxError> {
    let mut header = BytesMut::with_capacity(HEADER);
    header.put_u8(flag);
    header.put_u32(u32::try_from(message.len())?);
    let chunks =
        [header.freeze(), message].map(|b| Ok::<_, tonic::Status>(http_body::Frame::data(b)));
    Ok(Body::new(http_body_util::StreamBody::new(
        futures::stream::iter(chunks),
    )))
}

/// Appends `message` compressed to `out` (as it is for `None`; gzip in one
/// call where it can, see [`profcol_model::compressed::gzip`]), at
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
            if let Some(gz) =
                profcol_model::compressed::gzip(message, flate_level(level).level() as i32)
            {
                out.write_all(&gz)?;
                return Ok(out);
            }
            let mut gz = flate2::write::GzEncoder::new(out, flate_level(level));
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
        Compression::Zlib | Compression::Deflate => {
            let mut z = flate2::write::ZlibEncoder::new(out, flate_level(level));
            z.write_all(message)?;
            z.finish()
        }
        Compression::Snappy => {
            let block = snap::raw::Encoder::new()
                .compress_vec(message)
                .map_err(std::io::Error::other)?;
            out.write_all(&block)?;
            Ok(out)
        }
        Compression::SnappyFramed => {
            let mut w = snap::write::FrameEncoder::new(out);
            w.write_all(message)?;
            w.into_inner().map_err(|e| e.into_error())
        }
        Compression::Lz4 => {
            let mut w = lz4::EncoderBuilder::new().build(out)?;
            w.write_all(message)?;
            let (out, done) = w.finish();
            done.map(|()| out)
        }
        Compression::None => {
            out.write_all(message)?;
            Ok(out)
        }
    }
}

/// A deflate level of `compression_params` (0: profcol's 1; -1: 6).
fn flate_level(level: i32) -> flate2::Compression {
    match level {
        0 => flate2::Compression::fast(),
        -1 => flate2::Compression::default(),
        l => flate2::Compression::new(l.clamp(1, 9) as u32),
    }
}

/// confighttp's check of `compression_params.level`: gzip, zlib and
/// deflate take -1 (their default, 6) and 1 to 9 (0, unset, is profcol's
/// 1); zstd any level, taken to the nearest it has; the others only 0.
/// Huffman-only (-2) is refused: the deflate backend has no such mode.
pub(crate) fn check_level(compression: Compression, level: i32) -> Result<(), String> {
    let flate = matches!(
        compression,
        Compression::Gzip | Compression::Zlib | Compression::Deflate
    );
    let ok = match compression {
        _ if flate => matches!(level, -1..=9),
        Compression::Zstd => true,
        _ => level == 0,
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "unsupported level {level} for compression {:?}{}",
        compression.name(),
        if flate { " (-1 or 1 to 9)" } else { "" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
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
        for c in [
            Compression::Gzip,
            Compression::Zstd,
            Compression::Zlib,
            Compression::Snappy,
            Compression::SnappyFramed,
            Compression::Lz4,
        ] {
            let message = message_of(frame(&msg)).unwrap();
            let out = compress_message(&message, c).unwrap();
            assert!(out.len() < msg.len() / 4, "{c:?}: {}", out.len());
            assert_eq!(inflate(&out, c), msg, "{c:?}");
        }
        let out = compress_message(b"abc", Compression::None).unwrap();
        assert_eq!(&out[..], b"abc");
    }

    /// The body a prebuilt message goes in: one frame, flagged, with its
    /// length, holding the message.
    #[tokio::test]
    async fn a_prebuilt_message_goes_as_one_frame() {
        let message = Bytes::from_static(b"\x0a\x03abc");
        for flag in [0, 1] {
            let body = framed(flag, message.clone()).unwrap();
            let got = body.collect().await.unwrap().to_bytes();
            let mut want = frame(&message).to_vec();
            want[0] = flag;
            assert_eq!(got, want);
        }
    }

    /// Each format read back by its reference reader.
    fn inflate(data: &[u8], c: Compression) -> Vec<u8> {
        let mut back = Vec::new();
        match c {
            Compression::Gzip => {
                flate2::read::GzDecoder::new(data)
                    .read_to_end(&mut back)
                    .unwrap();
            }
            Compression::Zlib | Compression::Deflate => {
                flate2::read::ZlibDecoder::new(data)
                    .read_to_end(&mut back)
                    .unwrap();
            }
            Compression::Zstd => back = zstd::decode_all(data).unwrap(),
            Compression::Snappy => back = snap::raw::Decoder::new().decompress_vec(data).unwrap(),
            Compression::SnappyFramed => {
                snap::read::FrameDecoder::new(data)
                    .read_to_end(&mut back)
                    .unwrap();
            }
            Compression::Lz4 => {
                lz4::Decoder::new(data)
                    .unwrap()
                    .read_to_end(&mut back)
                    .unwrap();
            }
            Compression::None => back = data.to_vec(),
        }
        back
    }

    /// grpc-go answers a `snappy` call in `snappy`: the answer reaches tonic
    /// inflated, unflagged, without the header, with its trailers.
    #[tokio::test]
    async fn a_snappy_answer_is_inflated_for_tonic() {
        let answer = b"\x0a\x03abc".to_vec();
        let mut compressed =
            frame(&compress_message(&answer, Compression::SnappyFramed).unwrap()).to_vec();
        compressed[0] = 1;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let body = http_body_util::StreamBody::new(futures::stream::iter([
            Ok::<_, tonic::Status>(http_body::Frame::data(Bytes::from(compressed))),
            Ok(http_body::Frame::trailers(trailers.clone())),
        ]));
        let res = http::Response::builder()
            .header("grpc-encoding", "snappy")
            .header("content-type", "application/grpc")
            .body(Body::new(body))
            .unwrap();
        let res = inflate_snappy_answer(res).await.unwrap();
        assert!(res.headers().get("grpc-encoding").is_none());
        assert_eq!(res.headers()["content-type"], "application/grpc");
        let got = res.into_body().collect().await.unwrap();
        assert_eq!(got.trailers(), Some(&trailers));
        assert_eq!(got.to_bytes(), frame(&answer));

        // Cut short: an error, not a message.
        let cut = http::Response::builder()
            .header("grpc-encoding", "snappy")
            .body(Body::new(Full::new(Bytes::from_static(
                b"\x01\0\0\0\x09abc",
            ))))
            .unwrap();
        assert!(inflate_snappy_answer(cut).await.is_err());
    }

    #[test]
    fn levels_are_checked_as_configcompression_checks_them() {
        for (c, ok, bad) in [
            (Compression::Gzip, &[-1, 0, 1, 9][..], &[-2, 10][..]),
            (Compression::Zlib, &[-1, 0, 9], &[10]),
            (Compression::Deflate, &[-1, 0, 9], &[-3]),
            (Compression::Zstd, &[-7, 0, 22, 40], &[]),
            (Compression::Snappy, &[0], &[1, -1]),
            (Compression::SnappyFramed, &[0], &[1]),
            (Compression::Lz4, &[0], &[1]),
            (Compression::None, &[0], &[1]),
        ] {
            for &l in ok {
                assert!(check_level(c, l).is_ok(), "{c:?} {l}");
            }
            for &l in bad {
                assert!(check_level(c, l).is_err(), "{c:?} {l}");
            }
        }
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
            assert!(message_of(bad).is_err());
        }
    }
}
