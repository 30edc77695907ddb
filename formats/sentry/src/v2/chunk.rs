//! The `profile_chunk` payload (sample format v2) as SDKs send it
//! (Relay: `relay-profiling/src/sample/v2.rs`). Borrowed from the item bytes.
//!
//! Stacks are lists of indices into `frames`, **leaf first**: checked
//! against Relay's fixtures and the Python and Node SDKs (the last frame of
//! every recorded stack is the thread's entry point, `Thread._bootstrap` /
//! `(root)`), the same order as OTLP `Stack.location_indices`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::de::{self, CowStr, ThreadId};
use crate::frame::{ClientSdk, Frame, ThreadMeta};

#[derive(Debug, Deserialize)]
pub struct ProfileChunk<'a> {
    #[serde(borrow)]
    pub chunk_id: CowStr<'a>,
    #[serde(borrow)]
    pub profiler_id: CowStr<'a>,
    #[serde(borrow)]
    pub platform: CowStr<'a>,
    #[serde(deserialize_with = "de::version")]
    pub version: u32,
    #[serde(borrow, default)]
    pub release: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub environment: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub client_sdk: Option<ClientSdk<'a>>,
    /// Kept verbatim; parsed separately for the mappings.
    #[serde(borrow, default)]
    pub debug_meta: Option<&'a RawValue>,
    /// Kept verbatim (units and timestamp conventions vary by SDK).
    #[serde(borrow, default)]
    pub measurements: Option<&'a RawValue>,
    #[serde(borrow)]
    pub profile: ChunkData<'a>,
}

#[derive(Debug, Deserialize)]
pub struct ChunkData<'a> {
    #[serde(borrow)]
    pub samples: Vec<ChunkSample<'a>>,
    pub stacks: Vec<Vec<usize>>,
    #[serde(borrow)]
    pub frames: Vec<Frame<'a>>,
    #[serde(borrow, default)]
    pub thread_metadata: Option<BTreeMap<CowStr<'a>, ThreadMeta<'a>>>,
}

#[derive(Debug, Deserialize)]
pub struct ChunkSample<'a> {
    /// Unix seconds.
    #[serde(deserialize_with = "de::f64_lenient")]
    pub timestamp: f64,
    #[serde(deserialize_with = "de::usize_lenient")]
    pub stack_id: usize,
    #[serde(borrow)]
    pub thread_id: ThreadId<'a>,
}

impl<'a> ProfileChunk<'a> {
    /// Parses a chunk payload (the typed parse the benchmark compares against).
    pub fn parse(payload: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(payload)
    }
}
