use crate::proto::{ProfilesData, ProfilesDictionary, ResourceProfiles};

use super::{mark_parts, Live, Remap};

/// A self-contained `ProfilesData` for `resources`, which refer to `dict`:
/// copies only the entries they use, re-indexed in their old order. Costs one
/// pass over `dict` besides the resources (so splitting into n parts costs n
/// passes; fine for the few resources a batch holds).
pub fn extract(dict: &ProfilesDictionary, resources: Vec<ResourceProfiles>) -> ProfilesData {
    let live = mark_parts(dict, &resources);
    extract_live(dict, resources, &live, &Remap::compacting(&live))
}

/// [`extract`] with the entries `resources` use already marked in `live`
/// and `remap` its compaction.
pub(super) fn extract_live(
    dict: &ProfilesDictionary,
    mut resources: Vec<ResourceProfiles>,
    live: &Live,
    remap: &Remap,
) -> ProfilesData {
    let mut out = ProfilesDictionary {
        string_table: copy_live(&dict.string_table, &live.strings),
        mapping_table: copy_live(&dict.mapping_table, &live.mappings),
        location_table: copy_live(&dict.location_table, &live.locations),
        function_table: copy_live(&dict.function_table, &live.functions),
        link_table: copy_live(&dict.link_table, &live.links),
        attribute_table: copy_live(&dict.attribute_table, &live.attributes),
        stack_table: copy_live(&dict.stack_table, &live.stacks),
    };
    remap.apply_to_dictionary(&mut out);
    remap.apply_to_resources(&mut resources);
    ProfilesData {
        resource_profiles: resources,
        dictionary: Some(out),
    }
}

/// One `ProfilesData` per resource, each with only the dictionary entries it
/// uses. [`super::merge_all`] puts them back together.
pub fn split_by_resource(data: ProfilesData) -> Vec<ProfilesData> {
    let dict = data.dictionary.unwrap_or_default();
    data.resource_profiles
        .into_iter()
        .map(|r| extract(&dict, vec![r]))
        .collect()
}

fn copy_live<T: Clone>(table: &[T], live: &[bool]) -> Vec<T> {
    table
        .iter()
        .zip(live)
        .filter(|(_, &keep)| keep)
        .map(|(v, _)| v.clone())
        .collect()
}
