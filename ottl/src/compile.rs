//! Types a parse tree once, at config load: paths resolved to fields,
//! functions to their implementation with checked arguments, literal
//! arguments converted (a literal that cannot convert is a config error,
//! as in the Collector), regular expressions compiled.

use std::borrow::Cow;

use crate::ast::{self, MathOp};
use crate::context::{resolve_field, Ctx, Field, Key, Level};
use crate::error::{EvalResult, ParseError};
use crate::fail;
use crate::funcs::{self, Converter, Editor};
use crate::lexer::CmpOp;
use crate::value::{compare, math, negate, Owned, Val};

/// How path prefixes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefixes {
    /// Every path starts with a context name (the flat, inferred forms).
    Required,
    /// A path not starting with a context name is of the level's own
    /// context (a group with `context:`; legacy filter keys).
    Default,
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub level: Level,
    pub prefixes: Prefixes,
}

#[derive(Debug)]
pub struct PathExpr {
    pub field: Field,
    pub keys: Vec<KeyExpr>,
    /// The keys when all are literals: used without building anything.
    pub fixed: Option<Vec<Key<'static>>>,
}

#[derive(Debug)]
pub enum KeyExpr {
    Str(String),
    Int(i64),
    Expr(Box<Expr>),
}

#[derive(Debug)]
pub enum Expr {
    Lit(Owned),
    Path(PathExpr),
    Conv(Box<Converter>, Vec<KeyExpr>),
    Math(Box<Expr>, MathOp, Box<Expr>),
    Neg(Box<Expr>),
    List(Vec<Expr>),
    Map(Vec<(String, Expr)>),
}

#[derive(Debug)]
pub enum Cond {
    Const(bool),
    Cmp(Expr, CmpOp, Expr),
    Conv(Expr),
    Not(Box<Cond>),
    And(Vec<Cond>),
    Or(Vec<Cond>),
}

/// A literal borrowed as a value: no copy of strings or maps.
pub fn borrow(v: &Owned) -> Val<'_> {
    match v {
        Val::Str(s) => Val::Str(Cow::Borrowed(s)),
        Val::Bytes(b) => Val::Bytes(Cow::Borrowed(b)),
        Val::Map(m) => Val::Map(Cow::Borrowed(m)),
        Val::Slice(s) => Val::Slice(Cow::Borrowed(s)),
        Val::List(l) => Val::List(l.iter().map(borrow).collect()),
        other => other.clone(),
    }
}

impl PathExpr {
    pub fn keys<'r>(&'r self, ctx: &'r Ctx) -> EvalResult<Cow<'r, [Key<'r>]>> {
        if let Some(k) = &self.fixed {
            return Ok(Cow::Borrowed(k.as_slice()));
        }
        Ok(Cow::Owned(eval_keys(&self.keys, ctx)?))
    }

    pub fn get<'r>(&'r self, ctx: &'r Ctx) -> EvalResult<Val<'r>> {
        let keys = self.keys(ctx)?;
        match keys {
            Cow::Borrowed(k) => ctx.get(self.field, k),
            Cow::Owned(k) => ctx.get(self.field, &k).map(Val::into_owned),
        }
    }

    pub fn set(&self, ctx: &mut Ctx, v: Owned) -> EvalResult<()> {
        match &self.fixed {
            Some(k) => ctx.set(self.field, k, v),
            None => {
                let k: Vec<Key<'static>> = eval_keys(&self.keys, ctx)?
                    .into_iter()
                    .map(|k| match k {
                        Key::Str(s) => Key::Str(Cow::Owned(s.into_owned())),
                        Key::Int(i) => Key::Int(i),
                    })
                    .collect();
                ctx.set(self.field, &k, v)
            }
        }
    }
}

fn eval_keys<'r>(keys: &'r [KeyExpr], ctx: &'r Ctx) -> EvalResult<Vec<Key<'r>>> {
    keys.iter()
        .map(|k| {
            Ok(match k {
                KeyExpr::Str(s) => Key::Str(Cow::Borrowed(s)),
                KeyExpr::Int(i) => Key::Int(*i),
                KeyExpr::Expr(e) => match e.eval(ctx)? {
                    Val::Str(s) => Key::Str(s),
                    Val::Int(i) => Key::Int(i),
                    other => fail!(
                        "invalid key type {}: a key must be a string or an int64",
                        other.type_name()
                    ),
                },
            })
        })
        .collect()
}

