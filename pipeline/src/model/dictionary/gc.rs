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
