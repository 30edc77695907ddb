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
//!    (`profiling_duration_is_too_long`). Relay subtracts the timestamps as
//!    it parsed them, float seconds, so this check does too (see
//!    [`exceeds_max_duration`]);
//! 6. drop `thread_metadata` of threads without samples.
//!
//! Before those, what Relay's deserializer insists on: UUID `chunk_id` and
//! `profiler_id`, and no `android` platform (routed to another format).
//! Debug images whose ids Relay cannot parse would fail the whole chunk the
//! same way; [`relay_reads_image`] tells which to leave out.

use hashbrown::HashMap;

use super::outgoing::ProfileChunk;
use crate::ids::parse_uuid;
use crate::time::unix_nanos_to_secs;
use crate::Reason;

/// Relay's `MAX_PROFILE_CHUNK_DURATION`.
pub const MAX_CHUNK_DURATION_NS: u64 = 66_000_000_000;
/// The same in the seconds Relay compares with.
pub const MAX_CHUNK_DURATION_SECS: f64 = 66.0;

/// Debug image types Relay's profiling parser accepts.
pub const RELAY_IMAGE_TYPES: &[&str] = &["macho", "symbolic", "sourcemap", "proguard", "jvm"];

/// Whether Relay finds more than 66 s between samples at `first` and
/// `last` (unix ns, `first <= last`): it compares the difference of the
/// timestamps as serialized (float seconds at microsecond precision) with
/// 66.0, which can exceed 66 s when the nanoseconds do not.
pub fn exceeds_max_duration(first: u64, last: u64) -> bool {
    unix_nanos_to_secs(last) - unix_nanos_to_secs(first) > MAX_CHUNK_DURATION_SECS
}

/// Whether Relay's `DebugImage` reads `image` (a `debug_meta.images`
/// entry): a known `type`, a `debug_id` (alias `id`) that is a `DebugId`,
/// a `uuid` (alias `build_id`) that is a UUID. Any other image makes Relay
/// refuse the whole chunk as invalid JSON.
pub fn relay_reads_image(image: &serde_json::Value) -> bool {
    let field = |names: &[&str]| names.iter().find_map(|n| image.get(*n));
    let ok_or_absent = |names: &[&str], ok: fn(&str) -> bool| match field(names) {
        None | Some(serde_json::Value::Null) => true,
        Some(serde_json::Value::String(s)) => ok(s),
        Some(_) => false,
    };
    image
        .get("type")
        .and_then(|t| t.as_str())
        .is_some_and(|t| RELAY_IMAGE_TYPES.contains(&t))
        && ok_or_absent(&["debug_id", "id"], is_debug_id)
        && ok_or_absent(&["uuid", "build_id"], is_uuid)
}

/// A debug id as Relay parses it (`debugid::DebugId::from_str`): a UUID,
/// hyphenated (36 chars) or simple (32 hex digits), optionally followed by
/// an age of 1 to 8 hex digits, after a `-` when hyphenated and directly
/// when simple (the Breakpad form). What both the older (regex) and the
/// current parser accept.
pub fn is_debug_id(s: &str) -> bool {
    let b = s.as_bytes();
    let age = if b.get(8) == Some(&b'-') {
        if b.len() < 36 || !uuid_bytes(&b[..36]) {
            return false;
        }
        match &b[36..] {
            [] => return true,
            [b'-', age @ ..] if !age.is_empty() => age,
            _ => return false,
        }
    } else {
        if b.len() < 32 || !b[..32].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        &b[32..]
    };
    age.len() <= 8 && age.iter().all(u8::is_ascii_hexdigit)
}

/// A UUID as Relay's `uuid` parses it: 32 hex digits, or 36 chars with
/// hyphens after 8, 12, 16 and 20 digits (braced and URN forms are left
/// out: no SDK sends them).
pub fn is_uuid(s: &str) -> bool {
    uuid_bytes(s.as_bytes())
}

fn uuid_bytes(b: &[u8]) -> bool {
    match b.len() {
        32 => b.iter().all(u8::is_ascii_hexdigit),
        36 => b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        }),
        _ => false,
    }
}

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
pub fn check_v2(chunk: &mut ProfileChunk) -> Result<Pruned, Reason> {
    if parse_uuid(&chunk.chunk_id).is_none() || parse_uuid(&chunk.profiler_id).is_none() {
        return Err(Reason::InvalidJson);
    }
    if chunk.platform.is_empty() {
        return Err(Reason::InvalidJson);
    }
    // An `android` chunk in sample format v2 (what newer Relays make of a
    // Perfetto chunk, and an Android ANR profile) passes like any other.
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
        return Err(Reason::NotEnoughSamples);
    }
    // 3.
    let n_threads = p.thread_ids.len();
    if p.samples
        .iter()
        .any(|s| s.stack_id as usize >= p.stacks.len() || s.thread as usize >= n_threads)
    {
        return Err(Reason::MalformedSamples);
    }
    let n_frames = p.frames.len();
    if p.stacks.iter().flatten().any(|&f| f as usize >= n_frames) {
        return Err(Reason::MalformedStacks);
    }
    // 4.
    p.samples.sort_by_key(|s| s.timestamp_unix_nano);
    // 5. On the timestamps as serialized, as Relay compares them.
    let first = p.samples[0].timestamp_unix_nano;
    let last = p.samples[p.samples.len() - 1].timestamp_unix_nano;
    if exceeds_max_duration(first, last) {
        return Err(Reason::DurationTooLong);
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
