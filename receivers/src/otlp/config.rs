use serde::{Deserialize, Serialize};

use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, ServerTls};
use profcol_pipeline::net::{HttpServerConfig, ListenerDefaults, ServerSettings};

use crate::ingest::OnInvalid;

/// `receivers: otlp:` — the Collector's names: gRPC and HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpReceiverConfig {
    pub protocols: Protocols,
    /// Directory where every accepted request is recorded (see `record`).
    pub record_to: Option<String>,
    /// Recordings kept in `record_to`; the oldest go first. 0: no limit.
    pub record_max_files: usize,
    /// `repair` (the common producer mistakes, counted) or `refuse`.
    pub on_invalid: OnInvalid,
}

impl Default for OtlpReceiverConfig {
    fn default() -> Self {
        Self {
            protocols: Protocols::default(),
            record_to: None,
            record_max_files: 1000,
            on_invalid: OnInvalid::default(),
        }
    }
}

/// A protocol is on when its key is present (`grpc:` alone, or `null`,
/// means its defaults), as in the Collector; with neither present, gRPC is
/// on with its defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Protocols {
    #[serde(deserialize_with = "present")]
    pub grpc: Option<GrpcConfig>,
    #[serde(deserialize_with = "present")]
    pub http: Option<HttpConfig>,
}

/// A present key is on, `null` too (with the defaults).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Some(Option::<T>::deserialize(d)?.unwrap_or_default()))
}

/// `protocols: http:` — OTLP/HTTP (`POST /v1development/profiles`), with the
/// Collector's `confighttp` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// `endpoint`, `tls`, `auth`, the body and connection limits: the keys
    /// every HTTP receiver shares.
    #[serde(rename = "__squash")]
    pub server: HttpServerConfig<Self>,
    /// The path profiles are posted to.
    pub profiles_url_path: String,
    /// Keep the request's headers with the batch (for `batch`'s
    /// `metadata_keys`); credentials are never kept.
    pub include_metadata: bool,
    pub cors: Option<CorsConfig>,
    /// Only `tcp` is supported.
    pub transport: String,
    /// The Collector's paths of the other signals, which profcol does not
    /// receive: checked as the Collector parses them, no effect.
    pub traces_url_path: Option<String>,
    pub metrics_url_path: Option<String>,
    pub logs_url_path: Option<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            server: HttpServerConfig::default(),
            profiles_url_path: "/v1development/profiles".into(),
            include_metadata: false,
            cors: None,
            transport: "tcp".into(),
            traces_url_path: None,
            metrics_url_path: None,
            logs_url_path: None,
        }
    }
}

/// `cors:` as `confighttp` has it: browsers on these origins may post.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins allowed (`*`, `https://example.com`, or one `*` wildcard
    /// such as `https://*.example.com`).
    pub allowed_origins: Vec<String>,
    /// Headers allowed besides the CORS-safelisted ones.
    pub allowed_headers: Vec<String>,
    /// Seconds a preflight answer may be cached (0: the browser decides).
    pub max_age: u64,
}

impl ListenerDefaults for HttpConfig {
    const ENDPOINT: &'static str = "localhost:4318";
    const MAX_REQUEST_BODY_SIZE: u64 = 20 << 20;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcConfig {
    pub endpoint: String,
    /// Largest request accepted, after decompression, in MiB.
    pub max_recv_msg_size_mib: u64,
    /// Concurrent HTTP/2 streams per connection; 0 leaves the default.
    pub max_concurrent_streams: u32,
    /// Only `tcp` is supported.
    pub transport: String,
    /// Open connections at once (profcol's own); at the cap the oldest
    /// idle one is closed to admit a new one.
    pub max_connections: usize,
    pub keepalive: Keepalive,
    /// Keep the request's metadata with the batch; credentials never.
    pub include_metadata: bool,
    pub tls: Option<ServerTls>,
    pub auth: Option<AuthConfig>,
    /// gRPC-Go's socket buffer sizes; accepted, no effect (hyper sizes its
    /// own buffers).
    pub read_buffer_size: Option<u64>,
    pub write_buffer_size: Option<u64>,
}

/// `keepalive`, as the Collector's `configgrpc` spells it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Keepalive {
    pub server_parameters: ServerParameters,
    pub enforcement_policy: EnforcementPolicy,
}

/// gRPC's keepalive server parameters; `0` is "infinity" as in gRPC-Go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerParameters {
    /// A connection with no call in flight for this long is closed.
    pub max_connection_idle: Duration,
    /// Connections older than this get GOAWAY...
    pub max_connection_age: Duration,
    /// ...and are closed this long after, whatever is in flight.
    pub max_connection_age_grace: Duration,
    /// A ping after this long without a frame...
    pub time: Duration,
    /// ...must be answered within this.
    pub timeout: Duration,
}

impl Default for ServerParameters {
    fn default() -> Self {
        Self {
            max_connection_idle: Duration::from_secs(300),
            max_connection_age: Duration::default(),
            max_connection_age_grace: Duration::default(),
            time: Duration::from_secs(7200),
            timeout: Duration::from_secs(20),
        }
    }
}

