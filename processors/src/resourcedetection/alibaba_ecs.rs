//! The `alibaba_ecs` detector (the Collector's `internal/alibaba/ecs`, over
//! `internal/metadataproviders/alibaba/ecs`): the instance's cloud and host
//! attributes from the Alibaba Cloud ECS metadata service at
//! `100.100.100.200`, as the provider asks it: a session token
//! (`PUT /latest/api/token`), then each value from
//! `/latest/meta-data/<key>` with that token, all at once. If any of them
//! fails (off Alibaba Cloud) it finds nothing, unless
//! `fail_on_missing_metadata` (its own, deprecated, or the top-level one),
//! with the provider's error.

use profcol_model::proto::KeyValue;

use super::config::MetadataPlan;
use super::detect::all_or_nothing;
use super::http::call;

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 9] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.account.id", true),
    ("cloud.region", true),
    ("cloud.availability_zone", true),
    ("host.id", true),
    ("host.name", true),
    ("host.image.id", true),
    ("host.type", true),
];

/// The metadata service's base URL.
pub(super) const SERVICE: &str = "http://100.100.100.200";

const TOKEN_TTL_HEADER: &str = "X-aliyun-ecs-metadata-token-ttl-seconds";
const TOKEN_HEADER: &str = "X-aliyun-ecs-metadata-token";
const TOKEN_TTL_SECONDS: &str = "21600";

/// The keys under `/latest/meta-data/`, in `ATTRIBUTES`' order from
/// `cloud.account.id` on.
const KEYS: [&str; 7] = [
    "owner-account-id",
    "region-id",
    "zone-id",
    "instance-id",
    "hostname",
    "image-id",
    "instance/instance-type",
];

/// `at` is the service's `host:port`.
pub(super) async fn detect(plan: &MetadataPlan<9>, at: &str) -> Result<Vec<KeyValue>, String> {
    // semconv v1.40.0's values, the Collector v0.161.0's.
    all_or_nothing(
        ATTRIBUTES.map(|(k, _)| k),
        plan,
        ["alibaba_cloud", "alibaba_cloud_ecs"],
        metadata(at).await,
        "Alibaba Cloud ECS",
        |e| e,
    )
}

/// The values of `KEYS`, or the first error.
async fn metadata(at: &str) -> Result<Vec<String>, String> {
    let token = &token(at).await?;
    futures::future::try_join_all(KEYS.map(|key| async move {
        get(at, key, token)
            .await
            .map_err(|e| format!("failed to get {key}: {e}"))
    }))
    .await
}

async fn token(at: &str) -> Result<String, String> {
    let (status, body) = call(
        at,
        hyper::Method::PUT,
        "/latest/api/token",
        Some((TOKEN_TTL_HEADER, TOKEN_TTL_SECONDS)),
        None,
    )
    .await
    .map_err(|e| format!("failed to get metadata token: {e}"))?;
    let body = String::from_utf8_lossy(&body).into_owned();
    if status != 200 {
        return Err(format!("token request returned {status}: {body}"));
    }
    Ok(body)
}

async fn get(at: &str, key: &str, token: &str) -> Result<String, String> {
    let (status, body) = call(
        at,
        hyper::Method::GET,
        &format!("/latest/meta-data/{key}"),
        Some((TOKEN_HEADER, token)),
        None,
    )
    .await
    .map_err(|e| format!("failed to get metadata {key}: {e}"))?;
    let body = String::from_utf8_lossy(&body).into_owned();
    if status != 200 {
        return Err(format!("metadata {key} returned {status}: {body}"));
    }
    Ok(body)
}
