//! `exporters: kafka:` with the Collector's keys (contrib `kafkaexporter`
//! and `pkg/kafka/configkafka` of v0.161.0) and defaults. `timeout`,
//! `retry_on_failure` and `sending_queue` are the runtime's.

use serde::{Deserialize, Serialize};

use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use super::security::{self, AuthConfig, KafkaTls};

/// The topic profiles go to unless `profiles::topic` (or the deprecated
/// top-level `topic`) says otherwise.
pub const DEFAULT_TOPIC: &str = "otlp_profiles";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaExporterConfig {
    #[serde(flatten)]
    pub client: ClientConfig,
    pub producer: ProducerConfig,
    pub profiles: SignalConfig,
    /// Other signals' settings: profcol carries profiles only; accepted so
    /// that a Collector's config carries over, no effect.
    pub logs: SignalConfig,
    pub metrics: SignalConfig,
    pub traces: SignalConfig,
    /// The resource attribute whose value names the topic (the first
    /// resource that has it, non-empty).
    pub topic_from_attribute: String,
    /// Client metadata keys (what a receiver with `include_metadata`
    /// kept of the request's headers) copied to message headers.
    pub include_metadata_keys: Vec<String>,
    /// Static headers on every message, in order (names may repeat).
    pub record_headers: Vec<RecordHeader>,
    /// Adds `otelcol.signal: profiles` to every message, for topics that
    /// several signals share.
    pub signal_header: bool,
    /// How messages are spread over a topic's partitions.
    pub record_partitioner: RecordPartitioner,
    /// Partitioning of other signals: accepted, no effect on profiles.
    pub partition_traces_by_id: bool,
    pub partition_metrics_by_resource_attributes: bool,
    pub partition_logs_by_resource_attributes: bool,
    pub partition_logs_by_trace_id: bool,
}

/// The header `signal_header` adds (the Collector's `SignalHeaderKey`).
pub(super) const SIGNAL_HEADER: &str = "otelcol.signal";

/// One of `record_headers`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecordHeader {
    pub name: String,
    pub value: String,
}

/// `record_partitioner:`: at most one strategy; none (or `{}`) is
/// `sticky_key` with the Sarama-compatible hasher, the Collector's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecordPartitioner {
    pub sticky_key: Option<StickyKey>,
    pub round_robin: Option<Empty>,
    pub least_backup: Option<Empty>,
    pub extension: Option<String>,
}

/// `sticky_key:`; its `hasher` must be given, as in the Collector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StickyKey {
    pub hasher: String,
}

/// A strategy that takes no settings (`round_robin: {}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Where a message goes among its topic's partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioner {
    /// librdkafka's partitioner by that name: a keyed message by the hash
    /// of its key (`fnv1a_random` is Sarama's FNV-1a, `murmur2_random`
    /// Java's), a keyless one to a partition kept while messages share
    /// a request, as franz-go's sticky partitioners do.
    StickyKey(&'static str),
    /// Each message to the next partition.
    RoundRobin,
    /// Each message to the partition with the fewest messages in flight.
    LeastBackup,
}

/// `configkafka.ClientConfig`: the keys the exporter and the receiver share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    pub brokers: Vec<String>,
    pub resolve_canonical_bootstrap_servers_only: bool,
    /// The Kafka version the client assumes (`2.1.0`). librdkafka asks the
    /// broker which API versions it speaks, so this is checked, not used.
    pub protocol_version: String,
    pub client_id: String,
    /// SASL (PLAIN, SCRAM); Kerberos and OAuth are refused.
    pub auth: AuthConfig,
    /// TLS to the brokers when present (`configtls.ClientConfig`).
    pub tls: Option<KafkaTls>,
    pub metadata: MetadataConfig,
    /// `client.rack`.
    pub rack_id: String,
    /// KIP-320 leader epochs; librdkafka always uses them. Accepted.
    pub use_leader_epoch: bool,
    /// An idle connection is closed after this (`connections.max.idle.ms`).
    pub conn_idle_timeout: Duration,
    /// The wait for a connection to a broker, TLS and SASL included
    /// (`socket.connection.setup.timeout.ms`); v0.165.1's key.
    pub dial_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            brokers: vec!["localhost:9092".to_owned()],
            resolve_canonical_bootstrap_servers_only: false,
            protocol_version: String::new(),
            client_id: "otel-collector".to_owned(),
            auth: AuthConfig::default(),
            tls: None,
            metadata: MetadataConfig::default(),
            rack_id: String::new(),
            use_leader_epoch: true,
            conn_idle_timeout: Duration::from_secs(9 * 60),
            dial_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetadataConfig {
    /// Whether to keep all topics' metadata; librdkafka keeps what it uses.
    pub full: bool,
    /// `topic.metadata.refresh.interval.ms`.
    pub refresh_interval: Duration,
    pub retry: MetadataRetry,
}

