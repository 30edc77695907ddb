//! One HTTP/1.1 request on a connection of its own: what the network
//! detectors ask a local service (the Docker daemon, an instance metadata
//! service).

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// Their answers are a few kilobytes; a service sending more is not one.
const MAX_BODY: usize = 1 << 20;

/// `method path` on `stream` to `host`, with one extra header: the status
/// and the body.
pub(super) async fn request<S>(
    stream: S,
    host: &str,
    method: hyper::Method,
    path: &str,
    header: Option<(&str, &str)>,
) -> Result<(u16, Bytes), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (status, _, body) = request_with_headers(stream, host, method, path, header).await?;
    Ok((status, body))
}

/// [`request`], the answer's headers too.
pub(super) async fn request_with_headers<S>(
    stream: S,
    host: &str,
    method: hyper::Method,
    path: &str,
    header: Option<(&str, &str)>,
) -> Result<(u16, hyper::HeaderMap, Bytes), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, host);
    if let Some((name, value)) = header {
        req = req.header(name, value);
    }
    let req = req.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("{path}: {e}"))?
        .to_bytes();
    conn.abort();
    Ok((status, headers, body))
}

/// `method path` to the metadata service at `at` (`host:port`), with one
/// extra header, on a connection of its own: the status and the body.
/// Every detector's request to such a service. The `Host` is `at` without
/// a port 80, as Go's client sends it. With a `timeout` (connecting
/// included), as Go's `http.Client` with that `Timeout`; without one, the
/// detection's `timeout` bounds it.
pub(super) async fn call(
    at: &str,
    method: hyper::Method,
    path: &str,
    header: Option<(&str, &str)>,
    timeout: Option<std::time::Duration>,
) -> Result<(u16, Bytes), CallError> {
    let host = at.strip_suffix(":80").unwrap_or(at);
    let (first, rest) = method.as_str().split_at(1);
    let url = format!(
        "{first}{} \"http://{host}{path}\"",
        rest.to_ascii_lowercase()
    );
    let query = async {
        let stream = tokio::net::TcpStream::connect(at)
            .await
            .map_err(|e| format!("dial tcp {at}: {e}"))?;
        request(stream, host, method, path, header).await
    };
    let answer = match timeout {
        None => query.await,
        Some(timeout) => tokio::time::timeout(timeout, query)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within {timeout:?} (Client.Timeout exceeded)"
                ))
            }),
    };
    answer.map_err(|why| CallError { url, why })
}

/// Why a [`call`] got no answer. It reads as the reason alone
/// (`dial tcp …`); [`CallError::go`] words it as Go's client does.
#[derive(Debug)]
pub(super) struct CallError {
    /// Go's method and quoted URL: `Get "http://host/path"`.
    url: String,
    why: String,
}

impl CallError {
    /// As Go's `http.Client` words it: `Get "http://<host><path>": <why>`.
    pub(super) fn go(self) -> String {
        format!("{}: {}", self.url, self.why)
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl From<CallError> for String {
    fn from(e: CallError) -> String {
        e.why
    }
}

/// A status as Go's `Response.Status` reads: `404 Not Found`.
pub(super) fn status_text(status: u16) -> String {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("{status} {reason}").trim_end().to_string()
}

/// The first JSON value of `body`, as Go's `json.NewDecoder(r).Decode`
/// reads it (what follows is not read); an empty body is `EOF`.
pub(super) fn decode_first<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    match serde_json::Deserializer::from_slice(body)
        .into_iter::<T>()
        .next()
    {
        Some(v) => v.map_err(|e| e.to_string()),
        None => Err("EOF".into()),
    }
}

/// A metadata service's base URL (`http://host[:port]`) as `host:port`.
pub(super) fn authority(base: &str) -> Result<String, String> {
    let url = url::Url::parse(base).map_err(|e| format!("{base:?}: {e}"))?;
    let host = url.host_str().ok_or_else(|| format!("{base:?}: no host"))?;
    Ok(format!(
        "{host}:{}",
        url.port_or_known_default().unwrap_or(80)
    ))
}

/// The client of a metadata service reached by URL (also over `https://`):
/// the Collector's providers' `http.Client`, with their 5s timeout and the
/// proxy the environment names.
pub(super) fn url_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

/// An answer's status and body (its first [`MAX_BODY`] bytes, as the
/// providers read it).
pub(super) async fn read(resp: reqwest::Response) -> Result<(u16, Bytes), String> {
    let status = resp.status().as_u16();
    let mut body = resp.bytes().await.map_err(|e| e.to_string())?;
    body.truncate(MAX_BODY);
    Ok((status, body))
}
