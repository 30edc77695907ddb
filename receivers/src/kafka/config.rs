//! `receivers: kafka:` with the Collector's keys (contrib `kafkareceiver`
//! and `configkafka.ConsumerConfig` of v0.161.0, and what v0.165.1 added)
//! and defaults.

use serde::{Deserialize, Serialize};

use profcol_exporters::kafka::{millis as ms, ClientConfig, Encoding, DEFAULT_TOPIC};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use crate::ingest::OnInvalid;

use super::topics::TopicFilter;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaReceiverConfig {
    #[serde(flatten)]
    pub client: ClientConfig,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub group_id: String,
    /// Where a group without a committed offset starts: `latest` or `earliest`.
    pub initial_offset: String,
    pub autocommit: AutoCommit,
    /// `fetch.min.bytes`.
    pub min_fetch_size: i32,
    /// `fetch.max.bytes` when positive.
    pub max_fetch_size: i32,
    /// `fetch.wait.max.ms`.
    pub max_fetch_wait: Duration,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_size: i32,
    /// `group.instance.id` (static membership).
    pub group_instance_id: String,
    /// The assignors advertised to the group, in order of preference
    /// (`partition.assignment.strategy`).
    pub group_rebalance_strategies: Vec<String>,
    /// franz-go's bound on one decompressed record batch; checked as the
    /// Collector checks it. librdkafka bounds what it holds by the fetch
    /// sizes and `queued.max.messages.kbytes` instead.
    pub max_decompress_batch_bytes: i64,
    /// The Collector's per-partition workers; checked as it checks them.
    pub partition_processing: PartitionProcessing,
    pub profiles: TopicEncoding,
    /// Other signals: profcol carries profiles only; accepted, no effect.
    pub logs: TopicEncoding,
    pub metrics: TopicEncoding,
    pub traces: TopicEncoding,
    pub message_marking: MessageMarking,
    pub header_extraction: HeaderExtraction,
    /// The wait after a refusal before a message is offered again (the
    /// Collector's `error_backoff`: `initial_interval` is used, doubled up to
    /// `max_interval`).
    pub error_backoff: ErrorBackoff,
    /// The Collector's optional metrics: accepted, no effect.
    pub telemetry: Option<serde_json::Value>,
    /// What a request that breaks the proto's rules becomes (as `otlp`'s).
    pub on_invalid: OnInvalid,
}

