//! `ParseSeverity(target, severityMapping)`: the level whose criteria a
//! string or an int meets (`ottlfuncs/func_parse_severity.go`).

use crate::compile::Expr;
use crate::error::EvalResult;
use crate::fail;
use crate::value::Val;

/// A mapping read at load; its errors are the Collector's, returned at
/// each call as there (the statement loads).
pub(super) type Mapping = Result<Vec<(String, Vec<Criteria>)>, String>;

#[derive(Debug)]
pub struct Criteria {
    equals: Vec<String>,
    range: Option<(i64, i64)>,
}

/// A literal's raw value (`pcommon.Map.AsRaw`), for the mapping.
enum Raw<'a> {
    Str(&'a str),
    Int(i64),
    List(Vec<Raw<'a>>),
    Map(Vec<(&'a str, Raw<'a>)>),
    Other,
}

fn raw(e: &Expr) -> Option<Raw<'_>> {
    Some(match e {
        Expr::Lit(v) => raw_val(v),
        Expr::List(items) => Raw::List(items.iter().map(raw).collect::<Option<_>>()?),
        Expr::Map(items) => Raw::Map(
            items
                .iter()
                .map(|(k, v)| Some((k.as_str(), raw(v)?)))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

fn raw_val<'a>(v: &'a Val<'_>) -> Raw<'a> {
    match v {
        Val::Str(s) => Raw::Str(s),
        Val::Int(i) => Raw::Int(*i),
        Val::List(l) => Raw::List(l.iter().map(raw_val).collect()),
        _ => Raw::Other,
    }
}

pub(super) fn mapping(e: &Expr) -> Mapping {
    let Some(Raw::Map(levels)) = raw(e) else {
        return Err("severity mapping must be a literal PMap".into());
    };
    levels
        .into_iter()
        .map(|(level, list)| {
            let Raw::List(list) = list else {
                return Err("severity mapping criteria must be []any".into());
            };
            let criteria =
                list.into_iter()
                    .map(|c| match c {
                        Raw::Map(m) => criteria(m)
                            .map_err(|e| format!("invalid severity mapping criteria: {e}")),
                        _ => Err("severity mapping criteria items must be map[string]any".into()),
                    })
                    .collect::<Result<_, _>>()?;
            Ok((level.to_owned(), criteria))
        })
        .collect()
}

fn criteria(m: Vec<(&str, Raw)>) -> Result<Criteria, String> {
    let mut c = Criteria {
        equals: Vec::new(),
        range: None,
    };
    // A key given twice: the last (a Go map's).
    for (key, v) in m {
        match key {
            "equals" => {
                let Raw::List(items) = v else {
                    return Err("equals must be a list".into());
                };
                c.equals = items
                    .into_iter()
                    .map(|i| match i {
                        Raw::Str(s) => Ok(s.to_owned()),
                        _ => Err("equals values must be strings".to_owned()),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "range" => {
                c.range = Some(match v {
                    Raw::Map(r) => {
                        let bound =
                            |name, missing, not_int| match r.iter().rev().find(|(k, _)| *k == name)
                            {
                                None => Err(missing),
                                Some((_, Raw::Int(i))) => Ok(*i),
                                Some(_) => Err(not_int),
                            };
                        (
                            bound("min", "range must have a min value", "min must be an int64")
                                .map_err(str::to_owned)?,
                            bound("max", "range must have a max value", "max must be an int64")
                                .map_err(str::to_owned)?,
                        )
                    }
                    Raw::Str("2xx") => (200, 299),
                    Raw::Str("3xx") => (300, 399),
                    Raw::Str("4xx") => (400, 499),
                    Raw::Str("5xx") => (500, 599),
                    Raw::Str(other) => return Err(format!("unknown range placeholder: {other}")),
                    _ => return Err("range must be a map or a known placeholder string".into()),
                })
            }
            _ => {}
        }
    }
    Ok(c)
}

/// The first level (in the mapping's order; the Collector's is a Go map's,
/// random where two match) whose criteria `v` meets.
pub(super) fn parse(m: &Mapping, v: &Val) -> EvalResult<Val<'static>> {
    let m = match m {
        Ok(m) => m,
        Err(e) => fail!("{e}"),
    };
    let shown = match v {
        Val::Str(s) => s.to_string(),
        Val::Int(i) => i.to_string(),
        other => other.type_name().to_owned(),
    };
    for (level, criteria) in m {
        for c in criteria {
            let hit = match v {
                Val::Str(s) => c.equals.iter().any(|e| e == s),
                Val::Int(i) => c.range.is_some_and(|(lo, hi)| (lo..=hi).contains(i)),
                other => fail!(
                    "could not map log level: could not evaluate log level of value '{shown}': unsupported value type: {}",
                    other.type_name()
                ),
            };
            if hit {
                return Ok(Val::Str(level.clone().into()));
            }
        }
    }
    fail!("could not map log level: no matching log level found for value '{shown}'")
}
