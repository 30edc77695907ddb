//! The `azureappservice` detector (the Collector's
//! `internal/azure/appservice`, over the Go SDK's detector): an App
//! Service web app's attributes from the variables App Service sets. Off
//! App Service (one of `WEBSITE_SITE_NAME`, `WEBSITE_RESOURCE_GROUP`,
//! `WEBSITE_OWNER_NAME` unset or empty), and in an Azure Functions app
//! (`FUNCTIONS_WORKER_RUNTIME` set), it finds nothing, unless
//! `fail_on_missing_metadata`.

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text, Host};

/// The attributes, in the order the Collector sets them (the SDK's, by
/// key), all on by default.
pub(super) const ATTRIBUTES: [(&str, bool); 9] = [
    ("azure.app_service.instance.id", true),
    ("azure.resource_group.name", true),
    ("cloud.account.id", true),
    ("cloud.platform", true),
    ("cloud.provider", true),
    ("cloud.region", true),
    ("cloud.resource_id", true),
    ("deployment.environment.name", true),
    ("service.name", true),
];

pub(super) fn detect(host: &dyn Host, on: &[bool; 9], fail: bool) -> Result<Vec<KeyValue>, String> {
    // Go's `os.Getenv`: unset and empty are alike.
    let env = |k: &str| host.env(k).filter(|v| !v.is_empty());
    let found = match (
        env("WEBSITE_SITE_NAME"),
        env("WEBSITE_RESOURCE_GROUP"),
        env("WEBSITE_OWNER_NAME"),
    ) {
        // Azure Functions run on App Service too: left to their detector.
        (Some(site), Some(group), Some(owner)) if env("FUNCTIONS_WORKER_RUNTIME").is_none() => {
            Some((site, group, owner))
        }
        _ => None,
    };
    let Some((site, group, owner)) = found else {
        tracing::debug!("Azure App Service detector: not running on Azure App Service");
        if fail {
            return Err("azure app service metadata unavailable".into());
        }
        return Ok(Vec::new());
    };
    // `<subscription id>+<resource group>-<region>webspace`.
    let subscription = owner.split_once('+').map_or(owner.as_str(), |(s, _)| s);
    let resource_id = format!(
        "/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Web/sites/{site}"
    );
    let values = [
        env("WEBSITE_INSTANCE_ID"),
        Some(group.clone()),
        Some(subscription.to_string()),
        // semconv v1.43.0's values, the SDK detector's.
        Some("azure.app_service".to_string()),
        Some("azure".to_string()),
        env("REGION_NAME"),
        Some(resource_id),
        env("WEBSITE_SLOT_NAME"),
        Some(site.clone()),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        on,
    ))
}
