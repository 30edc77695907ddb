use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};

use profcol_otlp::revisions::Revision;
use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

/// `exporters: otlp:` with the Collector's names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpExporterConfig {
    /// `host:port`, or a URL whose `http`/`https` scheme picks plain or TLS.
    pub endpoint: String,
    pub tls: TlsConfig,
    /// Sent as gRPC metadata with every request.
    pub headers: BTreeMap<String, String>,
    pub compression: Compression,
    /// An extension (`bearertokenauth`) whose credentials go with every call.
    pub auth: Option<AuthConfig>,
    /// The opentelemetry-proto revision the peer reads (`v1.10.0` unless
    /// it has not upgraded).
    pub proto_revision: Revision,
    /// HTTP/2 pings that find a dead connection, as `configgrpc` has them.
    pub keepalive: ClientKeepalive,
    /// gRPC's load-balancing policy: `round_robin` (unset: the
    /// Collector's default) spreads calls over every address the host
    /// name resolves to; `pick_first` (or `""`, gRPC's own default) keeps
    /// one connection, to the first address that answers.
    pub balancer_name: Option<String>,
    /// The Collector's socket buffer sizes for gRPC-Go; accepted, no effect
    /// (hyper sizes its own buffers).
    pub read_buffer_size: Option<u64>,
    pub write_buffer_size: Option<u64>,
}

/// `keepalive` of a gRPC client, with `configgrpc`'s names and defaults: after
/// `time` without a frame from the server, a ping is sent, and the connection
/// is closed if no answer comes within `timeout`. Pings go only while a call
/// is in flight, unless `permit_without_stream`. `time: 0` sends none; below
/// 10 s it is raised to 10 s, as gRPC-Go does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientKeepalive {
    pub time: Duration,
    pub timeout: Duration,
    pub permit_without_stream: bool,
}

impl Default for ClientKeepalive {
    fn default() -> Self {
        Self {
            time: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
            permit_without_stream: false,
        }
    }
}

impl ClientKeepalive {
    /// The ping interval, if pings are on.
    pub fn interval(&self) -> Option<std::time::Duration> {
        const MIN: std::time::Duration = std::time::Duration::from_secs(10);
        self.time.nonzero().map(|t| t.max(MIN))
    }
}

impl Default for OtlpExporterConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            tls: TlsConfig::default(),
            headers: BTreeMap::new(),
            compression: Compression::Gzip,
            auth: None,
            proto_revision: Revision::CURRENT,
            keepalive: ClientKeepalive::default(),
            balancer_name: None,
            read_buffer_size: None,
            write_buffer_size: None,
        }
    }
}

/// configcompression's types. `otlp` (gRPC) sends `gzip`, `zstd` and
/// `snappy` (the framing format, as configgrpc's codec); `otlphttp` all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
    Zstd,
    /// The zlib format, as confighttp writes it for `zlib` and `deflate`.
    Zlib,
    Deflate,
    /// A raw snappy block (confighttp); the framing format over gRPC.
    Snappy,
    /// The snappy framing format.
    #[serde(rename = "x-snappy-framed")]
    SnappyFramed,
    /// The LZ4 frame format.
    Lz4,
    /// `none` or an empty string, as in the Collector.
    #[serde(alias = "")]
    None,
}

impl Compression {
    /// The encoding it sends, in the model's terms, when the model keeps
    /// received bytes in it (so that they can be sent as they came).
    pub fn encoding(self) -> Option<profcol_model::compressed::Encoding> {
        use profcol_model::compressed::Encoding;
        match self {
            Self::Gzip => Some(Encoding::Gzip),
            Self::Zstd => Some(Encoding::Zstd),
            _ => None,
        }
    }

    /// Its name in the config, `Content-Encoding` and `grpc-encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
            Self::Zlib => "zlib",
            Self::Deflate => "deflate",
            Self::Snappy => "snappy",
            Self::SnappyFramed => "x-snappy-framed",
            Self::Lz4 => "lz4",
            Self::None => "none",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Plain-text HTTP/2 (no TLS).
    pub insecure: bool,
    /// PEM file of CAs to trust instead of the system's.
    pub ca_file: Option<String>,
    /// Client certificate and key for mutual TLS.
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    /// Name to verify the server certificate against.
    pub server_name_override: Option<String>,
}

impl OtlpExporterConfig {
    /// Whether the connection is plain text: an `http://` endpoint or
    /// `tls.insecure`, as the Collector decides.
    pub fn plaintext(&self) -> bool {
        if self.endpoint.starts_with("https://") {
            false
        } else {
            self.endpoint.starts_with("http://") || self.tls.insecure
        }
    }

