//! The listener keys every HTTP receiver takes (the Collector's
//! `confighttp.ServerConfig`, squashed into the receiver's section), and
//! the one way every listener starts: bind, load TLS, then serve.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{BodyLimits, ServerSettings};
use crate::component::AuthConfig;
use crate::config::{ConfigErrors, Duration, ServerTls};

/// What differs between receivers in [`HttpServerConfig`]'s defaults.
pub trait ListenerDefaults {
    const ENDPOINT: &'static str;
    /// Largest body accepted after decompression, in bytes.
    const MAX_REQUEST_BODY_SIZE: u64;
}

/// `endpoint`, `tls`, `auth`, the body limit and the connection limits of
/// an HTTP receiver. A receiver's config embeds it as
/// `#[serde(rename = "__squash")] pub server: HttpServerConfig<Self>`: the
/// config decoder gives it every key the receiver does not name, so the
/// keys stay at the top of the section, as in the Collector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, bound = "")]
pub struct HttpServerConfig<D: ListenerDefaults> {
    pub endpoint: String,
    /// Largest body accepted after decompression, in bytes.
    pub max_request_body_size: u64,
    pub tls: Option<ServerTls>,
    /// An authenticator extension every request must satisfy.
    pub auth: Option<AuthConfig>,
    /// Open connections at once; at the cap the oldest idle one is closed.
    pub max_connections: usize,
    /// The Collector's timeouts; 0 is no limit.
    pub read_header_timeout: Duration,
    pub idle_timeout: Duration,
    pub read_timeout: Duration,
    /// A body must arrive within this, and at `min_body_rate` bytes/s.
    pub body_timeout: Duration,
    pub min_body_rate: u64,
    /// confighttp's `keepalive` section, which replaces the flat
    /// `idle_timeout` there.
    pub keepalive: Option<ServerKeepalive>,
    /// A request whose answer is not written within this of its headers
    /// being read is cut off (as Go's `WriteTimeout`); 0 is no limit.
    pub write_timeout: Duration,
    /// Headers on every answer, unless the answer sets them itself.
    pub response_headers: BTreeMap<String, String>,
    /// The `Content-Encoding`s accepted (`""` is none); unset, all that
    /// profcol reads. Others are refused with 400, as confighttp does.
    pub compression_algorithms: Option<Vec<String>>,
    #[serde(skip)]
    defaults: PhantomData<fn() -> D>,
}

impl<D: ListenerDefaults> Default for HttpServerConfig<D> {
    fn default() -> Self {
        Self {
            endpoint: D::ENDPOINT.into(),
            max_request_body_size: D::MAX_REQUEST_BODY_SIZE,
            tls: None,
            auth: None,
            max_connections: 1024,
            read_header_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(0),
            body_timeout: Duration::from_secs(30),
            min_body_rate: 1024,
            keepalive: None,
            write_timeout: Duration::from_secs(30),
            response_headers: BTreeMap::new(),
            compression_algorithms: None,
            defaults: PhantomData,
        }
    }
}

/// `keepalive:` of an HTTP server, as confighttp reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerKeepalive {
    /// `false`: an HTTP/1 connection closes after each response.
    pub enabled: bool,
    /// When set, the flat `idle_timeout`'s replacement.
    pub idle_timeout: Option<Duration>,
}

impl Default for ServerKeepalive {
    fn default() -> Self {
        Self {
            enabled: true,
            idle_timeout: None,
        }
    }
}

