//! A Sentry DSN, `{scheme}://{public_key}[:{secret}]@{host}[:{port}][/{path}]/{project_id}`,
//! as the SDKs read it, and what it gives: the envelope URL and the auth header.

use std::fmt;

use url::Url;

/// `sentry_version` of the envelope protocol.
const PROTOCOL_VERSION: u32 = 7;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dsn {
    scheme: String,
    public_key: String,
    secret_key: Option<String>,
    host: String,
    port: Option<u16>,
    /// Path prefix before `/api/`, without trailing slash (`""` usually).
    path: String,
    project_id: String,
}

impl Dsn {
    pub fn parse(s: &str) -> Result<Self, String> {
        let url = Url::parse(s).map_err(|e| format!("invalid DSN {s:?}: {e}"))?;
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(format!("DSN scheme must be http or https, got {scheme:?}"));
        }
        if url.username().is_empty() {
            return Err("DSN has no public key (https://KEY@host/PROJECT_ID)".into());
        }
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.to_owned(),
            _ => return Err("DSN has no host".into()),
        };
        if url.query().is_some() || url.fragment().is_some() {
            return Err("DSN must not have a query or fragment".into());
        }
        let path = url.path().trim_end_matches('/');
        let (prefix, project_id) = path.rsplit_once('/').unwrap_or(("", path));
        if project_id.is_empty() || !project_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "DSN must end in a numeric project id (https://KEY@host/PROJECT_ID), got path {:?}",
                url.path()
            ));
        }
        Ok(Self {
            scheme: scheme.to_owned(),
            public_key: url.username().to_owned(),
            secret_key: url.password().map(str::to_owned),
            host,
            port: url.port(),
            path: prefix.to_owned(),
            project_id: project_id.to_owned(),
        })
    }

    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    fn origin(&self) -> String {
        match self.port {
            Some(p) => format!("{}://{}:{p}", self.scheme, self.host),
            None => format!("{}://{}", self.scheme, self.host),
        }
    }

    /// `{scheme}://{host}[:{port}][/{path}]/api/{project_id}/envelope/`
    pub fn envelope_url(&self) -> String {
        format!(
            "{}{}/api/{}/envelope/",
            self.origin(),
            self.path,
            self.project_id
        )
    }

    /// `X-Sentry-Auth` value, as the SDKs send it.
    pub fn auth_header(&self, client: &str) -> String {
        let mut s = format!(
            "Sentry sentry_key={}, sentry_version={PROTOCOL_VERSION}, sentry_client={client}",
            self.public_key
        );
        if let Some(secret) = &self.secret_key {
            s.push_str(", sentry_secret=");
            s.push_str(secret);
        }
        s
    }
}

/// The DSN without its secret: what goes into the envelope header.
impl fmt::Display for Dsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = self.origin();
        let (scheme, rest) = origin.split_once("://").unwrap_or(("https", &origin));
        write!(
            f,
            "{scheme}://{}@{rest}{}/{}",
            self.public_key, self.path, self.project_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_sdks_accept_and_refuses_the_rest() {
        let d = Dsn::parse("http://KEY@localhost:3000/42").unwrap();
        assert_eq!((d.public_key(), d.project_id()), ("KEY", "42"));
        assert_eq!(d.envelope_url(), "http://localhost:3000/api/42/envelope/");
        let d = Dsn::parse("https://k:secret@o1.ingest.example/sub/7").unwrap();
        assert_eq!(d.project_id(), "7");
        assert_eq!(
            d.envelope_url(),
            "https://o1.ingest.example/sub/api/7/envelope/"
        );
        assert_eq!(
            d.to_string(),
            "https://k@o1.ingest.example/sub/7",
            "no secret"
        );
        for bad in [
            "http://localhost/42",
            "not a url",
            "ftp://k@h/1",
            "https://k@h/x",
            "https://k@h/1?x=y",
        ] {
            assert!(Dsn::parse(bad).is_err(), "{bad}");
        }
    }
}
