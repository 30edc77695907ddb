use serde::{Deserialize, Serialize};

/// `processors: dictionary_dedup:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DictionaryDedupConfig {
    /// Remove dictionary entries nothing refers to.
    pub gc: bool,
    /// Combine samples of a profile with the same stack, attributes and
    /// link by appending their values and timestamps.
    pub merge_samples: bool,
    /// Turn `key_strindex` / `string_value_strindex` attributes into plain
    /// ones (resource, scope and attribute-table values).
    pub resolve_references: bool,
}

impl Default for DictionaryDedupConfig {
    fn default() -> Self {
        Self {
            gc: true,
            merge_samples: true,
            resolve_references: true,
        }
    }
}
