//! The series the exporter serves: every OTLP data point folded into its
//! series as the Collector's `lastValueAccumulator` does (gauges and
//! cumulative points replace, deltas add up), bounded by `max_series` and
//! the memory budget, dropped `metric_expiration` after their last update.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use profcol_model::memory::Reservation;
use profcol_model::proto::metrics::{
    metric, number_data_point, AggregationTemporality, ExportMetricsServiceRequest,
};
use profcol_model::proto::KeyValue;
use prost::Message;

use super::naming::{self, escape_help, escape_label_value, go_float, NameType};

/// The Prometheus type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Counter,
    Gauge,
    Histogram,
}

impl Family {
    fn as_str(self) -> &'static str {
        match self {
            Family::Counter => "counter",
            Family::Gauge => "gauge",
            Family::Histogram => "histogram",
        }
    }
}

/// A series' value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Int(i64),
    Double(f64),
    /// Explicit bounds with a count per bucket (one more than bounds);
    /// an exponential histogram keeps its count and sum only, all the
    /// 0.0.4 text format shows of it (`le="+Inf"`, `_sum`, `_count`).
    Hist {
        count: u64,
        sum: f64,
        bounds: Vec<f64>,
        counts: Vec<u64>,
    },
}

impl Value {
    /// Adds a delta of the same shape; `false` when the shapes differ.
    fn add(&mut self, d: &Value) -> bool {
        match (self, d) {
            (Value::Int(a), Value::Int(b)) => *a = a.wrapping_add(*b),
            (Value::Double(a), Value::Double(b)) => *a += b,
            (Value::Int(a), Value::Double(b)) => *a = a.wrapping_add(*b as i64),
            (Value::Double(a), Value::Int(b)) => *a += *b as f64,
            (
                Value::Hist {
                    count,
                    sum,
                    bounds,
                    counts,
                },
                Value::Hist {
                    count: dc,
                    sum: ds,
                    bounds: db,
                    counts: dn,
                },
            ) if bounds == db && counts.len() == dn.len() => {
                *count = count.wrapping_add(*dc);
                *sum += ds;
                for (c, d) in counts.iter_mut().zip(dn) {
                    *c = c.wrapping_add(*d);
                }
            }
            _ => return false,
        }
        true
    }
}

struct Series {
    name: String,
    help: String,
    family: Family,
    /// Every label but `le`, sorted by name.
    labels: Vec<(String, String)>,
    resource: Arc<Vec<KeyValue>>,
    value: Value,
    time: u64,
    updated: Instant,
    bytes: usize,
}

/// What the store is told by the exporter's config.
#[derive(Debug, Clone)]
pub struct Settings {
    pub namespace: String,
    pub suffixes: bool,
    pub const_labels: Vec<(String, String)>,
    pub resource_to_telemetry: bool,
    pub send_timestamps: bool,
    pub expiration: Duration,
    pub max_series: usize,
}

/// What became of the points of one request.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// Points that updated or started a series.
    pub accepted: u64,
    /// Points older than their series' (left out, as the Collector does).
    pub stale: u64,
    /// Points refused: over `max_series` or the memory budget, with names
    /// or labels that cannot be written, or of a kind not served.
    pub refused: u64,
}

pub struct Store {
    s: Settings,
    series: HashMap<Vec<u8>, Series>,
    key: Vec<u8>,
    bytes: usize,
    reservation: Option<Reservation>,
    last_sweep: Option<Instant>,
}

/// One incoming point, its kind's fields read out.
struct Point<'a> {
    attrs: &'a [KeyValue],
    start: u64,
    time: u64,
    flags: u32,
    value: Value,
}

const NO_RECORDED_VALUE: u32 = 1;

impl Store {
    pub fn new(s: Settings) -> Self {
        Self {
            s,
            series: HashMap::new(),
            key: Vec::new(),
            bytes: 0,
            reservation: None,
            last_sweep: None,
        }
    }

