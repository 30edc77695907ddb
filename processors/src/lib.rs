//! Processors: synchronous, deterministic transformations of a batch, each in
//! a folder named after its YAML type.

pub mod dictionary_dedup;
pub mod sampling;
pub mod thread_pruning;
pub mod unit_normalization;