impl Default for MetadataConfig {
    fn default() -> Self {
        Self {
            full: true,
            refresh_interval: Duration::from_secs(600),
            retry: MetadataRetry::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetadataRetry {
    /// librdkafka retries metadata until the request's deadline; checked,
    /// no effect.
    pub max: i64,
    /// `retry.backoff.ms`.
    pub backoff: Duration,
}

impl Default for MetadataRetry {
    fn default() -> Self {
        Self {
            max: 20,
            backoff: Duration::from_millis(250),
        }
    }
}

/// `producer:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProducerConfig {
    /// The largest message value produced; a request over it is split at
    /// profile boundaries.
    pub max_message_bytes: u64,
    /// The largest produce request (librdkafka's `message.max.bytes`): the
    /// Collector's franz-go takes no less than 100 MiB, its default.
    pub max_broker_write_bytes: u64,
    pub required_acks: RequiredAcks,
    pub compression: String,
    pub compression_params: CompressionParams,
    /// `batch.num.messages` when set; 0 leaves librdkafka's.
    pub flush_max_messages: u64,
    pub allow_auto_topic_creation: bool,
    /// How long a message waits for others to share its request
    /// (`linger.ms`).
    pub linger: Duration,
    /// Produce requests in flight to a broker
    /// (`max.in.flight.requests.per.connection`): 1 keeps messages in
    /// order through retries.
    pub max_inflight_requests_per_broker: i64,
}

/// franz-go's floor and default for `max_broker_write_bytes`, which the
/// Collector enforces.
pub(super) const MIN_BROKER_WRITE_BYTES: u64 = 100 << 20;

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: 1_000_000,
            max_broker_write_bytes: MIN_BROKER_WRITE_BYTES,
            required_acks: RequiredAcks(1),
            compression: "none".to_owned(),
            compression_params: CompressionParams::default(),
            flush_max_messages: 0,
            allow_auto_topic_creation: true,
            linger: Duration::from_millis(10),
            max_inflight_requests_per_broker: 1,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionParams {
    pub level: Option<i32>,
}

/// `required_acks`: `0`, `1`, `-1` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RequiredAcks(pub i8);

impl<'de> Deserialize<'de> for RequiredAcks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(i64),
            S(String),
        }
        let bad = || serde::de::Error::custom("expected 'all' (-1), 0, or 1");
        match Raw::deserialize(d)? {
            Raw::N(n @ -1..=1) => Ok(Self(n as i8)),
            Raw::S(s) if s == "all" => Ok(Self(-1)),
            _ => Err(bad()),
        }
    }
}

/// `profiles:` (and the other signals').
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SignalConfig {
    pub topic: String,
    /// The client metadata key whose first value names the topic, before
    /// `topic_from_attribute` and `topic`.
    pub topic_from_metadata_key: String,
    /// The client metadata key whose first non-empty value is the
    /// message's key; else it has none.
    pub message_key_from_metadata_key: String,
    pub encoding: String,
}

/// How message values are written and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// An `ExportProfilesServiceRequest` in protobuf.
    Proto,
    /// The same in OTLP/JSON.
    Json,
}

