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

    fn create(
        &self,
        cfg: &ComponentConfig,
    ) -> Result<(Arc<dyn Exporter>, ExporterSettings), ConfigErrors> {
        let (c, ((), exporter)) = cfg.decode_checked(|c: &OtlpHttpExporterConfig| {
            ConfigErrors::both(c.validate(cfg), OtlpHttpExporter::new(c, cfg))
        })?;
        let settings = c.settings();
        Ok((Arc::new(exporter), settings))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(OtlpHttpExporterFactory)
}
