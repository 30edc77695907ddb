//! A figment [`Provider`] for YAML, parsed with serde_yaml_ng.
//!
//! figment's own YAML support uses the unmaintained serde_yaml; this one
//! converts serde_yaml_ng's tree into figment values itself, resolving `<<`
//! merge keys as the Collector's YAML parser does.

use std::path::Path;

use figment::value::{Dict, Empty, Num, Tag, Value};
use figment::{Error, Metadata, Profile, Provider};
use serde_yaml_ng::Value as Yaml;

use super::ConfigErrors;

/// One YAML document, from a file or from memory, read and parsed when the
/// provider is made. Its top level must be a map (or empty); it is provided
/// for figment's default profile.
#[derive(Debug, Clone)]
pub struct YamlProvider {
    metadata: Metadata,
    parsed: Result<Dict, ConfigErrors>,
}

impl YamlProvider {
    /// Reads and parses a YAML file.
    pub fn file(path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        let origin = format!("config file {:?}", path.display().to_string());
        let parsed = match std::fs::read_to_string(path) {
            Ok(text) => parse_document(&text).map_err(|p| problems(&origin, p)),
            Err(e) => Err(ConfigErrors::one("", format!("cannot read {origin}: {e}"))),
        };
        Self {
            metadata: Metadata::from("YAML file", path),
            parsed,
        }
    }

    /// Parses a YAML document held in memory; `name` says where it came
    /// from in error messages.
    pub fn string(name: &str, text: &str) -> Self {
        Self {
            metadata: Metadata::named(format!("YAML ({name})")),
            parsed: parse_document(text).map_err(|p| problems(name, p)),
        }
    }

    /// The Collector's `env:NAME` (or `env:NAME:-default`) config source:
    /// the variable's text, parsed as a YAML document. An unset variable
    /// without a default is an error (the Collector reads it as an empty
    /// document and fails later, further from the cause).
    pub fn env(name: &str, default: Option<&str>) -> Self {
        let origin = format!("--config=env:{name}");
        let valid = !name.is_empty()
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let parsed = if !valid {
            Err(ConfigErrors::one(
                "",
                format!(
                    "{origin}: invalid variable name {name:?} (expected [a-zA-Z_][a-zA-Z0-9_]*)"
                ),
            ))
        } else {
            match (std::env::var(name), default) {
                (Ok(text), _) => parse_document(&text).map_err(|p| problems(&origin, p)),
                (Err(_), Some(d)) => parse_document(d).map_err(|p| problems(&origin, p)),
                (Err(_), None) => Err(ConfigErrors::one(
                    "",
                    format!("{origin}: the environment variable {name} is not set"),
                )),
            }
        };
        Self {
            metadata: Metadata::named(format!("YAML (env:{name})")),
            parsed,
        }
    }

    /// Every problem found reading or parsing the document.
    pub fn errors(&self) -> Option<&ConfigErrors> {
        self.parsed.as_ref().err()
    }
}

fn problems(origin: &str, problems: Problems) -> ConfigErrors {
    let mut errs = ConfigErrors::default();
    for (path, msg) in problems {
        errs.push(path.join("::"), format!("{origin}: {msg}"));
    }
    errs
}

impl Provider for YamlProvider {
    fn metadata(&self) -> Metadata {
        self.metadata.clone()
    }

    fn data(&self) -> Result<figment::value::Map<Profile, Dict>, Error> {
        match &self.parsed {
            Ok(dict) => Ok(Profile::Default.collect(dict.clone())),
            Err(errs) => Err(Error::from(errs.to_string())),
        }
    }
}

/// Problems with their key paths.
pub(super) type Problems = Vec<(Vec<String>, String)>;

/// Parses one YAML document whose top level is a map (an empty document is
/// an empty map).
pub(super) fn parse_document(text: &str) -> Result<Dict, Problems> {
    let yaml = parse_yaml(text)?;
    let mut problems = Problems::new();
    let mut path = Vec::new();
    match yaml {
        Yaml::Null => Ok(Dict::new()),
        Yaml::Mapping(_) => match convert(yaml, &mut path, &mut problems) {
            Value::Dict(_, dict) if problems.is_empty() => Ok(unflatten(dict)),
            _ => Err(problems),
        },
        other => Err(vec![(
            Vec::new(),
            format!("the top level must be a map, got {}", kind_of(&other)),
        )]),
    }
}

/// The Collector's key delimiter: a top-level key `a::b::c: v` means
/// `a: {b: {c: v}}` (how `--config=yaml:exporters::debug::verbosity: basic`
/// and `--set` reach into a config).
pub(super) const KEY_DELIMITER: &str = "::";

