//! The `lambda` detector (the Collector's `internal/aws/lambda`): the
//! function's cloud, `faas.*` and log attributes from the variables the
//! AWS Lambda runtime sets. Elsewhere it finds nothing, unless
//! `fail_on_missing_metadata`.

use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue};

use super::detect::{enabled, Host};

/// The attributes, in the order the Collector sets them, all on by
/// default.
pub(super) const ATTRIBUTES: [(&str, bool); 9] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("cloud.region", true),
    ("faas.name", true),
    ("faas.version", true),
    ("faas.instance", true),
    ("faas.max_memory", true),
    ("aws.log.group.names", true),
    ("aws.log.stream.names", true),
];

pub(super) fn detect(host: &dyn Host, on: &[bool; 9], fail: bool) -> Result<Vec<KeyValue>, String> {
    let Some(name) = host
        .env("AWS_LAMBDA_FUNCTION_NAME")
        .filter(|n| !n.is_empty())
    else {
        if fail {
            return Err(
                "lambda metadata unavailable: AWS_LAMBDA_FUNCTION_NAME env var not set".into(),
            );
        }
        tracing::debug!("Unable to identify AWS Lambda environment");
        return Ok(Vec::new());
    };
    let env = |k: &str| host.env(k);
    let text = |v: String| AnyValue {
        value: Some(A::StringValue(v)),
    };
    let names = |v: String| AnyValue {
        value: Some(A::ArrayValue(ArrayValue {
            values: vec![text(v)],
        })),
    };
    // An attribute is set only where its variable is.
    let values = [
        Some(text("aws".into())),
        Some(text("aws_lambda".into())),
        env("AWS_REGION").map(text),
        Some(text(name)),
        env("AWS_LAMBDA_FUNCTION_VERSION").map(text),
        env("AWS_LAMBDA_LOG_STREAM_NAME").map(text),
        env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE").map(text),
        env("AWS_LAMBDA_LOG_GROUP_NAME").map(names),
        env("AWS_LAMBDA_LOG_STREAM_NAME").map(names),
    ];
    Ok(enabled(ATTRIBUTES.map(|(k, _)| k), values, on))
}
