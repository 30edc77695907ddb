//! The `digitalocean` detector (the Collector's `internal/digitalocean`,
//! over DigitalOcean's `go-metadata` client): the droplet's
//! `cloud.provider`, `host.id`, `host.name` and `cloud.region` from the
//! droplet metadata service, one `GET /metadata/v1.json` as the client
//! asks it (2s). Off DigitalOcean (no answer, another status than 200, a
//! body that is not the document) it finds nothing, unless
//! `fail_on_missing_metadata`.
//!
//! The answer is read as the client's `json.Decoder` reads it: its first
//! JSON value, only the fields the detector reads (keys matched exactly,
//! not also in another case as Go's).

use std::time::Duration;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text};
use super::http::{call, decode_first, status_text, CallError};

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 4] = [
    ("cloud.provider", true),
    ("host.id", true),
    ("host.name", true),
    ("cloud.region", true),
];

const PATH: &str = "/metadata/v1.json";
/// The client's `http.Client` timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The client quotes at most this much of a failed answer's body.
const MAX_ERROR_BODY: usize = 128;

/// The fields of `go-metadata`'s `Metadata` the detector reads; a
/// missing or `null` one is empty (0), as with Go's decoder.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    droplet_id: Option<i64>,
    hostname: Option<String>,
    region: Option<String>,
}

pub(super) async fn detect(on: &[bool; 4], fail: bool, at: &str) -> Result<Vec<KeyValue>, String> {
    let md = match metadata(at).await {
        Ok(md) => md,
        Err(e) if fail => return Err(format!("digitalocean metadata unavailable: {e}")),
        Err(e) => {
            tracing::debug!(error = %e, "DigitalOcean detector: not running on DigitalOcean or metadata unavailable");
            return Ok(Vec::new());
        }
    };
    let values = [
        "digitalocean".to_string(),
        md.droplet_id.unwrap_or_default().to_string(),
        md.hostname.unwrap_or_default(),
        md.region.unwrap_or_default(),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| Some(text(v))),
        on,
    ))
}

/// The droplet's metadata document from the service at `at` (`host:port`).
async fn metadata(at: &str) -> Result<Metadata, String> {
    let (status, body) = call(at, hyper::Method::GET, PATH, None, Some(REQUEST_TIMEOUT))
        .await
        .map_err(CallError::go)?;
    if status != 200 {
        // As the client's `makeError`: the body's start, else the status.
        let mut quoted =
            String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)]).into_owned();
        if body.len() >= MAX_ERROR_BODY {
            quoted.push_str("... (elided)");
        } else if body.is_empty() {
            quoted = status_text(status);
        }
        return Err(format!(
            "unexpected response from metadata API, status {status}: {quoted}"
        ));
    }
    // A `null` document leaves Go's value as it was: empty.
    decode_first::<Option<Metadata>>(&body).map(Option::unwrap_or_default)
}
