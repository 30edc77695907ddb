//! A resolved, human-readable view of profiles: folded stacks with sample
//! attributes, for snapshots, property tests and the `debug` exporter.
//!
//! The view holds no dictionary indices and no timestamps, so it is the same
//! for any dictionary layout (duplicates, orphans, order): "the resolved view
//! is unchanged" is how tests state that an operation kept the meaning.
//!
//! ```text
//! profile sample_type=cpu/nanoseconds period_type=cpu/nanoseconds period=10000000
//!   resource: service.name=api
//!   scope: profiler 1.0
//!   main;run;work [thread.name=worker-1] 42
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};

use crate::proto::{
    any_value::Value, AnyValue, KeyValue, Location, Profile, ProfilesData, Sample, ValueType,
};

use super::dictionary::{sample_total, samples_identity, Lookup, SampleIdentity};

/// How much of each frame to show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// Function name, else system name, else `0x<address>`: `main;run;work`.
    #[default]
    Names,
    /// Every field of lines, functions, locations and mappings; for tests
    /// that must notice any change of meaning.
    Full,
}

/// One profile, resolved. Samples that resolve to the same line are summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedProfile {
    /// Resource attributes as `key=value`, sorted.
    pub resource: Vec<String>,
    /// Scope name and version.
    pub scope: String,
    pub scope_attributes: Vec<String>,
    /// `type/unit`.
    pub sample_type: String,
    pub period_type: String,
    pub period: i64,
    /// Profile attributes as `key=value`, sorted.
    pub attributes: Vec<String>,
    /// `format, N bytes` when an original payload is attached.
    pub original_payload: Option<String>,
    /// Folded line (`root;...;leaf [attributes] {link}`) -> total value.
    /// A sample's total is the sum of its values, or its number of timestamps.
    pub samples: BTreeMap<String, i64>,
}

/// Every profile of a `ProfilesData`, in document order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedView {
    pub profiles: Vec<ResolvedProfile>,
}

/// The resolved profiles of `data` with frame names ([`Detail::Names`]).
pub fn folded(data: &ProfilesData) -> Vec<ResolvedProfile> {
    resolve(data, Detail::Names).profiles
}

pub fn resolve(data: &ProfilesData, detail: Detail) -> ResolvedView {
    let mut r = Resolver {
        lookup: Lookup::of(data),
        detail,
        stacks: HashMap::new(),
        attributes: HashMap::new(),
    };
    let mut profiles = Vec::new();
    for rp in &data.resource_profiles {
        let resource = rp
            .resource
            .as_ref()
            .map(|res| r.key_values(&res.attributes))
            .unwrap_or_default();
        for sp in &rp.scope_profiles {
            let (scope, scope_attributes) = match &sp.scope {
                Some(s) => (
                    format!("{} {}", s.name, s.version).trim().to_owned(),
                    r.key_values(&s.attributes),
                ),
                None => Default::default(),
            };
            for p in &sp.profiles {
                profiles.push(r.profile(p, &resource, &scope, &scope_attributes));
            }
        }
    }
    ResolvedView { profiles }
}

impl ResolvedView {
    /// Stable, sorted text; see the module docs.
    pub fn to_text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ResolvedView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.profiles.iter().try_for_each(|p| write!(f, "{p}"))
    }
}

impl fmt::Display for ResolvedProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "profile sample_type={} period_type={} period={}",
            self.sample_type, self.period_type, self.period
        )?;
        let list = |f: &mut fmt::Formatter<'_>, name: &str, items: &[String]| {
            if items.is_empty() {
                Ok(())
            } else {
                writeln!(f, "  {name}: {}", items.join(", "))
            }
        };
        list(f, "resource", &self.resource)?;
        if !self.scope.is_empty() {
            writeln!(f, "  scope: {}", self.scope)?;
        }
        list(f, "scope attributes", &self.scope_attributes)?;
        list(f, "attributes", &self.attributes)?;
        if let Some(p) = &self.original_payload {
            writeln!(f, "  original payload: {p}")?;
        }
        for (line, total) in &self.samples {
            writeln!(f, "  {line} {total}")?;
        }
        Ok(())
    }
}

