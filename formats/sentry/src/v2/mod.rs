//! The continuous-profiling `profile_chunk`, sample format v2 (Relay:
//! `relay-profiling/src/sample/v2.rs`), both ways.
//!
//! - [`chunk`]: the payload SDKs send, borrowed from the bytes;
//!   [`chunk_to_otlp`] turns it into OTLP.
//! - [`outgoing`]: the payload profcol sends; [`otlp_to_chunks`] makes it
//!   from OTLP, and [`relay_rules`] keeps what Relay would refuse out.

pub mod chunk;
pub mod from_otlp;
pub mod outgoing;
pub mod relay_rules;
mod to_otlp;

pub use from_otlp::{otlp_to_chunks, ChunkResult, Dropped, ExportOptions};
pub use to_otlp::{
    chunk_item_to_otlp, chunk_to_otlp, chunk_to_otlp_in_envelope, perfetto_chunk_to_otlp,
};
