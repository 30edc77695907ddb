//! The `ibmcloud_classic` detector (the Collector's
//! `internal/ibmcloud/classic`, over
//! `internal/metadataproviders/ibmcloud/classic`): a classic (SoftLayer)
//! instance's cloud and host attributes from the SoftLayer Resource
//! Metadata API, `https://api.service.softlayer.com/rest/v3.1/SoftLayer_Resource_Metadata/<method>.txt`,
//! each value asked at once, as the provider asks them. If any of them
//! fails (off IBM Cloud Classic) it finds nothing, unless
//! `fail_on_missing_metadata`.

use profcol_model::proto::KeyValue;

use super::config::MetadataPlan;
use super::detect::all_or_nothing;
use super::http::{read, url_client};

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 7] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.account.id", true),
    ("cloud.availability_zone", true),
    ("cloud.resource_id", true),
    ("host.id", true),
    ("host.name", true),
];

/// The API's base URL.
pub(super) const SERVICE: &str = "https://api.service.softlayer.com";
const PATH: &str = "/rest/v3.1/SoftLayer_Resource_Metadata";

/// The API's methods and the names its errors give them, in `ATTRIBUTES`'
/// order from `cloud.account.id` on.
const METHODS: [(&str, &str); 5] = [
    ("getAccountId.txt", "account ID"),
    ("getDatacenter.txt", "datacenter"),
    ("getGlobalIdentifier.txt", "global identifier"),
    ("getId.txt", "instance ID"),
    ("getHostname.txt", "hostname"),
];

/// `base` is the API's base URL.
pub(super) async fn detect(plan: &MetadataPlan<7>, base: &str) -> Result<Vec<KeyValue>, String> {
    // semconv v1.40.0's provider; the Collector's own platform value.
    all_or_nothing(
        ATTRIBUTES.map(|(k, _)| k),
        plan,
        ["ibm_cloud", "ibm_cloud.classic"],
        metadata(base).await,
        "IBM Cloud Classic",
        |e| format!("ibmcloud classic metadata unavailable: {e}"),
    )
}

/// The values of `METHODS`, or the first error.
async fn metadata(base: &str) -> Result<Vec<String>, String> {
    let client = url_client()?;
    let client = &client;
    futures::future::try_join_all(METHODS.map(|(method, label)| async move {
        fetch_text(client, base, method)
            .await
            .map_err(|e| format!("failed to get {label}: {e}"))
    }))
    .await
}

/// A method's plain-text answer, trimmed.
async fn fetch_text(client: &reqwest::Client, base: &str, method: &str) -> Result<String, String> {
    let url = format!("{}{PATH}/{method}", base.trim_end_matches('/'));
    let (status, body) =
        async { read(client.get(&url).send().await.map_err(|e| e.to_string())?).await }
            .await
            .map_err(|e| format!("request for {method} failed: {e}"))?;
    let body = String::from_utf8_lossy(&body);
    if status != 200 {
        return Err(format!("{method} returned {status}: {body}"));
    }
    Ok(body.trim().to_string())
}
