//! pprof (`perftools.profiles.Profile`, gzip-compressed on disk) <-> OTLP.
//!
//! OTLP -> pprof: [`plan_files`] decides which profiles share a file (one
//! resource, one sample type, or several that line up with
//! `merge_sample_types`), then [`write_pprof`] / [`write_pprof_gzip`] stream
//! each file to a writer without building the pprof message in memory: pprof
//! has no stack table, so a sample repeats its whole stack and the file is
//! several times larger than the OTLP it came from.
//!
//! pprof -> OTLP: [`decode_pprof`] (plain or gzip) and [`pprof_to_otlp`] /
//! [`import_pprof`]. pprof fields OTLP has no field for travel as the
//! semantic-convention attributes in [`keys`], so a round trip keeps them.
//!
//! Pure: no I/O beyond the writer handed in.

mod encode;
mod gzip;
mod import;
pub mod keys;
mod plan;
pub mod proto;
mod strings;

#[cfg(test)]
mod roundtrip_tests;
#[cfg(test)]
mod tests;

pub use encode::{encode_pprof_gzip, to_pprof, write_pprof, write_pprof_gzip};
pub use import::{decode_pprof, decode_pprof_limited, import_pprof, pprof_to_otlp};
pub use plan::{plan_files, PprofFile, ProfileRef, SampleType};

/// gzip level used when none is configured: level 1 costs a fraction of the
/// default 6 for files a few percent larger (see DESIGN.md, performance).
pub const DEFAULT_GZIP_LEVEL: u32 = 1;

/// How OTLP profiles become pprof files.
#[derive(Debug, Clone, PartialEq)]
pub struct ToPprofOptions {
    /// Resource attributes copied onto every sample as labels.
    pub resource_attributes_as_labels: Vec<String>,
    /// Put profiles of one resource with different sample types into one
    /// file when their samples line up.
    pub merge_sample_types: bool,
    /// Extra `comment` lines, after the ones naming the source.
    pub comments: Vec<String>,
}

impl Default for ToPprofOptions {
    fn default() -> Self {
        Self {
            resource_attributes_as_labels: vec![keys::SERVICE_NAME.to_owned()],
            merge_sample_types: false,
            comments: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PprofError {
    /// The OTLP data breaks the dictionary rules (an index out of range).
    #[error("invalid OTLP profiles: {0}")]
    InvalidOtlp(String),
    /// The pprof profile breaks profile.proto's rules.
    #[error("invalid pprof profile: {0}")]
    InvalidPprof(String),
    #[error("pprof profile does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    /// Reading gzip input failed (corrupt stream, over the size limit).
    #[error("pprof gzip stream: {0}")]
    Gzip(std::io::Error),
    /// The writer handed to the encoder failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
