use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use figment::value::{Dict, Value};
use figment::Figment;
use serde::de::DeserializeOwned;

use super::decode::{decode_lenient, decode_value, describe};
use super::expand::{expand_tree, Originals};
use super::service::{kind_noun, parse_service, Defined};
use super::yaml::{parse_value, Problems, YamlProvider};
use super::{ComponentId, ConfigErrors, Kind, ServiceConfig};

/// One component's section: its id and the still-undecoded YAML value.
#[derive(Debug, Clone)]
pub struct ComponentConfig {
    pub id: ComponentId,
    pub kind: Kind,
    /// Always a map: a component written with nothing (`debug:`) is `{}`.
    pub value: figment::value::Value,
    /// Original text of values under `value` that were one whole `${...}`
    /// and now hold a typed scalar or null, keyed by key path relative to
    /// `value`; a string field receives the text (see `expand`).
    pub originals: Originals,
}

impl ComponentConfig {
    /// A section from a YAML snippet, for tests and `profcol test`.
    /// `${env:...}` is expanded as in [`load`].
    pub fn from_yaml(kind: Kind, id: &str, yaml: &str) -> Result<Self, ConfigErrors> {
        let base = format!("{}::{id}", kind.section());
        let id = ComponentId::parse(id).map_err(|e| ConfigErrors::one(&base, e))?;
        let mut value = parse_value(yaml).map_err(|p| problems_at(&base, p))?;
        let mut errs = ConfigErrors::default();
        let mut originals = Originals::new();
        let mut path = Vec::new();
        let mut expand_errs = ConfigErrors::default();
        expand_tree(
            &mut value,
            &mut path,
            &env_lookup,
            &mut originals,
            &mut expand_errs,
        );
        for e in expand_errs.0 {
            errs.push(join(&base, &e.path), e.message);
        }
        let value = section_value(value, &base, &mut errs);
        errs.into_result(Self {
            id,
            kind,
            value,
            originals,
        })
    }

    /// `exporters::otlp/gw`
    pub fn path(&self) -> String {
        format!("{}::{}", self.kind.section(), self.id)
    }

    /// Decodes the section into `T` (whose `Default` gives the defaults and
    /// which should be `#[serde(default, deny_unknown_fields)]`), mapping
    /// every serde error to a key path under [`Self::path`]:
    /// `exporters::otlp/gw::retry_on_failure: unknown field "max_intervall", ...`.
    /// Every bad key is reported, not just the first. A null value decodes as
    /// `None` for an `Option` field and as the default for a struct, map or
    /// list field.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ConfigErrors> {
        decode_value(&self.value, &self.originals, &self.path())
    }

    /// Decodes the section as [`Self::decode`] does, then runs `check`, the
    /// component's own checks, which report every problem they find at its
    /// key path rather than stopping at the first. This is how factories
    /// read their section, so that `validate` lists every error at once.
    ///
    /// A key that fails to decode (`compression: lz4`) is reported and takes
    /// its default, and `check` still runs on the rest. What `check` finds at
    /// or under such a key is left out, since the decode error already names
    /// it. Only a section that cannot be decoded at all (a required field
    /// missing, a list item of the wrong shape) skips `check`.
    pub fn decode_checked<T: DeserializeOwned, R>(
        &self,
        check: impl FnOnce(&T) -> Result<R, ConfigErrors>,
    ) -> Result<(T, R), ConfigErrors> {
        let partial = decode_lenient::<T>(&self.value, &self.originals, &self.path());
        let mut errs = partial.errors;
        let Some(value) = partial.value else {
            return Err(errs);
        };
        match check(&value) {
            Ok(r) => errs.into_result((value, r)),
            Err(more) => {
                errs.0.extend(
                    more.0
                        .into_iter()
                        .filter(|e| !partial.defaulted.iter().any(|d| e.is_at_or_under(d))),
                );
                Err(errs)
            }
        }
    }

    /// This section split in two: without `keys`, and with only them.
    pub fn split_off(&self, keys: &[&str]) -> (ComponentConfig, ComponentConfig) {
        let mut rest = self.clone();
        let mut taken = self.clone();
        if let (figment::value::Value::Dict(_, r), figment::value::Value::Dict(_, t)) =
            (&mut rest.value, &mut taken.value)
        {
            r.retain(|k, _| !keys.contains(&k.as_str()));
            t.retain(|k, _| keys.contains(&k.as_str()));
        }
        let under = |p: &Vec<String>| p.first().is_some_and(|k| keys.contains(&k.as_str()));
        rest.originals.retain(|p, _| !under(p));
        taken.originals.retain(|p, _| under(p));
        (rest, taken)
    }

    /// An error at `key` (`retry_on_failure::multiplier`) inside this section.
    pub fn error(&self, key: &str, message: impl Into<String>) -> ConfigErrors {
        ConfigErrors::one(self.key_path(key), message)
    }

    pub fn key_path(&self, key: &str) -> String {
        if key.is_empty() {
            self.path()
        } else {
            format!("{}::{}", self.path(), key)
        }
    }
}

