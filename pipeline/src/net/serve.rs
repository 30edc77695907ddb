//! The accept loop and the connections of one listener: HTTP/1.1 and
//! HTTP/2 (gRPC included) through hyper, with the limits of
//! [`ServerSettings`] held against clients that connect and stall.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::body::{BodyLimits, TimedBody};
use super::conns::{self, Slots};
use super::stream::TrackedStream;

/// What one listener allows its clients.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Open connections at once; at the cap the oldest idle one is closed
    /// to admit a new one.
    pub max_connections: usize,
    /// HTTP/1: the request line and headers must arrive within this.
    pub read_header_timeout: Option<Duration>,
    /// A connection with no request in flight for this long is closed
    /// (HTTP/1 keep-alive, gRPC's `max_connection_idle`).
    pub idle_timeout: Option<Duration>,
    /// HTTP/1 keep-alive; off, a connection closes after each response.
    pub keep_alive: bool,
    /// Connections older than this are closed gracefully (HTTP/2 GOAWAY),
    /// after `max_connection_age_grace` for the requests in flight.
    pub max_connection_age: Option<Duration>,
    pub max_connection_age_grace: Option<Duration>,
    /// HTTP/2 keepalive pings: sent after this long without a frame...
    pub keepalive_time: Option<Duration>,
    /// ...and the connection is closed when the ping is not answered in this.
    pub keepalive_timeout: Duration,
    /// HTTP/2 streams per connection.
    pub max_concurrent_streams: Option<u32>,
    pub body: BodyLimits,
    /// An answer not written within this of the request's headers cuts
    /// the request off: HTTP/1 closes the connection, HTTP/2 resets the
    /// stream (Go's `WriteTimeout`).
    pub write_timeout: Option<Duration>,
    /// Headers every answer gets, unless it sets them itself.
    pub response_headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// The `Content-Encoding`s accepted (lowercase, `""` for none); `None`:
    /// every one the receivers read.
    pub compression_algorithms: Option<Vec<String>>,
    /// TLS (see `net::tls::server_config`); the handshake must finish
    /// within `read_header_timeout` (10 s without one).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            read_header_timeout: Some(Duration::from_secs(60)),
            idle_timeout: Some(Duration::from_secs(60)),
            keep_alive: true,
            max_connection_age: None,
            max_connection_age_grace: None,
            keepalive_time: Some(Duration::from_secs(7200)),
            keepalive_timeout: Duration::from_secs(20),
            max_concurrent_streams: None,
            body: BodyLimits::default(),
            write_timeout: None,
            response_headers: Vec::new(),
            compression_algorithms: None,
            tls: None,
        }
    }
}

/// The `Content-Encoding`s the receivers read (`receivers::body`), by the
/// names `compression_algorithms` takes them.
pub const CONTENT_ENCODINGS: [&str; 11] = [
    "",
    "identity",
    "gzip",
    "x-gzip",
    "zstd",
    "zlib",
    "deflate",
    "br",
    "lz4",
    "snappy",
    "x-snappy-framed",
];

impl ServerSettings {
    /// For the collector's own small endpoints (health, metrics): few
    /// connections, short timeouts.
    pub fn small() -> Self {
        Self {
            max_connections: 64,
            read_header_timeout: Some(Duration::from_secs(10)),
            idle_timeout: Some(Duration::from_secs(30)),
            ..Self::default()
        }
    }
}

/// Serves `router` on `listener` until `shutdown`; then connections close
/// gracefully (requests in flight finish) and the task ends when the last
/// one has. `name` (`receivers::sentry`) appears in logs.
pub fn spawn(
    name: &str,
    listener: TcpListener,
    router: axum::Router,
    settings: ServerSettings,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    if let Ok(address) = listener.local_addr() {
        super::listeners::announce(name, address, &shutdown);
    }
    let slots = Slots::new(name, settings.max_connections);
    let settings = Arc::new(settings);
    let builder = Arc::new(builder(&settings));
    tokio::spawn(async move {
        let sweeper = tokio::spawn(sweep(slots.clone(), settings.clone(), shutdown.clone()));
        let mut conns = JoinSet::new();
        loop {
            while conns.try_join_next().is_some() {}
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                _ = slots.wait_for_room() => {}
            }
            let accepted = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                a = listener.accept() => a,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    if is_out_of_descriptors(&e) {
                        conns::shed_oldest_idle();
                    } else {
                        crate::warn_limited!(listener = %slots.name, error = %e, "accept failed");
                    }
                    // As Go's server: a short pause instead of a busy loop.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let local = tcp.local_addr().ok();
            let conn = slots.register(remote);
            conns.spawn(serve_connection(
                tcp,
                conn,
                local,
                router.clone(),
                builder.clone(),
                settings.clone(),
                shutdown.clone(),
            ));
        }
        drop(listener);
        sweeper.abort();
        // Connections close gracefully; the runtime cuts off the rest at
        // its shutdown deadline by aborting this task (and so the set).
        while conns.join_next().await.is_some() {}
    })
}

fn builder(s: &ServerSettings) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .keep_alive(s.keep_alive)
        .header_read_timeout(s.read_header_timeout);
    let mut h2 = b.http2();
    h2.timer(TokioTimer::new())
        .keep_alive_interval(s.keepalive_time)
        .keep_alive_timeout(s.keepalive_timeout);
    if let Some(n) = s.max_concurrent_streams {
        h2.max_concurrent_streams(n);
    }
    // A request waiting its turn for memory leaves its body unread: up to
    // a stream's window of it waits in the connection's buffers. With
    // hyper's default connection window (1 MiB, one stream's), a single
    // waiting request took all of it, and the requests admitted on the
    // same connection could not receive their bodies until it gave up.
    h2.initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    b
}

