//! Receiver `kafka`: reads `ExportProfilesServiceRequest`s (protobuf or
//! OTLP/JSON) from Kafka topics as a member of a consumer group, as the
//! Collector's contrib `kafka` receiver does, and hands each message to the
//! one ingest path (`crate::ingest`).
//!
//! At least once: a message's offset is stored for commit only after the
//! pipelines accepted it (it is in every sending queue) or refused it for
//! good; librdkafka commits stored offsets every `autocommit::interval`
//! (or after each message when autocommit is off) and when a partition is
//! revoked. A message being processed when its partition moves, or when
//! profcol stops, is read again by whoever owns the partition next.
//!
//! Back-pressure: up to [`IN_FLIGHT`] messages are offered at once, and
//! marked in the order read; while the pipelines refuse one as full
//! (memory, queue), it is offered again after the wait they ask for, and
//! nothing is read past the oldest unfinished one and three more. librdkafka's
//! read-ahead is bounded (`queued.max.messages.kbytes`) and that bound, with
//! room for the messages being offered (their buffers stay librdkafka's
//! until marked), is held in the memory budget for the receiver's life; a
//! message is copied out only once the budget has room for the copy.
//!
//! A message the pipelines can never take (garbage bytes, an invalid
//! request) is counted as refused and skipped, unless `message_marking`
//! says `after: true` with `on_permanent_error: false`: then, as in the
//! Collector, it is offered again after `error_backoff` and blocks its
//! partition until someone intervenes.

mod config;
mod telemetry;
#[cfg(test)]
mod tests;
mod topics;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{FuturesOrdered, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};

