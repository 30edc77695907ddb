//! Extension `bearertokenauth`, as otelcol-contrib spells it: a static
//! bearer token (`token`, `tokens`, or a `filename` read again when it
//! changes) that receivers require (`auth: { authenticator:
//! bearertokenauth }`) and exporters send (`auth: { authenticator:
//! bearertokenauth/client }`). Tokens never appear in logs, recordings or
//! metrics.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use profcol_pipeline::component::{Authenticator, Extension, ExtensionFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::runtime::ExtensionContext;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BearerTokenAuthConfig {
    /// The header that carries the token.
    pub header: String,
    /// Written before the token (`Bearer <token>`); empty: the token alone.
    pub scheme: String,
    pub token: Option<String>,
    /// Several accepted tokens (a client sends the first).
    pub tokens: Vec<String>,
    /// A file holding the token, read again when it changes.
    pub filename: Option<String>,
}

impl Default for BearerTokenAuthConfig {
    fn default() -> Self {
        Self {
            header: "authorization".into(),
            scheme: "Bearer".into(),
            token: None,
            tokens: Vec::new(),
            filename: None,
        }
    }
}

impl BearerTokenAuthConfig {
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let sources = usize::from(self.token.is_some())
            + usize::from(!self.tokens.is_empty())
            + usize::from(self.filename.is_some());
        if sources != 1 {
            errs.push(
                cfg.path(),
                "exactly one of token, tokens and filename must be set",
            );
        }
        if HeaderName::from_bytes(self.header.as_bytes()).is_err() {
            errs.push(
                cfg.key_path("header"),
                format!("invalid header name {:?}", self.header),
            );
        }
        if let Some(f) = &self.filename {
            if let Err(e) = read_tokens(f) {
                errs.push(cfg.key_path("filename"), e);
            }
        }
        let bad =
            self.token.iter().chain(&self.tokens).any(|t| {
                t.is_empty() || HeaderValue::from_str(&with_scheme(&self.scheme, t)).is_err()
            });
        if bad {
            errs.push(
                cfg.path(),
                "a token must be non-empty printable text (it is not shown here)",
            );
        }
        errs.into_result(())
    }
}

fn with_scheme(scheme: &str, token: &str) -> String {
    if scheme.is_empty() {
        token.to_owned()
    } else {
        format!("{scheme} {token}")
    }
}

/// The tokens of a file: one per line, blank lines ignored.
fn read_tokens(path: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    if tokens.is_empty() {
        return Err(format!("{path} holds no token"));
    }
    Ok(tokens)
}

pub struct BearerTokenAuthFactory;

impl ExtensionFactory for BearerTokenAuthFactory {
    fn type_name(&self) -> &'static str {
        "bearertokenauth"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Extension>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &BearerTokenAuthConfig| c.validate(cfg))?;
        let auth = BearerToken::new(c).map_err(|e| cfg.error("filename", e))?;
        Ok(Box::new(BearerTokenExtension(Arc::new(auth))))
    }
}

pub fn factory() -> Arc<dyn ExtensionFactory> {
    Arc::new(BearerTokenAuthFactory)
}

/// How often a token file is looked at for a change.
const FILE_CHECK: Duration = Duration::from_secs(1);

pub struct BearerToken {
    header: HeaderName,
    scheme: String,
    tokens: Mutex<Tokens>,
    filename: Option<String>,
}

struct Tokens {
    /// The accepted header values, `Bearer <token>`.
    values: Vec<String>,
    modified: Option<SystemTime>,
    checked: Instant,
}

