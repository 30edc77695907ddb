//! Values at run time, as the Collector's OTTL passes them between getters
//! (Go's `string`, `int64`, `pcommon.Map`, ...). Values read from a batch
//! borrow from it: reading and comparing allocate nothing.

use std::borrow::Cow;
use std::cmp::Ordering;

use profcol_model::proto::{any_value::Value as Any, AnyValue, ArrayValue, KeyValue, KeyValueList};

use crate::error::{EvalError, EvalResult};
use crate::fail;
use crate::lexer::CmpOp;

#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(Cow<'a, str>),
    Bytes(Cow<'a, [u8]>),
    /// `pcommon.Map`: ordered, the first entry of a key is the one read.
    Map(Cow<'a, [KeyValue]>),
    /// `pcommon.Slice`.
    Slice(Cow<'a, [AnyValue]>),
    /// A Go slice: a list literal (`[]any`) or a converter's result
    /// (`Split`'s `[]string`).
    List(Vec<Val<'a>>),
    /// `[]int64` (`profile.attribute_indices`).
    Ints(Vec<i64>),
    /// `time.Time`, nanoseconds since the Unix epoch, UTC.
    Time(i64),
    /// `time.Duration`, nanoseconds.
    Duration(i64),
    ProfileId([u8; 16]),
    /// `pprofile.ValueType`: type and unit string indices.
    ValueType(i32, i32),
}

pub type Owned = Val<'static>;

pub fn str_val(s: &str) -> Val<'_> {
    Val::Str(Cow::Borrowed(s))
}

impl<'a> Val<'a> {
    /// Go's name for the type, as the Collector's errors print it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Nil => "nil",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int64",
            Val::Double(_) => "float64",
            Val::Str(_) => "string",
            Val::Bytes(_) => "[]uint8",
            Val::Map(_) => "pcommon.Map",
            Val::Slice(_) => "pcommon.Slice",
            Val::List(_) => "[]interface {}",
            Val::Ints(_) => "[]int64",
            Val::Time(_) => "time.Time",
            Val::Duration(_) => "time.Duration",
            Val::ProfileId(_) => "pprofile.ProfileID",
            Val::ValueType(..) => "pprofile.ValueType",
        }
    }

    pub fn from_any(v: &'a AnyValue) -> Self {
        match &v.value {
            None => Val::Nil,
            Some(Any::StringValue(s)) => Val::Str(Cow::Borrowed(s)),
            Some(Any::BoolValue(b)) => Val::Bool(*b),
            Some(Any::IntValue(i)) => Val::Int(*i),
            Some(Any::DoubleValue(d)) => Val::Double(*d),
            Some(Any::ArrayValue(a)) => Val::Slice(Cow::Borrowed(&a.values)),
            Some(Any::KvlistValue(m)) => Val::Map(Cow::Borrowed(&m.values)),
            Some(Any::BytesValue(b)) => Val::Bytes(Cow::Borrowed(b)),
            // Resolved before statements run (`resolve_references`).
            Some(Any::StringValueStrindex(_)) => Val::Nil,
        }
    }

    pub fn into_owned(self) -> Owned {
        match self {
            Val::Nil => Val::Nil,
            Val::Bool(b) => Val::Bool(b),
            Val::Int(i) => Val::Int(i),
            Val::Double(d) => Val::Double(d),
            Val::Str(s) => Val::Str(Cow::Owned(s.into_owned())),
            Val::Bytes(b) => Val::Bytes(Cow::Owned(b.into_owned())),
            Val::Map(m) => Val::Map(Cow::Owned(m.into_owned())),
            Val::Slice(s) => Val::Slice(Cow::Owned(s.into_owned())),
            Val::List(l) => Val::List(l.into_iter().map(Val::into_owned).collect()),
            Val::Ints(v) => Val::Ints(v),
            Val::Time(t) => Val::Time(t),
            Val::Duration(d) => Val::Duration(d),
            Val::ProfileId(p) => Val::ProfileId(p),
            Val::ValueType(a, b) => Val::ValueType(a, b),
        }
    }

    /// The value stored into an attribute (`ctxutil.SetValue`): nil is an
    /// empty value; times, ids and value types cannot be stored.
    pub fn into_any(self) -> EvalResult<AnyValue> {
        let v = match self {
            Val::Nil => None,
            Val::Bool(b) => Some(Any::BoolValue(b)),
            Val::Int(i) => Some(Any::IntValue(i)),
            Val::Double(d) => Some(Any::DoubleValue(d)),
            Val::Str(s) => Some(Any::StringValue(s.into_owned())),
            Val::Bytes(b) => Some(Any::BytesValue(b.into_owned())),
            Val::Map(m) => Some(Any::KvlistValue(KeyValueList {
                values: m.into_owned(),
            })),
            Val::Slice(s) => Some(Any::ArrayValue(ArrayValue {
                values: s.into_owned(),
            })),
            Val::List(l) => Some(Any::ArrayValue(ArrayValue {
                values: l
                    .into_iter()
                    .map(Val::into_any)
                    .collect::<EvalResult<_>>()?,
            })),
            Val::Ints(v) => Some(Any::ArrayValue(ArrayValue {
                values: v
                    .into_iter()
                    .map(|i| AnyValue {
                        value: Some(Any::IntValue(i)),
                    })
                    .collect(),
            })),
            other => fail!("unsupported type {} for set operation", other.type_name()),
        };
        Ok(AnyValue { value: v })
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Val::Nil)
    }
}

