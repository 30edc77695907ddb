//! `round_robin` and `least_backup`: librdkafka has neither, so the
//! exporter picks the partition itself from the topic's partition count
//! (read from the brokers' metadata, again every `metadata::refresh_interval`)
//! and, for `least_backup`, the messages it has in flight to each partition.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::util::Timeout;

use super::config::Partitioner;

/// A failed or empty metadata read is tried again this soon.
const RETRY: Duration = Duration::from_secs(1);

/// Topics remembered at most (`topic_from_metadata_key` lets clients name
/// them): past it, those not read within `refresh` are forgotten, and if
/// that is not enough, all.
const MAX_TOPICS: usize = 1024;

pub(super) struct Partitions {
    strategy: Partitioner,
    refresh: Duration,
    topics: Mutex<HashMap<String, Arc<Topic>>>,
    /// One metadata read at a time: concurrent sends wait for it rather
    /// than each start a topic's turns at partition 0.
    reading: tokio::sync::Mutex<()>,
}

struct Topic {
    read_at: Instant,
    /// Messages in flight, one counter per partition (empty: the count is
    /// unknown, librdkafka's partitioner decides).
    in_flight: Vec<AtomicU32>,
    next: AtomicUsize,
}

/// A message's partition, counted in flight until dropped.
pub(super) struct Pick {
    topic: Arc<Topic>,
    pub partition: i32,
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.topic.in_flight[self.partition as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Partitions {
    pub(super) fn new(strategy: Partitioner, refresh: Duration) -> Self {
        Self {
            strategy,
            refresh,
            topics: Mutex::new(HashMap::new()),
            reading: tokio::sync::Mutex::new(()),
        }
    }

    /// The partition of the next message to `topic`, or `None` to let
    /// librdkafka's partitioner decide (`sticky_key`, or a topic whose
    /// partitions are not known yet).
    pub(super) async fn pick(
        &self,
        producer: &FutureProducer,
        topic: &str,
        timeout: Duration,
    ) -> Option<Pick> {
        if matches!(self.strategy, Partitioner::StickyKey(_)) {
            return None;
        }
        let t = self.topic(producer, topic, timeout).await;
        let n = t.in_flight.len();
        if n == 0 {
            return None;
        }
        let start = t.next.fetch_add(1, Ordering::Relaxed) % n;
        let partition = match self.strategy {
            Partitioner::LeastBackup => (0..n)
                .map(|i| (start + i) % n)
                .min_by_key(|&p| t.in_flight[p].load(Ordering::Relaxed))
                .unwrap_or(start),
            _ => start,
        };
        t.in_flight[partition].fetch_add(1, Ordering::Relaxed);
        Some(Pick {
            topic: t,
            partition: partition as i32,
        })
    }

    async fn topic(&self, producer: &FutureProducer, topic: &str, timeout: Duration) -> Arc<Topic> {
        let known = || {
            let t = self.topics.lock().unwrap().get(topic).cloned()?;
            let fresh = if t.in_flight.is_empty() {
                RETRY
            } else {
                self.refresh
            };
            (t.read_at.elapsed() < fresh).then_some(t)
        };
        if let Some(t) = known() {
            return t;
        }
        let _reading = self.reading.lock().await;
        if let Some(t) = known() {
            return t;
        }
        let count = partition_count(producer, topic, timeout).await;
        // The turns go on from where they were.
        let next = self
            .topics
            .lock()
            .unwrap()
            .get(topic)
            .map_or(0, |t| t.next.load(Ordering::Relaxed));
        let t = Arc::new(Topic {
            read_at: Instant::now(),
            in_flight: (0..count).map(|_| AtomicU32::new(0)).collect(),
            next: AtomicUsize::new(next),
        });
        let mut topics = self.topics.lock().unwrap();
        if topics.len() >= MAX_TOPICS {
            topics.retain(|_, t| t.read_at.elapsed() < self.refresh);
            if topics.len() >= MAX_TOPICS {
                topics.clear();
            }
        }
        topics.insert(topic.to_owned(), Arc::clone(&t));
        t
    }
}

/// The partitions of `topic` the brokers report, 0 when they cannot say.
async fn partition_count(producer: &FutureProducer, topic: &str, timeout: Duration) -> usize {
    let producer = producer.clone();
    let name = topic.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        let m = producer
            .client()
            .fetch_metadata(Some(&name), Timeout::After(timeout))?;
        Ok::<_, rdkafka::error::KafkaError>(
            m.topics()
                .iter()
                .find(|t| t.name() == name && t.error().is_none())
                .map_or(0, |t| t.partitions().len()),
        )
    })
    .await;
    match read {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            profcol_model::warn_limited!(topic, error = %e, "reading the topic's partitions; librdkafka's partitioner decides meanwhile");
            0
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Topics named by clients cannot grow the map without end; a topic
    /// whose partitions the brokers do not tell is left to librdkafka.
    #[tokio::test]
    async fn remembers_a_bounded_number_of_topics() {
        let producer: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9")
            .create()
            .unwrap();
        let p = Partitions::new(Partitioner::RoundRobin, Duration::from_secs(600));
        for i in 0..MAX_TOPICS + 10 {
            let pick = p
                .pick(&producer, &format!("t{i}"), Duration::from_millis(1))
                .await;
            assert!(pick.is_none());
            assert!(p.topics.lock().unwrap().len() <= MAX_TOPICS);
        }
    }
}