impl BearerToken {
    fn new(c: BearerTokenAuthConfig) -> Result<Self, String> {
        let tokens = match &c.filename {
            Some(f) => read_tokens(f)?,
            None => c.token.iter().chain(&c.tokens).cloned().collect(),
        };
        let header = HeaderName::from_bytes(c.header.to_ascii_lowercase().as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(Self {
            header,
            tokens: Mutex::new(Tokens {
                values: tokens.iter().map(|t| with_scheme(&c.scheme, t)).collect(),
                modified: c.filename.as_deref().and_then(modified),
                checked: Instant::now(),
            }),
            scheme: c.scheme,
            filename: c.filename,
        })
    }

    /// The accepted values, the file read again if it changed.
    fn values(&self) -> Vec<String> {
        let mut t = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = &self.filename {
            if t.checked.elapsed() >= FILE_CHECK {
                t.checked = Instant::now();
                let now = modified(f);
                if now != t.modified {
                    match read_tokens(f) {
                        Ok(tokens) => {
                            t.values = tokens
                                .iter()
                                .map(|x| with_scheme(&self.scheme, x))
                                .collect();
                            t.modified = now;
                            tracing::info!(file = %f, "bearer token file read again");
                        }
                        Err(e) => {
                            profcol_pipeline::warn_limited!(error = %e, "cannot read the bearer token file; keeping the previous token")
                        }
                    }
                }
            }
        }
        t.values.clone()
    }
}

fn modified(path: &str) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Compares in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Authenticator for BearerToken {
    fn authenticate(&self, headers: &HeaderMap) -> Result<(), String> {
        let Some(got) = headers.get(&self.header) else {
            return Err(format!("missing {} header", self.header));
        };
        let values = self.values();
        if values.iter().any(|v| same(v.as_bytes(), got.as_bytes())) {
            Ok(())
        } else {
            Err(format!(
                "invalid bearer token in the {} header",
                self.header
            ))
        }
    }

    fn client_headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let values = self.values();
        let first = values.first().ok_or("no token")?;
        let mut v =
            HeaderValue::from_str(first).map_err(|_| "the token is not a valid header value")?;
        v.set_sensitive(true);
        Ok(vec![(self.header.clone(), v)])
    }
}

struct BearerTokenExtension(Arc<BearerToken>);

#[async_trait]
impl Extension for BearerTokenExtension {
    fn authenticator(&self) -> Option<Arc<dyn Authenticator>> {
        Some(self.0.clone())
    }

    async fn start(
        self: Box<Self>,
        ctx: ExtensionContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        Ok(tokio::spawn(async move { ctx.shutdown.cancelled().await }))
    }
}

#[cfg(test)]
mod tests {
    use profcol_pipeline::config::Kind;

    use super::*;

    fn create(yaml: &str) -> Result<Arc<dyn Authenticator>, String> {
        let cfg = ComponentConfig::from_yaml(Kind::Extension, "bearertokenauth", yaml)
            .map_err(|e| e.to_string())?;
        let x = BearerTokenAuthFactory
            .create(&cfg)
            .map_err(|e| e.to_string())?;
        Ok(x.authenticator().unwrap())
    }

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn checks_the_token_and_sends_it() {
        let a = create("token: s3cr3t").unwrap();
        assert!(a
            .authenticate(&headers("authorization", "Bearer s3cr3t"))
            .is_ok());
        let wrong = a
            .authenticate(&headers("authorization", "Bearer nope"))
            .unwrap_err();
        assert!(
            !wrong.contains("s3cr3t") && !wrong.contains("nope"),
            "{wrong}"
        );
        assert!(a
            .authenticate(&HeaderMap::new())
            .unwrap_err()
            .contains("missing"));
        let sent = a.client_headers().unwrap();
        assert_eq!(sent[0].0, "authorization");
        assert_eq!(sent[0].1, "Bearer s3cr3t");
        assert!(sent[0].1.is_sensitive());

        let a = create("tokens: [a, b]\nheader: X-Api-Key\nscheme: ''").unwrap();
        assert!(a.authenticate(&headers("x-api-key", "b")).is_ok());
        assert!(a.authenticate(&headers("authorization", "b")).is_err());
    }

    #[test]
    fn a_token_file_is_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "first\n").unwrap();
        let a = create(&format!("filename: {}", f.display())).unwrap();
        assert!(a
            .authenticate(&headers("authorization", "Bearer first"))
            .is_ok());
        std::thread::sleep(FILE_CHECK + Duration::from_millis(50));
        std::fs::write(&f, "second\n").unwrap();
        // mtime granularity: make sure it moved.
        let later = SystemTime::now() + Duration::from_secs(2);
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(a
            .authenticate(&headers("authorization", "Bearer second"))
            .is_ok());
        assert!(a
            .authenticate(&headers("authorization", "Bearer first"))
            .is_err());
    }

    #[test]
    fn config_errors_name_the_key_and_never_the_token() {
        let e = create("{}").err().unwrap();
        assert!(
            e.contains("exactly one of token, tokens and filename"),
            "{e}"
        );
        let e = create("token: a\nfilename: /nope").err().unwrap();
        assert!(e.contains("exactly one"), "{e}");
        let e = create("token: \"bad\\nline\"").err().unwrap();
        assert!(!e.contains("bad"), "{e}");
        let e = create("filename: /does/not/exist").err().unwrap();
        assert!(
            e.contains("extensions::bearertokenauth::filename: cannot read"),
            "{e}"
        );
    }
}