/// Splits top-level keys at [`KEY_DELIMITER`] into nested maps, as the
/// Collector's confmap does with every document it reads (only the top
/// level: `a: {b::c: 1}` keeps its key). Maps met on the way are merged
/// into, so `a::b: 1` and `a::c: 2` give `a: {b: 1, c: 2}`.
fn unflatten(dict: Dict) -> Dict {
    if !dict.keys().any(|k| k.contains(KEY_DELIMITER)) {
        return dict;
    }
    let mut out = Dict::new();
    let (flat, plain): (Vec<_>, Vec<_>) = dict
        .into_iter()
        .partition(|(k, _)| k.contains(KEY_DELIMITER));
    // Plain keys first, so a flattened key refines them whatever the order.
    for (k, v) in plain.into_iter().chain(flat) {
        let parts: Vec<&str> = k.split(KEY_DELIMITER).collect();
        let (last, parents) = parts.split_last().expect("split gives one part at least");
        let mut at = &mut out;
        for p in parents {
            let entry = at
                .entry((*p).to_owned())
                .or_insert_with(|| Value::from(Dict::new()));
            if !matches!(entry, Value::Dict(..)) {
                *entry = Value::from(Dict::new());
            }
            let Value::Dict(_, d) = entry else {
                unreachable!("made a map above")
            };
            at = d;
        }
        at.insert((*last).to_owned(), v);
    }
    out
}

/// The YAML tree of `text`, with `<<` merge keys applied.
fn parse_yaml(text: &str) -> Result<Yaml, Problems> {
    too_deep(text)?;
    let mut yaml: Yaml = serde_yaml_ng::from_str(text).map_err(|e| syntax(text, &e))?;
    yaml.apply_merge()
        .map_err(|e| vec![(Vec::new(), e.to_string())])?;
    Ok(yaml)
}

/// Deepest `[ ]` / `{ }` nesting a config may have. No real config comes
/// close; the YAML parser takes time quadratic in the depth (100k levels:
/// half a minute), so deeper text is refused before it is parsed.
const MAX_FLOW_DEPTH: usize = 64;

/// Refuses text whose flow collections nest deeper than [`MAX_FLOW_DEPTH`],
/// counting brackets outside quotes and comments, in one linear pass.
fn too_deep(text: &str) -> Result<(), Problems> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut chars = text.chars().peekable();
    let mut prev = '\n';
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '#' if prev.is_whitespace() => {
                // A comment runs to the end of the line.
                while chars.next_if(|&c| c != '\n').is_some() {}
            }
            '"' | '\'' => {
                // A quoted scalar: `\"` escapes in double quotes, `''` in single.
                while let Some(q) = chars.next() {
                    match q {
                        '\n' => line += 1,
                        '\\' if c == '"' => {
                            chars.next();
                        }
                        _ if q == c => {
                            if c == '\'' && chars.next_if_eq(&'\'').is_some() {
                                continue;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(vec![(
                        Vec::new(),
                        format!(
                            "line {line}: [ ] and {{ }} nest deeper than {MAX_FLOW_DEPTH} levels"
                        ),
                    )]);
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    Ok(())
}

/// A YAML syntax error, with a hint for the usual cause: in YAML, `{`
/// cannot start a plain value inside `[ ]` or `{ }`, so an unquoted
/// `${env:X}` there breaks the document (the Collector's parser agrees).
fn syntax(text: &str, e: &serde_yaml_ng::Error) -> Problems {
    let line = e
        .location()
        .and_then(|l| text.lines().nth(l.line().saturating_sub(1)));
    let hint = match line {
        Some(l) if l.contains("${") && (l.contains('[') || l.replace("${", "").contains('{')) => {
            " (inside [ ] or { }, quote a ${...} reference: \"${env:NAME}\", or write the list as a block)"
        }
        _ => "",
    };
    vec![(Vec::new(), format!("{e}{hint}"))]
}

/// Parses a YAML snippet that may be any value (a component section).
pub(super) fn parse_value(text: &str) -> Result<Value, Problems> {
    let yaml = parse_yaml(text)?;
    let mut problems = Problems::new();
    let value = convert(yaml, &mut Vec::new(), &mut problems);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems)
    }
}

fn convert(yaml: Yaml, path: &mut Vec<String>, problems: &mut Problems) -> Value {
    let tag = Tag::Default;
    match yaml {
        Yaml::Null => Value::Empty(tag, Empty::None),
        Yaml::Bool(b) => Value::Bool(tag, b),
        Yaml::Number(n) => Value::Num(tag, number(&n)),
        Yaml::String(s) => Value::String(tag, s),
        Yaml::Sequence(items) => Value::Array(
            tag,
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    path.push(i.to_string());
                    let v = convert(item, path, problems);
                    path.pop();
                    v
                })
                .collect(),
        ),
        Yaml::Mapping(map) => {
            let mut dict = Dict::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s,
                    // The Collector reads `8888:` or `true:` as the key text.
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Number(n) => n.to_string(),
                    other => {
                        problems.push((
                            path.clone(),
                            format!("map keys must be strings, got {}", kind_of(&other)),
                        ));
                        continue;
                    }
                };
                path.push(key);
                let value = convert(v, path, problems);
                let key = path.pop().expect("pushed above");
                dict.insert(key, value);
            }
            Value::Dict(tag, dict)
        }
        Yaml::Tagged(t) => {
            problems.push((path.clone(), format!("YAML tag {} is not supported", t.tag)));
            Value::Empty(tag, Empty::None)
        }
    }
}

fn number(n: &serde_yaml_ng::Number) -> Num {
    if let Some(u) = n.as_u64() {
        Num::U64(u)
    } else if let Some(i) = n.as_i64() {
        Num::I64(i)
    } else {
        Num::F64(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn kind_of(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "null",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a map",
        Yaml::Tagged(_) => "a tagged value",
    }
}
