//! The unit of data that flows through a pipeline.

pub mod batch;
pub mod bounds;
pub mod dictionary;
pub mod footprint;
pub mod repair;
pub mod resolved;
#[cfg(any(test, feature = "testing"))]
pub mod synth;
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