    /// Reserves what the series hold, from now on, in `r`'s budget.
    pub fn attach(&mut self, mut r: Reservation) {
        r.set(self.bytes);
        self.reservation = Some(r);
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Bytes the series hold (reserved in the budget once attached).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Folds a request's points into the series.
    pub fn fold(&mut self, req: &ExportMetricsServiceRequest, now: Instant) -> Folded {
        self.sweep_at_most_every_second(now);
        let mut f = Folded::default();
        for rm in &req.resource_metrics {
            let resource = Arc::new(
                rm.resource
                    .as_ref()
                    .map(|r| r.attributes.clone())
                    .unwrap_or_default(),
            );
            for sm in &rm.scope_metrics {
                let scope = sm.scope.as_ref();
                let scope = Scope {
                    name: scope.map_or("", |s| &s.name),
                    version: scope.map_or("", |s| &s.version),
                    schema_url: &sm.schema_url,
                    attrs: scope.map_or(&[], |s| &s.attributes),
                };
                for m in &sm.metrics {
                    self.fold_metric(m, &scope, &resource, now, &mut f);
                }
            }
        }
        f
    }

    fn fold_metric(
        &mut self,
        m: &profcol_model::proto::metrics::Metric,
        scope: &Scope,
        resource: &Arc<Vec<KeyValue>>,
        now: Instant,
        f: &mut Folded,
    ) {
        const DELTA: i32 = AggregationTemporality::Delta as i32;
        const CUMULATIVE: i32 = AggregationTemporality::Cumulative as i32;
        let number = |v: &Option<number_data_point::Value>| match v {
            Some(number_data_point::Value::AsInt(i)) => Value::Int(*i),
            Some(number_data_point::Value::AsDouble(d)) => Value::Double(*d),
            None => Value::Int(0),
        };
        let (ty, family, delta, points): (NameType, Family, bool, Vec<Point>) = match &m.data {
            Some(metric::Data::Gauge(g)) => (
                NameType::Gauge,
                Family::Gauge,
                false,
                g.data_points
                    .iter()
                    .map(|p| Point {
                        attrs: &p.attributes,
                        start: p.start_time_unix_nano,
                        time: p.time_unix_nano,
                        flags: p.flags,
                        value: number(&p.value),
                    })
                    .collect(),
            ),
            Some(metric::Data::Sum(s)) => {
                let n = s.data_points.len() as u64;
                // The Collector drops these: Prometheus has no delta
                // gauge, and an unspecified temporality means nothing.
                if s.aggregation_temporality != CUMULATIVE
                    && !(s.aggregation_temporality == DELTA && s.is_monotonic)
                {
                    tracing::warn!(metric = %m.name, "prometheus: a sum that is not cumulative nor a monotonic delta cannot be served; its points are refused");
                    f.refused += n;
                    return;
                }
                let (ty, family) = if s.is_monotonic {
                    (NameType::MonotonicCounter, Family::Counter)
                } else {
                    (NameType::NonMonotonicCounter, Family::Gauge)
                };
                (
                    ty,
                    family,
                    s.aggregation_temporality == DELTA,
                    s.data_points
                        .iter()
                        .map(|p| Point {
                            attrs: &p.attributes,
                            start: p.start_time_unix_nano,
                            time: p.time_unix_nano,
                            flags: p.flags,
                            value: number(&p.value),
                        })
                        .collect(),
                )
            }
            Some(metric::Data::Histogram(h)) => {
                if h.aggregation_temporality != CUMULATIVE && h.aggregation_temporality != DELTA {
                    f.refused += h.data_points.len() as u64;
                    return;
                }
                (
                    NameType::Histogram,
                    Family::Histogram,
                    h.aggregation_temporality == DELTA,
                    h.data_points
                        .iter()
                        .map(|p| Point {
                            attrs: &p.attributes,
                            start: p.start_time_unix_nano,
                            time: p.time_unix_nano,
                            flags: p.flags,
                            value: Value::Hist {
                                count: p.count,
                                sum: p.sum.unwrap_or(0.0),
                                bounds: p.explicit_bounds.clone(),
                                counts: p.bucket_counts.clone(),
                            },
                        })
                        .collect(),
                )
            }
            Some(metric::Data::ExponentialHistogram(h)) => {
                if h.aggregation_temporality != CUMULATIVE && h.aggregation_temporality != DELTA {
                    f.refused += h.data_points.len() as u64;
                    return;
                }
                (
                    NameType::ExponentialHistogram,
                    Family::Histogram,
                    h.aggregation_temporality == DELTA,
                    h.data_points
                        .iter()
                        .map(|p| Point {
                            attrs: &p.attributes,
                            start: p.start_time_unix_nano,
                            time: p.time_unix_nano,
                            flags: p.flags,
                            value: Value::Hist {
                                count: p.count,
                                sum: p.sum.unwrap_or(0.0),
                                bounds: Vec::new(),
                                counts: Vec::new(),
                            },
                        })
                        .collect(),
                )
            }
            Some(metric::Data::Summary(s)) => {
                tracing::warn!(metric = %m.name, "prometheus: summaries are not served; their points are refused");
                f.refused += s.data_points.len() as u64;
                return;
            }
            None => return,
        };
        let Some(name) =
            naming::metric_name(&m.name, &m.unit, ty, &self.s.namespace, self.s.suffixes)
        else {
            tracing::warn!(metric = %m.name, "prometheus: no valid Prometheus name is left of this metric's; its points are refused");
            f.refused += points.len() as u64;
            return;
        };
        let job = job(resource);
        let instance = instance(resource);
        for p in points {
            let merged;
            let attrs: &[KeyValue] = if self.s.resource_to_telemetry {
                merged = with_resource(p.attrs, resource);
                &merged
            } else {
                p.attrs
            };
            signature(
                &mut self.key,
                family,
                scope,
                &m.name,
                attrs,
                job.as_deref(),
                instance.as_deref(),
            );
            if p.flags & NO_RECORDED_VALUE != 0 {
                if let Some(gone) = self.series.remove(self.key.as_slice()) {
                    self.bytes -= gone.bytes;
                    self.resize();
                }
                continue;
            }
            if let Some(s) = self.series.get_mut(self.key.as_slice()) {
                if p.time < s.time {
                    f.stale += 1;
                    continue;
                }
                let replace = if !delta {
                    true
                } else if p.start == s.time || p.start == 0 {
                    // Aligned with the last point, or without a start
                    // time (signaltometrics sends none): added up.
                    !s.value.add(&p.value)
                } else if family == Family::Histogram && p.start <= s.time {
                    // The Collector drops a histogram delta that overlaps.
                    f.stale += 1;
                    continue;
                } else {
                    // A gap: the writer restarted.
                    true
                };
                if replace {
                    s.value = p.value;
                }
                s.time = p.time;
                s.updated = now;
                s.resource = resource.clone();
                f.accepted += 1;
                continue;
            }
            if self.series.len() >= self.s.max_series {
                f.refused += 1;
                continue;
            }
            let Some(labels) = self.labels(attrs, scope, job.as_deref(), instance.as_deref())
            else {
                f.refused += 1;
                continue;
            };
            let bounds = match &p.value {
                Value::Hist { bounds, .. } => bounds.len(),
                _ => 0,
            };
            let bytes = std::mem::size_of::<Series>()
                + 2 * self.key.len()
                + name.len()
                + m.description.len()
                + labels
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 2 * std::mem::size_of::<String>())
                    .sum::<usize>()
                + bounds * 16
                + resource.iter().map(|kv| kv.encoded_len()).sum::<usize>();
            if let Some(r) = &mut self.reservation {
                if r.try_grow_to(self.bytes + bytes).is_err() {
                    f.refused += 1;
                    continue;
                }
            }
            self.bytes += bytes;
            self.series.insert(
                self.key.clone(),
                Series {
                    name: name.clone(),
                    help: m.description.clone(),
                    family,
                    labels,
                    resource: resource.clone(),
                    value: p.value,
                    time: p.time,
                    updated: now,
                    bytes,
                },
            );
            f.accepted += 1;
        }
    }

