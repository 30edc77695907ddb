//! The `tencent_cvm` detector (the Collector's `internal/tencent/cvm`,
//! over `internal/metadataproviders/tencent/cvm`): the instance's cloud and
//! host attributes from the Tencent Cloud CVM metadata service,
//! `http://metadata.tencentyun.com/latest/meta-data/<key>`, each value
//! asked at once, as the provider asks them. If any of them fails (off
//! Tencent Cloud) it finds nothing, unless `fail_on_missing_metadata` (its
//! own, deprecated, or the top-level one), with the provider's error.

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
pub(super) const SERVICE: &str = "http://metadata.tencentyun.com";

/// The keys under `/latest/meta-data/` and the names its errors give
/// them, in `ATTRIBUTES`' order from `cloud.account.id` on.
const KEYS: [(&str, &str); 7] = [
    ("app-id", "app-id"),
    ("placement/region", "region"),
    ("placement/zone", "zone"),
    ("instance-id", "instance-id"),
    ("instance-name", "instance-name"),
    ("instance/image-id", "image-id"),
    ("instance/instance-type", "instance-type"),
];

/// `at` is the service's `host:port`.
pub(super) async fn detect(plan: &MetadataPlan<9>, at: &str) -> Result<Vec<KeyValue>, String> {
    // semconv v1.40.0's values, the Collector v0.161.0's.
    all_or_nothing(
        ATTRIBUTES.map(|(k, _)| k),
        plan,
        ["tencent_cloud", "tencent_cloud_cvm"],
        metadata(at).await,
        "Tencent Cloud CVM",
        |e| e,
    )
}

/// The values of `KEYS`, or the first error.
async fn metadata(at: &str) -> Result<Vec<String>, String> {
    futures::future::try_join_all(KEYS.map(|(key, label)| async move {
        get(at, key)
            .await
            .map_err(|e| format!("failed to get {label}: {e}"))
    }))
    .await
}

async fn get(at: &str, key: &str) -> Result<String, String> {
    let (status, body) = call(
        at,
        hyper::Method::GET,
        &format!("/latest/meta-data/{key}"),
        None,
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
