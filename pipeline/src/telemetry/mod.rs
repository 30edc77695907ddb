//! Internal telemetry: every event is one call here, which emits both the
//! `tracing` event and the metric, with the Collector's metric names.
//! Counts are in OTLP samples.

mod process;
mod server;

pub use process::Identity;

pub use profcol_model::log_limit::LogLimit;
pub use server::serve_metrics;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use std::sync::RwLock;

use hashbrown::{Equivalent, HashMap};

use crate::config::MetricsLevel;

type Labels = Vec<(&'static str, String)>;

/// A metric family with its handles cached by label values. An event looks
/// its handle up by borrowed labels, where `Family::get_or_create` needs an
/// owned label set (a `Vec` and a `String` per label) on every increment;
/// a handle is an `Arc`, so the clone handed out is one atomic increment.
struct Cached<M, C = fn() -> M> {
    family: Family<Labels, M, C>,
    handles: RwLock<HashMap<Labels, M>>,
}

/// Label values as an event has them: hashes and compares as the owned
/// [`Labels`] with the same contents, so it finds their entry.
#[derive(Hash)]
struct Borrowed<'a>(&'a [(&'static str, &'a str)]);

impl Equivalent<Labels> for Borrowed<'_> {
    fn equivalent(&self, key: &Labels) -> bool {
        self.0.len() == key.len()
            && self
                .0
                .iter()
                .zip(key)
                .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
    }
}

impl<M: Clone, C: MetricConstructor<M>> Cached<M, C> {
    fn new(family: Family<Labels, M, C>) -> Self {
        Self {
            family,
            handles: RwLock::default(),
        }
    }

