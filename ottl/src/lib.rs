//! The OpenTelemetry Transformation Language (OTTL) as the Collector
//! defines it (`pkg/ottl` at v0.161.0), over profcol's profiles: the
//! grammar, statements and conditions compiled once at config load, and
//! the `resource`, `scope` and `profile` contexts. The `transform` and
//! `filter` processors run what this crate compiles.
//!
//! Evaluation reads values borrowed from the batch: a condition comparing
//! a path with a literal allocates nothing. Profile attributes live in the
//! batch's dictionary; writing one interns it there.

pub mod ast;
pub mod compile;
pub mod context;
pub mod error;
pub mod funcs;
pub mod lexer;
pub mod parser;
pub mod value;

pub use compile::{Options, Prefixes};
pub use context::{any_type, Client, Ctx, Dict, Level};
pub use error::{EvalError, EvalResult, ParseError};

use compile::{Compiler, Cond};
use funcs::Editor;
use profcol_model::proto::{KeyValue, ProfilesData, Resource};

/// A compiled statement: an editor and its `where` condition.
#[derive(Debug)]
pub struct Statement {
    pub text: String,
    pub level: Level,
    editor: Editor,
    condition: Option<Cond>,
}

/// A compiled condition.
#[derive(Debug)]
pub struct Condition {
    pub text: String,
    pub level: Level,
    cond: Cond,
}

/// A compiled value expression (`sum.value` of `signaltometrics`):
/// evaluated against one item, its result borrowed where it can be.
#[derive(Debug)]
pub struct ValueExpr {
    pub text: String,
    pub level: Level,
    expr: compile::Expr,
}

impl ValueExpr {
    pub fn parse(text: &str, opts: Options) -> Result<ValueExpr, ParseError> {
        let ast = parser::value_expression(text)?;
        let expr = Compiler { opts }.value(&ast)?;
        Ok(ValueExpr {
            text: text.to_string(),
            level: opts.level,
            expr,
        })
    }

    pub fn eval<'r>(&'r self, ctx: &'r Ctx) -> EvalResult<value::Val<'r>> {
        self.expr.eval(ctx)
    }
}

impl Statement {
    pub fn parse(text: &str, opts: Options) -> Result<Statement, ParseError> {
        let ast = parser::statement(text)?;
        let c = Compiler { opts };
        let editor = c.editor(&ast.editor)?;
        let condition = ast.condition.as_ref().map(|b| c.cond(b)).transpose()?;
        Ok(Statement {
            text: text.to_string(),
            level: opts.level,
            editor,
            condition,
        })
    }

    /// Runs the editor on one item if its condition holds.
    pub fn run(&self, ctx: &mut Ctx) -> EvalResult<()> {
        if let Some(c) = &self.condition {
            if !c.eval(ctx)? {
                return Ok(());
            }
        }
        self.editor.run(ctx)
    }
}

impl Condition {
    pub fn parse(text: &str, opts: Options) -> Result<Condition, ParseError> {
        let ast = parser::condition(text)?;
        let cond = Compiler { opts }.cond(&ast)?;
        Ok(Condition {
            text: text.to_string(),
            level: opts.level,
            cond,
        })
    }

    pub fn eval(&self, ctx: &Ctx) -> EvalResult<bool> {
        self.cond.eval(ctx)
    }
}

/// Context names by the Collector's inference priority, most specific first.
const PRIORITY: &[&str] = &["profile", "scope", "instrumentation_scope", "resource"];