impl Encoding {
    /// `otlp_proto` or `otlp_json`; the error names what else the Collector
    /// has and profcol does not.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "otlp_proto" => Ok(Self::Proto),
            "otlp_json" => Ok(Self::Json),
            other => Err(format!(
                "{other:?} is not an encoding of profiles: otlp_proto or otlp_json (encoding extensions are not supported)"
            )),
        }
    }
}

impl ClientConfig {
    /// What profcol refuses or the Collector would, at `section`'s key paths.
    pub fn check(&self, section: &ComponentConfig, errs: &mut ConfigErrors) {
        if self.brokers.is_empty() {
            errs.push(section.key_path("brokers"), "brokers must be specified");
        }
        for (i, b) in self.brokers.iter().enumerate() {
            if b.is_empty() || b.contains(',') || b.contains("://") {
                errs.push(
                    section.key_path(&format!("brokers::{i}")),
                    format!("{b:?} is not a host:port"),
                );
            }
        }
        if !self.protocol_version.is_empty() && !valid_version(&self.protocol_version) {
            errs.push(
                section.key_path("protocol_version"),
                format!(
                    "invalid protocol version: {:?} is not a Kafka version such as 2.1.0",
                    self.protocol_version
                ),
            );
        }
        if self.resolve_canonical_bootstrap_servers_only {
            errs.push(
                section.key_path("resolve_canonical_bootstrap_servers_only"),
                "is not supported by profcol: list the brokers by the names they answer to",
            );
        }
        for (key, d) in [
            ("conn_idle_timeout", &self.conn_idle_timeout),
            ("dial_timeout", &self.dial_timeout),
        ] {
            if d.0.is_zero() {
                errs.push(
                    section.key_path(key),
                    format!("{key} ({d}) must be positive"),
                );
            }
        }
        if self.metadata.retry.max < 0 {
            errs.push(
                section.key_path("metadata::retry::max"),
                format!(
                    "metadata::retry::max ({}) must be non-negative",
                    self.metadata.retry.max
                ),
            );
        }
        security::check(&self.auth, self.tls.as_ref(), section, errs);
    }

    /// The librdkafka settings every client of this config takes.
    pub fn rdkafka(&self) -> rdkafka::ClientConfig {
        let mut c = rdkafka::ClientConfig::new();
        c.set("bootstrap.servers", self.brokers.join(","))
            .set("client.id", &self.client_id)
            .set(
                "topic.metadata.refresh.interval.ms",
                self.metadata.refresh_interval.0.as_millis().to_string(),
            )
            .set(
                "retry.backoff.ms",
                self.metadata.retry.backoff.0.as_millis().max(1).to_string(),
            )
            .set("connections.max.idle.ms", millis(&self.conn_idle_timeout))
            .set(
                "socket.connection.setup.timeout.ms",
                // librdkafka's floor.
                millis(&Duration(
                    self.dial_timeout.0.max(std::time::Duration::from_secs(1)),
                )),
            )
            // A broker back from a restart is found within a second, not
            // librdkafka's 10 s.
            .set("reconnect.backoff.max.ms", "1000");
        if !self.rack_id.is_empty() {
            c.set("client.rack", &self.rack_id);
        }
        security::apply(&self.auth, self.tls.as_ref(), &mut c);
        c
    }
}

/// A duration as librdkafka's `*.ms` settings take it: whole
/// milliseconds, at least 1, within an `int`.
pub fn millis(d: &Duration) -> String {
    d.0.as_millis().clamp(1, i32::MAX as u128).to_string()
}

/// `sarama.ParseKafkaVersion`'s forms: `0.8.2.0` style or `1.0.0` and later.
fn valid_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric
        && match parts.first() {
            Some(&"0") => parts.len() == 4,
            Some(_) => parts.len() == 3,
            None => false,
        }
}

/// What the exporter does, checked.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub topic: String,
    pub encoding: Encoding,
    pub compression: &'static str,
    pub partitioner: Partitioner,
    /// `record_headers`, then `otelcol.signal` with `signal_header`.
    pub headers: Vec<(String, String)>,
}

