use serde::{Deserialize, Serialize};

use profcol_exporters::http_client::HttpTls;
use profcol_pipeline::config::{
    ComponentConfig, ConfigErrors, Duration, QueueSettings, RetrySettings,
};
use profcol_pipeline::net::{HttpServerConfig, ListenerDefaults};

/// `receivers: sentry:` — Sentry's envelope endpoint, as Relay serves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryReceiverConfig {
    /// `endpoint`, `tls`, `auth` (checked before `keys`), the body and
    /// connection limits: the keys every HTTP receiver shares.
    #[serde(rename = "__squash")]
    pub server: HttpServerConfig<Self>,
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
    /// Upstream Sentry (or Relay) base URL that gets every item the
    /// pipeline does not consume; empty: such items are counted `ignored`.
    pub forward_to: String,
    /// Project id and public key for all forwarded traffic instead of the
    /// SDK's own.
    pub forward_to_project: Option<ProjectId>,
    pub forward_to_key: Option<String>,
    /// Forward profile items too (the pipeline still gets them).
    pub forward_profiles: bool,
    /// How forwarding talks to the upstream.
    pub forwarding: ForwardingSettings,
}

/// `forwarding:` — the client, retry and queue of `forward_to`, with the
/// exporters' key names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForwardingSettings {
    /// Bound on one attempt.
    pub timeout: Duration,
    /// How the upstream is trusted (the exporters' `tls:` keys).
    pub tls: HttpTls,
    pub retry_on_failure: RetrySettings,
    /// Where envelopes wait while the upstream is unreachable.
    pub sending_queue: QueueSettings,
}

impl Default for ForwardingSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            tls: HttpTls::default(),
            retry_on_failure: RetrySettings::default(),
            sending_queue: QueueSettings::default(),
        }
    }
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
            server: HttpServerConfig::default(),
            max_item_size: 50 << 20,
            keys: Vec::new(),
            project_ids: Vec::new(),
            service_name: None,
            include_original_payload: false,
            record_to: None,
            record_max_files: 1000,
            forward_to: String::new(),
            forward_to_project: None,
            forward_to_key: None,
            forward_profiles: false,
            forwarding: ForwardingSettings::default(),
        }
    }
}

impl ListenerDefaults for SentryReceiverConfig {
    const ENDPOINT: &'static str = "localhost:3000";
    const MAX_REQUEST_BODY_SIZE: u64 = 200 << 20;
}

impl SentryReceiverConfig {
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        self.server.validate(|k| cfg.key_path(k), &mut errs);
        crate::record::validate(self.record_to.as_deref(), cfg, &mut errs);
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
        self.validate_forwarding(cfg, &mut errs);
        if self.service_name.as_deref() == Some("") {
            errs.push(
                cfg.key_path("service_name"),
                "must not be empty (remove the key to derive it from release)",
            );
        }
        errs.into_result(())
    }

    fn validate_forwarding(&self, cfg: &ComponentConfig, errs: &mut ConfigErrors) {
        if !self.forward_to.is_empty() {
            match url::Url::parse(&self.forward_to) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => errs.push(
                    cfg.key_path("forward_to"),
                    format!(
                        "{:?} is not an http:// or https:// base URL (such as https://o1.ingest.sentry.io)",
                        self.forward_to
                    ),
                ),
            }
        } else if self.forward_profiles
            || self.forward_to_project.is_some()
            || self.forward_to_key.is_some()
        {
            errs.push(
                cfg.key_path("forward_to"),
                "is required with forward_profiles, forward_to_project or forward_to_key",
            );
        }
        if let Some(p) = &self.forward_to_project {
            let p = p.as_string();
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
                errs.push(
                    cfg.key_path("forward_to_project"),
                    format!("invalid project id {p:?}: must be a number"),
                );
            }
        }
        if let Some(k) = &self.forward_to_key {
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()) {
                errs.push(
                    cfg.key_path("forward_to_key"),
                    "must be a DSN public key (letters and digits)",
                );
            }
        }
        let f = &self.forwarding;
        let path = cfg.key_path("forwarding");
        if f.timeout.get().is_zero() {
            errs.push(format!("{path}::timeout"), "must be greater than 0");
        }
        f.retry_on_failure
            .validate(&format!("{path}::retry_on_failure"), errs);
        f.sending_queue
            .validate(&format!("{path}::sending_queue"), errs);
        if f.sending_queue.sizer == profcol_pipeline::config::Sizer::Items {
            errs.push(
                format!("{path}::sending_queue::sizer"),
                "\"items\" is not supported: envelopes are forwarded whole; use sizer: requests or sizer: bytes",
            );
        }
        if f.sending_queue.block_on_overflow {
            errs.push(
                format!("{path}::sending_queue::block_on_overflow"),
                "not supported: an SDK is answered at once (503 when the queue is full)",
            );
        }
        // Reads the files, as start-up will.
        let tls = format!("{path}::tls");
        f.tls.validate(&tls, errs);
        let _ = f.tls.configure(reqwest::Client::builder(), &tls, errs);
    }
}
