//! The `upcloud` detector (the Collector's `internal/upcloud`, over
//! `internal/metadataproviders/upcloud`): the server's `cloud.provider`
//! (the metadata's `cloud_name`), `cloud.region`, `host.id` and
//! `host.name` from the UpCloud metadata service, one `GET
//! /metadata/v1.json` as the provider asks it (2s). Off UpCloud it finds
//! nothing, unless `fail_on_missing_metadata` (top-level, or the
//! deprecated `upcloud.fail_on_missing_metadata`).
//!
//! As the Collector's, every attribute is set from the document as it is,
//! empty where the document lacks the field. The answer is decoded with
//! serde, only the fields the detector reads (keys matched exactly, not
//! also in another case as Go's).

use std::time::Duration;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::MetadataPlan;
use super::detect::{enabled, text};
use super::http::{call, status_text};

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 4] = [
    ("cloud.provider", true),
    ("cloud.region", true),
    ("host.id", true),
    ("host.name", true),
];

const PATH: &str = "/metadata/v1.json";
/// The provider's `http.Client` timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The provider's `Metadata`; a missing or `null` field is empty.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    cloud_name: Option<String>,
    hostname: Option<String>,
    instance_id: Option<String>,
    region: Option<String>,
}

pub(super) async fn detect(plan: &MetadataPlan<4>, at: &str) -> Result<Vec<KeyValue>, String> {
    let md = match metadata(at).await {
        Ok(md) => md,
        // The provider's error as it is, as the Collector returns it.
        Err(e) if plan.fail_on_missing_metadata => return Err(e),
        Err(e) => {
            tracing::debug!(error = %e, "Upcloud metadata unavailable");
            return Ok(Vec::new());
        }
    };
    let values = [md.cloud_name, md.region, md.instance_id, md.hostname];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| Some(text(v.unwrap_or_default()))),
        &plan.attributes,
    ))
}

/// The server's metadata from the service at `at` (`host:port`), with the
/// provider's errors.
async fn metadata(at: &str) -> Result<Metadata, String> {
    let (status, body) = call(at, hyper::Method::GET, PATH, None, Some(REQUEST_TIMEOUT))
        .await
        .map_err(|e| format!("query Upcloud metadata: {}", e.go()))?;
    if status != 200 {
        return Err(format!(
            "Upcloud metadata replied with status code: {}",
            status_text(status)
        ));
    }
    // `null` leaves Go's value as it was: empty.
    serde_json::from_slice::<Option<Metadata>>(&body)
        .map(Option::unwrap_or_default)
        .map_err(|e| format!("decode Upcloud metadata: {e}"))
}
