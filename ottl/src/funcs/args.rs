//! Argument binding and the Collector's typed getters
//! (`pkg/ottl/expression.go`).

use std::borrow::Cow;

use profcol_model::proto::KeyValue;

use crate::ast;
use crate::compile::{Compiler, Expr, PathExpr};
use crate::error::{EvalResult, ParseError};
use crate::fail;
use crate::value::{any_as_string, go_float, json_of_any, json_of_map, Val};

use super::{Pattern, StrFn};

/// What a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum P {
    /// Any value; literals checked against the kind.
    Get(Kind),
    /// A path (setters).
    Path,
    /// A string, int or bool literal.
    LitStr,
    LitInt,
    LitBool,
    /// A literal list of values.
    List,
    /// A list literal, or a value making a slice at run time.
    Slice,
    /// A regular expression (string); `Glob` a glob pattern.
    Regex,
    Glob,
    /// A function name.
    Func,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Any,
    Str,
    Int,
    StrLike,
    IntLike,
    FloatLike,
    BoolLike,
    BytesLike,
    Map,
    Time,
    Duration,
}

pub(super) struct Param {
    pub name: &'static str,
    pub p: P,
    pub optional: bool,
}

pub(super) const fn req(name: &'static str, p: P) -> Param {
    Param {
        name,
        p,
        optional: false,
    }
}

pub(super) const fn opt(name: &'static str, p: P) -> Param {
    Param {
        name,
        p,
        optional: true,
    }
}

#[derive(Debug)]
pub(super) enum Bound {
    Expr(Expr),
    Path(PathExpr),
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<Expr>),
    Pattern(Pattern),
    Func(StrFn),
}

/// Bound arguments, by parameter position.
pub(super) struct Args(pub Vec<Option<Bound>>);

impl Args {
    pub(super) fn expr(&mut self, i: usize) -> Expr {
        match self.0[i].take() {
            Some(Bound::Expr(e)) => e,
            _ => unreachable!("parameter {i} is a getter"),
        }
    }
    pub(super) fn opt_expr(&mut self, i: usize) -> Option<Expr> {
        self.0.get_mut(i).and_then(Option::take).map(|b| match b {
            Bound::Expr(e) => e,
            _ => unreachable!(),
        })
    }
    pub(super) fn path(&mut self, i: usize) -> PathExpr {
        match self.0[i].take() {
            Some(Bound::Path(p)) => p,
            _ => unreachable!(),
        }
    }
    pub(super) fn str(&mut self, i: usize) -> Option<String> {
        match self.0.get_mut(i).and_then(Option::take) {
            Some(Bound::Str(s)) => Some(s),
            _ => None,
        }
    }
    pub(super) fn int(&mut self, i: usize) -> Option<i64> {
        match self.0.get_mut(i).and_then(Option::take) {
            Some(Bound::Int(v)) => Some(v),
            _ => None,
        }
    }
    pub(super) fn bool(&mut self, i: usize) -> Option<bool> {
        match self.0.get_mut(i).and_then(Option::take) {
            Some(Bound::Bool(v)) => Some(v),
            _ => None,
        }
    }
    pub(super) fn list(&mut self, i: usize) -> Option<Vec<Expr>> {
        match self.0.get_mut(i).and_then(Option::take) {
            Some(Bound::List(v)) => Some(v),
            _ => None,
        }
    }
    pub(super) fn pattern(&mut self, i: usize) -> Pattern {
        match self.0[i].take() {
            Some(Bound::Pattern(p)) => p,
            _ => unreachable!(),
        }
    }
    pub(super) fn func(&mut self, i: usize) -> Option<StrFn> {
        match self.0.get_mut(i).and_then(Option::take) {
            Some(Bound::Func(f)) => Some(f),
            _ => None,
        }
    }
}

/// Binds `call`'s arguments to `params` as the Collector's `buildArgs`.
pub(super) fn bind(c: &Compiler, call: &ast::Call, params: &[Param]) -> Result<Args, ParseError> {
    let required = params.iter().filter(|p| !p.optional).count();
    let n = call.args.len();
    if n < required || n > params.len() {
        return Err(ParseError::new(
            call.col,
            format!(
                "incorrect number of arguments. Expected: {} Received: {n}",
                params.len()
            ),
        ));
    }
    let mut out: Vec<Option<Bound>> = params.iter().map(|_| None).collect();
    let mut named = false;
    for (pos, a) in call.args.iter().enumerate() {
        let i = match &a.name {
            None if named => {
                return Err(ParseError::new(
                    a.col,
                    "unnamed argument used after named argument",
                ))
            }
            None => pos,
            Some(name) => {
                named = true;
                match params.iter().position(|p| p.name == name) {
                    Some(i) if out[i].is_some() => {
                        return Err(ParseError::new(a.col, format!("duplicate argument {name}")))
                    }
                    Some(i) => i,
                    None => {
                        return Err(ParseError::new(a.col, format!("no such parameter: {name}")))
                    }
                }
            }
        };
        let at =
            |m: String| ParseError::new(a.col, format!("invalid argument at position {i}: {m}"));
        out[i] = Some(bind_one(c, &a.value, params[i].p).map_err(|e| {
            if e.col == 0 {
                at(e.msg)
            } else {
                e
            }
        })?);
    }
    if let Some(p) = params
        .iter()
        .zip(&out)
        .find(|(p, b)| !p.optional && b.is_none())
    {
        return Err(ParseError::new(
            call.col,
            format!("missing required argument {}", p.0.name),
        ));
    }
    Ok(Args(out))
}

