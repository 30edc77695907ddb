//! Test support for the processors' reference models: a batch resolved into
//! plain owned values, with no dictionary index left, so that a naive model
//! of a processor can work on it and be compared with what the optimized
//! processor made of the same batch.
//!
//! Everything a user sees after resolving the indices is kept (frames with
//! every field of their lines, functions and mappings, attribute values with
//! their units, links, values and timestamps in order); only the layout of
//! the dictionary is gone. Samples keep their order here; [`normalized`]
//! sorts them (and each sample's attribute set) for processors that leave
//! the order unspecified.

use std::collections::BTreeMap;

use profcol_model::dictionary::Lookup;
use profcol_model::proto::{
    any_value::Value, AnyValue, KeyValue, KeyValueAndUnit, ProfilesData, Sample, ValueType,
};
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, Verdict};

/// An attribute value, resolved (string references become strings).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum V {
    None,
    Str(String),
    Bool(bool),
    Int(i64),
    /// The bits of an `f64`, so that values order and compare exactly.
    Double(u64),
    Bytes(Vec<u8>),
    Array(Vec<V>),
    Kv(Vec<(String, V)>),
}

/// `(key, value, unit)` of a dictionary attribute.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Attr {
    pub key: String,
    pub value: V,
    pub unit: String,
}

/// One frame: a location with its mapping and lines resolved.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Frame {
    pub address: u64,
    /// (memory start, limit, file offset, filename, attributes).
    pub mapping: (u64, u64, u64, String, Vec<Attr>),
    /// (function name, system name, filename, start line, line, column).
    pub lines: Vec<(String, String, String, i64, i64, i64)>,
    pub attributes: Vec<Attr>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct RSample {
    /// Leaf first, as in the proto.
    pub stack: Vec<Frame>,
    pub attributes: Vec<Attr>,
    /// (trace id, span id).
    pub link: (Vec<u8>, Vec<u8>),
    pub values: Vec<i64>,
    pub timestamps: Vec<u64>,
}

impl RSample {
    /// Observations, as every profcol metric counts them.
    pub(crate) fn observations(&self) -> u64 {
        self.values.len().max(self.timestamps.len()).max(1) as u64
    }
}

/// One profile with everything around it (resource, scope) resolved.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct RProfile {
    pub resource: Vec<(String, V)>,
    /// Of the resource and of the scope.
    pub schema_urls: (String, String),
    pub scope: (String, String, Vec<(String, V)>),
    /// (type, unit).
    pub sample_type: Option<(String, String)>,
    pub period_type: Option<(String, String)>,
    pub period: i64,
    pub time: (u64, u64),
    pub profile_id: Vec<u8>,
    pub dropped_attributes_count: u32,
    pub original_payload: (String, Vec<u8>),
    pub attributes: Vec<Attr>,
    pub samples: Vec<RSample>,
}

pub(crate) fn value(v: Option<&AnyValue>, l: &Lookup<'_>) -> V {
    let Some(v) = v.and_then(|v| v.value.as_ref()) else {
        return V::None;
    };
    match v {
        Value::StringValue(s) => V::Str(s.clone()),
        Value::StringValueStrindex(i) => V::Str(l.string(*i).to_owned()),
        Value::BoolValue(b) => V::Bool(*b),
        Value::IntValue(n) => V::Int(*n),
        Value::DoubleValue(d) => V::Double(d.to_bits()),
        Value::BytesValue(b) => V::Bytes(b.clone()),
        Value::ArrayValue(a) => V::Array(a.values.iter().map(|v| value(Some(v), l)).collect()),
        Value::KvlistValue(kv) => V::Kv(key_values(&kv.values, l)),
    }
}

fn key_values(kvs: &[KeyValue], l: &Lookup<'_>) -> Vec<(String, V)> {
    kvs.iter()
        .map(|kv| (l.key_of(kv).to_owned(), value(kv.value.as_ref(), l)))
        .collect()
}

pub(crate) fn attr(a: &KeyValueAndUnit, l: &Lookup<'_>) -> Attr {
    Attr {
        key: l.string(a.key_strindex).to_owned(),
        value: value(a.value.as_ref(), l),
        unit: l.string(a.unit_strindex).to_owned(),
    }
}

fn attrs(indices: &[i32], l: &Lookup<'_>) -> Vec<Attr> {
    indices.iter().map(|&i| attr(l.attribute(i), l)).collect()
}

fn value_type(t: Option<&ValueType>, l: &Lookup<'_>) -> Option<(String, String)> {
    t.map(|t| {
        (
            l.string(t.type_strindex).to_owned(),
            l.string(t.unit_strindex).to_owned(),
        )
    })
}

