//! The `thread_pruning` section and its compiled form.

use regex::Regex;
use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThreadPruningConfig {
    /// Sample attribute keys removed from every sample (e.g. `thread.id`).
    pub drop_attributes: Vec<String>,
    /// Rewrites of `thread.name`, tried in order; the first whose pattern
    /// matches the whole name applies.
    pub rename_threads: Vec<RenameRule>,
    /// Samples whose thread name fully matches one of these are dropped.
    pub drop_threads: Vec<String>,
    /// When set, only samples whose thread name fully matches one of these
    /// are kept (samples without a thread name are dropped).
    pub keep_threads: Vec<String>,
    /// Threads with fewer non-idle samples than this are dropped; 2 is
    /// Relay's rule (drop threads with at most one). 0 disables.
    pub min_samples_per_thread: u64,
}

/// `{pattern, replacement}`: a list rather than a map because the order
/// matters (first match wins) and YAML maps have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameRule {
    pub pattern: String,
    /// The new name; `$1` / `$name` insert capture groups (regex crate
    /// syntax). In the YAML, `${1}` must be written `$${1}` and a literal
    /// `$` as `$$$$`: the config loader expands `${...}` and `$$` first, as
    /// the Collector does.
    pub replacement: String,
}

/// Regexes compiled once, at create time.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub drop_attributes: Vec<String>,
    pub rename: Vec<(Regex, String)>,
    pub drop_threads: Vec<Regex>,
    pub keep_threads: Vec<Regex>,
    pub min_samples_per_thread: u64,
}

impl Rules {
    pub(super) fn compile(
        c: &ThreadPruningConfig,
        cfg: &ComponentConfig,
    ) -> Result<Self, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        for (i, key) in c.drop_attributes.iter().enumerate() {
            if key.is_empty() {
                errs.push(
                    cfg.key_path(&format!("drop_attributes::{i}")),
                    "must not be empty",
                );
            }
        }
        let mut rename = Vec::with_capacity(c.rename_threads.len());
        for (i, r) in c.rename_threads.iter().enumerate() {
            let at = format!("rename_threads::{i}");
            match full_match(&r.pattern) {
                Ok(re) => {
                    if let Err(msg) = check_replacement(&re, &r.replacement) {
                        errs.push(cfg.key_path(&format!("{at}::replacement")), msg);
                    }
                    rename.push((re, r.replacement.clone()));
                }
                Err(msg) => errs.push(cfg.key_path(&format!("{at}::pattern")), msg),
            }
        }
        let mut list = |key: &str, patterns: &[String]| -> Vec<Regex> {
            let mut out = Vec::with_capacity(patterns.len());
            for (i, p) in patterns.iter().enumerate() {
                match full_match(p) {
                    Ok(re) => out.push(re),
                    Err(msg) => errs.push(cfg.key_path(&format!("{key}::{i}")), msg),
                }
            }
            out
        };
        let drop_threads = list("drop_threads", &c.drop_threads);
        let keep_threads = list("keep_threads", &c.keep_threads);
        errs.into_result(Self {
            drop_attributes: c.drop_attributes.clone(),
            rename,
            drop_threads,
            keep_threads,
            min_samples_per_thread: c.min_samples_per_thread,
        })
    }

    /// The name after `rename_threads`, when a rule changes it.
    pub(super) fn renamed(&self, name: &str) -> Option<String> {
        let (caps, replacement) = self
            .rename
            .iter()
            .find_map(|(re, r)| re.captures(name).map(|c| (c, r)))?;
        let mut out = String::with_capacity(replacement.len());
        caps.expand(replacement, &mut out);
        (out != name).then_some(out)
    }

    /// Whether samples of a thread with this name (or none) are kept by
    /// `drop_threads` / `keep_threads`.
    pub(super) fn name_kept(&self, name: Option<&str>) -> bool {
        match name {
            Some(n) => {
                let kept = self.keep_threads.is_empty()
                    || self.keep_threads.iter().any(|re| re.is_match(n));
                kept && !self.drop_threads.iter().any(|re| re.is_match(n))
            }
            None => self.keep_threads.is_empty(),
        }
    }
}

/// Patterns match the whole thread name, as Prometheus relabelling does:
/// `main` must not also match `domain-worker`.
pub(crate) fn full_match(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
        // Syntax errors render as several lines with a caret under the
        // wrapped pattern; the last line says what is wrong.
        let why = match &e {
            regex::Error::Syntax(s) => s
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("error: "))
                .unwrap_or(s)
                .to_owned(),
            other => other.to_string(),
        };
        format!("invalid regex `{pattern}`: {why}")
    })
}

/// Rejects `$name` / `${name}` references to groups the pattern does not
/// have (the regex crate would silently insert nothing).
fn check_replacement(re: &Regex, replacement: &str) -> Result<(), String> {
    let bytes = replacement.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        let rest = &replacement[i + 1..];
        let (name, used) = if rest.starts_with('$') {
            i += 2;
            continue;
        } else if let Some(braced) = rest.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => return Err(format!("unclosed `${{` in `{replacement}`")),
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (&rest[..end], end)
        };
        if name.is_empty() {
            return Err(format!(
                "a `$` not followed by a group name in `{replacement}` (a literal `$` is `$$`)"
            ));
        }
        let known = match name.parse::<usize>() {
            Ok(n) => n < re.captures_len(),
            Err(_) => re.capture_names().flatten().any(|n| n == name),
        };
        if !known {
            return Err(format!(
                "refers to group {name:?}, which the pattern does not have"
            ));
        }
        i += 1 + used;
    }
    Ok(())
}
