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
    /// A file holding the token, read again when it changes. Given with
    /// `token`, the file wins (as in the Collector).
    pub filename: Option<String>,
    /// The Collector's wait for a token file that is not there yet:
    /// refused when enabled.
    pub retry_on_failure: Option<TokenFileRetry>,
    pub wait_for_token_file: bool,
}

/// `retry_on_failure` of the Collector's credentials file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokenFileRetry {
    pub enabled: bool,
    pub max_retries: u64,
    pub interval: profcol_pipeline::config::Duration,
}

/// Why waiting for the token file is refused.
const NO_WAIT: &str = "is not supported: profcol reads the token file when the config is loaded, refuses one it cannot read, and reads it again whenever it changes; it does not wait for the file to appear";

impl Default for BearerTokenAuthConfig {
    fn default() -> Self {
        Self {
            header: "authorization".into(),
            scheme: "Bearer".into(),
            token: None,
            tokens: Vec::new(),
            filename: None,
            retry_on_failure: None,
            wait_for_token_file: false,
        }
    }
}

impl BearerTokenAuthConfig {
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        // The Collector's rules: a token, tokens or a file; not token and
        // tokens; the file wins over token.
        let (token, tokens, file) = (
            self.token.is_some(),
            !self.tokens.is_empty(),
            self.filename.is_some(),
        );
        if !token && !tokens && !file {
            errs.push(
                cfg.path(),
                "no bearer token provided: set token, tokens or filename",
            );
        }
        if token && tokens {
            errs.push(
                cfg.path(),
                "either tokens or token should be provided, not both",
            );
        }
        if tokens && file {
            errs.push(
                cfg.key_path("tokens"),
                "set either tokens or filename: given both, the Collector v0.161.0 uses tokens and ignores the file, while its log says the tokens are ignored",
            );
        }
        if token && file {
            tracing::warn!(
                extension = %cfg.id,
                "a filename is specified; the configured token is ignored"
            );
        }
        if self.retry_on_failure.as_ref().is_some_and(|r| r.enabled) {
            errs.push(cfg.key_path("retry_on_failure"), NO_WAIT);
        }
        if self.wait_for_token_file {
            errs.push(cfg.key_path("wait_for_token_file"), NO_WAIT);
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

/// The tokens of a file, as the Collector reads it: the first
/// whitespace-delimited word of each line (the rest of the line is a
/// comment), blank lines ignored.
fn read_tokens(path: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let tokens: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
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
                            profcol_model::warn_limited!(error = %e, "cannot read the bearer token file; keeping the previous token")
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

    /// As the Collector: the file wins over `token`, and each line's first
    /// word is its token (the rest is a comment).
    #[test]
    fn a_token_file_wins_and_holds_a_word_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "  first # the old one\n\nsecond\tcomment\n").unwrap();
        let a = create(&format!("token: ignored\nfilename: {}", f.display())).unwrap();
        for ok in ["Bearer first", "Bearer second"] {
            assert!(
                a.authenticate(&headers("authorization", ok)).is_ok(),
                "{ok}"
            );
        }
        for bad in ["Bearer ignored", "Bearer first # the old one"] {
            assert!(
                a.authenticate(&headers("authorization", bad)).is_err(),
                "{bad}"
            );
        }
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
        assert_eq!(
            e,
            "extensions::bearertokenauth: no bearer token provided: set token, tokens or filename"
        );
        let e = create("token: a\ntokens: [b]").err().unwrap();
        assert_eq!(
            e,
            "extensions::bearertokenauth: either tokens or token should be provided, not both"
        );
        let e = create("tokens: [a]\nfilename: /nope").err().unwrap();
        assert!(
            e.starts_with("extensions::bearertokenauth::tokens: set either tokens or filename"),
            "{e}"
        );
        let e = create("token: a\nfilename: /nope").err().unwrap();
        assert!(
            e.starts_with("extensions::bearertokenauth::filename: cannot read /nope"),
            "{e}"
        );
        let e = create(
            "filename: /nope\nretry_on_failure: {enabled: true, max_retries: 5, interval: 2s}\nwait_for_token_file: true",
        )
        .err()
        .unwrap();
        for key in ["retry_on_failure", "wait_for_token_file"] {
            assert!(
                e.contains(&format!(
                    "extensions::bearertokenauth::{key}: is not supported: profcol reads the token file"
                )),
                "{e}"
            );
        }
        // Disabled, they change nothing.
        assert!(
            create("token: a\nretry_on_failure: {enabled: false}\nwait_for_token_file: false")
                .is_ok()
        );
        let e = create("token: \"bad\\nline\"").err().unwrap();
        assert!(!e.contains("bad"), "{e}");
        let e = create("filename: /does/not/exist").err().unwrap();
        assert!(
            e.contains("extensions::bearertokenauth::filename: cannot read"),
            "{e}"
        );
    }
}
