use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};
use profcol_pipeline::net::ServerSettings;

/// `receivers: otlp:` — the Collector's names; only gRPC carries profiles here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpReceiverConfig {
    pub protocols: Protocols,
    /// Directory where every accepted request is recorded (see `record`).
    pub record_to: Option<String>,
    /// Recordings kept in `record_to`; the oldest go first. 0: no limit.
    pub record_max_files: usize,
}

impl Default for OtlpReceiverConfig {
    fn default() -> Self {
        Self {
            protocols: Protocols::default(),
            record_to: None,
            record_max_files: 1000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Protocols {
    /// `null` or absent leaves gRPC on with defaults, as `grpc:` does in the Collector.
    pub grpc: Option<GrpcConfig>,
}

impl Default for Protocols {
    fn default() -> Self {
        Self {
            grpc: Some(GrpcConfig::default()),
        }
    }
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
            endpoint: "0.0.0.0:4317".into(),
            max_recv_msg_size_mib: 64,
            max_concurrent_streams: 0,
            transport: "tcp".into(),
            max_connections: 1024,
            keepalive: Keepalive::default(),
        }
    }
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
    pub fn grpc(&self) -> GrpcConfig {
        self.protocols.grpc.clone().unwrap_or_default()
    }

    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let g = self.grpc();
        let mut errs = ConfigErrors::default();
        let key = |k: &str| cfg.key_path(&format!("protocols::grpc::{k}"));
        if let Err(e) = crate::endpoint::check(&g.endpoint) {
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
        crate::record::validate(self.record_to.as_deref(), cfg, &mut errs);
        if g.max_connections == 0 {
            errs.push(key("max_connections"), "must be greater than 0");
        }
        if g.transport != "tcp" {
            errs.push(
                key("transport"),
                format!("unsupported transport {:?} (only \"tcp\")", g.transport),
            );
        }
        errs.into_result(())
    }
}
