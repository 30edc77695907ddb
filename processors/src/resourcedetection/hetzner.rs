//! The `hetzner` detector (the Collector's `internal/hetzner`, over
//! OpenTelemetry Go's `detectors/hetzner` v0.18.0 and `hcloud-go`'s
//! metadata client v2.47.0): the server's cloud and host attributes from
//! the Hetzner Cloud metadata service under `/hetzner/v1/metadata`, each
//! a `GET` of its own (5s), the answer's text trimmed.
//!
//! As the SDK detector: a server whose `/hostname` does not answer 2xx
//! with a name is no Hetzner Cloud server, and the detector finds nothing
//! (with `fail_on_missing_metadata`, the Collector's `hetzner metadata
//! unavailable`); on one, a value that cannot be read (or an instance id
//! that is not a number) is left out, even with `fail_on_missing_metadata`,
//! which covers an unusable service, not a field. The SDK asks `/hostname`
//! twice (its probe, then the value); profcol once.

use std::time::Duration;

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text};
use super::http::{call, CallError};

/// The attributes in the order the Collector sets them, the SDK
/// resource's (sorted by key), and whether each is on by default (its
/// `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 6] = [
    ("cloud.availability_zone", true),
    ("cloud.platform", false),
    ("cloud.provider", true),
    ("cloud.region", true),
    ("host.id", true),
    ("host.name", true),
];

const BASE: &str = "/hetzner/v1/metadata";
/// The client's default timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const USER_AGENT: &str = "hcloud-go/2.47.0";

pub(super) async fn detect(on: &[bool; 6], fail: bool, at: &str) -> Result<Vec<KeyValue>, String> {
    let hostname = match get(at, "/hostname").await {
        Ok(h) if !h.is_empty() => h,
        other => {
            if let Err(e) = other {
                tracing::debug!(error = %e, "Hetzner detector: not running on a Hetzner Cloud server");
            }
            if fail {
                return Err("hetzner metadata unavailable".into());
            }
            return Ok(Vec::new());
        }
    };
    let value = |what: &str, r: Result<String, String>| match r {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::debug!(error = %e, "Hetzner detector: no {what}");
            None
        }
    };
    let id = get(at, "/instance-id").await.and_then(|id| {
        id.parse::<i64>()
            .map(|n| n.to_string())
            .map_err(|e| format!("strconv.ParseInt: parsing {id:?}: {e}"))
    });
    let id = value("instance ID", id);
    let region = value("region", get(at, "/region").await);
    let zone = value("availability zone", get(at, "/availability-zone").await);
    let values = [
        zone,
        Some("hetzner.cloud_server".to_string()),
        Some("hetzner".to_string()),
        region,
        id,
        Some(hostname),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        on,
    ))
}

/// The client's `get`: the answer's text, trimmed, of a 2xx.
async fn get(at: &str, path: &str) -> Result<String, String> {
    let path = format!("{BASE}{path}");
    let (status, body) = call(
        at,
        hyper::Method::GET,
        &path,
        Some(("User-Agent", USER_AGENT)),
        Some(REQUEST_TIMEOUT),
    )
    .await
    .map_err(CallError::go)?;
    if !(200..300).contains(&status) {
        return Err(format!("response status was {status}"));
    }
    Ok(String::from_utf8_lossy(&body).trim().to_string())
}
