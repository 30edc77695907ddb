//! The legacy transaction profile (`profile` item, sample format v1) as
//! SDKs send it (Relay: `relay-profiling/src/sample/v1.rs`). Borrowed from
//! the item bytes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::de::{self, CowStr, ThreadId, Timestamp, Version};
use crate::frame::{ClientSdk, Frame, ThreadMeta};

/// Only what tells a profile's format (Relay's `MinimalProfile`).
#[derive(Deserialize)]
pub(super) struct FormatOnly<'a> {
    #[serde(default)]
    pub version: Option<Version>,
    #[serde(borrow, default)]
    pub platform: Option<CowStr<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct ProfileV1<'a> {
    #[serde(default)]
    pub version: Option<Version>,
    #[serde(alias = "profile_id", borrow)]
    pub event_id: CowStr<'a>,
    #[serde(borrow)]
    pub platform: CowStr<'a>,
    /// Start of the profile; sample times are relative to it.
    #[serde(default)]
    pub timestamp: Option<Timestamp>,
    #[serde(borrow, default)]
    pub release: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub environment: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub dist: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub device: Option<Device<'a>>,
    #[serde(borrow, default)]
    pub os: Option<Os<'a>>,
    #[serde(borrow, default)]
    pub runtime: Option<Runtime<'a>>,
    #[serde(borrow, default)]
    pub client_sdk: Option<ClientSdk<'a>>,
    #[serde(borrow, default)]
    pub debug_meta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub measurements: Option<&'a RawValue>,
    /// Older SDKs send one `transaction`, newer ones a `transactions` list.
    #[serde(borrow, default)]
    pub transaction: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub transactions: Option<Vec<&'a RawValue>>,
    #[serde(borrow)]
    pub profile: SampleProfile<'a>,
}

#[derive(Debug, Deserialize)]
pub struct SampleProfile<'a> {
    #[serde(borrow)]
    pub samples: Vec<SampleV1<'a>>,
    pub stacks: Vec<Vec<usize>>,
    #[serde(borrow)]
    pub frames: Vec<Frame<'a>>,
    #[serde(borrow, default)]
    pub thread_metadata: Option<BTreeMap<CowStr<'a>, ThreadMeta<'a>>>,
    /// Cocoa only; kept verbatim.
    #[serde(borrow, default)]
    pub queue_metadata: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
pub struct SampleV1<'a> {
    #[serde(deserialize_with = "de::usize_lenient")]
    pub stack_id: usize,
    #[serde(borrow)]
    pub thread_id: ThreadId<'a>,
    #[serde(deserialize_with = "de::u64_lenient")]
    pub elapsed_since_start_ns: u64,
    #[serde(borrow, default)]
    pub queue_address: Option<CowStr<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Device<'a> {
    #[serde(borrow, default)]
    pub architecture: Option<CowStr<'a>>,
    #[serde(default, deserialize_with = "de::opt_bool_lenient")]
    pub is_emulator: Option<bool>,
    #[serde(borrow, default)]
    pub locale: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub manufacturer: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub model: Option<CowStr<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Os<'a> {
    #[serde(borrow, default)]
    pub name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub version: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub build_number: Option<CowStr<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Runtime<'a> {
    #[serde(borrow, default)]
    pub name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub version: Option<CowStr<'a>>,
}
