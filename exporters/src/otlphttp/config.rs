use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use profcol_otlp::revisions::Revision;
use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use crate::http_client::validate_headers;
use crate::http_client::ClientKeepalive;
pub use crate::http_client::HttpTls;
use crate::otlp::compress::check_level;
use crate::otlp::Compression;

/// The path OTLP/HTTP appends to `endpoint` for profiles.
pub const PROFILES_PATH: &str = "/v1development/profiles";
/// What `endpoint` gets for metrics.
pub(super) const METRICS_PATH: &str = "/v1/metrics";

/// `exporters: otlphttp:` with the Collector's names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpHttpExporterConfig {
    /// Base URL; `/v1development/profiles` is appended.
    pub endpoint: String,
    /// The full URL, used as it is (instead of `endpoint`).
    pub profiles_endpoint: Option<String>,
    /// The full URL metrics are sent to (metrics pipelines), instead of
    /// `endpoint` + `/v1/metrics`.
    pub metrics_endpoint: Option<String>,
    pub encoding: Encoding,
    pub compression: Compression,
    /// confighttp's `compression_params`: the level, 0 for profcol's 1.
    pub compression_params: CompressionParams,
    pub headers: BTreeMap<String, String>,
    pub tls: HttpTls,
    pub auth: Option<AuthConfig>,
    /// The opentelemetry-proto revision the peer reads (`v1.10.0` unless
    /// it has not upgraded), in protobuf and in JSON.
    pub proto_revision: Revision,
    /// `confighttp`'s buffer sizes for Go's HTTP transport; accepted, no
    /// effect (hyper sizes its own buffers).
    pub read_buffer_size: Option<u64>,
    pub write_buffer_size: Option<u64>,
    /// The connections kept between requests; without it, reqwest's pool
    /// (idle connections kept 90 s, any number).
    pub keepalive: Option<ClientKeepalive>,
    /// Requests (so HTTP/1 connections) to the peer at once; 0 is no limit.
    pub max_conns_per_host: usize,
    /// An HTTP proxy every request goes through (`http://` or `https://`;
    /// empty: none). Without it, as Go's transport, `HTTPS_PROXY`,
    /// `HTTP_PROXY` and `NO_PROXY` decide.
    pub proxy_url: String,
    /// Present (and not `enabled: false`): the cookies the peer sets are
    /// kept and sent back, as Go's cookie jar does.
    pub cookies: Option<Cookies>,
    /// `false`: HTTP/1.1 only, also over TLS (Go's transport with its own
    /// TLS config, as confighttp builds it, attempts HTTP/2 only with it).
    pub force_attempt_http2: bool,
    /// Over HTTP/2, a ping after this long without a frame; 0: none.
    pub http2_read_idle_timeout: Duration,
    /// How long a ping's answer is awaited before the connection is
    /// dropped; 0 is Go's 15 s.
    pub http2_ping_timeout: Duration,
}

/// confighttp's `cookies` section (a `configoptional` of no keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cookies {
    pub enabled: Option<bool>,
}

/// `compression_params`, as configcompression reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionParams {
    pub level: i32,
}

impl Default for OtlpHttpExporterConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            profiles_endpoint: None,
            metrics_endpoint: None,
            encoding: Encoding::Proto,
            compression: Compression::Gzip,
            compression_params: CompressionParams::default(),
            headers: BTreeMap::new(),
            tls: HttpTls::default(),
            auth: None,
            proto_revision: Revision::CURRENT,
            read_buffer_size: None,
            write_buffer_size: None,
            keepalive: None,
            max_conns_per_host: 0,
            proxy_url: String::new(),
            cookies: None,
            force_attempt_http2: true,
            http2_read_idle_timeout: Duration::default(),
            http2_ping_timeout: Duration::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    Proto,
    Json,
}

impl Encoding {
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Proto => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

impl OtlpHttpExporterConfig {
    /// reqwest's settings for `cookies`, `force_attempt_http2` and the
    /// HTTP/2 pings.
    pub(super) fn http_settings(&self, mut b: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        if self
            .cookies
            .as_ref()
            .is_some_and(|c| c.enabled != Some(false))
        {
            b = b.cookie_store(true);
        }
        if !self.force_attempt_http2 {
            b = b.http1_only();
        }
        if let Some(idle) = self.http2_read_idle_timeout.nonzero() {
            let ping = self
                .http2_ping_timeout
                .nonzero()
                .unwrap_or(std::time::Duration::from_secs(15));
            b = b
                .http2_keep_alive_interval(idle)
                .http2_keep_alive_timeout(ping)
                .http2_keep_alive_while_idle(true);
        }
        b
    }

    /// Where profiles are posted.
    pub fn url(&self) -> String {
        match &self.profiles_endpoint {
            Some(u) => u.clone(),
            None => format!("{}{PROFILES_PATH}", self.endpoint.trim_end_matches('/')),
        }
    }

    /// Where metrics go: `metrics_endpoint`, else `endpoint` +
    /// `/v1/metrics`; `None` without either.
    pub fn metrics_url(&self) -> Option<String> {
        match &self.metrics_endpoint {
            Some(u) => Some(u.clone()),
            None if self.endpoint.is_empty() => None,
            None => Some(format!(
                "{}{METRICS_PATH}",
                self.endpoint.trim_end_matches('/')
            )),
        }
    }

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if self.endpoint.is_empty() && self.profiles_endpoint.is_none() {
            errs.push(
                cfg.key_path("endpoint"),
                "is required (or profiles_endpoint)",
            );
        } else {
            let key = if self.profiles_endpoint.is_some() {
                "profiles_endpoint"
            } else {
                "endpoint"
            };
            match url::Url::parse(&self.url()) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                Ok(u) => errs.push(
                    cfg.key_path(key),
                    format!("{:?} is not an http:// or https:// URL", u.as_str()),
                ),
                Err(e) => errs.push(
                    cfg.key_path(key),
                    format!("invalid URL {:?}: {e}", self.url()),
                ),
            }
        }
        if let Err(e) = check_level(self.compression, self.compression_params.level) {
            errs.push(cfg.key_path("compression_params::level"), e);
        }
        if !self.proxy_url.is_empty() {
            if let Err(e) = self.proxy() {
                errs.push(cfg.key_path("proxy_url"), e);
            }
        }
        self.tls.validate(&cfg.key_path("tls"), &mut errs);
        validate_headers(&self.headers, cfg, &mut errs);
        errs.into_result(())
    }

    /// `proxy_url` as the client's proxy, when set.
    pub(super) fn proxy(&self) -> Result<Option<reqwest::Proxy>, String> {
        if self.proxy_url.is_empty() {
            return Ok(None);
        }
        let url = url::Url::parse(&self.proxy_url)
            .map_err(|e| format!("invalid URL {:?}: {e}", self.proxy_url))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(format!(
                "{:?} is not an http:// or https:// proxy (socks5 proxies are not supported)",
                self.proxy_url
            ));
        }
        reqwest::Proxy::all(url)
            .map(Some)
            .map_err(|e| format!("{:?}: {e}", self.proxy_url))
    }
}