/// A loaded config: sections keyed by id, the service graph checked.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub receivers: BTreeMap<ComponentId, ComponentConfig>,
    pub processors: BTreeMap<ComponentId, ComponentConfig>,
    pub exporters: BTreeMap<ComponentId, ComponentConfig>,
    pub extensions: BTreeMap<ComponentId, ComponentConfig>,
    pub connectors: BTreeMap<ComponentId, ComponentConfig>,
    pub service: ServiceConfig,
    /// The exporters `sending_queue::batch` puts a batching pipeline in
    /// front of, with the client metadata keys that batching keeps
    /// (`partition::metadata_keys`).
    pub batched_exporters: BTreeMap<ComponentId, Vec<String>>,
}

impl Config {
    /// The section of one kind.
    pub fn section(&self, kind: Kind) -> &BTreeMap<ComponentId, ComponentConfig> {
        match kind {
            Kind::Receiver => &self.receivers,
            Kind::Processor => &self.processors,
            Kind::Exporter => &self.exporters,
            Kind::Extension => &self.extensions,
            Kind::Connector => &self.connectors,
        }
    }

    fn section_mut(&mut self, kind: Kind) -> &mut BTreeMap<ComponentId, ComponentConfig> {
        match kind {
            Kind::Receiver => &mut self.receivers,
            Kind::Processor => &mut self.processors,
            Kind::Exporter => &mut self.exporters,
            Kind::Extension => &mut self.extensions,
            Kind::Connector => &mut self.connectors,
        }
    }

    /// Every component of every section.
    pub fn components(&self) -> impl Iterator<Item = &ComponentConfig> {
        KINDS.iter().flat_map(|k| self.section(*k).values())
    }

    /// Checks every component's type against the types `known` lists for its
    /// kind (the runtime's registry, aliases included):
    /// `receivers::foo: unknown type "foo" (known: otlp, sentry)`.
    pub fn check_types<'k, I>(&self, known: impl Fn(Kind) -> I) -> Result<(), ConfigErrors>
    where
        I: IntoIterator<Item = &'k str>,
    {
        let mut errs = ConfigErrors::default();
        for kind in KINDS {
            let types: BTreeSet<&str> = known(kind).into_iter().collect();
            for c in self.section(kind).values() {
                if !types.contains(c.id.ty.as_str()) {
                    let list = if types.is_empty() {
                        "none".to_owned()
                    } else {
                        types.iter().copied().collect::<Vec<_>>().join(", ")
                    };
                    errs.push(
                        c.path(),
                        format!(
                            "unknown {} type {:?} (known: {list})",
                            kind_noun(kind),
                            c.id.ty
                        ),
                    );
                }
            }
        }
        errs.into_result(())
    }
}

const KINDS: [Kind; 5] = [
    Kind::Receiver,
    Kind::Processor,
    Kind::Exporter,
    Kind::Extension,
    Kind::Connector,
];
const TOP_LEVEL: [&str; 6] = [
    "receivers",
    "processors",
    "exporters",
    "extensions",
    "connectors",
    "service",
];

/// Where one part of the config comes from: a `--config` value as the
/// Collector reads it (`file:PATH` or a bare path, `env:NAME`,
/// `yaml:TEXT`), or a `--set key=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// `env:NAME` or `env:NAME:-default`: the variable holds a YAML document.
    Env {
        name: String,
        default: Option<String>,
    },
    /// A YAML document; top-level keys may reach down with `::`.
    Yaml(String),
}

