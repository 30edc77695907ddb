//! Processors: synchronous, deterministic transformations of a batch, each in
//! a folder named after its YAML type; `merge` is the combining of samples of
//! one identity that `dictionary_dedup` and `thread_pruning` share.

// The prefetch hooks' unsafe code is a crate of its own (profcol-prefetch).
#![deny(unsafe_code)]

pub mod attraction;
pub mod attributes;
pub mod batch;
pub mod dictionary_dedup;
pub mod filter;
pub mod k8sattributes;
pub mod memory_limiter;
mod merge;
#[cfg(test)]
mod oracle;
pub mod probabilistic_sampler;
pub mod resource;
pub mod resourcedetection;
pub mod sampling;
pub mod symbolizer;
pub mod thread_pruning;
pub mod transform;
pub mod unit_normalization;

use profcol_model::proto::Sample;
use profcol_prefetch::prefetch_slice;

/// Fetches the blocks of a sample's vectors, for a pass that reads them or
/// drops the sample (see `profcol_prefetch`).
#[inline(always)]
pub(crate) fn prefetch_sample(s: &Sample) {
    prefetch_slice(&s.attribute_indices);
    prefetch_slice(&s.values);
    prefetch_slice(&s.timestamps_unix_nano);
}
