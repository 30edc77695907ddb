//! The `transform` section, with the Collector's keys
//! (`processor/transformprocessor/config.go`): `error_mode`, and
//! `profile_statements` as plain strings (the context inferred from their
//! paths) or as groups with `context`, `conditions`, `statements` and
//! their own `error_mode`.

use serde::{Deserialize, Serialize};

use profcol_ottl::{infer, Condition, Level, Options, Prefixes, Statement};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

/// What a statement or condition that fails on an item does
/// (`ottl.ErrorMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorMode {
    /// Log it (rate-limited), count it and go on with the next statement.
    #[default]
    Ignore,
    /// Count it and go on, without a log line.
    Silent,
    /// Stop: the batch is dropped and counted (the Collector refuses it).
    Propagate,
}

impl ErrorMode {
    /// Case-insensitive, as the Collector; `None` for an unknown mode.
    pub fn parse(s: &str) -> Option<ErrorMode> {
        match s.to_ascii_lowercase().as_str() {
            "ignore" => Some(ErrorMode::Ignore),
            "silent" => Some(ErrorMode::Silent),
            "propagate" => Some(ErrorMode::Propagate),
            _ => None,
        }
    }

    /// The mode at `key` (`""` = unset: `default`).
    pub fn at(
        s: &str,
        default: ErrorMode,
        cfg: &ComponentConfig,
        key: &str,
        errs: &mut ConfigErrors,
    ) -> ErrorMode {
        if s.is_empty() {
            return default;
        }
        ErrorMode::parse(s).unwrap_or_else(|| {
            errs.push(cfg.key_path(key), format!("unknown error mode {s}"));
            default
        })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformConfig {
    pub error_mode: String,
    pub profile_statements: Vec<Option<Entry>>,
    /// Other signals' statements: profcol carries profiles only, so they
    /// never run; accepted so that a Collector config loads.
    pub trace_statements: Vec<config_any::Any>,
    pub metric_statements: Vec<config_any::Any>,
    pub log_statements: Vec<config_any::Any>,
    pub flatten_data: bool,
}

/// Any YAML value, to accept keys profcol does not read.
pub mod config_any {
    #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
    #[serde(untagged)]
    pub enum Any {
        Bool(bool),
        Int(i64),
        Float(f64),
        Str(String),
        List(Vec<Any>),
        Map(std::collections::BTreeMap<String, Any>),
        Null(()),
    }
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
    pub statements: Vec<String>,
    pub shared_cache: bool,
}

/// One group of statements compiled: they run in order on every item of
/// their level for which a condition holds.
#[derive(Debug)]
pub struct Group {
    pub level: Level,
    pub error_mode: ErrorMode,
    pub conditions: Vec<Condition>,
    pub statements: Vec<Statement>,
}

/// A config error at `key` naming the statement and the column.
pub(crate) fn ottl_error(
    errs: &mut ConfigErrors,
    cfg: &ComponentConfig,
    key: &str,
    text: &str,
    e: &profcol_ottl::ParseError,
) {
    let msg = if e.col == 0 {
        format!("{}: {text:?}", e.msg)
    } else {
        format!("unable to parse OTTL statement {text:?}: {e}")
    };
    errs.push(cfg.key_path(key), msg);
}

impl TransformConfig {
    pub fn compile(&self, cfg: &ComponentConfig) -> Result<(ErrorMode, Vec<Group>), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let mode = ErrorMode::at(
            &self.error_mode,
            ErrorMode::Ignore,
            cfg,
            "error_mode",
            &mut errs,
        );
        let flat: Vec<(usize, &str)> = self
            .profile_statements
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Some(Entry::Flat(s)) => Some((i, s.as_str())),
                _ => None,
            })
            .collect();
        let grouped = self
            .profile_statements
            .iter()
            .filter(|e| matches!(e, Some(Entry::Group(_))))
            .count();
        if let Some(i) = self.profile_statements.iter().position(Option::is_none) {
            errs.push(
                cfg.key_path(&format!("profile_statements::{i}")),
                "empty statement list items are not supported",
            );
            return Err(errs);
        }
        if !flat.is_empty() && grouped > 0 {
            errs.push(
                cfg.key_path("profile_statements"),
                "configuring multiple configuration styles is not supported, please use only Basic configuration or only Advanced configuration",
            );
            return Err(errs);
        }
        let mut groups = Vec::new();
        if !flat.is_empty() {
            // The basic form: one group, one context inferred for all.
            let texts: Vec<&str> = flat.iter().map(|(_, s)| *s).collect();
            if let Some(g) = compile_group(
                cfg,
                &mut errs,
                "profile_statements",
                None,
                &[],
                &texts,
                |i| format!("profile_statements::{i}"),
                mode,
            ) {
                groups.push(g);
            }
        }
        for (i, e) in self.profile_statements.iter().enumerate() {
            let Some(Entry::Group(g)) = e else { continue };
            let at = format!("profile_statements::{i}");
            let gmode = ErrorMode::at(
                &g.error_mode,
                mode,
                cfg,
                &format!("{at}::error_mode"),
                &mut errs,
            );
            let level = if g.context.is_empty() {
                None
            } else {
                match Level::parse(&g.context) {
                    Some(l) => Some(l),
                    None => {
                        errs.push(
                            cfg.key_path(&format!("{at}::context")),
                            format!("unknown context {:?}", g.context),
                        );
                        continue;
                    }
                }
            };
            let conds: Vec<&str> = g.conditions.iter().map(String::as_str).collect();
            let stmts: Vec<&str> = g.statements.iter().map(String::as_str).collect();
            let n = conds.len();
            let key = |j: usize| {
                if j < n {
                    format!("{at}::conditions::{j}")
                } else {
                    format!("{at}::statements::{}", j - n)
                }
            };
            let key_s = |j: usize| format!("{at}::statements::{j}");
            match level {
                Some(level) => {
                    // With a context: statements get its prefix where a
                    // path has none; conditions too.
                    let opts = Options {
                        level,
                        prefixes: Prefixes::Default,
                    };
                    let conditions = conds
                        .iter()
                        .enumerate()
                        .filter_map(|(j, t)| {
                            Condition::parse(t, opts)
                                .map_err(|e| ottl_error(&mut errs, cfg, &key(j), t, &e))
                                .ok()
                        })
                        .collect();
                    let statements = stmts
                        .iter()
                        .enumerate()
                        .filter_map(|(j, t)| {
                            Statement::parse(t, opts)
                                .map_err(|e| ottl_error(&mut errs, cfg, &key_s(j), t, &e))
                                .ok()
                        })
                        .collect();
                    groups.push(Group {
                        level,
                        error_mode: gmode,
                        conditions,
                        statements,
                    });
                }
                None => {
                    if let Some(g) =
                        compile_group(cfg, &mut errs, &at, None, &conds, &stmts, key_s, gmode)
                    {
                        groups.push(g);
                    }
                }
            }
        }
        errs.into_result((mode, groups))
    }
}

