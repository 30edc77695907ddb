//! The dictionary garbage collection that ends a pass: the result of
//! [`profcol_pipeline::model::dictionary::gc`] (same entries, same order,
//! same indices), for less. A pass mostly orphans a few attribute entries
//! (the thread names it renamed), yet the full collection rebuilds every
//! table and rewrites every index of every sample. Here:
//! - the samples of profiles that went through [`super::merge`] are not
//!   visited to mark what they use: the merge marked it ([`Marks`]) while it
//!   had them at hand;
//! - only the tables that lost entries are compacted, and only the
//!   references into them rewritten.

use profcol_pipeline::model::dictionary::{visit, Live, PerTable, Remap, Table, TableRemap};
use profcol_pipeline::proto::{ProfilesData, ProfilesDictionary, ResourceProfiles, Sample};

/// What some samples refer to: one flag per entry of the stack, link and
/// attribute tables.
#[derive(Default)]
pub(crate) struct Marks {
    stacks: Vec<bool>,
    links: Vec<bool>,
    attributes: Vec<bool>,
    /// References past the tables as they were sized (invalid data only):
    /// the attribute table may have grown to them by the collection.
    beyond: Vec<(Table, i32)>,
}

impl Marks {
    /// No marks, for tables of these sizes.
    pub fn reset(&mut self, stacks: usize, links: usize, attributes: usize) {
        for (v, n) in [
            (&mut self.stacks, stacks),
            (&mut self.links, links),
            (&mut self.attributes, attributes),
        ] {
            v.clear();
            v.resize(n, false);
        }
        self.beyond.clear();
    }

    #[inline]
    pub fn sample(&mut self, s: &Sample) {
        let beyond = &mut self.beyond;
        note(&mut self.stacks, Table::Stack, s.stack_index, beyond);
        note(&mut self.links, Table::Link, s.link_index, beyond);
        for &a in &s.attribute_indices {
            note(&mut self.attributes, Table::Attribute, a, beyond);
        }
    }
}

#[inline]
fn note(flags: &mut [bool], t: Table, i: i32, beyond: &mut Vec<(Table, i32)>) {
    let Ok(at) = usize::try_from(i) else {
        // Marks nothing, as in `gc`.
        return;
    };
    match flags.get_mut(at) {
        Some(f) => *f = true,
        None => beyond.push((t, i)),
    }
}

#[inline]
fn set(flags: &mut [bool], i: i32) {
    if let Some(f) = usize::try_from(i).ok().and_then(|i| flags.get_mut(i)) {
        *f = true;
    }
}

/// Removes the dictionary entries nothing refers to, as `gc` does.
/// `marked[k]` says whether the samples of the `k`-th profile (in order)
/// are in `marks` instead of to be visited.
pub(crate) fn gc(data: &mut ProfilesData, marks: &Marks, marked: &[bool]) {
    let Some(dict) = data.dictionary.as_mut() else {
        return;
    };
    let live = mark(dict, &data.resource_profiles, marks, marked);
    let remap = |keep: &[bool]| {
        if keep.iter().all(|&k| k) {
            TableRemap::identity()
        } else {
            TableRemap::compacting(keep)
        }
    };
    let remap = Remap {
        strings: remap(&live.strings),
        mappings: remap(&live.mappings),
        locations: remap(&live.locations),
        functions: remap(&live.functions),
        links: remap(&live.links),
        attributes: remap(&live.attributes),
        stacks: remap(&live.stacks),
    };
    if remap.is_identity() {
        return;
    }
    retain_live(&mut dict.string_table, &live.strings, &remap.strings);
    retain_live(&mut dict.mapping_table, &live.mappings, &remap.mappings);
    retain_live(&mut dict.location_table, &live.locations, &remap.locations);
    retain_live(&mut dict.function_table, &live.functions, &remap.functions);
    retain_live(&mut dict.link_table, &live.links, &remap.links);
    retain_live(
        &mut dict.attribute_table,
        &live.attributes,
        &remap.attributes,
    );
    retain_live(&mut dict.stack_table, &live.stacks, &remap.stacks);
    remap.apply_to_dictionary(dict);
    remap_resources(&remap, &mut data.resource_profiles);
}

