//! The transaction a v1 profile belongs to: its metadata in the profile,
//! checked as Relay does, and the parts of the envelope's `transaction`
//! event the conversion reads.

use std::ops::RangeInclusive;

use serde::Deserialize;

use super::profile::ProfileV1;
use crate::de::{self, located, CowStr, Timestamp};
use crate::frame::ClientSdk;
use crate::{ids, ItemError, Reason};
use profcol_model::proto::Link;

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

/// The transaction a profile belongs to, checked as Relay does.
pub(crate) struct Transaction<'a> {
    /// As received, kept in `sentry.transaction`.
    pub raw: &'a str,
    pub meta: TransactionMeta<'a>,
    pub trace_id: [u8; 16],
}

impl<'a> Transaction<'a> {
    /// The profile's `transaction`, else the first of its `transactions`;
    /// refused without an id, a trace id, a name, or with start >= end.
    pub(crate) fn of(p: &ProfileV1<'a>) -> Result<Self, ItemError> {
        let raw = p
            .transaction
            .or_else(|| p.transactions.as_ref().and_then(|t| t.first().copied()))
            .ok_or_else(|| ItemError::new(Reason::NoTransaction, "profile names no transaction"))?
            .get();
        Self::parse(raw)
    }

    /// One transaction's metadata as sent; refused without an id, a trace
    /// id, a name, or with start >= end.
    pub(crate) fn parse(raw: &'a str) -> Result<Self, ItemError> {
        let meta: TransactionMeta = serde_json::from_str(raw).map_err(|e| {
            ItemError::new(
                Reason::InvalidTransactionMetadata,
                format!(
                    "transaction metadata: {}",
                    located::<TransactionMeta>(raw.as_bytes(), e)
                ),
            )
        })?;
        let trace_id = meta.trace_id.as_deref().and_then(ids::parse_uuid);
        let valid = meta.id.as_deref().and_then(ids::parse_uuid).is_some()
            && meta.name.as_deref().is_some_and(|n| !n.is_empty())
            && (meta.relative_end_ns == 0 || meta.relative_start_ns < meta.relative_end_ns);
        match trace_id {
            Some(trace_id) if valid => Ok(Self {
                raw,
                meta,
                trace_id,
            }),
            _ => Err(ItemError::new(
                Reason::InvalidTransactionMetadata,
                "transaction metadata needs an id, a trace_id, a name and start < end",
            )),
        }
    }

    /// The Link of every sample: the trace, and the span the transaction
    /// event names, if it does.
    pub(crate) fn link(&self, event: &TransactionEvent) -> Link {
        link(self.trace_id, event)
    }

    /// Sample times (since the profile start) within the transaction;
    /// `None`: all.
    pub(crate) fn window(&self) -> Option<RangeInclusive<u64>> {
        let m = &self.meta;
        (m.relative_end_ns > 0).then_some(m.relative_start_ns..=m.relative_end_ns)
    }
}

/// The Link to trace `trace_id`, and to the span the transaction event
/// names, if it does.
pub(crate) fn link(trace_id: [u8; 16], event: &TransactionEvent) -> Link {
    let span_id = event
        .contexts
        .as_ref()
        .and_then(|c| c.trace.as_ref())
        .and_then(|t| t.span_id.as_deref())
        .and_then(ids::parse_hex::<8>);
    Link {
        trace_id: trace_id.to_vec(),
        span_id: span_id.map(|s| s.to_vec()).unwrap_or_default(),
    }
}
