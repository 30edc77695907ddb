//! `signaltometrics` (alias `signal_to_metrics`): metrics made of profiles,
//! as the Collector's `signaltometricsconnector` v0.161.0 makes them.
//! Every definition under `profiles` is evaluated once per profile, in
//! the OTTL profile context (paths prefixed with `resource.`, `scope.`,
//! `profile.`); one metrics request comes out of each profiles request,
//! with DELTA temporality, no start time and `time_unix_nano` = now, and
//! nothing is kept between requests.

mod config;
mod expo;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use profcol_model::proto::metrics::{
    self as pm, metric, number_data_point, ExportMetricsServiceRequest, Metric, ResourceMetrics,
    ScopeMetrics,
};
use profcol_model::proto::{
    any_value, AnyValue, InstrumentationScope, KeyValue, Profile, ProfilesData, ProfilesDictionary,
    Resource, ResourceProfiles, Sample, ScopeProfiles,
};
use profcol_model::ProfileBatch;
use profcol_ottl::value::Val;
use profcol_ottl::{Condition, Ctx, EvalError, Level, Options, Prefixes, ValueExpr};
use profcol_pipeline::component::{Connector, ConnectorFactory, ProfilesToMetrics};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Signal};
use profcol_pipeline::telemetry::Telemetry;

pub use config::{Config, DefaultValue, ErrorMode, DEFAULT_BUCKETS, DEFAULT_CARDINALITY_LIMIT};

/// The scope of every metric, the Collector's.
pub const SCOPE_NAME: &str =
    "github.com/open-telemetry/opentelemetry-collector-contrib/connector/signaltometricsconnector";

/// The resource attribute naming the collector that made the metrics.
pub const INSTANCE_ID_KEY: &str = "signal_to_metrics.service.instance.id";

const DELTA: i32 = pm::AggregationTemporality::Delta as i32;

struct Factory;

pub fn factory() -> Arc<dyn ConnectorFactory> {
    Arc::new(Factory)
}

impl ConnectorFactory for Factory {
    fn type_name(&self) -> &'static str {
        "signaltometrics"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["signal_to_metrics"]
    }

    fn signals(&self) -> &'static [(Signal, Signal)] {
        &[(Signal::Profiles, Signal::Metrics)]
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Connector, ConfigErrors> {
        let c: Config = cfg.decode()?;
        let s = SignalToMetrics::new(&c, cfg)?;
        Ok(Connector::ToMetrics(Arc::new(s)))
    }
}

/// An attribute of the output: from the profile (or resource), else its
/// default, else left out when optional; required otherwise.
struct Attr {
    /// Empty for a `keys_expression`.
    key: String,
    default: Option<AnyValue>,
    optional: bool,
    /// `keys_expression`: the keys, each then as `key`.
    keys: Option<ValueExpr>,
}

enum Kind {
    Sum {
        value: ValueExpr,
        monotonic: bool,
    },
    Gauge {
        value: ValueExpr,
    },
    Histogram {
        value: ValueExpr,
        count: Option<ValueExpr>,
        bounds: Vec<f64>,
    },
    Exponential {
        value: ValueExpr,
        count: Option<ValueExpr>,
        max_size: i32,
    },
}

/// What a `context: sample` sum adds per sample.
enum SampleValue {
    /// `sample.value`: the sum of the sample's values.
    Values,
    /// An integer literal: a count of samples, weighted.
    Const(i64),
}

/// The attribute key that names a sample's leaf function (`context: sample`).
pub const FUNCTION_NAME: &str = "function.name";

/// The attribute of the point past a metric's cardinality limit, as the
/// OpenTelemetry SDKs name it.
pub const OVERFLOW_KEY: &str = "otel.metric.overflow";

/// `function.name` of what `top_functions` leaves out.
pub const OTHER_FUNCTIONS: &str = "(other)";

struct MetricDef {
    /// `context: sample` (profcol's extension): evaluated per sample.
    sample: Option<SampleValue>,
    name: String,
    description: String,
    unit: String,
    resource_attrs: Vec<Attr>,
    /// Sorted by key, as the Collector sorts the resolved attributes.
    attrs: Vec<Attr>,
    conditions: Vec<Condition>,
    kind: Kind,
    /// Distinct attribute sets per request, the overflow point included.
    limit: usize,
    top_functions: Option<usize>,
}

pub struct SignalToMetrics {
    defs: Vec<MetricDef>,
    error_mode: ErrorMode,
    instance_id: String,
    /// Its id and where it counts overflows, once started.
    telemetry: OnceLock<(String, Arc<Telemetry>)>,
}

fn any(v: &DefaultValue) -> AnyValue {
    AnyValue {
        value: Some(match v {
            DefaultValue::Bool(b) => any_value::Value::BoolValue(*b),
            DefaultValue::Int(i) => any_value::Value::IntValue(*i),
            DefaultValue::Double(d) => any_value::Value::DoubleValue(*d),
            DefaultValue::Str(s) => any_value::Value::StringValue(s.clone()),
        }),
    }
}

