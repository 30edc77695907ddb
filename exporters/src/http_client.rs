//! The client keys of the Collector's `confighttp` that every HTTP client
//! of profcol reads the same way: `tls:` and `headers:`. The `otlphttp` and
//! `sentry` exporters send with them, the `pprof` receiver scrapes with
//! them and the `sentry` receiver forwards with them; the `otlp` exporter's
//! gRPC client reads its files with [`read_tls_file`].

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use crate::http_common::error_chain;

/// `tls:` of an HTTP client, as `configtls.ClientConfig` names it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpTls {
    /// Only meaningful for gRPC; accepted so that configs carry over.
    pub insecure: bool,
    /// Accept any server certificate (self-signed test setups only).
    pub insecure_skip_verify: bool,
    /// PEM CAs trusted instead of the system's.
    pub ca_file: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
}

impl HttpTls {
    /// What can be checked without reading the files; `path` is this
    /// `tls:`'s key path (`exporters::sentry::tls`).
    pub fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        if self.cert_file.is_some() != self.key_file.is_some() {
            errs.push(path, "cert_file and key_file must be set together");
        }
    }

    /// `builder` with these settings: reads the files, reporting each
    /// problem at its key path under `path`.
    pub fn configure(
        &self,
        mut builder: reqwest::ClientBuilder,
        path: &str,
        errs: &mut ConfigErrors,
    ) -> reqwest::ClientBuilder {
        let ca = read_tls_file(path, "ca_file", &self.ca_file, errs);
        let cert = read_tls_file(path, "cert_file", &self.cert_file, errs);
        let key = read_tls_file(path, "key_file", &self.key_file, errs);
        builder = builder.danger_accept_invalid_certs(self.insecure_skip_verify);
        if let Some(pem) = ca {
            // As the Collector: `ca_file` replaces the system's roots.
            match reqwest::Certificate::from_pem_bundle(&pem) {
                Ok(certs) if !certs.is_empty() => builder = builder.tls_certs_only(certs),
                Ok(_) => errs.push(format!("{path}::ca_file"), "holds no PEM certificate"),
                Err(e) => errs.push(format!("{path}::ca_file"), e.to_string()),
            }
        }
        if let (Some(mut cert), Some(key)) = (cert, key) {
            cert.push(b'\n');
            cert.extend_from_slice(&key);
            match reqwest::Identity::from_pem(&cert) {
                Ok(id) => builder = builder.identity(id),
                Err(e) => errs.push(format!("{path}::cert_file"), error_chain(&e)),
            }
        }
        builder
    }
}

/// confighttp's client `keepalive`: which idle connections the client
/// keeps, with Go's transport's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientKeepalive {
    /// `false`: no connection is kept between requests.
    pub enabled: bool,
    /// An idle connection is closed after this; 0 keeps it.
    pub idle_conn_timeout: Duration,
    /// Idle connections kept in all; 0 is no limit.
    pub max_idle_conns: usize,
    /// Idle connections kept per host; 0 is Go's default, 2.
    pub max_idle_conns_per_host: usize,
}

impl Default for ClientKeepalive {
    fn default() -> Self {
        Self {
            enabled: true,
            idle_conn_timeout: Duration::from_secs(90),
            max_idle_conns: 100,
            max_idle_conns_per_host: 0,
        }
    }
}

impl ClientKeepalive {
    /// The pool settings on `b`. reqwest bounds idle connections per host
    /// only; the client talks to one host, so the total bounds that too.
    pub fn apply(&self, b: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        if !self.enabled {
            return b.pool_max_idle_per_host(0);
        }
        let mut per_host = match self.max_idle_conns_per_host {
            0 => 2,
            n => n,
        };
        if self.max_idle_conns > 0 {
            per_host = per_host.min(self.max_idle_conns);
        }
        b.pool_max_idle_per_host(per_host)
            .pool_idle_timeout(self.idle_conn_timeout.nonzero())
    }
}

/// The file `<tls>::<key>` names, if set; a file that cannot be read is
/// reported at that key path.
pub(crate) fn read_tls_file(
    tls: &str,
    key: &str,
    file: &Option<String>,
    errs: &mut ConfigErrors,
) -> Option<Vec<u8>> {
    let file = file.as_ref()?;
    std::fs::read(file)
        .map_err(|e| errs.push(format!("{tls}::{key}"), format!("cannot read {file}: {e}")))
        .ok()
}

/// Checks `headers:`: each name and value must be sendable.
pub fn validate_headers(
    headers: &BTreeMap<String, String>,
    cfg: &ComponentConfig,
    errs: &mut ConfigErrors,
) {
    for (k, v) in headers {
        if HeaderName::from_bytes(k.as_bytes()).is_err() {
            errs.push(
                cfg.key_path(&format!("headers::{k}")),
                "invalid header name: it cannot be sent (the Collector takes it here and then fails every request)",
            );
        }
        if HeaderValue::from_str(v).is_err() {
            errs.push(
                cfg.key_path(&format!("headers::{k}")),
                "invalid header value",
            );
        }
    }
}

/// `headers:` as sent (what [`validate_headers`] refuses is left out).
pub fn header_map(headers: &BTreeMap<String, String>) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            out.insert(k, v);
        }
    }
    out
}
