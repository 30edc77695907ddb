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

/// A chunk with its `profile`; a Perfetto chunk's metadata has none
/// (`P = Option<IgnoredAny>`), its samples come in the trace after it.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
pub struct ProfileChunk<'a, P = ChunkData<'a>> {
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
    /// Present only in Android method-trace chunks (routed elsewhere).
    #[serde(default)]
    pub sampled_profile: Option<serde::de::IgnoredAny>,
    pub profile: P,
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

/// The `version` of a `profile_chunk`, as Relay routes on it
/// (`relay-profiling/src/profile_chunk.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChunkVersion {
    /// Absent, or none Relay knows.
    #[default]
    Unknown,
    V1,
    V2,
    /// An Android method trace, as newer Android SDKs label it.
    V2AndroidTrace,
}

impl ChunkVersion {
    /// A `version` read as a number (`"2"` or `2`).
    pub const fn from_number(n: u32) -> Self {
        match n {
            1 => Self::V1,
            2 => Self::V2,
            _ => Self::Unknown,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "none",
            Self::V1 => "1",
            Self::V2 => "2",
            Self::V2AndroidTrace => "2.android-trace",
        }
    }
}

impl<'de> Deserialize<'de> for ChunkVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<'a> {
            Num(u64),
            #[serde(borrow)]
            Str(CowStr<'a>),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Num(1) => Self::V1,
            Raw::Num(2) => Self::V2,
            Raw::Str(s) => match s.trim() {
                "1" => Self::V1,
                "2" => Self::V2,
                "2.android-trace" => Self::V2AndroidTrace,
                _ => Self::Unknown,
            },
            Raw::Num(_) => Self::Unknown,
        })
    }
}

/// What Relay reads first to route a JSON `profile_chunk`.
#[derive(Debug, Deserialize)]
pub struct ChunkRoute<'a> {
    #[serde(borrow)]
    pub platform: CowStr<'a>,
    #[serde(default)]
    pub version: ChunkVersion,
    /// Present only in Android method-trace chunks.
    #[serde(default)]
    pub sampled_profile: Option<serde::de::IgnoredAny>,
}
