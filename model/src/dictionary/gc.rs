use crate::proto::ProfilesData;

use super::mark::mark_with;
use super::{retain_flagged, PerTable, Remap, SampleMarks, TableRemap};

/// Table sizes around a dictionary operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    pub before: PerTable,
    pub after: PerTable,
}

impl GcStats {
    pub fn removed(&self) -> PerTable {
        self.before.minus(&self.after)
    }

    pub fn removed_total(&self) -> usize {
        self.removed().total()
    }
}

/// What the caller of [`gc_with`] knows, to collect for less.
#[derive(Clone, Copy, Debug, Default)]
pub struct GcOptions<'a> {
    /// Profiles whose samples are already marked: `(marks, marked)`, where
    /// `marked[k]` says whether the samples of the `k`-th profile (in order)
    /// are in `marks` rather than to be visited.
    pub premarked: Option<(&'a SampleMarks, &'a [bool])>,
    /// When every stack stays, keep the location, mapping and function tables
    /// whole instead of walking every stack to find their orphans. For a pass
    /// that removed no stack, these orphans are ones its input already had
    /// (what `dictionary_dedup` is for); walking the stacks is most of a
    /// collection's cost.
    pub whole_below_live_stacks: bool,
}

/// Removes dictionary entries nothing refers to any more (after samples,
/// profiles or resources were dropped) and re-indexes the rest, keeping their
/// order and the zero values at index 0. Linear: one mark pass, one compaction
/// of the tables that lost entries. Duplicates stay; [`super::dedup`] removes
/// them too.
pub fn gc(data: &mut ProfilesData) -> GcStats {
    gc_with(data, &GcOptions::default())
}

/// [`gc`] as `opts` say.
pub fn gc_with(data: &mut ProfilesData, opts: &GcOptions<'_>) -> GcStats {
    let Some(dict) = data.dictionary.as_mut() else {
        return GcStats::default();
    };
    let before = PerTable::lens(dict);
    let live = mark_with(dict, &data.resource_profiles, opts);
    let remap = Remap::compacting(&live);
    if remap.is_identity() {
        return GcStats {
            before,
            after: before,
        };
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
    let after = PerTable::lens(dict);
    remap.apply_to_resources(&mut data.resource_profiles);
    GcStats { before, after }
}

fn retain_live<T>(table: &mut Vec<T>, live: &[bool], remap: &TableRemap) {
    if !remap.is_identity() {
        retain_flagged(table, live);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::dictionary::DictionaryBuilder;
    use crate::proto::{
        any_value::Value, AnyValue, Function, InstrumentationScope, KeyValue, KeyValueAndUnit,
        Line, Link, Location, Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles,
        Sample, ScopeProfiles, Stack, ValueType,
    };

    #[test]
    fn drops_what_removed_samples_used_and_keeps_order() {
        let mut b = DictionaryBuilder::new();
        let loc = |b: &mut DictionaryBuilder, name: &str| {
            let f = b.function_named(name, "", "", 0);
            b.location(Location {
                lines: vec![Line {
                    function_index: f,
                    line: 0,
                    column: 0,
                }],
                ..Default::default()
            })
        };
        let (gone, kept) = (loc(&mut b, "gone"), loc(&mut b, "kept"));
        let (s_gone, s_kept) = (b.stack(&[gone]), b.stack(&[kept]));
        let sample = |stack_index| Sample {
            stack_index,
            values: vec![1],
            ..Default::default()
        };
        let mut d = ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                scope_profiles: vec![ScopeProfiles {
                    profiles: vec![Profile {
                        samples: vec![sample(s_gone), sample(s_kept)],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(b.finish()),
        };
        assert_eq!(gc(&mut d).removed_total(), 0);
        d.resource_profiles[0].scope_profiles[0].profiles[0]
            .samples
            .remove(0);
        let stats = gc(&mut d);
        let removed = stats.removed();
        assert_eq!(
            (
                removed.stacks,
                removed.locations,
                removed.functions,
                removed.strings,
                removed.total()
            ),
            (1, 1, 1, 1, 4)
        );
        let dict = d.dictionary.as_ref().unwrap();
        assert_eq!(dict.string_table, vec!["".to_owned(), "kept".to_owned()]);
        assert_eq!(
            d.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index,
            1
        );
        assert_eq!(dict.stack_table[1].location_indices, vec![1]);
        assert_eq!(dict.location_table[1].lines[0].function_index, 1);
        assert_eq!(dict.function_table[1].name_strindex, 1);
        crate::validate(&d).unwrap();
    }

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

    /// `data` collected with the profiles `flags` says marked in advance,
    /// marks sized to tables `shorter` entries smaller than the final ones
    /// (a pass may grow the attribute table after marking).
    fn premarked(data: &ProfilesData, flags: &[bool], shorter: usize, whole: bool) -> ProfilesData {
        let mut got = data.clone();
        let d = got.dictionary.as_ref().unwrap();
        let mut marks = SampleMarks::default();
        marks.reset(
            d.stack_table.len(),
            d.link_table.len(),
            d.attribute_table.len().saturating_sub(shorter),
        );
        let profiles = crate::profiles(&got.resource_profiles);
        for (p, _) in profiles.zip(flags).filter(|(_, &m)| m) {
            p.samples.iter().for_each(|s| marks.sample(s));
        }
        let opts = GcOptions {
            premarked: Some((&marks, flags)),
            whole_below_live_stacks: whole,
        };
        gc_with(&mut got, &opts);
        got
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Premarked samples change nothing in the result, whichever
        /// profiles come marked.
        #[test]
        fn premarked_is_the_full_collection(
            data in data(),
            marked in prop::collection::vec(any::<bool>(), 0..8),
            shorter in 0..3usize,
        ) {
            let mut expected = data.clone();
            gc(&mut expected);
            prop_assert_eq!(premarked(&data, &marked, shorter, false), expected);
        }

        /// `whole_below_live_stacks` is the full collection, except that
        /// when no stack goes, the location, mapping and function tables
        /// stay whole; collecting its result fully gives the full result.
        #[test]
        fn whole_below_live_stacks_keeps_only_those_tables(
            data in data(),
            marked in prop::collection::vec(any::<bool>(), 0..8),
            shorter in 0..3usize,
        ) {
            let mut expected = data.clone();
            let removed = gc(&mut expected).removed();
            let got = premarked(&data, &marked, shorter, true);
            if removed.stacks > 0 || removed.locations + removed.mappings + removed.functions == 0 {
                prop_assert_eq!(got, expected);
            } else {
                let (before, after) = (data.dictionary.as_ref().unwrap(), got.dictionary.as_ref().unwrap());
                prop_assert_eq!(
                    (after.location_table.len(), after.mapping_table.len(), after.function_table.len()),
                    (before.location_table.len(), before.mapping_table.len(), before.function_table.len())
                );
                let mut again = got;
                gc(&mut again);
                prop_assert_eq!(again, expected);
            }
        }
    }
}
