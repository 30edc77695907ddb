use std::fmt;

/// One problem in a config, at an otelcol-style key path such as
/// `exporters::otlp/gw::timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    /// Whether the error is at `path` or at a key below it
    /// (`exporters::otlp::tls::ca_file` is under `exporters::otlp::tls`).
    pub fn is_at_or_under(&self, path: &str) -> bool {
        self.path
            .strip_prefix(path)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every problem found, reported together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    pub fn one(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self(vec![ConfigError {
            path: path.into(),
            message: message.into(),
        }])
    }

    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError {
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn extend(&mut self, other: ConfigErrors) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Both values, or the errors of both: a component's independent checks
    /// all run and are all reported, none hides another. An error both
    /// report (same path, same message) is listed once.
    pub fn both<A, B>(
        a: Result<A, ConfigErrors>,
        b: Result<B, ConfigErrors>,
    ) -> Result<(A, B), ConfigErrors> {
        match (a, b) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
            (Err(mut e), Err(more)) => {
                for m in more.0 {
                    if !e.0.contains(&m) {
                        e.0.push(m);
                    }
                }
                Err(e)
            }
        }
    }

    /// `Ok(v)` when nothing was recorded.
    pub fn into_result<T>(self, v: T) -> Result<T, ConfigErrors> {
        if self.0.is_empty() {
            Ok(v)
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