impl SignalToMetrics {
    fn new(c: &Config, cfg: &ComponentConfig) -> Result<Self, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        for (key, v) in [
            ("spans", &c.spans),
            ("datapoints", &c.datapoints),
            ("logs", &c.logs),
        ] {
            if v.as_ref().is_some_and(|v| !v.is_empty()) {
                errs.push(
                    cfg.key_path(key),
                    "profcol carries profiles only: these definitions would never run; define metrics under profiles",
                );
            }
        }
        if c.profiles.is_empty() {
            errs.push(
                cfg.path(),
                "no configuration provided, at least one should be specified",
            );
        }
        let opts = Options {
            level: Level::Profile,
            prefixes: Prefixes::Required,
        };
        let mut defs = Vec::new();
        for (i, m) in c.profiles.iter().enumerate() {
            let at = |k: &str| cfg.key_path(&format!("profiles::{i}::{k}"));
            if m.name.is_empty() {
                errs.push(at("name"), "metric name must be provided");
            }
            let mut expr = |key: String, text: &str, required: bool| -> Option<ValueExpr> {
                if text.is_empty() {
                    if required {
                        errs.push(key, "value must be defined");
                    }
                    return None;
                }
                ValueExpr::parse(text, opts)
                    .map_err(|e| {
                        errs.push(
                            key,
                            format!("failed to parse OTTL value expression {text:?}: {e}"),
                        )
                    })
                    .ok()
            };
            let kinds = [
                m.sum.is_some(),
                m.gauge.is_some(),
                m.histogram.is_some(),
                m.exponential_histogram.is_some(),
            ];
            let kind = match kinds.iter().filter(|k| **k).count() {
                1 => {
                    if let Some(s) = &m.sum {
                        if m.context.as_deref() == Some("sample") {
                            // The samples give the value (checked below).
                            Some(Kind::Sum {
                                value: ValueExpr::parse("0", opts).expect("a literal parses"),
                                monotonic: s.monotonic,
                            })
                        } else {
                            expr(at("sum::value"), &s.value, true).map(|value| Kind::Sum {
                                value,
                                monotonic: s.monotonic,
                            })
                        }
                    } else if let Some(g) = &m.gauge {
                        expr(at("gauge::value"), &g.value, true).map(|value| Kind::Gauge { value })
                    } else if let Some(h) = &m.histogram {
                        let value = expr(at("histogram::value"), &h.value, true);
                        let count = expr(at("histogram::count"), &h.count, false);
                        let bounds = if h.buckets.is_empty() {
                            DEFAULT_BUCKETS.to_vec()
                        } else {
                            h.buckets.clone()
                        };
                        if bounds.windows(2).any(|w| w[0] >= w[1]) {
                            errs.push(
                                at("histogram::buckets"),
                                "must be sorted ascending, without repeats",
                            );
                        }
                        value.map(|value| Kind::Histogram {
                            value,
                            count,
                            bounds,
                        })
                    } else if let Some(h) = &m.exponential_histogram {
                        let value = expr(at("exponential_histogram::value"), &h.value, true);
                        let count = expr(at("exponential_histogram::count"), &h.count, false);
                        let max_size = if h.max_size == 0 { 160 } else { h.max_size };
                        if !(2..=16384).contains(&max_size) {
                            errs.push(
                                at("exponential_histogram::max_size"),
                                format!("invalid config: max size {max_size} is out of range [2, 16384]"),
                            );
                        }
                        value.map(|value| Kind::Exponential {
                            value,
                            count,
                            max_size,
                        })
                    } else {
                        None
                    }
                }
                0 => {
                    errs.push(
                        at(""),
                        "exactly one of the metrics must be defined (sum, gauge, histogram, exponential_histogram)",
                    );
                    None
                }
                _ => {
                    errs.push(at(""), "only one of the metrics must be defined (sum, gauge, histogram, exponential_histogram)");
                    None
                }
            };
            let attrs = |list: &[config::Attribute], key: &str, errs: &mut ConfigErrors| {
                let mut out: Vec<Attr> = Vec::new();
                for (j, a) in list.iter().enumerate() {
                    let path = at(&format!("{key}::{j}"));
                    if a.key.is_empty() == a.keys_expression.is_empty() {
                        errs.push(
                            &path,
                            format!("exactly one of key or keys_expression must be set for {key}"),
                        );
                    }
                    if a.optional && a.default_value.is_some() {
                        errs.push(
                            &path,
                            format!(
                                "only one of default_value or optional should be set for {key}"
                            ),
                        );
                    }
                    if !a.key.is_empty() && out.iter().any(|o| o.key == a.key) {
                        errs.push(&path, format!("duplicate key found in {key}: {}", a.key));
                    }
                    let keys = (!a.keys_expression.is_empty())
                        .then(|| ValueExpr::parse(&a.keys_expression, opts))
                        .transpose()
                        .unwrap_or_else(|e| {
                            errs.push(
                                format!("{path}::keys_expression"),
                                format!("failed to parse keys_expression for {key}: {e}"),
                            );
                            None
                        });
                    out.push(Attr {
                        key: a.key.clone(),
                        default: a.default_value.as_ref().map(any),
                        optional: a.optional,
                        keys,
                    });
                }
                out
            };
            let resource_attrs = attrs(
                &m.include_resource_attributes,
                "include_resource_attributes",
                &mut errs,
            );
            let mut profile_attrs = attrs(&m.attributes, "attributes", &mut errs);
            // With keys_expression the order decides which of two entries
            // of a key wins; the keys are sorted once resolved.
            if profile_attrs.iter().all(|a| a.keys.is_none()) {
                profile_attrs.sort_by(|a, b| a.key.cmp(&b.key));
            }
            let mut conditions = Vec::new();
            for (j, text) in m.conditions.iter().enumerate() {
                match Condition::parse(text, opts) {
                    Ok(c) => conditions.push(c),
                    Err(e) => errs.push(
                        at(&format!("conditions::{j}")),
                        format!("failed to parse OTTL condition {text:?}: {e}"),
                    ),
                }
            }
            let sample = match m.context.as_deref() {
                None | Some("profile") => None,
                Some("sample") => match &m.sum {
                    Some(sum) if sum.value.trim() == "sample.value" => Some(SampleValue::Values),
                    Some(sum) => match sum.value.trim().parse::<i64>() {
                        Ok(c) => Some(SampleValue::Const(c)),
                        Err(_) => {
                            errs.push(
                                at("sum::value"),
                                "with context: sample, the value is sample.value or an integer",
                            );
                            None
                        }
                    },
                    None => {
                        errs.push(at("context"), "context: sample is for sum metrics only");
                        None
                    }
                },
                Some(other) => {
                    errs.push(at("context"), format!("unknown context {other:?}: profile (the Collector's) or sample (profcol's)"));
                    None
                }
            };
            let limit = m.cardinality_limit.unwrap_or(DEFAULT_CARDINALITY_LIMIT);
            if limit == 0 {
                errs.push(at("cardinality_limit"), "must be at least 1");
            }
            if sample.is_some() && profile_attrs.iter().any(|a| a.keys.is_some()) {
                errs.push(
                    at("attributes"),
                    "keys_expression is not supported with context: sample",
                );
            }
            if let Some(n) = m.top_functions {
                if n == 0 {
                    errs.push(at("top_functions"), "must be at least 1");
                }
                if m.context.as_deref() != Some("sample")
                    || !m.attributes.iter().any(|a| a.key == FUNCTION_NAME)
                {
                    errs.push(
                        at("top_functions"),
                        "needs context: sample and a function.name attribute",
                    );
                }
            }
            if let Some(kind) = kind {
                defs.push(MetricDef {
                    limit,
                    top_functions: m.top_functions,
                    sample,
                    name: m.name.clone(),
                    description: m.description.clone(),
                    unit: m.unit.clone(),
                    resource_attrs,
                    attrs: profile_attrs,
                    conditions,
                    kind,
                });
            }
        }
        errs.into_result(SignalToMetrics {
            defs,
            error_mode: c.error_mode,
            instance_id: uuid::Uuid::new_v4().to_string(),
            telemetry: OnceLock::new(),
        })
    }
}