impl Expr {
    pub fn literal(&self) -> Option<&Owned> {
        match self {
            Expr::Lit(v) => Some(v),
            _ => None,
        }
    }

    pub fn eval<'r>(&'r self, ctx: &'r Ctx) -> EvalResult<Val<'r>> {
        match self {
            Expr::Lit(v) => Ok(borrow(v)),
            Expr::Path(p) => p.get(ctx),
            Expr::Conv(c, keys) => {
                let v = c.call(ctx)?;
                if keys.is_empty() {
                    return Ok(v);
                }
                let keys = eval_keys(keys, ctx)?;
                index_value(v.into_owned(), &keys)
            }
            Expr::Math(l, op, r) => math(l.eval(ctx)?.into_owned(), *op, r.eval(ctx)?.into_owned()),
            Expr::Neg(v) => negate(v.eval(ctx)?.into_owned()),
            Expr::List(items) => Ok(Val::List(
                items
                    .iter()
                    .map(|e| e.eval(ctx))
                    .collect::<EvalResult<_>>()?,
            )),
            Expr::Map(items) => {
                let mut m = Vec::with_capacity(items.len());
                for (k, e) in items {
                    crate::value::map_put(&mut m, k, e.eval(ctx)?.into_owned().into_any()?);
                }
                Ok(Val::Map(Cow::Owned(m)))
            }
        }
    }
}

/// Indexes a converter's result: a missing map key is an error here,
/// unlike on a path (the Collector's `getIndexableValue`).
fn index_value<'r>(v: Owned, keys: &[Key]) -> EvalResult<Val<'r>> {
    let mut v = v;
    for k in keys {
        v = match (k, v) {
            (Key::Str(s), Val::Map(m)) => match crate::value::map_get(&m, s) {
                Some(x) => Val::from_any(x).into_owned(),
                None => fail!("key not found in map"),
            },
            (Key::Int(i), Val::Slice(s)) => match usize::try_from(*i).ok().and_then(|i| s.get(i)) {
                Some(x) => Val::from_any(x).into_owned(),
                None => fail!("index {i} out of bounds"),
            },
            (Key::Int(i), Val::List(mut l)) => {
                if *i < 0 || *i as usize >= l.len() {
                    fail!("index {i} out of bounds");
                }
                l.swap_remove(*i as usize)
            }
            (Key::Int(i), Val::Ints(l)) => match usize::try_from(*i).ok().and_then(|i| l.get(i)) {
                Some(x) => Val::Int(*x),
                None => fail!("index {i} out of bounds"),
            },
            (Key::Str(_), v) => fail!("type {} does not support string indexing", v.type_name()),
            (Key::Int(_), v) => fail!("type {} does not support int indexing", v.type_name()),
        };
    }
    Ok(v)
}

impl Cond {
    pub fn eval(&self, ctx: &Ctx) -> EvalResult<bool> {
        Ok(match self {
            Cond::Const(b) => *b,
            Cond::Cmp(l, op, r) => compare(&l.eval(ctx)?, &r.eval(ctx)?, *op),
            Cond::Conv(e) => match e.eval(ctx)? {
                Val::Bool(b) => b,
                other => fail!(
                    "value returned from Converter in constant expression must be bool but got {}",
                    other.type_name()
                ),
            },
            Cond::Not(c) => !c.eval(ctx)?,
            Cond::And(v) => {
                for c in v {
                    if !c.eval(ctx)? {
                        return Ok(false);
                    }
                }
                true
            }
            Cond::Or(v) => {
                for c in v {
                    if c.eval(ctx)? {
                        return Ok(true);
                    }
                }
                false
            }
        })
    }
}

/// The compiler for one level and prefix rule.
pub struct Compiler {
    pub opts: Options,
}