    /// The labels of a new series, sorted; `None` when two have one name
    /// or one cannot be written (client_golang refuses such a series).
    fn labels(
        &self,
        attrs: &[KeyValue],
        scope: &Scope,
        job: Option<&str>,
        instance: Option<&str>,
    ) -> Option<Vec<(String, String)>> {
        let mut out = Vec::with_capacity(attrs.len() + scope.attrs.len() + 5);
        for kv in attrs {
            out.push((
                naming::label_name(&kv.key)?,
                naming::value_string(kv.value.as_ref()),
            ));
        }
        for kv in scope.attrs {
            out.push((
                naming::label_name(&format!("otel_scope_{}", kv.key))?,
                naming::value_string(kv.value.as_ref()),
            ));
        }
        for (k, v) in [
            ("otel_scope_name", scope.name),
            ("otel_scope_version", scope.version),
            ("otel_scope_schema_url", scope.schema_url),
        ] {
            out.push((k.to_owned(), v.to_owned()));
        }
        if let Some(j) = job {
            out.push(("job".to_owned(), j.to_owned()));
        }
        if let Some(i) = instance {
            out.push(("instance".to_owned(), i.to_owned()));
        }
        out.extend(self.s.const_labels.iter().cloned());
        out.sort();
        let valid = out.iter().all(|(k, _)| naming::is_label_name(k))
            && out.windows(2).all(|w| w[0].0 != w[1].0);
        valid.then_some(out)
    }