    /// Whether calls are spread over the addresses of the endpoint's host
    /// name (`round_robin`, also when unset, as in the Collector, whose
    /// default it is); an explicit `""` is gRPC's own default, `pick_first`.
    pub fn round_robin(&self) -> bool {
        matches!(self.balancer_name.as_deref(), None | Some("round_robin"))
    }

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if self.endpoint.is_empty() {
            errs.push(cfg.key_path("endpoint"), "is required");
        } else if let Err(e) = dial_target(&self.endpoint) {
            errs.push(
                cfg.key_path("endpoint"),
                format!("invalid endpoint {:?}: {e}", self.endpoint),
            );
        }
        match self.balancer_name.as_deref() {
            None | Some("" | "pick_first" | "round_robin") => {}
            Some(other) => errs.push(
                cfg.key_path("balancer_name"),
                format!("invalid balancer_name {other:?} (round_robin or pick_first)"),
            ),
        }
        if !matches!(
            self.compression,
            Compression::Gzip | Compression::Zstd | Compression::Snappy | Compression::None
        ) {
            // configgrpc takes these at validate and fails at start.
            errs.push(
                cfg.key_path("compression"),
                format!(
                    "unsupported compression type {:?}: gRPC sends gzip, zstd, snappy or none",
                    self.compression.name()
                ),
            );
        }
        if self.cert_pair_incomplete() {
            errs.push(
                cfg.key_path("tls"),
                "cert_file and key_file must be set together",
            );
        }
        for (k, v) in &self.headers {
            let at = cfg.key_path(&format!("headers::{k}"));
            let (key, value) = metadata_entry(k, v);
            if let Err(e) = key {
                errs.push(&at, e);
            }
            if let Err(e) = value {
                errs.push(at, e);
            }
        }
        errs.into_result(())
    }

    fn cert_pair_incomplete(&self) -> bool {
        self.tls.cert_file.is_some() != self.tls.key_file.is_some()
    }
}

/// The `host:port` an endpoint dials, checked as the Collector's
/// `configgrpc` checks it at validate: an `http://` or `https://` scheme
/// (which picks plain text or TLS) or a gRPC `dns:` or `passthrough:`
/// target (`dns:///host:port`, whose authority, if any, is ignored) is
/// taken off, and what is left must be `host:port` with a numeric port.
/// A trailing `/` is tolerated. `unix://` targets are refused: this
/// exporter dials TCP only (the Collector refuses an empty socket path
/// at validate, and dials a given one).
pub fn dial_target(endpoint: &str) -> Result<&str, String> {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        return Err(if path.is_empty() {
            "unix socket path cannot be empty".into()
        } else {
            "unix sockets are not supported: profcol's otlp exporter dials TCP, give host:port"
                .into()
        });
    }
    let mut bare = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .unwrap_or(endpoint);
    if let Some((scheme, rest)) = bare.split_once("://") {
        match scheme {
            // gRPC's target syntax: scheme://[authority]/endpoint.
            "dns" | "passthrough" => {
                bare = rest.split_once('/').map(|(_, e)| e).unwrap_or(rest);
            }
            _ => {
                return Err(format!(
                    "unsupported scheme {scheme:?} (use host:port, http://, https://, dns:/// or passthrough:///)"
                ))
            }
        }
    }
    let bare = bare.trim_end_matches('/');
    if bare.is_empty() {
        return Err("no host:port".into());
    }
    let port = match bare.strip_prefix('[') {
        // [IPv6]:port
        Some(v6) => match v6.split_once(']') {
            Some((_, rest)) => rest.strip_prefix(':'),
            None => return Err(format!("address {bare}: missing ']' in address")),
        },
        None => match bare.split_once(':') {
            Some((_, p)) if p.contains(':') => {
                return Err(format!("address {bare}: too many colons in address"))
            }
            Some((_, p)) => Some(p),
            None => None,
        },
    };
    match port {
        None => Err(format!(
            "address {bare}: missing port in address (write host:port, e.g. {bare}:4317)"
        )),
        Some(p) if p.parse::<u16>().is_err() => Err(format!("invalid port {p:?}")),
        Some(_) => Ok(bare),
    }
}

/// One `headers` entry as gRPC metadata, the name and the value checked
/// apart so that both problems are reported. A value must be printable
/// ASCII (0x20-0x7E), as gRPC's spec and grpc-go have it: tonic alone
/// would let bytes above 0x7E through.
pub(super) fn metadata_entry(
    name: &str,
    value: &str,
) -> (
    Result<AsciiMetadataKey, &'static str>,
    Result<AsciiMetadataValue, &'static str>,
) {
    let key = AsciiMetadataKey::from_bytes(name.as_bytes()).map_err(|_| {
        "invalid header name: gRPC metadata names are letters, digits, '-', '_' and '.' (the Collector takes this one here and then fails every export)"
    });
    let value = if value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        value
            .parse::<AsciiMetadataValue>()
            .map_err(|_| "invalid header value")
    } else {
        Err("invalid header value: only printable ASCII is allowed")
    };
    (key, value)
}
