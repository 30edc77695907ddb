//! The Collector's `prometheus` exporter keys (contrib v0.161.0), plus
//! `max_series`.

use std::collections::BTreeMap;

use serde::Deserialize;

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, ServerTls};

use super::naming;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// `host:port` where `/metrics` is served.
    pub endpoint: String,
    pub tls: Option<ServerTls>,
    /// Prefix of every metric name.
    pub namespace: String,
    /// Labels on every series.
    pub const_labels: BTreeMap<String, String>,
    /// Each sample carries its point's time.
    pub send_timestamps: bool,
    /// A series not updated for this long is no longer served.
    pub metric_expiration: Duration,
    pub resource_to_telemetry_conversion: ResourceToTelemetry,
    /// OpenMetrics on request: not supported (the 0.0.4 text format is
    /// always served).
    pub enable_open_metrics: bool,
    /// Unit and `_total` suffixes (the Collector's deprecated key, still
    /// its default way).
    pub add_metric_suffixes: bool,
    /// The Collector's newer key; when set it wins over add_metric_suffixes.
    pub translation_strategy: Option<String>,
    /// profcol's bound: series held at most; more are refused, counted as
    /// failed points.
    pub max_series: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceToTelemetry {
    /// Every resource attribute becomes a label of every series.
    pub enabled: bool,
}

/// Series held at most unless `max_series` says otherwise.
pub const DEFAULT_MAX_SERIES: usize = 50_000;

impl Default for PrometheusConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            tls: None,
            namespace: String::new(),
            const_labels: BTreeMap::new(),
            send_timestamps: false,
            metric_expiration: Duration::from_secs(300),
            resource_to_telemetry_conversion: ResourceToTelemetry::default(),
            enable_open_metrics: false,
            add_metric_suffixes: true,
            translation_strategy: None,
            max_series: DEFAULT_MAX_SERIES,
        }
    }
}

impl PrometheusConfig {
    /// Whether names get unit and type suffixes.
    pub fn suffixes(&self) -> bool {
        match self.translation_strategy.as_deref() {
            Some("UnderscoreEscapingWithoutSuffixes") => false,
            Some(_) => true,
            None => self.add_metric_suffixes,
        }
    }

    /// Checks every key, reporting all problems at once.
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if self.endpoint.is_empty() {
            errs.push(cfg.key_path("endpoint"), "must be specified (host:port)");
        } else if let Err(e) = profcol_pipeline::net::endpoint::check(&self.endpoint) {
            errs.push(cfg.key_path("endpoint"), e);
        }
        if let Some(t) = &self.tls {
            t.validate(&cfg.key_path("tls"), &mut errs);
        }
        if !self.namespace.is_empty() && !naming::is_metric_name(&self.namespace) {
            errs.push(
                cfg.key_path("namespace"),
                format!(
                    "{:?} is not a valid Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)",
                    self.namespace
                ),
            );
        }
        for name in self.const_labels.keys() {
            if !naming::is_label_name(name) {
                errs.push(
                    cfg.key_path(&format!("const_labels::{name}")),
                    "not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)",
                );
            }
        }
        if self.metric_expiration.0.is_zero() {
            errs.push(cfg.key_path("metric_expiration"), "must be positive");
        }
        if self.enable_open_metrics {
            errs.push(
                cfg.key_path("enable_open_metrics"),
                "is not supported: profcol serves the Prometheus text format 0.0.4, which every Prometheus scrapes",
            );
        }
        match self.translation_strategy.as_deref() {
            None | Some("UnderscoreEscapingWithSuffixes" | "UnderscoreEscapingWithoutSuffixes") => {
            }
            Some(s @ ("NoUTF8EscapingWithSuffixes" | "NoTranslation")) => errs.push(
                cfg.key_path("translation_strategy"),
                format!("{s} is not supported: the text format 0.0.4 needs escaped names"),
            ),
            Some(s) => errs.push(
                cfg.key_path("translation_strategy"),
                format!("invalid translation_strategy: {s}"),
            ),
        }
        if self.max_series == 0 {
            errs.push(cfg.key_path("max_series"), "must be at least 1");
        }
        errs.into_result(())
    }
}
