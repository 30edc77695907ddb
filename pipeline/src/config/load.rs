use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::DeserializeOwned;

use super::{ComponentId, ConfigErrors, Kind};

/// One component's section: its id and the still-undecoded YAML value.
#[derive(Debug, Clone)]
pub struct ComponentConfig {
    pub id: ComponentId,
    pub kind: Kind,
    pub value: figment::value::Value,
}

impl ComponentConfig {
    /// A section from a YAML snippet, for tests and `profcol test`.
    pub fn from_yaml(kind: Kind, id: &str, yaml: &str) -> Result<Self, ConfigErrors> {
        todo!("config helper: {kind:?} {id} {yaml}")
    }

    /// `exporters::otlp/gw`
    pub fn path(&self) -> String {
        format!("{}::{}", self.kind.section(), self.id)
    }

    /// Decodes the section into `T` (whose `Default` gives the defaults and
    /// which should be `deny_unknown_fields`), mapping every serde/figment
    /// error to a key path under [`Self::path`].
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ConfigErrors> {
        todo!("config helper")
    }

    /// An error at `key` (`retry_on_failure::multiplier`) inside this section.
    pub fn error(&self, key: &str, message: impl Into<String>) -> ConfigErrors {
        ConfigErrors::one(self.key_path(key), message)
    }

    pub fn key_path(&self, key: &str) -> String {
        if key.is_empty() {
            self.path()
        } else {
            format!("{}::{}", self.path(), key)
        }
    }
}

/// A loaded config: sections keyed by id, the service graph checked.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub receivers: BTreeMap<ComponentId, ComponentConfig>,
    pub processors: BTreeMap<ComponentId, ComponentConfig>,
    pub exporters: BTreeMap<ComponentId, ComponentConfig>,
    pub extensions: BTreeMap<ComponentId, ComponentConfig>,
    pub service: ServiceConfig,
}

#[derive(Debug, Clone, Default)]
pub struct ServiceConfig {
    pub extensions: Vec<ComponentId>,
    /// Keyed by pipeline id (`profiles`, `profiles/gateway`).
    pub pipelines: BTreeMap<String, PipelineConfig>,
    pub telemetry: TelemetryConfig,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PipelineConfig {
    pub receivers: Vec<ComponentId>,
    pub processors: Vec<ComponentId>,
    pub exporters: Vec<ComponentId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// Where `/metrics` is served; `None` when metrics `level: none`.
    pub metrics_address: Option<SocketAddr>,
    /// `service.telemetry.logs.level`: debug, info, warn, error.
    pub logs_level: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            metrics_address: Some(SocketAddr::from(([127, 0, 0, 1], 8888))),
            logs_level: "info".into(),
        }
    }
}

/// Loads and merges `paths` (later files win), expands variables, and checks
/// the shape and the service graph. Component sections are decoded later.
pub fn load(paths: &[PathBuf]) -> Result<Config, ConfigErrors> {
    todo!("config helper: {paths:?}")
}

/// Same as [`load`] for one YAML document held in memory.
pub fn load_str(yaml: &str) -> Result<Config, ConfigErrors> {
    todo!("config helper: {yaml}")
}
