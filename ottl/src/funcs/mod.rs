//! The functions (`pkg/ottl/ottlfuncs`): binding a call's arguments to
//! parameters as the Collector does (positional, then `name=value`;
//! literals checked against the parameter's type at load), the editors and
//! the converters.

mod args;
mod converters;
mod csv;
mod ctime;
mod decode;
mod editors;
mod severity;
mod strings;
mod strptime;
mod uri;

pub use converters::{converter, Converter};
pub use editors::{editor, Editor};
pub use strings::{sha256_hex, StrFn};

use regex::Regex;

use crate::compile::Expr;
use crate::context::Ctx;
use crate::error::EvalResult;
use crate::fail;

/// A regular expression argument: compiled at load when it is a literal
/// (the `regex` crate: linear time, no backtracking blow-up), else at
/// each call.
#[derive(Debug)]
pub enum Pattern {
    Fixed(Regex),
    Dynamic(Expr, bool),
}

impl Pattern {
    pub fn with<T>(&self, ctx: &Ctx, f: impl FnOnce(&Regex) -> EvalResult<T>) -> EvalResult<T> {
        match self {
            Pattern::Fixed(r) => f(r),
            Pattern::Dynamic(e, glob) => {
                let s = args::get_str(e.eval(ctx)?)?;
                let src = if *glob {
                    strings::glob_to_regex(&s)?
                } else {
                    s.into_owned()
                };
                match Regex::new(&src) {
                    Ok(r) => f(&r),
                    Err(e) => fail!(
                        "the regex pattern supplied to the function is not a valid pattern: {e}"
                    ),
                }
            }
        }
    }
}
