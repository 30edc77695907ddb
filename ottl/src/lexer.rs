//! Tokens of OTTL, as the Collector's lexer (`pkg/ottl/grammar.go`) cuts
//! them: first match wins, whitespace between tokens is dropped.

use crate::error::ParseError;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Bytes(Vec<u8>),
    Float(f64),
    Int(i64),
    Str(String),
    Nil,
    Not,
    Or,
    And,
    Cmp(CmpOp),
    Arrow,
    Add,
    Sub,
    Mul,
    Div,
    Bool(bool),
    Equal,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Colon,
    Comma,
    Dot,
    LBracket,
    RBracket,
    /// An identifier starting with an uppercase letter (converters, enums).
    Upper(String),
    /// An identifier starting with a lowercase letter (editors, paths).
    Lower(String),
    Underscore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A token and the 1-based column (in characters) it starts at.
#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub col: usize,
}

pub fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let col = |i: usize| src[..i].chars().count() + 1;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let tok = if c == b'0'
            && b.get(i + 1) == Some(&b'x')
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            i += 2;
            let s = i;
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
            let bytes = hex::decode(&src[s..i]).map_err(|e| {
                ParseError::new(
                    col(start),
                    format!("invalid bytes literal {}: {e}", &src[start..i]),
                )
            })?;
            Tok::Bytes(bytes)
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            if i < b.len() && b[i] == b'.' {
                float = true;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                // Exponent only after a dot, as the Collector's Float token.
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        while j < b.len() && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        i = j;
                    }
                }
            }
            let text = &src[start..i];
            if float {
                Tok::Float(
                    text.parse().map_err(|_| {
                        ParseError::new(col(start), format!("invalid float {text:?}"))
                    })?,
                )
            } else {
                Tok::Int(text.parse().map_err(|_| {
                    ParseError::new(col(start), format!("invalid int {text:?}: out of range"))
                })?)
            }
        } else if c == b'"' {
            let (s, end) = unquote(src, i).map_err(|m| ParseError::new(col(start), m))?;
            i = end;
            Tok::Str(s)
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let w = &src[start..i];
            match w {
                "nil" => Tok::Nil,
                "not" => Tok::Not,
                "or" => Tok::Or,
                "and" => Tok::And,
                "true" => Tok::Bool(true),
                "false" => Tok::Bool(false),
                "_" => Tok::Underscore,
                _ if c.is_ascii_uppercase() => Tok::Upper(w.to_string()),
                _ if c.is_ascii_lowercase() => Tok::Lower(w.to_string()),
                _ => {
                    return Err(ParseError::new(
                        col(start),
                        format!("invalid input text {w:?}"),
                    ))
                }
            }
        } else {
            let two = b.get(i + 1).copied();
            let (t, n) = match (c, two) {
                (b'=', Some(b'=')) => (Tok::Cmp(CmpOp::Eq), 2),
                (b'!', Some(b'=')) => (Tok::Cmp(CmpOp::Ne), 2),
                (b'>', Some(b'=')) => (Tok::Cmp(CmpOp::Ge), 2),
                (b'<', Some(b'=')) => (Tok::Cmp(CmpOp::Le), 2),
                (b'=', Some(b'>')) => (Tok::Arrow, 2),
                (b'>', _) => (Tok::Cmp(CmpOp::Gt), 1),
                (b'<', _) => (Tok::Cmp(CmpOp::Lt), 1),
                (b'+', _) => (Tok::Add, 1),
                (b'-', _) => (Tok::Sub, 1),
                (b'*', _) => (Tok::Mul, 1),
                (b'/', _) => (Tok::Div, 1),
                (b'=', _) => (Tok::Equal, 1),
                (b'(', _) => (Tok::LParen, 1),
                (b')', _) => (Tok::RParen, 1),
                (b'{', _) => (Tok::LBrace, 1),
                (b'}', _) => (Tok::RBrace, 1),
                (b':', _) => (Tok::Colon, 1),
                (b',', _) => (Tok::Comma, 1),
                (b'.', _) => (Tok::Dot, 1),
                (b'[', _) => (Tok::LBracket, 1),
                (b']', _) => (Tok::RBracket, 1),
                _ => {
                    let ch = src[i..].chars().next().unwrap_or('?');
                    return Err(ParseError::new(
                        col(start),
                        format!("invalid input text {ch:?}"),
                    ));
                }
            };
            i += n;
            t
        };
        out.push(Token {
            tok,
            col: col(start),
        });
    }
    Ok(out)
}

/// Decodes the string literal starting at `src[at]` (a `"`) as Go's
/// `strconv.UnquoteChar` does, each decoded rune appended as a character
/// (so `\xff` is U+00FF, as in the Collector). Returns the string and the
/// index past the closing quote.
fn unquote(src: &str, at: usize) -> Result<(String, usize), String> {
    let mut out = String::new();
    let mut chars = src[at + 1..].char_indices().peekable();
    let base = at + 1;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, base + i + 1)),
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                let mut hex_n = |n: usize| -> Result<u32, String> {
                    let mut v = 0u32;
                    for _ in 0..n {
                        let (_, h) = chars.next().ok_or("invalid syntax")?;
                        v = v * 16 + h.to_digit(16).ok_or("invalid syntax")?;
                    }
                    Ok(v)
                };
                let r = match e {
                    'a' => '\x07',
                    'b' => '\x08',
                    'f' => '\x0c',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\x0b',
                    '\\' => '\\',
                    '"' => '"',
                    'x' => char::from_u32(hex_n(2)?).ok_or("invalid syntax")?,
                    'u' => char::from_u32(hex_n(4)?).ok_or("invalid syntax")?,
                    'U' => char::from_u32(hex_n(8)?).ok_or("invalid syntax")?,
                    '0'..='7' => {
                        let mut v = e.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            let (_, d) = chars.next().ok_or("invalid syntax")?;
                            v = v * 8 + d.to_digit(8).ok_or("invalid syntax")?;
                        }
                        if v > 255 {
                            return Err("invalid syntax".into());
                        }
                        char::from_u32(v).ok_or("invalid syntax")?
                    }
                    _ => return Err(format!("invalid escape sequence \\{e} in string literal")),
                };
                out.push(r);
            }
            c => out.push(c),
        }
    }
    Err("unterminated string literal".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn literals_as_the_collector_cuts_them() {
        assert_eq!(
            toks("0xff 1.5 .5 1. 1.5e3 12"),
            vec![
                Tok::Bytes(vec![255]),
                Tok::Float(1.5),
                Tok::Float(0.5),
                Tok::Float(1.0),
                Tok::Float(1500.0),
                Tok::Int(12)
            ]
        );
        assert_eq!(
            toks(r#""a\"b\n\x41\u00e9""#),
            vec![Tok::Str("a\"b\nAé".into())]
        );
        assert_eq!(
            toks("nil not or and true notx"),
            vec![
                Tok::Nil,
                Tok::Not,
                Tok::Or,
                Tok::And,
                Tok::Bool(true),
                Tok::Lower("notx".into())
            ]
        );
        // `1e5` is an int then an identifier: a syntax error later.
        assert_eq!(toks("1e5"), vec![Tok::Int(1), Tok::Lower("e5".into())]);
    }

    #[test]
    fn bad_input_names_its_column() {
        let e = lex(r#"set(x, "a\q")"#).unwrap_err();
        assert_eq!(e.col, 8);
        assert!(lex("0x123").is_err());
        assert!(lex("99999999999999999999").is_err());
        assert_eq!(lex("a ? b").unwrap_err().col, 3);
    }
}
