//! Exporter `otlp` (alias `otlp_grpc`): OTLP profiles over gRPC.

mod classify;
mod client;
mod codec;
pub(crate) mod compress;
mod config;
mod spread;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_pipeline::component::{Exporter, ExporterFactory, ExporterSettings};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::lookup::{Lookup, SystemLookup};

pub use classify::{classify, effective_code, is_retryable};
pub use client::rejected_samples;
pub(crate) use client::OtlpExporter;
pub use codec::Body;
pub use config::{dial_target, ClientKeepalive, Compression, OtlpExporterConfig, TlsConfig};

/// The factory, with the system's name lookup unless a test gives one.
pub struct OtlpExporterFactory {
    lookup: Arc<dyn Lookup>,
}

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
                client::OtlpExporter::new(c, cfg, settings.timeout, self.lookup.clone()),
            )
        })?;
        Ok(Arc::new(exporter))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    factory_with_lookup(Arc::new(SystemLookup))
}

/// The factory with another name lookup (tests: a host name with several
/// addresses, an answer that changes).
pub fn factory_with_lookup(lookup: Arc<dyn Lookup>) -> Arc<dyn ExporterFactory> {
    Arc::new(OtlpExporterFactory { lookup })
}
