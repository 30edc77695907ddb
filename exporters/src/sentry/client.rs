//! POSTs envelopes to Sentry's envelope endpoint and says what the answer
//! means for the chunk, updating the rate limits from every response.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use http::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};

use super::config::Compression;
use super::rate_limits::RateLimits;
use crate::http_client::HttpTls;
use crate::http_common::error_chain;
use profcol_pipeline::config::ConfigErrors;
use profcol_sentry::Dsn;

/// `sentry_client` and `User-Agent`.
pub const CLIENT_NAME: &str = concat!("profcol/", env!("CARGO_PKG_VERSION"));
pub const ENVELOPE_CONTENT_TYPE: &str = "application/x-sentry-envelope";
const SENTRY_RATE_LIMITS: &str = "x-sentry-rate-limits";
const SENTRY_AUTH: &str = "x-sentry-auth";
/// Enough of an error body to say why.
const MAX_DETAIL: usize = 512;

/// What a response means for the chunk it carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// 2xx.
    Delivered,
    /// 429: wait for the rate limit (now recorded) to pass.
    Throttled { detail: String },
    /// 400, 413: this chunk can never be accepted; other chunks may be.
    Refused { status: u16, detail: String },
    /// Other 4xx (bad key, disabled project, ...) and redirects: no chunk
    /// of this exporter can get through until the config changes.
    Fatal { status: u16, detail: String },
    /// 5xx, connection and protocol errors: try again later.
    Retry { message: String },
}

/// Classifies a status as [`Reply`] does (without the detail).
pub fn classify(status: u16) -> Reply {
    let detail = String::new();
    match status {
        200..=299 => Reply::Delivered,
        429 => Reply::Throttled { detail },
        400 | 413 => Reply::Refused { status, detail },
        300..=499 => Reply::Fatal { status, detail },
        _ => Reply::Retry {
            message: format!("HTTP {status}"),
        },
    }
}

pub struct Client {
    http: reqwest::Client,
    url: String,
    auth: String,
    compression: Compression,
}

impl Client {
    /// `tls` (at key path `tls_path`) is how the Sentry at `dsn` is trusted
    /// (a self-hosted one behind a private CA, or asking a client
    /// certificate).
    pub fn new(
        dsn: &Dsn,
        compression: Compression,
        connect_timeout: Duration,
        tls: &HttpTls,
        tls_path: &str,
    ) -> Result<Self, ConfigErrors> {
        let builder = reqwest::Client::builder()
            .user_agent(CLIENT_NAME)
            .connect_timeout(connect_timeout)
            // A redirected POST would turn into a GET: report it instead.
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true);
        let mut errs = ConfigErrors::default();
        let builder = tls.configure(builder, tls_path, &mut errs);
        if !errs.0.is_empty() {
            return Err(errs);
        }
        let http = builder.build().map_err(|e| {
            ConfigErrors::one(tls_path, format!("HTTP client: {}", error_chain(&e)))
        })?;
        Ok(Self {
            http,
            url: dsn.envelope_url(),
            auth: dsn.auth_header(CLIENT_NAME),
            compression,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one envelope body.
    pub async fn send(&self, body: Vec<u8>, limits: &Mutex<RateLimits>) -> Reply {
        let mut req = self
            .http
            .post(&self.url)
            .header(SENTRY_AUTH, &self.auth)
            .header(CONTENT_TYPE, ENVELOPE_CONTENT_TYPE);
        if self.compression == Compression::Gzip {
            req = req.header(CONTENT_ENCODING, "gzip");
        }
        let resp = match req.body(body).send().await {
            Ok(r) => r,
            Err(e) => {
                return Reply::Retry {
                    message: format!("POST {}: {}", self.url, error_chain(&e)),
                }
            }
        };
        let status = resp.status().as_u16();
        let header = |name| resp.headers().get(name).and_then(|v| v.to_str().ok());
        limits.lock().unwrap_or_else(|e| e.into_inner()).update(
            status,
            header(SENTRY_RATE_LIMITS),
            header(RETRY_AFTER.as_str()),
            Instant::now(),
            SystemTime::now(),
        );
        let reply = classify(status);
        if reply == Reply::Delivered {
            return reply;
        }
        let detail = match resp.bytes().await {
            Ok(b) => String::from_utf8_lossy(&b[..b.len().min(MAX_DETAIL)])
                .trim()
                .to_owned(),
            Err(e) => format!("(reading the body: {e})"),
        };
        let detail = format!("HTTP {status} from {}: {detail}", self.url);
        match reply {
            Reply::Throttled { .. } => Reply::Throttled { detail },
            Reply::Refused { status, .. } => Reply::Refused { status, detail },
            Reply::Fatal { status, .. } => Reply::Fatal { status, detail },
            _ => Reply::Retry { message: detail },
        }
    }
}
