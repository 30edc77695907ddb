//! Config in the OpenTelemetry Collector's shape, loaded with figment.
//!
//! `load` reads one or more YAML files (later wins), expands `${env:...}`,
//! and checks the shape and the service graph. Each component's own section
//! is decoded later by its factory through [`ComponentConfig::decode`].
//! Every error carries an otelcol-style key path and all are reported at once.

mod collector;
mod decode;
mod duration;
mod endpoint;
mod error;
mod expand;
mod exporter_batching;
mod id;
mod load;
pub mod scrape_targets;
mod server_tls;
mod service;
mod settings;
mod yaml;

#[cfg(test)]
mod tests;

pub use collector::{is_collector_type, unknown_type};
pub use duration::Duration;
pub use endpoint::listen_address;
pub use error::{ConfigError, ConfigErrors};
pub use expand::Originals;
pub use id::{ComponentId, Kind};
pub use load::{
    load, load_partial, load_sources_partial, load_str, load_str_partial, ComponentConfig, Config,
    Source,
};
pub use server_tls::ServerTls;
pub use service::{
    LogsEncoding, MetricsLevel, PipelineConfig, ServiceConfig, Signal, TelemetryConfig,
};
pub use settings::{
    ExporterSettingsKeys, QueueSettings, RetrySettings, Sizer, EXPORTER_SETTINGS_KEYS,
    MAX_CONSUMERS,
};
pub use yaml::YamlProvider;
