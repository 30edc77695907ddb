//! The unit of data that flows through a pipeline.

pub mod batch;
pub mod dictionary;
pub mod resolved;
pub mod validate;

pub use batch::{BatchMeta, Origin, ProfileBatch};
