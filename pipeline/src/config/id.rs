use std::fmt;

/// The five sections of a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Receiver,
    Processor,
    Exporter,
    Extension,
    /// An exporter of one pipeline and a receiver of another.
    Connector,
}

impl Kind {
    /// The top-level key of the section (`receivers`).
    pub fn section(self) -> &'static str {
        match self {
            Kind::Receiver => "receivers",
            Kind::Processor => "processors",
            Kind::Exporter => "exporters",
            Kind::Extension => "extensions",
            Kind::Connector => "connectors",
        }
    }
}

/// `type` or `type/name`, as in the Collector.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentId {
    pub ty: String,
    pub name: Option<String>,
}

impl ComponentId {
    /// Parses `type[/name]`; the type must be non-empty `[a-zA-Z][0-9a-zA-Z_]*`
    /// and the name, when present, non-empty.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (ty, name) = match s.split_once('/') {
            Some((t, n)) => (t, Some(n)),
            None => (s, None),
        };
        let ty_ok = ty.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ty_ok {
            return Err(format!("invalid component type {ty:?} in id {s:?}"));
        }
        if let Some(n) = name {
            if n.is_empty() || n.chars().any(char::is_whitespace) {
                return Err(format!("invalid component name {n:?} in id {s:?}"));
            }
        }
        Ok(Self {
            ty: ty.to_owned(),
            name: name.map(str::to_owned),
        })
    }
}

impl fmt::Display for ComponentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "{}/{}", self.ty, n),
            None => f.write_str(&self.ty),
        }
    }
}
