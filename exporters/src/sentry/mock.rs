//! An in-process Sentry for tests: records every request and answers from a
//! script (200 once the script is used up). Shared with the workspace's
//! end-to-end tests through the `testing` feature.

use std::collections::VecDeque;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value as Json;

use profcol_sentry::parse_envelope;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The envelope, after undoing `Content-Encoding`.
    pub fn envelope(&self) -> Vec<u8> {
        match self.header("content-encoding") {
            Some("gzip") => {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&self.body[..])
                    .read_to_end(&mut out)
                    .unwrap();
                out
            }
            None => self.body.to_vec(),
            Some(other) => panic!("unexpected content-encoding {other}"),
        }
    }

    /// The single `profile_chunk` payload as JSON.
    pub fn chunk(&self) -> Json {
        let bytes = self.envelope();
        let env = parse_envelope(&bytes).unwrap();
        assert_eq!(env.items.len(), 1, "one chunk per envelope");
        serde_json::from_slice(env.items[0].payload).unwrap()
    }

    pub fn chunk_id(&self) -> String {
        self.chunk()["chunk_id"].as_str().unwrap().to_owned()
    }

    /// What identifies a chunk's content across attempts (chunk ids of
    /// profiles without an id are random per conversion): its first
    /// timestamp and number of samples.
    pub fn chunk_key(&self) -> (String, usize) {
        let c = self.chunk();
        let samples = c["profile"]["samples"].as_array().unwrap();
        (samples[0]["timestamp"].to_string(), samples.len())
    }
}

struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
}

#[derive(Default)]
struct Inner {
    requests: Mutex<Vec<Recorded>>,
    script: Mutex<VecDeque<Answer>>,
}

pub struct MockSentry {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl MockSentry {
    pub async fn start() -> Self {
        let inner = Arc::new(Inner::default());
        let app = axum::Router::new()
            .fallback(record)
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            inner,
            server,
        }
    }

    pub fn dsn(&self) -> String {
        format!("http://public@{}/42", self.addr)
    }

    /// Queues the answer to the next unanswered request.
    pub fn then(&self, status: u16, headers: &[(&'static str, &str)]) -> &Self {
        self.inner.script.lock().unwrap().push_back(Answer {
            status,
            headers: headers.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        });
        self
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.requests.lock().unwrap().clone()
    }
}

impl Drop for MockSentry {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn record(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    inner.requests.lock().unwrap().push(Recorded {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let answer = inner.script.lock().unwrap().pop_front();
    let Some(a) = answer else {
        return (StatusCode::OK, "{}").into_response();
    };
    let mut resp = (
        StatusCode::from_u16(a.status).unwrap(),
        format!("{{\"detail\":\"scripted {}\"}}", a.status),
    )
        .into_response();
    for (k, v) in a.headers {
        resp.headers_mut().insert(k, v.parse().unwrap());
    }
    resp
}