/// The first value of `key` in a map.
pub fn map_get<'a>(m: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    m.iter()
        .find(|kv| kv.key == key)
        .map(|kv| kv.value.as_ref().unwrap_or(&EMPTY))
}

pub static EMPTY: AnyValue = AnyValue { value: None };

/// `pcommon.Map.PutEmpty`-then-set: replaces the first entry of `key`, or
/// appends one.
pub fn map_put(m: &mut Vec<KeyValue>, key: &str, v: AnyValue) {
    match m.iter_mut().find(|kv| kv.key == key) {
        Some(kv) => kv.value = Some(v),
        None => m.push(KeyValue {
            key: key.to_string(),
            value: Some(v),
            ..Default::default()
        }),
    }
}

/// `pcommon.Map.Remove`: the last entry moves into the removed one's place.
pub fn map_remove(m: &mut Vec<KeyValue>, key: &str) {
    if let Some(i) = m.iter().position(|kv| kv.key == key) {
        m.swap_remove(i);
    }
}

/// OTTL's comparison (`pkg/ottl/compare.go`): comparing values of types
/// that do not compare is not an error: `!=` is true, everything else false.
pub fn compare(a: &Val, b: &Val, op: CmpOp) -> bool {
    use Val::*;
    match (a, b) {
        (Nil, Nil) => return matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge),
        (Nil, _) => return compare(b, a, op),
        _ => {}
    }
    let ord = match (a, b) {
        (Bool(x), Bool(y)) => Some(x.cmp(y)),
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Int(x), Double(y)) => return float_cmp(*x as f64, *y, op),
        (Double(x), Int(y)) => return float_cmp(*x, *y as f64, op),
        (Double(x), Double(y)) => return float_cmp(*x, *y, op),
        (Str(x), Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Bytes(x), Bytes(y)) => Some(x.as_ref().cmp(y.as_ref())),
        (Bytes(_), Nil) => return op == CmpOp::Ne,
        (Duration(x), Duration(y)) | (Time(x), Time(y)) => Some(x.cmp(y)),
        (Map(x), Map(y)) => return eq_only(maps_equal(x, y), op),
        (Slice(x), Slice(y)) => return eq_only(x == y, op),
        (List(x), List(y)) => return eq_only(x == y, op),
        (List(l), Slice(s)) | (Slice(s), List(l)) => return eq_only(list_eq_slice(l, s), op),
        (Ints(x), Ints(y)) => return eq_only(x == y, op),
        (ProfileId(x), ProfileId(y)) => return eq_only(x == y, op),
        (ValueType(a1, b1), ValueType(a2, b2)) => return eq_only(a1 == a2 && b1 == b2, op),
        // Go's `==` on interfaces of different types.
        (ProfileId(_) | ValueType(..), _) => return op == CmpOp::Ne,
        _ => None,
    };
    match ord {
        Some(o) => ord_matches(o, op),
        None => op == CmpOp::Ne,
    }
}

