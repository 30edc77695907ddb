//! A request body that must keep arriving: at least `min_rate` bytes per
//! second over every `timeout` window (and some bytes in each), and all of
//! it within `read_timeout` when that is set. A client that stalls or
//! trickles its body gets an error instead of holding a connection and the
//! body read so far for ever.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a request body must arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// The window: a window with fewer than `min_rate * timeout` bytes
    /// (or none at all) ends the body. `None`: no limit.
    pub timeout: Option<Duration>,
    /// Bytes per second, averaged over each window.
    pub min_rate: u64,
    /// Deadline for the whole body from its first read. `None`: no limit.
    pub read_timeout: Option<Duration>,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            timeout: Some(Duration::from_secs(30)),
            min_rate: 1024,
            read_timeout: None,
        }
    }
}

/// The error a timed-out body ends with; [`is_body_timeout`] finds it in a
/// chain of errors, so a handler can answer 408.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyTimeout(String);

/// Whether `e` or one of its sources is a [`BodyTimeout`].
pub fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.is::<BodyTimeout>() {
            return true;
        }
        cur = e.source();
    }
    false
}

pub struct TimedBody<B> {
    inner: B,
    limits: BodyLimits,
    /// End of the current window; set on the first read.
    window: Option<Pin<Box<Sleep>>>,
    window_bytes: u64,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<B> TimedBody<B> {
    pub fn new(inner: B, limits: BodyLimits) -> Self {
        Self {
            inner,
            limits,
            window: None,
            window_bytes: 0,
            deadline: None,
        }
    }

    /// Starts the clocks on the first read (a handler may look at the
    /// headers for a while before it reads).
    fn start(&mut self) {
        if self.window.is_none() {
            if let Some(t) = self.limits.timeout {
                self.window = Some(Box::pin(tokio::time::sleep(t)));
            }
            if let Some(t) = self.limits.read_timeout {
                self.deadline = Some(Box::pin(tokio::time::sleep(t)));
            }
        }
    }

    /// A window has passed: the body failed if it brought too little.
    fn end_window(&mut self, now: Instant) -> Result<(), BodyTimeout> {
        let Some(t) = self.limits.timeout else {
            return Ok(());
        };
        let needed = (self.limits.min_rate as f64 * t.as_secs_f64()) as u64;
        if self.window_bytes == 0 || self.window_bytes < needed {
            return Err(BodyTimeout(format!(
                "the request body brought {} bytes in {t:?} (at least {} bytes/s are required)",
                self.window_bytes, self.limits.min_rate
            )));
        }
        self.window_bytes = 0;
        if let Some(w) = &mut self.window {
            w.as_mut().reset(now + t);
        }
        Ok(())
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        this.start();
        if let Some(d) = &mut this.deadline {
            if d.as_mut().poll(cx).is_ready() {
                let t = this.limits.read_timeout.unwrap_or_default();
                return Poll::Ready(Some(Err(Box::new(BodyTimeout(format!(
                    "the request body did not arrive within {t:?}"
                ))))));
            }
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &polled {
            if let Some(d) = f.data_ref() {
                this.window_bytes += d.len() as u64;
            }
        }
        if matches!(polled, Poll::Ready(None)) {
            return Poll::Ready(None);
        }
        // A window that has passed is judged whether or not data came now.
        let now = Instant::now();
        if this.window.as_ref().is_some_and(|w| w.deadline() <= now) {
            if let Err(e) = this.end_window(now) {
                return Poll::Ready(Some(Err(Box::new(e))));
            }
        }
        match polled {
            Poll::Ready(Some(r)) => Poll::Ready(Some(r.map_err(Into::into))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                // Wake at the window's end to judge it.
                if let Some(w) = &mut this.window {
                    let _ = w.as_mut().poll(cx);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
