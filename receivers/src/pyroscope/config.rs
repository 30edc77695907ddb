use serde::{Deserialize, Serialize};

use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, ServerTls};
use profcol_pipeline::net::{BodyLimits, ServerSettings};

/// `receivers: pyroscope:` — the push API of the Pyroscope server, as its
/// SDKs and Grafana Alloy use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PyroscopeReceiverConfig {
    pub endpoint: String,
    /// Largest body accepted after decompression, in bytes; also the
    /// largest pprof once a gzip'd profile inside it is inflated.
    pub max_request_body_size: u64,
    /// Directory where every accepted request is recorded (see `record`).
    pub record_to: Option<String>,
    /// Recordings kept in `record_to`; the oldest go first. 0: no limit.
    pub record_max_files: usize,
    /// Connection limits and timeouts, as the `sentry` receiver's.
    pub max_connections: usize,
    pub read_header_timeout: Duration,
    pub idle_timeout: Duration,
    pub read_timeout: Duration,
    pub body_timeout: Duration,
    pub min_body_rate: u64,
    pub tls: Option<ServerTls>,
    /// An authenticator every request must satisfy (the SDKs' `auth_token`
    /// / `authToken` arrive as `Authorization: Bearer <token>`).
    pub auth: Option<AuthConfig>,
}

impl Default for PyroscopeReceiverConfig {
    fn default() -> Self {
        Self {
            // Pyroscope's own port.
            endpoint: "localhost:4040".into(),
            max_request_body_size: 64 << 20,
            record_to: None,
            record_max_files: 1000,
            max_connections: 1024,
            read_header_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(0),
            body_timeout: Duration::from_secs(30),
            min_body_rate: 1024,
            tls: None,
            auth: None,
        }
    }
}

impl PyroscopeReceiverConfig {
    /// What the listener allows its clients; a zero duration is no limit.
    pub fn server_settings(&self) -> ServerSettings {
        ServerSettings {
            max_connections: self.max_connections,
            read_header_timeout: self.read_header_timeout.nonzero(),
            idle_timeout: self.idle_timeout.nonzero(),
            body: BodyLimits {
                timeout: self.body_timeout.nonzero(),
                min_rate: self.min_body_rate,
                read_timeout: self.read_timeout.nonzero(),
            },
            ..ServerSettings::default()
        }
    }

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if let Err(e) = profcol_pipeline::net::endpoint::check(&self.endpoint) {
            errs.push(cfg.key_path("endpoint"), e);
        }
        if self.max_request_body_size == 0 {
            errs.push(
                cfg.key_path("max_request_body_size"),
                "must be greater than 0",
            );
        }
        crate::record::validate(self.record_to.as_deref(), cfg, &mut errs);
        if self.max_connections == 0 {
            errs.push(cfg.key_path("max_connections"), "must be greater than 0");
        }
        if let Some(t) = &self.tls {
            t.validate(&cfg.key_path("tls"), &mut errs);
        }
        errs.into_result(())
    }
}
