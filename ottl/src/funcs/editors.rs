//! Editors: the function a statement runs (names start lowercase).

use std::borrow::Cow;

use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use regex::Regex;

use super::args::{self, bind, opt, req, Kind, P};
use super::{Pattern, StrFn};
use crate::ast;
use crate::compile::{Compiler, Expr, PathExpr};
use crate::context::Ctx;
use crate::error::{EvalResult, ParseError};
use crate::fail;
use crate::value::{map_get, map_put, map_remove, Val};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Insert,
    Update,
    Upsert,
}

/// The replacement half of the replace_* editors.
#[derive(Debug)]
pub struct Replacement {
    pub with: Expr,
    pub func: Option<StrFn>,
    pub format: Option<Expr>,
}

#[derive(Debug)]
pub enum Editor {
    Set(PathExpr, Expr),
    DeleteKey(PathExpr, Expr),
    DeleteMatchingKeys(PathExpr, Pattern),
    KeepKeys(PathExpr, Vec<Expr>),
    KeepMatchingKeys(PathExpr, Pattern),
    Limit(PathExpr, i64, Vec<String>),
    MergeMaps(PathExpr, Expr, Strategy),
    ReplacePattern(PathExpr, Pattern, Replacement),
    ReplaceAllPatterns(PathExpr, bool, Pattern, Replacement),
    ReplaceMatch(PathExpr, Pattern, Replacement),
    ReplaceAllMatches(PathExpr, Pattern, Replacement),
    TruncateAll(PathExpr, i64, bool, String),
    Append(PathExpr, Option<Expr>, Option<Vec<Expr>>),
    Flatten(PathExpr, String, i64, bool),
    /// `delete_index(target, start, end)`: `end` is `start + 1` unless given.
    DeleteIndex(PathExpr, Expr, Option<Expr>),
    StringifyAll(PathExpr),
    Clear(PathExpr),
}

