//! A recursive-descent parser for the Collector's OTTL grammar
//! (`pkg/ottl/grammar.go`): statements (`editor(...) where cond`) and
//! conditions. Errors carry the column they start at.

use crate::ast::*;
use crate::error::ParseError;
use crate::lexer::{lex, Tok, Token};

pub fn statement(src: &str) -> Result<Statement, ParseError> {
    let mut p = Parser::new(src)?;
    let editor = p.call()?;
    if !editor.name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(ParseError::new(
            editor.col,
            format!(
                "editor names must start with a lowercase letter but got '{}'",
                editor.name
            ),
        ));
    }
    if !editor.keys.is_empty() {
        return Err(ParseError::new(
            editor.col,
            format!(
                "only paths and converters may be indexed, not editors, but got {}",
                editor.name
            ),
        ));
    }
    let condition = if matches!(p.peek(), Some(Tok::Lower(w)) if w == "where") {
        p.pos += 1;
        Some(p.or()?)
    } else {
        None
    };
    p.end()?;
    Ok(Statement { editor, condition })
}

/// A value expression alone (the Collector's `ParseValueExpression`): a
/// literal, path, converter, math expression, list or map.
pub fn value_expression(src: &str) -> Result<Value, ParseError> {
    let mut p = Parser::new(src)?;
    let v = p.value()?;
    p.end()?;
    Ok(v)
}

pub fn condition(src: &str) -> Result<BoolExpr, ParseError> {
    let mut p = Parser::new(src)?;
    let c = p.or()?;
    p.end()?;
    Ok(c)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    end_col: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Bytes(b) => format!("0x{}", hex::encode(b)),
        Tok::Float(f) => f.to_string(),
        Tok::Int(i) => i.to_string(),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Nil => "nil".into(),
        Tok::Not => "not".into(),
        Tok::Or => "or".into(),
        Tok::And => "and".into(),
        Tok::Cmp(o) => o.as_str().into(),
        Tok::Arrow => "=>".into(),
        Tok::Add => "+".into(),
        Tok::Sub => "-".into(),
        Tok::Mul => "*".into(),
        Tok::Div => "/".into(),
        Tok::Bool(b) => b.to_string(),
        Tok::Equal => "=".into(),
        Tok::LParen => "(".into(),
        Tok::RParen => ")".into(),
        Tok::LBrace => "{".into(),
        Tok::RBrace => "}".into(),
        Tok::Colon => ":".into(),
        Tok::Comma => ",".into(),
        Tok::Dot => ".".into(),
        Tok::LBracket => "[".into(),
        Tok::RBracket => "]".into(),
        Tok::Upper(s) | Tok::Lower(s) => s.clone(),
        Tok::Underscore => "_".into(),
    }
}

