//! Config in the OpenTelemetry Collector's shape, loaded with figment.
//!
//! `load` reads one or more YAML files (later wins), expands `${env:...}`,
//! and checks the shape and the service graph. Each component's own section
//! is decoded later by its factory through [`ComponentConfig::decode`].
//! Every error carries an otelcol-style key path and all are reported at once.

mod duration;
mod error;
mod expand;
mod id;
mod load;
mod settings;

pub use duration::Duration;
pub use error::{ConfigError, ConfigErrors};
pub use id::{ComponentId, Kind};
pub use load::{load, load_str, ComponentConfig, Config, PipelineConfig, ServiceConfig, TelemetryConfig};
pub use settings::{QueueSettings, RetrySettings};
