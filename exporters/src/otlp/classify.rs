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

/// Maps a failed call to an [`ExportError`], honouring `RetryInfo.retry_delay`.
pub fn classify(status: &Status) -> ExportError {
    let retry_after = status
        .get_details_retry_info()
        .and_then(|r| r.retry_delay)
        .filter(|d| !d.is_zero());
    let message = format!(
        "rpc error: code = {:?} desc = {}",
        status.code(),
        status.message()
    );
    let has_info = status.get_details_retry_info().is_some();
    if is_retryable(status.code(), has_info) {
        ExportError::Retryable {
            message,
            retry_after,
        }
    } else {
        ExportError::Permanent { message }
    }
}
