//! Receiver `otlp`: OTLP profiles over gRPC (`ProfilesService/Export`) and
//! over HTTP (`POST /v1development/profiles`).

mod config;
mod grpc;
mod http;
mod server;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_pipeline::component::{Receiver, ReceiverFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{CorsConfig, GrpcConfig, HttpConfig, OtlpReceiverConfig, Protocols};

pub struct OtlpReceiverFactory;

impl ReceiverFactory for OtlpReceiverFactory {
    fn type_name(&self) -> &'static str {
        "otlp"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &OtlpReceiverConfig| c.validate(cfg))?;
        Ok(Box::new(server::OtlpReceiver::new(c)))
    }
}

pub fn factory() -> Arc<dyn ReceiverFactory> {
    Arc::new(OtlpReceiverFactory)
}

/// Refuses, before its body is read, a request in a Profiles development
/// version profcol does not read: its form would be misread, not refused.
fn check_development_version(headers: &::http::HeaderMap) -> Result<(), crate::ingest::Refusal> {
    use profcol_otlp::development_version::{check, HEADER};
    check(headers.get_all(HEADER).iter().map(|v| v.as_bytes()))
        .map_err(|e| crate::ingest::Refusal::invalid("unsupported_version", e))
}
