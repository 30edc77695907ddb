//! Receiver `sentry`: Sentry SDK envelopes over HTTP
//! (`POST /api/<project>/envelope/`), `profile_chunk` and v1 `profile` items
//! converted to OTLP profiles.

mod auth;
mod config;
mod forward;
mod handler;
mod server;
#[cfg(test)]
mod tests;
mod upstream_limits;

use std::sync::Arc;

use profcol_pipeline::component::{Receiver, ReceiverFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

pub use config::{ProjectId, SentryReceiverConfig};

pub struct SentryReceiverFactory;

impl ReceiverFactory for SentryReceiverFactory {
    fn type_name(&self) -> &'static str {
        "sentry"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &SentryReceiverConfig| c.validate(cfg))?;
        if c.forward_to.is_empty() {
            // Shown by `profcol validate` and at start: the shipped config
            // takes profiles only.
            tracing::warn!(
                receiver = %cfg.id,
                "note: forward_to is not set: the events, transactions and sessions Sentry SDKs \
                 send here are answered 200 and dropped; set forward_to to send them to Sentry"
            );
        }
        Ok(Box::new(server::SentryReceiver::new(c)))
    }
}

pub fn factory() -> Arc<dyn ReceiverFactory> {
    Arc::new(SentryReceiverFactory)
}