impl<D: ListenerDefaults> HttpServerConfig<D> {
    /// These settings at another endpoint.
    pub fn at(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            ..Self::default()
        }
    }

    /// What the listener allows its clients; a zero duration is no limit.
    pub fn server_settings(&self) -> ServerSettings {
        ServerSettings {
            max_connections: self.max_connections,
            read_header_timeout: self.read_header_timeout.nonzero(),
            idle_timeout: self
                .keepalive
                .as_ref()
                .and_then(|k| k.idle_timeout)
                .unwrap_or(self.idle_timeout)
                .nonzero(),
            keep_alive: self.keepalive.as_ref().is_none_or(|k| k.enabled),
            write_timeout: self.write_timeout.nonzero(),
            response_headers: self
                .response_headers
                .iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, v.parse().ok()?)))
                .collect(),
            compression_algorithms: self
                .compression_algorithms
                .clone()
                .map(|list| list.iter().map(|a| a.trim().to_ascii_lowercase()).collect()),
            body: BodyLimits {
                timeout: self.body_timeout.nonzero(),
                min_rate: self.min_body_rate,
                read_timeout: self.read_timeout.nonzero(),
            },
            ..ServerSettings::default()
        }
    }

    /// Checks the keys, reporting each at `key(name)`.
    pub fn validate(&self, key: impl Fn(&str) -> String, errs: &mut ConfigErrors) {
        if let Err(e) = super::endpoint::check(&self.endpoint) {
            errs.push(key("endpoint"), e);
        }
        if self.max_request_body_size == 0 {
            errs.push(key("max_request_body_size"), "must be greater than 0");
        }
        if self.max_connections == 0 {
            errs.push(key("max_connections"), "must be greater than 0");
        }
        if let Some(t) = &self.tls {
            t.validate(&key("tls"), errs);
        }
        for (k, v) in &self.response_headers {
            if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                errs.push(
                    key(&format!("response_headers::{k}")),
                    "invalid header name",
                );
            } else if http::HeaderValue::from_str(v).is_err() {
                errs.push(
                    key(&format!("response_headers::{k}")),
                    "invalid header value",
                );
            }
        }
        for (i, a) in self.compression_algorithms.iter().flatten().enumerate() {
            if !super::CONTENT_ENCODINGS.contains(&a.trim().to_ascii_lowercase().as_str()) {
                errs.push(
                    key(&format!("compression_algorithms::{i}")),
                    format!(
                        "{a:?} is not a compression profcol reads ({})",
                        super::CONTENT_ENCODINGS.join(", ")
                    ),
                );
            }
        }
    }

    /// Binds the endpoint and loads TLS: [`open`] with these settings.
    pub async fn open(&self, name: &str, stop: &CancellationToken) -> anyhow::Result<Opened> {
        open(
            name,
            &self.endpoint,
            self.tls.as_ref(),
            self.server_settings(),
            stop,
        )
        .await
    }
}

/// A bound listener with its settings, TLS loaded: everything that can
/// fail at start has been tried.
pub struct Opened {
    name: String,
    listener: TcpListener,
    settings: ServerSettings,
}

/// Binds `endpoint` for the listener `name` (`receivers::sentry`) and loads
/// its TLS (reloaded until `stop` as `tls::reload_interval` asks).
pub async fn open(
    name: &str,
    endpoint: &str,
    tls: Option<&ServerTls>,
    mut settings: ServerSettings,
    stop: &CancellationToken,
) -> anyhow::Result<Opened> {
    let listener = super::endpoint::bind(endpoint, name).await?;
    if let Some(t) = tls {
        settings.tls = Some(super::tls::server_config(t, name, stop.clone())?);
    }
    Ok(Opened {
        name: name.to_owned(),
        listener,
        settings,
    })
}

