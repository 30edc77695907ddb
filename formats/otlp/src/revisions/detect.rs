//! Which revision a request was written with, decided from its bytes.
//!
//! The revisions are tried newest first. A revision fits when its walk
//! finds no field of another wire type and none it does not know (see
//! [`super::shape`]), prost decodes the bytes, the translation to v1.10.0
//! succeeds and the result is valid, but for real entries at index 0 of a
//! table (every v1.7.0 producer, and some later ones, write those; they
//! are repaired or refused after detection). The first that fits wins, so
//! when several fit the newest does. When none fits, the newest whose
//! result is consistent but for unknown fields wins (a sender on a newer
//! revision than profcol knows), else the newest that decodes at all, and
//! validation says what is wrong with it.
//!
//! v1.10.0 comes first and costs a walk that does not enter samples, one
//! decode and one validation; the older ones are tried only when it does
//! not fit, and the walk rules most of them out before they are decoded.

use bytes::Bytes;
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::{findings, Findings};

use super::{shape, v1_7, v1_8, v1_9, Revision};

/// A request read as the revision that fits it, in v1.10.0's form.
#[derive(Debug)]
pub struct Decoded {
    pub data: ProfilesData,
    pub revision: Revision,
    /// What validation found in `data` (for v1.10.0 bytes, the same data:
    /// no need to validate again).
    pub findings: Findings,
    /// Fields of the profiles messages that `revision` does not know.
    pub unknown_fields: usize,
}

impl Decoded {
    /// Fits its revision (see the module docs).
    pub fn fits(&self) -> bool {
        self.findings.consistent() && self.unknown_fields == 0
    }

    /// Of two readings that do not fit, tried newest first, whether `later`
    /// is the better: consistent where this one is not.
    pub fn prefers(&self, later: &Decoded) -> bool {
        !self.findings.consistent() && later.findings.consistent()
    }
}

/// No revision decodes the bytes: why, per revision, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable(pub Vec<(Revision, String)>);

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (k, (r, e)) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str("; ")?;
            }
            write!(f, "as {r}: {e}")?;
        }
        Ok(())
    }
}

/// Decodes `bytes` as the revision that fits them (see the module docs).
pub fn decode(bytes: &Bytes) -> Result<Decoded, Undecodable> {
    let mut best: Option<Decoded> = None;
    for revision in Revision::ALL {
        // A field of another wire type: prost would refuse the bytes too.
        let shape = shape::of(revision, bytes);
        if shape.mismatch {
            continue;
        }
        let Ok(d) = read(revision, bytes, shape.unknown) else {
            continue;
        };
        if d.fits() {
            return Ok(d);
        }
        if best.as_ref().is_none_or(|b| b.prefers(&d)) {
            best = Some(d);
        }
    }
    best.ok_or_else(|| {
        Undecodable(
            Revision::ALL
                .into_iter()
                .filter_map(|r| read_as(r, bytes).err().map(|e| (r, e)))
                .collect(),
        )
    })
}

/// `bytes` decoded as `revision` and translated to v1.10.0, with what
/// validation found; why not, else.
pub fn read_as(revision: Revision, bytes: &Bytes) -> Result<Decoded, String> {
    read(revision, bytes, shape::of(revision, bytes).unknown)
}

fn read(revision: Revision, bytes: &Bytes, unknown_fields: usize) -> Result<Decoded, String> {
    let data = match revision {
        Revision::V1_10_0 => profcol_model::codec::decode(bytes).map_err(|e| e.to_string())?,
        Revision::V1_9_0 => v1_9::upgrade(
            v1_9::wire::ProfilesData::decode(bytes.clone()).map_err(|e| e.to_string())?,
        ),
        Revision::V1_8_0 => {
            let d = v1_8::wire::ProfilesData::decode(bytes.clone()).map_err(|e| e.to_string())?;
            v1_8::upgrade(d).map_err(|e| e.to_string())?
        }
        Revision::V1_7_0 => {
            let d = v1_7::wire::ProfilesData::decode(bytes.clone()).map_err(|e| e.to_string())?;
            v1_7::upgrade(d).map_err(|e| e.to_string())?
        }
    };
    Ok(Decoded {
        findings: findings(&data),
        data,
        revision,
        unknown_fields,
    })
}
