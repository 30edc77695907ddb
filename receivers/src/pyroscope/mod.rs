//! Receiver `pyroscope`: the push API of the Pyroscope server, as the
//! Pyroscope SDKs (Go, Python, Node, Ruby, .NET, Rust) and Grafana Alloy
//! use it: `POST /ingest` (pprof, raw or in a form, folded stacks, the Java
//! agent's JFR, speedscope, old clients' trie and tree; the last three
//! read by `profcol-pyroscope`) and Push (`/push.v1.PusherService/Push`,
//! Connect), converted to OTLP.

mod config;
pub mod convert;
pub mod folded;
mod handler;
pub mod labels;
mod multipart;
pub mod push;
pub(crate) mod query;
mod server;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use profcol_pipeline::component::{Receiver, ReceiverFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::PyroscopeReceiverConfig;

pub struct PyroscopeReceiverFactory;

impl ReceiverFactory for PyroscopeReceiverFactory {
    fn type_name(&self) -> &'static str {
        "pyroscope"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &PyroscopeReceiverConfig| c.validate(cfg))?;
        Ok(Box::new(server::PyroscopeReceiver::new(c)))
    }
}

pub fn factory() -> Arc<dyn ReceiverFactory> {
    Arc::new(PyroscopeReceiverFactory)
}