/// A Go slice against a `pcommon.Slice`: `reflect.DeepEqual` with the
/// slice's `AsRaw()`, so only plain values (and nested lists) can be equal:
/// a map or `pcommon.Slice` in the Go slice never equals the raw form.
fn list_eq_slice(l: &[Val], s: &[AnyValue]) -> bool {
    l.len() == s.len()
        && l.iter().zip(s).all(|(a, b)| match (a, &b.value) {
            (Val::Nil, None) => true,
            (Val::Bool(x), Some(Any::BoolValue(y))) => x == y,
            (Val::Int(x), Some(Any::IntValue(y))) => x == y,
            (Val::Double(x), Some(Any::DoubleValue(y))) => x == y,
            (Val::Str(x), Some(Any::StringValue(y))) => x == y,
            (Val::Bytes(x), Some(Any::BytesValue(y))) => x.as_ref() == y.as_slice(),
            (Val::List(x), Some(Any::ArrayValue(y))) => list_eq_slice(x, &y.values),
            _ => false,
        })
}

/// `pcommon.Map.Equal`: the same keys with equal values, in any order.
fn maps_equal(x: &[KeyValue], y: &[KeyValue]) -> bool {
    x.len() == y.len()
        && x.iter()
            .all(|kv| map_get(y, &kv.key) == Some(kv.value.as_ref().unwrap_or(&EMPTY)))
}

fn eq_only(eq: bool, op: CmpOp) -> bool {
    match op {
        CmpOp::Eq => eq,
        CmpOp::Ne => !eq,
        _ => false,
    }
}

fn float_cmp(x: f64, y: f64, op: CmpOp) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

fn ord_matches(o: Ordering, op: CmpOp) -> bool {
    match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
    }
}

/// OTTL math (`pkg/ottl/math.go`): int64 with int64 stays int64 (Go's
/// wrapping arithmetic, integer division), a float on either side makes
/// float64; times and durations add and subtract.
pub fn math(a: Owned, op: crate::ast::MathOp, b: Owned) -> EvalResult<Owned> {
    use crate::ast::MathOp::*;
    use Val::*;
    Ok(match (a, b) {
        (Int(x), Int(y)) => Int(match op {
            Add => x.wrapping_add(y),
            Sub => x.wrapping_sub(y),
            Mul => x.wrapping_mul(y),
            Div => {
                if y == 0 {
                    fail!("attempted to divide by 0");
                }
                x.wrapping_div(y)
            }
        }),
        (Int(x), Double(y)) => Double(float_op(x as f64, op, y)?),
        (Double(x), Int(y)) => Double(float_op(x, op, y as f64)?),
        (Double(x), Double(y)) => Double(float_op(x, op, y)?),
        (Time(t), Duration(d)) if op == Add => Time(t.wrapping_add(d)),
        (Time(t), Duration(d)) if op == Sub => Time(t.wrapping_sub(d)),
        (Time(t), Time(u)) if op == Sub => Duration(t.wrapping_sub(u)),
        (Duration(x), Duration(y)) if op == Add => Duration(x.wrapping_add(y)),
        (Duration(x), Duration(y)) if op == Sub => Duration(x.wrapping_sub(y)),
        (Time(_) | Duration(_), _) => {
            fail!("only addition and subtraction supported for time.Time and time.Duration")
        }
        (Int(_) | Double(_), b) => fail!("{} must be int64 or float64", b.type_name()),
        (a, _) => fail!(
            "{} must be int64, float64, time.Time or time.Duration",
            a.type_name()
        ),
    })
}

fn float_op(x: f64, op: crate::ast::MathOp, y: f64) -> EvalResult<f64> {
    use crate::ast::MathOp::*;
    Ok(match op {
        Add => x + y,
        Sub => x - y,
        Mul => x * y,
        Div => {
            if y == 0.0 {
                fail!("attempted to divide by 0");
            }
            x / y
        }
    })
}

