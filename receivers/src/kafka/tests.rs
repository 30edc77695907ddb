use profcol_pipeline::config::{ComponentConfig, Kind};

use super::config::Resolved;
use super::*;

fn section(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Receiver, "kafka/in", yaml).unwrap()
}

fn resolve(yaml: &str) -> Result<(KafkaReceiverConfig, Resolved), String> {
    let cfg = section(yaml);
    let c: KafkaReceiverConfig = cfg.decode().map_err(|e| e.to_string())?;
    let r = c.validate(&cfg).map_err(|e| e.to_string())?;
    Ok((c, r))
}

fn create_errors(yaml: &str) -> String {
    match factory().create(&section(yaml)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted {yaml}"),
    }
}

#[test]
fn defaults_are_the_collectors() {
    let (c, r) = resolve("{}").unwrap();
    assert_eq!(c, KafkaReceiverConfig::default());
    assert_eq!(c.group_id, "otel-collector");
    assert_eq!(c.initial_offset, "latest");
    assert!(c.autocommit.enable);
    assert_eq!(r.topics, ["otlp_profiles"]);
    assert_eq!(r.encoding, Encoding::Proto);
    // The Collector marks before processing by default: a refused message
    // is not offered again.
    assert!(r.skip_poisoned);
}

/// `profiles::topics`; the single `topic` forms v0.161.0 dropped are
/// refused, as the Collector refuses them.
#[test]
fn topics_and_the_removed_forms() {
    assert_eq!(
        resolve("profiles: {topics: [a, b]}").unwrap().1.topics,
        ["a", "b"]
    );
    let (_, r) = resolve("profiles: {encoding: otlp_json}").unwrap();
    assert_eq!(r.encoding, Encoding::Json);
    for yaml in [
        "topic: old",
        "encoding: otlp_json",
        "profiles: {topic: a}",
        "profiles: {exclude_topic: a}",
        "default_fetch_size: 5",
        // Gone from v0.161.0's configkafka, as in the Collector.
        "group_rebalance_strategy: sticky",
    ] {
        let err = create_errors(yaml);
        assert!(err.contains("unknown field"), "{yaml}: {err}");
    }
}

#[test]
fn message_marking_decides_what_a_poisoned_message_does() {
    let skip = |yaml: &str| resolve(yaml).unwrap().1.skip_poisoned;
    assert!(skip("message_marking: {after: false}"));
    assert!(!skip("message_marking: {after: true}"));
    assert!(skip("message_marking: {after: true, on_error: true}"));
    assert!(!skip(
        "message_marking: {after: true, on_error: true, on_permanent_error: false}"
    ));
    assert!(skip(
        "message_marking: {after: true, on_permanent_error: true}"
    ));
}