impl Default for KafkaReceiverConfig {
    fn default() -> Self {
        Self {
            client: ClientConfig::default(),
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
            group_id: "otel-collector".to_owned(),
            initial_offset: "latest".to_owned(),
            autocommit: AutoCommit::default(),
            min_fetch_size: 1,
            max_fetch_size: 0,
            max_fetch_wait: Duration::from_millis(250),
            max_partition_fetch_size: 1_048_576,
            group_instance_id: String::new(),
            group_rebalance_strategies: Vec::new(),
            max_decompress_batch_bytes: 1 << 30,
            partition_processing: PartitionProcessing::default(),
            profiles: TopicEncoding::default(),
            logs: TopicEncoding::default(),
            metrics: TopicEncoding::default(),
            traces: TopicEncoding::default(),
            message_marking: MessageMarking::default(),
            header_extraction: HeaderExtraction::default(),
            error_backoff: ErrorBackoff::default(),
            telemetry: None,
            on_invalid: OnInvalid::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoCommit {
    pub enable: bool,
    pub interval: Duration,
}

impl Default for AutoCommit {
    fn default() -> Self {
        Self {
            enable: true,
            interval: Duration::from_secs(1),
        }
    }
}

/// `partition_processing:` (v0.161.0, with v0.165.1's `max_prefetch` and
/// `max_in_flight`). profcol's consumer already offers several messages at
/// once and marks them in the order read, whatever the partition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PartitionProcessing {
    pub independent: bool,
    /// Deprecated in v0.164.0 for `max_prefetch::batches`.
    pub max_buffered_batches: Option<i64>,
    pub max_prefetch: MaxPrefetch,
    pub max_in_flight: MaxInFlight,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaxPrefetch {
    /// 1 unless set (here or by `max_buffered_batches`).
    pub batches: Option<i64>,
    pub bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaxInFlight {
    pub records: i64,
    pub bytes: i64,
    pub window: String,
}

impl Default for MaxInFlight {
    fn default() -> Self {
        Self {
            records: 1,
            bytes: 0,
            window: "per_fetch".to_owned(),
        }
    }
}

impl TopicEncoding {
    /// `exclude_topics`, as the Collector checks it: only beside a topic
    /// pattern (`^...`), no empty entry, each a valid regular expression.
    fn check_exclude(&self, signal: &str, section: &ComponentConfig, errs: &mut ConfigErrors) {
        if self.exclude_topics.is_empty() {
            return;
        }
        let key = section.key_path(&format!("{signal}::exclude_topics"));
        if !self.topics.iter().any(|t| t.starts_with('^')) {
            errs.push(key, format!("{signal}.exclude_topics is configured but none of the configured {signal}.topics use regex pattern (must start with '^')"));
            return;
        }
        for (i, t) in self.exclude_topics.iter().enumerate() {
            let at = format!("{key}::{i}");
            if t.is_empty() {
                errs.push(at, format!("{signal}.exclude_topics contains empty string, which would match all topics"));
            } else if let Err(e) = regex::Regex::new(t) {
                errs.push(
                    at,
                    format!("{signal}.exclude_topic contains invalid regex pattern: {e}"),
                );
            }
        }
    }
}

/// The assignors librdkafka has, by the names the Collector uses.
const EAGER_ASSIGNORS: [&str; 2] = ["range", "roundrobin"];
const COOPERATIVE_ASSIGNOR: &str = "cooperative-sticky";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicEncoding {
    pub topics: Vec<String>,
    pub encoding: String,
    pub exclude_topics: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MessageMarking {
    pub after: bool,
    pub on_error: bool,
    /// Defaults to `on_error`, as in the Collector.
    pub on_permanent_error: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeaderExtraction {
    pub extract_headers: bool,
    pub headers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ErrorBackoff {
    pub enabled: bool,
    pub initial_interval: Duration,
    pub randomization_factor: f64,
    pub multiplier: f64,
    pub max_interval: Duration,
    pub max_elapsed_time: Duration,
}

impl Default for ErrorBackoff {
    fn default() -> Self {
        Self {
            enabled: false,
            initial_interval: Duration::from_millis(500),
            randomization_factor: 0.5,
            multiplier: 1.5,
            max_interval: Duration::from_secs(30),
            max_elapsed_time: Duration::from_secs(300),
        }
    }
}

/// What the consumer does, checked.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub topics: Vec<String>,
    /// With `exclude_topics`: the topics are found and subscribed to by
    /// profcol ([`TopicFilter`]), not by librdkafka.
    pub(super) filter: Option<TopicFilter>,
    pub encoding: Encoding,
    /// A permanently refused message is marked (skipped); else it is
    /// offered again, blocking its partition, as the Collector does.
    pub skip_poisoned: bool,
    /// `header_extraction`: each header name and the resource attribute
    /// (`kafka.header.<name>`) its value goes to.
    pub headers: Vec<(String, String)>,
}

impl KafkaReceiverConfig {
    pub fn validate(&self, section: &ComponentConfig) -> Result<Resolved, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        self.client.check(section, &mut errs);
        if !matches!(self.initial_offset.as_str(), "latest" | "earliest") {
            errs.push(
                section.key_path("initial_offset"),
                format!(
                    "initial_offset should be one of 'latest' or 'earliest'. configured value {}",
                    self.initial_offset
                ),
            );
        }
        if self.group_id.is_empty() {
            errs.push(section.key_path("group_id"), "must not be empty");
        }
        for (key, v) in [
            ("min_fetch_size", self.min_fetch_size),
            ("max_partition_fetch_size", self.max_partition_fetch_size),
        ] {
            if v < 1 {
                errs.push(section.key_path(key), "must be positive");
            }
        }
        if self.max_fetch_size < 0 {
            errs.push(section.key_path("max_fetch_size"), "must not be negative");
        } else if self.max_fetch_size > 0 && self.max_fetch_size < self.min_fetch_size {
            errs.push(
                section.key_path("max_fetch_size"),
                format!(
                    "max_fetch_size ({}) cannot be less than min_fetch_size ({})",
                    self.max_fetch_size, self.min_fetch_size
                ),
            );
        }
        if !(1..=i64::from(i32::MAX)).contains(&self.max_decompress_batch_bytes) {
            errs.push(
                section.key_path("max_decompress_batch_bytes"),
                format!(
                    "max_decompress_batch_bytes ({}) must be between 1 and {}",
                    self.max_decompress_batch_bytes,
                    i32::MAX
                ),
            );
        }
        self.check_strategies(section, &mut errs);
        self.check_partition_processing(section, &mut errs);
        let p = &self.profiles;
        let topics: Vec<String> = if p.topics.is_empty() {
            vec![DEFAULT_TOPIC.to_owned()]
        } else {
            p.topics.clone()
        };
        for (i, t) in topics.iter().enumerate() {
            if t.is_empty() {
                errs.push(
                    section.key_path(&format!("profiles::topics::{i}")),
                    "must not be empty",
                );
            }
        }
        for (signal, t) in [
            ("logs", &self.logs),
            ("metrics", &self.metrics),
            ("traces", &self.traces),
            ("profiles", p),
        ] {
            t.check_exclude(signal, section, &mut errs);
        }
        let excluded = section.key_path("profiles::exclude_topics");
        let unchecked = errs.0.iter().any(|e| e.is_at_or_under(&excluded));
        let filter = if p.exclude_topics.is_empty() || unchecked {
            None
        } else {
            TopicFilter::new(&topics, &p.exclude_topics)
                .map_err(|e| {
                    errs.push(
                        section.key_path("profiles::topics"),
                        format!("invalid regex pattern: {e}"),
                    )
                })
                .ok()
        };
        let encoding = if p.encoding.is_empty() {
            "otlp_proto"
        } else {
            p.encoding.as_str()
        };
        let encoding = Encoding::parse(encoding)
            .map_err(|e| errs.push(section.key_path("profiles::encoding"), e))
            .unwrap_or(Encoding::Proto);
        let m = &self.message_marking;
        let on_permanent = m.on_permanent_error.unwrap_or(m.on_error);
        let h = &self.header_extraction;
        let headers = if h.extract_headers {
            h.headers
                .iter()
                .map(|name| (name.clone(), format!("kafka.header.{name}")))
                .collect()
        } else {
            Vec::new()
        };
        errs.into_result(Resolved {
            topics,
            filter,
            encoding,
            skip_poisoned: !m.after || on_permanent,
            headers,
        })
    }

    /// `group_rebalance_strategies`: the built-in assignors librdkafka
    /// has. It cannot advertise eager and cooperative ones together, nor
    /// the eager `sticky`; custom balancers are extensions profcol lacks.
    fn check_strategies(&self, section: &ComponentConfig, errs: &mut ConfigErrors) {
        let mut protocols = Vec::new();
        for (i, s) in self.group_rebalance_strategies.iter().enumerate() {
            let key = section.key_path(&format!("group_rebalance_strategies::{i}"));
            match s.as_str() {
                s if s.trim().is_empty() => {
                    errs.push(key, "group_rebalance_strategies entries cannot be empty")
                }
                s if EAGER_ASSIGNORS.contains(&s) => protocols.push("eager"),
                COOPERATIVE_ASSIGNOR => protocols.push("cooperative"),
                "sticky" => errs.push(
                    key,
                    "the eager sticky assignor is not in librdkafka: use cooperative-sticky (the Collector's default), range or roundrobin",
                ),
                other => errs.push(
                    key,
                    format!("{other:?} is not a built-in strategy (range, roundrobin, cooperative-sticky), and profcol has no balancer extensions"),
                ),
            }
        }
        protocols.dedup();
        if protocols.len() > 1 {
            errs.push(
                section.key_path("group_rebalance_strategies"),
                "librdkafka cannot advertise cooperative-sticky beside range or roundrobin: list one kind",
            );
        }
    }

    /// `partition_processing`, as the Collector v0.165.1 checks it.
    fn check_partition_processing(&self, section: &ComponentConfig, errs: &mut ConfigErrors) {
        let p = &self.partition_processing;
        let key = |k: &str| section.key_path(&format!("partition_processing::{k}"));
        if p.max_buffered_batches.is_some() && p.max_prefetch.batches.is_some() {
            errs.push(
                key("max_buffered_batches"),
                "partition_processing.max_buffered_batches and partition_processing.max_prefetch.batches are mutually exclusive",
            );
        }
        if !p.independent {
            return;
        }
        let batches = p
            .max_prefetch
            .batches
            .or(p.max_buffered_batches)
            .unwrap_or(1);
        let m = &p.max_in_flight;
        for (k, bad, msg) in [
            ("max_prefetch::batches", batches <= 0, "partition_processing.max_prefetch.batches must be greater than zero"),
            ("max_prefetch::bytes", p.max_prefetch.bytes < 0, "partition_processing.max_prefetch.bytes must not be negative"),
            ("max_in_flight::records", m.records <= 0, "partition_processing.max_in_flight.records must be greater than zero"),
            ("max_in_flight::bytes", m.bytes < 0, "partition_processing.max_in_flight.bytes must not be negative"),
            ("max_in_flight::window", !matches!(m.window.as_str(), "per_fetch" | "cross_fetch"), "partition_processing.max_in_flight.window must be \"per_fetch\" or \"cross_fetch\""),
            ("max_in_flight::window", m.window == "cross_fetch" && (m.records <= 1 || m.bytes <= 0), "partition_processing.max_in_flight.window cross_fetch requires records above 1 and bytes above 0"),
            ("independent", !self.autocommit.enable, "partition_processing.independent requires autocommit.enable"),
        ] {
            if bad {
                errs.push(key(k), msg);
            }
        }
    }

    /// The assignors to advertise: the Collector's (franz-go's) default,
    /// `cooperative-sticky`, unless configured, so that profcol and the
    /// Collector can share a consumer group (members must have one in
    /// common).
    fn assignors(&self) -> String {
        if self.group_rebalance_strategies.is_empty() {
            COOPERATIVE_ASSIGNOR.to_owned()
        } else {
            self.group_rebalance_strategies.join(",")
        }
    }

    /// The consumer's librdkafka settings.
    pub fn rdkafka(&self) -> rdkafka::ClientConfig {
        let mut c = self.client.rdkafka();
        c.set("group.id", &self.group_id)
            .set("auto.offset.reset", &self.initial_offset)
            .set("session.timeout.ms", ms(&self.session_timeout))
            .set("heartbeat.interval.ms", ms(&self.heartbeat_interval))
            .set("partition.assignment.strategy", self.assignors())
            // Offsets are stored only once the pipeline took the message:
            // what librdkafka commits (every `autocommit::interval`, or
            // after each message without autocommit) was processed.
            .set("enable.auto.offset.store", "false")
            .set(
                "enable.auto.commit",
                if self.autocommit.enable {
                    "true"
                } else {
                    "false"
                },
            )
            .set("auto.commit.interval.ms", ms(&self.autocommit.interval))
            .set("fetch.min.bytes", self.min_fetch_size.to_string())
            .set("fetch.wait.max.ms", ms(&self.max_fetch_wait))
            .set(
                "max.partition.fetch.bytes",
                self.max_partition_fetch_size.to_string(),
            )
            // The read-ahead, bounded: see `prefetch_bytes`.
            .set(
                "queued.max.messages.kbytes",
                (self.prefetch_bytes() / 1024).max(1).to_string(),
            )
            .set("queued.min.messages", "1")
            // Once the read-ahead is full librdkafka postpones the next
            // fetch by this much (1 s by default): with one message as
            // large as the bound that was one message a second per
            // partition. A short wait re-checks the queue cheaply.
            .set("fetch.queue.backoff.ms", "1");
        if self.max_fetch_size > 0 {
            c.set("fetch.max.bytes", self.max_fetch_size.to_string());
        }
        if !self.group_instance_id.is_empty() {
            c.set("group.instance.id", &self.group_instance_id);
        }
        c
    }

    /// What librdkafka may hold read ahead of the pipeline: one
    /// `max_partition_fetch_size`, at least 1 KiB.
    pub fn prefetch_bytes(&self) -> usize {
        self.max_partition_fetch_size.max(1024) as usize
    }
}
