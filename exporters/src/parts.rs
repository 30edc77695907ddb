//! A request the peer refuses as too large is sent again in parts, cut at
//! profile boundaries, instead of being dropped.
//!
//! The Collector's OTLP receiver takes gRPC messages up to
//! `max_recv_msg_size_mib` (gRPC-Go's 4 MiB unless set) and HTTP bodies up
//! to `max_request_body_size` (20 MiB); a `batch` processor upstream makes
//! requests larger than that. The peer's answer names its limit when it is
//! gRPC-Go's or tonic's; the exporter remembers it, so later requests over
//! it are cut before they are sent. Parts are sized from the samples each
//! profile holds, and a part refused again is halved; a single profile the
//! peer never takes is refused for good, and counted.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use profcol_model::dictionary::subsets;
use profcol_model::ProfileBatch;
use profcol_model::{profile_sample_count, profiles, BatchMeta};
use profcol_pipeline::component::{ExportError, ExportOutcome, Request};

use crate::settled::Settled;

/// Its key in a request's `resume`.
const KEY: &str = "parts";

/// Parts are cut to this share of the peer's limit: a profile's size is
/// estimated from its samples.
const FILL: f64 = 0.75;

/// The largest request, in encoded bytes before compression, that the peer
/// takes, once it has refused one; 0 while it has not.
#[derive(Debug, Default)]
pub(crate) struct PeerLimit(AtomicU64);

impl PeerLimit {
    /// A limit known from the start (the `kafka` exporter's
    /// `producer::max_message_bytes`); refusals can only lower it.
    pub(crate) fn fixed(bytes: u64) -> Self {
        Self(AtomicU64::new(bytes))
    }

    fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&l| l > 0)
    }

    /// Whether `req` goes out in parts: the peer refused one this size
    /// before, or an earlier attempt of it did.
    pub(crate) fn applies_to(&self, req: &Request) -> bool {
        let resumed = req
            .progress()
            .resume
            .as_ref()
            .is_some_and(|r| r.get(KEY).is_some());
        resumed
            || self
                .get()
                .is_some_and(|l| req.batch.encoded_len() as u64 > l)
    }

    /// After a refusal of `len` bytes: the limit the peer said, else less
    /// than what it refused.
    fn learn(&self, said: Option<u64>, len: u64) {
        let limit = said
            .unwrap_or(len / 2)
            .clamp(1, len.saturating_sub(1).max(1));
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == 0 { limit } else { old.min(limit) })
            });
    }

    /// When `result` is the peer refusing a request of `req`'s size as too
    /// large, learns its limit and says so.
    pub(crate) fn refused<T>(&self, result: &Result<T, ExportError>, req: &Request) -> bool {
        let Err(e) = result else { return false };
        let Some(said) = too_large(e) else {
            return false;
        };
        self.learn(said, req.batch.encoded_len() as u64);
        true
    }
}

