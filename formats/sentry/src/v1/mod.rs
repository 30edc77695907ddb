//! The legacy transaction profile: the `profile` item, sample format v1
//! (Relay: `relay-profiling/src/sample/v1.rs`). Received only; profcol
//! sends v2 chunks.

pub mod profile;
mod to_otlp;
pub mod transaction;

pub use to_otlp::profile_v1_to_otlp;