#[test]
fn refusals_name_the_key() {
    for (yaml, want) in [
        ("initial_offset: middle", "receivers::kafka/in::initial_offset: initial_offset should be one of 'latest' or 'earliest'"),
        ("profiles: {encoding: zipkin_proto}", "receivers::kafka/in::profiles::encoding:"),
        ("profiles: {topics: [a], exclude_topics: [b]}", "receivers::kafka/in::profiles::exclude_topics: profiles.exclude_topics is configured but"),
        ("profiles: {topics: ['^p-(.*'], exclude_topics: ['^p-x$']}", "receivers::kafka/in::profiles::topics: invalid regex pattern"),
        // Other signals' as the Collector v0.161.0's testdata has them.
        ("logs: {topics: [a], exclude_topics: [b]}", "receivers::kafka/in::logs::exclude_topics: logs.exclude_topics is configured but none of the configured logs.topics use regex pattern (must start with '^')"),
        ("logs: {topics: ['^logs-.*'], exclude_topics: ['^logs-[invalid(regex']}", "receivers::kafka/in::logs::exclude_topics::0: logs.exclude_topic contains invalid regex pattern"),
        ("metrics: {topics: ['^m-.*'], exclude_topics: ['']}", "receivers::kafka/in::metrics::exclude_topics::0: metrics.exclude_topics contains empty string, which would match all topics"),
        ("profiles: {topics: ['^p-.*'], exclude_topics: ['']}", "receivers::kafka/in::profiles::exclude_topics::0: profiles.exclude_topics contains empty string"),
        ("auth: {sasl: {mechanism: PLAIN}}", "receivers::kafka/in::auth::sasl::username: username is required"),
        ("tls: {key_pem: x}", "receivers::kafka/in::tls::cert_file: for auth via TLS"),
        ("min_fetch_size: 0", "receivers::kafka/in::min_fetch_size: must be positive"),
        ("group_id: ''", "receivers::kafka/in::group_id: must not be empty"),
        ("brokers: []", "receivers::kafka/in::brokers: brokers must be specified"),
        ("nonsense: 1", "nonsense"),
        ("min_fetch_size: 10\nmax_fetch_size: 5", "receivers::kafka/in::max_fetch_size: max_fetch_size (5) cannot be less than min_fetch_size (10)"),
        ("max_decompress_batch_bytes: 0", "receivers::kafka/in::max_decompress_batch_bytes: max_decompress_batch_bytes (0) must be between 1 and 2147483647"),
        ("dial_timeout: 0s", "receivers::kafka/in::dial_timeout: dial_timeout (0s) must be positive"),
        ("group_rebalance_strategies: ['']", "receivers::kafka/in::group_rebalance_strategies::0: group_rebalance_strategies entries cannot be empty"),
        ("group_rebalance_strategies: [range, sticky]", "receivers::kafka/in::group_rebalance_strategies::1: the eager sticky assignor is not in librdkafka"),
        ("group_rebalance_strategies: [my_balancer]", "receivers::kafka/in::group_rebalance_strategies::0: \"my_balancer\" is not a built-in strategy"),
        ("group_rebalance_strategies: [cooperative-sticky, range]", "receivers::kafka/in::group_rebalance_strategies: librdkafka cannot advertise cooperative-sticky beside range or roundrobin"),
        // The Collector v0.165.1's testdata, with its messages.
        ("partition_processing: {independent: true, max_buffered_batches: 0}", "receivers::kafka/in::partition_processing::max_prefetch::batches: partition_processing.max_prefetch.batches must be greater than zero"),
        ("partition_processing: {independent: true, max_prefetch: {batches: 0}}", "partition_processing.max_prefetch.batches must be greater than zero"),
        ("partition_processing: {independent: true, max_prefetch: {bytes: -1}}", "receivers::kafka/in::partition_processing::max_prefetch::bytes: partition_processing.max_prefetch.bytes must not be negative"),
        ("partition_processing: {independent: true, max_buffered_batches: 2, max_prefetch: {batches: 2}}", "receivers::kafka/in::partition_processing::max_buffered_batches: partition_processing.max_buffered_batches and partition_processing.max_prefetch.batches are mutually exclusive"),
        ("partition_processing: {independent: true}\nautocommit: {enable: false}", "receivers::kafka/in::partition_processing::independent: partition_processing.independent requires autocommit.enable"),
        ("partition_processing: {independent: true, max_in_flight: {records: 0}}", "receivers::kafka/in::partition_processing::max_in_flight::records: partition_processing.max_in_flight.records must be greater than zero"),
        ("partition_processing: {independent: true, max_in_flight: {bytes: -1}}", "partition_processing.max_in_flight.bytes must not be negative"),
        ("partition_processing: {independent: true, max_in_flight: {records: 4, window: cross_fetch}}", "receivers::kafka/in::partition_processing::max_in_flight::window: partition_processing.max_in_flight.window cross_fetch requires records above 1 and bytes above 0"),
        ("partition_processing: {independent: true, max_in_flight: {window: sliding}}", "partition_processing.max_in_flight.window must be \"per_fetch\" or \"cross_fetch\""),
    ] {
        let err = create_errors(yaml);
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

/// The read-ahead librdkafka may hold is bounded by the fetch sizes, and
/// the consumer only stores offsets it processed.
#[test]
fn librdkafka_settings() {
    let (c, _) = resolve(
        "max_partition_fetch_size: 2097152\nautocommit: {enable: false}\ninitial_offset: earliest\n\
         max_fetch_size: 5000000",
    )
    .unwrap();
    assert_eq!(c.prefetch_bytes(), 2 << 20);
    let r = c.rdkafka();
    assert_eq!(r.get("queued.max.messages.kbytes"), Some("2048"));
    assert_eq!(r.get("enable.auto.offset.store"), Some("false"));
    assert_eq!(r.get("enable.auto.commit"), Some("false"));
    assert_eq!(r.get("auto.offset.reset"), Some("earliest"));
    assert_eq!(r.get("fetch.max.bytes"), Some("5000000"));
    assert_eq!(r.get("client.id"), Some("otel-collector"));
    // The Collector's (franz-go's) assignor unless configured, so that
    // both can be members of one group.
    assert_eq!(
        r.get("partition.assignment.strategy"),
        Some("cooperative-sticky")
    );
    let (c, _) =
        resolve("group_rebalance_strategies: [roundrobin, range]\nconn_idle_timeout: 1m").unwrap();
    let r = c.rdkafka();
    assert_eq!(
        r.get("partition.assignment.strategy"),
        Some("roundrobin,range")
    );
    assert_eq!(r.get("connections.max.idle.ms"), Some("60000"));
}

/// The Collector v0.165.1's valid `partition_processing` testdata loads.
#[test]
fn partition_processing_as_the_collector_writes_it() {
    for yaml in [
        "partition_processing: {independent: true, max_buffered_batches: 4}",
        "partition_processing: {independent: true, max_prefetch: {batches: 2, bytes: 33554432}}",
        "partition_processing: {max_buffered_batches: 0}",
        "partition_processing: {independent: true, max_prefetch: {batches: 1}, max_in_flight: {records: 4, bytes: 33554432, window: cross_fetch}}",
        "max_decompress_batch_bytes: 2147483647\ndial_timeout: 30s",
    ] {
        resolve(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
    }
}
