//! A persistent FIFO of opaque records (metadata and a body) on the
//! sending queue's segment log, for queues of things other than batches:
//! the Sentry receiver's forwarding of envelopes.

use std::path::Path;
use std::sync::Mutex;

use bytes::Bytes;

use super::record::{self, KIND_DONE};
use super::store::{Location, Store};

/// Segments of a log roll at this size.
const SEGMENT_BYTES: u64 = 64 << 20;

pub struct BlobLog {
    store: Mutex<Store>,
}

/// A record written by an earlier run and not yet settled.
pub struct Blob {
    pub at: Location,
    pub meta: Bytes,
    pub body: Bytes,
}

/// What a log directory held at start.
pub struct RecoveredBlobs {
    pub blobs: Vec<Blob>,
    /// Damaged records and files found (counted, logged, skipped).
    pub corrupt: u64,
}

impl BlobLog {
    /// Opens (or creates) the log in `dir`. Blocking: run it off the async
    /// threads.
    pub fn open(dir: &Path, fsync: bool, owner: &str) -> anyhow::Result<(Self, RecoveredBlobs)> {
        let (mut store, recovered) = Store::open(dir, fsync, SEGMENT_BYTES, owner)?;
        let mut corrupt = recovered.corrupt;
        let mut blobs = Vec::new();
        for (at, _) in recovered.entries {
            let parts = store
                .read(at)
                .ok()
                .map(Bytes::from)
                .and_then(|r| record::request_payload(&r))
                .and_then(|p| split(&p));
            match parts {
                Some((meta, body)) => blobs.push(Blob { at, meta, body }),
                None => {
                    corrupt += 1;
                    let _ = store.ack(at, KIND_DONE, &[]);
                }
            }
        }
        Ok((
            Self {
                store: Mutex::new(store),
            },
            RecoveredBlobs { blobs, corrupt },
        ))
    }

    /// Appends a record (with `fsync`, on disk when this returns).
    /// Blocking.
    pub fn append(&self, meta: &[u8], body: &[u8]) -> std::io::Result<Location> {
        let mut prefixed = Vec::with_capacity(4 + meta.len());
        prefixed.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        prefixed.extend_from_slice(meta);
        self.lock().append(&prefixed, body)
    }

    /// The record at `at` is settled; its segment goes once all are.
    /// Blocking.
    pub fn done(&self, at: Location) -> std::io::Result<()> {
        self.lock().ack(at, KIND_DONE, &[])
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A payload's length-prefixed metadata and the body after it.
fn split(payload: &Bytes) -> Option<(Bytes, Bytes)> {
    let len = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let end = 4usize.checked_add(len).filter(|&e| e <= payload.len())?;
    Some((payload.slice(4..end), payload.slice(end..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_settled_comes_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (log, r) = BlobLog::open(dir.path(), false, "t").unwrap();
        assert!(r.blobs.is_empty());
        let a = log.append(b"{\"n\":1}", b"first").unwrap();
        log.append(b"{\"n\":2}", b"second").unwrap();
        log.append(b"", b"third").unwrap();
        log.done(a).unwrap();
        drop(log);
        let (_, r) = BlobLog::open(dir.path(), false, "t").unwrap();
        let got: Vec<(&[u8], &[u8])> = r.blobs.iter().map(|b| (&b.meta[..], &b.body[..])).collect();
        assert_eq!(
            got,
            [
                (&b"{\"n\":2}"[..], &b"second"[..]),
                (&b""[..], &b"third"[..])
            ]
        );
        assert_eq!(r.corrupt, 0);
    }
}
