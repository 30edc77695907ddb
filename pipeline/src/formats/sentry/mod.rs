//! Sentry envelopes, profile chunks (v2) and legacy profiles (v1) <-> OTLP.
//! Pure functions, no I/O.
//!
//! - [`envelope`]: framing as Relay parses it (zero-copy) and writes it.
//! - [`chunk`], [`profile_v1`]: the payloads SDKs send, borrowed from the bytes.
//! - [`to_otlp`]: one OTLP Profile (own dictionary) per Sentry profile.
//! - [`from_otlp`]: OTLP Profiles -> `profile_chunk`s that pass Relay's
//!   v2 rules ([`relay_rules`]), with aggregated samples expanded.
//!
//! Stack order: Sentry stacks and OTLP stacks are both leaf first (verified
//! against the recorded Python and Node payloads and Relay's fixtures).

pub mod chunk;
pub mod de;
pub mod dsn;
pub mod envelope;
mod expand;
pub mod frame;
pub mod from_otlp;
pub mod ids;
pub mod keys;
pub mod outgoing;
pub mod platform;
pub mod profile_v1;
pub mod relay_rules;
pub mod time;
pub mod to_otlp;

#[cfg(test)]
mod tests;

pub use dsn::Dsn;
pub use envelope::{parse as parse_envelope, write_envelope, Envelope, EnvelopeError, Item};
pub use from_otlp::{otlp_to_chunks, ChunkResult, Dropped, ExportOptions};
pub use outgoing::ProfileChunk as OutgoingChunk;
pub use platform::ProfileType;
pub use profile_v1::profile_v1_to_otlp;
pub use to_otlp::chunk_to_otlp;

use crate::model::profiles;
use crate::proto::ProfilesData;

/// `original_payload_format` of a converted `profile_chunk`.
pub const ORIGINAL_FORMAT_CHUNK: &str = "sentry_profile_chunk";
/// `original_payload_format` of a converted v1 `profile`.
pub const ORIGINAL_FORMAT_V1: &str = "sentry_profile";

/// Relay's limit on one profile item, and the exporter's on one chunk.
pub const MAX_ITEM_SIZE: usize = 50 * 1024 * 1024;

/// Why an item or samples were refused. Item-level reasons are Relay's
/// outcome reasons (`relay-profiling/src/outcomes.rs`) where Relay has one.
pub mod reason {
    pub const INVALID_JSON: &str = "profiling_invalid_json";
    pub const MALFORMED_STACKS: &str = "profiling_malformed_stacks";
    pub const MALFORMED_SAMPLES: &str = "profiling_malformed_samples";
    pub const NOT_ENOUGH_SAMPLES: &str = "profiling_not_enough_samples";
    pub const TOO_LARGE: &str = "profiling_too_large";
    pub const PLATFORM_NOT_SUPPORTED: &str = "profiling_platform_not_supported";
    /// The item header's `platform` names another profile type (ui or
    /// backend) than the payload's, which Relay refuses with this reason.
    pub const INVALID_PROFILE_TYPE: &str = "profiling_invalid_profile_type";
    pub const NO_TRANSACTION: &str = "profiling_no_transaction_associated";
    pub const INVALID_TRANSACTION_METADATA: &str = "profiling_invalid_transaction_metadata";
    pub const DURATION_TOO_LONG: &str = "profiling_duration_is_too_long";

    // Samples dropped from an accepted profile or chunk.
    /// v1: sample outside `[relative_start_ns, relative_end_ns]` of its transaction.
    pub const OUTSIDE_TRANSACTION: &str = "outside_transaction";
    /// Relay drops threads with at most one non-idle sample.
    pub const SINGLE_SAMPLE_THREAD: &str = "single_sample_thread";
    /// Expansion of aggregated samples beyond `max_samples_per_chunk`.
    pub const MAX_SAMPLES_PER_CHUNK: &str = "max_samples_per_chunk";
    /// A sample type that cannot become wall-clock samples (bytes, ...).
    pub const UNSUPPORTED_SAMPLE_TYPE: &str = "unsupported_sample_type";
    /// Another Profile of the scope holds the same samples under another
    /// sample type (pprof `samples/count` and `cpu/nanoseconds`); one is sent.
    pub const DUPLICATE_SAMPLE_TYPE: &str = "duplicate_sample_type";
    /// A sample with neither timestamps nor a positive value.
    pub const EMPTY_SAMPLE: &str = "empty_sample";
    /// A profile whose times lie past 2262 (int64 nanoseconds) or whose
    /// duration is over a day: no recording, and unbounded work to convert.
    pub const IMPLAUSIBLE_TIME: &str = "implausible_time";
    /// Aggregated values worth more samples than 1 kHz per stack over the
    /// profile's duration.
    pub const IMPLAUSIBLE_VALUES: &str = "implausible_values";
}

/// Receiver-side settings of the conversion.
#[derive(Debug, Clone)]
pub struct ReceiveOptions {
    /// `service.name`; else the part of `release` before `@`.
    pub service_name: Option<String>,
    /// Keep the item bytes in `Profile.original_payload`.
    pub include_original_payload: bool,
    /// Items above this many bytes are refused ([`reason::TOO_LARGE`]).
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
    pub dropped: Vec<(&'static str, u64)>,
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
    pub reason: &'static str,
    pub message: String,
}

impl ItemError {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}
