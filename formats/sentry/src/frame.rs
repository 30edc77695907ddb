//! Sentry's frame and debug-image shapes, shared by the v1 and v2 formats
//! (Relay: `relay-profiling/src/sample/mod.rs`, `debug_image.rs`).

use serde::Deserialize;

use super::de::{self, CowStr};

/// One frame as SDKs send it. Field aliases follow Relay.
#[derive(Debug, Default, Deserialize)]
pub struct Frame<'a> {
    #[serde(borrow, default)]
    pub abs_path: Option<CowStr<'a>>,
    #[serde(alias = "column", default, deserialize_with = "de::opt_u64_lenient")]
    pub colno: Option<u64>,
    #[serde(alias = "file", borrow, default)]
    pub filename: Option<CowStr<'a>>,
    #[serde(alias = "name", borrow, default)]
    pub function: Option<CowStr<'a>>,
    #[serde(default, deserialize_with = "de::opt_bool_lenient")]
    pub in_app: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_addr")]
    pub instruction_addr: Option<u64>,
    #[serde(alias = "line", default, deserialize_with = "de::opt_u64_lenient")]
    pub lineno: Option<u64>,
    #[serde(borrow, default)]
    pub module: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub package: Option<CowStr<'a>>,
    /// Per-frame platform of hybrid profiles (a JS frame in a Cocoa profile).
    #[serde(borrow, default)]
    pub platform: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub raw_function: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub symbol: Option<CowStr<'a>>,
}

/// `thread_metadata` values.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ThreadMeta<'a> {
    #[serde(borrow, default)]
    pub name: Option<CowStr<'a>>,
    #[serde(default, deserialize_with = "de::opt_i64_lenient")]
    pub priority: Option<i64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct ClientSdk<'a> {
    #[serde(borrow, default)]
    pub name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub version: Option<CowStr<'a>>,
}

/// `debug_meta`: only what a Mapping needs; the whole object is also kept
/// verbatim as a profile attribute.
#[derive(Debug, Default, Deserialize)]
pub struct DebugMeta<'a> {
    #[serde(borrow, default)]
    pub images: Vec<DebugImage<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DebugImage<'a> {
    #[serde(rename = "type", borrow, default)]
    pub image_type: Option<CowStr<'a>>,
    #[serde(alias = "name", borrow, default)]
    pub code_file: Option<CowStr<'a>>,
    #[serde(alias = "id", borrow, default)]
    pub debug_id: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub code_id: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub debug_file: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub arch: Option<CowStr<'a>>,
    #[serde(alias = "build_id", borrow, default)]
    pub uuid: Option<CowStr<'a>>,
    #[serde(default, deserialize_with = "de::opt_addr")]
    pub image_addr: Option<u64>,
    #[serde(default, deserialize_with = "de::opt_addr")]
    pub image_vmaddr: Option<u64>,
    #[serde(default, deserialize_with = "de::opt_u64_lenient")]
    pub image_size: Option<u64>,
}