/// `model::dictionary::mark_parts`, taking the marked profiles' samples
/// from `marks`.
fn mark(
    dict: &ProfilesDictionary,
    resources: &[ResourceProfiles],
    marks: &Marks,
    marked: &[bool],
) -> Live {
    let lens = PerTable::lens(dict);
    let flags = |n: usize| {
        let mut v = vec![false; n];
        if let Some(z) = v.first_mut() {
            *z = true;
        }
        v
    };
    let mut live = Live {
        strings: flags(lens.strings),
        mappings: flags(lens.mappings),
        locations: flags(lens.locations),
        functions: flags(lens.functions),
        links: flags(lens.links),
        attributes: flags(lens.attributes),
        stacks: flags(lens.stacks),
    };
    let mut marked = marked.iter();
    {
        let live = &mut live;
        let mut f = |t: Table, &i: &i32| match t {
            Table::String => set(&mut live.strings, i),
            Table::Mapping => set(&mut live.mappings, i),
            Table::Location => set(&mut live.locations, i),
            Table::Function => set(&mut live.functions, i),
            Table::Link => set(&mut live.links, i),
            Table::Attribute => set(&mut live.attributes, i),
            Table::Stack => set(&mut live.stacks, i),
        };
        // As `visit::resources`.
        for rp in resources {
            if let Some(r) = &rp.resource {
                visit::key_values(&r.attributes, &mut f);
            }
            for sp in &rp.scope_profiles {
                if let Some(s) = &sp.scope {
                    visit::key_values(&s.attributes, &mut f);
                }
                for p in &sp.profiles {
                    for vt in [&p.sample_type, &p.period_type].into_iter().flatten() {
                        f(Table::String, &vt.type_strindex);
                        f(Table::String, &vt.unit_strindex);
                    }
                    for a in &p.attribute_indices {
                        f(Table::Attribute, a);
                    }
                    if marked.next().copied().unwrap_or(false) {
                        continue;
                    }
                    for s in &p.samples {
                        f(Table::Stack, &s.stack_index);
                        for a in &s.attribute_indices {
                            f(Table::Attribute, a);
                        }
                        f(Table::Link, &s.link_index);
                    }
                }
            }
        }
    }
    for (to, from) in [
        (&mut live.stacks, &marks.stacks),
        (&mut live.links, &marks.links),
        (&mut live.attributes, &marks.attributes),
    ] {
        for (t, &m) in to.iter_mut().zip(from) {
            *t |= m;
        }
    }
    for &(t, i) in &marks.beyond {
        match t {
            Table::Stack => set(&mut live.stacks, i),
            Table::Link => set(&mut live.links, i),
            _ => set(&mut live.attributes, i),
        }
    }
    // The dictionary's own references, top down, as `mark_parts`.
    for (s, _) in dict
        .stack_table
        .iter()
        .zip(&live.stacks)
        .filter(|(_, &l)| l)
    {
        for &l in &s.location_indices {
            set(&mut live.locations, l);
        }
    }
    for (l, _) in dict
        .location_table
        .iter()
        .zip(&live.locations)
        .filter(|(_, &l)| l)
    {
        set(&mut live.mappings, l.mapping_index);
        for line in &l.lines {
            set(&mut live.functions, line.function_index);
        }
        for &a in &l.attribute_indices {
            set(&mut live.attributes, a);
        }
    }
    for (m, _) in dict
        .mapping_table
        .iter()
        .zip(&live.mappings)
        .filter(|(_, &l)| l)
    {
        set(&mut live.strings, m.filename_strindex);
        for &a in &m.attribute_indices {
            set(&mut live.attributes, a);
        }
    }
    for (x, _) in dict
        .function_table
        .iter()
        .zip(&live.functions)
        .filter(|(_, &l)| l)
    {
        set(&mut live.strings, x.name_strindex);
        set(&mut live.strings, x.system_name_strindex);
        set(&mut live.strings, x.filename_strindex);
    }
    let strings = &mut live.strings;
    for (a, _) in dict
        .attribute_table
        .iter()
        .zip(&live.attributes)
        .filter(|(_, &l)| l)
    {
        visit::attribute(a, &mut |_, &i| set(strings, i));
    }
    live
}

