//! The `akamai` detector (the Collector's `internal/akamai`, over Linode's
//! `go-metadata` client): a Linode's cloud and host attributes from the
//! Akamai Cloud (Linode) metadata service at the link-local address: a
//! token (`PUT /v1/token`, answered `["<token>"]`), then
//! `GET /v1/instance` with it.
//!
//! As the Collector's: its client takes a token when the detector is made,
//! so where none is given (off Akamai Cloud) the detector fails to be made
//! and the start fails, whatever `fail_on_missing_metadata`; profcol asks
//! once, within `timeout`. Each detection then takes a new token (the
//! client counts its token expired at once) and reads the instance; if
//! that fails it finds nothing, unless `fail_on_missing_metadata`.
//!
//! Unlike the client, profcol counts an answer that is not a 2xx as an
//! error even when it lists no errors (the client reads it as an empty
//! instance and the detector sets empty attributes and `host.id` `0`).

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::MetadataPlan;
use super::detect::{enabled, text};
use super::http::call;

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 9] = [
    ("cloud.account.id", true),
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.region", true),
    ("host.id", true),
    ("host.image.id", true),
    ("host.image.name", true),
    ("host.name", true),
    ("host.type", true),
];

/// The client's token lifetime.
const TOKEN_EXPIRY_SECONDS: &str = "3600";

/// The instance's fields the detector reads (`InstanceData`); a missing
/// or `null` field is empty, as with Go's decoder.
#[derive(Deserialize, Default)]
struct Instance {
    id: Option<i64>,
    label: Option<String>,
    region: Option<String>,
    r#type: Option<String>,
    image: Option<Image>,
    account_euuid: Option<String>,
}

#[derive(Deserialize, Default)]
struct Image {
    id: Option<String>,
    label: Option<String>,
}

/// The API's error answer.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ApiError {
    errors: Vec<Reason>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Reason {
    reason: String,
    field: String,
}

/// A token from the service at `at` (`host:port`), or the client's
/// error.
pub(super) async fn token(at: &str) -> Result<String, String> {
    let generate = async {
        let (status, body) = call(
            at,
            hyper::Method::PUT,
            "/v1/token",
            Some(("Metadata-Token-Expiry-Seconds", TOKEN_EXPIRY_SECONDS)),
            None,
        )
        .await?;
        if !(200..300).contains(&status) {
            return Err("no token returned from API".to_string());
        }
        let tokens: Vec<String> = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        tokens
            .into_iter()
            .next()
            .ok_or_else(|| "no token returned from API".to_string())
    };
    generate
        .await
        .map_err(|e| format!("failed to generate metadata token: {e}"))
}

/// The error that fails the detector's making: no token.
pub(super) fn setup_error(e: &str) -> String {
    format!("failed to refresh metadata token: {e}")
}

pub(super) async fn detect(plan: &MetadataPlan<9>, at: &str) -> Result<Vec<KeyValue>, String> {
    let inst = match instance(at).await {
        Ok(i) => i,
        Err(e) if plan.fail_on_missing_metadata => {
            return Err(format!("akamai metadata unavailable: {e}"))
        }
        Err(e) => {
            tracing::debug!(error = %e, "Akamai detector: not running on Akamai or metadata unavailable");
            return Ok(Vec::new());
        }
    };
    let image = inst.image.unwrap_or_default();
    // semconv v1.40.0's values, the Collector v0.161.0's.
    let values = [
        inst.account_euuid,
        Some("akamai_cloud".to_string()),
        Some("akamai_cloud.compute".to_string()),
        inst.region,
        Some(inst.id.unwrap_or_default().to_string()),
        image.id,
        image.label,
        inst.label,
        inst.r#type,
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| Some(text(v.unwrap_or_default()))),
        &plan.attributes,
    ))
}

/// `GET /v1/instance` with a new token; errors as the client words them
/// (`[<status>] <reasons>`, `[000]` when there was no answer).
async fn instance(at: &str) -> Result<Instance, String> {
    let token = token(at).await.map_err(|e| format!("[000] {e}"))?;
    let (status, body) = call(
        at,
        hyper::Method::GET,
        "/v1/instance",
        Some(("Metadata-Token", &token)),
        None,
    )
    .await
    .map_err(|e| format!("[000] {e}"))?;
    if !(200..300).contains(&status) {
        let reasons = serde_json::from_slice::<ApiError>(&body)
            .unwrap_or_default()
            .errors
            .into_iter()
            .map(|r| match r.field.as_str() {
                "" => r.reason,
                f => format!("[{f}] {}", r.reason),
            })
            .collect::<Vec<_>>();
        let why = if reasons.is_empty() {
            String::from_utf8_lossy(&body).trim().to_string()
        } else {
            reasons.join("; ")
        };
        return Err(format!("[{status:03}] {why}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("[000] {e}"))
}