/// The context of statements and conditions written with context names on
/// every path (`context_inferrer.go`): the most specific context any path
/// names. `Err` is an error for the whole list (column 0) or a statement's
/// syntax error, with the index of the text it is in.
pub fn infer(statements: &[&str], conditions: &[&str]) -> Result<Level, (usize, ParseError)> {
    let mut best: Option<usize> = None;
    let mut enums = Vec::new();
    let mut note = |p: &ast::Path| {
        if let Some(i) = p
            .context()
            .and_then(|c| PRIORITY.iter().position(|x| *x == c))
        {
            best = Some(best.map_or(i, |b| b.min(i)));
        }
    };
    for (i, s) in statements.iter().enumerate() {
        let ast = parser::statement(s).map_err(|e| (i, e))?;
        ast::visit_paths(&ast, &mut note);
        enums.extend(ast::enums(&ast));
    }
    for (i, s) in conditions.iter().enumerate() {
        let ast = parser::condition(s).map_err(|e| (statements.len() + i, e))?;
        ast::visit_bool(&ast, &mut note);
    }
    let Some(best) = best else {
        return Err((
            0,
            ParseError::new(
                0,
                "unable to infer context from statements, path's first segment must be a valid context name: resource, scope, profile",
            ),
        ));
    };
    let name = PRIORITY[best];
    if name == "instrumentation_scope" {
        return Err((
            0,
            ParseError::new(
                0,
                "inferred context \"instrumentation_scope\" is not a valid candidate",
            ),
        ));
    }
    if let Some(e) = enums.first() {
        return Err((
            0,
            ParseError::new(
                0,
                format!("inferred context \"{name}\" does not support the enum symbol \"{e}\""),
            ),
        ));
    }
    Ok(Level::parse(name).expect("a priority name is a level"))
}

/// Calls `f` with the context of every item of `data` at `level`, in
/// order (resource, then its scopes, then their profiles), each with a
/// fresh cache. The dictionary's tables are out of the batch meanwhile.
pub fn for_each<E>(
    data: &mut ProfilesData,
    level: Level,
    client: &Client,
    mut f: impl FnMut(&mut Ctx) -> Result<(), E>,
) -> Result<(), E> {
    let ProfilesData {
        resource_profiles,
        dictionary,
    } = data;
    let mut dict = Dict::take(dictionary);
    let mut cache: Vec<KeyValue> = Vec::new();
    let mut result = Ok(());
    'all: for rp in resource_profiles.iter_mut() {
        let profcol_model::proto::ResourceProfiles {
            resource,
            scope_profiles,
            schema_url,
        } = rp;
        if level == Level::Resource {
            cache.clear();
            let mut ctx = Ctx {
                client,
                resource,
                resource_schema_url: schema_url,
                scope: None,
                scope_schema_url: None,
                profile: None,
                dict: &mut dict,
                cache: &mut cache,
            };
            if let Err(e) = f(&mut ctx) {
                result = Err(e);
                break 'all;
            }
            continue;
        }
        for sp in scope_profiles.iter_mut() {
            let profcol_model::proto::ScopeProfiles {
                scope,
                profiles,
                schema_url: scope_url,
            } = sp;
            if level == Level::Scope {
                cache.clear();
                let mut ctx = Ctx {
                    client,
                    resource,
                    resource_schema_url: schema_url,
                    scope: Some(scope),
                    scope_schema_url: Some(scope_url),
                    profile: None,
                    dict: &mut dict,
                    cache: &mut cache,
                };
                if let Err(e) = f(&mut ctx) {
                    result = Err(e);
                    break 'all;
                }
                continue;
            }
            for p in profiles.iter_mut() {
                cache.clear();
                let mut ctx = Ctx {
                    client,
                    resource,
                    resource_schema_url: schema_url,
                    scope: Some(scope),
                    scope_schema_url: Some(scope_url),
                    profile: Some(p),
                    dict: &mut dict,
                    cache: &mut cache,
                };
                if let Err(e) = f(&mut ctx) {
                    result = Err(e);
                    break 'all;
                }
            }
        }
    }
    dict.restore(dictionary);
    result
}

/// Calls `f` with the resource level's context of one resource and its
/// schema URL held apart from a batch (edited in its bytes,
/// `ProfileBatch::edit_resources`): what [`for_each`] gives a statement of
/// that level. It reads nothing of the dictionary.
pub fn with_resource<R>(
    resource: &mut Option<Resource>,
    schema_url: &mut String,
    client: &Client,
    f: impl FnOnce(&mut Ctx) -> R,
) -> R {
    f(&mut Ctx {
        client,
        resource,
        resource_schema_url: schema_url,
        scope: None,
        scope_schema_url: None,
        profile: None,
        dict: &mut Dict::default(),
        cache: &mut Vec::new(),
    })
}

#[cfg(test)]
mod tests;
