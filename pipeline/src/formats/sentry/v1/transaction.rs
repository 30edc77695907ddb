//! The transaction a v1 profile belongs to: its metadata in the profile,
//! and the parts of the envelope's `transaction` event the conversion reads.

use serde::Deserialize;

use crate::formats::sentry::de::{self, CowStr, Timestamp};
use crate::formats::sentry::frame::ClientSdk;

/// Relay's `TransactionMetadata`.
#[derive(Debug, Deserialize)]
pub struct TransactionMeta<'a> {
    #[serde(borrow, default)]
    pub id: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub trace_id: Option<CowStr<'a>>,
    #[serde(default, deserialize_with = "de::u64_lenient")]
    pub relative_start_ns: u64,
    #[serde(default, deserialize_with = "de::u64_lenient")]
    pub relative_end_ns: u64,
}

/// The parts of the `transaction` event a profile needs.
#[derive(Debug, Default, Deserialize)]
pub struct TransactionEvent<'a> {
    #[serde(borrow, default)]
    pub event_id: Option<CowStr<'a>>,
    /// The transaction's name.
    #[serde(borrow, default)]
    pub transaction: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub release: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub dist: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub environment: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub sdk: Option<ClientSdk<'a>>,
    #[serde(default)]
    pub start_timestamp: Option<Timestamp>,
    #[serde(borrow, default)]
    pub contexts: Option<Contexts<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Contexts<'a> {
    #[serde(borrow, default)]
    pub trace: Option<TraceContext<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct TraceContext<'a> {
    #[serde(borrow, default)]
    pub trace_id: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    pub span_id: Option<CowStr<'a>>,
}
