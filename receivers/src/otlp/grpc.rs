//! gRPC's unary framing for `ProfilesService/Export`, read with the shared
//! body reader (size limit, decompression, memory budget, body timeouts)
//! instead of tonic's server, so that a request is charged to the budget
//! while it arrives and decompresses.

use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt;
use prost::Message;
use tokio::io::AsyncReadExt;

use profcol_model::memory::{MemoryBudget, Reservation};

use profcol_model::compressed::{Compressed, Encoding};

use crate::body::{self, BodyReader};
use crate::compressed_copy::CompressedCopy;
use crate::gunzip;
use crate::ingest::Refusal;

/// The request message: its bytes after `grpc-encoding` is undone, and the
/// memory they hold; and its bytes as they came when compressed.
pub(super) async fn read_message(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    budget: &Arc<MemoryBudget>,
) -> Result<(Bytes, Reservation, Option<Compressed>), Refusal> {
    let mut raw = body::raw(body);
    let mut prefix = [0u8; 5];
    raw.read_exact(&mut prefix).await.map_err(|e| {
        if profcol_pipeline::net::is_body_timeout(&e) {
            Refusal::from(body::BodyError::TimedOut(e.to_string()))
        } else {
            Refusal::invalid("malformed", format!("no gRPC message in the request: {e}"))
        }
    })?;
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if len > max {
        return Err(Refusal::too_large(format!(
            "message of {len} bytes exceeds max_recv_msg_size_mib ({max} bytes)"
        )));
    }
    let encoding = match prefix[0] {
        0 => None,
        1 => Some(
            headers
                .get("grpc-encoding")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    Refusal::invalid(
                        "malformed",
                        "the message is marked compressed but grpc-encoding is not set",
                    )
                })?,
        ),
        flag => {
            return Err(Refusal::invalid(
                "malformed",
                format!("invalid gRPC compressed flag {flag}"),
            ))
        }
    };
    if encoding.and_then(Encoding::from_header) == Some(Encoding::Gzip) {
        let (plain, compressed, memory) = gunzip::read(raw, len, max as u64, budget)
            .await
            .map_err(Refusal::from)?;
        return Ok((Bytes::from(plain), memory, Some(compressed)));
    }
    let (message, copy) = CompressedCopy::tee(Box::new(raw.take(len as u64)), encoding, max);
    // The length is known: what the message will need is reserved (or
    // refused) before it is read.
    let mut reader = BodyReader::admitted(message, encoding, max as u64, budget, Some(len))
        .await
        .map_err(Refusal::from)?;
    if encoding.is_none() {
        reader.expect_len(len).map_err(Refusal::from)?;
    }
    let (bytes, memory) = reader.finish().await.map_err(Refusal::from)?;
    let compressed = copy.and_then(|c| c.finish(bytes.len()));
    Ok((Bytes::from(bytes), memory, compressed))
}

/// A unary gRPC answer: the message, then `grpc-status: 0` in trailers.
pub(super) fn ok(message: &impl Message) -> Response {
    let len = message.encoded_len();
    let mut frame = BytesMut::with_capacity(len + 5);
    frame.put_u8(0);
    frame.put_u32(len as u32);
    message
        .encode(&mut frame)
        .expect("a BytesMut of the right size takes the message");
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let body = http_body_util::Full::new(frame.freeze())
        .map_err(|never: std::convert::Infallible| -> std::io::Error { match never {} })
        .with_trailers(async move { Some(Ok(trailers)) });
    let mut resp = Response::new(Body::new(body));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    resp
}

/// Whether the request says it is gRPC; others get a plain HTTP 415, as
/// gRPC's HTTP/2 mapping asks.
pub(super) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/grpc"))
}

/// A refused call: gRPC's trailers-only answer.
pub(super) fn error(status: tonic::Status) -> Response {
    status.into_http::<Body>().into_response()
}
