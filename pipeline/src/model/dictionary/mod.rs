//! The `ProfilesDictionary`: hash-consed tables, building, remapping, merging
//! and garbage collection. Every table keeps its zero value at index 0.
//!
//! Anything that splits, merges or drops part of a batch re-indexes through
//! this module; nothing here scans a table linearly to find a value.

mod builder;
mod hashing;
mod interner;

pub use builder::DictionaryBuilder;
pub use hashing::DictHash;
pub use interner::Interner;
