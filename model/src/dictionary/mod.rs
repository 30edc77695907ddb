//! The `ProfilesDictionary`: hash-consed tables, building, remapping, merging
//! and garbage collection. Every table keeps its zero value at index 0.
//!
//! Anything that splits, merges or drops part of a batch re-indexes through
//! this module; nothing here scans a table linearly to find a value.
//!
//! - [`gc`]: drop unreferenced entries (mark, then compact through a [`Remap`]).
//! - [`dedup`]: rebuild by value, dropping duplicates and orphans.
//! - [`merge`] / [`merge_all`] / [`Merger`]: concatenate batches, one dictionary.
//! - [`extract`] / [`split_by_resource`]: self-contained parts of a batch;
//!   [`subsets`]: the same parts encoded straight from the batch.
//! - [`resolve_references`]: `key_strindex` / `string_value_strindex` to plain.
//! - [`retain_samples`], [`retain_profiles`], [`remove_empty_profiles`]:
//!   sample work.
//! - [`Lookup`]: panic-free reads by index.

mod builder;
mod canonical;
mod dedup;
mod gc;
mod hashing;
mod interner;
mod lookup;
mod mark;
mod merge;
mod rebuild;
mod references;
mod remap;
mod samples;
mod split;
mod subset;
mod table;
pub mod visit;

pub use builder::DictionaryBuilder;
#[cfg(any(test, feature = "testing"))]
pub use dedup::dedup_rebuilding;
pub use dedup::{dedup, dedup_with};
pub use gc::{gc, gc_with, GcOptions, GcStats};
pub use hashing::{mix64, multiset_hash, DictHash};
pub use interner::Interner;
pub use lookup::Lookup;
pub use mark::{mark, mark_parts, Live, SampleMarks};
pub use merge::{merge, merge_all, Merger};
pub use references::resolve_references;
pub use remap::{retain_flagged, Remap, TableRemap};
pub use samples::{
    remove_empty_profiles, retain_profiles, retain_samples, sample_total, samples_identity,
    SampleIdentity, SampleShape,
};
pub use split::{extract, split_by_resource};
pub use subset::{subsets, Subset};
pub use table::{PerTable, Table};

pub(crate) use rebuild::intern_live;
