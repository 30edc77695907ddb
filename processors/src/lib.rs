//! Processors: synchronous, deterministic transformations of a batch, each in
//! a folder named after its YAML type; `merge` is the combining of samples of
//! one identity that `dictionary_dedup` and `thread_pruning` share.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod batch;
pub mod dictionary_dedup;
pub mod memory_limiter;
mod merge;
#[cfg(test)]
mod oracle;
pub mod probabilistic_sampler;
pub mod sampling;
pub mod thread_pruning;
pub mod unit_normalization;