/// A group whose context is inferred from its paths (all must name one).
#[allow(clippy::too_many_arguments)]
fn compile_group(
    cfg: &ComponentConfig,
    errs: &mut ConfigErrors,
    at: &str,
    _level: Option<Level>,
    conds: &[&str],
    stmts: &[&str],
    key: impl Fn(usize) -> String,
    mode: ErrorMode,
) -> Option<Group> {
    let level = match infer(stmts, conds) {
        Ok(l) => l,
        Err((i, e)) => {
            let (k, t) = if e.col == 0 {
                (at.to_string(), stmts.join("; "))
            } else if i < stmts.len() {
                (key(i), stmts[i].to_string())
            } else {
                (
                    format!("{at}::conditions::{}", i - stmts.len()),
                    conds[i - stmts.len()].to_string(),
                )
            };
            ottl_error(errs, cfg, &k, &t, &e);
            return None;
        }
    };
    let opts = Options {
        level,
        prefixes: Prefixes::Required,
    };
    let mut ok = true;
    let conditions = conds
        .iter()
        .enumerate()
        .filter_map(|(j, t)| {
            Condition::parse(t, opts)
                .map_err(|e| {
                    ok = false;
                    ottl_error(errs, cfg, &format!("{at}::conditions::{j}"), t, &e)
                })
                .ok()
        })
        .collect();
    let statements = stmts
        .iter()
        .enumerate()
        .filter_map(|(j, t)| {
            Statement::parse(t, opts)
                .map_err(|e| {
                    ok = false;
                    ottl_error(errs, cfg, &key(j), t, &e)
                })
                .ok()
        })
        .collect();
    ok.then_some(Group {
        level,
        error_mode: mode,
        conditions,
        statements,
    })
}
