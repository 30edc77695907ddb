//! The `elastic_beanstalk` detector (the Collector's
//! `internal/aws/elasticbeanstalk`, over the Go SDK's detector): the
//! environment's attributes from the X-Ray configuration file Elastic
//! Beanstalk writes. Without the file it finds nothing, unless
//! `fail_on_missing_metadata`; a file it cannot read or decode is an error
//! either way, as the Collector's.

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::detect::{enabled, text, Host};

/// The attributes, in the order the Collector sets them (the SDK's, by
/// key), all on by default. `deployment.environment.name` and
/// `deployment.id` are set only under the Collector's
/// `EmitV1DeploymentConventions` feature gate, off by default and absent
/// from profcol: never set.
pub(super) const ATTRIBUTES: [(&str, bool); 7] = [
    ("cloud.platform", true),
    ("cloud.provider", true),
    ("deployment.environment.name", true),
    ("deployment.environment", true),
    ("deployment.id", true),
    ("service.instance.id", true),
    ("service.version", true),
];

pub(super) const PATH: &str = "/var/elasticbeanstalk/xray/environment.conf";

/// The file's fields the SDK's detector reads (`null` reads as zero, as
/// in Go).
#[derive(Deserialize, Default)]
#[serde(default)]
struct EbMetadata {
    deployment_id: Option<i64>,
    environment_name: Option<String>,
    version_label: Option<String>,
}

pub(super) fn detect(host: &dyn Host, on: &[bool; 7], fail: bool) -> Result<Vec<KeyValue>, String> {
    let Some(conf) = host
        .read_file(PATH)
        .map_err(|e| format!("elasticbeanstalk: {e}"))?
    else {
        tracing::debug!("Elastic Beanstalk detector: configuration file unavailable or not running on Elastic Beanstalk");
        if fail {
            return Err("elastic_beanstalk metadata unavailable".into());
        }
        return Ok(Vec::new());
    };
    // Go's decoder reads the first JSON value and ignores what follows.
    let mut values = serde_json::Deserializer::from_str(&conf).into_iter::<EbMetadata>();
    let m = match values.next() {
        Some(Ok(m)) => m,
        Some(Err(e)) => return Err(format!("{PATH}: {e}")),
        None => return Err(format!("{PATH}: EOF")),
    };
    let values = [
        Some("aws_elastic_beanstalk".to_string()),
        Some("aws".to_string()),
        None,
        Some(m.environment_name.unwrap_or_default()),
        None,
        Some(m.deployment_id.unwrap_or_default().to_string()),
        Some(m.version_label.unwrap_or_default()),
    ];
    Ok(enabled(
        ATTRIBUTES.map(|(k, _)| k),
        values.map(|v| v.map(text)),
        on,
    ))
}