fn retain_live<T>(table: &mut Vec<T>, live: &[bool], remap: &TableRemap) {
    if remap.is_identity() {
        return;
    }
    let mut i = 0;
    table.retain(|_| {
        i += 1;
        live[i - 1]
    });
}

/// [`Remap::apply_to_resources`], visiting only the fields whose table
/// changed.
fn remap_resources(remap: &Remap, resources: &mut [ResourceProfiles]) {
    let strings = !remap.strings.is_identity();
    let attributes = !remap.attributes.is_identity();
    let (stacks, links) = (!remap.stacks.is_identity(), !remap.links.is_identity());
    let f = &mut |t: Table, i: &mut i32| *i = remap.map(t, *i);
    for rp in resources {
        if strings {
            if let Some(r) = &mut rp.resource {
                visit::key_values_mut(&mut r.attributes, f);
            }
        }
        for sp in &mut rp.scope_profiles {
            if strings {
                if let Some(s) = &mut sp.scope {
                    visit::key_values_mut(&mut s.attributes, f);
                }
            }
            for p in &mut sp.profiles {
                if strings {
                    for vt in [&mut p.sample_type, &mut p.period_type]
                        .into_iter()
                        .flatten()
                    {
                        f(Table::String, &mut vt.type_strindex);
                        f(Table::String, &mut vt.unit_strindex);
                    }
                }
                if attributes {
                    for a in &mut p.attribute_indices {
                        *a = remap.attributes.get(*a);
                    }
                }
                if !(attributes || stacks || links) {
                    continue;
                }
                for s in &mut p.samples {
                    if stacks {
                        s.stack_index = remap.stacks.get(s.stack_index);
                    }
                    if attributes {
                        for a in &mut s.attribute_indices {
                            *a = remap.attributes.get(*a);
                        }
                    }
                    if links {
                        s.link_index = remap.links.get(s.link_index);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use profcol_pipeline::proto::{
        any_value::Value, AnyValue, Function, InstrumentationScope, KeyValue, KeyValueAndUnit,
        Line, Link, Location, Mapping, Profile, ProfilesDictionary, Resource, ScopeProfiles, Stack,
        ValueType,
    };

    use super::*;

    /// Any index into a table of `n` entries, or (rarely) past it or negative.
    fn index(n: usize) -> impl Strategy<Value = i32> + Clone {
        prop_oneof![
            20 => 0..n.max(1) as i32,
            1 => (n as i32)..(n as i32 + 4),
            1 => -2..0i32,
        ]
    }

    fn indices(n: usize, most: usize) -> impl Strategy<Value = Vec<i32>> + Clone {
        prop::collection::vec(index(n), 0..=most)
    }

    const N: usize = 8;

    /// Dictionaries of `N`-ish entries per table referring to each other at
    /// random, with orphans, duplicates and a few invalid indices; profiles
    /// using them.
    fn data() -> impl Strategy<Value = ProfilesData> {
        let string = |s: i32| -> AnyValue {
            AnyValue {
                value: Some(Value::StringValueStrindex(s)),
            }
        };
        let attribute =
            (index(N), index(N), any::<bool>()).prop_map(move |(k, u, strindex)| KeyValueAndUnit {
                key_strindex: k,
                value: Some(if strindex {
                    string(u)
                } else {
                    AnyValue {
                        value: Some(Value::StringValue("v".into())),
                    }
                }),
                unit_strindex: u,
            });
        let dictionary = (
            prop::collection::vec(attribute, 1..N),
            prop::collection::vec((index(N), indices(N, 2)), 1..N),
            prop::collection::vec(
                (
                    index(N),
                    prop::collection::vec(index(N), 0..3),
                    indices(N, 2),
                ),
                1..N,
            ),
            prop::collection::vec((index(N), index(N), index(N)), 1..N),
            prop::collection::vec(indices(N, 4), 1..N),
            1..N,
            1..N,
        )
            .prop_map(
                |(attributes, mappings, locations, functions, stacks, links, strings)| {
                    ProfilesDictionary {
                        mapping_table: mappings
                            .into_iter()
                            .map(|(f, a)| Mapping {
                                filename_strindex: f,
                                attribute_indices: a,
                                ..Default::default()
                            })
                            .collect(),
                        location_table: locations
                            .into_iter()
                            .map(|(m, lines, a)| Location {
                                mapping_index: m,
                                lines: lines
                                    .into_iter()
                                    .map(|f| Line {
                                        function_index: f,
                                        ..Default::default()
                                    })
                                    .collect(),
                                attribute_indices: a,
                                ..Default::default()
                            })
                            .collect(),
                        function_table: functions
                            .into_iter()
                            .map(|(n, s, f)| Function {
                                name_strindex: n,
                                system_name_strindex: s,
                                filename_strindex: f,
                                ..Default::default()
                            })
                            .collect(),
                        link_table: (0..links)
                            .map(|k| Link {
                                trace_id: vec![k as u8; 16],
                                span_id: vec![k as u8; 8],
                            })
                            .collect(),
                        string_table: (0..strings).map(|k| format!("s{k}")).collect(),
                        attribute_table: attributes,
                        stack_table: stacks
                            .into_iter()
                            .map(|l| Stack {
                                location_indices: l,
                            })
                            .collect(),
                    }
                },
            );
        let sample = (index(N), indices(N + 4, 3), index(N)).prop_map(|(st, a, l)| Sample {
            stack_index: st,
            attribute_indices: a,
            link_index: l,
            values: vec![1],
            ..Default::default()
        });
        let profile = (
            prop::collection::vec(sample, 0..6),
            indices(N + 4, 2),
            index(N),
        )
            .prop_map(|(samples, attribute_indices, t)| Profile {
                sample_type: Some(ValueType {
                    type_strindex: t,
                    unit_strindex: 0,
                }),
                samples,
                attribute_indices,
                ..Default::default()
            });
        let kv = index(N).prop_map(|s| KeyValue {
            key_strindex: s,
            value: Some(AnyValue {
                value: Some(Value::StringValueStrindex(s)),
            }),
            ..Default::default()
        });
        let resource = (
            prop::collection::vec(profile, 0..3),
            prop::collection::vec(kv.clone(), 0..2),
            prop::collection::vec(kv, 0..2),
        )
            .prop_map(|(profiles, r, sc)| ResourceProfiles {
                resource: Some(Resource {
                    attributes: r,
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: Some(InstrumentationScope {
                        attributes: sc,
                        ..Default::default()
                    }),
                    profiles,
                    ..Default::default()
                }],
                ..Default::default()
            });
        (dictionary, prop::collection::vec(resource, 0..3)).prop_map(|(d, resource_profiles)| {
            ProfilesData {
                resource_profiles,
                dictionary: Some(d),
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The result is the full collection's, whichever profiles' samples
        /// come marked, with marks sized to tables smaller than the final
        /// ones (the attribute table grows during a pass).
        #[test]
        fn same_as_the_full_collection(
            data in data(),
            marked in prop::collection::vec(any::<bool>(), 0..8),
            shorter in 0..3usize,
        ) {
            let mut expected = data.clone();
            profcol_pipeline::model::dictionary::gc(&mut expected);

            let mut got = data;
            let d = got.dictionary.as_ref().unwrap();
            let mut marks = Marks::default();
            marks.reset(
                d.stack_table.len(),
                d.link_table.len(),
                d.attribute_table.len().saturating_sub(shorter),
            );
            let profiles: Vec<&Profile> = got
                .resource_profiles
                .iter()
                .flat_map(|r| &r.scope_profiles)
                .flat_map(|s| &s.profiles)
                .collect();
            let flags: Vec<bool> = (0..profiles.len())
                .map(|k| marked.get(k).copied().unwrap_or(false))
                .collect();
            for (p, _) in profiles.iter().zip(&flags).filter(|(_, &m)| m) {
                for s in &p.samples {
                    marks.sample(s);
                }
            }
            gc(&mut got, &marks, &flags);
            prop_assert_eq!(got, expected);
        }
    }
}
