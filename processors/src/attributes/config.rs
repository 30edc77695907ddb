//! The `attributes` section: `actions` (the `attraction` actions) and the
//! `include`/`exclude` match properties of the Collector's
//! `internal/filter/filterconfig`, as they apply to profiles.

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::attraction::{self, ActionConfig};
use crate::transform::config_any::Any;

use super::matcher::{AttrMatcher, FilterSet, Matcher, Want};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttributesConfig {
    pub actions: Vec<ActionConfig>,
    pub include: Option<MatchProperties>,
    pub exclude: Option<MatchProperties>,
}

/// `filterconfig.MatchProperties`. The keys of spans, logs and metrics are
/// read so that they are refused by name rather than as unknown.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatchProperties {
    pub match_type: String,
    pub regexp: Option<RegexpConfig>,
    pub services: Vec<String>,
    pub attributes: Vec<AttributeConfig>,
    pub resources: Vec<AttributeConfig>,
    pub libraries: Vec<LibraryConfig>,
    pub span_names: Vec<String>,
    pub span_kinds: Vec<String>,
    pub log_bodies: Vec<String>,
    pub log_severity_texts: Vec<String>,
    pub log_severity_number: Option<Any>,
    pub metric_names: Vec<String>,
}

/// `regexp.Config`: an LRU cache of match results in the Collector.
/// Accepted; profcol matches a few strings per profile and keeps no cache.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegexpConfig {
    pub cacheenabled: bool,
    pub cachemaxnumentries: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttributeConfig {
    pub key: String,
    pub value: Option<Any>,
}

/// A scope to match: `version` unset matches any version, `""` only an
/// empty one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LibraryConfig {
    pub name: String,
    pub version: Option<String>,
}

/// What a checked config makes: the actions and the two matchers.
pub struct Compiled {
    pub actions: Vec<attraction::Action>,
    pub include: Option<Matcher>,
    pub exclude: Option<Matcher>,
}

impl AttributesConfig {
    pub fn compile(&self, cfg: &ComponentConfig) -> Result<Compiled, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let actions = match attraction::compile(&self.actions, cfg, "actions") {
            Ok(a) => a,
            Err(e) => {
                errs.extend(e);
                Vec::new()
            }
        };
        let mut side = |mp: &Option<MatchProperties>, key: &str| {
            mp.as_ref().and_then(|mp| mp.compile(cfg, key, &mut errs))
        };
        let include = side(&self.include, "include");
        let exclude = side(&self.exclude, "exclude");
        errs.into_result(Compiled {
            actions,
            include,
            exclude,
        })
    }
}

/// The keys of other signals, each with what it matches.
const OTHER_SIGNALS: [(&str, &str); 6] = [
    ("span_names", "a span's name"),
    ("span_kinds", "a span's kind"),
    ("log_bodies", "a log record's body"),
    ("log_severity_texts", "a log record's severity"),
    ("log_severity_number", "a log record's severity"),
    ("metric_names", "a metric's name"),
];

impl MatchProperties {
    fn other_signal_keys(&self) -> [bool; 6] {
        [
            !self.span_names.is_empty(),
            !self.span_kinds.is_empty(),
            !self.log_bodies.is_empty(),
            !self.log_severity_texts.is_empty(),
            self.log_severity_number.is_some(),
            !self.metric_names.is_empty(),
        ]
    }

