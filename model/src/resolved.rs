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
    any_value::Value, AnyValue, KeyValue, Location, Mapping, Profile, ProfilesData, Sample,
    ValueType, ZeroEntry,
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

/// One profile's samples summed by stack, root first, frames named as in
/// [`folded`] (`main;run;work`, no attributes): what a flame graph draws.
pub struct ProfileStacks<'a> {
    pub resource: &'a crate::proto::ResourceProfiles,
    pub scope: Option<&'a crate::proto::InstrumentationScope>,
    pub profile: &'a Profile,
    pub lookup: Lookup<'a>,
    /// `(stack, total)`, each stack once; a stack's text is rendered once
    /// per `data` however many samples and profiles use it.
    pub stacks: Vec<(&'a str, i64)>,
}

/// Calls `each` with every profile of `data` and its samples summed by
/// stack. The work is a map insert per sample and a render per distinct
/// stack, no allocation per sample.
pub fn for_each_profile_stacks(data: &ProfilesData, mut each: impl FnMut(ProfileStacks<'_>)) {
    let mut r = Resolver {
        lookup: Lookup::of(data),
        detail: Detail::Names,
        stacks: HashMap::new(),
        attributes: HashMap::new(),
    };
    let mut totals: HashMap<i32, i64> = HashMap::new();
    for rp in &data.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                totals.clear();
                for s in &p.samples {
                    let t = totals.entry(s.stack_index).or_insert(0);
                    *t = t.wrapping_add(sample_total(s));
                }
                for &i in totals.keys() {
                    r.stack(i);
                }
                let stacks = totals
                    .iter()
                    .map(|(i, t)| (r.stacks[i].as_str(), *t))
                    .collect();
                each(ProfileStacks {
                    resource: rp,
                    scope: sp.scope.as_ref(),
                    profile: p,
                    lookup: r.lookup,
                    stacks,
                });
            }
        }
    }
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
    fn profile(
        &mut self,
        p: &Profile,
        resource: &[String],
        scope: &str,
        scope_attributes: &[String],
    ) -> ResolvedProfile {
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
            original_payload: (!p.original_payload_format.is_empty()
                || !p.original_payload.is_empty())
            .then(|| {
                format!(
                    "{}, {} bytes",
                    p.original_payload_format,
                    p.original_payload.len()
                )
            }),
            samples,
        }
    }

    /// An empty `ValueType` reads as an absent one: the Collector's pdata
    /// cannot tell them apart and sends the first for the second.
    fn value_type(&self, vt: Option<&ValueType>) -> String {
        match vt.filter(|vt| **vt != ValueType::default()) {
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
        if !link.is_zero() {
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
            let (name, system) = (
                lk.string(f.name_strindex),
                lk.string(f.system_name_strindex),
            );
            let file = lk.string(f.filename_strindex);
            if !name.is_empty() {
                out.push_str(name);
            } else if !system.is_empty() {
                out.push_str(system);
            } else if !file.is_empty() {
                // An anonymous function (JavaScript's): where it is.
                out.push_str(file);
                if line.line > 0 {
                    write!(out, ":{}", line.line).unwrap();
                }
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

    /// Address, mapping and attributes of a location ([`Detail::Full`]):
    /// `@0x1234 in /usr/lib/libc.so[0x1000-0x2000+0x0]{attrs}{attrs}`.
    fn location_details(&mut self, out: &mut String, loc: &Location) {
        write!(out, "@{:#x}", loc.address).unwrap();
        let m = self.lookup.mapping(loc.mapping_index);
        if *m != Mapping::default() {
            write!(
                out,
                " in {}[{:#x}-{:#x}+{:#x}]",
                self.lookup.string(m.filename_strindex),
                m.memory_start,
                m.memory_limit,
                m.file_offset
            )
            .unwrap();
            let attrs = self.attribute_list(&m.attribute_indices);
            if !attrs.is_empty() {
                write!(out, "{{{}}}", attrs.join(",")).unwrap();
            }
        }
        let attrs = self.attribute_list(&loc.attribute_indices);
        if !attrs.is_empty() {
            write!(out, " {{{}}}", attrs.join(",")).unwrap();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dictionary::DictionaryBuilder;
    use crate::proto::{
        ArrayValue, KeyValueAndUnit, KeyValueList, Line, Link, Resource, ResourceProfiles,
        ScopeProfiles,
    };

    fn line(function_index: i32) -> Line {
        Line {
            function_index,
            line: 0,
            column: 0,
        }
    }

    fn data(b: DictionaryBuilder, samples: Vec<Sample>) -> ProfilesData {
        let mut b = b;
        let (cpu, ns) = (b.string("cpu"), b.string("nanoseconds"));
        let vt = Some(ValueType {
            type_strindex: cpu,
            unit_strindex: ns,
        });
        ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![KeyValue {
                        key: "service.name".into(),
                        value: Some(AnyValue {
                            value: Some(Value::StringValue("api".into())),
                        }),
                        key_strindex: 0,
                    }],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    profiles: vec![Profile {
                        sample_type: vt,
                        period_type: vt,
                        period: 10,
                        samples,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                schema_url: String::new(),
            }],
            dictionary: Some(b.finish()),
        }
    }

    fn sample(
        stack_index: i32,
        attribute_indices: Vec<i32>,
        values: Vec<i64>,
        timestamps: Vec<u64>,
    ) -> Sample {
        Sample {
            stack_index,
            attribute_indices,
            link_index: 0,
            values,
            timestamps_unix_nano: timestamps,
        }
    }

    fn lines(d: &ProfilesData) -> Vec<(String, i64)> {
        folded(d)[0].samples.clone().into_iter().collect()
    }

    #[test]
    fn stacks_are_root_first_and_inlined_lines_expand_caller_first() {
        // The proto: lines[0] is the inlined callee (memcpy), the last entry
        // the caller it was inlined into (printf).
        let mut b = DictionaryBuilder::new();
        let memcpy = b.function_named("memcpy", "", "", 0);
        let printf = b.function_named("printf", "", "", 0);
        let main = b.function_named("main", "", "", 0);
        let inlined = b.location(Location {
            lines: vec![line(memcpy), line(printf)],
            ..Default::default()
        });
        let root = b.location(Location {
            lines: vec![line(main)],
            address: 1,
            ..Default::default()
        });
        let stack = b.stack(&[inlined, root]);
        let d = data(b, vec![sample(stack, vec![], vec![5], vec![])]);
        assert_eq!(lines(&d), vec![("main;printf;memcpy".to_owned(), 5)]);
    }

    #[test]
    fn frame_names_fall_back_to_system_name_then_file_then_address() {
        let mut b = DictionaryBuilder::new();
        let mangled = b.function_named("", "_ZN4core3fmt5writeE", "lib.rs", 3);
        let anonymous = b.function_named("", "", "app.js", 7);
        let unnamed = b.function_named("", "", "", 0);
        let l1 = b.location(Location {
            lines: vec![line(mangled)],
            address: 0x10,
            ..Default::default()
        });
        let l2 = b.location(Location {
            lines: vec![Line {
                line: 12,
                ..line(anonymous)
            }],
            address: 0x20,
            ..Default::default()
        });
        let l3 = b.location(Location {
            lines: vec![line(anonymous)],
            address: 0x30,
            ..Default::default()
        });
        let l4 = b.location(Location {
            lines: vec![line(unnamed)],
            address: 0x40,
            ..Default::default()
        });
        let l5 = b.location(Location {
            address: 0xabc,
            ..Default::default()
        });
        let stack = b.stack(&[l1, l2, l3, l4, l5]);
        let d = data(b, vec![sample(stack, vec![], vec![1], vec![])]);
        assert_eq!(
            lines(&d),
            vec![(
                "0xabc;0x40;app.js;app.js:12;_ZN4core3fmt5writeE".to_owned(),
                1
            )]
        );
    }

    #[test]
    fn equal_lines_are_summed_whatever_the_dictionary_layout() {
        let mut b = DictionaryBuilder::new();
        let f = b.function_named("work", "", "", 0);
        let loc = b.location(Location {
            lines: vec![line(f)],
            ..Default::default()
        });
        let stack = b.stack(&[loc]);
        let a = b.attribute_kv(
            "a",
            AnyValue {
                value: Some(Value::IntValue(1)),
            },
            "",
        );
        let z = b.attribute_kv(
            "z",
            AnyValue {
                value: Some(Value::BoolValue(true)),
            },
            "",
        );
        let mut dict_data = data(b, vec![]);
        // A duplicate of the stack and of attribute `a`, as producers may send.
        let dict = dict_data.dictionary.as_mut().unwrap();
        dict.stack_table
            .push(dict.stack_table[stack as usize].clone());
        dict.attribute_table
            .push(dict.attribute_table[a as usize].clone());
        let (stack2, a2) = (
            dict.stack_table.len() as i32 - 1,
            dict.attribute_table.len() as i32 - 1,
        );
        dict_data.resource_profiles[0].scope_profiles[0].profiles[0].samples = vec![
            sample(stack, vec![a, z], vec![2], vec![]),
            sample(stack2, vec![z, a2], vec![], vec![10, 20, 30]),
            sample(stack, vec![z, a], vec![4, 4], vec![1, 2]),
            sample(stack, vec![], vec![7], vec![]),
        ];
        assert_eq!(
            lines(&dict_data),
            vec![
                ("work".to_owned(), 7),
                ("work [a=1, z=true]".to_owned(), 2 + 3 + 8)
            ]
        );
    }

    #[test]
    fn attribute_values_render_generically() {
        let mut b = DictionaryBuilder::new();
        let s = b.string("referenced");
        let v = |value| AnyValue { value: Some(value) };
        let attrs = vec![
            b.attribute_kv("int", v(Value::IntValue(-3)), ""),
            b.attribute_kv("double", v(Value::DoubleValue(1.0)), ""),
            b.attribute_kv("bytes", v(Value::BytesValue(vec![0xde, 0xad])), ""),
            b.attribute_kv("ref", v(Value::StringValueStrindex(s)), ""),
            b.attribute_kv("size", v(Value::IntValue(128)), "bytes"),
            b.attribute_kv(
                "array",
                v(Value::ArrayValue(ArrayValue {
                    values: vec![
                        v(Value::StringValue("x".into())),
                        v(Value::BoolValue(false)),
                    ],
                })),
                "",
            ),
            b.attribute_kv(
                "kv",
                v(Value::KvlistValue(KeyValueList {
                    values: vec![
                        KeyValue {
                            key: "z".into(),
                            value: Some(v(Value::IntValue(1))),
                            key_strindex: 0,
                        },
                        KeyValue {
                            key: String::new(),
                            value: None,
                            key_strindex: s,
                        },
                    ],
                })),
                "",
            ),
            b.attribute(KeyValueAndUnit {
                key_strindex: s,
                value: None,
                unit_strindex: 0,
            }),
        ];
        let d = data(b, vec![sample(0, attrs, vec![1], vec![])]);
        assert_eq!(
            lines(&d)[0].0,
            "<empty stack> [array=[x, false], bytes=dead, double=1.0, int=-3, \
             kv={referenced=<empty>, z=1}, ref=referenced, referenced=<empty>, size=128 (bytes)]"
        );
    }

    #[test]
    fn text_has_a_header_and_shows_links() {
        let mut b = DictionaryBuilder::new();
        let f = b.function_named("main", "", "", 0);
        let loc = b.location(Location {
            lines: vec![line(f)],
            ..Default::default()
        });
        let stack = b.stack(&[loc]);
        let link = b.link(Link {
            trace_id: vec![0xab; 16],
            span_id: vec![0xcd; 8],
        });
        let mut d = data(b, vec![sample(stack, vec![], vec![3], vec![])]);
        d.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].link_index = link;
        let text = resolve(&d, Detail::Names).to_text();
        assert_eq!(
            text,
            format!(
                "profile sample_type=cpu/nanoseconds period_type=cpu/nanoseconds period=10\n  \
                 resource: service.name=api\n  main {{trace_id={} span_id={}}} 3\n",
                "ab".repeat(16),
                "cd".repeat(8)
            )
        );
    }
}