impl Parser {
    fn new(src: &str) -> Result<Self, ParseError> {
        Ok(Self {
            toks: lex(src)?,
            pos: 0,
            end_col: src.chars().count() + 1,
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n).map(|t| &t.tok)
    }

    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end_col, |t| t.col)
    }

    fn unexpected(&self, expected: &str) -> ParseError {
        match self.peek() {
            Some(t) => ParseError::new(
                self.col(),
                format!("unexpected token \"{}\" (expected {expected})", describe(t)),
            ),
            None => ParseError::new(
                self.col(),
                format!("unexpected end of input (expected {expected})"),
            ),
        }
    }

    fn expect(&mut self, t: Tok, what: &str) -> Result<(), ParseError> {
        if self.peek() == Some(&t) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn end(&self) -> Result<(), ParseError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.unexpected("end of input")),
        }
    }

    fn call(&mut self) -> Result<Call, ParseError> {
        let col = self.col();
        let name = match self.peek() {
            Some(Tok::Upper(n) | Tok::Lower(n)) => n.clone(),
            _ => return Err(self.unexpected("a function name")),
        };
        self.pos += 1;
        self.expect(Tok::LParen, "\"(\"")?;
        let mut args = Vec::new();
        if self.peek() != Some(&Tok::RParen) {
            loop {
                args.push(self.arg()?);
                if self.peek() == Some(&Tok::Comma) {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "\",\" or \")\"")?;
        let keys = self.keys()?;
        Ok(Call {
            name,
            col,
            args,
            keys,
        })
    }

    fn arg(&mut self) -> Result<Arg, ParseError> {
        let col = self.col();
        if let (Some(Tok::Lower(n)), Some(Tok::Equal)) = (self.peek(), self.peek_at(1)) {
            let name = n.clone();
            self.pos += 2;
            return Ok(Arg {
                name: Some(name),
                col: self.col(),
                value: self.value()?,
            });
        }
        Ok(Arg {
            name: None,
            col,
            value: self.value()?,
        })
    }

    fn keys(&mut self) -> Result<Vec<Key>, ParseError> {
        let mut keys = Vec::new();
        while self.peek() == Some(&Tok::LBracket) {
            self.pos += 1;
            let key = match (self.peek(), self.peek_at(1)) {
                (Some(Tok::Str(s)), Some(Tok::RBracket)) => {
                    let k = Key::Str(s.clone());
                    self.pos += 1;
                    k
                }
                (Some(Tok::Int(i)), Some(Tok::RBracket)) => {
                    let k = Key::Int(*i);
                    self.pos += 1;
                    k
                }
                _ => Key::Expr(Box::new(self.math()?)),
            };
            self.expect(Tok::RBracket, "\"]\"")?;
            keys.push(key);
        }
        Ok(keys)
    }

    /// A value: a literal, path, converter, math expression, list or map.
    fn value(&mut self) -> Result<Value, ParseError> {
        let v = match self.peek() {
            Some(Tok::Nil) => Value::Nil,
            Some(Tok::Str(s)) => Value::Str(s.clone()),
            Some(Tok::Bytes(b)) => Value::Bytes(b.clone()),
            Some(Tok::Bool(b)) => Value::Bool(*b),
            Some(Tok::LBrace) => return self.map(),
            Some(Tok::LBracket) => return self.list(),
            Some(Tok::Upper(n)) if self.peek_at(1) != Some(&Tok::LParen) => {
                if n.bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
                {
                    Value::Enum(n.clone())
                } else {
                    Value::FuncName(n.clone())
                }
            }
            _ => return self.math(),
        };
        self.pos += 1;
        Ok(v)
    }

    fn list(&mut self) -> Result<Value, ParseError> {
        self.expect(Tok::LBracket, "\"[\"")?;
        let mut items = Vec::new();
        if self.peek() != Some(&Tok::RBracket) {
            loop {
                items.push(self.value()?);
                if self.peek() == Some(&Tok::Comma) {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RBracket, "\",\" or \"]\"")?;
        Ok(Value::List(items))
    }

    fn map(&mut self) -> Result<Value, ParseError> {
        self.expect(Tok::LBrace, "\"{\"")?;
        let mut items = Vec::new();
        // Commas between items are optional, a trailing one allowed.
        while let Some(Tok::Str(k)) = self.peek() {
            let k = k.clone();
            self.pos += 1;
            self.expect(Tok::Colon, "\":\"")?;
            let v = self.value()?;
            items.push((k, v));
            if self.peek() == Some(&Tok::Comma) {
                self.pos += 1;
            }
        }
        self.expect(Tok::RBrace, "a string key or \"}\"")?;
        Ok(Value::Map(items))
    }

    fn math(&mut self) -> Result<Value, ParseError> {
        let mut left = self.term()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Add) => MathOp::Add,
                Some(Tok::Sub) => MathOp::Sub,
                _ => return Ok(left),
            };
            let col = self.col();
            self.pos += 1;
            let right = self.term()?;
            left = Value::Math(Box::new(left), op, Box::new(right), col);
        }
    }

    fn term(&mut self) -> Result<Value, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Mul) => MathOp::Mul,
                Some(Tok::Div) => MathOp::Div,
                _ => return Ok(left),
            };
            let col = self.col();
            self.pos += 1;
            let right = self.unary()?;
            left = Value::Math(Box::new(left), op, Box::new(right), col);
        }
    }

    fn unary(&mut self) -> Result<Value, ParseError> {
        let col = self.col();
        match self.peek() {
            Some(Tok::Sub) => {
                self.pos += 1;
                Ok(Value::Neg(Box::new(self.math_leaf()?), col))
            }
            Some(Tok::Add) => {
                self.pos += 1;
                self.math_leaf()
            }
            _ => self.math_leaf(),
        }
    }

    fn math_leaf(&mut self) -> Result<Value, ParseError> {
        let col = self.col();
        match self.peek() {
            Some(Tok::Int(i)) => {
                let v = Value::Int(*i);
                self.pos += 1;
                Ok(v)
            }
            Some(Tok::Float(f)) => {
                let v = Value::Float(*f);
                self.pos += 1;
                Ok(v)
            }
            Some(Tok::Upper(_)) if self.peek_at(1) == Some(&Tok::LParen) => {
                Ok(Value::Call(self.call()?))
            }
            Some(Tok::Lower(n)) if self.peek_at(1) == Some(&Tok::LParen) => Err(ParseError::new(
                col,
                format!("converter names must start with an uppercase letter but got '{n}'"),
            )),
            Some(Tok::Lower(_)) => Ok(Value::Path(self.path()?)),
            Some(Tok::LParen) => {
                // `(a) => ...` is a lambda: behind a Collector feature gate
                // that is off by default.
                let save = self.pos;
                self.pos += 1;
                while matches!(
                    self.peek(),
                    Some(Tok::Lower(_) | Tok::Underscore | Tok::Comma)
                ) {
                    self.pos += 1;
                }
                if self.peek() == Some(&Tok::RParen) && self.peek_at(1) == Some(&Tok::Arrow) {
                    return Err(ParseError::new(col, "lambda expressions are not supported (the Collector's ottl.functions.enableLambda feature gate is off by default)"));
                }
                self.pos = save + 1;
                let v = self.math()?;
                self.expect(Tok::RParen, "\")\"")?;
                Ok(v)
            }
            _ => Err(self.unexpected("a value")),
        }
    }

    fn path(&mut self) -> Result<Path, ParseError> {
        let col = self.col();
        let mut fields = Vec::new();
        loop {
            let name = match self.peek() {
                Some(Tok::Lower(n)) => n.clone(),
                _ => return Err(self.unexpected("a path segment")),
            };
            self.pos += 1;
            let keys = self.keys()?;
            fields.push(Field { name, keys });
            if self.peek() == Some(&Tok::Dot) {
                self.pos += 1;
            } else {
                return Ok(Path { col, fields });
            }
        }
    }

    fn or(&mut self) -> Result<BoolExpr, ParseError> {
        let mut terms = vec![self.and()?];
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.pop().unwrap()
        } else {
            BoolExpr::Or(terms)
        })
    }

    fn and(&mut self) -> Result<BoolExpr, ParseError> {
        let mut terms = vec![self.bool_value()?];
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            terms.push(self.bool_value()?);
        }
        Ok(if terms.len() == 1 {
            terms.pop().unwrap()
        } else {
            BoolExpr::And(terms)
        })
    }

    /// `not`? then a comparison, `true`/`false`, a converter or `( ... )`;
    /// tried in the grammar's order, keeping the error that got furthest.
    fn bool_value(&mut self) -> Result<BoolExpr, ParseError> {
        let negate = self.peek() == Some(&Tok::Not);
        if negate {
            self.pos += 1;
        }
        let start = self.pos;
        let mut best: Option<(usize, ParseError)> = None;
        let mut keep = |p: &mut Parser, e: ParseError| {
            if best.as_ref().is_none_or(|(at, _)| p.pos > *at) {
                best = Some((p.pos, e));
            }
            p.pos = start;
        };
        let v = 'found: {
            match self.comparison() {
                Ok(c) => break 'found Some(c),
                Err(e) => keep(self, e),
            }
            match self.peek() {
                Some(Tok::Bool(b)) => {
                    let b = *b;
                    self.pos += 1;
                    break 'found Some(BoolExpr::Const(b));
                }
                Some(Tok::Upper(_)) => match self.call() {
                    Ok(c) => break 'found Some(BoolExpr::Converter(c)),
                    Err(e) => keep(self, e),
                },
                Some(Tok::LParen) => {
                    self.pos += 1;
                    match self
                        .or()
                        .and_then(|b| self.expect(Tok::RParen, "\")\"").map(|()| b))
                    {
                        Ok(b) => break 'found Some(b),
                        Err(e) => keep(self, e),
                    }
                }
                _ => {}
            }
            None
        };
        match v {
            Some(b) if negate => Ok(BoolExpr::Not(Box::new(b))),
            Some(b) => Ok(b),
            None => Err(best
                .map(|(_, e)| e)
                .unwrap_or_else(|| self.unexpected("a condition"))),
        }
    }

    fn comparison(&mut self) -> Result<BoolExpr, ParseError> {
        let left = self.value()?;
        let op = match self.peek() {
            Some(Tok::Cmp(op)) => *op,
            _ => return Err(self.unexpected("a comparison operator")),
        };
        self.pos += 1;
        let right = self.value()?;
        Ok(BoolExpr::Cmp(left, op, right))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_parse() {
        for s in [
            r#"set(profile.attributes["a"], "b") where profile.period == 10"#,
            r#"set(attributes["m"]["x"][0], 1 + 2 * -3)"#,
            r#"keep_keys(resource.attributes, ["host.name"])"#,
            r#"replace_pattern(attributes["k"], "user=(\\w+)", "$1", SHA256, "sha:%s")"#,
            r#"set(x, {"a": 1 "b": [1, 2.5, nil, true, 0xff],})"#,
            r#"set(x, Concat([a, b], "|")) where not IsMatch(a, "x") and (b != nil or c < 1)"#,
            r#"set(x, Split(y, ",")[0])"#,
            r#"set(x, y[z["q"]])"#,
            r#"limit(x, 2, priority_keys=["a"])"#,
            r#"set(x, (1 + 2) * 3) where (1 + 2) == 3"#,
        ] {
            statement(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }

    #[test]
    fn collector_syntax_errors_are_errors() {
        for (s, col) in [
            (r#"Set(x, 1)"#, 1),
            (r#"set(x, 1) where x"#, 18),
            (r#"set(x, 1) where not not true"#, 21),
            (r#"set(x, "a" + "b")"#, 12),
            (r#"set(x, [1,])"#, 11),
            (r#"set(x, 1e5)"#, 9),
            (r#"set(x, set(y, 1))"#, 8),
            (r#"set(x, ((a) => a))"#, 9),
            (r#"set(x, 1)["k"]"#, 1),
        ] {
            let e = statement(s).expect_err(s);
            assert_eq!(e.col, col, "{s}: {e}");
        }
    }

    #[test]
    fn precedence() {
        let c = condition("true or false and not false").unwrap();
        assert!(matches!(c, BoolExpr::Or(v) if v.len() == 2 && matches!(v[1], BoolExpr::And(_))));
        let s = statement("set(x, 1 - 2 - 3)").unwrap();
        // Left-associative: (1 - 2) - 3.
        let Value::Math(l, MathOp::Sub, _, _) = &s.editor.args[1].value else {
            panic!()
        };
        assert!(matches!(**l, Value::Math(_, MathOp::Sub, _, _)));
    }
}