fn bind_one(c: &Compiler, v: &ast::Value, p: P) -> Result<Bound, ParseError> {
    let err = |m: String| ParseError::new(0, m);
    Ok(match p {
        P::Path => match v {
            ast::Value::Path(path) => Bound::Path(c.path(path)?),
            _ => return Err(err("must be a path".into())),
        },
        P::LitStr => match v {
            ast::Value::Str(s) => Bound::Str(s.clone()),
            _ => return Err(err("must be a string".into())),
        },
        P::LitInt => match v {
            ast::Value::Int(i) => Bound::Int(*i),
            _ => return Err(err("must be an int".into())),
        },
        P::LitBool => match v {
            ast::Value::Bool(b) => Bound::Bool(*b),
            _ => return Err(err("must be a bool".into())),
        },
        P::List => match v {
            ast::Value::List(items) => {
                Bound::List(items.iter().map(|v| c.value(v)).collect::<Result<_, _>>()?)
            }
            _ => return Err(err("must be a list".into())),
        },
        P::Func => match v {
            ast::Value::Enum(n) | ast::Value::FuncName(n) => {
                Bound::Func(StrFn::named(n).map_err(err)?)
            }
            _ => return Err(err("must be a function name".into())),
        },
        P::Regex | P::Glob => {
            let e = c.value(v)?;
            let glob = p == P::Glob;
            match e.literal() {
                Some(Val::Str(s)) => {
                    let src = if glob {
                        super::strings::glob_to_regex(s).map_err(|e| err(e.0))?
                    } else {
                        s.to_string()
                    };
                    match regex::Regex::new(&src) {
                        Ok(r) => Bound::Pattern(Pattern::Fixed(r)),
                        Err(e) => {
                            let e = e.to_string();
                            let why = e
                                .lines()
                                .last()
                                .unwrap_or_default()
                                .trim_start_matches("error: ");
                            return Err(err(format!("the regex pattern supplied to the function is not a valid pattern: {why}")));
                        }
                    }
                }
                Some(other) => {
                    return Err(err(format!(
                        "expected string but got {}",
                        other.type_name()
                    )))
                }
                None => Bound::Pattern(Pattern::Dynamic(e, glob)),
            }
        }
        P::Slice => {
            let e = c.value(v)?;
            if let Some(l) = e.literal() {
                if !matches!(l, Val::List(_)) {
                    return Err(err(format!("expected slice but got {}", l.type_name())));
                }
            }
            Bound::Expr(e)
        }
        P::Get(kind) => {
            let e = c.value(v)?;
            if let Some(l) = e.literal() {
                check_literal(kind, l).map_err(|e| err(e.0))?;
            }
            Bound::Expr(e)
        }
    })
}

/// A literal argument converted at load, as the Collector does: `Int("x")`
/// fails there, not per item.
fn check_literal(kind: Kind, v: &Val) -> EvalResult<()> {
    match kind {
        Kind::Any => {}
        Kind::Str => drop(get_str(v.clone())?),
        Kind::Int => drop(get_int(v)?),
        Kind::StrLike => drop(str_like(v)?),
        Kind::IntLike => drop(int_like(v)?),
        Kind::FloatLike => drop(float_like(v)?),
        Kind::BoolLike => drop(bool_like(v)?),
        Kind::BytesLike => drop(bytes_like(v)?),
        Kind::Map => drop(get_map(v.clone())?),
        Kind::Time => fail!("expected time but got {}", v.type_name()),
        Kind::Duration => fail!("expected duration but got {}", v.type_name()),
    }
    Ok(())
}

