//! Relay's checks on a v2 chunk (`ProfileData::normalize` in
//! `relay-profiling/src/sample/v2.rs`), applied in Relay's order so that a
//! chunk Relay would refuse is never sent:
//!
//! 1. drop the samples of threads with at most one non-idle sample;
//! 2. no samples left: refuse (`profiling_not_enough_samples`);
//! 3. a sample naming an unknown stack (`profiling_malformed_samples`) or a
//!    stack naming an unknown frame (`profiling_malformed_stacks`): refuse;
//! 4. sort samples by timestamp;
//! 5. more than 66 s between first and last sample: refuse
//!    (`profiling_duration_is_too_long`);
//! 6. drop `thread_metadata` of threads without samples.
//!
//! Before those, what Relay's deserializer insists on: UUID `chunk_id` and
//! `profiler_id`, and no `android` platform (routed to another format).

use hashbrown::HashMap;

use super::ids::parse_uuid;
use super::outgoing::ProfileChunk;
use super::reason;

/// Relay's `MAX_PROFILE_CHUNK_DURATION`.
pub const MAX_CHUNK_DURATION_NS: u64 = 66_000_000_000;

/// Samples step 1 removed from an accepted chunk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Sentry samples removed.
    pub samples: u64,
    /// Of those, first points of their OTLP sample (see `ChunkSample::home`).
    pub homes: u64,
}

/// Applies Relay's v2 rules; `Err` carries the outcome reason Relay would
/// give, and the chunk must not be sent.
pub fn check_v2(chunk: &mut ProfileChunk) -> Result<Pruned, &'static str> {
    if parse_uuid(&chunk.chunk_id).is_none() || parse_uuid(&chunk.profiler_id).is_none() {
        return Err(reason::INVALID_JSON);
    }
    if chunk.platform.is_empty() {
        return Err(reason::INVALID_JSON);
    }
    if chunk.platform == "android" {
        return Err(reason::PLATFORM_NOT_SUPPORTED);
    }
    let p = &mut chunk.profile;

    // 1. Threads with <= 1 non-idle sample (idle: empty or unknown stack).
    let mut non_idle: HashMap<u32, u32> = HashMap::new();
    for s in &p.samples {
        if p.stacks
            .get(s.stack_id as usize)
            .is_some_and(|st| !st.is_empty())
        {
            *non_idle.entry(s.thread).or_default() += 1;
        }
    }
    let before = p.samples.len();
    let mut pruned = Pruned::default();
    p.samples.retain(|s| {
        let keep = non_idle.get(&s.thread).is_some_and(|&n| n > 1);
        if !keep && s.home {
            pruned.homes += 1;
        }
        keep
    });
    pruned.samples = (before - p.samples.len()) as u64;

    // 2.
    if p.samples.is_empty() {
        return Err(reason::NOT_ENOUGH_SAMPLES);
    }
    // 3.
    let n_threads = p.thread_ids.len();
    if p.samples
        .iter()
        .any(|s| s.stack_id as usize >= p.stacks.len() || s.thread as usize >= n_threads)
    {
        return Err(reason::MALFORMED_SAMPLES);
    }
    let n_frames = p.frames.len();
    if p.stacks.iter().flatten().any(|&f| f as usize >= n_frames) {
        return Err(reason::MALFORMED_STACKS);
    }
    // 4.
    p.samples.sort_by_key(|s| s.timestamp_unix_nano);
    // 5.
    let first = p.samples[0].timestamp_unix_nano;
    let last = p.samples[p.samples.len() - 1].timestamp_unix_nano;
    if last - first > MAX_CHUNK_DURATION_NS {
        return Err(reason::DURATION_TOO_LONG);
    }
    // 6.
    let mut used = vec![false; n_threads];
    for s in &p.samples {
        used[s.thread as usize] = true;
    }
    let used_ids: hashbrown::HashSet<&str> = p
        .thread_ids
        .iter()
        .zip(&used)
        .filter(|(_, &u)| u)
        .map(|(id, _)| id.as_str())
        .collect();
    p.thread_metadata
        .retain(|id, _| used_ids.contains(id.as_str()));
    Ok(pruned)
}
