//! `extensions: profilez:` keys, their defaults and checks.

use serde::{Deserialize, Serialize};

use profcol_pipeline::component::AuthConfig;
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, ServerTls};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfilezConfig {
    /// Where the pages are served; loopback by default, as the Collector's
    /// `zpages`.
    pub endpoint: String,
    /// Serve over TLS (the receivers' `tls:` keys).
    pub tls: Option<ServerTls>,
    /// Ask an authenticator extension (`bearertokenauth`) for every page.
    pub auth: Option<AuthConfig>,
    /// The width of one window: rates are per window, a flame graph covers
    /// whole windows.
    pub window: Duration,
    /// Windows kept per service and sample type: `window * windows` is the
    /// longest flame graph.
    pub windows: usize,
    /// The most the folded stacks may take; past it the oldest windows go,
    /// then new stacks fold into one `[over profilez memory bound]` frame.
    pub max_memory_mib: u64,
    /// Batches waiting to be folded; when full, batches are skipped (and
    /// counted) rather than the pipeline waiting.
    pub queue_size: usize,
    /// The most CPU the folding may take, as a share of what the rest of
    /// the collector uses; past it batches are skipped (and counted).
    pub max_cpu_share: f64,
}

impl Default for ProfilezConfig {
    fn default() -> Self {
        Self {
            endpoint: "localhost:55680".into(),
            tls: None,
            auth: None,
            window: Duration(std::time::Duration::from_secs(60)),
            windows: 15,
            max_memory_mib: 64,
            queue_size: 16,
            max_cpu_share: 0.03,
        }
    }
}

impl ProfilezConfig {
    /// Checks every key, reporting all problems at once.
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if let Err(e) = profcol_pipeline::net::endpoint::check(&self.endpoint) {
            errs.push(cfg.key_path("endpoint"), e);
        }
        if let Some(t) = &self.tls {
            t.validate(&cfg.key_path("tls"), &mut errs);
        }
        if self.window.get() < std::time::Duration::from_secs(1) {
            errs.push(
                cfg.key_path("window"),
                format!("must be at least 1s, got {:?}", self.window.get()),
            );
        }
        if !(1..=1440).contains(&self.windows) {
            errs.push(
                cfg.key_path("windows"),
                format!("must be between 1 and 1440, got {}", self.windows),
            );
        }
        if self.max_memory_mib == 0 {
            errs.push(cfg.key_path("max_memory_mib"), "must be at least 1");
        }
        if self.queue_size == 0 {
            errs.push(cfg.key_path("queue_size"), "must be at least 1");
        }
        if !(self.max_cpu_share > 0.0 && self.max_cpu_share <= 1.0) {
            errs.push(
                cfg.key_path("max_cpu_share"),
                format!("must be above 0 and at most 1, got {}", self.max_cpu_share),
            );
        }
        errs.into_result(())
    }
}