pub fn editor(c: &Compiler, call: &ast::Call) -> Result<Editor, ParseError> {
    let err = |m: String| ParseError::new(call.col, m);
    let repl = |a: &mut args::Args, i: usize| Replacement {
        with: a.expr(i),
        func: a.func(i + 1),
        format: a.opt_expr(i + 2),
    };
    let s = P::Get(Kind::Str);
    Ok(match call.name.as_str() {
        "set" => {
            let mut a = bind(
                c,
                call,
                &[req("target", P::Path), req("value", P::Get(Kind::Any))],
            )?;
            Editor::Set(a.path(0), a.expr(1))
        }
        "stringify_all" => {
            let mut a = bind(c, call, &[req("target", P::Path)])?;
            Editor::StringifyAll(map_path(a.path(0), call)?)
        }
        "clear" => {
            let mut a = bind(c, call, &[req("target", P::Path)])?;
            Editor::Clear(a.path(0))
        }
        "delete_key" => {
            let mut a = bind(c, call, &[req("target", P::Path), req("key", s)])?;
            Editor::DeleteKey(map_path(a.path(0), call)?, a.expr(1))
        }
        "delete_matching_keys" => {
            let mut a = bind(c, call, &[req("target", P::Path), req("pattern", P::Regex)])?;
            Editor::DeleteMatchingKeys(map_path(a.path(0), call)?, a.pattern(1))
        }
        "keep_keys" => {
            let mut a = bind(c, call, &[req("target", P::Path), req("keys", P::List)])?;
            Editor::KeepKeys(map_path(a.path(0), call)?, a.list(1).unwrap_or_default())
        }
        "keep_matching_keys" => {
            let mut a = bind(c, call, &[req("target", P::Path), req("pattern", P::Regex)])?;
            Editor::KeepMatchingKeys(map_path(a.path(0), call)?, a.pattern(1))
        }
        "limit" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req("limit", P::LitInt),
                    req("priority_keys", P::List),
                ],
            )?;
            let limit = a.int(1).unwrap_or(0);
            let keys = a
                .list(2)
                .unwrap_or_default()
                .into_iter()
                .map(|e| match e.literal() {
                    Some(Val::Str(s)) => Ok(s.to_string()),
                    _ => Err(err(
                        "invalid argument at position 2: must be a list of type string".into(),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            if limit < 0 {
                return Err(err(format!(
                    "invalid limit for limit function, {limit} cannot be negative"
                )));
            }
            if limit < keys.len() as i64 {
                return Err(err(format!(
                    "invalid limit for limit function, {limit} cannot be less than number of priority attributes {}",
                    keys.len()
                )));
            }
            Editor::Limit(map_path(a.path(0), call)?, limit, keys)
        }
        "merge_maps" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req("source", P::Get(Kind::Map)),
                    req("strategy", P::LitStr),
                ],
            )?;
            let strategy = match a.str(2).as_deref() {
                Some("insert") => Strategy::Insert,
                Some("update") => Strategy::Update,
                Some("upsert") => Strategy::Upsert,
                other => {
                    return Err(err(format!(
                        "invalid value for strategy, {}, must be 'insert', 'update' or 'upsert'",
                        other.unwrap_or("")
                    )))
                }
            };
            Editor::MergeMaps(map_path(a.path(0), call)?, a.expr(1), strategy)
        }
        "replace_pattern" | "replace_match" => {
            let glob = call.name == "replace_match";
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req(
                        if glob { "pattern" } else { "regex" },
                        if glob { P::Glob } else { P::Regex },
                    ),
                    req("replacement", s),
                    opt("function", P::Func),
                    opt("replacement_format", s),
                ],
            )?;
            let (t, p) = (a.path(0), a.pattern(1));
            let r = repl(&mut a, 2);
            if glob {
                Editor::ReplaceMatch(t, p, r)
            } else {
                Editor::ReplacePattern(t, p, r)
            }
        }
        "replace_all_patterns" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req("mode", P::LitStr),
                    req("regex", P::Regex),
                    req("replacement", s),
                    opt("function", P::Func),
                    opt("replacement_format", s),
                ],
            )?;
            let key_mode = match a.str(1).as_deref() {
                Some("key") => true,
                Some("value") => false,
                other => {
                    return Err(err(format!(
                        "invalid mode {}, must be either 'key' or 'value'",
                        other.unwrap_or("")
                    )))
                }
            };
            let (t, p) = (map_path(a.path(0), call)?, a.pattern(2));
            let r = repl(&mut a, 3);
            Editor::ReplaceAllPatterns(t, key_mode, p, r)
        }
        "replace_all_matches" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req("pattern", P::Glob),
                    req("replacement", s),
                    opt("function", P::Func),
                    opt("replacement_format", s),
                ],
            )?;
            let (t, p) = (map_path(a.path(0), call)?, a.pattern(1));
            let r = repl(&mut a, 2);
            Editor::ReplaceAllMatches(t, p, r)
        }
        "truncate_all" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req("limit", P::LitInt),
                    opt("utf8_safe", P::LitBool),
                    opt("truncation_marker", P::LitStr),
                ],
            )?;
            let limit = a.int(1).unwrap_or(0);
            let (utf8, marker) = (a.bool(2).unwrap_or(true), a.str(3).unwrap_or_default());
            if limit < 0 {
                return Err(err(format!(
                    "invalid limit for truncate_all function, {limit} cannot be negative"
                )));
            }
            if marker.len() as i64 > limit {
                return Err(err(format!(
                    "invalid truncation_marker for truncate_all function, the marker length {} cannot be greater than the limit {limit}",
                    marker.len()
                )));
            }
            Editor::TruncateAll(map_path(a.path(0), call)?, limit, utf8, marker)
        }
        "append" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    opt("value", P::Get(Kind::Any)),
                    opt("values", P::List),
                ],
            )?;
            let (v, vs) = (a.opt_expr(1), a.list(2));
            if v.is_none() && vs.is_none() {
                return Err(err(
                    "at least one of the optional arguments ('value' or 'values') must be provided"
                        .into(),
                ));
            }
            Editor::Append(a.path(0), v, vs)
        }
        "delete_index" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    req("startIndex", P::Get(Kind::Int)),
                    opt("endIndex", P::Get(Kind::Int)),
                ],
            )?;
            Editor::DeleteIndex(a.path(0), a.expr(1), a.opt_expr(2))
        }
        "flatten" => {
            let mut a = bind(
                c,
                call,
                &[
                    req("target", P::Path),
                    opt("prefix", P::LitStr),
                    opt("depth", P::LitInt),
                    opt("resolve_conflicts", P::LitBool),
                ],
            )?;
            let depth = a.int(2).unwrap_or(i64::MAX);
            if depth < 1 {
                return Err(err(format!(
                    "invalid depth for flatten function, {depth} cannot be less than 1"
                )));
            }
            let (prefix, rc) = (a.str(1).unwrap_or_default(), a.bool(3).unwrap_or(false));
            Editor::Flatten(map_path(a.path(0), call)?, prefix, depth, rc)
        }
        n if n.starts_with(|c: char| c.is_ascii_uppercase()) => {
            return Err(err(format!(
                "editor names must start with a lowercase letter but got '{n}'"
            )))
        }
        n => return Err(err(format!("undefined function {n:?}"))),
    })
}