impl KafkaExporterConfig {
    pub fn validate(&self, section: &ComponentConfig) -> Result<Resolved, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        self.client.check(section, &mut errs);
        let p = &self.producer;
        if p.max_message_bytes == 0 {
            errs.push(
                section.key_path("producer::max_message_bytes"),
                "must be positive",
            );
        }
        if p.max_message_bytes > 1_000_000_000 {
            errs.push(
                section.key_path("producer::max_message_bytes"),
                "is over librdkafka's limit of 1000000000",
            );
        }
        let compression = match p.compression.as_str() {
            "none" => "none",
            "gzip" => "gzip",
            "snappy" => "snappy",
            "lz4" => "lz4",
            "zstd" => "zstd",
            other => {
                errs.push(
                    section.key_path("producer::compression"),
                    format!("compression should be one of 'none', 'gzip', 'snappy', 'lz4', or 'zstd'. configured value is {other:?}"),
                );
                "none"
            }
        };
        if let Some(level) = p.compression_params.level {
            let range = match compression {
                "gzip" => Some(-1..=9),
                "lz4" => Some(0..=12),
                "zstd" => Some(1..=22),
                _ => None,
            };
            match range {
                Some(r) if r.contains(&level) => {}
                Some(r) => errs.push(
                    section.key_path("producer::compression_params::level"),
                    format!(
                        "{level} is not a {compression} level ({} to {})",
                        r.start(),
                        r.end()
                    ),
                ),
                None => errs.push(
                    section.key_path("producer::compression_params::level"),
                    format!("{compression} takes no level"),
                ),
            }
        }
        let write = &section.key_path("producer::max_broker_write_bytes");
        if p.max_broker_write_bytes < MIN_BROKER_WRITE_BYTES {
            errs.push(
                write,
                format!(
                    "{} is under {MIN_BROKER_WRITE_BYTES} (100 MiB), the least the Collector accepts",
                    p.max_broker_write_bytes
                ),
            );
        } else if p.max_broker_write_bytes > i32::MAX as u64 {
            errs.push(
                write,
                "does not fit in a 32-bit integer, as Kafka's request sizes must",
            );
        } else if p.max_broker_write_bytes < p.max_message_bytes {
            errs.push(write, "is under producer::max_message_bytes");
        }
        if p.flush_max_messages > 1_000_000 {
            errs.push(
                section.key_path("producer::flush_max_messages"),
                "is over librdkafka's limit of 1000000",
            );
        }
        if self.partition_logs_by_resource_attributes && self.partition_logs_by_trace_id {
            errs.push(
                section.key_path("partition_logs_by_resource_attributes"),
                "partition_logs_by_resource_attributes and partition_logs_by_trace_id cannot both be enabled",
            );
        }
        let mp = section.key_path("producer::max_inflight_requests_per_broker");
        if p.max_inflight_requests_per_broker < 1 {
            errs.push(
                mp,
                format!(
                    "max_inflight_requests_per_broker ({}) must be at least 1",
                    p.max_inflight_requests_per_broker
                ),
            );
        } else if p.max_inflight_requests_per_broker > 1 && p.required_acks.0 == -1 {
            errs.push(
                mp,
                format!(
                    "max_inflight_requests_per_broker ({}) must be 1 when required_acks is 'all' (-1)",
                    p.max_inflight_requests_per_broker
                ),
            );
        } else if p.max_inflight_requests_per_broker > 1_000_000 {
            errs.push(mp, "is over librdkafka's limit of 1000000");
        }
        for (signal, s, by_data) in [
            (
                "logs",
                &self.logs,
                self.partition_logs_by_resource_attributes || self.partition_logs_by_trace_id,
            ),
            (
                "metrics",
                &self.metrics,
                self.partition_metrics_by_resource_attributes,
            ),
            ("traces", &self.traces, self.partition_traces_by_id),
        ] {
            if !s.message_key_from_metadata_key.is_empty() && by_data {
                errs.push(
                    section.key_path(&format!("{signal}::message_key_from_metadata_key")),
                    format!("{signal}::message_key_from_metadata_key cannot be set together with the {signal} partition_* flags"),
                );
            }
        }
        let partitioner = self.record_partitioner.check(section, &mut errs);
        let mut headers: Vec<(String, String)> = self
            .record_headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        if self.signal_header {
            let reserved = format!("{SIGNAL_HEADER:?} is reserved when signal_header is enabled");
            if let Some(i) = self
                .include_metadata_keys
                .iter()
                .position(|k| k == SIGNAL_HEADER)
            {
                errs.push(
                    section.key_path(&format!("include_metadata_keys::{i}")),
                    &reserved,
                );
            }
            if let Some(i) = headers.iter().position(|(n, _)| n == SIGNAL_HEADER) {
                errs.push(
                    section.key_path(&format!("record_headers::{i}::name")),
                    &reserved,
                );
            }
            headers.push((SIGNAL_HEADER.to_owned(), "profiles".to_owned()));
        }
        let topic = if self.profiles.topic.is_empty() {
            DEFAULT_TOPIC.to_owned()
        } else {
            self.profiles.topic.clone()
        };
        let encoding = if self.profiles.encoding.is_empty() {
            "otlp_proto"
        } else {
            self.profiles.encoding.as_str()
        };
        let encoding = Encoding::parse(encoding)
            .map_err(|e| errs.push(section.key_path("profiles::encoding"), e))
            .unwrap_or(Encoding::Proto);
        errs.into_result(Resolved {
            topic,
            encoding,
            compression,
            partitioner,
            headers,
        })
    }
}

