use serde::{Deserialize, Serialize};

use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, ServerTls};
use profcol_pipeline::net::{BodyLimits, ServerSettings};

/// `receivers: sentry:` — Sentry's envelope endpoint, as Relay serves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryReceiverConfig {
    pub endpoint: String,
    /// Largest body accepted after decompression, in bytes.
    pub max_request_body_size: u64,
    /// Largest single item, in bytes (Relay: 50 MiB per profile).
    pub max_item_size: u64,
    /// Public keys (the user part of a DSN) allowed in; empty accepts any.
    pub keys: Vec<String>,
    /// Project ids allowed in; empty accepts any.
    pub project_ids: Vec<ProjectId>,
    /// `service.name` for every profile; default: `release` up to `@`.
    pub service_name: Option<String>,
    /// Keep each Sentry payload in the profile's `original_payload`.
    pub include_original_payload: bool,
    /// Directory where every accepted envelope is recorded (see `record`).
    pub record_to: Option<String>,
    /// Recordings kept in `record_to`; the oldest go first. 0: no limit.
    pub record_max_files: usize,
    /// Connection limits and timeouts (the Collector's `confighttp` names
    /// where it has them).
    pub max_connections: usize,
    pub read_header_timeout: Duration,
    pub idle_timeout: Duration,
    pub read_timeout: Duration,
    pub body_timeout: Duration,
    pub min_body_rate: u64,
    pub tls: Option<ServerTls>,
    /// An authenticator checked besides (before) `keys`.
    pub auth: Option<AuthConfig>,
}

/// A project id written as a number or a string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProjectId {
    Number(u64),
    Text(String),
}

impl ProjectId {
    pub fn as_string(&self) -> String {
        match self {
            ProjectId::Number(n) => n.to_string(),
            ProjectId::Text(s) => s.clone(),
        }
    }
}

impl Default for SentryReceiverConfig {
    fn default() -> Self {
        Self {
            endpoint: "localhost:3000".into(),
            max_request_body_size: 200 << 20,
            max_item_size: 50 << 20,
            keys: Vec::new(),
            project_ids: Vec::new(),
            service_name: None,
            include_original_payload: false,
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

impl SentryReceiverConfig {
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
        if let Err(e) = crate::endpoint::check(&self.endpoint) {
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
        if self.max_item_size == 0 {
            errs.push(cfg.key_path("max_item_size"), "must be greater than 0");
        }
        for (i, p) in self.project_ids.iter().enumerate() {
            if !p.as_string().chars().all(|c| c.is_ascii_digit()) || p.as_string().is_empty() {
                errs.push(
                    cfg.key_path(&format!("project_ids::{i}")),
                    format!("invalid project id {:?}: must be a number", p.as_string()),
                );
            }
        }
        if self.service_name.as_deref() == Some("") {
            errs.push(
                cfg.key_path("service_name"),
                "must not be empty (remove the key to derive it from release)",
            );
        }
        errs.into_result(())
    }
}