pub fn negate(v: Owned) -> EvalResult<Owned> {
    Ok(match v {
        Val::Int(i) => Val::Int(i.wrapping_neg()),
        Val::Double(d) => Val::Double(-d),
        Val::Duration(d) => Val::Duration(-d),
        other => fail!(
            "unsupported unary minus operation on type {}",
            other.type_name()
        ),
    })
}

/// `pcommon.Value.AsString()`: how the Collector renders a stored value.
pub fn any_as_string(v: &AnyValue) -> String {
    match &v.value {
        None => String::new(),
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => go_float(*d),
        Some(Any::BytesValue(b)) => base64(b),
        Some(Any::ArrayValue(_) | Any::KvlistValue(_)) => json_of_any(v).to_string(),
        Some(Any::StringValueStrindex(_)) => String::new(),
    }
}

/// A float as Go's `strconv.FormatFloat(f, 'g', -1, 64)` in JSON
/// (ES6 style): shortest digits, exponent only for very large/small.
pub fn go_float(d: f64) -> String {
    if d.is_finite() && d == d.trunc() && d.abs() < 1e21 {
        return format!("{}", d as i128);
    }
    let abs = d.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // 2.5e+21 as Go writes it.
        let s = format!("{d:e}");
        return match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            Some((m, e)) => format!("{m}e-{:0>2}", &e[1..]),
            None => s,
        };
    }
    format!("{d}")
}

fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The JSON the Collector writes for a map or slice (keys sorted).
pub fn json_of_any(v: &AnyValue) -> serde_json::Value {
    use serde_json::Value as J;
    match &v.value {
        None | Some(Any::StringValueStrindex(_)) => J::Null,
        Some(Any::StringValue(s)) => J::String(s.clone()),
        Some(Any::BoolValue(b)) => J::Bool(*b),
        Some(Any::IntValue(i)) => J::from(*i),
        Some(Any::DoubleValue(d)) => serde_json::Number::from_f64(*d).map_or(J::Null, J::Number),
        Some(Any::BytesValue(b)) => J::String(base64(b)),
        Some(Any::ArrayValue(a)) => J::Array(a.values.iter().map(json_of_any).collect()),
        Some(Any::KvlistValue(m)) => json_of_map(&m.values),
    }
}

pub fn json_of_map(m: &[KeyValue]) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    for kv in m {
        o.entry(kv.key.clone())
            .or_insert_with(|| json_of_any(kv.value.as_ref().unwrap_or(&EMPTY)));
    }
    serde_json::Value::Object(o)
}

impl From<EvalError> for String {
    fn from(e: EvalError) -> String {
        e.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_follow_compare_go() {
        assert!(compare(&Val::Int(1), &Val::Double(1.0), CmpOp::Eq));
        assert!(!compare(&Val::Int(1), &str_val("1"), CmpOp::Eq));
        assert!(compare(&Val::Int(1), &str_val("1"), CmpOp::Ne));
        assert!(!compare(&Val::Int(1), &str_val("a"), CmpOp::Lt));
        assert!(compare(&Val::Nil, &Val::Nil, CmpOp::Ge));
        // nil < 1 is evaluated as 1 < nil.
        assert!(!compare(&Val::Nil, &Val::Int(1), CmpOp::Lt));
        assert!(compare(&Val::Nil, &Val::Int(1), CmpOp::Ne));
        assert!(compare(&str_val("a"), &str_val("b"), CmpOp::Lt));
    }

    #[test]
    fn math_follows_math_go() {
        use crate::ast::MathOp::*;
        assert_eq!(math(Val::Int(7), Div, Val::Int(2)).unwrap(), Val::Int(3));
        assert_eq!(math(Val::Int(-7), Div, Val::Int(2)).unwrap(), Val::Int(-3));
        assert_eq!(
            math(Val::Int(1), Add, Val::Double(2.5)).unwrap(),
            Val::Double(3.5)
        );
        assert!(math(Val::Int(1), Div, Val::Int(0)).is_err());
    }

    #[test]
    fn floats_render_as_go() {
        assert_eq!(go_float(1.0), "1");
        assert_eq!(go_float(2.5), "2.5");
        assert_eq!(go_float(2.5e21), "2.5e+21");
        assert_eq!(base64(b"hello"), "aGVsbG8=");
    }
}
