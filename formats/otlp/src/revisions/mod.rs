//! OTLP profiles as written by earlier opentelemetry-proto revisions.
//!
//! `profiles/v1development` renumbers fields between releases, and
//! producers lag the Collector by months. profcol's model is v1.10.0
//! (v1.11.0 is the same on the wire); this module reads v1.7.0, v1.8.0 and
//! v1.9.0 into it ([`decode`]) and writes it back ([`encode_as`]). Each
//! revision is one module: its generated messages (`wire`, from the
//! descriptors in `proto/revisions/`) and its translation.
//!
//! # Bytes two revisions read differently
//!
//! prost refuses a known field of another wire type, so most requests fit
//! one revision only. Where several fit, [`decode`] takes the newest that
//! fits; these are the cases, each with a test:
//!
//! - v1.8.0/v1.9.0 samples without attributes or a link, timestamps only:
//!   v1.10.0 reads the same fields, with the same meaning.
//! - v1.9.0 samples without attributes, with values: v1.10.0 reads the
//!   values as attribute indices, and the samples as having neither values
//!   nor timestamps (or, with one timestamp and a value within the attribute
//!   table, as an attributed timestamp). The first fails validation, so
//!   v1.9.0 is taken; the second is a v1.10.0 request as far as the bytes
//!   can tell, and is read as one (the count of each sample stays right).
//! - v1.10.0 samples with as many attributes as timestamps and no values:
//!   v1.9.0 reads the attributes as values; the newest, v1.10.0, is taken.
//! - v1.8.0 profiles without `profile_id` and comments: v1.9.0 and v1.10.0
//!   decode them, but find a field they do not know (`Profile` 12,
//!   `attribute_indices`, or `ValueType` 3, `aggregation_temporality`),
//!   so v1.8.0 is taken. Without those either, the bytes mean the same in
//!   all three.
//! - v1.9.0/v1.10.0 profiles with a `profile_id`: v1.8.0 reads its 16
//!   bytes as comment string indices, which fail validation.
//! - A request without profiles reads the same in every revision.

mod detect;
mod shape;
pub mod v1_7;
pub mod v1_8;
pub mod v1_9;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use bytes::BufMut;
use prost::Message;
use serde::{Deserialize, Serialize};

use profcol_model::dictionary::resolve_references;
use profcol_model::proto::ProfilesData;

pub use detect::{decode, read_as, Decoded, Undecodable};
pub(crate) use shape::pool;

/// An opentelemetry-proto release, by the form of its profiles messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Revision {
    #[serde(rename = "v1.7.0")]
    V1_7_0,
    #[serde(rename = "v1.8.0")]
    V1_8_0,
    #[serde(rename = "v1.9.0")]
    V1_9_0,
    #[serde(rename = "v1.10.0")]
    V1_10_0,
}

impl Revision {
    /// profcol's model, the generated types of `opentelemetry-proto`.
    pub const CURRENT: Revision = Revision::V1_10_0;

    /// Newest first, the order [`decode`] tries them in.
    pub const ALL: [Revision; 4] = [
        Revision::V1_10_0,
        Revision::V1_9_0,
        Revision::V1_8_0,
        Revision::V1_7_0,
    ];

    /// The Profiles development version a client sends with requests in
    /// this form ([`crate::development_version`]): version 1 for v1.10.0;
    /// none for the earlier revisions, which are older than the mechanism,
    /// as are the servers that read them.
    pub fn development_version(self) -> Option<&'static str> {
        (self == Revision::CURRENT).then_some(crate::development_version::CURRENT)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V1_7_0 => "v1.7.0",
            Revision::V1_8_0 => "v1.8.0",
            Revision::V1_9_0 => "v1.9.0",
            Revision::V1_10_0 => "v1.10.0",
        }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Revision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Revision::ALL
            .into_iter()
            .find(|r| r.as_str() == s || &r.as_str()[1..] == s)
            .ok_or_else(|| {
                format!("unknown revision {s:?} (one of v1.7.0, v1.8.0, v1.9.0, v1.10.0)")
            })
    }
}

/// What an older revision could not hold, by [`encode_as`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Samples whose values per timestamp became their sum (v1.7.0 has one
    /// value per sample type, whatever the timestamps).
    pub summed_samples: u64,
    /// Attributes whose unit v1.7.0 could not keep: it has one unit per
    /// key, and another attribute with that key had another unit (or the
    /// key is empty).
    pub attribute_units: u64,
}

impl Lost {
    pub fn is_empty(&self) -> bool {
        *self == Lost::default()
    }

    /// Says (rate-limited) what a batch sent as `revision` lost, if anything.
    pub fn warn(&self, revision: Revision) {
        if !self.is_empty() {
            profcol_model::warn_limited!(
                proto_revision = %revision,
                summed_samples = self.summed_samples,
                attribute_units = self.attribute_units,
                "the peer's proto revision cannot hold all of the batch: values per timestamp sent as their sum, units of keys with several units dropped"
            );
        }
    }
}

/// Writes `data` as `revision` writes it. v1.10.0 is the data's own
/// encoding; an older revision gets a translated copy, with its string
/// references resolved (none of them has `key_strindex` or
/// `string_value_strindex`). Returns what the revision could not hold.
pub fn encode_as(
    data: &ProfilesData,
    revision: Revision,
    buf: &mut impl BufMut,
) -> Result<Lost, prost::EncodeError> {
    if revision == Revision::CURRENT {
        data.encode(buf)?;
        return Ok(Lost::default());
    }
    let mut data = data.clone();
    resolve_references(&mut data);
    match revision {
        Revision::V1_9_0 => v1_9::downgrade(data).encode(buf)?,
        Revision::V1_8_0 => v1_8::downgrade(data).encode(buf)?,
        Revision::V1_7_0 => {
            let (d, lost) = v1_7::downgrade(data);
            d.encode(buf)?;
            return Ok(lost);
        }
        Revision::V1_10_0 => unreachable!("handled above"),
    }
    Ok(Lost::default())
}
