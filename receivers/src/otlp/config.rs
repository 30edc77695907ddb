use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

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
}

impl Default for GrpcConfig {
    fn default() -> Self {
        Self {
            endpoint: "0.0.0.0:4317".into(),
            max_recv_msg_size_mib: 64,
            max_concurrent_streams: 0,
            transport: "tcp".into(),
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
        if g.transport != "tcp" {
            errs.push(
                key("transport"),
                format!("unsupported transport {:?} (only \"tcp\")", g.transport),
            );
        }
        errs.into_result(())
    }
}