impl Source {
    /// Reads one `--config` value. As in the Collector, text that starts
    /// with a URI scheme (`[A-Za-z][A-Za-z0-9+.-]+:`) names its provider;
    /// anything else is a file path.
    pub fn parse(uri: &str) -> Result<Self, String> {
        let Some((scheme, rest)) = uri.split_once(':').filter(|(s, _)| is_scheme(s)) else {
            return Ok(Self::File(uri.into()));
        };
        match scheme {
            "file" => Ok(Self::File(rest.into())),
            "env" => {
                let (name, default) = match rest.split_once(":-") {
                    Some((n, d)) => (n, Some(d.to_owned())),
                    None => (rest, None),
                };
                Ok(Self::Env {
                    name: name.to_owned(),
                    default,
                })
            }
            "yaml" => Ok(Self::Yaml(rest.to_owned())),
            "http" | "https" => Err(format!(
                "--config={uri}: profcol does not fetch configs over {scheme}; download the file and pass --config=file:PATH"
            )),
            other => Err(format!(
                "--config={uri}: unsupported scheme {other:?} (profcol reads file:, env: and yaml:)"
            )),
        }
    }

    /// Reads one `--set key=value` the way the Collector does: the key's
    /// `.` become `::` and the pair is a `yaml:` source, applied after every
    /// `--config`.
    pub fn set(arg: &str) -> Result<Self, String> {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(format!("--set {arg}: missing equal sign"));
        };
        Ok(Self::Yaml(format!(
            "{}: {}",
            key.trim().replace('.', "::"),
            value.trim()
        )))
    }

    fn provider(&self) -> YamlProvider {
        match self {
            Self::File(path) => YamlProvider::file(path),
            Self::Env { name, default } => YamlProvider::env(name, default.as_deref()),
            Self::Yaml(text) => YamlProvider::string(&format!("--config=yaml:{text}"), text),
        }
    }
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

/// Loads and merges `paths` (later files win: maps merge key by key, lists
/// and scalars are replaced), expands variables, and checks the shape and
/// the service graph. Component sections are decoded later.
pub fn load(paths: &[PathBuf]) -> Result<Config, ConfigErrors> {
    let (config, errs) = load_partial(paths)?;
    errs.into_result(config)
}

/// [`load_partial`] of config sources in order (later wins).
pub fn load_sources_partial(sources: &[Source]) -> Result<(Config, ConfigErrors), ConfigErrors> {
    if sources.is_empty() {
        return Err(ConfigErrors::one("", "no config file given"));
    }
    from_providers(sources.iter().map(Source::provider).collect())
}

/// Same as [`load`] for one YAML document held in memory.
pub fn load_str(yaml: &str) -> Result<Config, ConfigErrors> {
    let (config, errs) = load_str_partial(yaml)?;
    errs.into_result(config)
}

/// Like [`load`], but when the files parse, returns what could be read
/// together with the errors found, so that `validate` can go on to check the
/// components and list every error at once. `Err` only when no config could
/// be read at all.
pub fn load_partial(paths: &[PathBuf]) -> Result<(Config, ConfigErrors), ConfigErrors> {
    if paths.is_empty() {
        return Err(ConfigErrors::one("", "no config file given"));
    }
    from_providers(paths.iter().map(YamlProvider::file).collect())
}

/// [`load_partial`] for one YAML document held in memory.
pub fn load_str_partial(yaml: &str) -> Result<(Config, ConfigErrors), ConfigErrors> {
    from_providers(vec![YamlProvider::string("config", yaml)])
}

