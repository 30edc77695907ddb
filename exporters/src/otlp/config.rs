use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};

use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::formats::otlp_revisions::Revision;

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
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
    Zstd,
    /// `none` or an empty string, as in the Collector.
    #[serde(alias = "")]
    None,
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

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if self.endpoint.is_empty() {
            errs.push(cfg.key_path("endpoint"), "is required");
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
    let key = AsciiMetadataKey::from_bytes(name.as_bytes()).map_err(|_| "invalid header name");
    let value = if value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        value
            .parse::<AsciiMetadataValue>()
            .map_err(|_| "invalid header value")
    } else {
        Err("invalid header value: only printable ASCII is allowed")
    };
    (key, value)
}
