//! Errors: at config time with the column in the statement, at run time a
//! message the processor's `error_mode` handles.

use std::fmt;

/// A statement or condition that does not parse or compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based column (in characters) the problem starts at.
    pub col: usize,
    pub msg: String,
}

impl ParseError {
    pub fn new(col: usize, msg: impl Into<String>) -> Self {
        Self {
            col,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.col, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// A statement or condition that failed on one item at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

pub type EvalResult<T> = Result<T, EvalError>;

/// `Err(EvalError(format!(...)))`.
#[macro_export]
macro_rules! fail {
    ($($t:tt)*) => { return Err($crate::error::EvalError(format!($($t)*))) };
}
