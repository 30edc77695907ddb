//! The `vultr` detector (the Collector's `internal/vultr`, over
//! OpenTelemetry Go's `detectors/vultr` v0.18.0): the instance's cloud and
//! host attributes from the Vultr metadata service, one `GET /v1.json`
//! (2s) as the SDK detector asks it.
//!
//! As the SDK detector: no answer, or a 4xx (something else answering the
//! address), is no Vultr instance: nothing, or with
//! `fail_on_missing_metadata` (top-level, or the deprecated
//! `vultr.fail_on_missing_metadata`) the Collector's `vultr metadata
//! unavailable`; another status, or a body that is not the document, is
//! an error of the service: nothing, or that error. A field the document
//! lacks leaves its attribute out. `host.id` is `instance-v2-id`, else
//! `instanceid`; `cloud.region` the region code in lower case. Unlike Go's
//! client profcol follows no redirect (a 3xx is the service's error).

use std::time::Duration;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::MetadataPlan;
use super::detect::{enabled, text};
use super::http::call;

/// The attributes in the order the Collector sets them, the SDK
/// resource's (sorted by key), and whether each is on by default (its
/// `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 5] = [
    ("cloud.platform", false),
    ("cloud.provider", true),
    ("cloud.region", true),
    ("host.id", true),
    ("host.name", true),
];

const PATH: &str = "/v1.json";
/// The SDK detector's `http.Client` timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The SDK detector's `metadataResponse`; a missing or `null` field is
/// empty. Keys are matched exactly, not also in another case as Go's.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    hostname: Option<String>,
    instanceid: Option<String>,
    #[serde(rename = "instance-v2-id")]
    instance_v2_id: Option<String>,
    region: Option<Region>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Region {
    regioncode: Option<String>,
}

/// Why there is no document.
enum Missing {
    /// Not a Vultr instance.
    NotVultr(String),
    /// The service failed.
    Failed(String),
}

pub(super) async fn detect(plan: &MetadataPlan<5>, at: &str) -> Result<Vec<KeyValue>, String> {
    let fail = plan.fail_on_missing_metadata;
    let md = match metadata(at).await {
        Ok(md) => md,
        Err(Missing::NotVultr(e)) => {
            tracing::debug!(error = %e, "Vultr detector: metadata unavailable or not running on a Vultr instance");
            if fail {
                return Err("vultr metadata unavailable".into());
            }
            return Ok(Vec::new());
        }
        Err(Missing::Failed(e)) => {
            tracing::debug!(error = %e, "Vultr metadata unavailable");
            if fail {
                return Err(e);
            }
            return Ok(Vec::new());
        }
    };
    let present = |v: Option<String>| v.filter(|v| !v.is_empty());
    let id = present(md.instance_v2_id).or(present(md.instanceid));
    let region = present(md.region.and_then(|r| r.regioncode)).map(|r| r.to_lowercase());
    let values = [
        Some("vultr.cloud_compute".to_string()),
        Some("vultr".to_string()),
        region,
        id,
        present(md.hostname),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        &plan.attributes,
    ))
}

async fn metadata(at: &str) -> Result<Metadata, Missing> {
    let (status, body) = call(at, hyper::Method::GET, PATH, None, Some(REQUEST_TIMEOUT))
        .await
        .map_err(|e| Missing::NotVultr(e.go()))?;
    if !(200..300).contains(&status) {
        let e = format!("metadata request returned status {status}");
        return Err(if (400..500).contains(&status) {
            Missing::NotVultr(e)
        } else {
            Missing::Failed(e)
        });
    }
    // `null` leaves Go's value as it was: empty.
    serde_json::from_slice::<Option<Metadata>>(&body)
        .map(Option::unwrap_or_default)
        .map_err(|e| Missing::Failed(e.to_string()))
}
