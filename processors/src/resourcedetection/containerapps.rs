//! The `azurecontainerapps` detector (the Collector's
//! `internal/azure/containerapps`, over the Go SDK's detector): a
//! Container App's attributes from the variables Container Apps sets.
//! Without `CONTAINER_APP_NAME` it finds nothing, unless
//! `fail_on_missing_metadata`.

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text, Host};

/// The attributes, in the order the Collector sets them (the SDK's, by
/// key), all on by default.
pub(super) const ATTRIBUTES: [(&str, bool); 4] = [
    ("azure.container_app.instance.id", true),
    ("cloud.platform", true),
    ("cloud.provider", true),
    ("service.name", true),
];

pub(super) fn detect(host: &dyn Host, on: &[bool; 4], fail: bool) -> Result<Vec<KeyValue>, String> {
    // Go's `os.Getenv`: unset and empty are alike.
    let env = |k: &str| host.env(k).filter(|v| !v.is_empty());
    let Some(app) = env("CONTAINER_APP_NAME") else {
        if fail {
            return Err("azure container apps metadata unavailable".into());
        }
        return Ok(Vec::new());
    };
    let values = [
        env("CONTAINER_APP_REPLICA_NAME"),
        // semconv v1.43.0's values, the SDK detector's.
        Some("azure.container_apps".to_string()),
        Some("azure".to_string()),
        Some(app),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        on,
    ))
}
