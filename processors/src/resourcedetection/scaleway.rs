//! The `scaleway` detector (the Collector's `internal/scaleway`, over
//! `scaleway-sdk-go` v1.0.0-beta.37's `instance.MetadataAPI`): the
//! instance's cloud and host attributes from the Scaleway metadata
//! service, as the SDK asks it: a `GET /` of `169.254.42.42`, then of
//! `[fd00:42::42]`, the first answering 200 being the service (else the
//! first), then `GET /conf?format=json` there (3s each).
//!
//! As the SDK, the document's status is not looked at: a body that is not
//! the document (no service, another cloud's 404 page) is missing
//! metadata, and the detector finds nothing, or with
//! `fail_on_missing_metadata` the Collector's error. Every attribute is
//! set from the document as it is (empty where it lacks the field);
//! `cloud.region` is the zone without its last `-` part, when it has one.
//! The answer is read as Go's `json.Decoder` reads it (its first JSON
//! value), only the fields the detector reads, keys matched exactly.
//!
//! The SDK's probe panics (a nil response closed) when an address does
//! not answer at all, off Scaleway: profcol goes on to the next address.

use std::time::Duration;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text};
use super::http::{call, decode_first};

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 10] = [
    ("cloud.account.id", true),
    ("cloud.availability_zone", true),
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.region", true),
    ("host.id", true),
    ("host.image.id", true),
    ("host.image.name", true),
    ("host.name", true),
    ("host.type", true),
];

/// The SDK sets `http.DefaultClient`'s timeout to this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
const PATH: &str = "/conf?format=json";

/// The fields of the SDK's `Metadata` the detector reads; a missing or
/// `null` one is empty.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    id: Option<String>,
    name: Option<String>,
    organization: Option<String>,
    commercial_type: Option<String>,
    image: Option<Image>,
    location: Option<Location>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Image {
    id: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Location {
    zone_id: Option<String>,
}

/// `addresses`: the service's IPv4 and IPv6 addresses (`host:port`).
pub(super) async fn detect(
    on: &[bool; 10],
    fail: bool,
    addresses: &[String; 2],
) -> Result<Vec<KeyValue>, String> {
    let md = match metadata(addresses).await {
        Ok(md) => md,
        Err(e) if fail => return Err(format!("scaleway metadata unavailable: {e}")),
        Err(e) => {
            tracing::debug!(error = %e, "Scaleway detector: not running on Scaleway or metadata unavailable");
            return Ok(Vec::new());
        }
    };
    let s = |v: Option<String>| Some(v.unwrap_or_default());
    let image = md.image.unwrap_or_default();
    let zone = md.location.unwrap_or_default().zone_id.unwrap_or_default();
    let region = region(&zone).map(str::to_string);
    let values = [
        s(md.organization),
        Some(zone),
        s(Some("scaleway_cloud".into())),
        s(Some("scaleway_cloud_compute".into())),
        region,
        s(md.id),
        s(image.id),
        s(image.name),
        s(md.name),
        s(md.commercial_type),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        on,
    ))
}

/// The region of a zone (`fr-par-1`: `fr-par`), as the Collector's
/// `zoneToRegion`.
pub(super) fn region(zone: &str) -> Option<&str> {
    match zone.rfind('-') {
        Some(i) if i > 0 => Some(&zone[..i]),
        _ => None,
    }
}

async fn metadata(addresses: &[String; 2]) -> Result<Metadata, String> {
    let mut at = &addresses[0];
    for a in addresses {
        let probe = call(a, hyper::Method::GET, "/", None, Some(REQUEST_TIMEOUT)).await;
        if matches!(probe, Ok((200, _))) {
            at = a;
            break;
        }
    }
    let (_, body) = call(at, hyper::Method::GET, PATH, None, Some(REQUEST_TIMEOUT))
        .await
        .map_err(|e| format!("scaleway-sdk-go: error getting metadataURL: {}", e.go()))?;
    // A `null` document leaves Go's value as it was: empty.
    decode_first::<Option<Metadata>>(&body)
        .map(Option::unwrap_or_default)
        .map_err(|e| format!("scaleway-sdk-go: error decoding metadata: {e}"))
}