    fn get(&self, labels: &[(&'static str, &str)]) -> M {
        let key = Borrowed(labels);
        if let Some(m) = self
            .handles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return m.clone();
        }
        let owned: Labels = labels.iter().map(|&(k, v)| (k, v.to_owned())).collect();
        let m = self.family.get_or_create(&owned).clone();
        self.handles
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(owned, m.clone());
        m
    }
}

/// Metric families; `_total` is appended to counters on exposition, as the
/// Collector's Prometheus endpoint does.
pub struct Telemetry {
    /// `service.telemetry.metrics.level` is `detailed`: the metrics that
    /// cost work of their own to measure (encoded sizes) are recorded.
    detailed: std::sync::atomic::AtomicBool,
    /// Every family: metrics level `normal` and `detailed`.
    registry: Registry,
    /// The core Collector API's `otelcol_*` families only: level `basic`.
    basic: Registry,
    receiver_accepted: Cached<Counter>,
    receiver_refused: Cached<Counter>,
    exporter_sent: Cached<Counter>,
    exporter_sent_points: Cached<Counter>,
    exporter_failed_points: Cached<Counter>,
    exporter_enqueue_failed_points: Cached<Counter>,
    exporter_send_failed: Cached<Counter>,
    exporter_enqueue_failed: Cached<Counter>,
    exporter_dropped: Cached<Counter>,
    exporter_queue_size: Cached<Gauge>,
    exporter_queue_capacity: Cached<Gauge>,
    exporter_queue_corrupt: Cached<Counter>,
    processor_incoming: Cached<Counter>,
    processor_outgoing: Cached<Counter>,
    processor_dropped: Cached<Counter>,
    processor_events: Cached<Counter>,
    filter_filtered: Cached<Counter>,
    connector_overflow: Cached<Counter>,
    processor_held: Cached<Gauge>,
    batch_send_size: Cached<Histogram, fn() -> Histogram>,
    batch_send_size_bytes: Cached<Histogram, fn() -> Histogram>,
    batch_size_trigger: Cached<Counter>,
    batch_timeout_trigger: Cached<Counter>,
    batch_cardinality: Cached<Gauge>,
    exporter_events: Cached<Counter>,
    pipeline_dropped: Cached<Counter>,
    receiver_items: Cached<Counter>,
    receiver_forwarded: Cached<Counter>,
    receiver_forward_queue: Cached<Gauge>,
    receiver_forward_duplicates: Cached<Counter>,
    receiver_requests: Cached<Counter>,
    receiver_repairs: Cached<Counter>,
    scraper_scraped: Cached<Counter>,
    scraper_errored: Cached<Counter>,
    lb_resolutions: Cached<Counter>,
    lb_backends: Cached<Gauge>,
    lb_backend_updates: Cached<Counter>,
    lb_backend_outcome: Cached<Counter>,
    lb_backend_latency: Cached<Histogram, fn() -> Histogram>,
    config_reloads: Cached<Counter>,
    k8s_pod_association: Cached<Counter>,
    /// `otelcol_k8s_watcher_<kind>_<event>`, by `<kind>_<event>`.
    k8s_watcher: Vec<(&'static str, Cached<Counter>)>,
    k8s_watch_errors: Cached<Counter>,
    k8s_cache_refused: Cached<Counter>,
    /// `otelcol_processor_symbolizer_<what>`, by `<what>`.
    symbolizer: Vec<(&'static str, Cached<Counter>)>,
    profilez_skipped: Cached<Counter>,
    /// `otelcol_kafka_receiver_<what>`, by `<what>`: counters and gauges.
    kafka_receiver: Vec<(&'static str, Cached<Counter>)>,
    kafka_receiver_gauges: Vec<(&'static str, Cached<Gauge>)>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

// prometheus_client ends every HELP with a period of its own.
macro_rules! family {
    ($reg:expr, $name:literal, $help:literal) => {{
        let f = Family::default();
        $reg.register($name, $help.trim_end_matches('.'), f.clone());
        Cached::new(f)
    }};
    // A core Collector metric, served at every level.
    ($reg:expr, $basic:expr, $name:literal, $help:literal) => {{
        let f = family!($reg, $name, $help);
        $basic.register($name, $help.trim_end_matches('.'), f.family.clone());
        f
    }};
}

/// Families named `<prefix><key>` with their help, served at every level,
/// found by `key`.
fn named<M>(
    r: &mut Registry,
    b: &mut Registry,
    prefix: &str,
    list: &[(&'static str, &str)],
) -> Vec<(&'static str, Cached<M>)>
where
    M: Default
        + Clone
        + prometheus_client::metrics::TypedMetric
        + prometheus_client::encoding::EncodeMetric
        + Send
        + Sync
        + std::fmt::Debug
        + 'static,
{
    list.iter()
        .map(|&(key, help)| {
            let f: Family<Labels, M> = Family::default();
            let name = format!("{prefix}{key}");
            r.register(name.clone(), help.trim_end_matches('.'), f.clone());
            b.register(name, help.trim_end_matches('.'), f.clone());
            (key, Cached::new(f))
        })
        .collect()
}

impl Telemetry {
    pub fn new() -> Self {
        let (mut r, mut b) = (Registry::default(), Registry::default());
        // The process metrics are served at every level, as the Collector's.
        let identity = Identity::default();
        for reg in [&mut r, &mut b] {
            reg.register_collector(Box::new(process::Process::new(identity.clone())));
        }
        Self {
            receiver_accepted: family!(r, b, "otelcol_receiver_accepted_profile_samples", "Samples successfully pushed into the pipeline."),
            receiver_refused: family!(r, b, "otelcol_receiver_refused_profile_samples", "Samples that could not be pushed into the pipeline."),
            exporter_sent: family!(r, b, "otelcol_exporter_sent_profile_samples", "Samples successfully sent to destination."),
            exporter_send_failed: family!(r, b, "otelcol_exporter_send_failed_profile_samples", "Samples in failed attempts to send to destination."),
            exporter_sent_points: family!(r, b, "otelcol_exporter_sent_metric_points", "Number of metric points successfully sent to destination."),
            exporter_failed_points: family!(r, b, "otelcol_exporter_send_failed_metric_points", "Number of metric points in failed attempts to send to destination."),
            exporter_enqueue_failed_points: family!(r, b, "otelcol_exporter_enqueue_failed_metric_points", "Number of metric points failed to be added to the sending queue."),
            exporter_enqueue_failed: family!(r, b, "otelcol_exporter_enqueue_failed_profile_samples", "Samples that failed to be added to the sending queue."),
            exporter_dropped: family!(r, "profcol_exporter_dropped_profile_samples", "Samples an exporter decided not to send, by reason."),
            exporter_queue_size: family!(r, b, "otelcol_exporter_queue_size", "Current size of the retry queue (in requests)."),
            exporter_queue_capacity: family!(r, b, "otelcol_exporter_queue_capacity", "Fixed capacity of the retry queue (in the unit of its sizer: requests or bytes)."),
            exporter_queue_corrupt: family!(r, "profcol_exporter_queue_corrupt_records", "Damaged records a persistent sending queue found and skipped (and unreadable queue directories set aside)."),
            processor_incoming: family!(r, b, "otelcol_processor_incoming_items", "Number of items (profile samples) passed to the processor."),
            processor_outgoing: family!(r, b, "otelcol_processor_outgoing_items", "Number of items (profile samples) emitted from the processor."),
            processor_dropped: family!(r, "profcol_processor_dropped_profile_samples", "Samples a processor dropped, by reason."),
            filter_filtered: family!(r, b, "otelcol_processor_filter_profiles_filtered", "Number of profile samples dropped by the filter processor."),
            connector_overflow: family!(r, b, "otelcol_connector_signaltometrics_overflow_attribute_sets", "Attribute sets of a metric folded into its overflow point (reason cardinality_limit: otel.metric.overflow=true; top_functions: function.name=(other)), per converted request."),
            processor_events: family!(r, "profcol_processor_events", "Non-sample events a processor counted (unknown units, pruned threads, bytes saved)."),
            processor_held: family!(r, "profcol_processor_held_profile_samples", "Samples a stateful processor (batch) holds: accepted, neither sent nor lost yet."),
            batch_send_size: {
                let f: Family<Labels, Histogram, fn() -> Histogram> = Family::new_with_constructor(send_size_buckets);
                r.register("otelcol_processor_batch_batch_send_size", "Number of units in the batch (profile samples)", f.clone());
                b.register("otelcol_processor_batch_batch_send_size", "Number of units in the batch (profile samples)", f.clone());
                Cached::new(f)
            },
            batch_send_size_bytes: {
                let f: Family<Labels, Histogram, fn() -> Histogram> = Family::new_with_constructor(send_bytes_buckets);
                r.register("otelcol_processor_batch_batch_send_size_bytes", "Number of bytes in the batch that was sent (encoded)", f.clone());
                Cached::new(f)
            },
            batch_size_trigger: family!(r, b, "otelcol_processor_batch_batch_size_trigger_send", "Number of times the batch was sent due to a size trigger."),
            batch_timeout_trigger: family!(r, b, "otelcol_processor_batch_timeout_trigger_send", "Number of times the batch was sent due to a timeout trigger."),
            batch_cardinality: family!(r, b, "otelcol_processor_batch_metadata_cardinality", "Number of distinct metadata value combinations being processed."),
            exporter_events: family!(r, "profcol_exporter_events", "Non-sample events an exporter counted (files written, files removed by retention)."),
            pipeline_dropped: family!(r, "profcol_pipeline_dropped_profile_samples", "Samples dropped by the runtime between components, by reason."),
            receiver_items: family!(r, "profcol_receiver_items", "Items a receiver saw, by type and outcome (e.g. Sentry envelope items)."),
            receiver_forwarded: family!(r, "profcol_receiver_forwarded_items", "Items a receiver forwarded upstream, by type and outcome (forwarded, failed, dropped) with a reason."),
            receiver_forward_queue: family!(r, "profcol_receiver_forward_queue_size", "Envelopes waiting in a receiver's forwarding retry queue."),
            receiver_forward_duplicates: family!(r, "profcol_receiver_forwarded_possible_duplicates", "Forwarded items delivered after an attempt that may have been taken (timed out after sending), by type: the upstream may hold them twice."),
            receiver_requests: family!(r, "profcol_receiver_accepted_requests", "OTLP requests accepted, by the opentelemetry-proto revision they were written in."),
            receiver_repairs: family!(r, "profcol_receiver_repairs", "Producer mistakes a receiver repaired instead of refusing the request, by kind."),
            // The Collector's scraperhelper metrics for profiles; a record
            // is one pprof a scrape fetched.
            scraper_scraped: family!(r, b, "otelcol_scraper_scraped_profile_records", "Number of profile records successfully scraped."),
            scraper_errored: family!(r, b, "otelcol_scraper_errored_profile_records", "Number of profile records that were unable to be scraped."),
            // The loadbalancing exporter's, as the Collector's (its
            // metadata.yaml gives them no level, so `basic` serves them).
            lb_resolutions: family!(r, b, "otelcol_loadbalancer_num_resolutions", "Number of times the resolver has triggered new resolutions."),
            lb_backends: family!(r, b, "otelcol_loadbalancer_num_backends", "Current number of backends in use."),
            lb_backend_updates: family!(r, b, "otelcol_loadbalancer_num_backend_updates", "Number of times the list of backends was updated."),
            lb_backend_outcome: family!(r, b, "otelcol_loadbalancer_backend_outcome", "Number of successes and failures for each endpoint."),
            lb_backend_latency: {
                let f: Family<Labels, Histogram, fn() -> Histogram> = Family::new_with_constructor(latency_buckets);
                r.register("otelcol_loadbalancer_backend_latency", "Response latency in ms for the backends", f.clone());
                b.register("otelcol_loadbalancer_backend_latency", "Response latency in ms for the backends", f.clone());
                Cached::new(f)
            },
            k8s_pod_association: family!(r, b, "otelcol_k8s_pod_association", "Number of pod associations' evaluations."),
            k8s_watcher: ["pod_added", "pod_updated", "pod_deleted", "namespace_added", "namespace_updated", "namespace_deleted", "node_added", "node_updated", "node_deleted"]
                .into_iter()
                .map(|key| {
                    let f = Family::default();
                    let name = format!("otelcol_k8s_watcher_{key}");
                    let (kind, event) = key.split_once('_').unwrap_or((key, ""));
                    let help = format!("Number of {kind} {event} events received");
                    r.register(name.clone(), help.clone(), f.clone());
                    b.register(name, help, f.clone());
                    (key, Cached::new(f))
                })
                .collect(),
            k8s_watch_errors: family!(r, "profcol_k8s_watch_errors", "Failed requests of a watch of the Kubernetes API (it retries with backoff), by resource."),
            k8s_cache_refused: family!(r, "profcol_k8s_cache_refused", "Kubernetes objects left out of the cache because the memory budget is exhausted, by resource."),
            symbolizer: named(&mut r, &mut b, "otelcol_processor_symbolizer_", &[
                ("cache_hits", "Native frames found in the symbolizer's result cache."),
                ("cache_misses", "Native frames not in the symbolizer's result cache when their batch came."),
                ("frames_resolved", "Addresses the symbolizer resolved to at least one function."),
                ("frames_unresolved", "Addresses no debug information named (no file found, or no function at the address)."),
                ("fetches", "Requests of debug files from debuginfod servers (cache hits included)."),
                ("fetch_failures", "debuginfod fetches that failed (timeout, server error, too large, truncated)."),
                ("load_failures", "Binaries for which no usable debug information was found or kept."),
                ("queue_full", "Addresses not queued for resolution because the queue was full (asked again by a later batch)."),
            ]),
            kafka_receiver: named(&mut r, &mut b, "otelcol_kafka_receiver_", &[
                ("records", "Kafka records the receiver took, by topic, partition and outcome: success (the pipelines took it) or failure (refused for good)."),
                ("messages", "The same as otelcol_kafka_receiver_records, under the Collector's older name."),
                ("unmarshal_failed_profiles", "Kafka messages that held no valid profiles request, by topic and partition."),
                ("partition_start", "Partitions assigned to the receiver's consumer."),
                ("partition_close", "Partitions taken from the receiver's consumer (revoked or lost)."),
            ]),
            kafka_receiver_gauges: named(&mut r, &mut b, "otelcol_kafka_receiver_", &[
                ("current_offset", "The offset of the last Kafka message the receiver finished with, by topic and partition."),
                ("offset_lag", "Messages on a partition past what the receiver finished with (high watermark less the stored offset), by topic and partition."),
            ]),
            profilez_skipped: family!(r, b, "otelcol_extension_profilez_skipped_profile_samples", "Samples the profilez tap did not fold into its flame graphs, by pipeline and reason: queue_full (its queue was full) or cpu_budget (folding would pass its max_cpu_share)."),
            config_reloads: family!(r, "profcol_config_reloads", "Config reloads (SIGHUP), by result: success, failure (refused; the old config keeps running) or partial (a component failed to start after the switch)."),
            registry: r,
            basic: b,
            detailed: Default::default(),
        }
    }

    /// Set from the config at start, before the processors start (a
    /// change of `service::telemetry` takes a restart).
    pub fn set_metrics_level(&self, level: MetricsLevel) {
        self.detailed.store(
            level == MetricsLevel::Detailed,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Whether metrics that cost work of their own to measure are wanted:
    /// as the Collector computes `otelcol_processor_batch_batch_send_size_bytes`
    /// only at level `detailed`.
    pub fn detailed(&self) -> bool {
        self.detailed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Prometheus text exposition of every metric.
    pub fn encode_text(&self) -> String {
        self.encode_text_at(MetricsLevel::Detailed)
    }

    /// The exposition at a `service.telemetry.metrics.level`: `basic` has
    /// only the `otelcol_*` families; `none` is empty.
    pub fn encode_text_at(&self, level: MetricsLevel) -> String {
        let mut s = String::new();
        let registry = match level {
            MetricsLevel::None => return s,
            MetricsLevel::Basic => &self.basic,
            MetricsLevel::Normal | MetricsLevel::Detailed => &self.registry,
        };
        encode(&mut s, registry).expect("writing to a String cannot fail");
        s
    }

    pub fn receiver_accepted(&self, receiver: &str, transport: &str, samples: u64) {
        tracing::debug!(receiver, transport, samples, "accepted");
        self.receiver_accepted
            .get(&[("receiver", receiver), ("transport", transport)])
            .inc_by(samples);
    }

    pub fn receiver_refused(&self, receiver: &str, transport: &str, samples: u64, reason: &str) {
        // Each receiver logs why it refused (with the peer and the detail).
        tracing::debug!(receiver, transport, samples, reason, "refused");
        self.receiver_refused
            .get(&[
                ("receiver", receiver),
                ("transport", transport),
                ("reason", reason),
            ])
            .inc_by(samples);
    }

    /// An item a receiver saw, e.g. a Sentry envelope item by type, with its
    /// outcome (`accepted`, `ignored`, or a drop reason).
    pub fn receiver_item(&self, receiver: &str, item_type: &str, outcome: &str) {
        tracing::debug!(receiver, item_type, outcome, "item");
        self.receiver_items
            .get(&[
                ("receiver", receiver),
                ("type", item_type),
                ("outcome", outcome),
            ])
            .inc();
    }

    /// A scrape of a receiver's `scraper` (a profile kind) that fetched
    /// `records` profiles.
    pub fn scraper_scraped(&self, receiver: &str, scraper: &str, records: u64) {
        self.scraper_scraped
            .get(&[("receiver", receiver), ("scraper", scraper)])
            .inc_by(records);
    }

    /// A scrape that failed (the target down, too slow, too large, not
    /// pprof); why is logged and counted in `profcol_receiver_items`.
    pub fn scraper_errored(&self, receiver: &str, scraper: &str, records: u64) {
        self.scraper_errored
            .get(&[("receiver", receiver), ("scraper", scraper)])
            .inc_by(records);
    }

    /// The fate of an item forwarded upstream: `forwarded`, or `failed` /
    /// `dropped` with a reason (empty for `forwarded`).
    pub fn receiver_forwarded(&self, receiver: &str, item_type: &str, outcome: &str, reason: &str) {
        tracing::debug!(receiver, item_type, outcome, reason, "forwarded item");
        self.receiver_forwarded
            .get(&[
                ("receiver", receiver),
                ("type", item_type),
                ("outcome", outcome),
                ("reason", reason),
            ])
            .inc();
    }

    /// An item delivered by a retry of a POST that may have been taken.
    pub fn receiver_forward_duplicate(&self, receiver: &str, item_type: &str) {
        self.receiver_forward_duplicates
            .get(&[("receiver", receiver), ("type", item_type)])
            .inc();
    }

    pub fn receiver_forward_queue(&self, receiver: &str, size: usize) {
        self.receiver_forward_queue
            .get(&[("receiver", receiver)])
            .set(size as i64);
    }

    /// An accepted OTLP request and the proto revision it was written in
    /// (`otlp_proto_revision`, the Prometheus form of `otlp.proto_revision`).
    pub fn receiver_request(&self, receiver: &str, transport: &str, revision: &str) {
        tracing::debug!(receiver, transport, revision, "request accepted");
        self.receiver_requests
            .get(&[
                ("receiver", receiver),
                ("transport", transport),
                ("otlp_proto_revision", revision),
            ])
            .inc();
    }

    /// `n` repairs of one kind (see `model::repair`).
    pub fn receiver_repairs(&self, receiver: &str, kind: &str, n: u64) {
        tracing::debug!(receiver, kind, n, "repaired");
        self.receiver_repairs
            .get(&[("receiver", receiver), ("kind", kind)])
            .inc_by(n);
    }

    pub fn exporter_sent(&self, exporter: &str, samples: u64) {
        tracing::debug!(exporter, samples, "sent");
        self.exporter_sent
            .get(&[("exporter", exporter)])
            .inc_by(samples);
    }

    /// Metric points an exporter delivered (metrics pipelines).
    pub fn exporter_sent_points(&self, exporter: &str, points: u64) {
        tracing::debug!(exporter, points, "sent metric points");
        self.exporter_sent_points
            .get(&[("exporter", exporter)])
            .inc_by(points);
    }

    /// Metric points an exporter gave up on (failed for good, out of
    /// retries, or dropped at shutdown).
    pub fn exporter_send_failed_points(&self, exporter: &str, points: u64, error: &str) {
        crate::error_limited!(
            exporter,
            points,
            error,
            "export failed; metric points dropped"
        );
        self.exporter_failed_points
            .get(&[("exporter", exporter)])
            .inc_by(points);
    }

    /// Metric points a sending queue could not take.
    pub fn exporter_enqueue_failed_points(&self, exporter: &str, points: u64) {
        self.exporter_enqueue_failed_points
            .get(&[("exporter", exporter)])
            .inc_by(points);
    }

    pub fn exporter_send_failed(&self, exporter: &str, samples: u64, error: &str) {
        crate::error_limited!(exporter, samples, error, "export failed; samples dropped");
        self.exporter_send_failed
            .get(&[("exporter", exporter)])
            .inc_by(samples);
    }

    /// A sending queue could not take a batch. `client_refused`: the
    /// batch was still the client's, which was refused and may send it
    /// again (nothing is lost); else it had been accepted (emitted by a
    /// stateful stage) and is dropped.
    pub fn exporter_enqueue_failed(
        &self,
        exporter: &str,
        samples: u64,
        reason: &str,
        client_refused: bool,
    ) {
        if client_refused {
            crate::warn_limited!(
                exporter,
                samples,
                reason,
                "sending queue refused batch; the request was refused to its client, which may retry it"
            );
        } else {
            crate::warn_limited!(
                exporter,
                samples,
                reason,
                "sending queue refused batch; samples dropped"
            );
        }
        self.exporter_enqueue_failed
            .get(&[("exporter", exporter)])
            .inc_by(samples);
    }

    pub fn exporter_dropped(&self, exporter: &str, samples: u64, reason: &str) {
        crate::warn_limited!(exporter, samples, reason, "exporter dropped samples");
        self.exporter_dropped
            .get(&[("exporter", exporter), ("reason", reason)])
            .inc_by(samples);
    }

    pub fn exporter_queue(&self, exporter: &str, size: i64, capacity: i64) {
        // As the Collector's queue gauges, which name the signal since one
        // exporter id may queue several (collector#9943).
        let l = [("exporter", exporter), ("data_type", "profiles")];
        self.exporter_queue_size.get(&l).set(size);
        self.exporter_queue_capacity.get(&l).set(capacity);
    }

    pub fn exporter_queue_corrupt(&self, exporter: &str, records: u64) {
        self.exporter_queue_corrupt
            .get(&[("exporter", exporter)])
            .inc_by(records);
    }

    pub fn processor_in_out(&self, pipeline: &str, processor: &str, incoming: u64, outgoing: u64) {
        // The Collector's processorhelper labels, plus the pipeline (one
        // processor id may run in several).
        let l = [
            ("processor", processor),
            ("otel_signal", "profiles"),
            ("pipeline", pipeline),
        ];
        self.processor_incoming.get(&l).inc_by(incoming);
        self.processor_outgoing.get(&l).inc_by(outgoing);
    }

    pub fn processor_dropped(&self, pipeline: &str, processor: &str, samples: u64, reason: &str) {
        tracing::debug!(
            pipeline,
            processor,
            samples,
            reason,
            "processor dropped samples"
        );
        self.processor_dropped
            .get(&[
                ("pipeline", pipeline),
                ("processor", processor),
                ("reason", reason),
            ])
            .inc_by(samples);
        if reason == "filtered" {
            self.filter_filtered(processor, samples);
        }
    }

    /// The filter processor's own counter, as the Collector names it.
    pub fn filter_filtered(&self, processor: &str, samples: u64) {
        self.filter_filtered
            .get(&[("filter", processor)])
            .inc_by(samples);
    }

    /// Attribute sets signaltometrics folded into an overflow point.
    pub fn connector_overflow(&self, connector: &str, metric: &str, reason: &str, n: u64) {
        self.connector_overflow
            .get(&[
                ("connector", connector),
                ("metric", metric),
                ("reason", reason),
            ])
            .inc_by(n);
    }

    pub fn processor_event(&self, processor: &str, what: &str, n: u64) {
        tracing::debug!(processor, what, n, "processor event");
        self.processor_events
            .get(&[("processor", processor), ("event", what)])
            .inc_by(n);
    }

    /// One resource `k8sattributes` tried to associate with a pod
    /// (`status` `success` or `error`, `pod_identifier` the sources used).
    pub fn k8s_pod_association(&self, processor: &str, status: &str, pod_identifier: &str) {
        self.k8s_pod_association
            .get(&[
                ("processor", processor),
                ("status", status),
                ("pod_identifier", pod_identifier),
                ("otelcol_signal", "profiles"),
            ])
            .inc();
    }

    /// A watch event: `what` is `<kind>_<event>` (`pod_added`, `node_deleted`).
    pub fn k8s_watcher(&self, processor: &str, what: &str) {
        if let Some((_, f)) = self.k8s_watcher.iter().find(|(k, _)| *k == what) {
            f.get(&[("processor", processor)]).inc();
        }
    }

    /// A failed list or watch request; the watch retries with backoff.
    pub fn k8s_watch_error(&self, processor: &str, resource: &str, error: &str) {
        crate::warn_limited!(
            processor,
            resource,
            error,
            "kubernetes watch failed, retrying"
        );
        self.k8s_watch_errors
            .get(&[("processor", processor), ("resource", resource)])
            .inc();
    }

    /// An object the cache could not hold within the memory budget.
    /// `n` more of a symbolizer counter (`cache_hits`, `fetches`, ...).
    pub fn symbolizer(&self, processor: &str, what: &str, n: u64) {
        if let Some((_, f)) = self.symbolizer.iter().find(|(k, _)| *k == what) {
            f.get(&[("processor", processor)]).inc_by(n);
        }
    }

    /// Samples the `profilez` tap skipped (`queue_full`, `cpu_budget`).
    pub fn profilez_skipped(&self, extension: &str, pipeline: &str, samples: u64, reason: &str) {
        self.profilez_skipped
            .get(&[
                ("extension", extension),
                ("pipeline", pipeline),
                ("reason", reason),
            ])
            .inc_by(samples);
    }

    /// `n` more of a kafka receiver counter (`records`, `partition_start`, ...).
    pub fn kafka_receiver(&self, what: &str, labels: &[(&'static str, &str)], n: u64) {
        if let Some((_, f)) = self.kafka_receiver.iter().find(|(k, _)| *k == what) {
            f.get(labels).inc_by(n);
        }
    }

    /// A kafka receiver gauge (`current_offset`, `offset_lag`).
    pub fn kafka_receiver_gauge(&self, what: &str, labels: &[(&'static str, &str)], v: i64) {
        if let Some((_, f)) = self.kafka_receiver_gauges.iter().find(|(k, _)| *k == what) {
            f.get(labels).set(v);
        }
    }

    pub fn k8s_cache_refused(&self, processor: &str, resource: &str) {
        crate::warn_limited!(
            processor,
            resource,
            "kubernetes cache is at the memory limit"
        );
        self.k8s_cache_refused
            .get(&[("processor", processor), ("resource", resource)])
            .inc();
    }

    pub fn exporter_event(&self, exporter: &str, what: &str, n: u64) {
        tracing::debug!(exporter, what, n, "exporter event");
        self.exporter_events
            .get(&[("exporter", exporter), ("event", what)])
            .inc_by(n);
    }

    /// Samples the runtime dropped between components (`shutdown`, ...).
    pub fn pipeline_dropped(&self, pipeline: &str, samples: u64, reason: &str) {
        crate::warn_limited!(pipeline, samples, reason, "pipeline dropped samples");
        self.pipeline_dropped
            .get(&[("pipeline", pipeline), ("reason", reason)])
            .inc_by(samples);
    }

    /// Samples a stateful stage holds now.
    pub fn processor_held(&self, pipeline: &str, processor: &str, samples: u64) {
        self.processor_held
            .get(&[("pipeline", pipeline), ("processor", processor)])
            .set(i64::try_from(samples).unwrap_or(i64::MAX));
    }

    /// A batch the `batch` processor sent: its samples and encoded bytes,
    /// and what triggered it (`size`, `timeout`, or `shutdown`, which the
    /// Collector does not count as a trigger).
    pub fn batch_sent(&self, processor: &str, samples: u64, bytes: usize, trigger: &str) {
        let l = [("processor", processor)];
        self.batch_send_size.get(&l).observe(samples as f64);
        self.batch_send_size_bytes.get(&l).observe(bytes as f64);
        match trigger {
            "size" => self.batch_size_trigger.get(&l).inc(),
            "timeout" => self.batch_timeout_trigger.get(&l).inc(),
            _ => 0,
        };
    }

    /// Distinct metadata value combinations the `batch` processor holds
    /// batches for.
    pub fn batch_cardinality(&self, processor: &str, n: usize) {
        self.batch_cardinality
            .get(&[("processor", processor)])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// One resolution of a `loadbalancing` exporter's resolver; on success,
    /// `backends` is the set it found and `changed` whether it differs
    /// from the one in use.
    pub fn lb_resolution(
        &self,
        exporter: &str,
        resolver: &str,
        outcome: Result<(usize, bool), &str>,
    ) {
        let success = outcome.is_ok();
        let l = [("exporter", exporter), ("resolver", resolver)];
        match outcome {
            Ok((backends, changed)) => {
                if changed {
                    tracing::info!(exporter, resolver, backends, "backends changed");
                    self.lb_backend_updates.get(&l).inc();
                }
                self.lb_backends
                    .get(&l)
                    .set(i64::try_from(backends).unwrap_or(i64::MAX));
            }
            Err(error) => {
                crate::warn_limited!(
                    exporter,
                    resolver,
                    error,
                    "resolving backends failed; keeping the last ones"
                );
            }
        }
        self.lb_resolutions
            .get(&[
                ("exporter", exporter),
                ("resolver", resolver),
                ("success", bool_label(success)),
            ])
            .inc();
    }

    /// One call of a `loadbalancing` exporter to one backend.
    pub fn lb_backend_outcome(
        &self,
        exporter: &str,
        endpoint: &str,
        success: bool,
        latency: std::time::Duration,
    ) {
        tracing::debug!(exporter, endpoint, success, ?latency, "backend call");
        self.lb_backend_latency
            .get(&[("exporter", exporter), ("endpoint", endpoint)])
            .observe(latency.as_secs_f64() * 1000.0);
        self.lb_backend_outcome
            .get(&[
                ("exporter", exporter),
                ("endpoint", endpoint),
                ("success", bool_label(success)),
            ])
            .inc();
    }

    /// One config reload and how it ended: `success`, `failure` or `partial`.
    pub fn config_reload(&self, result: &'static str) {
        self.config_reloads.get(&[("result", result)]).inc();
    }

    // Readers, for tests and the accounting check.

    /// Calls of a `loadbalancing` exporter to `endpoint` with this outcome.
    pub fn lb_backend_calls(&self, exporter: &str, endpoint: &str, success: bool) -> u64 {
        sum(
            &self.lb_backend_outcome.family,
            &[
                ("exporter", exporter),
                ("endpoint", endpoint),
                ("success", bool_label(success)),
            ],
        )
    }

    /// Resolutions of a `loadbalancing` exporter with this outcome.
    pub fn lb_resolutions(&self, exporter: &str, success: bool) -> u64 {
        sum(
            &self.lb_resolutions.family,
            &[("exporter", exporter), ("success", bool_label(success))],
        )
    }

    /// Times a `loadbalancing` exporter's set of backends changed.
    pub fn lb_backend_updates(&self, exporter: &str) -> u64 {
        sum(&self.lb_backend_updates.family, &[("exporter", exporter)])
    }

    pub fn accepted(&self, receiver: &str) -> u64 {
        sum(&self.receiver_accepted.family, &[("receiver", receiver)])
    }

    pub fn refused(&self, receiver: &str) -> u64 {
        sum(&self.receiver_refused.family, &[("receiver", receiver)])
    }

    pub fn refused_for(&self, receiver: &str, reason: &str) -> u64 {
        sum(
            &self.receiver_refused.family,
            &[("receiver", receiver), ("reason", reason)],
        )
    }

    pub fn accepted_requests(&self, receiver: &str, revision: &str) -> u64 {
        sum(
            &self.receiver_requests.family,
            &[("receiver", receiver), ("otlp_proto_revision", revision)],
        )
    }

    pub fn repairs(&self, receiver: &str, kind: &str) -> u64 {
        sum(
            &self.receiver_repairs.family,
            &[("receiver", receiver), ("kind", kind)],
        )
    }

    pub fn sent(&self, exporter: &str) -> u64 {
        sum(&self.exporter_sent.family, &[("exporter", exporter)])
    }

    pub fn send_failed(&self, exporter: &str) -> u64 {
        sum(&self.exporter_send_failed.family, &[("exporter", exporter)])
    }

    pub fn enqueue_failed(&self, exporter: &str) -> u64 {
        sum(
            &self.exporter_enqueue_failed.family,
            &[("exporter", exporter)],
        )
    }

    pub fn exporter_dropped_total(&self, exporter: &str) -> u64 {
        sum(&self.exporter_dropped.family, &[("exporter", exporter)])
    }

    pub fn processor_dropped_total(&self, pipeline: &str) -> u64 {
        sum(&self.processor_dropped.family, &[("pipeline", pipeline)])
    }

    pub fn pipeline_dropped_total(&self, pipeline: &str) -> u64 {
        sum(&self.pipeline_dropped.family, &[("pipeline", pipeline)])
    }

    pub fn exporter_events(&self, exporter: &str, what: &str) -> u64 {
        sum(
            &self.exporter_events.family,
            &[("exporter", exporter), ("event", what)],
        )
    }

    pub fn items(&self, receiver: &str, item_type: &str, outcome: &str) -> u64 {
        sum(
            &self.receiver_items.family,
            &[
                ("receiver", receiver),
                ("type", item_type),
                ("outcome", outcome),
            ],
        )
    }
}

fn bool_label(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

/// Backend latency in ms, as the Collector's default histogram buckets.
fn latency_buckets() -> Histogram {
    Histogram::new([
        0.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2500.0, 5000.0,
        7500.0, 10000.0,
    ])
}

/// The Collector's buckets for `batch_send_size` (items).
fn send_size_buckets() -> Histogram {
    Histogram::new([
        10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0,
        6000.0, 7000.0, 8000.0, 9000.0, 10000.0, 20000.0, 30000.0, 50000.0, 100000.0,
    ])
}

/// The Collector's buckets for `batch_send_size_bytes`.
fn send_bytes_buckets() -> Histogram {
    Histogram::new([
        10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0,
        6000.0, 7000.0, 8000.0, 9000.0, 10000.0, 20000.0, 30000.0, 50000.0, 100000.0, 200000.0,
        300000.0, 400000.0, 500000.0, 600000.0, 700000.0, 800000.0, 900000.0, 1000000.0, 2000000.0,
        3000000.0, 4000000.0, 5000000.0, 6000000.0, 7000000.0, 8000000.0, 9000000.0,
    ])
}

/// Sum of a counter family over every label set that matches `want`.
fn sum(f: &Family<Labels, Counter>, want: &[(&str, &str)]) -> u64 {
    // Families expose no iterator; the text exposition is the stable way in
    // and these readers are for tests and shutdown only.
    let mut reg = Registry::default();
    reg.register("m", "", f.clone());
    let mut text = String::new();
    encode(&mut text, &reg).expect("writing to a String cannot fail");
    text.lines()
        .filter(|l| l.starts_with("m_total{"))
        .filter(|l| {
            want.iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event finds the handle an earlier one cached, by borrowed labels.
    #[test]
    fn handles_are_cached_by_label_values() {
        let t = Telemetry::new();
        for _ in 0..3 {
            t.receiver_accepted("otlp", "grpc", 2);
        }
        t.receiver_accepted("otlp", "http", 1);
        assert_eq!(t.receiver_accepted.handles.read().unwrap().len(), 2);
        assert_eq!(t.accepted("otlp"), 7);
    }

    /// `basic` serves the core Collector metrics only, `normal` and
    /// `detailed` add profcol's own, `none` serves nothing.
    #[test]
    fn metrics_level_selects_the_families() {
        let t = Telemetry::new();
        t.receiver_accepted("otlp", "grpc", 5);
        t.pipeline_dropped("profiles", 2, "shutdown");
        let accepted =
            "otelcol_receiver_accepted_profile_samples_total{receiver=\"otlp\",transport=\"grpc\"} 5";
        let dropped =
            "profcol_pipeline_dropped_profile_samples_total{pipeline=\"profiles\",reason=\"shutdown\"} 2";

        let basic = t.encode_text_at(MetricsLevel::Basic);
        assert!(basic.contains(accepted), "{basic}");
        assert!(!basic.contains("profcol_"), "{basic}");
        for level in [MetricsLevel::Normal, MetricsLevel::Detailed] {
            let text = t.encode_text_at(level);
            assert!(text.contains(accepted) && text.contains(dropped), "{text}");
        }
        // The same families, apart from the clocks the process metrics read.
        let steady = |text: String| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with("otelcol_process_"))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(
            steady(t.encode_text()),
            steady(t.encode_text_at(MetricsLevel::Normal))
        );
        assert_eq!(t.encode_text_at(MetricsLevel::None), "");
    }

    /// The Collector's process metrics and `target_info`, which its
    /// dashboards read, are served at every level; no HELP ends in "..".
    #[test]
    fn process_metrics_and_target_info_are_served() {
        let t = Telemetry::new();
        t.receiver_accepted("otlp", "grpc", 1);
        for level in [MetricsLevel::Basic, MetricsLevel::Normal] {
            let text = t.encode_text_at(level);
            for family in [
                "# TYPE otelcol_process_uptime counter",
                "# TYPE otelcol_process_cpu_seconds counter",
                "# TYPE otelcol_process_memory_rss gauge",
                "# TYPE target_info gauge",
            ] {
                assert!(text.contains(family), "{family} missing:\n{text}");
            }
            let rss = text
                .lines()
                .find_map(|l| l.strip_prefix("otelcol_process_memory_rss "))
                .and_then(|v| v.parse::<u64>().ok())
                .expect("an rss sample");
            assert!(rss > 1 << 20, "rss {rss}");
            let info = text
                .lines()
                .find(|l| l.starts_with("target_info{"))
                .unwrap();
            assert!(
                info.contains("service_name=\"profcol\"")
                    && info.contains(&format!(
                        "service_version=\"{}\"",
                        env!("CARGO_PKG_VERSION")
                    ))
                    && info.contains("service_instance_id=\"")
                    && info.ends_with(" 1"),
                "{info}"
            );
            let helps: Vec<&str> = text.lines().filter(|l| l.starts_with("# HELP")).collect();
            assert!(helps.len() >= 5, "{helps:?}");
            for h in helps {
                assert!(!h.ends_with(".."), "{h}");
            }
        }
        // One identity for every level.
        let id = |l| {
            let text = t.encode_text_at(l);
            text.lines()
                .find(|l| l.starts_with("target_info{"))
                .unwrap()
                .to_owned()
        };
        assert_eq!(id(MetricsLevel::Basic), id(MetricsLevel::Detailed));
    }
}