/// A map editor's target: `attributes`, `cache` or a key into them (a
/// scalar field is a config error, as the Collector's PMapGetSetter).
fn map_path(p: PathExpr, call: &ast::Call) -> Result<PathExpr, ParseError> {
    if p.field.is_map() {
        Ok(p)
    } else {
        Err(ParseError::new(
            call.col,
            format!("invalid argument at position 0: {:?} is not a map", p.field),
        ))
    }
}

/// The map a map editor works on, as an owned copy.
fn get_map(t: &PathExpr, ctx: &Ctx) -> EvalResult<Vec<KeyValue>> {
    match t.get(ctx)? {
        Val::Map(m) => Ok(m.into_owned()),
        other => fail!("expected pcommon.Map but got {}", other.type_name()),
    }
}

fn set_map(t: &PathExpr, ctx: &mut Ctx, m: Vec<KeyValue>) -> EvalResult<()> {
    t.set(ctx, Val::Map(Cow::Owned(m)))
}

fn as_str(v: &Option<AnyValue>) -> Option<&str> {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(A::StringValue(s)) => Some(s),
        _ => None,
    }
}

impl Replacement {
    /// The text a match is replaced by, with `function` and its format.
    fn expand(&self, caps: Option<&regex::Captures>, repl: &str) -> EvalResult<String> {
        let mut s = String::new();
        match caps {
            Some(c) => c.expand(repl, &mut s),
            None => s.push_str(repl),
        }
        Ok(s)
    }

    fn finish(&self, ctx: &Ctx, s: String) -> EvalResult<String> {
        let Some(f) = self.func else { return Ok(s) };
        let out = f.call(&s);
        match &self.format {
            None => Ok(out),
            Some(fmt) => {
                let fmt = args::get_str(fmt.eval(ctx)?)?;
                let ok = fmt.matches("%s").count() == 1
                    && fmt.replace("%s", "").matches('%').count() == 0;
                if !ok {
                    fail!("replacementFormat must be format string containing a single %s and no other format specifiers");
                }
                Ok(fmt.replacen("%s", &out, 1))
            }
        }
    }

    /// Replaces every match of `re` in `s`; `None` when nothing matched.
    fn replace_all(&self, ctx: &Ctx, re: &Regex, s: &str) -> EvalResult<Option<String>> {
        if !re.is_match(s) {
            return Ok(None);
        }
        let repl = args::get_str(self.with.eval(ctx)?)?;
        if self.func.is_none() {
            return Ok(Some(re.replace_all(s, repl.as_ref()).into_owned()));
        }
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        for caps in re.captures_iter(s) {
            let m = caps.get(0).expect("group 0");
            out.push_str(&s[last..m.start()]);
            out.push_str(&self.finish(ctx, self.expand(Some(&caps), &repl)?)?);
            last = m.end();
        }
        out.push_str(&s[last..]);
        Ok(Some(out))
    }
}

