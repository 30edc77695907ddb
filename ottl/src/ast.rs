//! The parse tree of a statement or condition, as the Collector's grammar
//! (`pkg/ottl/grammar.go`) shapes it; [`crate::compile`] types it.

use crate::lexer::CmpOp;

#[derive(Debug, Clone)]
pub struct Statement {
    pub editor: Call,
    pub condition: Option<BoolExpr>,
}

/// An editor or converter call, with the keys indexing its result.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    pub col: usize,
    pub args: Vec<Arg>,
    pub keys: Vec<Key>,
}

#[derive(Debug, Clone)]
pub struct Arg {
    pub name: Option<String>,
    pub col: usize,
    pub value: Value,
}

#[derive(Debug, Clone)]
pub enum Value {
    Nil,
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Bool(bool),
    /// An all-uppercase name not called: an enum symbol, or a function
    /// name where a parameter takes a function.
    Enum(String),
    /// An uppercase name with lowercase letters, not called: a function name.
    FuncName(String),
    Path(Path),
    Call(Call),
    Neg(Box<Value>, usize),
    Math(Box<Value>, MathOp, Box<Value>, usize),
    List(Vec<Value>),
    Map(Vec<(String, Value)>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MathOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone)]
pub struct Path {
    pub col: usize,
    /// The segments as written; the first may name a context.
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub keys: Vec<Key>,
}

#[derive(Debug, Clone)]
pub enum Key {
    Str(String),
    Int(i64),
    /// `[path]`, `[Converter()]`, `[1 + 1]`: evaluated per item.
    Expr(Box<Value>),
}

#[derive(Debug, Clone)]
pub enum BoolExpr {
    Or(Vec<BoolExpr>),
    And(Vec<BoolExpr>),
    Not(Box<BoolExpr>),
    Cmp(Value, CmpOp, Value),
    Const(bool),
    Converter(Call),
}

impl Path {
    /// The first segment, when it can be a context name (`resource.` of
    /// `resource.attributes`): it has no keys and more segments follow.
    pub fn context(&self) -> Option<&str> {
        (self.fields.len() > 1 && self.fields[0].keys.is_empty())
            .then(|| self.fields[0].name.as_str())
    }
}

/// Every path of a statement or condition, for context inference.
pub fn visit_paths<'a>(s: &'a Statement, f: &mut impl FnMut(&'a Path)) {
    visit_call(&s.editor, f);
    if let Some(c) = &s.condition {
        visit_bool(c, f);
    }
}

pub fn visit_bool<'a>(b: &'a BoolExpr, f: &mut impl FnMut(&'a Path)) {
    match b {
        BoolExpr::Or(v) | BoolExpr::And(v) => v.iter().for_each(|b| visit_bool(b, f)),
        BoolExpr::Not(b) => visit_bool(b, f),
        BoolExpr::Cmp(l, _, r) => {
            visit_value(l, f);
            visit_value(r, f)
        }
        BoolExpr::Const(_) => {}
        BoolExpr::Converter(c) => visit_call(c, f),
    }
}

fn visit_call<'a>(c: &'a Call, f: &mut impl FnMut(&'a Path)) {
    c.args.iter().for_each(|a| visit_value(&a.value, f));
    c.keys.iter().for_each(|k| visit_key(k, f));
}

fn visit_key<'a>(k: &'a Key, f: &mut impl FnMut(&'a Path)) {
    if let Key::Expr(v) = k {
        visit_value(v, f)
    }
}

pub fn visit_value<'a>(v: &'a Value, f: &mut impl FnMut(&'a Path)) {
    match v {
        Value::Path(p) => {
            f(p);
            p.fields
                .iter()
                .flat_map(|x| &x.keys)
                .for_each(|k| visit_key(k, f));
        }
        Value::Call(c) => visit_call(c, f),
        Value::Neg(v, _) => visit_value(v, f),
        Value::Math(l, _, r, _) => {
            visit_value(l, f);
            visit_value(r, f)
        }
        Value::List(v) => v.iter().for_each(|v| visit_value(v, f)),
        Value::Map(m) => m.iter().for_each(|(_, v)| visit_value(v, f)),
        _ => {}
    }
}

/// Every enum symbol of a statement (the Collector's inference checks the
/// inferred context knows them; the profile contexts know none).
pub fn enums(s: &Statement) -> Vec<String> {
    fn value(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Enum(e) => out.push(e.clone()),
            Value::Call(c) => call(c, out),
            Value::Neg(v, _) => value(v, out),
            Value::Math(l, _, r, _) => {
                value(l, out);
                value(r, out)
            }
            Value::List(v) => v.iter().for_each(|v| value(v, out)),
            Value::Map(m) => m.iter().for_each(|(_, v)| value(v, out)),
            _ => {}
        }
    }
    fn call(c: &Call, out: &mut Vec<String>) {
        c.args.iter().for_each(|a| value(&a.value, out));
    }
    fn cond(b: &BoolExpr, out: &mut Vec<String>) {
        match b {
            BoolExpr::Or(v) | BoolExpr::And(v) => v.iter().for_each(|b| cond(b, out)),
            BoolExpr::Not(b) => cond(b, out),
            BoolExpr::Cmp(l, _, r) => {
                value(l, out);
                value(r, out)
            }
            BoolExpr::Const(_) => {}
            BoolExpr::Converter(c) => call(c, out),
        }
    }
    let mut out = Vec::new();
    call(&s.editor, &mut out);
    if let Some(c) = &s.condition {
        cond(c, &mut out);
    }
    out
}