pub(super) fn get_str(v: Val<'_>) -> EvalResult<Cow<'_, str>> {
    match v {
        Val::Str(s) => Ok(s),
        other => fail!("expected string but got {}", other.type_name()),
    }
}

pub(super) fn get_int(v: &Val) -> EvalResult<i64> {
    match v {
        Val::Int(i) => Ok(*i),
        other => fail!("expected int64 but got {}", other.type_name()),
    }
}

pub(super) fn get_map(v: Val<'_>) -> EvalResult<Cow<'_, [KeyValue]>> {
    match v {
        Val::Map(m) => Ok(m),
        other => fail!("expected pcommon.Map but got {}", other.type_name()),
    }
}

/// StringLikeGetter: nil is `None`.
pub(super) fn str_like<'r>(v: &Val<'r>) -> EvalResult<Option<Cow<'r, str>>> {
    Ok(Some(match v {
        Val::Nil => return Ok(None),
        Val::Str(s) => s.clone(),
        Val::Bytes(b) => Cow::Owned(hex::encode(b)),
        Val::Map(m) => Cow::Owned(json_of_map(m).to_string()),
        Val::Slice(s) => {
            Cow::Owned(serde_json::Value::Array(s.iter().map(json_of_any).collect()).to_string())
        }
        Val::Int(i) => Cow::Owned(i.to_string()),
        Val::Double(d) => Cow::Owned(go_float(*d)),
        Val::Bool(b) => Cow::Owned(b.to_string()),
        Val::Ints(v) => Cow::Owned(serde_json::to_string(v).unwrap_or_default()),
        Val::List(l) => {
            let items: Vec<serde_json::Value> = l.iter().map(json_of_val).collect();
            Cow::Owned(serde_json::Value::Array(items).to_string())
        }
        other => fail!("unsupported type: {}", other.type_name()),
    }))
}

fn json_of_val(v: &Val) -> serde_json::Value {
    match v.clone().into_owned().into_any() {
        Ok(a) => json_of_any(&a),
        Err(_) => serde_json::Value::Null,
    }
}

pub(super) fn int_like(v: &Val) -> EvalResult<Option<i64>> {
    Ok(Some(match v {
        Val::Nil => return Ok(None),
        Val::Int(i) => *i,
        Val::Double(d) => *d as i64,
        Val::Bool(b) => *b as i64,
        Val::Str(s) => match s.parse::<i64>() {
            Ok(i) => i,
            Err(_) => fail!("strconv.ParseInt: parsing {s:?}: invalid syntax"),
        },
        other => fail!("unsupported type: {}", other.type_name()),
    }))
}

pub(super) fn float_like(v: &Val) -> EvalResult<Option<f64>> {
    Ok(Some(match v {
        Val::Nil => return Ok(None),
        Val::Int(i) => *i as f64,
        Val::Double(d) => *d,
        Val::Bool(b) => *b as i64 as f64,
        Val::Str(s) => match s.parse::<f64>() {
            Ok(f) => f,
            Err(_) => fail!("strconv.ParseFloat: parsing {s:?}: invalid syntax"),
        },
        other => fail!("unsupported type: {}", other.type_name()),
    }))
}

/// A value as the Collector's `BoolLikeGetter` reads it: numbers are true
/// unless zero, strings as Go's `strconv.ParseBool` reads them.
pub(super) fn bool_like(v: &Val) -> EvalResult<Option<bool>> {
    Ok(Some(match v {
        Val::Nil => return Ok(None),
        Val::Bool(b) => *b,
        Val::Int(i) => *i != 0,
        Val::Double(d) => *d != 0.0,
        Val::Str(s) => match &**s {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => fail!("strconv.ParseBool: parsing {s:?}: invalid syntax"),
        },
        other => fail!("unsupported type: {}", other.type_name()),
    }))
}

pub(super) fn bytes_like<'r>(v: &Val<'r>) -> EvalResult<Option<Cow<'r, [u8]>>> {
    Ok(Some(match v {
        Val::Nil => return Ok(None),
        Val::Bytes(b) => b.clone(),
        Val::Str(s) => match s {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.clone().into_bytes()),
        },
        Val::Int(i) => Cow::Owned(i.to_be_bytes().to_vec()),
        Val::Double(d) => Cow::Owned(d.to_bits().to_be_bytes().to_vec()),
        Val::Bool(b) => Cow::Owned(vec![*b as u8]),
        other => fail!("unsupported type: {}", other.type_name()),
    }))
}

/// Items of a `SliceGetter[StringLikeGetter]` as strings; a nil item of a
/// Go slice prints `<nil>`, an empty value of a pcommon.Slice `""`.
pub(super) fn slice_strings(v: &Val) -> EvalResult<Vec<String>> {
    Ok(match v {
        Val::List(l) => l
            .iter()
            .map(|i| Ok(str_like(i)?.map_or("<nil>".to_string(), Cow::into_owned)))
            .collect::<EvalResult<_>>()?,
        Val::Slice(s) => s.iter().map(any_as_string).collect(),
        Val::Ints(v) => v.iter().map(i64::to_string).collect(),
        other => fail!("expected slice but got {}", other.type_name()),
    })
}