use profcol_exporters::kafka::Encoding;
use profcol_pipeline::component::{Receiver, ReceiverContext, ReceiverFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use crate::ingest::{Ingest, Origin, Refusal};
pub use config::KafkaReceiverConfig;
use telemetry::{Metrics, STATS_INTERVAL_MS};

/// The `transport` label of what this receiver takes.
const TRANSPORT: &str = "kafka";

pub struct KafkaReceiverFactory;

impl ReceiverFactory for KafkaReceiverFactory {
    fn type_name(&self) -> &'static str {
        "kafka"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Receiver>, ConfigErrors> {
        let (c, resolved) = cfg.decode_checked(|c: &KafkaReceiverConfig| c.validate(cfg))?;
        Ok(Box::new(KafkaReceiver { cfg: c, resolved }))
    }
}

pub fn factory() -> Arc<dyn ReceiverFactory> {
    Arc::new(KafkaReceiverFactory)
}

pub struct KafkaReceiver {
    cfg: KafkaReceiverConfig,
    resolved: config::Resolved,
}

#[async_trait]
impl Receiver for KafkaReceiver {
    async fn start(
        self: Box<Self>,
        ctx: ReceiverContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let metrics = Metrics {
            receiver: ctx.id.to_string(),
            telemetry: ctx.telemetry.clone(),
        };
        let consumer: StreamConsumer<Metrics> = self
            .cfg
            .rdkafka()
            .set("statistics.interval.ms", STATS_INTERVAL_MS)
            .create_with_context(metrics)
            .map_err(|e| anyhow::anyhow!("receivers::{}: creating the consumer: {e}", ctx.id))?;
        if self.resolved.filter.is_none() {
            let topics: Vec<&str> = self.resolved.topics.iter().map(String::as_str).collect();
            consumer.subscribe(&topics).map_err(|e| {
                anyhow::anyhow!("receivers::{}: subscribing to {topics:?}: {e}", ctx.id)
            })?;
        }
        tracing::info!(receiver = %ctx.id, brokers = ?self.cfg.client.brokers, topics = ?self.resolved.topics, group_id = %self.cfg.group_id, "Kafka receiver consuming");
        // librdkafka's read-ahead, held in the budget while it may be full,
        // and the messages taken out of it that are still being offered
        // (their buffers stay librdkafka's until marked).
        let prefetch = ctx
            .output
            .budget()
            .force(self.cfg.prefetch_bytes() * (1 + IN_FLIGHT));
        let ingest = Arc::new(Ingest::new(
            ctx.id.clone(),
            ctx.output.clone(),
            ctx.telemetry.clone(),
            self.cfg.on_invalid,
        ));
        let run = Consume {
            consumer: Arc::new(consumer),
            ingest,
            encoding: self.resolved.encoding,
            headers: self.resolved.headers,
            skip_poisoned: self.resolved.skip_poisoned,
            autocommit: self.cfg.autocommit.enable,
            backoff: (
                self.cfg.error_backoff.initial_interval.0,
                self.cfg.error_backoff.max_interval.0,
            ),
            shutdown: ctx.shutdown.clone(),
        };
        // Its own task, so that a slow read of the brokers' topics never
        // holds the messages being offered.
        let watcher = self.resolved.filter.map(|filter| {
            let watch = Filtered {
                filter,
                // At least a second: a read is a request to a broker.
                refresh: self
                    .cfg
                    .client
                    .metadata
                    .refresh_interval
                    .0
                    .max(Duration::from_secs(1)),
                consumer: run.consumer.clone(),
                id: ctx.id.to_string(),
            };
            tokio::spawn(watch.run(ctx.shutdown.clone()))
        });
        Ok(tokio::spawn(async move {
            let consumer = run.consumer.clone();
            run.run().await;
            // The last other holders of the consumer go first, so that
            // closing it happens below, off the async threads.
            drop(run);
            if let Some(w) = watcher {
                w.abort();
                let _ = w.await;
            }
            // Closing commits what was stored and leaves the group; it
            // blocks, so off the async threads, and for at most 10 s (with
            // the brokers away it would wait longer: what it could not
            // commit is read again, at least once).
            let close = tokio::task::spawn_blocking(move || drop(consumer));
            let _ = tokio::time::timeout(Duration::from_secs(10), close).await;
            drop(prefetch);
        }))
    }
}

struct Consume {
    consumer: Arc<StreamConsumer<Metrics>>,
    ingest: Arc<Ingest>,
    encoding: Encoding,
    /// `header_extraction`: header name, resource attribute.
    headers: Vec<(String, String)>,
    skip_poisoned: bool,
    autocommit: bool,
    /// First and longest wait before a refused message is offered again.
    backoff: (Duration, Duration),
    shutdown: tokio_util::sync::CancellationToken,
}

/// With `exclude_topics`: subscribes the consumer by name to the topics
/// the filter passes, again every `refresh`.
struct Filtered {
    filter: topics::TopicFilter,
    /// How often the brokers' topics are read again.
    refresh: Duration,
    consumer: Arc<StreamConsumer<Metrics>>,
    /// The receiver's id, for the log.
    id: String,
}

impl Filtered {
    async fn run(self, shutdown: tokio_util::sync::CancellationToken) {
        let mut subscribed = None;
        loop {
            let wait = self.resubscribe(&mut subscribed).await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Reads the brokers' topics and subscribes to those the filter passes,
    /// when they are not `subscribed`; the wait until the next read
    /// (sooner after a failed one).
    async fn resubscribe(&self, subscribed: &mut Option<Vec<String>>) -> Duration {
        let retry = self.refresh.min(Duration::from_secs(5));
        let consumer = self.consumer.clone();
        let read = tokio::task::spawn_blocking(move || {
            consumer
                .fetch_metadata(None, Duration::from_secs(10))
                .map(|m| {
                    m.topics()
                        .iter()
                        .filter(|t| t.error().is_none())
                        .map(|t| t.name().to_owned())
                        .collect::<Vec<_>>()
                })
        })
        .await;
        let names = match read {
            Ok(Ok(names)) => names,
            Ok(Err(e)) => {
                profcol_model::warn_limited!(receiver = %self.id, error = %e, "reading the brokers' topics");
                return retry;
            }
            Err(_) => return retry,
        };
        let topics = self.filter.matching(names.iter().map(String::as_str));
        if subscribed.as_ref() != Some(&topics) {
            let result = if topics.is_empty() {
                self.consumer.unsubscribe();
                Ok(())
            } else {
                let names: Vec<&str> = topics.iter().map(String::as_str).collect();
                self.consumer.subscribe(&names)
            };
            match result {
                Ok(()) => {
                    tracing::info!(receiver = %self.id, ?topics, "Kafka receiver subscribed to the topics its patterns match");
                    *subscribed = Some(topics);
                }
                Err(e) => {
                    profcol_model::warn_limited!(receiver = %self.id, error = %e, "subscribing");
                    return retry;
                }
            }
        }
        self.refresh
    }
}

/// Messages offered to the pipelines at once: the ingest of one (decode
/// check, queueing) overlaps the next, as OTLP requests on several
/// connections do; offsets are still stored in the order read.
const IN_FLIGHT: usize = 4;

impl Consume {
    async fn run(&self) {
        // In the order read: a message is marked once it and all read
        // before it were taken (at least once, whatever finishes first).
        let mut in_flight = FuturesOrdered::new();
        loop {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return,
                Some(done) = in_flight.next(), if !in_flight.is_empty() => match done {
                    Some((msg, taken)) => self.mark(&msg, taken),
                    // profcol stops: what is unmarked is read again.
                    None => return,
                },
                msg = self.consumer.recv(), if in_flight.len() < IN_FLIGHT => match msg {
                    Ok(m) => in_flight.push_back(self.process(m)),
                    // Transport errors: librdkafka reconnects by itself.
                    Err(e) => {
                        profcol_model::warn_limited!(receiver = %self.ingest.id, error = %e, "Kafka consumer error");
                    }
                },
            }
        }
    }

    /// Offers a message to the pipelines until they take it (`true`) or
    /// refuse it for good (`false`); `None` when profcol stops first (it
    /// stays unmarked).
    async fn process<'c>(&self, msg: BorrowedMessage<'c>) -> Option<(BorrowedMessage<'c>, bool)> {
        let payload = msg.payload().unwrap_or_default();
        let resource = self.header_attributes(&msg);
        let budget = self.ingest.output.budget().clone();
        let mut wait = self.backoff.0;
        loop {
            let memory = tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                m = budget.for_work(payload.len()) => m,
            };
            // Copied out of librdkafka's buffer once the budget has room.
            let bytes = Bytes::copy_from_slice(payload);
            let origin = Origin {
                transport: TRANSPORT,
                client: None,
                metadata: Vec::new(),
                resource: resource.clone(),
            };
            let result = match self.encoding {
                Encoding::Proto => self.ingest.otlp(bytes, None, memory, origin).await,
                Encoding::Json => self.ingest.otlp_json(bytes, memory, origin).await,
            };
            let after = match result {
                Ok(_) => return Some((msg, true)),
                // Full for now: wait as asked, read nothing more meanwhile.
                Err(Refusal {
                    retry_after: Some(after),
                    ..
                }) => after,
                Err(r) if self.skip_poisoned => {
                    tracing::warn!(receiver = %self.ingest.id, topic = msg.topic(), partition = msg.partition(), offset = msg.offset(), error = %r.message, "skipping a message the pipelines refused");
                    return Some((msg, false));
                }
                Err(_) => {
                    let w = wait;
                    wait = (wait * 2).min(self.backoff.1);
                    w
                }
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                _ = tokio::time::sleep(after) => {}
            }
        }
    }

    /// The resource attributes `header_extraction` takes from `msg`'s
    /// headers: the first header of each configured name.
    fn header_attributes(&self, msg: &BorrowedMessage<'_>) -> Vec<(String, String)> {
        let Some(headers) = msg.headers().filter(|_| !self.headers.is_empty()) else {
            return Vec::new();
        };
        self.headers
            .iter()
            .filter_map(|(name, attr)| {
                let h = headers.iter().find(|h| h.key == name)?;
                let value = String::from_utf8_lossy(h.value.unwrap_or_default());
                Some((attr.clone(), value.into_owned()))
            })
            .collect()
    }

    /// The message is done with: its offset is stored for the next commit
    /// (librdkafka stores the one after it, the next to read).
    fn mark(&self, msg: &BorrowedMessage<'_>, taken: bool) {
        self.consumer
            .context()
            .message(msg.topic(), msg.partition(), msg.offset(), taken);
        let stored = if self.autocommit {
            self.consumer.store_offset_from_message(msg)
        } else {
            self.consumer.commit_message(msg, CommitMode::Async)
        };
        if let Err(e) = stored {
            // The partition was revoked meanwhile: its new owner reads the
            // message again (at least once).
            tracing::debug!(receiver = %self.ingest.id, error = %e, "offset not stored");
        }
    }
}
