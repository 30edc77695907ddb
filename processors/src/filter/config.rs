//! The `filter` section, with the Collector's keys
//! (`processor/filterprocessor/config.go`) for profiles:
//! `profile_conditions` (strings, each its context inferred, or groups
//! with `context`, `conditions`, `error_mode`) or the older
//! `profiles: {resource: [...], profile: [...]}`.

use serde::{Deserialize, Serialize};

use profcol_ottl::{infer, Condition, Level, Options, Prefixes};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::transform::config_any::Any;
use crate::transform::{ottl_error, ErrorMode};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterConfig {
    pub error_mode: String,
    pub profile_conditions: Vec<Option<Entry>>,
    pub profiles: Legacy,
    /// Other signals: profcol carries profiles only; accepted, never run.
    pub traces: Option<Any>,
    pub metrics: Option<Any>,
    pub logs: Option<Any>,
    pub trace_conditions: Option<Any>,
    pub metric_conditions: Option<Any>,
    pub log_conditions: Option<Any>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Legacy {
    pub resource: Vec<String>,
    pub profile: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry {
    Flat(String),
    Group(GroupConfig),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupConfig {
    pub context: String,
    pub error_mode: String,
    pub conditions: Vec<String>,
}

/// Conditions by level: an item for which one holds is dropped.
#[derive(Debug, Default)]
pub struct Rules {
    pub error_mode: ErrorMode,
    pub resource: Vec<Condition>,
    pub scope: Vec<Condition>,
    pub profile: Vec<Condition>,
}

impl Rules {
    fn push(&mut self, c: Condition) {
        match c.level {
            Level::Resource => self.resource.push(c),
            Level::Scope => self.scope.push(c),
            Level::Profile => self.profile.push(c),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.resource.is_empty() && self.scope.is_empty() && self.profile.is_empty()
    }
}

impl FilterConfig {
    pub fn compile(&self, cfg: &ComponentConfig) -> Result<Vec<Rules>, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let mode = ErrorMode::at(
            &self.error_mode,
            ErrorMode::Ignore,
            cfg,
            "error_mode",
            &mut errs,
        );
        let legacy = !self.profiles.resource.is_empty() || !self.profiles.profile.is_empty();
        if legacy && !self.profile_conditions.is_empty() {
            errs.push(
                cfg.key_path("profile_conditions"),
                "cannot use context inferred profile conditions \"profile_conditions\" and the settings \"profiles.resource\", \"profiles.profile\" at the same time",
            );
            return Err(errs);
        }
        let mut out = Vec::new();
        if legacy {
            let mut r = Rules {
                error_mode: mode,
                ..Default::default()
            };
            for (key, level, list) in [
                (
                    "profiles::resource",
                    Level::Resource,
                    &self.profiles.resource,
                ),
                ("profiles::profile", Level::Profile, &self.profiles.profile),
            ] {
                let opts = Options {
                    level,
                    prefixes: Prefixes::Default,
                };
                for (i, t) in list.iter().enumerate() {
                    match Condition::parse(t, opts) {
                        Ok(c) => r.push(c),
                        Err(e) => ottl_error(&mut errs, cfg, &format!("{key}::{i}"), t, &e),
                    }
                }
            }
            out.push(r);
        }
        let mut flat = Rules {
            error_mode: mode,
            ..Default::default()
        };
        for (i, e) in self.profile_conditions.iter().enumerate() {
            let at = format!("profile_conditions::{i}");
            match e {
                None => errs.push(
                    cfg.key_path(&at),
                    "empty condition list items are not supported",
                ),
                Some(Entry::Flat(t)) => match infer(&[], &[t]) {
                    Ok(level) => match Condition::parse(
                        t,
                        Options {
                            level,
                            prefixes: Prefixes::Required,
                        },
                    ) {
                        Ok(c) => flat.push(c),
                        Err(e) => ottl_error(&mut errs, cfg, &at, t, &e),
                    },
                    Err((_, e)) => ottl_error(&mut errs, cfg, &at, t, &e),
                },
                Some(Entry::Group(g)) => {
                    let gmode = ErrorMode::at(
                        &g.error_mode,
                        mode,
                        cfg,
                        &format!("{at}::error_mode"),
                        &mut errs,
                    );
                    let mut r = Rules {
                        error_mode: gmode,
                        ..Default::default()
                    };
                    let texts: Vec<&str> = g.conditions.iter().map(String::as_str).collect();
                    let (level, prefixes) = if g.context.is_empty() {
                        match infer(&[], &texts) {
                            Ok(l) => (l, Prefixes::Required),
                            Err((_, e)) => {
                                ottl_error(&mut errs, cfg, &at, &texts.join("; "), &e);
                                continue;
                            }
                        }
                    } else {
                        match Level::parse(&g.context) {
                            Some(l) => (l, Prefixes::Default),
                            None => {
                                errs.push(
                                    cfg.key_path(&format!("{at}::context")),
                                    format!("unknown context {:?}", g.context),
                                );
                                continue;
                            }
                        }
                    };
                    for (j, t) in texts.iter().enumerate() {
                        match Condition::parse(t, Options { level, prefixes }) {
                            // A group runs at its one level.
                            Ok(mut c) => {
                                c.level = level;
                                r.push(c)
                            }
                            Err(e) => {
                                ottl_error(&mut errs, cfg, &format!("{at}::conditions::{j}"), t, &e)
                            }
                        }
                    }
                    out.push(r);
                }
            }
        }
        if !flat.is_empty() {
            out.insert(0, flat);
        }
        errs.into_result(out)
    }
}
