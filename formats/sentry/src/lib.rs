//! Sentry envelopes, profile chunks (v2) and legacy profiles (v1) <-> OTLP.
//! Pure functions, no I/O. Laid out by payload format, as Relay's
//! `relay-profiling`, each format with both directions:
//!
//! - [`envelope`]: framing as Relay parses it (zero-copy) and writes it.
//! - [`v2`]: the `profile_chunk` SDKs send ([`chunk_to_otlp`]) and the one
//!   profcol sends ([`otlp_to_chunks`]), which passes Relay's v2 rules.
//! - [`v1`]: the legacy transaction `profile` ([`profile_v1_to_otlp`]).
//! - Shared: lenient field types ([`de`]), frames and debug images
//!   ([`frame`]), the OTLP builder both formats convert with
//!   ([`otlp_builder`]), attribute keys, ids, times and platforms.
//!
//! Stack order: Sentry stacks and OTLP stacks are both leaf first (verified
//! against the recorded Python and Node payloads and Relay's fixtures).

pub mod android;
pub mod de;
pub mod dsn;
pub mod envelope;
pub mod frame;
pub mod ids;
pub mod keys;
pub mod otlp_builder;
pub mod perfetto;
pub mod platform;
pub mod time;
pub mod v1;
pub mod v2;

#[cfg(test)]
mod tests;

pub use dsn::Dsn;
pub use envelope::{parse as parse_envelope, write_envelope, Envelope, EnvelopeError, Item};
pub use platform::ProfileType;
pub use v1::profile_v1_to_otlp;
pub use v2::outgoing::ProfileChunk as OutgoingChunk;
pub use v2::relay_rules::MAX_CHUNK_DURATION_NS;
pub use v2::{
    chunk_item_to_otlp, chunk_to_otlp, chunk_to_otlp_in_envelope, otlp_to_chunks,
    perfetto_chunk_to_otlp, ChunkResult, Dropped, ExportOptions,
};

use profcol_model::profiles;
use profcol_model::proto::ProfilesData;

/// `original_payload_format` of a converted `profile_chunk`.
pub const ORIGINAL_FORMAT_CHUNK: &str = "sentry_profile_chunk";
/// `original_payload_format` of a converted Perfetto `profile_chunk` (the
/// item's metadata and trace, as received).
pub const ORIGINAL_FORMAT_PERFETTO: &str = "sentry_profile_chunk_perfetto";
/// `original_payload_format` of a converted v1 `profile`.
pub const ORIGINAL_FORMAT_V1: &str = "sentry_profile";

/// Relay's limit on one profile item, and the exporter's on one chunk.
pub const MAX_ITEM_SIZE: usize = 50 * 1024 * 1024;

/// Why an item or samples were refused: Relay's outcome reasons
/// (`relay-profiling/src/outcomes.rs`) where Relay has one, which the
/// exporter also gives a chunk that fails Relay's rules, then the reasons
/// samples are left out of an accepted profile or chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    InvalidJson,
    MalformedStacks,
    MalformedSamples,
    NotEnoughSamples,
    TooLarge,
    /// A Perfetto trace past one of Relay's bounds (samples, packets,
    /// stack depth, interning or result memory).
    ExceedSizeLimit,
    PlatformNotSupported,
    /// The item header's `platform` names another profile type (ui or
    /// backend) than the payload's, which Relay refuses with this reason.
    InvalidProfileType,
    NoTransaction,
    InvalidTransactionMetadata,
    DurationTooLong,
    /// Android: `sampled_profile` is not base64.
    InvalidBase64Value,
    /// Android: `sampled_profile` is not an ART method trace.
    InvalidSampledProfile,
    // Samples left out of an accepted profile or chunk.
    /// v1: sample outside `[relative_start_ns, relative_end_ns]` of its transaction.
    OutsideTransaction,
    /// Relay drops threads with at most one non-idle sample.
    SingleSampleThread,
    /// Expansion of aggregated samples beyond `max_samples_per_chunk`.
    MaxSamplesPerChunk,
    /// A sample type that cannot become wall-clock samples (bytes, ...).
    UnsupportedSampleType,
    /// Another Profile of the scope holds the same samples under another
    /// sample type (pprof `samples/count` and `cpu/nanoseconds`); one is sent.
    DuplicateSampleType,
    /// A sample with neither timestamps nor a positive value.
    EmptySample,
    /// A profile whose times lie past 2262 (int64 nanoseconds) or whose
    /// duration is over a day: no recording, and unbounded work to convert.
    ImplausibleTime,
    /// Aggregated values worth more samples than 1 kHz per stack over the
    /// profile's duration.
    ImplausibleValues,
}

impl Reason {
    /// The outcome string metrics and Relay use.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "profiling_invalid_json",
            Self::MalformedStacks => "profiling_malformed_stacks",
            Self::MalformedSamples => "profiling_malformed_samples",
            Self::NotEnoughSamples => "profiling_not_enough_samples",
            Self::TooLarge => "profiling_too_large",
            Self::ExceedSizeLimit => "profiling_exceed_size_limit",
            Self::PlatformNotSupported => "profiling_platform_not_supported",
            Self::InvalidProfileType => "profiling_invalid_profile_type",
            Self::NoTransaction => "profiling_no_transaction_associated",
            Self::InvalidTransactionMetadata => "profiling_invalid_transaction_metadata",
            Self::DurationTooLong => "profiling_duration_is_too_long",
            Self::InvalidBase64Value => "profiling_invalid_base64_value",
            Self::InvalidSampledProfile => "profiling_invalid_sampled_profile",
            Self::OutsideTransaction => "outside_transaction",
            Self::SingleSampleThread => "single_sample_thread",
            Self::MaxSamplesPerChunk => "max_samples_per_chunk",
            Self::UnsupportedSampleType => "unsupported_sample_type",
            Self::DuplicateSampleType => "duplicate_sample_type",
            Self::EmptySample => "empty_sample",
            Self::ImplausibleTime => "implausible_time",
            Self::ImplausibleValues => "implausible_values",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receiver-side settings of the conversion.
#[derive(Debug, Clone)]
pub struct ReceiveOptions {
    /// `service.name`; else the part of `release` before `@`.
    pub service_name: Option<String>,
    /// Keep the item bytes in `Profile.original_payload`.
    pub include_original_payload: bool,
    /// Items above this many bytes are refused ([`Reason::TooLarge`]).
    pub max_item_size: usize,
    /// The project id from the URL, as `sentry.project_id`.
    pub project_id: Option<String>,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        Self {
            service_name: None,
            include_original_payload: false,
            max_item_size: MAX_ITEM_SIZE,
            project_id: None,
        }
    }
}

/// One Sentry profile as OTLP: one resource, scope and profile with its own
/// dictionary.
#[derive(Debug, Clone)]
pub struct Converted {
    pub data: ProfilesData,
    /// Sentry samples accepted: the number of `timestamps_unix_nano` entries.
    pub sentry_samples: u64,
    /// Sentry samples left out, by reason.
    pub dropped: Vec<(Reason, u64)>,
}

impl Converted {
    /// OTLP `Sample` messages (samples with the same stack and thread combined).
    pub fn otlp_samples(&self) -> u64 {
        profiles(&self.data.resource_profiles)
            .map(|p| p.samples.len() as u64)
            .sum()
    }
}

/// An item Sentry's ingestion would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct ItemError {
    /// Relay-style outcome reason, e.g. `profiling_invalid_json`.
    pub reason: Reason,
    pub message: String,
}

impl ItemError {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}