impl Compiler {
    pub fn path(&self, p: &ast::Path) -> Result<PathExpr, ParseError> {
        let level = self.opts.level;
        let names = level.context_names();
        let (ctx, fields) = match p.context() {
            Some(c) if names.contains(&c) => (c, &p.fields[1..]),
            Some("otelcol") if p.fields.get(1).is_some_and(|f| f.name == "grpc") => {
                return Err(ParseError::new(
                    p.col,
                    "otelcol.grpc.* paths are not supported by profcol: the request's headers are otelcol.client.metadata (with the receiver's include_metadata)",
                ))
            }
            Some("otelcol") => ("otelcol", &p.fields[1..]),
            c => match self.opts.prefixes {
                Prefixes::Default => (level.name(), &p.fields[..]),
                Prefixes::Required => {
                    let text = path_text(p);
                    return Err(ParseError::new(
                        p.col,
                        match c {
                            Some(c) if Level::parse(c).is_some() || c == "profile" => format!(
                                "context \"{c}\" from path \"{text}\" is not valid, it must be replaced by one of: {}",
                                names.join(", ")
                            ),
                            _ => format!(
                                "missing context name for path \"{text}\", possibly valid options are: {}",
                                names.iter().map(|n| format!("\"{n}.{text}\"")).collect::<Vec<_>>().join(", ")
                            ),
                        },
                    ));
                }
            },
        };
        let segs: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        // Keys only on the last segment (`attributes["k"]`): others are errors.
        if let Some(bad) = fields[..fields.len().saturating_sub(1)]
            .iter()
            .find(|f| !f.keys.is_empty())
        {
            return Err(ParseError::new(
                p.col,
                format!(
                    "segment \"{}\" of path \"{}\" does not support keys",
                    bad.name,
                    path_text(p)
                ),
            ));
        }
        let field = match resolve_field(ctx, level, &segs) {
            Ok(f) => f,
            Err(_) if segs == ["cache"] => {
                return Err(ParseError::new(
                    p.col,
                    format!(
                        "access to cache must be performed using the same context, please replace \"{}\" with \"{}.cache\"",
                        path_text(p),
                        level.name()
                    ),
                ))
            }
            Err(at) => {
                return Err(ParseError::new(
                    p.col,
                    format!(
                        "segment \"{}\" from path \"{}\" is not a valid path nor a valid OTTL keyword for the {} context",
                        segs.get(at).unwrap_or(&""),
                        path_text(p),
                        if ctx == "instrumentation_scope" { "instrumentation_scope" } else { ctx }
                    ),
                ))
            }
        };
        let ast_keys = &fields.last().map_or(&[][..], |f| &f.keys[..]);
        if !ast_keys.is_empty() && !field.is_map() {
            return Err(ParseError::new(
                p.col,
                format!("path \"{}\" does not support keys", path_text(p)),
            ));
        }
        let keys = ast_keys
            .iter()
            .map(|k| self.key(k))
            .collect::<Result<Vec<_>, _>>()?;
        let fixed = keys
            .iter()
            .map(|k| match k {
                KeyExpr::Str(s) => Some(Key::Str(Cow::Owned(s.clone()))),
                KeyExpr::Int(i) => Some(Key::Int(*i)),
                KeyExpr::Expr(_) => None,
            })
            .collect();
        Ok(PathExpr { field, keys, fixed })
    }

    fn key(&self, k: &ast::Key) -> Result<KeyExpr, ParseError> {
        Ok(match k {
            ast::Key::Str(s) => KeyExpr::Str(s.clone()),
            ast::Key::Int(i) => KeyExpr::Int(*i),
            ast::Key::Expr(v) => KeyExpr::Expr(Box::new(self.value(v)?)),
        })
    }