/// `Some` when `err` is a peer refusing a request as larger than it takes,
/// with the limit when the answer named it: gRPC-Go's "received message
/// larger than max (N vs. LIMIT)", tonic's "message length too large: found
/// N bytes, the limit is: LIMIT bytes", profcol's receivers' wording, HTTP
/// 413, or Go's "http: request body too large" (which the Collector answers
/// with 400).
pub(crate) fn too_large(err: &ExportError) -> Option<Option<u64>> {
    let ExportError::Permanent { message } = err else {
        return None;
    };
    let number_after = |marker: &str| -> Option<u64> {
        let rest = &message[message.find(marker)? + marker.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    if message.contains("larger than max") {
        return Some(number_after(" vs. "));
    }
    if message.contains("message length too large") {
        return Some(number_after("the limit is: "));
    }
    // profcol's own receivers.
    if message.contains("exceeds max_recv_msg_size_mib") {
        return Some(number_after("max_recv_msg_size_mib ("));
    }
    if message.contains("exceeds the size limit of") {
        return Some(number_after("size limit of "));
    }
    if message.contains("HTTP 413")
        // A Kafka broker's MESSAGE_TOO_LARGE, as librdkafka words it.
        || message.contains("Message size too large")
        || message.contains("request body too large")
        || message.contains("exceeds the memory budget")
    {
        return Some(None);
    }
    None
}

/// Sends `req` as parts each within the peer's limit, through `send` (one
/// call of the exporter with a batch of its own). Records which profiles
/// each part settled, so a retry after a retryable failure sends only the
/// rest.
pub(crate) async fn send<F, Fut>(
    req: &Request,
    limit: &PeerLimit,
    send: F,
) -> Result<ExportOutcome, ExportError>
where
    F: Fn(Arc<ProfileBatch>, (u64, u64)) -> Fut,
    Fut: Future<Output = Result<ExportOutcome, ExportError>>,
{
    let batch = &req.batch;
    let data = batch.data();
    let sizes: Vec<u64> = profiles(&data.resource_profiles)
        .map(profile_sample_count)
        .collect();
    let n = sizes.len();
    let mut progress = req.progress();
    let mut settled = Settled::from_progress(&progress, KEY, n);

    // Bytes per sample, from the whole request; every profile counts one
    // more for what it carries besides samples.
    let len = batch.encoded_len() as f64;
    let per_unit = len / (sizes.iter().sum::<u64>() + n as u64).max(1) as f64;
    let target = limit.get().map_or(len / 2.0, |l| l as f64 * FILL);
    let mut work: Vec<Vec<u32>> = Vec::new();
    let mut current = (Vec::new(), 0.0);
    for (i, &s) in sizes.iter().enumerate() {
        if settled.is_set(i) {
            continue;
        }
        let est = (s + 1) as f64 * per_unit;
        if !current.0.is_empty() && current.1 + est > target {
            work.push(std::mem::take(&mut current.0));
            current.1 = 0.0;
        }
        current.0.push(i as u32);
        current.1 += est;
    }
    if !current.0.is_empty() {
        work.push(current.0);
    }
    // Sent in order: the last pushed is popped first.
    work.reverse();

    let mut refused: Vec<String> = Vec::new();
    while let Some(group) = work.pop() {
        let mut owner = vec![u32::MAX; n];
        for &p in &group {
            owner[p as usize] = 0;
        }
        let Some(subset) = subsets(data, &owner, 1).pop().flatten() else {
            continue;
        };
        // Sent and dropped within the attempt: the request's memory
        // reservation covers it.
        let meta = BatchMeta {
            memory: None,
            ..batch.meta.clone()
        };
        let part = Arc::new(ProfileBatch::new(subset.to_data(data)).with_meta(meta));
        let part_len = part.encoded_len() as u64;
        let samples = subset.samples();
        let result = send(part, (group.len() as u64, samples)).await;
        let rejected = match result {
            Ok(outcome) => outcome.rejected.min(samples),
            Err(e) => match too_large(&e) {
                Some(said) if group.len() > 1 => {
                    limit.learn(said, part_len);
                    let (first, second) = group.split_at(group.len() / 2);
                    work.push(second.to_vec());
                    work.push(first.to_vec());
                    continue;
                }
                Some(_) => {
                    refused.push(format!(
                        "a profile of {samples} samples ({part_len} bytes) is larger than the peer takes: {e}"
                    ));
                    samples
                }
                None => match e {
                    ExportError::Permanent { message } => {
                        refused.push(message);
                        samples
                    }
                    retryable => return Err(retryable),
                },
            },
        };
        for &p in &group {
            settled.set(p as usize);
        }
        progress.delivered += samples - rejected;
        progress.rejected += rejected;
        progress.resume = Some(settled.to_resume());
        // At once: an attempt cut short by the timeout keeps it.
        req.record(progress.clone());
    }
    if !refused.is_empty() {
        if progress.delivered == 0 {
            return Err(ExportError::permanent(refused.join("; ")));
        }
        tracing::warn!(errors = %refused.join("; "), "the peer refused part of a batch for good");
    }
    Ok(ExportOutcome::rejected(progress.rejected))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permanent(m: &str) -> ExportError {
        ExportError::permanent(m)
    }

    /// The answers of the Collector (gRPC-Go, Go's net/http) and of tonic,
    /// as the exporters word them.
    #[test]
    fn a_size_refusal_is_recognised_with_its_limit() {
        let grpc_go = "rpc error: code = ResourceExhausted desc = grpc: received message larger than max (1497691 vs. 1048576)";
        assert_eq!(too_large(&permanent(grpc_go)), Some(Some(1_048_576)));
        let tonic = "rpc error: code = OutOfRange desc = Error, decoded message length too large: found 5000 bytes, the limit is: 4194304 bytes";
        assert_eq!(too_large(&permanent(tonic)), Some(Some(4_194_304)));
        let go_http =
            "POST http://c:4318/v1development/profiles: HTTP 400: http: request body too large";
        assert_eq!(too_large(&permanent(go_http)), Some(None));
        assert_eq!(too_large(&permanent("POST u: HTTP 413")), Some(None));
        assert_eq!(too_large(&permanent("HTTP 400: bad proto")), None);
        let profcol = "rpc error: code = ResourceExhausted desc = message of 9000 bytes exceeds max_recv_msg_size_mib (4194304 bytes)";
        assert_eq!(too_large(&permanent(profcol)), Some(Some(4_194_304)));
        let profcol_http = "POST u: HTTP 413: the request exceeds the size limit of 20971520 bytes";
        assert_eq!(too_large(&permanent(profcol_http)), Some(Some(20_971_520)));
        let budget = "rpc error: code = ResourceExhausted desc = batch of 5 bytes exceeds the memory budget of 4 bytes";
        assert_eq!(too_large(&permanent(budget)), Some(None));
        // A retryable answer is retried whole, never cut.
        assert_eq!(too_large(&ExportError::retryable(grpc_go)), None);
    }

    #[test]
    fn the_limit_only_shrinks_and_stays_below_what_was_refused() {
        let l = PeerLimit::default();
        assert_eq!(l.get(), None);
        l.learn(None, 1000);
        assert_eq!(l.get(), Some(500));
        l.learn(Some(800), 900);
        assert_eq!(l.get(), Some(500));
        l.learn(Some(5000), 300);
        assert_eq!(l.get(), Some(299));
    }
}