struct Resolver<'a> {
    lookup: Lookup<'a>,
    detail: Detail,
    /// Rendered frames per stack index and `key=value` per attribute index:
    /// each is rendered once however many samples use it.
    stacks: HashMap<i32, String>,
    attributes: HashMap<i32, String>,
}

impl Resolver<'_> {
    fn profile(&mut self, p: &Profile, resource: &[String], scope: &str, scope_attributes: &[String]) -> ResolvedProfile {
        let mut totals: HashMap<SampleIdentity<'_>, i64> = HashMap::new();
        for s in &p.samples {
            let t = totals.entry(samples_identity(s)).or_insert(0);
            *t = t.wrapping_add(sample_total(s));
        }
        let mut samples = BTreeMap::new();
        for (id, total) in totals {
            let line = self.sample_line(&id);
            let t = samples.entry(line).or_insert(0i64);
            *t = t.wrapping_add(total);
        }
        ResolvedProfile {
            resource: resource.to_vec(),
            scope: scope.to_owned(),
            scope_attributes: scope_attributes.to_vec(),
            sample_type: self.value_type(p.sample_type.as_ref()),
            period_type: self.value_type(p.period_type.as_ref()),
            period: p.period,
            attributes: self.attribute_list(&p.attribute_indices),
            original_payload: (!p.original_payload_format.is_empty() || !p.original_payload.is_empty())
                .then(|| format!("{}, {} bytes", p.original_payload_format, p.original_payload.len())),
            samples,
        }
    }

    fn value_type(&self, vt: Option<&ValueType>) -> String {
        match vt {
            Some(vt) => format!(
                "{}/{}",
                self.lookup.string(vt.type_strindex),
                self.lookup.string(vt.unit_strindex)
            ),
            None => "-".to_owned(),
        }
    }

    fn sample_line(&mut self, id: &SampleIdentity<'_>) -> String {
        let mut line = self.stack(id.stack_index).to_owned();
        let attrs = self.attribute_list(id.attribute_indices);
        if !attrs.is_empty() {
            write!(line, " [{}]", attrs.join(", ")).unwrap();
        }
        let link = self.lookup.link(id.link_index);
        if !link.trace_id.is_empty() || !link.span_id.is_empty() {
            write!(
                line,
                " {{trace_id={} span_id={}}}",
                hex::encode(&link.trace_id),
                hex::encode(&link.span_id)
            )
            .unwrap();
        }
        line
    }

    /// Root first: a stack lists its leaf first, and a location's lines list
    /// the innermost inlined function first and the caller last.
    fn stack(&mut self, i: i32) -> &str {
        if !self.stacks.contains_key(&i) {
            let mut out = String::new();
            for &l in self.lookup.stack(i).location_indices.iter().rev() {
                let loc = self.lookup.location(l);
                self.location(&mut out, loc);
            }
            if out.is_empty() {
                out.push_str("<empty stack>");
            }
            self.stacks.insert(i, out);
        }
        &self.stacks[&i]
    }

    fn location(&mut self, out: &mut String, loc: &Location) {
        let lk = self.lookup;
        let n = loc.lines.len();
        for (k, line) in loc.lines.iter().rev().enumerate() {
            if !out.is_empty() {
                out.push(';');
            }
            let f = lk.function(line.function_index);
            let (name, system) = (lk.string(f.name_strindex), lk.string(f.system_name_strindex));
            if !name.is_empty() {
                out.push_str(name);
            } else if !system.is_empty() {
                out.push_str(system);
            } else {
                write!(out, "{:#x}", loc.address).unwrap();
            }
            if self.detail == Detail::Full {
                write!(
                    out,
                    "<{system}|{}:{}|{}:{}>",
                    lk.string(f.filename_strindex),
                    f.start_line,
                    line.line,
                    line.column
                )
                .unwrap();
                if k + 1 == n {
                    self.location_details(out, loc);
                }
            }
        }
        if n == 0 {
            if !out.is_empty() {
                out.push(';');
            }
            write!(out, "{:#x}", loc.address).unwrap();
            if self.detail == Detail::Full {
                self.location_details(out, loc);
            }
        }
    }

    /// Address, mapping and attributes of a location ([`Detail::Full`]).
    fn location_details(&mut self, out: &mut String, loc: &Location) {
        let m = self.lookup.mapping(loc.mapping_index);
        write!(
            out,
            "@{:#x}({}[{:#x}-{:#x}+{:#x}]",
            loc.address,
            self.lookup.string(m.filename_strindex),
            m.memory_start,
            m.memory_limit,
            m.file_offset
        )
        .unwrap();
        let mapping_attrs = self.attribute_list(&m.attribute_indices);
        let location_attrs = self.attribute_list(&loc.attribute_indices);
        write!(out, "{{{}}}{{{}}})", mapping_attrs.join(","), location_attrs.join(",")).unwrap();
    }

    /// `key=value` (with ` (unit)` when set) per attribute index, sorted.
    fn attribute_list(&mut self, indices: &[i32]) -> Vec<String> {
        let mut out: Vec<String> = indices
            .iter()
            .map(|&i| {
                self.attributes
                    .entry(i)
                    .or_insert_with(|| {
                        let a = self.lookup.attribute(i);
                        let mut s = format!("{}=", self.lookup.string(a.key_strindex));
                        write_opt_value(&mut s, a.value.as_ref(), &self.lookup);
                        let unit = self.lookup.string(a.unit_strindex);
                        if !unit.is_empty() {
                            write!(s, " ({unit})").unwrap();
                        }
                        s
                    })
                    .clone()
            })
            .collect();
        out.sort_unstable();
        out
    }

    fn key_values(&self, kvs: &[KeyValue]) -> Vec<String> {
        let mut out: Vec<String> = kvs.iter().map(|kv| key_value(kv, &self.lookup)).collect();
        out.sort_unstable();
        out
    }
}

