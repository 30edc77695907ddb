//! `tls:` of a receiver, with the Collector's `configtls.ServerConfig`
//! names: the server's certificate, an optional CA to require and verify
//! client certificates against (mutual TLS), the versions allowed, and how
//! often the certificate files are read again.

use serde::{Deserialize, Serialize};

use super::{ConfigErrors, Duration};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerTls {
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    /// The certificate and key as PEM text instead of files.
    pub cert_pem: Option<String>,
    pub key_pem: Option<String>,
    /// CAs that client certificates must chain to; set, every client must
    /// present one.
    pub client_ca_file: Option<String>,
    /// The Collector's `ca_file`, which a server loads but does not use
    /// (clients are verified against `client_ca_file`): read and checked,
    /// no effect.
    pub ca_file: Option<String>,
    /// `1.2` or `1.3` (default `1.2`).
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    /// Read the certificate files again this often (0: never).
    pub reload_interval: Duration,
}

impl ServerTls {
    /// The TLS versions allowed, checked.
    pub fn versions(&self) -> Result<(u8, u8), String> {
        let parse = |v: &Option<String>, default: u8| match v.as_deref() {
            None | Some("") => Ok(default),
            Some("1.2") => Ok(2),
            Some("1.3") => Ok(3),
            Some(other) => Err(format!(
                "unsupported TLS version {other:?} (only \"1.2\" and \"1.3\")"
            )),
        };
        let (min, max) = (parse(&self.min_version, 2)?, parse(&self.max_version, 3)?);
        if min > max {
            return Err("min_version is above max_version".into());
        }
        Ok((min, max))
    }

    /// Checks the keys and that what start-up would load loads (files read,
    /// PEM parsed), reporting under `path`.
    pub fn validate(&self, path: &str, errs: &mut ConfigErrors) {
        let has_cert = self.cert_file.is_some() || self.cert_pem.is_some();
        let has_key = self.key_file.is_some() || self.key_pem.is_some();
        if has_cert != has_key {
            errs.push(
                path.to_owned(),
                "a certificate and its key must be set together (cert_file/cert_pem and key_file/key_pem)",
            );
            return;
        }
        if !has_cert {
            errs.push(
                path.to_owned(),
                "a server certificate is required (cert_file and key_file)",
            );
            return;
        }
        if let Err(e) = self.versions() {
            errs.push(format!("{path}::min_version"), e);
        }
        if let Err((key, e)) = crate::net::tls::load(self) {
            errs.push(format!("{path}::{key}"), e);
        }
    }
}
