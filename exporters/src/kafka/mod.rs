//! Exporter `kafka`: each request becomes one Kafka message whose value is
//! the `ExportProfilesServiceRequest` (protobuf or OTLP/JSON), as the
//! Collector's contrib `kafka` exporter produces it: a key only from
//! `profiles::message_key_from_metadata_key`, `record_headers` (and
//! `otelcol.signal`) then the client metadata `include_metadata_keys` names
//! as headers, topic `otlp_profiles` unless configured. A request over
//! `producer::max_message_bytes` is cut at profile boundaries into several
//! messages (`crate::parts`, the split the other exporters use when a peer
//! refuses a request as too large), never dropped.
//!
//! The client is librdkafka (`rdkafka`). Queue, retries and timeout are the
//! runtime's; librdkafka's own delivery timeout is set to the export
//! `timeout`, so a message is never left in its queue after the runtime
//! gave up on the attempt.

mod config;
mod partitions;
mod security;
#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use profcol_model::proto::any_value::Value;
use profcol_model::ProfileBatch;
use profcol_otlp::json as otlp_json;
use profcol_otlp::revisions::Revision;
use profcol_pipeline::component::{
    ExportError, ExportOutcome, Exporter, ExporterContext, ExporterFactory, ExporterSettings,
    Request,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::parts::{self, PeerLimit};
pub use config::{
    millis, ClientConfig, Encoding, KafkaExporterConfig, MetadataConfig, Partitioner,
    ProducerConfig, DEFAULT_TOPIC,
};
pub use security::{AuthConfig, KafkaTls, SaslConfig};

pub struct KafkaExporterFactory;

impl ExporterFactory for KafkaExporterFactory {
    fn type_name(&self) -> &'static str {
        "kafka"
    }

    /// The Collector's kafka exporter waits 5 s (`timeout`).
    fn default_settings(&self) -> Option<ExporterSettings> {
        Some(ExporterSettings::with_timeout(Duration::from_secs(5)))
    }

    fn create(
        &self,
        cfg: &ComponentConfig,
        settings: &ExporterSettings,
    ) -> Result<Arc<dyn Exporter>, ConfigErrors> {
        let (c, resolved) = cfg.decode_checked(|c: &KafkaExporterConfig| c.validate(cfg))?;
        Ok(Arc::new(KafkaExporter::new(&c, resolved, settings.timeout)))
    }
}

pub fn factory() -> Arc<dyn ExporterFactory> {
    Arc::new(KafkaExporterFactory)
}

pub struct KafkaExporter {
    settings: rdkafka::ClientConfig,
    topic: String,
    topic_from_attribute: String,
    /// Lowercase, as receivers keep metadata keys.
    topic_from_metadata_key: String,
    /// Lowercase too.
    key_from_metadata_key: String,
    include_metadata_keys: Vec<String>,
    /// `record_headers` and `otelcol.signal`, before the metadata's.
    headers: Vec<(String, String)>,
    /// The metadata keys configured, with their key paths.
    metadata_keys: Vec<(String, String)>,
    partitions: partitions::Partitions,
    encoding: Encoding,
    max_message_bytes: u64,
    timeout: Duration,
    /// Made at start: creating it starts librdkafka's threads, which
    /// `profcol validate` has no use for.
    producer: OnceLock<FutureProducer>,
    /// `max_message_bytes` from the start; lowered when the broker refuses
    /// a message as too large.
    limit: PeerLimit,
}