/// An HTTP/2 stream's flow-control window (hyper's default).
const STREAM_WINDOW: u32 = 1 << 20;
/// A connection's: room for every request that may wait for memory at
/// once ([`profcol_model::memory::MAX_WAITING`]) to hold a stream's window
/// unread, and as much again for the requests being read.
const CONNECTION_WINDOW: u32 = 2 * profcol_model::memory::MAX_WAITING as u32 * STREAM_WINDOW;

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    conn: conns::ConnGuard,
    local: Option<SocketAddr>,
    router: axum::Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    settings: Arc<ServerSettings>,
    shutdown: CancellationToken,
) {
    let stream = TrackedStream::new(tcp, (*conn).clone());
    match settings.tls.clone() {
        None => serve_io(stream, conn, local, router, builder, settings, shutdown).await,
        Some(tls) => {
            let limit = settings
                .read_header_timeout
                .unwrap_or(Duration::from_secs(10));
            let handshake = tokio_rustls::TlsAcceptor::from(tls).accept(stream);
            match tokio::time::timeout(limit, handshake).await {
                Ok(Ok(tls)) => {
                    serve_io(tls, conn, local, router, builder, settings, shutdown).await
                }
                Ok(Err(e)) => {
                    crate::info_limited!(peer = %conn.remote, error = %e, "TLS handshake failed");
                }
                Err(_) => {
                    crate::info_limited!(peer = %conn.remote, "TLS handshake timed out");
                }
            }
        }
    }
}

/// A request cut off without an answer (`write_timeout`): hyper closes
/// its HTTP/1 connection or resets its HTTP/2 stream.
#[derive(Debug)]
struct CutOff(String);

impl std::fmt::Display for CutOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CutOff {}

/// The answer to a request whose `Content-Encoding` the listener does not
/// accept (`compression_algorithms`): 400, as confighttp answers.
fn unaccepted_encoding<B>(
    req: &http::Request<B>,
    settings: &ServerSettings,
) -> Option<http::Response<axum::body::Body>> {
    let accepted = settings.compression_algorithms.as_ref()?;
    let encoding = req
        .headers()
        .get(http::header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase())
        .unwrap_or_default();
    let known = encoding == "identity" && accepted.iter().any(|a| a.is_empty());
    if known || accepted.contains(&encoding) {
        return None;
    }
    let mut resp = http::Response::new(axum::body::Body::from(format!(
        "unsupported Content-Encoding: {encoding}\n"
    )));
    *resp.status_mut() = http::StatusCode::BAD_REQUEST;
    Some(resp)
}

/// `resp` with each of `headers` it does not set itself.
fn with_headers(
    mut resp: http::Response<axum::body::Body>,
    headers: &[(http::HeaderName, http::HeaderValue)],
) -> http::Response<axum::body::Body> {
    for (k, v) in headers {
        if !resp.headers().contains_key(k) {
            resp.headers_mut().insert(k.clone(), v.clone());
        }
    }
    resp
}

async fn serve_io<I>(
    io: I,
    conn: conns::ConnGuard,
    local: Option<SocketAddr>,
    router: axum::Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    settings: Arc<ServerSettings>,
    shutdown: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let state = conn.clone();
    let info = tonic::transport::server::TcpConnectInfo {
        local_addr: local,
        remote_addr: Some(conn.remote),
    };
    let body_limits = settings.body;
    let answers = settings.clone();
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let request = state.begin_request();
        let refused = unaccepted_encoding(&req, &answers);
        let mut req = req.map(|b| axum::body::Body::new(TimedBody::new(b, body_limits)));
        req.extensions_mut().insert(info.clone());
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(state.remote));
        let call = router.clone().oneshot(req);
        let answers = answers.clone();
        async move {
            let resp = match (refused, answers.write_timeout) {
                (Some(r), _) => r,
                (None, None) => call.await.unwrap_or_else(|e| match e {}),
                // As Go's server: the handler runs on to its end (what it
                // accepted stays accepted); only its answer is lost.
                (None, Some(limit)) => {
                    let mut handler = tokio::spawn(async move {
                        let resp = call.await.unwrap_or_else(|e| match e {});
                        drop(request);
                        resp
                    });
                    match tokio::time::timeout(limit, &mut handler).await {
                        Ok(Ok(resp)) => resp,
                        Ok(Err(e)) => return Err(CutOff(format!("the handler failed: {e}"))),
                        Err(_) => {
                            return Err(CutOff(format!(
                                "no answer within write_timeout ({limit:?})"
                            )))
                        }
                    }
                }
            };
            Ok(with_headers(resp, &answers.response_headers))
        }
    });
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(connection);
    let retire = tokio::select! {
        _ = connection.as_mut() => return,
        _ = shutdown.cancelled() => None,
        _ = conn.retired() => settings.max_connection_age_grace,
    };
    // Graceful: HTTP/1 closes once idle, HTTP/2 sends GOAWAY and lets the
    // streams in flight finish; past the grace the connection is closed.
    connection.as_mut().graceful_shutdown();
    let grace = retire.unwrap_or(Duration::from_secs(30));
    if tokio::time::timeout(grace, connection.as_mut())
        .await
        .is_err()
    {
        conn.close();
        let _ = connection.await;
    }
}

/// Closes idle and too-old connections, once a second.
async fn sweep(slots: Arc<Slots>, settings: Arc<ServerSettings>, shutdown: CancellationToken) {
    if settings.idle_timeout.is_none() && settings.max_connection_age.is_none() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => slots.sweep(settings.idle_timeout, settings.max_connection_age),
        }
    }
}

/// EMFILE or ENFILE: the process or the system has no descriptor left.
fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(24 | 23))
}