/// One data point being aggregated.
enum Point {
    Int(i64),
    Double(f64),
    Hist {
        sum: f64,
        count: u64,
        counts: Vec<u64>,
    },
    Expo(Box<expo::ExpoHistogram>),
}

/// The points of one metric of one resource, in order of first
/// appearance, and where each attribute set's point is.
type Points = (Vec<(Vec<KeyValue>, Point)>, HashMap<Vec<u8>, usize>);

/// What one request aggregates into: resources by their attributes, and
/// per definition and resource the points by their attributes.
#[derive(Default)]
struct Aggregate {
    resources: Vec<Vec<KeyValue>>,
    resource_ids: HashMap<Vec<u8>, usize>,
    /// (definition, resource) -> points in order of first appearance.
    points: HashMap<(usize, usize), Points>,
    /// `context: sample`: point by the dictionary indices of a sample's
    /// attributes, for the profile being read, and the key being built.
    /// Looked up once per sample and definition: ahash, not SipHash.
    scratch: HashMap<Vec<i64>, usize, ahash::RandomState>,
    buf: Vec<i64>,
    /// Before `scratch`, for a definition with one attribute: the point by
    /// the sample's stack (the leaf function) or attribute index.
    memo: Memo,
    /// Per attribute key a definition reads from samples: the indices of
    /// the batch's string table that hold it, so that a sample's
    /// attributes are matched by index rather than by string.
    key_strings: HashMap<String, Vec<i32>>,
    /// Per definition: its attribute sets with a point of their own.
    regular: Vec<usize>,
    /// (definition, attribute set) folded into an overflow point.
    overflowed: HashSet<(usize, Vec<u8>)>,
}

/// Points by a dense index (a stack, or an attribute of the dictionary),
/// each valid for one profile and definition: an array read per sample
/// where a key would be built and hashed. A new generation forgets them
/// all without touching the table, so many small profiles cost no more
/// than one large one.
#[derive(Default)]
struct Memo {
    generation: u32,
    /// (generation, point) per index; the point may be `usize::MAX` (a
    /// required attribute missing).
    slots: Vec<(u32, usize)>,
}

impl Memo {
    fn reset(&mut self, len: usize) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.clear();
            self.generation = 1;
        }
        if self.slots.len() < len {
            self.slots.resize(len, (0, 0));
        }
    }

    fn get(&self, i: usize) -> Option<usize> {
        match self.slots.get(i) {
            Some(&(g, p)) if g == self.generation => Some(p),
            _ => None,
        }
    }

    fn set(&mut self, i: usize, p: usize) {
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = (self.generation, p);
        }
    }
}