impl Opened {
    /// Serves `router` until `shutdown` (see [`super::spawn`]).
    pub fn serve(
        self,
        router: axum::Router,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        super::spawn(&self.name, self.listener, router, self.settings, shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ComponentConfig, Kind};

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Receiver {
        #[serde(rename = "__squash")]
        server: HttpServerConfig<Self>,
        record_to: Option<String>,
        nested: Nested,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Nested {
        size: u64,
    }

    impl ListenerDefaults for Receiver {
        const ENDPOINT: &'static str = "localhost:3000";
        const MAX_REQUEST_BODY_SIZE: u64 = 7;
    }

    fn decode(yaml: &str) -> Result<Receiver, Vec<String>> {
        ComponentConfig::from_yaml(Kind::Receiver, "r", yaml)
            .unwrap()
            .decode::<Receiver>()
            .map_err(|e| e.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn listener_keys_sit_beside_the_receivers_own() {
        let r = decode("endpoint: 0.0.0.0:1\nrecord_to: /r\nidle_timeout: 5s\nnested: {size: 3}")
            .unwrap();
        assert_eq!(r.server.endpoint, "0.0.0.0:1");
        assert_eq!(r.server.idle_timeout, Duration::from_secs(5));
        assert_eq!(r.server.max_request_body_size, 7, "the receiver's default");
        assert_eq!((r.record_to.as_deref(), r.nested.size), (Some("/r"), 3));
        for empty in ["{}", "null", "record_to: /r"] {
            let r = decode(empty).unwrap();
            assert_eq!(r.server, HttpServerConfig::at("localhost:3000"), "{empty}");
        }
    }

    /// confighttp's `keepalive` section: its `idle_timeout` replaces the
    /// flat one, and `enabled: false` turns HTTP/1 keep-alive off.
    #[test]
    fn the_keepalive_section_sets_idle_timeout_and_keep_alive() {
        let r = decode("idle_timeout: 5s").unwrap().server.server_settings();
        assert_eq!(
            (r.idle_timeout, r.keep_alive),
            (Some(std::time::Duration::from_secs(5)), true)
        );
        let r = decode("idle_timeout: 5s\nkeepalive: {enabled: false, idle_timeout: 7s}")
            .unwrap()
            .server
            .server_settings();
        assert_eq!(
            (r.idle_timeout, r.keep_alive),
            (Some(std::time::Duration::from_secs(7)), false)
        );
        let r = decode("keepalive: {}").unwrap().server.server_settings();
        assert_eq!(
            (r.idle_timeout, r.keep_alive),
            (Some(std::time::Duration::from_secs(60)), true)
        );
        let errs = decode("keepalive: {idle_timout: 1s}").unwrap_err();
        assert!(
            errs[0].starts_with("receivers::r::keepalive: unknown field \"idle_timout\""),
            "{errs:?}"
        );
    }

    /// confighttp's server keys as its testdata writes them, and what
    /// `validate` refuses of them, at their paths.
    #[test]
    fn write_timeout_response_headers_and_compression_algorithms() {
        let r = decode("{}").unwrap().server.server_settings();
        assert_eq!(r.write_timeout, Some(std::time::Duration::from_secs(30)));
        assert_eq!(r.compression_algorithms, None);
        let c = decode(
            "write_timeout: 0s\nresponse_headers: {Server: OpenTelemetry-Collector, X-Flavor: apple}\n\
             compression_algorithms: ['', gzip, zstd, zlib, snappy, deflate]",
        )
        .unwrap()
        .server;
        let r = c.server_settings();
        assert_eq!(r.write_timeout, None);
        assert_eq!(r.response_headers.len(), 2);
        assert_eq!(
            r.compression_algorithms.unwrap(),
            ["", "gzip", "zstd", "zlib", "snappy", "deflate"]
        );
        let mut errs = ConfigErrors::default();
        c.validate(|k| format!("r::{k}"), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let c =
            decode("response_headers: {'bad name': x}\ncompression_algorithms: [gzip, compress]")
                .unwrap()
                .server;
        let mut errs = ConfigErrors::default();
        c.validate(|k| format!("r::{k}"), &mut errs);
        let errs: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("r::response_headers::bad name: invalid header name"));
        assert!(errs[1].starts_with(
            "r::compression_algorithms::1: \"compress\" is not a compression profcol reads"
        ));
    }

    #[test]
    fn bad_keys_of_either_part_are_named_at_their_paths() {
        let errs = decode(
            "endpont: x\nmax_connections: many\ntls: {cert_fle: a}\nnested: {sise: 1}\nrecord_to: /r",
        )
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "receivers::r::nested: unknown field \"sise\", expected \"size\"".to_owned(),
                "receivers::r: unknown field \"endpont\", expected one of \"record_to\", \
                 \"nested\", \"endpoint\", \"max_request_body_size\", \"tls\", \"auth\", \
                 \"max_connections\", \"read_header_timeout\", \"idle_timeout\", \
                 \"read_timeout\", \"body_timeout\", \"min_body_rate\", \"keepalive\", \
                 \"write_timeout\", \"response_headers\", \"compression_algorithms\""
                    .into(),
                "receivers::r::max_connections: invalid type: expected usize, got string \"many\""
                    .into(),
                "receivers::r::tls: unknown field \"cert_fle\", expected one of \"cert_file\", \
                 \"key_file\", \"cert_pem\", \"key_pem\", \"client_ca_file\", \"ca_file\", \
                 \"min_version\", \"max_version\", \"reload_interval\""
                    .into(),
            ]
        );
    }
}
