//! One request as the bytes the file gets, framed as the Collector's
//! fileexporter v0.161.0 frames it (without its `nativeCompression` gate):
//! - `json`: the OTLP/JSON request and a newline;
//! - `proto`: the protobuf request after its length as 4 big-endian bytes;
//! - with `compression: zstd`, in either format: the request compressed
//!   alone into one zstd frame, after the frame's length as 4 big-endian
//!   bytes (so a JSON file is no longer lines).

use profcol_model::dictionary::Subset;
use profcol_model::proto::metrics::ExportMetricsServiceRequest;
use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_otlp::json as otlp_json;
use profcol_pipeline::component::ExportError;

use super::config::Format;

/// Encodes requests into records; owns the zstd context, reused for every
/// record.
pub(super) struct Encoder {
    format: Format,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl Encoder {
    pub(super) fn new(format: Format, zstd_level: Option<i32>) -> std::io::Result<Self> {
        let zstd = zstd_level
            .map(|level| {
                let mut c = zstd::bulk::Compressor::new(level)?;
                // klauspost/compress writes a checksum by default; the
                // frames match its layout.
                c.include_checksum(true)?;
                Ok::<_, std::io::Error>(c)
            })
            .transpose()?;
        Ok(Self { format, zstd })
    }

    /// The record of `src`.
    pub(super) fn record(&mut self, src: Source<'_>) -> Result<Vec<u8>, ExportError> {
        match (self.format, self.zstd.as_mut()) {
            (Format::Json, None) => {
                let mut line = src.json();
                line.push(b'\n');
                Ok(line)
            }
            (Format::Proto, None) => length_prefixed(&src.proto()),
            (Format::Json, Some(z)) => compressed(z, &src.json()),
            (Format::Proto, Some(z)) => compressed(z, &src.proto()),
        }
    }
}

/// What a record holds: a whole batch, or the part of one a group gets.
pub(super) enum Source<'a> {
    Batch(&'a ProfileBatch),
    Part(&'a Subset, &'a ProfilesData),
    /// A metrics request (metrics pipelines), framed the same way.
    Metrics(&'a ExportMetricsServiceRequest),
}

impl Source<'_> {
    fn json(&self) -> Vec<u8> {
        match self {
            Source::Batch(b) => otlp_json::encode(b.data()),
            Source::Part(s, data) => otlp_json::encode(&s.to_data(data)),
            // opentelemetry-proto's serde is OTLP/JSON (camelCase, 64-bit
            // integers as strings); it writes fields at their defaults too,
            // which OTLP/JSON readers take as absent.
            Source::Metrics(req) => serde_json::to_vec(req).unwrap_or_default(),
        }
    }

    fn proto(&self) -> bytes::Bytes {
        match self {
            Source::Batch(b) => b.encode_to_bytes(),
            Source::Part(s, data) => s.encode(data).into(),
            Source::Metrics(req) => prost::Message::encode_to_vec(*req).into(),
        }
    }
}

fn too_large() -> ExportError {
    ExportError::permanent("file exporter: a record larger than 4 GiB")
}

fn length_prefixed(body: &[u8]) -> Result<Vec<u8>, ExportError> {
    let len = u32::try_from(body.len()).map_err(|_| too_large())?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// `body` as one zstd frame after its length, compressed straight into
/// the record's buffer.
fn compressed(
    z: &mut zstd::bulk::Compressor<'static>,
    body: &[u8],
) -> Result<Vec<u8>, ExportError> {
    let mut out = vec![0u8; 4 + zstd::zstd_safe::compress_bound(body.len())];
    let n = z
        .compress_to_buffer(body, &mut out[4..])
        .map_err(|e| ExportError::permanent(format!("file exporter: zstd: {e}")))?;
    let len = u32::try_from(n).map_err(|_| too_large())?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out.truncate(4 + n);
    Ok(out)
}
