use crate::proto::ProfilesData;

use super::{intern_live, mark_parts, DictionaryBuilder};

/// Merges any number of `ProfilesData` into one, interning each one's live
/// dictionary entries into a shared dictionary (dedup by value) and appending
/// its resources remapped. The first input keeps its dictionary layout, so
/// its resources are not rewritten. Linear in the total size.
pub struct Merger {
    builder: DictionaryBuilder,
    resource_profiles: Vec<crate::proto::ResourceProfiles>,
}

impl Default for Merger {
    fn default() -> Self {
        Self::new()
    }
}

impl Merger {
    pub fn new() -> Self {
        Self {
            builder: DictionaryBuilder::new(),
            resource_profiles: Vec::new(),
        }
    }

    /// Starts from `into`, whose indices stay valid (entries are only appended).
    pub fn from_data(into: ProfilesData) -> Self {
        Self {
            builder: DictionaryBuilder::from_dictionary(into.dictionary.unwrap_or_default()),
            resource_profiles: into.resource_profiles,
        }
    }

    /// Appends `other`'s resources, re-indexed into the merged dictionary.
    /// `other`'s unreferenced entries are not copied.
    pub fn push(&mut self, mut other: ProfilesData) {
        if other.resource_profiles.is_empty() {
            return;
        }
        if let Some(dict) = other.dictionary.take() {
            let live = mark_parts(&dict, &other.resource_profiles);
            let remap = intern_live(&mut self.builder, dict, &live);
            remap.apply_to_resources(&mut other.resource_profiles);
        }
        self.resource_profiles.append(&mut other.resource_profiles);
    }

    pub fn finish(self) -> ProfilesData {
        ProfilesData {
            resource_profiles: self.resource_profiles,
            dictionary: Some(self.builder.finish()),
        }
    }
}

/// Appends `other`'s resources to `into`, with `other`'s dictionary interned
/// into `into`'s. `into`'s existing indices do not change. Re-hashes `into`'s
/// dictionary on each call: to merge many batches use [`Merger`] or [`merge_all`].
pub fn merge(into: &mut ProfilesData, other: ProfilesData) {
    if other.resource_profiles.is_empty() {
        return;
    }
    let mut m = Merger::from_data(std::mem::take(into));
    m.push(other);
    *into = m.finish();
}

/// Merges all inputs, in order, into one `ProfilesData`.
pub fn merge_all(items: impl IntoIterator<Item = ProfilesData>) -> ProfilesData {
    let mut items = items.into_iter();
    let mut m = match items.next() {
        Some(first) => Merger::from_data(first),
        None => return ProfilesData::default(),
    };
    for item in items {
        m.push(item);
    }
    m.finish()
}
