//! profcol's data model: the unit of data that flows through a pipeline
//! (`ProfileBatch`), the OTLP types it holds (`proto`), the dictionary with
//! its interner, merge, split and garbage collection, validation and the
//! wire check, and what a batch costs in memory (`footprint`, `memory`).
//! What processors need, without a network stack: no tonic, hyper, rustls
//! or axum.

// Unsafe code lives in the few modules that allow it, each saying why.
#![deny(unsafe_code)]

pub mod batch;
pub mod bounds;
pub mod codec;
pub mod compressed;
pub mod cpu;
pub mod dictionary;
pub mod footprint;
pub mod log_limit;
pub mod memory;
pub mod proto;
pub mod repair;
pub mod resolved;
pub mod snappy;
#[cfg(any(test, feature = "testing"))]
pub mod synth;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod validate;
pub mod wire_check;

pub use batch::{
    profile_sample_count, profiles, profiles_mut, sample_observations, BatchMeta, Origin,
    ProfileBatch,
};
pub use resolved::{folded, resolve, Detail, ResolvedProfile, ResolvedView};
pub use validate::{
    findings, invalid_profiles, tables_without_zero_value, validate, Findings, Problem, ProfileAt,
    ValidationError,
};
