use std::collections::HashMap;

use prost::Message;

use crate::proto::{ProfilesData, ResourceProfiles, ScopeProfiles};

use super::{intern_live, mark_parts, DictionaryBuilder};

/// Merges any number of `ProfilesData` into one, interning each one's live
/// dictionary entries into a shared dictionary (dedup by value) and appending
/// its resources remapped. The first input keeps its dictionary layout, so
/// its resources are not rewritten. Linear in the total size.
pub struct Merger {
    builder: DictionaryBuilder,
    resource_profiles: Vec<ResourceProfiles>,
    /// Set by [`Merger::grouping`]: where each distinct resource and scope
    /// already is, so that equal ones are merged.
    groups: Option<Groups>,
}

/// Resources by their identity (the encoded `Resource` and `schema_url`),
/// and per resource its scopes by theirs: hash lookups, so folding costs
/// one encoding of each (small) resource and scope, not a scan.
#[derive(Default)]
struct Groups {
    resources: HashMap<Vec<u8>, usize>,
    /// Per resource (by index), its scopes by identity.
    scopes: Vec<HashMap<Vec<u8>, usize>>,
}

fn identity<M: Message>(m: Option<&M>, schema_url: &str) -> Vec<u8> {
    let mut key = m.map(Message::encode_to_vec).unwrap_or_default();
    // A separator that no protobuf field tag starts with.
    key.push(0);
    key.extend_from_slice(schema_url.as_bytes());
    key
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
            groups: None,
        }
    }

    /// Starts from `into`, whose indices stay valid (entries are only appended).
    pub fn from_data(into: ProfilesData) -> Self {
        Self {
            builder: DictionaryBuilder::from_dictionary(into.dictionary.unwrap_or_default()),
            resource_profiles: into.resource_profiles,
            groups: None,
        }
    }

    /// Like [`Merger::from_data`], and from now on a resource equal to one
    /// already merged (same attributes in the same order, same
    /// `schema_url`) is merged into it, and so is a scope equal to one of
    /// that resource's: their profiles are appended, each kept as it is
    /// (what the `batch` processor does). `into`'s own equal resources are
    /// folded too.
    pub fn grouping(into: ProfilesData) -> Self {
        let mut m = Self {
            builder: DictionaryBuilder::from_dictionary(into.dictionary.unwrap_or_default()),
            resource_profiles: Vec::with_capacity(into.resource_profiles.len()),
            groups: Some(Groups::default()),
        };
        m.append(into.resource_profiles);
        m
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
        self.append(other.resource_profiles);
    }

    /// Appends resources already indexed into the merged dictionary,
    /// folding equal ones when grouping.
    fn append(&mut self, mut resources: Vec<ResourceProfiles>) {
        let Some(groups) = &mut self.groups else {
            self.resource_profiles.append(&mut resources);
            return;
        };
        for rp in resources {
            let key = identity(rp.resource.as_ref(), &rp.schema_url);
            let Some(&at) = groups.resources.get(&key) else {
                let at = self.resource_profiles.len();
                groups.resources.insert(key, at);
                let mut scopes = HashMap::with_capacity(rp.scope_profiles.len());
                let mut rp = rp;
                let mut kept: Vec<ScopeProfiles> = Vec::with_capacity(rp.scope_profiles.len());
                for sp in std::mem::take(&mut rp.scope_profiles) {
                    fold_scope(&mut kept, &mut scopes, sp);
                }
                rp.scope_profiles = kept;
                groups.scopes.push(scopes);
                self.resource_profiles.push(rp);
                continue;
            };
            let target = &mut self.resource_profiles[at];
            for sp in rp.scope_profiles {
                fold_scope(&mut target.scope_profiles, &mut groups.scopes[at], sp);
            }
        }
    }

    pub fn finish(self) -> ProfilesData {
        ProfilesData {
            resource_profiles: self.resource_profiles,
            dictionary: Some(self.builder.finish()),
        }
    }
}

/// Appends `sp` to `scopes`, or its profiles to an equal scope already there.
fn fold_scope(
    scopes: &mut Vec<ScopeProfiles>,
    index: &mut HashMap<Vec<u8>, usize>,
    mut sp: ScopeProfiles,
) {
    let key = identity(sp.scope.as_ref(), &sp.schema_url);
    match index.get(&key) {
        Some(&at) => scopes[at].profiles.append(&mut sp.profiles),
        None => {
            index.insert(key, scopes.len());
            scopes.push(sp);
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
