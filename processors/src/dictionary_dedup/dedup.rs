//! The dictionary rebuild: references resolved, tables rebuilt by value
//! bottom up (via `model::dictionary::dedup_with`), samples merged.

use profcol_model::dictionary::{dedup_with, resolve_references, PerTable};
use profcol_model::proto::{ProfilesData, ProfilesDictionary, ZeroEntry};
use profcol_model::{profiles_mut, ProfileBatch};

use super::DictionaryDedupConfig;
use crate::merge::{SampleMerger, Tables};

/// What one rebuild did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Encoded size of the batch before and after, when measured.
    pub bytes: Option<(u64, u64)>,
    /// Table sizes before and after.
    pub entries_before: PerTable,
    pub entries_after: PerTable,
    /// `Sample` messages folded into others (observations are kept).
    pub samples_merged: u64,
    pub references_resolved: u64,
    /// False when the data came out exactly as it went in.
    pub changed: bool,
}

impl Outcome {
    pub fn entries_removed(&self) -> u64 {
        self.entries_before.minus(&self.entries_after).total() as u64
    }
}

/// Rebuilds `data` in place; see the module docs. Does not compute sizes.
pub fn dedup_data(data: &mut ProfilesData, cfg: &DictionaryDedupConfig) -> Outcome {
    dedup_data_with(data, cfg, &mut SampleMerger::default())
}

/// [`dedup_data`] with the merge's buffers kept by the caller.
pub(crate) fn dedup_data_with(
    data: &mut ProfilesData,
    cfg: &DictionaryDedupConfig,
    merger: &mut SampleMerger,
) -> Outcome {
    let mut out = Outcome::default();
    let canonical = data.dictionary.as_ref().is_none_or(zero_values_first);
    if cfg.resolve_references {
        out.references_resolved = resolve_references(data) as u64;
    }
    let stats = dedup_with(data, cfg.gc);
    out.entries_before = stats.before;
    out.entries_after = stats.after;
    if cfg.merge_samples {
        // After the rebuild, equal entries share one index: samples of one
        // identity have equal indices, and no attribute is rewritten.
        let tables = Tables::of(data.dictionary.as_ref());
        for p in profiles_mut(&mut data.resource_profiles) {
            out.samples_merged += merger.merge(p, tables, &[], None) as u64;
        }
    }
    // Rebuilding keeps every entry at its index exactly when no table lost an
    // entry and each started with its zero value (else the builder's own
    // zero value shifted them).
    out.changed = !canonical
        || stats.before != stats.after
        || out.samples_merged > 0
        || out.references_resolved > 0;
    out
}

/// Rebuilds the data of `batch`, keeping the received encoding when nothing
/// changed, and measures the encoded size before and after.
pub fn dedup_batch(batch: &mut ProfileBatch, cfg: &DictionaryDedupConfig) -> Outcome {
    dedup_batch_with(batch, cfg, &mut SampleMerger::default(), true)
}

/// [`dedup_batch`] with the merge's buffers kept by the caller, measuring
/// the sizes only if asked.
pub(crate) fn dedup_batch_with(
    batch: &mut ProfileBatch,
    cfg: &DictionaryDedupConfig,
    merger: &mut SampleMerger,
    measure: bool,
) -> Outcome {
    let bytes_before = measure.then(|| batch.encoded_len() as u64);
    let received = batch.encoded().cloned();
    let meta = std::mem::take(&mut batch.meta);
    let mut data = std::mem::take(batch.data_mut());
    let mut out = dedup_data_with(&mut data, cfg, merger);
    *batch = match received {
        Some(bytes) if !out.changed => ProfileBatch::from_encoded(data, bytes),
        _ => ProfileBatch::new(data),
    }
    .with_meta(meta);
    out.bytes = bytes_before.map(|before| {
        let after = if out.changed {
            batch.encoded_len() as u64
        } else {
            before
        };
        (before, after)
    });
    out
}

fn zero_values_first(d: &ProfilesDictionary) -> bool {
    fn ok<T: ZeroEntry>(t: &[T]) -> bool {
        t.first().is_none_or(ZeroEntry::is_zero)
    }
    ok(&d.string_table)
        && ok(&d.mapping_table)
        && ok(&d.location_table)
        && ok(&d.function_table)
        && ok(&d.link_table)
        && ok(&d.attribute_table)
        && ok(&d.stack_table)
}
