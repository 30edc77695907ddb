//! The `profile_chunk` profcol sends: owned, serializable in the exact shape
//! Relay's v2 parser reads (`relay-profiling/src/sample/v2.rs`).
//!
//! Samples name their thread by index into `thread_ids`, so a chunk of
//! 100k samples holds each thread id string once.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::time::unix_nanos_to_secs;

#[derive(Debug, Clone, Serialize)]
pub struct ProfileChunk {
    pub chunk_id: String,
    pub profiler_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debug_meta: Option<DebugMeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    pub platform: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    pub client_sdk: ClientSdk,
    /// `"2"`; `"2.android-trace"` for an Android method-trace chunk.
    pub version: &'static str,
    /// As received from an SDK (kept verbatim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurements: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "ChunkProfile::is_empty")]
    pub profile: ChunkProfile,
    /// An Android chunk's method trace, in place of `profile`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub android: Option<AndroidTrace>,
}

/// The fields of an Android chunk (Relay: `relay-profiling/src/android/chunk.rs`).
#[derive(Debug, Clone, Serialize)]
pub struct AndroidTrace {
    /// Base64 of the ART method trace.
    pub sampled_profile: String,
    pub duration_ns: u64,
    /// Start of the trace, in float seconds.
    pub timestamp: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// React Native's JavaScript profile, as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub js_profile: Option<Box<RawValue>>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ClientSdk {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DebugMeta {
    pub images: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Default)]
pub struct ChunkProfile {
    pub samples: Vec<ChunkSample>,
    /// Frame indices, leaf first.
    pub stacks: Vec<Vec<u32>>,
    pub frames: Vec<ChunkFrame>,
    /// Sentry thread ids; `ChunkSample::thread` indexes this.
    pub thread_ids: Vec<String>,
    pub thread_metadata: BTreeMap<String, ThreadMetadata>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSample {
    pub timestamp_unix_nano: u64,
    pub stack_id: u32,
    pub thread: u32,
    /// The first point of its OTLP sample: that OTLP sample counts as sent
    /// iff this point is sent (exact per-chunk accounting).
    pub home: bool,
}

/// A frame as Relay's `Frame` reads it. Line and column are `u32` there:
/// a bigger number would make the whole chunk invalid JSON to Relay, so
/// the types leave no room for one. Relay's `Frame` has no `package`; it is
/// sent for other readers and Relay drops it (see `module`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, Hash)]
pub struct ChunkFrame {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abs_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub colno: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_app: Option<bool>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_addr"
    )]
    pub instruction_addr: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineno: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// Relay's `ThreadMetadata`: `priority` is a `u32` there.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ThreadMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
}

fn serialize_addr<S: Serializer>(addr: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match addr {
        Some(a) => s.collect_str(&format_args!("{a:#x}")),
        None => s.serialize_none(),
    }
}

impl ProfileChunk {
    /// The JSON payload of the `profile_chunk` item.
    pub fn to_json(&self) -> Vec<u8> {
        // Keys are strings and floats are finite: serialization cannot fail.
        serde_json::to_vec(self).expect("profile chunk serializes")
    }

    /// Seconds between the first and last sample, as Relay computes them
    /// from the serialized timestamps.
    pub fn duration_secs(&self) -> f64 {
        let ts = self.profile.samples.iter().map(|s| s.timestamp_unix_nano);
        match (ts.clone().min(), ts.max()) {
            (Some(a), Some(b)) => unix_nanos_to_secs(b) - unix_nanos_to_secs(a),
            _ => 0.0,
        }
    }
}

impl ChunkProfile {
    /// Whether the profile holds nothing (an Android chunk's).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.stacks.is_empty() && self.frames.is_empty()
    }
}

impl Serialize for ChunkProfile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Samples<'p>(&'p ChunkProfile);
        struct One<'p>(&'p ChunkSample, &'p str);
        impl Serialize for One<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("timestamp", &unix_nanos_to_secs(self.0.timestamp_unix_nano))?;
                m.serialize_entry("stack_id", &self.0.stack_id)?;
                m.serialize_entry("thread_id", self.1)?;
                m.end()
            }
        }
        impl Serialize for Samples<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let p = self.0;
                let mut seq = s.serialize_seq(Some(p.samples.len()))?;
                for sample in &p.samples {
                    let thread = p
                        .thread_ids
                        .get(sample.thread as usize)
                        .map_or("0", String::as_str);
                    seq.serialize_element(&One(sample, thread))?;
                }
                seq.end()
            }
        }
        let n = if self.thread_metadata.is_empty() {
            3
        } else {
            4
        };
        let mut m = s.serialize_map(Some(n))?;
        m.serialize_entry("samples", &Samples(self))?;
        m.serialize_entry("stacks", &self.stacks)?;
        m.serialize_entry("frames", &self.frames)?;
        if !self.thread_metadata.is_empty() {
            m.serialize_entry("thread_metadata", &self.thread_metadata)?;
        }
        m.end()
    }
}