    fn resize(&mut self) {
        if let Some(r) = &mut self.reservation {
            r.set(self.bytes);
        }
    }

    /// Drops series not updated within `metric_expiration` of `now`.
    pub fn sweep(&mut self, now: Instant) {
        let ttl = self.s.expiration;
        let before = self.bytes;
        self.series
            .retain(|_, s| now.saturating_duration_since(s.updated) <= ttl);
        self.bytes = self.series.values().map(|s| s.bytes).sum();
        if self.bytes != before {
            self.resize();
        }
        self.last_sweep = Some(now);
    }

    fn sweep_at_most_every_second(&mut self, now: Instant) {
        if self
            .last_sweep
            .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(1))
        {
            self.sweep(now);
        }
    }

    /// The text exposition (format 0.0.4) of the live series, families in
    /// name order, `target_info` first.
    pub fn render(&mut self, now: Instant) -> String {
        self.sweep(now);
        let mut out = String::new();
        self.target_info(&mut out);
        let mut families: BTreeMap<&str, Vec<&Series>> = BTreeMap::new();
        for s in self.series.values() {
            families.entry(&s.name).or_default().push(s);
        }
        for (name, mut series) in families {
            // The first type seen wins, as the Collector's instrument
            // type conflict check keeps the existing one.
            series.sort_by(|a, b| a.labels.cmp(&b.labels));
            let family = series[0].family;
            let help = series.iter().map(|s| &s.help).find(|h| !h.is_empty());
            if let Some(h) = help {
                out.push_str("# HELP ");
                out.push_str(name);
                out.push(' ');
                escape_help(h, &mut out);
                out.push('\n');
            }
            out.push_str("# TYPE ");
            out.push_str(name);
            out.push(' ');
            out.push_str(family.as_str());
            out.push('\n');
            for s in series.iter().filter(|s| s.family == family) {
                let ts = self.s.send_timestamps.then_some(s.time / 1_000_000);
                match &s.value {
                    Value::Int(v) => sample(&mut out, name, &s.labels, None, *v as f64, ts),
                    Value::Double(v) => sample(&mut out, name, &s.labels, None, *v, ts),
                    Value::Hist {
                        count,
                        sum,
                        bounds,
                        counts,
                    } => {
                        let bucket = format!("{name}_bucket");
                        let mut cum = 0u64;
                        for (b, c) in bounds.iter().zip(counts) {
                            cum = cum.wrapping_add(*c);
                            let le = go_float(*b);
                            sample(&mut out, &bucket, &s.labels, Some(&le), cum as f64, ts);
                        }
                        sample(
                            &mut out,
                            &bucket,
                            &s.labels,
                            Some("+Inf"),
                            *count as f64,
                            ts,
                        );
                        sample(&mut out, &format!("{name}_sum"), &s.labels, None, *sum, ts);
                        sample(
                            &mut out,
                            &format!("{name}_count"),
                            &s.labels,
                            None,
                            *count as f64,
                            ts,
                        );
                    }
                }
            }
        }
        out
    }

    /// `target_info`: one per resource (by job and instance) of the live
    /// series, its other attributes as labels.
    fn target_info(&self, out: &mut String) {
        let mut seen: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
        for s in self.series.values() {
            let (j, i) = (job(&s.resource), instance(&s.resource));
            if j.is_none() && i.is_none() {
                continue;
            }
            let sig = (j.clone().unwrap_or_default(), i.clone().unwrap_or_default());
            if seen.contains_key(&sig) {
                continue;
            }
            let mut labels: BTreeMap<String, String> = BTreeMap::new();
            for kv in s.resource.iter() {
                if matches!(
                    kv.key.as_str(),
                    SERVICE_NAME | SERVICE_NAMESPACE | SERVICE_INSTANCE_ID
                ) {
                    continue;
                }
                let Some(k) = naming::label_name(&kv.key) else {
                    continue;
                };
                let v = naming::value_string(kv.value.as_ref());
                labels
                    .entry(k)
                    .and_modify(|e| {
                        e.push(';');
                        e.push_str(&v);
                    })
                    .or_insert(v);
            }
            if let Some(j) = j {
                labels.insert("job".into(), j);
            }
            if let Some(i) = i {
                labels.insert("instance".into(), i);
            }
            seen.insert(
                sig,
                labels
                    .into_iter()
                    .filter(|(k, _)| naming::is_label_name(k))
                    .collect(),
            );
        }
        if seen.is_empty() {
            return;
        }
        let name = if self.s.namespace.is_empty() {
            "target_info".to_owned()
        } else {
            format!("{}_target_info", self.s.namespace)
        };
        out.push_str(&format!(
            "# HELP {name} Target metadata\n# TYPE {name} gauge\n"
        ));
        let mut all: Vec<_> = seen.into_values().collect();
        all.sort();
        for labels in all {
            sample(out, &name, &labels, None, 1.0, None);
        }
    }
}

