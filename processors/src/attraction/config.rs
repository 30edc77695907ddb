//! A list of the Collector's `attraction` actions (`resource`'s
//! `attributes`, `attributes`' `actions`), checked as
//! `attraction.NewAttrProc` checks them.

use regex::Regex;
use serde::{Deserialize, Serialize};

use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue, KeyValueList};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::transform::config_any::Any;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActionConfig {
    pub key: String,
    pub value: Option<Any>,
    pub from_attribute: String,
    pub from_context: String,
    pub default_value: Option<Any>,
    pub pattern: String,
    pub converted_type: String,
    pub action: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    Insert,
    Update,
    Upsert,
    Delete,
    Hash,
    Extract,
    Convert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converted {
    String,
    Int,
    Double,
}

#[derive(Debug, Clone)]
pub enum Source {
    None,
    Value(AnyValue),
    Attribute(String),
    Context(String),
}

#[derive(Debug, Clone)]
pub struct Action {
    pub key: String,
    pub kind: ActionKind,
    pub source: Source,
    pub default: Option<AnyValue>,
    pub pattern: Option<Regex>,
    pub converted: Option<Converted>,
}

/// A YAML value as `pcommon.Value.FromRaw` makes it.
pub fn any_value(v: &Any) -> AnyValue {
    AnyValue {
        value: match v {
            Any::Null(()) => None,
            Any::Bool(b) => Some(A::BoolValue(*b)),
            Any::Int(i) => Some(A::IntValue(*i)),
            Any::Float(f) => Some(A::DoubleValue(*f)),
            Any::Str(s) => Some(A::StringValue(s.clone())),
            Any::List(l) => Some(A::ArrayValue(ArrayValue {
                values: l.iter().map(any_value).collect(),
            })),
            Any::Map(m) => Some(A::KvlistValue(KeyValueList {
                values: m
                    .iter()
                    .map(|(k, v)| KeyValue {
                        key: k.clone(),
                        value: Some(any_value(v)),
                        ..Default::default()
                    })
                    .collect(),
            })),
        },
    }
}

/// The actions under `key` of `cfg`, each error at its own key path.
pub fn compile(
    actions: &[ActionConfig],
    cfg: &ComponentConfig,
    key: &str,
) -> Result<Vec<Action>, ConfigErrors> {
    let mut errs = ConfigErrors::default();
    if actions.is_empty() {
        errs.push(cfg.key_path(key), format!("missing required field {key:?}"));
    }
    let mut out = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let at = |k: &str| cfg.key_path(&format!("{key}::{i}::{k}"));
        let kind = match a.action.to_ascii_lowercase().as_str() {
            "insert" => ActionKind::Insert,
            "update" => ActionKind::Update,
            "upsert" => ActionKind::Upsert,
            "delete" => ActionKind::Delete,
            "hash" => ActionKind::Hash,
            "extract" => ActionKind::Extract,
            "convert" => ActionKind::Convert,
            other => {
                errs.push(
                    at("action"),
                    format!("error creating AttrProc due to unsupported action {other:?}"),
                );
                continue;
            }
        };
        let pattern = if a.pattern.is_empty() {
            None
        } else {
            match Regex::new(&a.pattern) {
                Ok(r) => Some(r),
                Err(e) => {
                    errs.push(
                        at("pattern"),
                        format!(
                            "error creating AttrProc. Field \"pattern\" has invalid pattern: {}",
                            regex_error(&e)
                        ),
                    );
                    continue;
                }
            }
        };
        let sources = [
            a.value.is_some(),
            !a.from_attribute.is_empty(),
            !a.from_context.is_empty(),
        ];
        let n_sources = sources.iter().filter(|b| **b).count();
        let source = if let Some(v) = &a.value {
            Source::Value(any_value(v))
        } else if !a.from_attribute.is_empty() {
            Source::Attribute(a.from_attribute.clone())
        } else if !a.from_context.is_empty() {
            Source::Context(a.from_context.clone())
        } else {
            Source::None
        };
        let mut bad = |k: &str, m: &str| {
            errs.push(
                at(k),
                format!(
                    "error creating AttrProc due to {m} for action {:?}",
                    a.action
                ),
            )
        };
        match kind {
            ActionKind::Insert | ActionKind::Update | ActionKind::Upsert => {
                if a.key.is_empty() {
                    bad("key", "missing required field \"key\"");
                }
                if n_sources > 1 || (n_sources == 0 && a.default_value.is_none()) {
                    bad(
                        "value",
                        "exactly one of \"value\", \"from_attribute\" or \"from_context\" required",
                    );
                }
                if pattern.is_some() || !a.converted_type.is_empty() {
                    bad(
                        "pattern",
                        "fields \"pattern\" and \"converted_type\" not allowed",
                    );
                }
            }
            ActionKind::Delete | ActionKind::Hash => {
                if a.key.is_empty() && pattern.is_none() {
                    bad("key", "missing required field \"key\" or \"pattern\"");
                }
                // The Collector ignores `from_context` here.
                if a.value.is_some() || !a.from_attribute.is_empty() || !a.converted_type.is_empty()
                {
                    bad(
                        "value",
                        "fields \"value\", \"from_attribute\" and \"converted_type\" not allowed",
                    );
                }
            }
            ActionKind::Extract => {
                if a.key.is_empty() {
                    bad("key", "missing required field \"key\"");
                }
                match &pattern {
                    None => bad("pattern", "missing required field \"pattern\""),
                    Some(re) => {
                        let names = re.capture_names().skip(1).collect::<Vec<_>>();
                        if names.is_empty() || names.iter().any(Option::is_none) {
                            bad(
                                "pattern",
                                "the pattern must have named subexpressions (and only named ones)",
                            );
                        }
                    }
                }
                if n_sources > 0 || !a.converted_type.is_empty() {
                    bad("value", "fields \"value\", \"from_attribute\", \"from_context\" and \"converted_type\" not allowed");
                }
            }
            ActionKind::Convert => {
                if a.key.is_empty() {
                    bad("key", "missing required field \"key\"");
                }
                if n_sources > 0 || pattern.is_some() {
                    bad("value", "fields \"value\", \"from_attribute\", \"from_context\" and \"pattern\" not allowed");
                }
            }
        }
        let converted = match (kind, a.converted_type.as_str()) {
            (ActionKind::Convert, "string") => Some(Converted::String),
            (ActionKind::Convert, "int") => Some(Converted::Int),
            (ActionKind::Convert, "double") => Some(Converted::Double),
            (ActionKind::Convert, other) => {
                errs.push(
                    at("converted_type"),
                    format!("error creating AttrProc due to invalid converted_type {other:?}"),
                );
                None
            }
            _ => None,
        };
        out.push(Action {
            key: a.key.clone(),
            kind,
            source,
            default: a.default_value.as_ref().map(any_value),
            pattern,
            converted,
        });
    }
    errs.into_result(out)
}

/// A regex error on one line: the crate's syntax errors draw the pattern
/// and a caret over several lines; the last one says what is wrong.
pub fn regex_error(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(s) => s
            .lines()
            .last()
            .unwrap_or(s)
            .trim()
            .trim_start_matches("error: ")
            .to_string(),
        other => other.to_string(),
    }
}