impl KafkaExporter {
    fn new(c: &KafkaExporterConfig, r: config::Resolved, timeout: Duration) -> Self {
        let mut settings = c.client.rdkafka();
        let p = &c.producer;
        // librdkafka's `message.timeout.ms` is its delivery deadline,
        // retries included (0 would mean forever): a little inside the
        // runtime's, so that librdkafka gives a message up before the
        // runtime retries it, rather than deliver it late beside the retry.
        let deadline = (timeout.as_millis() * 9 / 10).clamp(1, i32::MAX as u128);
        settings
            .set("message.timeout.ms", deadline.to_string())
            .set(
                "acks",
                match p.required_acks.0 {
                    -1 => "all",
                    0 => "0",
                    _ => "1",
                },
            )
            .set("compression.codec", r.compression)
            // A request: at least one message, its value plus the record's
            // framing (librdkafka caps it at 1e9).
            .set(
                "message.max.bytes",
                p.max_broker_write_bytes
                    .max(p.max_message_bytes + 64 * 1024)
                    .clamp(1000, 1_000_000_000)
                    .to_string(),
            )
            .set(
                "linger.ms",
                format!("{:.3}", p.linger.0.as_secs_f64() * 1e3),
            )
            .set(
                "allow.auto.create.topics",
                if p.allow_auto_topic_creation {
                    "true"
                } else {
                    "false"
                },
            )
            // Idempotence would need acks=all; the Collector's does not
            // ask for it either.
            .set("enable.idempotence", "false")
            .set(
                "max.in.flight.requests.per.connection",
                p.max_inflight_requests_per_broker.to_string(),
            );
        if let Partitioner::StickyKey(name) = r.partitioner {
            settings.set("partitioner", name);
        }
        if let Some(level) = p.compression_params.level {
            settings.set("compression.level", level.to_string());
        }
        if p.flush_max_messages > 0 {
            settings.set("batch.num.messages", p.flush_max_messages.to_string());
        }
        Self {
            settings,
            topic: r.topic,
            topic_from_attribute: c.topic_from_attribute.clone(),
            topic_from_metadata_key: c.profiles.topic_from_metadata_key.to_ascii_lowercase(),
            key_from_metadata_key: c
                .profiles
                .message_key_from_metadata_key
                .to_ascii_lowercase(),
            include_metadata_keys: c.include_metadata_keys.clone(),
            headers: r.headers,
            metadata_keys: c.metadata_keys(),
            partitions: partitions::Partitions::new(
                r.partitioner,
                c.client.metadata.refresh_interval.0,
            ),
            encoding: r.encoding,
            max_message_bytes: p.max_message_bytes,
            timeout,
            producer: OnceLock::new(),
            limit: PeerLimit::fixed(p.max_message_bytes),
        }
    }

    fn producer(&self) -> Result<&FutureProducer, ExportError> {
        self.producer
            .get()
            .ok_or_else(|| ExportError::permanent("the kafka exporter was not started"))
    }

    /// The topic of `batch`, as the Collector picks it: the first value of
    /// the client metadata `topic_from_metadata_key` names, else
    /// `topic_from_attribute`'s value on the first resource that has it,
    /// else the configured one.
    fn topic_of(&self, batch: &ProfileBatch) -> String {
        if let Some(t) = metadata(batch, &self.topic_from_metadata_key).next() {
            return t.to_owned();
        }
        if self.topic_from_attribute.is_empty() {
            return self.topic.clone();
        }
        batch
            .find_in_resources(|r| {
                r.attributes
                    .iter()
                    .find_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                        Value::StringValue(s)
                            if kv.key == self.topic_from_attribute && !s.is_empty() =>
                        {
                            Some(s.clone())
                        }
                        _ => None,
                    })
            })
            .unwrap_or_else(|| self.topic.clone())
    }

    /// The message value: the received bytes when nothing changed them.
    async fn value(&self, batch: &Arc<ProfileBatch>) -> Result<Bytes, ExportError> {
        if self.encoding == Encoding::Proto {
            return Ok(batch.encode_to_bytes());
        }
        let batch = Arc::clone(batch);
        profcol_model::cpu::run(move || {
            let (json, lost) = otlp_json::encode_as(batch.data(), Revision::CURRENT);
            lost.warn(Revision::CURRENT);
            Ok::<_, std::io::Error>(Bytes::from(json))
        })
        .await
        .map_err(|e| ExportError::permanent(format!("encoding the message: {e}")))
    }

    /// One message of `batch`.
    async fn send(
        &self,
        batch: Arc<ProfileBatch>,
        _counts: (u64, u64),
    ) -> Result<ExportOutcome, ExportError> {
        let producer = self.producer()?;
        let value = self.value(&batch).await?;
        if value.len() as u64 > self.max_message_bytes {
            // Worded for `parts::too_large`, which cuts the request smaller.
            return Err(ExportError::permanent(format!(
                "a message of {} bytes exceeds the size limit of {} bytes (producer::max_message_bytes)",
                value.len(),
                self.max_message_bytes
            )));
        }
        let topic = self.topic_of(&batch);
        let key = metadata(&batch, &self.key_from_metadata_key)
            .find(|k| !k.is_empty())
            .map(str::to_owned);
        // The static ones, then every value of every key listed, in order
        // (metadata keys are matched without case, and sent as configured).
        let mut headers = OwnedHeaders::new();
        for (name, value) in &self.headers {
            headers = headers.insert(Header {
                key: name,
                value: Some(value),
            });
        }
        for key in &self.include_metadata_keys {
            for value in metadata(&batch, &key.to_ascii_lowercase()) {
                headers = headers.insert(Header {
                    key,
                    value: Some(value),
                });
            }
        }
        drop(batch);
        let pick = self.partitions.pick(producer, &topic, self.timeout).await;
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic).payload(&value[..]);
        if headers.count() > 0 {
            record = record.headers(headers);
        }
        if let Some(k) = &key {
            record = record.key(k.as_bytes());
        }
        if let Some(p) = &pick {
            record = record.partition(p.partition);
        }
        let sent = producer.send(record, Timeout::After(self.timeout)).await;
        drop(pick);
        match sent {
            Ok(_) => Ok(ExportOutcome::delivered()),
            Err((e, _)) => Err(classify(&topic, &e)),
        }
    }
}

