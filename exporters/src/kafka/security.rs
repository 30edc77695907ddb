//! `auth:` and `tls:` of a Kafka client (`configkafka.AuthenticationConfig`
//! and `configtls.ClientConfig`), turned into librdkafka's
//! `security.protocol`, `sasl.*` and `ssl.*` settings. What librdkafka
//! cannot do as the Collector does is refused with the reason, never
//! accepted and ignored: a client that silently talked plain text, or
//! skipped a check, to a broker that asked for more would be worse than
//! one that does not start.

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

/// `auth:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub sasl: Option<SaslConfig>,
    /// GSSAPI: refused (profcol's librdkafka is built without Cyrus SASL).
    pub kerberos: Option<serde_json::Value>,
}

/// `auth::sasl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaslConfig {
    pub username: String,
    pub password: String,
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// For `AWS_MSK_IAM_OAUTHBEARER`, which profcol refuses.
    pub aws_msk: Option<serde_json::Value>,
    /// For `OAUTHBEARER`, which profcol refuses.
    pub oauthbearer_token_source: Option<String>,
}

/// `tls:` (`configtls.ClientConfig`): TLS to the brokers when present,
/// unless `insecure` without a CA, as the Collector decides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaTls {
    pub insecure: bool,
    pub insecure_skip_verify: bool,
    pub server_name_override: String,
    pub ca_file: String,
    pub ca_pem: String,
    pub include_system_ca_certs_pool: bool,
    pub cert_file: String,
    pub cert_pem: String,
    pub key_file: String,
    pub key_pem: String,
    pub min_version: String,
    pub max_version: String,
    pub cipher_suites: Vec<String>,
    pub curve_preferences: Vec<String>,
    pub reload_interval: Option<Duration>,
    pub tpm: Option<serde_json::Value>,
}

impl KafkaTls {
    fn has_ca(&self) -> bool {
        !self.ca_file.is_empty() || !self.ca_pem.is_empty()
    }

    /// Whether the connection is encrypted (`configtls.LoadTLSConfig`
    /// returns no TLS config for `insecure` without a CA).
    fn enabled(&self) -> bool {
        !self.insecure || self.has_ca()
    }
}

