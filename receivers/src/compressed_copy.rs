//! A copy of a compressed body's bytes as they arrive, taken while they
//! are inflated, so that a batch nothing changes can be forwarded as its
//! client compressed it (`profcol_model::compressed`).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, ReadBuf};

use profcol_model::compressed::{Compressed, Encoding};

use crate::body::RawReader;

/// The bytes copied so far; `None` once the copy gave up (over `max`).
type Copy = Arc<Mutex<Option<Vec<u8>>>>;

/// Reads through to the body, copying what it reads.
struct Tee {
    inner: RawReader,
    copy: Copy,
    max: usize,
}

impl AsyncRead for Tee {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let new = &buf.filled()[before..];
            let mut copy = self.copy.lock().unwrap_or_else(|e| e.into_inner());
            if copy
                .as_ref()
                .is_some_and(|c| c.len() + new.len() > self.max)
            {
                *copy = None;
            }
            if let Some(c) = copy.as_mut() {
                c.extend_from_slice(new);
            }
        }
        polled
    }
}

/// Where the copy of one body goes.
pub(crate) struct CompressedCopy {
    encoding: Encoding,
    copy: Copy,
}

impl CompressedCopy {
    /// `raw` copied as it is read, when `encodings` names exactly one
    /// compression an exporter can send; at most `max` bytes are kept.
    pub(crate) fn tee(
        raw: RawReader,
        encodings: Option<&str>,
        max: usize,
    ) -> (RawReader, Option<Self>) {
        let Some(encoding) = encodings.and_then(Encoding::from_header) else {
            return (raw, None);
        };
        let copy: Copy = Arc::new(Mutex::new(Some(Vec::new())));
        let tee = Tee {
            inner: raw,
            copy: copy.clone(),
            max,
        };
        (Box::new(tee), Some(Self { encoding, copy }))
    }

    /// The body as it arrived, once it was read to the end and inflated
    /// to `plain_len` bytes; `None` if it was larger than the copy's bound.
    pub(crate) fn finish(self, plain_len: usize) -> Option<Compressed> {
        let bytes = self.copy.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        Some(Compressed {
            encoding: self.encoding,
            bytes: Bytes::from(bytes),
            plain_len,
        })
    }
}