    pub fn value(&self, v: &ast::Value) -> Result<Expr, ParseError> {
        Ok(match v {
            ast::Value::Nil => Expr::Lit(Val::Nil),
            ast::Value::Int(i) => Expr::Lit(Val::Int(*i)),
            ast::Value::Float(f) => Expr::Lit(Val::Double(*f)),
            ast::Value::Str(s) => Expr::Lit(Val::Str(Cow::Owned(s.clone()))),
            ast::Value::Bytes(b) => Expr::Lit(Val::Bytes(Cow::Owned(b.clone()))),
            ast::Value::Bool(b) => Expr::Lit(Val::Bool(*b)),
            ast::Value::Enum(e) => {
                return Err(ParseError::new(0, format!("enum symbol, {e}, not found")))
            }
            ast::Value::FuncName(n) => {
                return Err(ParseError::new(
                    0,
                    format!("unexpected function name {n} where a value is expected"),
                ))
            }
            ast::Value::Path(p) => Expr::Path(self.path(p)?),
            ast::Value::Call(c) => {
                let conv = funcs::converter(self, c)?;
                let keys = c
                    .keys
                    .iter()
                    .map(|k| self.key(k))
                    .collect::<Result<_, _>>()?;
                Expr::Conv(Box::new(conv), keys)
            }
            ast::Value::Neg(v, _) => {
                let e = self.value(v)?;
                // `-1` folds into a literal (but stays a math expression for
                // parameters that take an int literal).
                match e.literal() {
                    Some(Val::Int(i)) => Expr::Lit(Val::Int(i.wrapping_neg())),
                    Some(Val::Double(d)) => Expr::Lit(Val::Double(-d)),
                    _ => Expr::Neg(Box::new(e)),
                }
            }
            ast::Value::Math(l, op, r, _) => {
                // Math is not a literal, even on literals: the Collector
                // checks no argument type of it at load and runs `1 / 0`
                // (an error per item) rather than refusing it.
                let (l, r) = (self.value(l)?, self.value(r)?);
                Expr::Math(Box::new(l), *op, Box::new(r))
            }
            ast::Value::List(items) => {
                let items = items
                    .iter()
                    .map(|v| self.value(v))
                    .collect::<Result<Vec<_>, _>>()?;
                if items.iter().all(|e| e.literal().is_some()) {
                    Expr::Lit(Val::List(
                        items
                            .into_iter()
                            .map(|e| match e {
                                Expr::Lit(v) => v,
                                _ => unreachable!(),
                            })
                            .collect(),
                    ))
                } else {
                    Expr::List(items)
                }
            }
            ast::Value::Map(items) => Expr::Map(
                items
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.value(v)?)))
                    .collect::<Result<_, ParseError>>()?,
            ),
        })
    }

    pub fn cond(&self, b: &ast::BoolExpr) -> Result<Cond, ParseError> {
        Ok(match b {
            ast::BoolExpr::Or(v) => {
                Cond::Or(v.iter().map(|b| self.cond(b)).collect::<Result<_, _>>()?)
            }
            ast::BoolExpr::And(v) => {
                Cond::And(v.iter().map(|b| self.cond(b)).collect::<Result<_, _>>()?)
            }
            ast::BoolExpr::Not(b) => Cond::Not(Box::new(self.cond(b)?)),
            ast::BoolExpr::Const(b) => Cond::Const(*b),
            ast::BoolExpr::Cmp(l, op, r) => {
                let (l, r) = (self.value(l)?, self.value(r)?);
                if let (Some(a), Some(b)) = (l.literal(), r.literal()) {
                    Cond::Const(compare(a, b, *op))
                } else {
                    Cond::Cmp(l, *op, r)
                }
            }
            ast::BoolExpr::Converter(c) => Cond::Conv(self.value(&ast::Value::Call(c.clone()))?),
        })
    }

    pub fn editor(&self, c: &ast::Call) -> Result<Editor, ParseError> {
        funcs::editor(self, c)
    }
}

pub fn path_text(p: &ast::Path) -> String {
    let mut s = String::new();
    for (i, f) in p.fields.iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        s.push_str(&f.name);
        for k in &f.keys {
            match k {
                ast::Key::Str(k) => s.push_str(&format!("[{k:?}]")),
                ast::Key::Int(i) => s.push_str(&format!("[{i}]")),
                ast::Key::Expr(_) => s.push_str("[...]"),
            }
        }
    }
    s
}