/// The point of a new attribute set: its own while the definition is
/// under its limit, else its resource's overflow point.
fn place(
    d: usize,
    limit: usize,
    regular: &mut [usize],
    overflowed: &mut HashSet<(usize, Vec<u8>)>,
    (akey, attrs): (Vec<u8>, Vec<KeyValue>),
) -> (Vec<u8>, Vec<KeyValue>) {
    if regular[d] + 1 < limit {
        regular[d] += 1;
        return (akey, attrs);
    }
    overflowed.insert((d, akey));
    let attrs = vec![KeyValue {
        key: OVERFLOW_KEY.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::BoolValue(true)),
        }),
        ..Default::default()
    }];
    (key_of(&attrs), attrs)
}

impl Aggregate {
    /// The index of the resource of these attributes, added if new.
    fn resource(&mut self, res: Vec<KeyValue>) -> usize {
        let rkey = key_of(&res);
        match self.resource_ids.get(&rkey) {
            Some(&r) => r,
            None => {
                self.resources.push(res);
                self.resource_ids.insert(rkey, self.resources.len() - 1);
                self.resources.len() - 1
            }
        }
    }
}

/// The name (string index) of a sample's leaf function: the first line
/// (innermost inlined) of its stack's first location.
fn leaf_function(dict: &ProfilesDictionary, s: &profcol_model::proto::Sample) -> Option<i32> {
    let stack = dict.stack_table.get(usize::try_from(s.stack_index).ok()?)?;
    let loc = dict
        .location_table
        .get(usize::try_from(*stack.location_indices.first()?).ok()?)?;
    let f = dict
        .function_table
        .get(usize::try_from(loc.lines.first()?.function_index).ok()?)?;
    Some(f.name_strindex)
}

/// The attribute table index of the sample's attribute whose key is one
/// of the string indices `key`.
fn sample_attr(
    dict: &ProfilesDictionary,
    s: &profcol_model::proto::Sample,
    key: &[i32],
) -> Option<i32> {
    s.attribute_indices.iter().rev().copied().find(|&i| {
        usize::try_from(i)
            .ok()
            .and_then(|i| dict.attribute_table.get(i))
            .is_some_and(|a| key.contains(&a.key_strindex))
    })
}

fn key_of(attrs: &[KeyValue]) -> Vec<u8> {
    use prost::Message;
    let mut buf = Vec::new();
    for kv in attrs {
        let _ = kv.encode_length_delimited(&mut buf);
    }
    buf
}

fn number(v: Val<'_>, what: &str) -> Result<Val<'static>, EvalError> {
    match v {
        Val::Int(i) => Ok(Val::Int(i)),
        Val::Double(d) => Ok(Val::Double(d)),
        other => Err(EvalError(format!(
            "failed to parse {what} OTTL value of type {} into int64 or float64",
            other.type_name()
        ))),
    }
}

/// The output attributes of `defs` for one item: each present one, else
/// its default, else left out; `None` when a profile attribute without
/// either and not optional is missing (the Collector's `MatchAttributes`;
/// resource attributes are an include list, never required). With
/// `keys_expression` entries, as its `resolveEntries`: each expression's
/// keys join the others, the last entry of a key wins, and the keys are
/// sorted.
fn resolve(
    defs: &[Attr],
    ctx: &Ctx,
    required: bool,
    get: impl Fn(&str) -> Option<AnyValue>,
) -> Result<Option<Vec<KeyValue>>, EvalError> {
    let kv = |key: String, value: AnyValue| KeyValue {
        key,
        value: Some(value),
        ..Default::default()
    };
    if defs.iter().all(|a| a.keys.is_none()) {
        let mut out = Vec::with_capacity(defs.len());
        for a in defs {
            match (get(&a.key), &a.default) {
                (Some(v), _) => out.push(kv(a.key.clone(), v)),
                (None, Some(d)) => out.push(kv(a.key.clone(), d.clone())),
                (None, None) if required && !a.optional => return Ok(None),
                (None, None) => {}
            }
        }
        return Ok(Some(out));
    }
    let needed = |a: &&Attr| a.keys.is_none() && a.default.is_none() && !a.optional;
    if required && defs.iter().filter(needed).any(|a| get(&a.key).is_none()) {
        return Ok(None);
    }
    let mut keys: Vec<(String, &Attr)> = Vec::with_capacity(defs.len());
    for a in defs.iter().rev() {
        let named =
            match &a.keys {
                None => vec![a.key.clone()],
                Some(e) => expression_keys(e.eval(ctx).map_err(|e| {
                    EvalError(format!("failed to evaluate keys_expression: {}", e.0))
                })?)?,
            };
        for k in named.into_iter().rev() {
            if !keys.iter().any(|(seen, _)| *seen == k) {
                keys.push((k, a));
            }
        }
    }
    keys.sort_by(|x, y| x.0.cmp(&y.0));
    Ok(Some(
        keys.into_iter()
            .filter_map(|(k, a)| {
                let v = get(&k).or_else(|| a.default.clone())?;
                Some(kv(k, v))
            })
            .collect(),
    ))
}

/// What a `keys_expression` gave, as the Collector takes it: nil is no
/// key, else a list of strings.
fn expression_keys(v: Val<'_>) -> Result<Vec<String>, EvalError> {
    let bad = |why: String| {
        EvalError(format!(
            "keys_expression must return a list of strings: {why}"
        ))
    };
    match v {
        Val::Nil => Ok(Vec::new()),
        Val::Slice(values) => values
            .iter()
            .enumerate()
            .map(|(i, v)| match &v.value {
                Some(any_value::Value::StringValue(s)) => Ok(s.clone()),
                _ => Err(bad(format!(
                    "expected string element at index {i}, got {}",
                    profcol_ottl::any_type(v)
                ))),
            })
            .collect(),
        Val::List(values) => values
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Val::Str(s) => Ok(s.into_owned()),
                other => Err(bad(format!(
                    "expected string element at index {i}, got {}",
                    other.type_name()
                ))),
            })
            .collect(),
        other => Err(bad(format!(
            "unsupported type {}, expected pcommon.Slice or []string",
            other.type_name()
        ))),
    }
}

