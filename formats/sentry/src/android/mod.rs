//! Android profiles: the `profile_chunk`s of continuous profiling and the
//! legacy transaction `profile`s, both an ART method trace in
//! `sampled_profile` (Relay: `relay-profiling/src/android`).
//!
//! - [`trace`]: the trace <-> spans of one stack on one thread.
//! - [`receive`]: both payloads -> OTLP, a point per span with its wall
//!   nanoseconds.
//! - [`export`]: OTLP from an Android source -> Android chunks.

pub mod export;
pub mod receive;
#[cfg(any(test, feature = "testing"))]
pub mod synth;
pub mod trace;

pub use receive::{chunk_to_otlp, legacy_to_otlp, PLATFORM};
