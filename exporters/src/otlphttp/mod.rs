//! Exporter `otlphttp` (alias `otlp_http`): OTLP profiles over HTTP, as the
//! Collector's exporter of that name sends them.

mod client;
mod config;
mod response;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_pipeline::component::{Exporter, ExporterFactory, ExporterSettings};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use client::OtlpHttpExporter;
pub use config::{Encoding, HttpTls, OtlpHttpExporterConfig, PROFILES_PATH};

pub struct OtlpHttpExporterFactory;

impl ExporterFactory for OtlpHttpExporterFactory {
    fn type_name(&self) -> &'static str {
        "otlphttp"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["otlp_http"]
    }

    /// The Collector's `otlphttp` waits 30 s for an answer.
    fn default_settings(&self) -> Option<ExporterSettings> {
        Some(ExporterSettings::with_timeout(
            std::time::Duration::from_secs(30),
        ))
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (_, ((), exporter)) = cfg.decode_checked(|c: &OtlpHttpExporterConfig| {
            ConfigErrors::both(
                c.validate(cfg),
                OtlpHttpExporter::new(c, cfg, settings.timeout),
            )
        })?;
        Ok(Arc::new(exporter))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(OtlpHttpExporterFactory)
}
