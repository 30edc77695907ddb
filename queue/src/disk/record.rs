//! What a persistent queue writes: records framed with a magic, a length,
//! a sequence number and a CRC32C, so that a torn or damaged record is
//! found and skipped, and the records after it are still read.
//!
//! ```text
//! request record (in NNNN.seg):  magic "PCQR" | len u32 | seq u64 | crc u32 | payload
//! ack record     (in NNNN.acks): magic "PCQA" | kind u8 | seq u64 | len u32 | crc u32 | payload
//! ```
//! Little-endian; the CRC covers every field after the magic but itself.
//! A request's payload is its metadata (JSON, length-prefixed) then the
//! batch's protobuf bytes; an ack's is empty (done) or the progress (JSON).

use std::net::SocketAddr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::Progress;
use profcol_model::{BatchMeta, Origin, ProfileBatch};

pub const REQUEST_MAGIC: [u8; 4] = *b"PCQR";
pub const ACK_MAGIC: [u8; 4] = *b"PCQA";
pub const REQUEST_HEADER: usize = 20;
pub const ACK_HEADER: usize = 21;
/// Larger records are damage, not data: a request is at most what a
/// receiver accepts (4 GiB is gRPC's own ceiling).
pub const MAX_RECORD: u32 = u32::MAX - 1;

pub const KIND_DONE: u8 = 1;
pub const KIND_PROGRESS: u8 = 2;

/// The request header for `payload_len` bytes whose CRC (over the header
/// fields and the payload) is `crc`.
pub fn request_header(seq: u64, payload_len: u32, crc: u32) -> [u8; REQUEST_HEADER] {
    let mut h = [0u8; REQUEST_HEADER];
    h[..4].copy_from_slice(&REQUEST_MAGIC);
    h[4..8].copy_from_slice(&payload_len.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    h
}

/// CRC of a request record: its length and sequence, then the payload
/// pieces in order.
pub fn request_crc(seq: u64, payload: &[&[u8]]) -> u32 {
    let len: usize = payload.iter().map(|p| p.len()).sum();
    let mut crc = crc32c::crc32c(&(len as u32).to_le_bytes());
    crc = crc32c::crc32c_append(crc, &seq.to_le_bytes());
    for p in payload {
        crc = crc32c::crc32c_append(crc, p);
    }
    crc
}

/// A whole ack record.
pub fn ack_record(kind: u8, seq: u64, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut crc = crc32c::crc32c(&[kind]);
    crc = crc32c::crc32c_append(crc, &seq.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &len.to_le_bytes());
    crc = crc32c::crc32c_append(crc, payload);
    let mut r = Vec::with_capacity(ACK_HEADER + payload.len());
    r.extend_from_slice(&ACK_MAGIC);
    r.push(kind);
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&crc.to_le_bytes());
    r.extend_from_slice(payload);
    r
}

/// A request record found in a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub seq: u64,
    /// Where the record starts in the segment, and its whole length.
    pub offset: u64,
    pub len: u64,
}

/// What scanning a segment found: its records, and how many damaged
/// stretches were skipped to find them.
#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<Found>,
    pub damaged: u64,
}

/// Every intact request record of a segment's bytes. After damage (a bad
/// CRC, a length past the end, a zeroed page) the scan looks for the next
/// magic whose record checks out, so one bad record costs only itself.
pub fn scan_requests(data: &[u8]) -> Scan {
    let mut scan = Scan::default();
    let mut at = 0usize;
    let mut in_damage = false;
    while at < data.len() {
        match request_at(data, at) {
            Some((seq, len)) => {
                scan.records.push(Found {
                    seq,
                    offset: at as u64,
                    len: len as u64,
                });
                at += len;
                in_damage = false;
            }
            None => {
                if !in_damage {
                    scan.damaged += 1;
                    in_damage = true;
                }
                at = next_magic(data, at + 1, &REQUEST_MAGIC);
            }
        }
    }
    scan
}