/// The values of client metadata `key` (lowercase) the batch came with.
fn metadata<'a>(batch: &'a ProfileBatch, key: &'a str) -> impl Iterator<Item = &'a str> {
    batch
        .meta
        .metadata
        .iter()
        .filter(move |(k, _)| !key.is_empty() && k == key)
        .map(|(_, v)| v.as_str())
}

/// Whether trying again can help: the broker refusing the message itself
/// or the client's rights cannot change by waiting; a broker away, a leader
/// election or a timeout can.
fn classify(topic: &str, e: &KafkaError) -> ExportError {
    let message = format!("producing to topic {topic:?}: {e}");
    let permanent = matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
                | RDKafkaErrorCode::InvalidMessageSize
                | RDKafkaErrorCode::InvalidMessage
                | RDKafkaErrorCode::InvalidRecord
                | RDKafkaErrorCode::InvalidTopic
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::ClusterAuthorizationFailed
                | RDKafkaErrorCode::InvalidRequiredAcks
                | RDKafkaErrorCode::UnsupportedVersion
                | RDKafkaErrorCode::UnsupportedCompressionType
        )
    );
    if permanent {
        ExportError::permanent(message)
    } else {
        ExportError::retryable(message)
    }
}

#[async_trait]
impl Exporter for KafkaExporter {
    async fn start(&self, _ctx: &ExporterContext) -> anyhow::Result<()> {
        let producer: FutureProducer = self
            .settings
            .create()
            .map_err(|e| anyhow::anyhow!("creating the Kafka producer: {e}"))?;
        let _ = self.producer.set(producer);
        Ok(())
    }

    fn metadata_keys(&self) -> Vec<(String, String)> {
        self.metadata_keys.clone()
    }

    /// See [`KafkaExporter::value`]; `topic_from_attribute` reads only the
    /// resources ([`KafkaExporter::topic_of`]), which needs no decoding.
    fn sends_received_bytes(&self) -> bool {
        self.encoding == Encoding::Proto
    }

    async fn export(
        &self,
        req: &Request,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let in_parts = || parts::send(req, &self.limit, |b, c| self.send(b, c));
        if self.limit.applies_to(req) {
            return in_parts().await;
        }
        let counts = (req.batch.profile_count(), req.batch.sample_count());
        let result = self.send(req.batch.clone(), counts).await;
        if self.limit.refused(&result, req) {
            return in_parts().await;
        }
        result
    }

    /// Waits (up to the export timeout) for what librdkafka still holds.
    async fn shutdown(&self) {
        if let Some(p) = self.producer.get() {
            let p = p.clone();
            let timeout = self.timeout;
            let _ = tokio::task::spawn_blocking(move || p.flush(Timeout::After(timeout))).await;
        }
    }
}