impl Editor {
    pub fn run(&self, ctx: &mut Ctx) -> EvalResult<()> {
        match self {
            Editor::Set(t, v) => {
                let v = v.eval(ctx)?.into_owned();
                t.set(ctx, v)
            }
            Editor::StringifyAll(t) => {
                let mut m = get_map(t, ctx)?;
                for v in m.iter_mut().filter_map(|kv| kv.value.as_mut()) {
                    if !matches!(v.value, Some(A::StringValue(_))) {
                        v.value = Some(A::StringValue(crate::value::any_as_string(v)));
                    }
                }
                set_map(t, ctx, m)
            }
            Editor::Clear(t) => {
                // The zero value of what the target holds, as Go's
                // `reflect.Zero` gives it; nil stays nil.
                let zero = match t.get(ctx)? {
                    Val::Nil => Val::Nil,
                    Val::Bool(_) => Val::Bool(false),
                    Val::Int(_) => Val::Int(0),
                    Val::Double(_) => Val::Double(0.0),
                    Val::Str(_) => Val::Str(Cow::Borrowed("")),
                    Val::Bytes(_) => Val::Bytes(Cow::Borrowed(&[])),
                    Val::Map(_) => Val::Map(Cow::Borrowed(&[])),
                    Val::Slice(_) | Val::List(_) => Val::Slice(Cow::Borrowed(&[])),
                    Val::Duration(_) => Val::Duration(0),
                    Val::ProfileId(_) => Val::ProfileId([0; 16]),
                    // `time.Time{}` (year 1) in int64 nanoseconds, which
                    // wrap as Go's `UnixNano` does.
                    Val::Time(_) => Val::Time((-62_135_596_800i64).wrapping_mul(1_000_000_000)),
                    other => fail!(
                        "cannot infer zero value for type {} in clear",
                        other.type_name()
                    ),
                };
                t.set(ctx, zero)
            }
            Editor::DeleteKey(t, k) => {
                let k = args::get_str(k.eval(ctx)?)?.into_owned();
                let mut m = get_map(t, ctx)?;
                map_remove(&mut m, &k);
                set_map(t, ctx, m)
            }
            Editor::DeleteMatchingKeys(t, p) | Editor::KeepMatchingKeys(t, p) => {
                let keep_matching = matches!(self, Editor::KeepMatchingKeys(..));
                let mut m = get_map(t, ctx)?;
                p.with(ctx, |re| {
                    m.retain(|kv| re.is_match(&kv.key) == keep_matching);
                    Ok(())
                })?;
                set_map(t, ctx, m)
            }
            Editor::KeepKeys(t, keys) => {
                let keys = keys
                    .iter()
                    .map(|k| Ok(args::get_str(k.eval(ctx)?)?.into_owned()))
                    .collect::<EvalResult<Vec<_>>>()?;
                let mut m = get_map(t, ctx)?;
                m.retain(|kv| keys.contains(&kv.key));
                set_map(t, ctx, m)
            }
            Editor::Limit(t, limit, prio) => {
                let m = get_map(t, ctx)?;
                if m.len() as i64 <= *limit {
                    return Ok(());
                }
                // Per priority key present, as `func_limit.go` counts: a key
                // listed twice counts twice.
                let mut count = prio
                    .iter()
                    .filter(|k| crate::value::map_get(&m, k).is_some())
                    .count() as i64;
                let mut out = Vec::with_capacity(*limit as usize);
                for kv in m {
                    if prio.contains(&kv.key) {
                        out.push(kv);
                    } else if count < *limit {
                        count += 1;
                        out.push(kv);
                    }
                }
                set_map(t, ctx, out)
            }
            Editor::MergeMaps(t, src, strategy) => {
                let src = args::get_map(src.eval(ctx)?)?.into_owned();
                let mut m = get_map(t, ctx)?;
                for kv in src {
                    let exists = map_get(&m, &kv.key).is_some();
                    match strategy {
                        Strategy::Insert if exists => {}
                        Strategy::Update if !exists => {}
                        _ => map_put(&mut m, &kv.key, kv.value.unwrap_or_default()),
                    }
                }
                set_map(t, ctx, m)
            }
            Editor::ReplacePattern(t, p, r) => {
                let new = match t.get(ctx)? {
                    Val::Str(s) => p.with(ctx, |re| r.replace_all(ctx, re, &s))?,
                    _ => None,
                };
                match new {
                    Some(s) => t.set(ctx, Val::Str(Cow::Owned(s))),
                    None => Ok(()),
                }
            }
            Editor::ReplaceMatch(t, p, r) => {
                let hit = match t.get(ctx)? {
                    Val::Str(s) => p.with(ctx, |re| Ok(re.is_match(&s)))?,
                    _ => false,
                };
                if !hit {
                    return Ok(());
                }
                let repl = args::get_str(r.with.eval(ctx)?)?.into_owned();
                let s = r.finish(ctx, repl)?;
                t.set(ctx, Val::Str(Cow::Owned(s)))
            }
            Editor::ReplaceAllMatches(t, p, r) => {
                let mut m = get_map(t, ctx)?;
                let repl = args::get_str(r.with.eval(ctx)?)?.into_owned();
                p.with(ctx, |re| {
                    for kv in &mut m {
                        if as_str(&kv.value).is_some_and(|s| re.is_match(s)) {
                            let s = r.finish(ctx, repl.clone())?;
                            kv.value = Some(AnyValue {
                                value: Some(A::StringValue(s)),
                            });
                        }
                    }
                    Ok(())
                })?;
                set_map(t, ctx, m)
            }
            Editor::ReplaceAllPatterns(t, key_mode, p, r) => {
                let m = get_map(t, ctx)?;
                let out = p.with(ctx, |re| {
                    if *key_mode {
                        let mut out: Vec<KeyValue> = Vec::with_capacity(m.len());
                        for kv in m {
                            let key = match r.replace_all(ctx, re, &kv.key) {
                                Ok(Some(k)) => k,
                                Ok(None) => kv.key.clone(),
                                // The Collector drops a key its function fails on.
                                Err(_) => continue,
                            };
                            map_put(&mut out, &key, kv.value.unwrap_or_default());
                        }
                        Ok(out)
                    } else {
                        let mut m = m;
                        for kv in &mut m {
                            if let Some(s) = as_str(&kv.value) {
                                if let Ok(Some(n)) = r.replace_all(ctx, re, s) {
                                    kv.value = Some(AnyValue {
                                        value: Some(A::StringValue(n)),
                                    });
                                }
                            }
                        }
                        Ok(m)
                    }
                })?;
                set_map(t, ctx, out)
            }
            Editor::TruncateAll(t, limit, utf8, marker) => {
                let mut m = get_map(t, ctx)?;
                let limit = *limit as usize;
                for kv in &mut m {
                    let Some(A::StringValue(s)) = kv.value.as_mut().and_then(|v| v.value.as_mut())
                    else {
                        continue;
                    };
                    if s.len() <= limit {
                        continue;
                    }
                    let mut cut = limit - marker.len();
                    if *utf8 {
                        while cut > 0 && !s.is_char_boundary(cut) {
                            cut -= 1;
                        }
                    }
                    let mut b = s.as_bytes()[..cut].to_vec();
                    b.extend_from_slice(marker.as_bytes());
                    *s = String::from_utf8(b)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                }
                set_map(t, ctx, m)
            }
            Editor::Append(t, v, vs) => {
                let mut items: Vec<AnyValue> = match t.get(ctx)? {
                    Val::Nil => Vec::new(),
                    Val::Slice(s) => s.into_owned(),
                    other => vec![other.into_owned().into_any()?],
                };
                let mut add = |v: Val| -> EvalResult<()> {
                    if let Val::Map(_) | Val::Slice(_) = v {
                        fail!("<Invalid value type {}>", v.type_name());
                    }
                    items.push(v.into_owned().into_any()?);
                    Ok(())
                };
                if let Some(v) = v {
                    add(v.eval(ctx)?)?;
                }
                for v in vs.iter().flatten() {
                    add(v.eval(ctx)?)?;
                }
                t.set(ctx, Val::Slice(Cow::Owned(items)))
            }
            Editor::DeleteIndex(t, start, end) => {
                let mut items: Vec<AnyValue> = match t.get(ctx)? {
                    Val::Slice(s) => s.into_owned(),
                    Val::List(l) => l
                        .into_iter()
                        .map(|v| v.into_owned().into_any())
                        .collect::<EvalResult<_>>()?,
                    other => fail!("expected pcommon.Slice but got {}", other.type_name()),
                };
                let start = args::get_int(&start.eval(ctx)?)?;
                let end = match end {
                    Some(e) => args::get_int(&e.eval(ctx)?)?,
                    None => start.wrapping_add(1),
                };
                let len = items.len() as i64;
                // As func_delete_index.go: the whole slice needs no check.
                if !(start == 0 && end == len) {
                    if start < 0 || start >= len {
                        fail!("startIndex {start} out of bounds for slice of length {len}");
                    }
                    if end < start {
                        fail!("endIndex {end} cannot be less than startIndex {start}");
                    }
                    if end > len {
                        fail!("deletion range [{start}:{end}] out of bounds for slice of length {len}");
                    }
                }
                items.drain(start as usize..end as usize);
                t.set(ctx, Val::Slice(Cow::Owned(items)))
            }
            Editor::Flatten(t, prefix, depth, rc) => {
                let m = get_map(t, ctx)?;
                let mut f = Flattener {
                    out: Vec::new(),
                    max: *depth,
                    resolve: *rc,
                };
                f.map(&m, prefix, 0);
                set_map(t, ctx, f.out)
            }
        }
    }
}

