//! `receivers: kafka:` with the Collector's keys (contrib `kafkareceiver`
//! and `configkafka.ConsumerConfig` of v0.161.0) and defaults.

use serde::{Deserialize, Serialize};

use profcol_exporters::kafka::{ClientConfig, Encoding, DEFAULT_TOPIC};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration};

use crate::ingest::OnInvalid;

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
        }
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
        if !p.exclude_topics.is_empty() {
            let msg = if topics.iter().any(|t| t.starts_with('^')) {
                "is not supported by profcol yet: list the topics instead of a pattern that excludes some"
            } else {
                "profiles.exclude_topics is configured but none of the configured profiles.topics use regex pattern (must start with '^')"
            };
            errs.push(section.key_path("profiles::exclude_topics"), msg);
        }
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
            encoding,
            skip_poisoned: !m.after || on_permanent,
            headers,
        })
    }

    /// The consumer's librdkafka settings.
    pub fn rdkafka(&self) -> rdkafka::ClientConfig {
        let mut c = self.client.rdkafka();
        let ms = |d: &Duration| d.0.as_millis().clamp(1, i32::MAX as u128).to_string();
        c.set("group.id", &self.group_id)
            .set("auto.offset.reset", &self.initial_offset)
            .set("session.timeout.ms", ms(&self.session_timeout))
            .set("heartbeat.interval.ms", ms(&self.heartbeat_interval))
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
