//! The `nova` detector (the Collector's `internal/openstack/nova`, over
//! `internal/metadataproviders/openstack/nova`): an OpenStack instance's
//! cloud and host attributes from the Nova metadata service at the
//! link-local address: `/openstack/latest/meta_data.json`, and the
//! instance type from the EC2-compatible `/latest/meta-data/instance-type`
//! when it answers. Without a document naming the instance (`uuid`) it
//! finds nothing, unless `fail_on_missing_metadata` (its own, deprecated,
//! or the top-level one); a document without `hostname` is an error.
//!
//! The Collector's provider fetches the document three times (for the
//! instance id, the document, the host name); profcol reads it once.
//! `meta` keys matched by `labels` are added in their sorted order (the
//! Collector's in Go's random map order).

use std::collections::BTreeMap;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::NovaPlan;
use super::detect::{enabled, string_kv, text};
use super::http::call;

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 7] = [
    ("host.type", true),
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.account.id", true),
    ("cloud.availability_zone", true),
    ("host.id", true),
    ("host.name", true),
];

/// The prefix of the attributes `labels` selects.
const LABEL_PREFIX: &str = "openstack.nova.meta.";

/// The document's fields the provider reads (`nova.Document`); a missing
/// or `null` field is empty, as with Go's decoder.
#[derive(Deserialize, Default)]
struct Document {
    availability_zone: Option<String>,
    hostname: Option<String>,
    meta: Option<BTreeMap<String, String>>,
    project_id: Option<String>,
    uuid: Option<String>,
}

/// `at` is the service's `host:port`.
pub(super) async fn detect(plan: &NovaPlan, at: &str) -> Result<Vec<KeyValue>, String> {
    let doc = match document(at).await {
        Ok(d) => d,
        Err(e) if plan.fail_on_missing_metadata => return Err(e),
        Err(e) => {
            tracing::debug!(error = %e, "OpenStack Nova metadata unavailable");
            return Ok(Vec::new());
        }
    };
    let hostname = doc.hostname.unwrap_or_default();
    if hostname.is_empty() {
        return Err("failed getting hostname: hostname not found in metadata".into());
    }
    // Optional: not every cloud serves the EC2-compatible metadata.
    let host_type = match get_text(at, "/latest/meta-data/instance-type").await {
        Ok(t) => Some(t).filter(|t| !t.is_empty()),
        Err(e) => {
            tracing::debug!(error = %e, "EC2-compatible instance type unavailable");
            None
        }
    };
    let values = [
        host_type,
        Some("openstack".to_string()),
        Some("openstack_nova".to_string()),
        Some(doc.project_id.unwrap_or_default()),
        Some(doc.availability_zone.unwrap_or_default()),
        doc.uuid,
        Some(hostname),
    ];
    let mut out = enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        &plan.attributes,
    );
    if !plan.labels.is_empty() {
        for (k, v) in doc.meta.unwrap_or_default() {
            if plan.labels.iter().any(|r| r.is_match(&k)) {
                out.push(string_kv(&format!("{LABEL_PREFIX}{k}"), v));
            }
        }
    }
    Ok(out)
}

/// The metadata document, naming the instance.
async fn document(at: &str) -> Result<Document, String> {
    let (status, body) = call(
        at,
        hyper::Method::GET,
        "/openstack/latest/meta_data.json",
        None,
        None,
    )
    .await
    .map_err(|e| format!("failed to query nova metadata service: {e}"))?;
    if status != 200 {
        let body = String::from_utf8_lossy(&body);
        return Err(format!("metadata service returned {status}: {body}"));
    }
    let doc: Document = serde_json::from_slice(&body)
        .map_err(|e| format!("failed to decode nova metadata: {e}"))?;
    if doc.uuid.as_deref().unwrap_or_default().is_empty() {
        return Err("instance ID (uuid) not found in metadata".into());
    }
    Ok(doc)
}

async fn get_text(at: &str, path: &str) -> Result<String, String> {
    let (status, body) = call(at, hyper::Method::GET, path, None, None)
        .await
        .map_err(|e| format!("metadata GET {path}: {e}"))?;
    let body = String::from_utf8_lossy(&body).into_owned();
    if status != 200 {
        return Err(format!("metadata {path} returned {status}: {body}"));
    }
    Ok(body)
}