impl KafkaExporterConfig {
    /// The client metadata keys it reads, with their key paths; and the
    /// other signals' (which it does not read), as the Collector checks
    /// every signal's against the batch's partition keys.
    pub(super) fn metadata_keys(&self) -> Vec<(String, String)> {
        let mut keys: Vec<(String, String)> = self
            .include_metadata_keys
            .iter()
            .enumerate()
            .map(|(i, k)| (format!("include_metadata_keys::{i}"), k.clone()))
            .collect();
        for (signal, s) in [
            ("profiles", &self.profiles),
            ("logs", &self.logs),
            ("metrics", &self.metrics),
            ("traces", &self.traces),
        ] {
            for (key, value) in [
                ("topic_from_metadata_key", &s.topic_from_metadata_key),
                (
                    "message_key_from_metadata_key",
                    &s.message_key_from_metadata_key,
                ),
            ] {
                if !value.is_empty() {
                    keys.push((format!("{signal}::{key}"), value.clone()));
                }
            }
        }
        keys
    }
}

impl RecordPartitioner {
    /// The strategy, as the Collector checks it.
    fn check(&self, section: &ComponentConfig, errs: &mut ConfigErrors) -> Partitioner {
        let key = section.key_path("record_partitioner");
        let set = [
            self.sticky_key.is_some(),
            self.round_robin.is_some(),
            self.least_backup.is_some(),
            self.extension.is_some(),
        ];
        if set.iter().filter(|s| **s).count() > 1 {
            errs.push(
                key,
                "record_partitioner: at most one record_partitioner strategy may be configured",
            );
        }
        if self.extension.is_some() {
            errs.push(
                section.key_path("record_partitioner::extension"),
                "profcol has no partitioner extensions: use sticky_key, round_robin or least_backup",
            );
        }
        if self.round_robin.is_some() {
            return Partitioner::RoundRobin;
        }
        if self.least_backup.is_some() {
            return Partitioner::LeastBackup;
        }
        let hasher = self
            .sticky_key
            .as_ref()
            .map_or("sarama_compat", |s| &s.hasher);
        Partitioner::StickyKey(match hasher {
            "sarama_compat" => "fnv1a_random",
            "murmur2" => "murmur2_random",
            other => {
                errs.push(
                    section.key_path("record_partitioner::sticky_key::hasher"),
                    format!("record_partitioner: sticky_key: unknown hasher {other:?}, valid values are \"sarama_compat\", \"murmur2\""),
                );
                "fnv1a_random"
            }
        })
    }
}
