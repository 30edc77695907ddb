//! Component types of the OpenTelemetry Collector (core and contrib) that
//! profcol does not have, so that a config copied from the Collector's
//! documentation is told what is missing rather than just "unknown".

use super::Kind;

const RECEIVERS: &[&str] = &[
    "awscloudwatch",
    "awsxray",
    "azureeventhub",
    "carbon",
    "collectd",
    "datadog",
    "docker_stats",
    "elasticsearch",
    "filelog",
    "fluentforward",
    "githubreceiver",
    "googlecloudpubsub",
    "hostmetrics",
    "host_metrics",
    "httpcheck",
    "jaeger",
    "journald",
    "k8s_cluster",
    "k8s_events",
    "k8sobjects",
    "kafkametrics",
    "kubeletstats",
    "loki",
    "nop",
    "opencensus",
    "otelarrow",
    "otlpjsonfile",
    "profiling",
    "prometheus",
    "prometheus_simple",
    "pulsar",
    "rabbitmq",
    "receiver_creator",
    "redis",
    "skywalking",
    "splunk_hec",
    "statsd",
    "syslog",
    "tcplog",
    "udplog",
    "windowseventlog",
    "zipkin",
];

const PROCESSORS: &[&str] = &[
    "cumulativetodelta",
    "deltatocumulative",
    "deltatorate",
    "groupbyattrs",
    "groupbytrace",
    "interval",
    "k8sattributes",
    "k8s_attributes",
    "logdedup",
    "metricsgeneration",
    "metricstransform",
    "queuebatch",
    "redaction",
    "remotetap",
    "routing",
    "schema",
    "span",
    "sumologic",
    "tail_sampling",
];

const EXPORTERS: &[&str] = &[
    "awsemf",
    "awss3",
    "awsxray",
    "azuremonitor",
    "clickhouse",
    "datadog",
    "elasticsearch",
    "googlecloud",
    "googlemanagedprometheus",
    "influxdb",
    "jaeger",
    "logging",
    "loki",
    "nop",
    "opencensus",
    "otelarrow",
    "prometheusremotewrite",
    "pyroscope",
    "signalfx",
    "splunk_hec",
    "zipkin",
];

const EXTENSIONS: &[&str] = &[
    "basicauth",
    "ballast",
    "db_storage",
    "docker_observer",
    "headers_setter",
    "host_observer",
    "k8s_observer",
    "memory_ballast",
    "memory_limiter",
    "oauth2client",
    "oidc",
    "opamp",
    "pprof",
    "sigv4auth",
    "zpages",
];

const CONNECTORS: &[&str] = &[
    "count",
    "datadog",
    "exceptions",
    "failover",
    "grafanacloud",
    "otlpjson",
    "roundrobin",
    "routing",
    "servicegraph",
    "spanmetrics",
    "sum",
];

/// Whether `ty` is a Collector component of `kind` that profcol lacks.
pub fn is_collector_type(kind: Kind, ty: &str) -> bool {
    let list = match kind {
        Kind::Receiver => RECEIVERS,
        Kind::Processor => PROCESSORS,
        Kind::Exporter => EXPORTERS,
        Kind::Extension => EXTENSIONS,
        Kind::Connector => CONNECTORS,
    };
    list.contains(&ty)
}

/// The error for a type this build does not know: a hint for the
/// Collector's types, else the list of known ones.
pub fn unknown_type(kind: Kind, ty: &str, known: &[&str]) -> String {
    let noun = super::service::kind_noun(kind);
    if is_collector_type(kind, ty) {
        format!(
            "unknown type {ty:?}; profcol has no {ty} {noun} (see docs/collector-compatibility.md)"
        )
    } else {
        let list = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        format!("unknown type {ty:?} (known: {list})")
    }
}
