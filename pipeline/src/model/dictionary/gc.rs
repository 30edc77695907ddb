use crate::proto::ProfilesData;

use super::{mark_parts, PerTable, Remap, TableRemap};

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

/// Removes dictionary entries nothing refers to any more (after samples,
/// profiles or resources were dropped) and re-indexes the rest, keeping their
/// order and the zero values at index 0. Linear: one mark pass, one compaction.
/// Duplicates stay; [`super::dedup`] removes them too.
pub fn gc(data: &mut ProfilesData) -> GcStats {
    let Some(dict) = data.dictionary.as_mut() else {
        return GcStats::default();
    };
    let before = PerTable::lens(dict);
    let live = mark_parts(dict, &data.resource_profiles);
    if live.all_live() {
        return GcStats {
            before,
            after: before,
        };
    }
    let remap = Remap {
        strings: TableRemap::compacting(&live.strings),
        mappings: TableRemap::compacting(&live.mappings),
        locations: TableRemap::compacting(&live.locations),
        functions: TableRemap::compacting(&live.functions),
        links: TableRemap::compacting(&live.links),
        attributes: TableRemap::compacting(&live.attributes),
        stacks: TableRemap::compacting(&live.stacks),
    };
    retain_live(&mut dict.string_table, &live.strings);
    retain_live(&mut dict.mapping_table, &live.mappings);
    retain_live(&mut dict.location_table, &live.locations);
    retain_live(&mut dict.function_table, &live.functions);
    retain_live(&mut dict.link_table, &live.links);
    retain_live(&mut dict.attribute_table, &live.attributes);
    retain_live(&mut dict.stack_table, &live.stacks);
    remap.apply_to_dictionary(dict);
    let after = PerTable::lens(dict);
    remap.apply_to_resources(&mut data.resource_profiles);
    GcStats { before, after }
}

fn retain_live<T>(table: &mut Vec<T>, live: &[bool]) {
    let mut i = 0;
    table.retain(|_| {
        i += 1;
        live[i - 1]
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dictionary::DictionaryBuilder;
    use crate::proto::{Line, Location, Profile, ResourceProfiles, Sample, ScopeProfiles};

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
        crate::model::validate(&d).unwrap();
    }
}