/// Accepted so that Collector configs load; not enforced (the HTTP/2
/// server answers every ping).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnforcementPolicy {
    pub min_time: Duration,
    pub permit_without_stream: bool,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        Self {
            endpoint: "localhost:4317".into(),
            max_recv_msg_size_mib: 64,
            max_concurrent_streams: 0,
            transport: "tcp".into(),
            max_connections: 1024,
            keepalive: Keepalive::default(),
            include_metadata: false,
            tls: None,
            auth: None,
            read_buffer_size: None,
            write_buffer_size: None,
        }
    }
}

/// Why a transport other than TCP is refused.
fn unsupported_transport(t: &str) -> String {
    format!("unsupported transport {t:?}: profcol listens on TCP only (host:port)")
}

impl GrpcConfig {
    /// What the listener allows its clients.
    pub fn server_settings(&self) -> ServerSettings {
        let p = &self.keepalive.server_parameters;
        ServerSettings {
            max_connections: self.max_connections,
            idle_timeout: p.max_connection_idle.nonzero(),
            max_connection_age: p.max_connection_age.nonzero(),
            max_connection_age_grace: p.max_connection_age_grace.nonzero(),
            keepalive_time: p.time.nonzero(),
            keepalive_timeout: p.timeout.get(),
            max_concurrent_streams: (self.max_concurrent_streams > 0)
                .then_some(self.max_concurrent_streams),
            ..ServerSettings::default()
        }
    }
}

impl OtlpReceiverConfig {
    /// gRPC's settings when it is on.
    pub fn grpc(&self) -> Option<GrpcConfig> {
        match (&self.protocols.grpc, &self.protocols.http) {
            (Some(g), _) => Some(g.clone()),
            (None, None) => Some(GrpcConfig::default()),
            (None, Some(_)) => None,
        }
    }

    pub fn http(&self) -> Option<HttpConfig> {
        self.protocols.http.clone()
    }

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let grpc = self.grpc();
        let key = |k: &str| cfg.key_path(&format!("protocols::grpc::{k}"));
        if let Some(g) = &grpc {
            // A unix socket path is not host:port: the transport says why.
            if g.transport != "tcp" {
                errs.push(key("transport"), unsupported_transport(&g.transport));
            } else if let Err(e) = profcol_pipeline::net::endpoint::check(&g.endpoint) {
                errs.push(key("endpoint"), e);
            }
            if g.max_recv_msg_size_mib == 0 || g.max_recv_msg_size_mib > 4095 {
                errs.push(
                    key("max_recv_msg_size_mib"),
                    format!(
                        "must be between 1 and 4095, got {}",
                        g.max_recv_msg_size_mib
                    ),
                );
            }
        }
        crate::record::validate(self.record_to.as_deref(), cfg, &mut errs);
        if let Some(g) = &grpc {
            if g.max_connections == 0 {
                errs.push(key("max_connections"), "must be greater than 0");
            }
            if let Some(t) = &g.tls {
                t.validate(&key("tls"), &mut errs);
            }
        }
        if let Some(h) = self.http() {
            let key = |k: &str| cfg.key_path(&format!("protocols::http::{k}"));
            if h.transport != "tcp" {
                errs.push(key("transport"), unsupported_transport(&h.transport));
            }
            let mut server = ConfigErrors::default();
            h.server.validate(key, &mut server);
            // With another transport the endpoint is a socket path: the
            // transport says why.
            errs.0.extend(
                server
                    .0
                    .into_iter()
                    .filter(|e| h.transport == "tcp" || !e.is_at_or_under(&key("endpoint"))),
            );
            for (k, p) in [
                ("traces_url_path", &h.traces_url_path),
                ("metrics_url_path", &h.metrics_url_path),
                ("logs_url_path", &h.logs_url_path),
            ] {
                // What Go's url.Parse refuses of a path; any other text is
                // a path (the Collector puts a '/' before a relative one).
                if p.as_deref().is_some_and(|p| p.starts_with(':')) {
                    errs.push(
                        key(k),
                        "invalid HTTP URL path set for signal: missing protocol scheme",
                    );
                }
            }
            if !h.profiles_url_path.starts_with('/') {
                errs.push(
                    key("profiles_url_path"),
                    format!("must start with '/', got {:?}", h.profiles_url_path),
                );
            }
            if let Some(g) = self.grpc() {
                if profcol_pipeline::net::endpoint::same_port(&g.endpoint, &h.server.endpoint) {
                    errs.push(
                        key("endpoint"),
                        format!("{} is also the gRPC endpoint", h.server.endpoint),
                    );
                }
            }
        }
        errs.into_result(())
    }

    /// The authenticators named, with their key paths.
    pub fn authenticators(&self) -> Vec<(String, String)> {
        let g = self.grpc().and_then(|g| g.auth).map(|a| {
            (
                "protocols::grpc::auth::authenticator".to_owned(),
                a.authenticator,
            )
        });
        let h = self.http().and_then(|h| h.server.auth).map(|a| {
            (
                "protocols::http::auth::authenticator".to_owned(),
                a.authenticator,
            )
        });
        g.into_iter().chain(h).collect()
    }
}
