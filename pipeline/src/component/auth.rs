//! Authenticators: extensions (`bearertokenauth`) that receivers ask to
//! check a request's credentials before any of its body is read, and that
//! exporters ask for the headers carrying their own credentials. Referenced
//! as the Collector does: `auth: { authenticator: <extension id> }`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub trait Authenticator: Send + Sync {
    /// Server side: `Ok` when the request's headers carry valid credentials;
    /// the error says why, never echoing a secret.
    fn authenticate(&self, headers: &http::HeaderMap) -> Result<(), String>;

    /// Client side: the headers that carry this authenticator's credentials.
    fn client_headers(&self) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, String>;
}

/// The authenticators of the running config, by extension id.
#[derive(Clone, Default)]
pub struct Authenticators(Arc<BTreeMap<String, Arc<dyn Authenticator>>>);

impl Authenticators {
    pub fn new(map: BTreeMap<String, Arc<dyn Authenticator>>) -> Self {
        Self(Arc::new(map))
    }

    pub fn get(&self, id: &str) -> Option<Arc<dyn Authenticator>> {
        self.0.get(id).cloned()
    }

    /// The authenticator `auth` names; an error when there is none (the
    /// config check reports this before start-up).
    pub fn resolve(
        &self,
        auth: Option<&AuthConfig>,
        owner: &str,
    ) -> anyhow::Result<Option<Arc<dyn Authenticator>>> {
        match auth {
            None => Ok(None),
            Some(a) => self.get(&a.authenticator).map(Some).ok_or_else(|| {
                anyhow::anyhow!(
                    "{owner}::auth::authenticator: no authenticator {:?} is running",
                    a.authenticator
                )
            }),
        }
    }
}

/// `auth:` of a receiver or exporter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The id of an extension that authenticates (`bearertokenauth`).
    pub authenticator: String,
}

impl AuthConfig {
    /// What a component's `auth:` refers to, as its `authenticators()`
    /// lists it.
    pub fn references(auth: &Option<AuthConfig>) -> Vec<(String, String)> {
        auth.iter()
            .map(|a| ("auth::authenticator".to_owned(), a.authenticator.clone()))
            .collect()
    }
}