fn key_value(kv: &KeyValue, lookup: &Lookup<'_>) -> String {
    let mut s = format!("{}=", lookup.key_of(kv));
    write_opt_value(&mut s, kv.value.as_ref(), lookup);
    s
}

fn write_opt_value(out: &mut String, v: Option<&AnyValue>, lookup: &Lookup<'_>) {
    match v {
        Some(v) => write_value(out, v, lookup),
        None => out.push_str("<empty>"),
    }
}

/// Renders an attribute value: strings as they are (references resolved),
/// ints, bools, doubles, bytes as hex, arrays `[a, b]`, kvlists `{k=v}`
/// sorted by key, an empty value as `<empty>`.
pub fn write_value(out: &mut String, v: &AnyValue, lookup: &Lookup<'_>) {
    match &v.value {
        None => out.push_str("<empty>"),
        Some(Value::StringValue(s)) => out.push_str(s),
        Some(Value::StringValueStrindex(i)) => out.push_str(lookup.string(*i)),
        Some(Value::BoolValue(b)) => write!(out, "{b}").unwrap(),
        Some(Value::IntValue(i)) => write!(out, "{i}").unwrap(),
        Some(Value::DoubleValue(d)) => write!(out, "{d:?}").unwrap(),
        Some(Value::BytesValue(b)) => out.push_str(&hex::encode(b)),
        Some(Value::ArrayValue(a)) => {
            out.push('[');
            for (k, x) in a.values.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                write_value(out, x, lookup);
            }
            out.push(']');
        }
        Some(Value::KvlistValue(kv)) => {
            let mut items: Vec<String> = kv.values.iter().map(|x| key_value(x, lookup)).collect();
            items.sort_unstable();
            write!(out, "{{{}}}", items.join(", ")).unwrap();
        }
    }
}

/// [`write_value`] into a new string.
pub fn format_value(v: &AnyValue, lookup: &Lookup<'_>) -> String {
    let mut s = String::new();
    write_value(&mut s, v, lookup);
    s
}

/// The total of samples in `p` (values summed, timestamps counted).
pub fn profile_total(p: &Profile) -> i64 {
    p.samples
        .iter()
        .map(|s: &Sample| sample_total(s))
        .fold(0, i64::wrapping_add)
}
