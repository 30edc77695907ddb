//! Exporter `otlp` (alias `otlp_grpc`): OTLP profiles over gRPC.

mod classify;
mod client;
mod codec;
pub(crate) mod compress;
mod config;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_pipeline::component::{Exporter, ExporterFactory, ExporterSettings};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use classify::{classify, effective_code, is_retryable};
pub use client::rejected_samples;
pub(crate) use client::OtlpExporter;
pub use codec::Body;
pub use config::{dial_target, ClientKeepalive, Compression, OtlpExporterConfig, TlsConfig};

pub struct OtlpExporterFactory;

impl ExporterFactory for OtlpExporterFactory {
    fn type_name(&self) -> &'static str {
        "otlp"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["otlp_grpc"]
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (_, ((), exporter)) = cfg.decode_checked(|c: &OtlpExporterConfig| {
            ConfigErrors::both(
                c.validate(cfg),
                client::OtlpExporter::new(c, cfg, settings.timeout),
            )
        })?;
        Ok(Arc::new(exporter))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(OtlpExporterFactory)
}
