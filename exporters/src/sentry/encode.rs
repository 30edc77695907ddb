//! One batch -> request bodies: OTLP -> `profile_chunk`s (the conversion in
//! `formats::sentry`, which applies Relay's rules), the configured
//! overrides, one envelope per chunk, compression. Pure CPU, no I/O.
//!
//! One chunk per envelope, as the SDKs send them: Relay would take several
//! `profile_chunk` items in one envelope, but a chunk is then the unit of
//! delivery, rate limiting (a 429 names the whole request) and refusal
//! (a 413 or 400 costs one chunk, not the batch).
//!
//! Counts are in the runtime's unit, `ProfileBatch::sample_count`: one per
//! timestamp, or one per aggregated OTLP sample.

use std::io::Write;
use std::time::SystemTime;

use flate2::write::GzEncoder;

use profcol_model::profiles;
use profcol_model::proto::ProfilesData;
use profcol_sentry::{otlp_to_chunks, write_envelope, ChunkResult, Dropped, ExportOptions};

use super::config::Compression;
use super::rate_limits::category_for_platform;

/// What shapes the bodies (from the exporter's config).
#[derive(Debug, Clone)]
pub struct EncodeOptions {
    pub max_samples_per_chunk: usize,
    pub max_chunk_duration_ns: u64,
    /// Chunks past this many are dropped (`max_chunks_per_request`).
    pub max_chunks: usize,
    pub compression: Compression,
    /// The DSN for the envelope header (without secret).
    pub dsn: Option<String>,
    /// Platform of profiles whose data names none.
    pub platform: Option<String>,
    pub environment: Option<String>,
    pub release: Option<String>,
    /// Stands in for the process in the `profiler_id` of resources that
    /// name none (see `ExportOptions::instance_id`): one per exporter.
    pub instance_id: [u8; 16],
}

impl Default for EncodeOptions {
    fn default() -> Self {
        let convert = ExportOptions::default();
        Self {
            max_samples_per_chunk: convert.max_samples_per_chunk,
            max_chunk_duration_ns: 60_000_000_000,
            max_chunks: usize::MAX,
            compression: Compression::Gzip,
            dsn: None,
            platform: None,
            environment: None,
            release: None,
            instance_id: convert.instance_id,
        }
    }
}

/// One envelope holding one chunk.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The request body (compressed as configured); `None` for chunks an
    /// earlier attempt settled.
    pub body: Option<Vec<u8>>,
    pub chunk_id: String,
    pub platform: String,
    /// Rate-limit category (`profile_chunk` or `profile_chunk_ui`).
    pub category: &'static str,
    /// Samples it carries, in `ProfileBatch::sample_count` units.
    pub samples: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Encoded {
    /// Every chunk to send, in conversion order (the same on every attempt).
    pub envelopes: Vec<Envelope>,
    /// Samples the conversion left out, by reason, in batch units.
    pub dropped: Vec<(&'static str, u64)>,
    /// Chunks left out by `max_chunks`.
    pub over_limit: u64,
}

/// The drop reason of chunks past `max_chunks_per_request`.
pub const MAX_CHUNKS_PER_REQUEST: &str = "max_chunks_per_request";

/// Converts `data` and builds the envelopes of the chunks from index
/// `skip` on; earlier ones get no body. `now_unix_nano` stands in for
/// missing profile start times.
pub fn encode(
    data: &ProfilesData,
    opts: &EncodeOptions,
    now_unix_nano: u64,
    sent_at: SystemTime,
    skip: usize,
) -> Encoded {
    let convert = ExportOptions {
        max_samples_per_chunk: opts.max_samples_per_chunk,
        max_chunk_duration_ns: opts.max_chunk_duration_ns,
        now_unix_nano,
        default_platform: opts.platform.clone(),
        instance_id: opts.instance_id,
        ..ExportOptions::default()
    };
    let results = otlp_to_chunks(data, &convert);
    let unit = Unit::of(data);
    let mut out = Encoded::default();
    for mut r in results {
        for d in &r.dropped {
            add_dropped(&mut out.dropped, d.reason.as_str(), unit.dropped(d));
        }
        let samples = unit.sent(&r);
        let Some(chunk) = r.chunk.as_mut() else {
            continue;
        };
        let index = out.envelopes.len();
        if index >= opts.max_chunks {
            // Bounds the requests one incoming batch can cost; the same
            // chunks on every attempt, as the conversion is.
            add_dropped(&mut out.dropped, MAX_CHUNKS_PER_REQUEST, samples);
            out.over_limit += 1;
            continue;
        }
        let mut changed = false;
        if let Some(e) = &opts.environment {
            changed |= replace_opt(&mut chunk.environment, e);
        }
        if let Some(rel) = &opts.release {
            changed |= replace_opt(&mut chunk.release, rel);
        }
        if changed {
            r.payload = chunk.to_json();
        }
        let chunk_id = chunk.chunk_id.clone();
        let platform = chunk.platform.clone();
        let body = (index >= skip).then(|| {
            let envelope = write_envelope(std::iter::once(&r), opts.dsn.as_deref(), sent_at);
            compress(envelope, opts.compression)
        });
        out.envelopes.push(Envelope {
            body,
            category: category_for_platform(&platform),
            chunk_id,
            platform,
            samples,
        });
    }
    out
}

fn add_dropped(out: &mut Vec<(&'static str, u64)>, reason: &'static str, n: u64) {
    if n == 0 {
        return;
    }
    match out.iter_mut().find(|(r, _)| *r == reason) {
        Some((_, total)) => *total += n,
        None => out.push((reason, n)),
    }
}

fn replace_opt(field: &mut Option<String>, value: &str) -> bool {
    if field.as_deref() == Some(value) {
        return false;
    }
    *field = Some(value.to_owned());
    true
}

/// Gzip at level 1: level 6 costs several times more CPU for a few percent
/// (the chunk JSON is repetitive and compresses well either way).
pub fn compress(envelope: Vec<u8>, compression: Compression) -> Vec<u8> {
    match compression {
        Compression::None => envelope,
        Compression::Gzip => {
            let mut gz = GzEncoder::new(
                Vec::with_capacity(envelope.len() / 6 + 64),
                flate2::Compression::fast(),
            );
            // Writing into a Vec cannot fail.
            gz.write_all(&envelope).expect("gzip into memory");
            gz.finish().expect("gzip into memory")
        }
    }
}

/// How the conversion's counts map to `ProfileBatch::sample_count`, which
/// counts a timestamped OTLP sample once per timestamp and an aggregated
/// one once. The conversion reports Sentry samples (points) and OTLP
/// samples; which one is the batch unit depends on the samples' kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Every sample has timestamps: one point is one sample.
    Points,
    /// Some samples are aggregated: one OTLP sample is one sample (exact
    /// when none has timestamps; a batch mixing both kinds is counted
    /// approximately).
    OtlpSamples,
}

impl Unit {
    fn of(data: &ProfilesData) -> Self {
        let all_timestamped = profiles(&data.resource_profiles)
            .flat_map(|p| &p.samples)
            .all(|s| !s.timestamps_unix_nano.is_empty());
        if all_timestamped {
            Self::Points
        } else {
            Self::OtlpSamples
        }
    }

    fn sent(self, r: &ChunkResult) -> u64 {
        match self {
            Self::Points => r.sentry_samples,
            Self::OtlpSamples => r.otlp_samples,
        }
    }

    fn dropped(self, d: &Dropped) -> u64 {
        match self {
            Self::Points => d.sentry_samples,
            Self::OtlpSamples => d.otlp_samples,
        }
    }
}