impl SignalToMetrics {
    /// One definition on one profile.
    fn aggregate(
        &self,
        d: usize,
        ctx: &Ctx,
        samples: &[Sample],
        dict: &ProfilesDictionary,
        agg: &mut Aggregate,
    ) -> Result<(), EvalError> {
        let md = &self.defs[d];
        let attrs = if md.sample.is_some() {
            Vec::new()
        } else {
            match resolve(&md.attrs, ctx, true, |k| {
                ctx.profile_attr(k).ok().flatten().cloned()
            })? {
                Some(a) => a,
                None => return Ok(()),
            }
        };
        if !md.conditions.is_empty() {
            let mut matched = false;
            for c in &md.conditions {
                if c.eval(ctx)? {
                    matched = true;
                    break;
                }
            }
            if !matched {
                return Ok(());
            }
        }
        let resource_attrs: &[KeyValue] = ctx.resource.as_ref().map_or(&[], |r| &r.attributes);
        let mut res = if md.resource_attrs.is_empty() {
            resource_attrs.to_vec()
        } else {
            let get = |k: &str| {
                resource_attrs
                    .iter()
                    .find(|kv| kv.key == k)
                    .and_then(|kv| kv.value.clone())
            };
            resolve(&md.resource_attrs, ctx, false, get)?.unwrap_or_default()
        };
        res.push(KeyValue {
            key: INSTANCE_ID_KEY.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(self.instance_id.clone())),
            }),
            ..Default::default()
        });
        if md.sample.is_some() {
            let r = agg.resource(res);
            self.samples(d, r, ctx, samples, dict, agg);
            return Ok(());
        }
        // Values before any state changes: an error leaves nothing half done.
        let update = match &md.kind {
            Kind::Sum { value, .. } | Kind::Gauge { value } => number(value.eval(ctx)?, "sum")?,
            Kind::Histogram { value, count, .. } | Kind::Exponential { value, count, .. } => {
                let v = match number(value.eval(ctx)?, "histogram")? {
                    Val::Int(i) => i as f64,
                    Val::Double(f) => f,
                    _ => unreachable!(),
                };
                let n = match count {
                    None => 1,
                    Some(c) => match number(c.eval(ctx)?, "count")? {
                        Val::Int(i) => i,
                        Val::Double(f) => f as i64,
                        _ => unreachable!(),
                    },
                };
                if n == 0 {
                    return Ok(());
                }
                Val::List(vec![Val::Double(v), Val::Int(n)])
            }
        };
        let r = agg.resource(res);
        let Aggregate {
            points,
            regular,
            overflowed,
            ..
        } = agg;
        let (points, ids) = points.entry((d, r)).or_default();
        let mut akey = key_of(&attrs);
        let mut attrs = attrs;
        if !ids.contains_key(&akey) {
            (akey, attrs) = place(d, md.limit, regular, overflowed, (akey, attrs));
        }
        let p = match ids.get(&akey) {
            Some(&p) => p,
            None => {
                let fresh = match (&md.kind, &update) {
                    (Kind::Histogram { bounds, .. }, _) => Point::Hist {
                        sum: 0.0,
                        count: 0,
                        counts: vec![0; bounds.len() + 1],
                    },
                    (Kind::Exponential { max_size, .. }, _) => {
                        Point::Expo(Box::new(expo::ExpoHistogram::new(*max_size)))
                    }
                    (_, Val::Double(_)) => Point::Double(0.0),
                    _ => Point::Int(0),
                };
                points.push((attrs, fresh));
                ids.insert(akey, points.len() - 1);
                points.len() - 1
            }
        };
        let point = &mut points[p].1;
        match (&md.kind, update, point) {
            (Kind::Sum { .. }, Val::Int(v), Point::Int(acc)) => *acc = acc.wrapping_add(v),
            (Kind::Sum { .. }, Val::Double(v), Point::Double(acc)) => *acc += v,
            // A sum that was int and meets a double (or the other way)
            // goes on as the Collector's: the point keeps its first type.
            (Kind::Sum { .. }, Val::Int(v), Point::Double(acc)) => *acc += v as f64,
            (Kind::Sum { .. }, Val::Double(v), Point::Int(acc)) => *acc += v as i64,
            (Kind::Gauge { .. }, Val::Int(v), point) => *point = Point::Int(v),
            (Kind::Gauge { .. }, Val::Double(v), point) => *point = Point::Double(v),
            (Kind::Histogram { bounds, .. }, Val::List(l), Point::Hist { sum, count, counts }) => {
                let (Val::Double(v), Val::Int(n)) = (&l[0], &l[1]) else {
                    unreachable!()
                };
                *sum += v * *n as f64;
                *count = count.wrapping_add(*n as u64);
                let i = bounds.partition_point(|b| b < v);
                counts[i] = counts[i].wrapping_add(*n as u64);
            }
            (Kind::Exponential { .. }, Val::List(l), Point::Expo(h)) => {
                let (Val::Double(v), Val::Int(n)) = (&l[0], &l[1]) else {
                    unreachable!()
                };
                h.update(*v, *n as u64);
            }
            _ => {}
        }
        Ok(())
    }

    /// A `context: sample` sum over the samples of one profile. A sample's
    /// attribute set is looked up by dictionary indices in a buffer that
    /// is reused: a set already seen in this profile allocates nothing.
    fn samples(
        &self,
        d: usize,
        r: usize,
        ctx: &Ctx,
        samples: &[Sample],
        dict: &ProfilesDictionary,
        agg: &mut Aggregate,
    ) {
        let md = &self.defs[d];
        let Some(sv) = &md.sample else { return };
        let Aggregate {
            points,
            scratch,
            buf,
            memo,
            regular,
            overflowed,
            key_strings,
            ..
        } = agg;
        scratch.clear();
        // What each attribute reads: the leaf function, or an attribute
        // whose key is one of these string indices (found once per batch).
        let keys: Vec<Option<Vec<i32>>> = md
            .attrs
            .iter()
            .map(|a| {
                (a.key != FUNCTION_NAME).then(|| {
                    let found = key_strings.entry(a.key.clone()).or_insert_with(|| {
                        (0..dict.string_table.len())
                            .filter(|&i| dict.string_table[i] == a.key)
                            .map(|i| i as i32)
                            .collect()
                    });
                    found.clone()
                })
            })
            .collect();
        let at = points.entry((d, r)).or_default();
        // One attribute: the point is the same for every sample of a stack
        // (the leaf function) or of an attribute index (0: none).
        let by = match keys.as_slice() {
            [None] => Some((None, dict.stack_table.len())),
            [Some(key)] => Some((Some(key.as_slice()), dict.attribute_table.len() + 1)),
            _ => None,
        };
        memo.reset(by.map_or(0, |(_, len)| len));
        for s in samples {
            let slot = by.and_then(|(key, _)| match key {
                None => usize::try_from(s.stack_index).ok(),
                Some(key) => Some(sample_attr(dict, s, key).map_or(0, |i| i as usize + 1)),
            });
            let p = match slot.and_then(|i| memo.get(i)) {
                Some(p) => p,
                None => {
                    let p = self.point(
                        md, d, ctx, s, dict, &keys, at, scratch, buf, regular, overflowed,
                    );
                    if let Some(i) = slot {
                        memo.set(i, p);
                    }
                    p
                }
            };
            let Some((_, Point::Int(acc))) = at.0.get_mut(p) else {
                continue;
            };
            let v = match sv {
                SampleValue::Values => s.values.iter().fold(0i64, |a, v| a.wrapping_add(*v)),
                SampleValue::Const(c) => *c,
            };
            *acc = acc.wrapping_add(v);
        }
    }

    /// The point of a sample's attribute set (`usize::MAX`: a required
    /// attribute is missing), found through its key's dictionary indices.
    #[allow(clippy::too_many_arguments)]
    fn point(
        &self,
        md: &MetricDef,
        d: usize,
        ctx: &Ctx,
        s: &Sample,
        dict: &ProfilesDictionary,
        keys: &[Option<Vec<i32>>],
        (pts, ids): &mut Points,
        scratch: &mut HashMap<Vec<i64>, usize, ahash::RandomState>,
        buf: &mut Vec<i64>,
        regular: &mut [usize],
        overflowed: &mut HashSet<(usize, Vec<u8>)>,
    ) -> usize {
        buf.clear();
        for key in keys {
            let i = match key {
                None => leaf_function(dict, s),
                Some(key) => sample_attr(dict, s, key),
            };
            buf.push(i.map_or(-1, i64::from));
        }
        match scratch.get(buf.as_slice()) {
            Some(&p) => p,
            None => {
                let mut attrs = Vec::with_capacity(md.attrs.len());
                let mut missing = false;
                for (a, &i) in md.attrs.iter().zip(buf.iter()) {
                    let found = match (i, a.key == FUNCTION_NAME) {
                        (-1, _) => ctx.profile_attr(&a.key).ok().flatten().cloned(),
                        (i, true) => dict.string_table.get(i as usize).map(|n| AnyValue {
                            value: Some(any_value::Value::StringValue(n.clone())),
                        }),
                        (i, false) => dict
                            .attribute_table
                            .get(i as usize)
                            .and_then(|a| a.value.clone()),
                    };
                    let value = match (found, &a.default, a.optional) {
                        (Some(v), _, _) => v,
                        (None, Some(d), _) => d.clone(),
                        (None, None, true) => continue,
                        (None, None, false) => {
                            missing = true;
                            break;
                        }
                    };
                    attrs.push(KeyValue {
                        key: a.key.clone(),
                        value: Some(value),
                        ..Default::default()
                    });
                }
                let p = if missing {
                    usize::MAX
                } else {
                    let mut akey = key_of(&attrs);
                    if !ids.contains_key(&akey) {
                        (akey, attrs) = place(d, md.limit, regular, overflowed, (akey, attrs));
                    }
                    match ids.get(&akey) {
                        Some(&p) => p,
                        None => {
                            pts.push((attrs, Point::Int(0)));
                            ids.insert(akey, pts.len() - 1);
                            pts.len() - 1
                        }
                    }
                };
                scratch.insert(buf.clone(), p);
                p
            }
        }
    }

    /// Counts attribute sets folded into an overflow point.
    fn count(&self, metric: &str, reason: &str, n: u64) {
        if let Some((id, t)) = self.telemetry.get() {
            t.connector_overflow(id, metric, reason, n);
        }
    }

    fn finish(&self, mut agg: Aggregate, now: u64) -> Option<ExportMetricsServiceRequest> {
        if agg.resources.is_empty() {
            return None;
        }
        let mut overflowed = vec![0u64; self.defs.len()];
        for (d, _) in &agg.overflowed {
            overflowed[*d] += 1;
        }
        for (d, n) in overflowed.into_iter().enumerate() {
            if n > 0 {
                self.count(&self.defs[d].name, "cardinality_limit", n);
            }
        }
        let mut out: Vec<ResourceMetrics> = agg
            .resources
            .drain(..)
            .map(|attributes| ResourceMetrics {
                resource: Some(Resource {
                    attributes,
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: SCOPE_NAME.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect();
        for (d, md) in self.defs.iter().enumerate() {
            for (r, rm) in out.iter_mut().enumerate() {
                let Some((mut points, _)) = agg.points.remove(&(d, r)) else {
                    continue;
                };
                if let Some(n) = md.top_functions {
                    let folded;
                    (points, folded) = top_functions(points, n);
                    if folded > 0 {
                        self.count(&md.name, "top_functions", folded);
                    }
                }
                let number = |(attributes, p): (Vec<KeyValue>, Point)| pm::NumberDataPoint {
                    attributes,
                    time_unix_nano: now,
                    value: Some(match p {
                        Point::Double(v) => number_data_point::Value::AsDouble(v),
                        Point::Int(v) => number_data_point::Value::AsInt(v),
                        Point::Hist { .. } | Point::Expo(_) => unreachable!(),
                    }),
                    ..Default::default()
                };
                let data = match &md.kind {
                    Kind::Sum { monotonic, .. } => metric::Data::Sum(pm::Sum {
                        data_points: points.into_iter().map(number).collect(),
                        aggregation_temporality: DELTA,
                        is_monotonic: *monotonic,
                    }),
                    Kind::Gauge { .. } => metric::Data::Gauge(pm::Gauge {
                        data_points: points.into_iter().map(number).collect(),
                    }),
                    Kind::Histogram { bounds, .. } => metric::Data::Histogram(pm::Histogram {
                        aggregation_temporality: DELTA,
                        data_points: points
                            .into_iter()
                            .map(|(attributes, p)| {
                                let Point::Hist { sum, count, counts } = p else {
                                    unreachable!()
                                };
                                pm::HistogramDataPoint {
                                    attributes,
                                    time_unix_nano: now,
                                    count,
                                    sum: Some(sum),
                                    bucket_counts: counts,
                                    explicit_bounds: bounds.clone(),
                                    ..Default::default()
                                }
                            })
                            .collect(),
                    }),
                    Kind::Exponential { .. } => {
                        metric::Data::ExponentialHistogram(pm::ExponentialHistogram {
                            aggregation_temporality: DELTA,
                            data_points: points
                                .into_iter()
                                .map(|(attributes, p)| {
                                    let Point::Expo(h) = p else { unreachable!() };
                                    let buckets = |b: &expo::Buckets| {
                                        Some(pm::exponential_histogram_data_point::Buckets {
                                            offset: b.offset,
                                            bucket_counts: b.counts.clone(),
                                        })
                                    };
                                    pm::ExponentialHistogramDataPoint {
                                        attributes,
                                        time_unix_nano: now,
                                        count: h.count,
                                        sum: Some(h.sum),
                                        scale: h.scale,
                                        zero_count: h.zero_count,
                                        positive: buckets(&h.positive),
                                        negative: buckets(&h.negative),
                                        min: (h.count > 0).then_some(h.min),
                                        max: (h.count > 0).then_some(h.max),
                                        ..Default::default()
                                    }
                                })
                                .collect(),
                        })
                    }
                };
                rm.scope_metrics[0].metrics.push(Metric {
                    name: md.name.clone(),
                    description: md.description.clone(),
                    unit: md.unit.clone(),
                    data: Some(data),
                    ..Default::default()
                });
            }
        }
        Some(ExportMetricsServiceRequest {
            resource_metrics: out,
        })
    }
}

/// `top_functions`: the points of the `n` functions with the largest
/// sums (ties by name) kept, the others summed per remaining attributes
/// into `function.name: (other)`; and how many functions were folded.
fn top_functions(
    points: Vec<(Vec<KeyValue>, Point)>,
    n: usize,
) -> (Vec<(Vec<KeyValue>, Point)>, u64) {
    let name = |attrs: &[KeyValue]| -> Option<String> {
        attrs
            .iter()
            .find(|kv| kv.key == FUNCTION_NAME)
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
    };
    let mut totals: HashMap<String, i128> = HashMap::new();
    for (attrs, p) in &points {
        if let (Some(f), Point::Int(v)) = (name(attrs), p) {
            *totals.entry(f).or_default() += i128::from(*v);
        }
    }
    if totals.len() <= n {
        return (points, 0);
    }
    let mut ranked: Vec<(String, i128)> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let folded = (ranked.len() - n) as u64;
    let top: HashSet<String> = ranked.into_iter().take(n).map(|(f, _)| f).collect();
    let mut out: Vec<(Vec<KeyValue>, Point)> = Vec::with_capacity(points.len());
    let mut ids: HashMap<Vec<u8>, usize> = HashMap::new();
    for (mut attrs, p) in points {
        match name(&attrs) {
            Some(f) if !top.contains(&f) => {
                for kv in attrs.iter_mut().filter(|kv| kv.key == FUNCTION_NAME) {
                    kv.value = Some(AnyValue {
                        value: Some(any_value::Value::StringValue(OTHER_FUNCTIONS.into())),
                    });
                }
                let key = key_of(&attrs);
                match (ids.get(&key), p) {
                    (Some(&i), Point::Int(v)) => {
                        if let Point::Int(acc) = &mut out[i].1 {
                            *acc = acc.wrapping_add(v);
                        }
                    }
                    (_, p) => {
                        ids.insert(key, out.len());
                        out.push((attrs, p));
                    }
                }
            }
            _ => out.push((attrs, p)),
        }
    }
    (out, folded)
}

/// A copy of `data` whose profiles have no samples.
fn without_samples(data: &ProfilesData) -> ProfilesData {
    let profile = |p: &Profile| {
        // Every field named: a new one is a compile error here, not a
        // field silently left out.
        let Profile {
            sample_type,
            samples: _,
            time_unix_nano,
            duration_nano,
            period_type,
            period,
            profile_id,
            dropped_attributes_count,
            original_payload_format,
            original_payload,
            attribute_indices,
        } = p;
        Profile {
            sample_type: *sample_type,
            samples: Vec::new(),
            time_unix_nano: *time_unix_nano,
            duration_nano: *duration_nano,
            period_type: *period_type,
            period: *period,
            profile_id: profile_id.clone(),
            dropped_attributes_count: *dropped_attributes_count,
            original_payload_format: original_payload_format.clone(),
            original_payload: original_payload.clone(),
            attribute_indices: attribute_indices.clone(),
        }
    };
    ProfilesData {
        resource_profiles: data
            .resource_profiles
            .iter()
            .map(|rp| ResourceProfiles {
                resource: rp.resource.clone(),
                schema_url: rp.schema_url.clone(),
                scope_profiles: rp
                    .scope_profiles
                    .iter()
                    .map(|sp| ScopeProfiles {
                        scope: sp.scope.clone(),
                        schema_url: sp.schema_url.clone(),
                        profiles: sp.profiles.iter().map(profile).collect(),
                    })
                    .collect(),
            })
            .collect(),
        dictionary: data.dictionary.clone(),
    }
}

impl ProfilesToMetrics for SignalToMetrics {
    fn start(&self, id: &str, telemetry: &Arc<Telemetry>) {
        let _ = self.telemetry.set((id.to_owned(), telemetry.clone()));
    }

    fn working_bytes(&self, batch: &ProfileBatch) -> usize {
        // `without_samples` copies the dictionary; the rest it copies (the
        // resources, the profiles' own fields) is small beside it.
        profcol_model::footprint::dictionary(batch.dictionary())
    }

    fn convert(&self, batch: &ProfileBatch) -> Option<ExportMetricsServiceRequest> {
        // The OTTL contexts take the data mutably (statements write); the
        // batch is shared with the other pipelines, so a copy is read, and
        // a copy without samples (no OTTL path reads them): `context:
        // sample` reads them from the batch, in the order the contexts come.
        let mut data = without_samples(batch.data());
        let client = profcol_ottl::Client::of(&batch.meta);
        let originals: Vec<&[Sample]> = batch
            .data()
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .flat_map(|s| &s.profiles)
            .map(|p| p.samples.as_slice())
            .collect();
        let mut next = 0;
        let dict = batch.dictionary();
        let mut agg = Aggregate {
            regular: vec![0; self.defs.len()],
            ..Aggregate::default()
        };
        let result = profcol_ottl::for_each(&mut data, Level::Profile, &client, |ctx| {
            let samples = originals.get(next).copied().unwrap_or_default();
            next += 1;
            for d in 0..self.defs.len() {
                if let Err(e) = self.aggregate(d, ctx, samples, dict, &mut agg) {
                    match self.error_mode {
                        ErrorMode::Propagate => return Err(e),
                        ErrorMode::Ignore => {
                            tracing::warn!(metric = %self.defs[d].name, error = %e, "signaltometrics: failed to evaluate; skipped for this profile")
                        }
                        ErrorMode::Silent => {}
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            tracing::warn!(error = %e, "signaltometrics: failed to evaluate (error_mode: propagate); no metrics made of this request");
            return None;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.finish(agg, now)
    }
}

#[cfg(test)]
mod tests;