/// The record at `at` if it is whole and its CRC matches: (seq, length).
fn request_at(data: &[u8], at: usize) -> Option<(u64, usize)> {
    let h = data.get(at..at + REQUEST_HEADER)?;
    if h[..4] != REQUEST_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(h[4..8].try_into().ok()?);
    let seq = u64::from_le_bytes(h[8..16].try_into().ok()?);
    let crc = u32::from_le_bytes(h[16..20].try_into().ok()?);
    if len > MAX_RECORD {
        return None;
    }
    let payload = data.get(at + REQUEST_HEADER..at + REQUEST_HEADER + len as usize)?;
    (request_crc(seq, &[payload]) == crc).then_some((seq, REQUEST_HEADER + len as usize))
}

fn next_magic(data: &[u8], from: usize, magic: &[u8; 4]) -> usize {
    data.get(from..)
        .and_then(|rest| rest.windows(4).position(|w| w == magic))
        .map_or(data.len(), |p| from + p)
}

/// The payload of the record at the start of `record` (its bytes as read
/// back), checked again: the disk may have changed since the scan.
pub fn request_payload(record: &Bytes) -> Option<Bytes> {
    let (_, len) = request_at(record, 0)?;
    Some(record.slice(REQUEST_HEADER..len))
}

/// Acks of one segment: which sequence numbers are done, and the latest
/// progress of the others. Reading stops at the first damaged record (acks
/// are only appended, so what follows a torn one is torn too); `damaged`
/// says whether there was one.
#[derive(Debug, Default)]
pub struct Acks {
    pub done: std::collections::HashSet<u64>,
    pub progress: std::collections::HashMap<u64, Progress>,
    pub damaged: bool,
}