    /// `NewMatcher` for profiles: `services` (the resource's
    /// `service.name`), `attributes` (the profile's), `resources`,
    /// `libraries` (the scope); errors go to `errs` at their key paths.
    fn compile(
        &self,
        cfg: &ComponentConfig,
        side: &str,
        errs: &mut ConfigErrors,
    ) -> Option<Matcher> {
        let at = |k: &str| cfg.key_path(&format!("{side}::{k}"));
        let before = errs.0.len();
        for ((key, what), set) in OTHER_SIGNALS.iter().zip(self.other_signal_keys()) {
            if set {
                errs.push(
                    at(key),
                    format!("{key} is not valid for profiles: it matches {what}, and profcol carries profiles only"),
                );
            }
        }
        let other_signal = self.other_signal_keys().contains(&true);
        if !other_signal
            && self.services.is_empty()
            && self.attributes.is_empty()
            && self.resources.is_empty()
            && self.libraries.is_empty()
        {
            errs.push(
                cfg.key_path(side),
                "at least one of \"services\", \"attributes\", \"resources\" or \"libraries\" field must be specified",
            );
        }
        let regexp = match self.match_type.as_str() {
            "regexp" => Some(true),
            "strict" => Some(false),
            _ => None,
        };
        // The Collector needs a match type only where it builds a filter
        // set; profcol refuses a wrong one wherever it is.
        let needs_type = !self.services.is_empty()
            || !self.libraries.is_empty()
            || self
                .attributes
                .iter()
                .chain(&self.resources)
                .any(|a| a.value.is_some());
        if regexp.is_none() && (needs_type || !self.match_type.is_empty()) {
            errs.push(
                at("match_type"),
                format!(
                    "unrecognized match_type: '{}', valid types are: [regexp strict]",
                    self.match_type
                ),
            );
        }
        let regexp = regexp.unwrap_or(false);
        let mut set = |items: &[&str], key: &str| -> FilterSet {
            match FilterSet::new(items, regexp) {
                Ok(f) => f,
                Err(e) => {
                    errs.push(
                        at(key),
                        format!("invalid regexp: {}", attraction::regex_error(&e)),
                    );
                    FilterSet::Strict(Vec::new())
                }
            }
        };
        let services = (!self.services.is_empty()).then(|| {
            let items: Vec<&str> = self.services.iter().map(String::as_str).collect();
            set(&items, "services")
        });
        let libraries = self
            .libraries
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = set(&[&l.name], &format!("libraries::{i}::name"));
                let version = l
                    .version
                    .as_deref()
                    .map(|v| set(&[v], &format!("libraries::{i}::version")));
                (name, version)
            })
            .collect();
        let attributes = attr_matchers(&self.attributes, regexp, "attributes", &at, errs);
        let resources = attr_matchers(&self.resources, regexp, "resources", &at, errs);
        (errs.0.len() == before).then_some(Matcher {
            services,
            libraries,
            attributes,
            resources,
        })
    }
}

/// `NewAttributesMatcher`: a key alone matches its presence; a value, its
/// equal (`strict`) or a string the expression finds (`regexp`).
fn attr_matchers(
    list: &[AttributeConfig],
    regexp: bool,
    key: &str,
    at: &dyn Fn(&str) -> String,
    errs: &mut ConfigErrors,
) -> Vec<AttrMatcher> {
    let mut out = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        if a.key.is_empty() {
            errs.push(
                at(&format!("{key}::{i}::key")),
                format!("can't have empty key in the list of {key}"),
            );
            continue;
        }
        let want = match &a.value {
            None => Want::Exists,
            Some(v) if regexp => match v {
                Any::Str(s) => match regex::Regex::new(s) {
                    Ok(re) => Want::Regexp(re),
                    Err(e) => {
                        errs.push(
                            at(&format!("{key}::{i}::value")),
                            format!("invalid regexp: {}", attraction::regex_error(&e)),
                        );
                        continue;
                    }
                },
                other => {
                    errs.push(
                        at(&format!("{key}::{i}::value")),
                        format!(
                            "match_type=regexp for {:?} only supports Str, but found {}",
                            a.key,
                            profcol_ottl::context::any_type(&attraction::any_value(other))
                        ),
                    );
                    continue;
                }
            },
            Some(v) => Want::Equal(attraction::any_value(v)),
        };
        out.push(AttrMatcher {
            key: a.key.clone(),
            want,
        });
    }
    out
}
