//! The Collector's `otelcol_kafka_receiver_*` metrics: partitions assigned
//! and taken (librdkafka's rebalance callback), each partition's lag (its
//! statistics, every [`STATS_INTERVAL_MS`]), and per message what
//! became of it.

use std::sync::Arc;

use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Statistics};

use profcol_pipeline::telemetry::Telemetry;

/// How often librdkafka reports the partitions' offsets and lag.
pub(super) const STATS_INTERVAL_MS: &str = "2000";

/// The consumer's context: librdkafka's callbacks land here.
pub(super) struct Metrics {
    pub receiver: String,
    pub telemetry: Arc<Telemetry>,
}

impl Metrics {
    /// One message done with: `success` when the pipelines took it,
    /// `failure` when they refused it for good (it held no valid request).
    pub(super) fn message(&self, topic: &str, partition: i32, offset: i64, taken: bool) {
        let partition = partition.to_string();
        let outcome = if taken { "success" } else { "failure" };
        let labels = [
            ("receiver", self.receiver.as_str()),
            ("topic", topic),
            ("partition", partition.as_str()),
            ("outcome", outcome),
        ];
        self.telemetry.kafka_receiver("records", &labels, 1);
        self.telemetry.kafka_receiver("messages", &labels, 1);
        let place = &labels[..3];
        if !taken {
            self.telemetry
                .kafka_receiver("unmarshal_failed_profiles", place, 1);
        }
        self.telemetry
            .kafka_receiver_gauge("current_offset", place, offset);
    }
}

impl ClientContext for Metrics {
    fn stats(&self, stats: Statistics) {
        for (topic, t) in &stats.topics {
            // Partition -1 is librdkafka's internal unassigned one.
            for p in t
                .partitions
                .values()
                .filter(|p| p.partition >= 0 && p.desired)
            {
                // Lag behind the stored offset (what the pipelines took),
                // once one is stored; before, behind the position.
                let lag = if p.consumer_lag_stored >= 0 {
                    p.consumer_lag_stored
                } else {
                    p.consumer_lag
                };
                if lag < 0 {
                    continue;
                }
                let partition = p.partition.to_string();
                let labels = [
                    ("receiver", self.receiver.as_str()),
                    ("topic", topic.as_str()),
                    ("partition", partition.as_str()),
                ];
                self.telemetry
                    .kafka_receiver_gauge("offset_lag", &labels, lag);
            }
        }
    }
}

impl ConsumerContext for Metrics {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let (what, n) = match rebalance {
            Rebalance::Assign(tpl) => ("partition_start", tpl.count()),
            Rebalance::Revoke(tpl) => ("partition_close", tpl.count()),
            Rebalance::Error(_) => return,
        };
        tracing::info!(receiver = %self.receiver, n, "Kafka partitions {}", if what == "partition_start" { "assigned" } else { "revoked" });
        self.telemetry
            .kafka_receiver(what, &[("receiver", self.receiver.as_str())], n as u64);
    }
}
