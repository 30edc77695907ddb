//! Which gRPC failures are worth retrying: the Collector's OTLP exporter table.

use tonic::{Code, Status};
use tonic_types::StatusExt;

use profcol_pipeline::component::ExportError;

/// Retryable codes as in the Collector (`otlpexporter.shouldRetry`);
/// `RESOURCE_EXHAUSTED` only when the server sent `RetryInfo`.
pub fn is_retryable(code: Code, has_retry_info: bool) -> bool {
    match code {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => true,
        Code::ResourceExhausted => has_retry_info,
        _ => false,
    }
}

/// The code the Collector would see. tonic reports a connection that broke
/// under the call (reset, closed before the response) as `UNKNOWN
/// "transport error"`, carrying the local error as its source; gRPC-Go
/// reports transport failures as `UNAVAILABLE`, which is retried. An
/// `UNKNOWN` the peer sent has no source and stays permanent.
pub fn effective_code(status: &Status) -> Code {
    let local = std::error::Error::source(status).is_some();
    if status.code() == Code::Unknown && local {
        Code::Unavailable
    } else {
        status.code()
    }
}

/// Maps a failed call to an [`ExportError`], honouring `RetryInfo.retry_delay`.
pub fn classify(status: &Status) -> ExportError {
    let retry_after = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .filter(|d| !d.is_zero());
    let code = effective_code(status);
    let mut message = format!("rpc error: code = {code:?} desc = {}", status.message());
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        message.push_str(&format!(": {e}"));
        source = e.source();
    }
    let has_info = status.get_details_retry_info().is_some();
    if is_retryable(code, has_info) {
        ExportError::Retryable {
            message,
            retry_after,
        }
    } else {
        ExportError::Permanent { message }
    }
}
