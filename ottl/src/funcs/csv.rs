//! One CSV row as the Collector's `ParseCSV` reads it: Go's
//! `encoding/csv` reader (variable field count, no comments, no trimming)
//! over the whole value, every record after the first continuing the
//! previous record's last field (`parseutils.ReadCSVRow`). The errors are
//! Go's, word for word (each test answer here is Go 1.26's).

/// A `ParseCSV` mode: `strict`, `lazyQuotes` or `ignoreQuotes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Strict,
    LazyQuotes,
    IgnoreQuotes,
}

impl Mode {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "strict" => Self::Strict,
            "lazyQuotes" => Self::LazyQuotes,
            "ignoreQuotes" => Self::IgnoreQuotes,
            _ => return None,
        })
    }
}

/// The fields of `row`.
pub(crate) fn row(row: &str, delimiter: char, mode: Mode) -> Result<Vec<String>, String> {
    if mode == Mode::IgnoreQuotes {
        return Ok(row.split(delimiter).map(str::to_owned).collect());
    }
    let mut reader = Reader {
        rest: row.as_bytes(),
        num_line: 0,
        comma: delimiter,
        lazy: mode == Mode::LazyQuotes,
    };
    let mut records: Vec<Vec<String>> = Vec::with_capacity(1);
    loop {
        match reader.record() {
            None => break,
            // Go's reader returns the fields read before a parse error;
            // ReadCSVRow keeps them and reads on.
            Some((fields, Some(e))) if fields.is_empty() => {
                return Err(format!("read csv line: {e}"))
            }
            Some((fields, _)) => records.push(fields),
        }
    }
    let mut records = records.into_iter();
    let Some(mut joined) = records.next() else {
        return Err("no csv lines found".into());
    };
    for next in records {
        let mut next = next.into_iter();
        if let (Some(last), Some(first)) = (joined.last_mut(), next.next()) {
            last.push('\n');
            last.push_str(&first);
        }
        joined.extend(next);
    }
    Ok(joined)
}

/// `encoding/csv.Reader` with `FieldsPerRecord = -1` over a string.
struct Reader<'a> {
    rest: &'a [u8],
    num_line: usize,
    comma: char,
    lazy: bool,
}

const ERR_BARE_QUOTE: &str = "bare \" in non-quoted-field";
const ERR_QUOTE: &str = "extraneous or missing \" in quoted-field";

/// `csv.ParseError`'s text.
fn parse_error(start: usize, line: usize, col: usize, err: &str) -> String {
    if start != line {
        return format!("record on line {start}; parse error on line {line}, column {col}: {err}");
    }
    format!("parse error on line {line}, column {col}: {err}")
}

fn length_nl(b: &[u8]) -> usize {
    usize::from(b.last() == Some(&b'\n'))
}