const SERVICE_NAME: &str = "service.name";
const SERVICE_NAMESPACE: &str = "service.namespace";
const SERVICE_INSTANCE_ID: &str = "service.instance.id";

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a KeyValue> {
    attrs.iter().find(|kv| kv.key == key)
}

/// `job`: service.namespace/service.name, or service.name.
fn job(resource: &[KeyValue]) -> Option<String> {
    let name = naming::value_string(attr(resource, SERVICE_NAME)?.value.as_ref());
    Some(match attr(resource, SERVICE_NAMESPACE) {
        Some(ns) => format!("{}/{name}", naming::value_string(ns.value.as_ref())),
        None => name,
    })
}

/// `instance`: service.instance.id.
fn instance(resource: &[KeyValue]) -> Option<String> {
    Some(naming::value_string(
        attr(resource, SERVICE_INSTANCE_ID)?.value.as_ref(),
    ))
}

/// The point's attributes with every resource attribute added, the
/// resource's winning (resource_to_telemetry_conversion).
fn with_resource(attrs: &[KeyValue], resource: &[KeyValue]) -> Vec<KeyValue> {
    let mut out: Vec<KeyValue> = attrs
        .iter()
        .filter(|kv| attr(resource, &kv.key).is_none())
        .cloned()
        .collect();
    out.extend(resource.iter().cloned());
    out
}

struct Scope<'a> {
    name: &'a str,
    version: &'a str,
    schema_url: &'a str,
    attrs: &'a [KeyValue],
}

/// The identity of a series, as the Collector's `timeseriesSignature`:
/// type, scope, metric name, attributes in key order, job and instance.
fn signature(
    key: &mut Vec<u8>,
    family: Family,
    scope: &Scope,
    name: &str,
    attrs: &[KeyValue],
    job: Option<&str>,
    instance: Option<&str>,
) {
    fn put(key: &mut Vec<u8>, s: &str) {
        key.extend_from_slice(&(s.len() as u64).to_le_bytes());
        key.extend_from_slice(s.as_bytes());
    }
    fn put_attrs(key: &mut Vec<u8>, attrs: &[KeyValue]) {
        let mut sorted: Vec<(&str, String)> = attrs
            .iter()
            .map(|kv| (kv.key.as_str(), naming::value_string(kv.value.as_ref())))
            .collect();
        sorted.sort();
        key.extend_from_slice(&(sorted.len() as u64).to_le_bytes());
        for (k, v) in sorted {
            put(key, k);
            put(key, &v);
        }
    }
    key.clear();
    key.push(family as u8);
    put(key, scope.name);
    put(key, scope.version);
    put(key, scope.schema_url);
    put_attrs(key, scope.attrs);
    put(key, name);
    put_attrs(key, attrs);
    for v in [job, instance] {
        match v {
            Some(v) => {
                key.push(1);
                put(key, v);
            }
            None => key.push(0),
        }
    }
}

/// One sample line: `name{labels,le="x"} value [timestamp]`.
fn sample(
    out: &mut String,
    name: &str,
    labels: &[(String, String)],
    le: Option<&str>,
    value: f64,
    ts: Option<u64>,
) {
    out.push_str(name);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        let le = le.map(|le| ("le", le));
        for (i, (k, v)) in labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(le)
            .enumerate()
        {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(v, out);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&go_float(value));
    if let Some(ts) = ts {
        out.push(' ');
        out.push_str(&ts.to_string());
    }
    out.push('\n');
}