/// `func_flatten.go`: nested maps and slices become dotted keys down to
/// `depth`; with `resolve_conflicts` a taken key gets `.0`, `.1`, ...
struct Flattener {
    out: Vec<KeyValue>,
    max: i64,
    resolve: bool,
}

impl Flattener {
    fn map(&mut self, m: &[KeyValue], prefix: &str, depth: i64) {
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}.")
        };
        for kv in m {
            self.value(
                &kv.key,
                kv.value.as_ref().unwrap_or(&crate::value::EMPTY),
                depth,
                &prefix,
            );
        }
    }

    fn slice(&mut self, s: &[AnyValue], prefix: &str, depth: i64) {
        let prefix = format!("{prefix}.");
        for (i, v) in s.iter().enumerate() {
            self.value(&i.to_string(), v, depth + 1, &prefix);
        }
    }

    fn value(&mut self, k: &str, v: &AnyValue, depth: i64, prefix: &str) {
        match &v.value {
            Some(A::KvlistValue(m)) if depth < self.max => {
                self.map(&m.values, &format!("{prefix}{k}"), depth + 1)
            }
            Some(A::ArrayValue(a)) if depth < self.max => {
                for (i, item) in a.values.iter().enumerate() {
                    let key = format!("{prefix}{k}.{i}");
                    match &item.value {
                        Some(A::KvlistValue(m)) if depth + 1 < self.max => {
                            self.map(&m.values, &key, depth + 2)
                        }
                        Some(A::ArrayValue(s)) if depth + 1 < self.max => {
                            self.slice(&s.values, &key, depth + 2)
                        }
                        _ => self.put(key, item.clone()),
                    }
                }
            }
            _ => self.put(format!("{prefix}{k}"), v.clone()),
        }
    }

    fn put(&mut self, key: String, v: AnyValue) {
        if self.resolve && map_get(&self.out, &key).is_some() {
            let mut n = 0;
            let k = loop {
                let k = format!("{key}.{n}");
                if map_get(&self.out, &k).is_none() {
                    break k;
                }
                n += 1;
            };
            map_put(&mut self.out, &k, v);
        } else {
            map_put(&mut self.out, &key, v);
        }
    }
}