/// The first rune of `b` (U+FFFD for none or an invalid one, as Go's).
fn next_rune(b: &[u8]) -> char {
    let end = b.len().min(4);
    (1..=end)
        .find_map(|n| std::str::from_utf8(&b[..n]).ok())
        .and_then(|s| s.chars().next())
        .unwrap_or('\u{FFFD}')
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl<'a> Reader<'a> {
    /// One line with its `\n` (`\r\n` read as `\n`; a last line's `\r`
    /// dropped), and whether the input had ended before it.
    fn line(&mut self) -> (Vec<u8>, bool) {
        let (mut line, eof) = match self.rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let l = self.rest[..=i].to_vec();
                self.rest = &self.rest[i + 1..];
                (l, false)
            }
            None => {
                let mut l = std::mem::take(&mut self.rest).to_vec();
                let eof = l.is_empty();
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                (l, eof)
            }
        };
        self.num_line += 1;
        let n = line.len();
        if n >= 2 && line[n - 2] == b'\r' && line[n - 1] == b'\n' {
            line[n - 2] = b'\n';
            line.pop();
        }
        (line, eof)
    }

    /// `readRecord`: the fields and the parse error, `None` at the end.
    fn record(&mut self) -> Option<(Vec<String>, Option<String>)> {
        let c = self.comma;
        if c == '\0' || c == '"' || c == '\r' || c == '\n' || c == '\u{FFFD}' {
            // Go reads nothing with such a delimiter.
            self.rest = &[];
            return Some((
                Vec::new(),
                Some("csv: invalid field or comment delimiter".into()),
            ));
        }
        let (mut line, eof) = loop {
            let (l, eof) = self.line();
            if !eof && l.len() == length_nl(&l) {
                continue; // an empty line
            }
            break (l, eof);
        };
        if eof {
            return None;
        }
        let mut comma_buf = [0u8; 4];
        let comma = c.encode_utf8(&mut comma_buf).as_bytes().to_vec();
        let rec_line = self.num_line;
        let mut fields = Vec::new();
        let mut line_no = self.num_line;
        let mut col = 1usize;
        // The rest of the line is `line[p..]`.
        let mut p = 0usize;
        let mut err = None;
        'field: loop {
            if line.get(p) != Some(&b'"') {
                let rest = &line[p..];
                let i = find(rest, &comma);
                let field = match i {
                    Some(i) => &rest[..i],
                    None => &rest[..rest.len() - length_nl(rest)],
                };
                if !self.lazy {
                    if let Some(j) = field.iter().position(|&b| b == b'"') {
                        err = Some(parse_error(
                            rec_line,
                            self.num_line,
                            col + j,
                            ERR_BARE_QUOTE,
                        ));
                        break 'field;
                    }
                }
                fields.push(text(field));
                match i {
                    Some(i) => {
                        p += i + comma.len();
                        col += i + comma.len();
                        continue 'field;
                    }
                    None => break 'field,
                }
            }
            // A quoted field.
            let mut field = Vec::new();
            p += 1;
            col += 1;
            loop {
                let rest = &line[p..];
                if let Some(i) = rest.iter().position(|&b| b == b'"') {
                    field.extend_from_slice(&rest[..i]);
                    p += i + 1;
                    col += i + 1;
                    let rest = &line[p..];
                    let rn = next_rune(rest);
                    if rn == '"' {
                        field.push(b'"');
                        p += 1;
                        col += 1;
                    } else if rn == c {
                        p += comma.len();
                        col += comma.len();
                        fields.push(text(&field));
                        continue 'field;
                    } else if length_nl(rest) == rest.len() {
                        fields.push(text(&field));
                        break 'field;
                    } else if self.lazy {
                        field.push(b'"');
                    } else {
                        err = Some(parse_error(rec_line, self.num_line, col - 1, ERR_QUOTE));
                        break 'field;
                    }
                } else if !rest.is_empty() {
                    // The field goes on on the next line.
                    field.extend_from_slice(rest);
                    col += rest.len();
                    (line, _) = self.line();
                    p = 0;
                    if !line.is_empty() {
                        line_no += 1;
                        col = 1;
                    }
                } else {
                    // The input ended inside the quotes.
                    if !self.lazy {
                        err = Some(parse_error(rec_line, line_no, col, ERR_QUOTE));
                        break 'field;
                    }
                    fields.push(text(&field));
                    break 'field;
                }
            }
        }
        Some((fields, err))
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any fields, each quoted (`"` doubled) and joined by the
        /// delimiter, read back as they were; any text reads without a
        /// panic in every mode, and `ignoreQuotes` is a split.
        #[test]
        fn quoted_fields_read_back(
            fields in prop::collection::vec("[a,\"\n€;]{0,6}", 1..6),
            text in "[a,\"\n\r€;]{0,24}",
        ) {
            let quoted: Vec<String> = fields
                .iter()
                .map(|f| format!("\"{}\"", f.replace('"', "\"\"")))
                .collect();
            for d in [',', ';', '€'] {
                let row_text = quoted.join(&d.to_string());
                prop_assert_eq!(row(&row_text, d, Mode::Strict).unwrap(), fields.clone());
                prop_assert_eq!(row(&row_text, d, Mode::LazyQuotes).unwrap(), fields.clone());
                for mode in [Mode::Strict, Mode::LazyQuotes] {
                    let _ = row(&text, d, mode);
                }
                let split: Vec<String> = text.split(d).map(str::to_owned).collect();
                prop_assert_eq!(row(&text, d, Mode::IgnoreQuotes).unwrap(), split);
            }
        }
    }

    fn strict(s: &str) -> Result<Vec<String>, String> {
        row(s, ',', Mode::Strict)
    }

    #[test]
    fn later_records_continue_the_last_field() {
        // The Collector's own cases (func_parse_csv_test.go).
        for (input, want) in [
            ("val1,val2,val3", vec!["val1", "val2", "val3"]),
            (
                "val1\nnewline,val2,val3",
                vec!["val1\nnewline", "val2", "val3"],
            ),
            (
                "val1,val2\nnewline,val3",
                vec!["val1", "val2\nnewline", "val3"],
            ),
            (
                "val1\nnewline1,val2\nnewline2,val3\nnewline3",
                vec!["val1\nnewline1", "val2\nnewline2", "val3\nnewline3"],
            ),
            ("\nval1,val2,val3", vec!["val1", "val2", "val3"]),
            ("val1,val2,val3\n", vec!["val1", "val2", "val3"]),
            ("val1\n,val2,val3", vec!["val1\n", "val2", "val3"]),
            // Go's reader: \r\n read as \n, empty lines skipped, quotes.
            ("a,b\r\n\r\n,c", vec!["a", "b\n", "c"]),
            ("\"a,b\",\"say \"\"hi\"\"\"", vec!["a,b", "say \"hi\""]),
            ("\"multi\r\nline\",x", vec!["multi\nline", "x"]),
            ("a,\"\"", vec!["a", ""]),
            ("a,b\r", vec!["a", "b"]),
        ] {
            assert_eq!(strict(input).unwrap(), want, "{input:?}");
        }
        assert_eq!(
            row("val1\tval2\tval3", '\t', Mode::Strict).unwrap(),
            ["val1", "val2", "val3"]
        );
        assert_eq!(row("a€b€c", '€', Mode::Strict).unwrap(), ["a", "b", "c"]);
    }

    #[test]
    fn quotes_by_mode() {
        // A bare quote ends the record with the fields before it.
        assert_eq!(strict("val1,val2,v\"al3").unwrap(), ["val1", "val2"]);
        assert_eq!(
            row("val1,val2,v\"al3", ',', Mode::LazyQuotes).unwrap(),
            ["val1", "val2", "v\"al3"]
        );
        let odd = "val1,\"val2,\"val3,val4\"";
        assert_eq!(
            row(odd, ',', Mode::LazyQuotes).unwrap(),
            ["val1", "val2,\"val3,val4"]
        );
        assert_eq!(
            row(odd, ',', Mode::IgnoreQuotes).unwrap(),
            ["val1", "\"val2", "\"val3", "val4\""]
        );
        assert_eq!(row("\"open", ',', Mode::LazyQuotes).unwrap(), ["open"]);
    }

    #[test]
    fn errors_are_gos() {
        assert_eq!(strict("").unwrap_err(), "no csv lines found");
        assert_eq!(strict("\n\r\n").unwrap_err(), "no csv lines found");
        assert_eq!(
            strict("v\"al").unwrap_err(),
            "read csv line: parse error on line 1, column 2: bare \" in non-quoted-field"
        );
        assert_eq!(
            strict("\"a\"x,b").unwrap_err(),
            "read csv line: parse error on line 1, column 3: extraneous or missing \" in quoted-field"
        );
        assert_eq!(
            strict("\"open\nmore").unwrap_err(),
            "read csv line: record on line 1; parse error on line 2, column 5: extraneous or missing \" in quoted-field"
        );
        assert_eq!(
            row("a\"b", '"', Mode::Strict).unwrap_err(),
            "read csv line: csv: invalid field or comment delimiter"
        );
        // Errors past the first record, and fields kept before one.
        assert_eq!(
            strict("a,b\n\"c\nd").unwrap_err(),
            "read csv line: record on line 2; parse error on line 3, column 2: extraneous or missing \" in quoted-field"
        );
        assert_eq!(strict("x,\"a\"b\nc,\"d\ne\"f").unwrap(), ["x\nc"]);
        assert_eq!(
            row("x,\"a\"b\nc,\"d\ne\"f", ',', Mode::LazyQuotes).unwrap(),
            ["x", "a\"b\nc,\"d\ne\"f"]
        );
        assert_eq!(strict("a\n\n\"b\n\nc\"").unwrap(), ["a\nb\n\nc"]);
        assert_eq!(strict("a,\"b\"\r\nc").unwrap(), ["a", "b\nc"]);
        assert_eq!(
            strict(" \"a\",b").unwrap_err(),
            "read csv line: parse error on line 1, column 2: bare \" in non-quoted-field"
        );
        // No quotes read: any delimiter splits.
        assert_eq!(row("a\"b", '"', Mode::IgnoreQuotes).unwrap(), ["a", "b"]);
    }
}
