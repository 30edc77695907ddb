//! The `labels` part the Pyroscope Java agent sends next to its JFR: the
//! labels of each context id that events carry (`contextId`), as ids into
//! a string table (`io.pyroscope.labels.pb.LabelsSnapshot`).

use std::collections::HashMap;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Context {
    #[prost(map = "int64, int64", tag = "1")]
    pub labels: HashMap<i64, i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelsSnapshot {
    #[prost(map = "int64, message", tag = "1")]
    pub contexts: HashMap<i64, Context>,
    #[prost(map = "int64, string", tag = "2")]
    pub strings: HashMap<i64, String>,
}

impl LabelsSnapshot {
    pub fn decode_bytes(b: &[u8]) -> Result<Self, crate::Error> {
        <Self as prost::Message>::decode(b)
            .map_err(|e| crate::Error::new(format!("the labels part is not a LabelsSnapshot: {e}")))
    }

    /// The labels of context `id`, sorted by key (a map has no order), as
    /// `(key, value)` strings; ids missing from the string table are
    /// skipped.
    pub fn context(&self, id: i64) -> Vec<(&str, &str)> {
        let Some(c) = self.contexts.get(&id) else {
            return Vec::new();
        };
        let mut out: Vec<(&str, &str)> = c
            .labels
            .iter()
            .filter_map(|(k, v)| {
                Some((self.strings.get(k)?.as_str(), self.strings.get(v)?.as_str()))
            })
            .collect();
        out.sort_unstable();
        out
    }
}