pub(crate) fn frame(location: i32, l: &Lookup<'_>) -> Frame {
    let loc = l.location(location);
    let m = l.mapping(loc.mapping_index);
    Frame {
        address: loc.address,
        mapping: (
            m.memory_start,
            m.memory_limit,
            m.file_offset,
            l.string(m.filename_strindex).to_owned(),
            attrs(&m.attribute_indices, l),
        ),
        lines: loc
            .lines
            .iter()
            .map(|line| {
                let f = l.function(line.function_index);
                (
                    l.string(f.name_strindex).to_owned(),
                    l.string(f.system_name_strindex).to_owned(),
                    l.string(f.filename_strindex).to_owned(),
                    f.start_line,
                    line.line,
                    line.column,
                )
            })
            .collect(),
        attributes: attrs(&loc.attribute_indices, l),
    }
}

pub(crate) fn sample(s: &Sample, l: &Lookup<'_>) -> RSample {
    let link = l.link(s.link_index);
    RSample {
        stack: l
            .stack(s.stack_index)
            .location_indices
            .iter()
            .map(|&i| frame(i, l))
            .collect(),
        attributes: attrs(&s.attribute_indices, l),
        link: (link.trace_id.clone(), link.span_id.clone()),
        values: s.values.clone(),
        timestamps: s.timestamps_unix_nano.clone(),
    }
}

/// Every profile of `data`, in document order, with its samples in order.
pub(crate) fn resolve(data: &ProfilesData) -> Vec<RProfile> {
    resolve_scopes(data).into_iter().flatten().collect()
}

/// [`resolve`], the profiles of each scope apart (in document order).
pub(crate) fn resolve_scopes(data: &ProfilesData) -> Vec<Vec<RProfile>> {
    let l = Lookup::of(data);
    let mut out = Vec::new();
    for rp in &data.resource_profiles {
        let resource = rp
            .resource
            .as_ref()
            .map(|r| key_values(&r.attributes, &l))
            .unwrap_or_default();
        for sp in &rp.scope_profiles {
            let scope = sp
                .scope
                .as_ref()
                .map(|s| {
                    (
                        s.name.clone(),
                        s.version.clone(),
                        key_values(&s.attributes, &l),
                    )
                })
                .unwrap_or_default();
            out.push(
                sp.profiles
                    .iter()
                    .map(|p| RProfile {
                        resource: resource.clone(),
                        schema_urls: (rp.schema_url.clone(), sp.schema_url.clone()),
                        scope: scope.clone(),
                        sample_type: value_type(p.sample_type.as_ref(), &l),
                        period_type: value_type(p.period_type.as_ref(), &l),
                        period: p.period,
                        time: (p.time_unix_nano, p.duration_nano),
                        profile_id: p.profile_id.clone(),
                        dropped_attributes_count: p.dropped_attributes_count,
                        original_payload: (
                            p.original_payload_format.clone(),
                            p.original_payload.clone(),
                        ),
                        attributes: attrs(&p.attribute_indices, &l),
                        samples: p.samples.iter().map(|s| sample(s, &l)).collect(),
                    })
                    .collect(),
            );
        }
    }
    out
}

/// `profiles` with each attribute set and each profile's samples sorted: the
/// content, for processors that leave those orders unspecified. The points
/// of a sample keep their order (a timestamp goes with its value).
pub(crate) fn normalized(mut profiles: Vec<RProfile>) -> Vec<RProfile> {
    for p in &mut profiles {
        p.attributes.sort();
        for s in &mut p.samples {
            s.attributes.sort();
        }
        p.samples.sort();
    }
    profiles
}

/// Runs `p` on `batch` with a deferred context; returns the verdict, the
/// observations dropped per reason and the events counted, each by name
/// (zero counts left out).
pub(crate) fn run(
    p: &mut dyn Processor,
    batch: &mut ProfileBatch,
) -> (Verdict, BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let mut ctx = ProcessContext::deferred("oracle", "oracle");
    let v = p.process(batch, &mut ctx);
    let counts = ctx.into_counts();
    let mut drops = BTreeMap::new();
    for (reason, n) in counts.drops {
        *drops.entry(reason.to_string()).or_default() += n;
    }
    let mut events = BTreeMap::new();
    for (what, n) in counts.events {
        *events.entry(what.to_string()).or_default() += n;
    }
    drops.retain(|_, n| *n > 0);
    events.retain(|_, n| *n > 0);
    (v, drops, events)
}
