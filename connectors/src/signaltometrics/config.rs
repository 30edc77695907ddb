//! The Collector's `signaltometrics` keys (v0.161.0), profiles only.

use serde::de::IgnoredAny;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub profiles: Vec<MetricInfo>,
    /// The other signals' definitions: refused, profcol carries profiles.
    pub spans: Option<Vec<IgnoredAny>>,
    pub datapoints: Option<Vec<IgnoredAny>>,
    pub logs: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    pub error_mode: ErrorMode,
}

/// What an OTTL error does (`error_mode`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorMode {
    /// The metrics of the whole request are dropped, logged.
    #[default]
    Propagate,
    /// The definition is skipped for that profile, logged.
    Ignore,
    /// The definition is skipped for that profile.
    Silent,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricInfo {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub include_resource_attributes: Vec<Attribute>,
    #[serde(default)]
    pub attributes: Vec<Attribute>,
    #[serde(default)]
    pub conditions: Vec<String>,
    /// profcol's extension: `sample` evaluates a `sum` per sample.
    pub context: Option<String>,
    /// profcol's bound: distinct attribute sets of this metric per
    /// converted request; past it, points go to one overflow point per
    /// resource (`otel.metric.overflow: true`), as the OpenTelemetry SDKs.
    pub cardinality_limit: Option<usize>,
    /// profcol's: with `context: sample` and a `function.name` attribute,
    /// the N functions with the largest sums per resource and request keep
    /// their points; the others are summed into `function.name: (other)`.
    pub top_functions: Option<usize>,
    pub sum: Option<Sum>,
    pub gauge: Option<Gauge>,
    pub histogram: Option<Histogram>,
    pub exponential_histogram: Option<ExponentialHistogram>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attribute {
    #[serde(default)]
    pub key: String,
    /// An OTTL value expression giving a list of keys, each looked up as
    /// `key` is (exactly one of the two is set).
    #[serde(default)]
    pub keys_expression: String,
    #[serde(default)]
    pub optional: bool,
    pub default_value: Option<DefaultValue>,
}

/// `default_value`: a string, integer, double or boolean.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum DefaultValue {
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sum {
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub monotonic: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gauge {
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Histogram {
    #[serde(default)]
    pub buckets: Vec<f64>,
    #[serde(default)]
    pub count: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExponentialHistogram {
    #[serde(default)]
    pub max_size: i32,
    #[serde(default)]
    pub count: String,
    #[serde(default)]
    pub value: String,
}

/// The OpenTelemetry SDKs' default cardinality limit.
pub const DEFAULT_CARDINALITY_LIMIT: usize = 2000;

/// The Collector's default `histogram.buckets`.
pub const DEFAULT_BUCKETS: [f64; 16] = [
    2.0, 4.0, 6.0, 8.0, 10.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1000.0, 1400.0, 2000.0, 5000.0,
    10_000.0, 15_000.0,
];
