use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::net::{HttpServerConfig, ListenerDefaults};

/// `receivers: pyroscope:` — the push API of the Pyroscope server, as its
/// SDKs and Grafana Alloy use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PyroscopeReceiverConfig {
    /// `endpoint`, `tls`, `auth` (the SDKs' `auth_token` / `authToken`
    /// arrive as `Authorization: Bearer <token>`), the body limit (also
    /// the largest pprof once a gzip'd profile inside a body is inflated)
    /// and the connection limits: the keys every HTTP receiver shares.
    #[serde(rename = "__squash")]
    pub server: HttpServerConfig<Self>,
    /// Directory where every accepted request is recorded (see `record`).
    pub record_to: Option<String>,
    /// Recordings kept in `record_to`; the oldest go first. 0: no limit.
    pub record_max_files: usize,
}

impl Default for PyroscopeReceiverConfig {
    fn default() -> Self {
        Self {
            server: HttpServerConfig::default(),
            record_to: None,
            record_max_files: 1000,
        }
    }
}

impl ListenerDefaults for PyroscopeReceiverConfig {
    // Pyroscope's own port.
    const ENDPOINT: &'static str = "localhost:4040";
    const MAX_REQUEST_BODY_SIZE: u64 = 64 << 20;
}

impl PyroscopeReceiverConfig {
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        self.server.validate(|k| cfg.key_path(k), &mut errs);
        crate::record::validate(self.record_to.as_deref(), cfg, &mut errs);
        errs.into_result(())
    }
}