pub fn read_acks(data: &[u8]) -> Acks {
    let mut acks = Acks::default();
    let mut at = 0usize;
    while at < data.len() {
        let Some(h) = data.get(at..at + ACK_HEADER) else {
            acks.damaged = true;
            break;
        };
        let kind = h[4];
        let seq = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(h[13..17].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(h[17..21].try_into().expect("4 bytes"));
        let Some(payload) = data.get(at + ACK_HEADER..at + ACK_HEADER + len) else {
            acks.damaged = true;
            break;
        };
        if h[..4] != ACK_MAGIC || ack_record(kind, seq, payload)[17..21] != crc.to_le_bytes() {
            acks.damaged = true;
            break;
        }
        match kind {
            KIND_DONE => {
                acks.done.insert(seq);
                acks.progress.remove(&seq);
            }
            KIND_PROGRESS => {
                if let Ok(p) = serde_json::from_slice(payload) {
                    acks.progress.insert(seq, p);
                }
            }
            _ => {
                acks.damaged = true;
                break;
            }
        }
        at += ACK_HEADER + len;
    }
    acks
}

/// What of a batch's metadata is worth keeping across a restart (not its
/// memory reservation, which the next process makes anew).
#[derive(Debug, Serialize, Deserialize)]
struct StoredMeta {
    receiver: String,
    transport: String,
    client: Option<SocketAddr>,
    metadata: Vec<(String, String)>,
    origin: StoredOrigin,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum StoredOrigin {
    Otlp,
    Sentry {
        project_id: String,
        envelope_header: serde_json::Value,
    },
    Pprof,
}

/// The metadata part of a request's payload (length-prefixed JSON).
pub fn encode_meta(meta: &BatchMeta) -> Vec<u8> {
    let stored = StoredMeta {
        receiver: meta.receiver.clone(),
        transport: meta.transport.to_owned(),
        client: meta.client_addr,
        metadata: meta.metadata.clone(),
        origin: match &meta.origin {
            Origin::Otlp => StoredOrigin::Otlp,
            Origin::Sentry {
                project_id,
                envelope_header,
            } => StoredOrigin::Sentry {
                project_id: project_id.clone(),
                envelope_header: envelope_header.clone(),
            },
            Origin::Pprof => StoredOrigin::Pprof,
        },
    };
    let json = serde_json::to_vec(&stored).expect("metadata serializes");
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out
}

/// A request's payload back as a batch (its protobuf kept for pass-through).
pub fn decode_payload(payload: Bytes) -> Result<ProfileBatch, String> {
    let meta_len = payload
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or("payload shorter than its metadata length")?;
    let json = payload
        .get(4..4 + meta_len)
        .ok_or("payload shorter than its metadata")?;
    let stored: StoredMeta = serde_json::from_slice(json).map_err(|e| format!("metadata: {e}"))?;
    let batch =
        ProfileBatch::decode(payload.slice(4 + meta_len..)).map_err(|e| format!("batch: {e}"))?;
    Ok(batch.with_meta(BatchMeta {
        receiver: stored.receiver,
        transport: match stored.transport.as_str() {
            "grpc" => "grpc",
            "http" => "http",
            _ => "",
        },
        client_addr: stored.client,
        metadata: stored.metadata,
        origin: match stored.origin {
            StoredOrigin::Otlp => Origin::Otlp,
            StoredOrigin::Sentry {
                project_id,
                envelope_header,
            } => Origin::Sentry {
                project_id,
                envelope_header,
            },
            StoredOrigin::Pprof => Origin::Pprof,
        },
        memory: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut r =
            request_header(seq, payload.len() as u32, request_crc(seq, &[payload])).to_vec();
        r.extend_from_slice(payload);
        r
    }

    #[test]
    fn damage_costs_only_the_damaged_records() {
        let mut data = Vec::new();
        for seq in 0..5u64 {
            data.extend(record(seq, &vec![seq as u8; 100 + seq as usize]));
        }
        let whole = scan_requests(&data);
        assert_eq!(
            whole.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(whole.damaged, 0);
        // A zeroed stretch over record 1 and the start of 2.
        let mut zeroed = data.clone();
        let (from, to) = (
            whole.records[1].offset as usize,
            whole.records[2].offset as usize + 10,
        );
        zeroed[from..to].fill(0);
        let s = scan_requests(&zeroed);
        assert_eq!(
            s.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [0, 3, 4]
        );
        assert_eq!(s.damaged, 1);
        // A flipped payload byte, and a record cut in half at the end.
        let mut flipped = data.clone();
        flipped[whole.records[3].offset as usize + REQUEST_HEADER + 5] ^= 0xff;
        flipped.truncate(whole.records[4].offset as usize + 30);
        let s = scan_requests(&flipped);
        assert_eq!(
            s.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(s.damaged, 1, "one stretch from record 3 to the end");
    }

    #[test]
    fn acks_are_read_up_to_the_first_torn_one() {
        let p = Progress {
            delivered: 7,
            rejected: 1,
            resume: Some(serde_json::json!({"done": 2})),
        };
        let mut data = ack_record(KIND_PROGRESS, 4, &serde_json::to_vec(&p).unwrap());
        data.extend(ack_record(KIND_DONE, 3, &[]));
        data.extend(ack_record(KIND_DONE, 5, &[]));
        let acks = read_acks(&data);
        assert_eq!(acks.done, [3, 5].into());
        assert_eq!(acks.progress[&4], p);
        assert!(!acks.damaged);
        data.truncate(data.len() - 3);
        let acks = read_acks(&data);
        assert_eq!(acks.done, [3].into());
        assert!(acks.damaged);
    }

    #[test]
    fn metadata_and_batch_survive_the_round_trip() {
        let data = profcol_model::synth::request(50, 10);
        let bytes = Bytes::from(prost::Message::encode_to_vec(&data));
        let batch = ProfileBatch::decode(bytes.clone())
            .unwrap()
            .with_meta(BatchMeta {
                receiver: "sentry".into(),
                transport: "http",
                client_addr: Some("127.0.0.1:9".parse().unwrap()),
                metadata: vec![("x-tenant".into(), "a".into())],
                origin: Origin::Sentry {
                    project_id: "42".into(),
                    envelope_header: serde_json::json!({"event_id": "e"}),
                },
                memory: None,
            });
        let mut payload = encode_meta(&batch.meta);
        payload.extend_from_slice(&bytes);
        let back = decode_payload(Bytes::from(payload)).unwrap();
        assert_eq!(back.encoded(), Some(&bytes));
        assert_eq!(back.meta.receiver, "sentry");
        assert_eq!(back.meta.transport, "http");
        assert_eq!(back.meta.metadata, batch.meta.metadata);
        assert!(
            matches!(back.meta.origin, Origin::Sentry { ref project_id, .. } if project_id == "42")
        );
    }
}