/// The mechanisms librdkafka (built with OpenSSL) speaks, by their names
/// in the Collector's config, which are librdkafka's too.
const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Checks `auth` and `tls` at `section`'s key paths.
pub(super) fn check(
    auth: &AuthConfig,
    tls: Option<&KafkaTls>,
    section: &ComponentConfig,
    errs: &mut ConfigErrors,
) {
    if auth.kerberos.as_ref().is_some_and(|v| !v.is_null()) {
        errs.push(
            section.key_path("auth::kerberos"),
            "is not supported: profcol's Kafka client is built without GSSAPI (Cyrus SASL); use SASL PLAIN or SCRAM over TLS",
        );
    }
    if let Some(s) = &auth.sasl {
        let at = |k: &str| section.key_path(&format!("auth::sasl::{k}"));
        match s.mechanism.as_str() {
            m if MECHANISMS.contains(&m) => {
                if s.username.is_empty() {
                    errs.push(at("username"), "username is required");
                }
                if s.password.is_empty() {
                    errs.push(at("password"), "password is required");
                }
            }
            m @ ("AWS_MSK_IAM_OAUTHBEARER" | "OAUTHBEARER") => errs.push(
                at("mechanism"),
                format!("{m} is not supported by profcol: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
            ),
            other => errs.push(
                at("mechanism"),
                format!("mechanism should be one of 'PLAIN', 'AWS_MSK_IAM_OAUTHBEARER', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'. configured value {other}"),
            ),
        }
    }
    let Some(t) = tls else { return };
    let at = |k: &str| section.key_path(&format!("tls::{k}"));
    for (key, file, pem) in [
        ("ca", &t.ca_file, &t.ca_pem),
        ("cert", &t.cert_file, &t.cert_pem),
        ("key", &t.key_file, &t.key_pem),
    ] {
        if !file.is_empty() && !pem.is_empty() {
            errs.push(
                at(&format!("{key}_file")),
                format!("{key}_file and {key}_pem cannot both be set"),
            );
        }
    }
    let cert = !t.cert_file.is_empty() || !t.cert_pem.is_empty();
    let key = !t.key_file.is_empty() || !t.key_pem.is_empty();
    if cert != key {
        errs.push(
            at(if cert { "key_file" } else { "cert_file" }),
            "for auth via TLS, provide both certificate and key, or neither",
        );
    }
    if !t.server_name_override.is_empty() {
        errs.push(
            at("server_name_override"),
            "is not supported: librdkafka checks the certificate against the broker's advertised host name",
        );
    }
    if t.include_system_ca_certs_pool && t.has_ca() {
        errs.push(
            at("include_system_ca_certs_pool"),
            "is not supported beside ca_file or ca_pem: librdkafka trusts either the given CAs or the system's (leave the CA out to trust the system's)",
        );
    }
    // OpenSSL's defaults on the supported systems: TLS 1.2 to 1.3.
    if !matches!(t.min_version.as_str(), "" | "1.2") {
        errs.push(
            at("min_version"),
            format!(
                "{:?} is not supported: librdkafka speaks TLS 1.2 and 1.3 (OpenSSL's defaults)",
                t.min_version
            ),
        );
    }
    if !matches!(t.max_version.as_str(), "" | "1.3") {
        errs.push(
            at("max_version"),
            format!(
                "{:?} is not supported: librdkafka speaks TLS 1.2 and 1.3 (OpenSSL's defaults)",
                t.max_version
            ),
        );
    }
    for (k, set) in [
        ("cipher_suites", !t.cipher_suites.is_empty()),
        ("curve_preferences", !t.curve_preferences.is_empty()),
    ] {
        if set {
            errs.push(
                at(k),
                "is not supported: Go's names do not carry over to OpenSSL, which librdkafka uses; leave OpenSSL's defaults",
            );
        }
    }
    if t.reload_interval.is_some_and(|d| !d.0.is_zero()) {
        errs.push(
            at("reload_interval"),
            "is not supported: librdkafka reads the files once, at start (reload profcol to pick up new ones)",
        );
    }
    if t.tpm.as_ref().is_some_and(|v| !v.is_null()) {
        errs.push(at("tpm"), "is not supported");
    }
}

/// Sets librdkafka's security settings for `auth` and `tls` (checked).
pub(super) fn apply(auth: &AuthConfig, tls: Option<&KafkaTls>, c: &mut rdkafka::ClientConfig) {
    let tls = tls.filter(|t| t.enabled());
    let protocol = match (&auth.sasl, tls) {
        (None, None) => "plaintext",
        (None, Some(_)) => "ssl",
        (Some(_), None) => "sasl_plaintext",
        (Some(_), Some(_)) => "sasl_ssl",
    };
    c.set("security.protocol", protocol);
    if let Some(s) = &auth.sasl {
        c.set("sasl.mechanisms", &s.mechanism)
            .set("sasl.username", &s.username)
            .set("sasl.password", &s.password);
    }
    let Some(t) = tls else { return };
    for (key, value) in [
        ("ssl.ca.location", &t.ca_file),
        ("ssl.ca.pem", &t.ca_pem),
        ("ssl.certificate.location", &t.cert_file),
        ("ssl.certificate.pem", &t.cert_pem),
        ("ssl.key.location", &t.key_file),
        ("ssl.key.pem", &t.key_pem),
    ] {
        if !value.is_empty() {
            c.set(key, value);
        }
    }
    if t.insecure_skip_verify {
        c.set("enable.ssl.certificate.verification", "false")
            .set("ssl.endpoint.identification.algorithm", "none");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(auth: &AuthConfig, tls: Option<&KafkaTls>) -> rdkafka::ClientConfig {
        let mut c = rdkafka::ClientConfig::new();
        apply(auth, tls, &mut c);
        c
    }

    #[test]
    fn sasl_and_tls_pick_the_security_protocol_as_the_collector_does() {
        let scram = AuthConfig {
            sasl: Some(SaslConfig {
                username: "u".into(),
                password: "p".into(),
                mechanism: "SCRAM-SHA-512".into(),
                ..Default::default()
            }),
            kerberos: None,
        };
        let tls = KafkaTls::default();
        let insecure = KafkaTls {
            insecure: true,
            ..Default::default()
        };
        let insecure_with_ca = KafkaTls {
            insecure: true,
            ca_file: "/ca.pem".into(),
            ..Default::default()
        };
        let none = AuthConfig::default();
        let proto = |a, t| settings(a, t).get("security.protocol").unwrap().to_owned();
        assert_eq!(proto(&none, None), "plaintext");
        assert_eq!(proto(&none, Some(&tls)), "ssl");
        assert_eq!(proto(&none, Some(&insecure)), "plaintext");
        assert_eq!(proto(&none, Some(&insecure_with_ca)), "ssl");
        assert_eq!(proto(&scram, None), "sasl_plaintext");
        assert_eq!(proto(&scram, Some(&tls)), "sasl_ssl");
        let c = settings(&scram, Some(&insecure_with_ca));
        assert_eq!(c.get("sasl.mechanisms"), Some("SCRAM-SHA-512"));
        assert_eq!(c.get("ssl.ca.location"), Some("/ca.pem"));
        assert_eq!(c.get("enable.ssl.certificate.verification"), None);
    }
}