/// Reports every unreadable or invalid document (figment keeps only some of
/// several providers' errors), then merges them in order.
fn from_providers(providers: Vec<YamlProvider>) -> Result<(Config, ConfigErrors), ConfigErrors> {
    let mut errs = ConfigErrors::default();
    for p in &providers {
        if let Some(e) = p.errors() {
            errs.extend(e.clone());
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let figment = providers.into_iter().fold(Figment::new(), Figment::merge);
    let root: Value = figment
        .extract()
        .map_err(|e| ConfigErrors::one("", e.to_string()))?;
    from_root_partial(root, &env_lookup)
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

#[cfg(test)]
pub(super) fn from_root(
    root: Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let (config, errs) = from_root_partial(root, lookup)?;
    errs.into_result(config)
}

fn from_root_partial(
    mut root: Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(Config, ConfigErrors), ConfigErrors> {
    let mut expand_errs = ConfigErrors::default();
    let mut originals = Originals::new();
    expand_tree(
        &mut root,
        &mut Vec::new(),
        lookup,
        &mut originals,
        &mut expand_errs,
    );
    // A value that failed to expand is reported once, not again by the
    // checks below that see its unexpanded text.
    let failed: BTreeSet<String> = expand_errs.0.iter().map(|e| e.path.clone()).collect();
    let mut errs = ConfigErrors::default();

    let Value::Dict(_, mut top) = root else {
        return Err(ConfigErrors::one("", "the top level must be a map"));
    };

    let mut config = Config::default();
    for kind in KINDS {
        if let Some(value) = top.remove(kind.section()) {
            parse_section(kind, value, &originals, &mut config, &mut errs);
        }
    }
    // As the Collector: a connector's id may not also be an exporter's or
    // a receiver's, since pipelines name both in the same lists.
    for id in config.connectors.keys() {
        for kind in [Kind::Exporter, Kind::Receiver] {
            if config.section(kind).contains_key(id) {
                let noun = kind_noun(kind);
                errs.push(
                    format!("connectors::{id}"),
                    format!(
                        "ambiguous ID: found both \"{id}\" {noun} and \"{id}\" connector; rename one of them (e.g. the connector to \"{}/connector\")",
                        id.ty
                    ),
                );
            }
        }
    }
    let service = top.remove("service");
    for key in top.keys() {
        let expected = TOP_LEVEL.map(|k| format!("{k:?}")).join(", ");
        errs.push(
            "",
            format!("unknown top-level key {key:?}, expected one of {expected}"),
        );
    }

    let defined: Defined<'_> = KINDS
        .iter()
        .map(|k| (*k, config.section(*k).keys().collect()))
        .collect();
    let service_originals = sub_originals(&originals, &["service"]);
    let service = parse_service(
        service.as_ref(),
        &service_originals,
        &defined,
        &failed,
        &mut errs,
    );
    config.service = service;
    super::exporter_batching::rewrite(&mut config, &mut errs);
    errs.0
        .retain(|e| !failed.iter().any(|f| e.is_at_or_under(f)));
    expand_errs.extend(errs);
    Ok((config, expand_errs))
}

fn parse_section(
    kind: Kind,
    value: Value,
    originals: &Originals,
    config: &mut Config,
    errs: &mut ConfigErrors,
) {
    let section = kind.section();
    let dict = match value {
        Value::Empty(..) => return,
        Value::Dict(_, d) => d,
        other => {
            errs.push(
                section,
                format!("invalid type: expected a map, got {}", describe(&other)),
            );
            return;
        }
    };
    for (key, value) in dict {
        let path = format!("{section}::{key}");
        let id = match ComponentId::parse(&key) {
            Ok(id) => id,
            Err(e) => {
                errs.push(path, e);
                continue;
            }
        };
        let value = section_value(value, &path, errs);
        let originals = sub_originals(originals, &[section, &key]);
        config.section_mut(kind).insert(
            id.clone(),
            ComponentConfig {
                id,
                kind,
                value,
                originals,
            },
        );
    }
}

/// A component's value: a map, with null meaning the defaults (`{}`).
fn section_value(value: Value, path: &str, errs: &mut ConfigErrors) -> Value {
    match value {
        Value::Dict(..) => value,
        Value::Empty(..) => Value::from(Dict::new()),
        other => {
            errs.push(
                path,
                format!("invalid type: expected a map, got {}", describe(&other)),
            );
            Value::from(Dict::new())
        }
    }
}

/// The entries of `originals` under `prefix`, with the prefix stripped.
fn sub_originals(originals: &Originals, prefix: &[&str]) -> Originals {
    originals
        .iter()
        .filter(|(k, _)| k.len() > prefix.len() && k.iter().zip(prefix).all(|(a, b)| a == b))
        .map(|(k, v)| (k[prefix.len()..].to_vec(), v.clone()))
        .collect()
}

fn join(base: &str, rest: &str) -> String {
    match (base.is_empty(), rest.is_empty()) {
        (_, true) => base.to_owned(),
        (true, false) => rest.to_owned(),
        (false, false) => format!("{base}::{rest}"),
    }
}

fn problems_at(base: &str, problems: Problems) -> ConfigErrors {
    let mut errs = ConfigErrors::default();
    for (path, msg) in problems {
        errs.push(join(base, &path.join("::")), msg);
    }
    errs
}
