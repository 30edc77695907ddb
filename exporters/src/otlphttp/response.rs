//! What an OTLP/HTTP response means, as the Collector's `otlphttp` exporter
//! reads it: 2xx delivered (with a partial success in the body, if any);
//! 429, 502, 503 and 504 retried, after `Retry-After` for 429 and 503; any
//! other status permanent. An error body is a `google.rpc.Status` whose
//! message is kept.

use std::time::Duration;

use prost::Message;

use profcol_model::proto::ExportProfilesServiceResponse;
use profcol_pipeline::component::ExportError;

/// Response bodies past this are cut: enough for any status or partial success.
const MAX_BODY: usize = 64 * 1024;

#[derive(Debug)]
pub(super) enum Answer {
    Delivered {
        rejected_profiles: i64,
        message: String,
    },
    Failed(ExportError),
}

/// Reads at most [`MAX_BODY`] of a response; a body that breaks off is
/// read as what arrived.
pub(super) async fn read_limited(mut resp: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = MAX_BODY - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_BODY {
            break;
        }
    }
    body
}

pub(super) fn answer(
    status: http::StatusCode,
    content_type: &str,
    body: &[u8],
    retry_after: Option<Duration>,
) -> Answer {
    let json = is_json(content_type);
    if status.is_success() {
        let (rejected_profiles, message) = partial_success(json, body);
        return Answer::Delivered {
            rejected_profiles,
            message,
        };
    }
    let mut message = format!("HTTP {}", status.as_u16());
    if let Some(m) = status_message(json, body).filter(|m| !m.is_empty()) {
        message = format!("{message}: {m}");
    }
    match status.as_u16() {
        429 | 502 | 503 | 504 => Answer::Failed(ExportError::Retryable {
            message,
            retry_after: retry_after.filter(|_| matches!(status.as_u16(), 429 | 503)),
        }),
        _ => Answer::Failed(ExportError::Permanent { message }),
    }
}

fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// `rejected_profiles` and `error_message`; an empty or unreadable body
/// is a full success (the Collector ignores what it cannot read there).
fn partial_success(json: bool, body: &[u8]) -> (i64, String) {
    if body.is_empty() {
        return (0, String::new());
    }
    if json {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let p = v.get("partialSuccess").or_else(|| v.get("partial_success"));
        let Some(p) = p else {
            return (0, String::new());
        };
        let rejected = p
            .get("rejectedProfiles")
            .or_else(|| p.get("rejected_profiles"));
        let rejected = match rejected {
            Some(serde_json::Value::String(s)) => s.parse().unwrap_or(0),
            Some(n) => n.as_i64().unwrap_or(0),
            None => 0,
        };
        let message = p
            .get("errorMessage")
            .or_else(|| p.get("error_message"))
            .and_then(|m| m.as_str())
            .unwrap_or_default();
        return (rejected, message.to_owned());
    }
    match ExportProfilesServiceResponse::decode(body) {
        Ok(r) => r.partial_success.map_or((0, String::new()), |p| {
            (p.rejected_profiles, p.error_message)
        }),
        Err(_) => (0, String::new()),
    }
}

/// The message of a `google.rpc.Status` body; for a body that is not one
/// (a proxy's HTML page), its first line.
fn status_message(json: bool, body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    if json {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
            if let Some(m) = v.get("message").and_then(|m| m.as_str()) {
                return Some(m.to_owned());
            }
        }
    } else if let Ok(s) = tonic_types::pb::Status::decode(body) {
        if !s.message.is_empty() {
            return Some(s.message);
        }
    }
    let text = String::from_utf8_lossy(body);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    const PROTO: &str = "application/x-protobuf";
    const JSON: &str = "application/json; charset=utf-8";

    fn status_body(message: &str) -> Vec<u8> {
        tonic_types::pb::Status {
            code: 8,
            message: message.into(),
            details: Vec::new(),
        }
        .encode_to_vec()
    }

    #[test]
    fn success_reads_the_partial_success_in_either_encoding() {
        let delivered = |a: Answer| match a {
            Answer::Delivered {
                rejected_profiles,
                message,
            } => (rejected_profiles, message),
            Answer::Failed(e) => panic!("{e}"),
        };
        assert_eq!(
            delivered(answer(StatusCode::OK, PROTO, &[], None)),
            (0, String::new())
        );
        let proto = ExportProfilesServiceResponse {
            partial_success: Some(profcol_model::proto::ExportProfilesPartialSuccess {
                rejected_profiles: 3,
                error_message: "too old".into(),
            }),
        }
        .encode_to_vec();
        let json = br#"{"partialSuccess":{"rejectedProfiles":"3","errorMessage":"too old"}}"#;
        for (ct, body) in [(PROTO, proto.as_slice()), (JSON, json.as_slice())] {
            assert_eq!(
                delivered(answer(StatusCode::OK, ct, body, None)),
                (3, "too old".into()),
                "{ct}"
            );
        }
        // A body that is not a response is a full success, as in the Collector.
        let junk = answer(StatusCode::ACCEPTED, JSON, b"<html>", None);
        assert_eq!(delivered(junk), (0, String::new()));
    }

    #[test]
    fn retryable_statuses_are_the_collectors_and_keep_the_message() {
        let wait = Some(Duration::from_secs(7));
        for code in [429, 502, 503, 504] {
            let s = StatusCode::from_u16(code).unwrap();
            let Answer::Failed(ExportError::Retryable {
                message,
                retry_after,
            }) = answer(s, PROTO, &status_body("busy"), wait)
            else {
                panic!("{code} should be retried");
            };
            assert_eq!(message, format!("HTTP {code}: busy"));
            // Only throttling statuses carry the server's delay.
            assert_eq!(retry_after.is_some(), matches!(code, 429 | 503), "{code}");
        }
        for code in [400, 401, 403, 404, 413, 415, 500, 501, 301] {
            let s = StatusCode::from_u16(code).unwrap();
            assert!(
                matches!(answer(s, JSON, br#"{"code":3,"message":"bad"}"#, wait),
                    Answer::Failed(ExportError::Permanent { message }) if message == format!("HTTP {code}: bad")),
                "{code}"
            );
        }
        let proxy = answer(
            StatusCode::BAD_GATEWAY,
            "text/html",
            b"\n<h1>502 Bad Gateway</h1>\n",
            None,
        );
        assert!(
            matches!(proxy, Answer::Failed(ExportError::Retryable { message, .. }) if message == "HTTP 502: <h1>502 Bad Gateway</h1>")
        );
    }
}
