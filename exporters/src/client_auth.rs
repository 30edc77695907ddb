//! `auth: { authenticator: <id> }` of an exporter: the extension whose
//! client headers go with every request. Resolved at start; the headers are
//! asked for on every request, so a token file the extension reloads takes
//! effect without a restart.

use std::sync::{Arc, OnceLock};

use profcol_pipeline::component::{AuthConfig, Authenticator, ExportError, ExporterContext};

#[derive(Default)]
pub(crate) struct ClientAuth {
    config: Option<AuthConfig>,
    resolved: OnceLock<Arc<dyn Authenticator>>,
}

impl ClientAuth {
    pub(crate) fn new(config: Option<AuthConfig>) -> Self {
        Self {
            config,
            resolved: OnceLock::new(),
        }
    }

    /// For [`profcol_pipeline::component::Exporter::authenticators`].
    pub(crate) fn references(&self) -> Vec<(String, String)> {
        self.config
            .iter()
            .map(|a| ("auth::authenticator".to_owned(), a.authenticator.clone()))
            .collect()
    }

    pub(crate) fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        let owner = format!("exporters::{}", ctx.id);
        if let Some(a) = ctx.authenticators.resolve(self.config.as_ref(), &owner)? {
            let _ = self.resolved.set(a);
        }
        Ok(())
    }

    /// The headers to add to a request: none without `auth`. A failure
    /// (a token file that went missing) is retried: the extension may
    /// read it again by then.
    pub(crate) fn headers(
        &self,
    ) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, ExportError> {
        match (self.resolved.get(), &self.config) {
            (Some(a), _) => a
                .client_headers()
                .map_err(|e| ExportError::retryable(format!("auth: {e}"))),
            (None, None) => Ok(Vec::new()),
            (None, Some(c)) => Err(ExportError::permanent(format!(
                "auth: authenticator {:?} was not resolved at start",
                c.authenticator
            ))),
        }
    }
}
