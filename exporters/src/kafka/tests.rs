use std::time::Duration as StdDuration;

use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::runtime::create_exporter;

use super::config::Resolved;
use super::*;
use crate::parts::too_large;

fn section(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Exporter, "kafka/out", yaml).unwrap()
}

fn resolve(yaml: &str) -> Result<(KafkaExporterConfig, Resolved), String> {
    let cfg = section(yaml);
    let c: KafkaExporterConfig = cfg.decode().map_err(|e| e.to_string())?;
    let r = c.validate(&cfg).map_err(|e| e.to_string())?;
    Ok((c, r))
}

fn create_errors(yaml: &str) -> String {
    match create_exporter(&*factory(), &section(yaml)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted {yaml}"),
    }
}

#[test]
fn defaults_are_the_collectors() {
    let (c, r) = resolve("{}").unwrap();
    assert_eq!(c, KafkaExporterConfig::default());
    assert_eq!(c.client.brokers, ["localhost:9092"]);
    assert_eq!(c.client.client_id, "otel-collector");
    assert_eq!(c.producer.max_message_bytes, 1_000_000);
    assert_eq!(c.producer.required_acks.0, 1);
    assert_eq!(
        (r.topic.as_str(), r.encoding),
        (DEFAULT_TOPIC, Encoding::Proto)
    );
    assert_eq!(r.compression, "none");
    let (_, s) = create_exporter(&*factory(), &section("{}")).unwrap();
    assert_eq!(s.timeout, StdDuration::from_secs(5));
}

/// The top-level `topic` and `encoding` the Collector deprecated in
/// v0.124.0 are gone from v0.161.0, which refuses them: so does profcol.
#[test]
fn signal_keys_and_not_the_removed_ones() {
    let (_, r) = resolve("profiles: {topic: p, encoding: otlp_json}").unwrap();
    assert_eq!((r.topic.as_str(), r.encoding), ("p", Encoding::Json));
    for yaml in ["topic: old", "encoding: otlp_json"] {
        let err = create_errors(yaml);
        assert!(err.contains("unknown field"), "{yaml}: {err}");
    }
}

#[test]
fn required_acks_takes_all_and_numbers() {
    for (v, want) in [("all", -1), ("-1", -1), ("0", 0), ("1", 1)] {
        let (c, _) = resolve(&format!("producer: {{required_acks: {v}}}")).unwrap();
        assert_eq!(c.producer.required_acks.0, want, "{v}");
    }
    let err = create_errors("producer: {required_acks: 2}");
    assert!(
        err.contains("producer") && err.contains("expected 'all'"),
        "{err}"
    );
}

#[test]
fn refusals_name_the_key() {
    for (yaml, want) in [
        ("profiles: {encoding: jaeger_proto}", "exporters::kafka/out::profiles::encoding: \"jaeger_proto\" is not an encoding of profiles"),
        ("producer: {compression: brotli}", "exporters::kafka/out::producer::compression: compression should be one of"),
        ("producer: {compression: gzip, compression_params: {level: 12}}", "exporters::kafka/out::producer::compression_params::level: 12 is not a gzip level"),
        ("producer: {max_message_bytes: 0}", "exporters::kafka/out::producer::max_message_bytes: must be positive"),
        ("brokers: []", "exporters::kafka/out::brokers: brokers must be specified"),
        ("brokers: ['a:1,b:2']", "exporters::kafka/out::brokers::0:"),
        ("protocol_version: banana", "exporters::kafka/out::protocol_version: invalid protocol version"),
        ("auth: {sasl: {mechanism: PLAIN, username: u}}", "exporters::kafka/out::auth::sasl::password: password is required"),
        ("auth: {sasl: {mechanism: GSSAPI, username: u, password: p}}", "exporters::kafka/out::auth::sasl::mechanism: mechanism should be one of"),
        ("auth: {sasl: {mechanism: AWS_MSK_IAM_OAUTHBEARER, aws_msk: {region: eu-west-1}}}", "exporters::kafka/out::auth::sasl::mechanism: AWS_MSK_IAM_OAUTHBEARER is not supported by profcol"),
        ("auth: {kerberos: {service_name: kafka}}", "exporters::kafka/out::auth::kerberos: is not supported"),
        ("tls: {cert_file: /no/such.pem}", "exporters::kafka/out::tls::key_file: for auth via TLS, provide both"),
        ("tls: {server_name_override: kafka}", "exporters::kafka/out::tls::server_name_override: is not supported"),
        ("tls: {min_version: '1.0'}", "exporters::kafka/out::tls::min_version: \"1.0\" is not supported"),
        ("tls: {cipher_suites: [TLS_AES_128_GCM_SHA256]}", "exporters::kafka/out::tls::cipher_suites: is not supported"),
        ("tls: {bogus: 1}", "bogus"),
        ("bogus: 1", "bogus"),
        ("conn_idle_timeout: 0s", "exporters::kafka/out::conn_idle_timeout: conn_idle_timeout (0s) must be positive"),
        ("dial_timeout: 0s", "exporters::kafka/out::dial_timeout: dial_timeout (0s) must be positive"),
        ("metadata: {retry: {max: -1}}", "exporters::kafka/out::metadata::retry::max: metadata::retry::max (-1) must be non-negative"),
        ("producer: {max_inflight_requests_per_broker: 0}", "exporters::kafka/out::producer::max_inflight_requests_per_broker: max_inflight_requests_per_broker (0) must be at least 1"),
        ("producer: {required_acks: all, max_inflight_requests_per_broker: 5}", "exporters::kafka/out::producer::max_inflight_requests_per_broker: max_inflight_requests_per_broker (5) must be 1 when required_acks is 'all' (-1)"),
        ("record_partitioner: {round_robin: {}, least_backup: {}}", "exporters::kafka/out::record_partitioner: record_partitioner: at most one record_partitioner strategy may be configured"),
        ("record_partitioner: {sticky_key: {}}", "exporters::kafka/out::record_partitioner::sticky_key::hasher: record_partitioner: sticky_key: unknown hasher \"\", valid values are"),
        ("record_partitioner: {extension: my_partitioner}", "exporters::kafka/out::record_partitioner::extension: profcol has no partitioner extensions"),
        ("signal_header: true\nrecord_headers: [{name: otelcol.signal, value: x}]", "exporters::kafka/out::record_headers::0::name: \"otelcol.signal\" is reserved when signal_header is enabled"),
        ("signal_header: true\ninclude_metadata_keys: [a, otelcol.signal]", "exporters::kafka/out::include_metadata_keys::1: \"otelcol.signal\" is reserved"),
        ("partition_traces_by_id: true\ntraces: {message_key_from_metadata_key: k}", "exporters::kafka/out::traces::message_key_from_metadata_key: traces::message_key_from_metadata_key cannot be set together"),
        ("record_headers: {a: b}", "record_headers"),
    ] {
        let err = create_errors(yaml);
        assert!(err.contains(want), "{yaml}: {err}");
    }
    assert!(resolve("protocol_version: 2.1.0").is_ok());
    // As the Collector's docs write them.
    for yaml in [
        "auth: {sasl: {mechanism: SCRAM-SHA-512, username: u, password: p}}\ntls: {insecure_skip_verify: true}",
        "auth: {sasl: {mechanism: PLAIN, username: u, password: p}}\ntls: {insecure: true, min_version: '1.2'}",
        "tls: {include_system_ca_certs_pool: true}",
    ] {
        let (c, _) = resolve(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert!(c.client.rdkafka().get("security.protocol").is_some());
    }
    assert!(resolve("protocol_version: 0.10.2.0").is_ok());
}

/// The Collector's config of other signals carries over.
#[test]
fn other_signals_keys_load() {
    resolve(
        "logs: {topic: l}\nmetrics: {topic: m, encoding: otlp_json}\ntraces: {topic: t}\n\
         partition_traces_by_id: true\npartition_metrics_by_resource_attributes: true\n\
         metadata: {full: false, refresh_interval: 1m, retry: {max: 5, backoff: 100ms}}\n\
         rack_id: r1\nuse_leader_epoch: false\nclient_id: me",
    )
    .unwrap();
}

/// The partitioning, headers and client keys of the Collector v0.165.1's
/// testdata reach librdkafka (or the exporter's own partition choice).
#[test]
fn partitioners_headers_and_client_keys() {
    let exporter = |yaml: &str| {
        let (c, r) = resolve(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        (
            r.partitioner,
            KafkaExporter::new(&c, r, Duration::from_secs(5)),
        )
    };
    let (p, e) = exporter("{}");
    assert_eq!(p, Partitioner::StickyKey("fnv1a_random"));
    assert_eq!(e.settings.get("partitioner"), Some("fnv1a_random"));
    assert_eq!(
        e.settings.get("max.in.flight.requests.per.connection"),
        Some("1")
    );
    assert_eq!(e.settings.get("connections.max.idle.ms"), Some("540000"));
    assert_eq!(
        e.settings.get("socket.connection.setup.timeout.ms"),
        Some("10000")
    );
    assert!(e.headers.is_empty());
    let (p, e) = exporter("record_partitioner: {sticky_key: {hasher: murmur2}}");
    assert_eq!(p, Partitioner::StickyKey("murmur2_random"));
    assert_eq!(e.settings.get("partitioner"), Some("murmur2_random"));
    for (yaml, want) in [
        (
            "record_partitioner: {round_robin: {}}",
            Partitioner::RoundRobin,
        ),
        (
            "record_partitioner: {least_backup: {}}",
            Partitioner::LeastBackup,
        ),
    ] {
        let (p, e) = exporter(yaml);
        assert_eq!(p, want);
        assert_eq!(e.settings.get("partitioner"), None, "{yaml}");
    }
    let (_, e) = exporter(
        "record_headers: [{name: some-key, value: some-value}, {name: some-key, value: another-value}, {name: new-key, value: new-value}]\n\
         signal_header: true\nconn_idle_timeout: 30s\ndial_timeout: 3s\n\
         producer: {max_inflight_requests_per_broker: 5}\nprofiles: {message_key_from_metadata_key: Tenant}",
    );
    let pairs: Vec<(&str, &str)> = e
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("some-key", "some-value"),
            ("some-key", "another-value"),
            ("new-key", "new-value"),
            ("otelcol.signal", "profiles")
        ]
    );
    assert_eq!(e.key_from_metadata_key, "tenant");
    assert_eq!(
        e.settings.get("max.in.flight.requests.per.connection"),
        Some("5")
    );
    assert_eq!(e.settings.get("connections.max.idle.ms"), Some("30000"));
    assert_eq!(
        e.settings.get("socket.connection.setup.timeout.ms"),
        Some("3000")
    );
}

/// What the exporter says when a message is over the limit, and what a
/// broker's refusal reads as, both cut the request smaller.
#[test]
fn size_refusals_split() {
    let own = ExportError::permanent(
        "a message of 2000 bytes exceeds the size limit of 1000 bytes (producer::max_message_bytes)",
    );
    assert_eq!(too_large(&own), Some(Some(1000)));
    let broker = classify(
        "t",
        &KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge),
    );
    assert!(matches!(broker, ExportError::Permanent { .. }));
    assert_eq!(too_large(&broker), Some(None), "{broker}");
    let away = classify(
        "t",
        &KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
    );
    assert!(matches!(away, ExportError::Retryable { .. }), "{away}");
}

/// `linger` and `max_broker_write_bytes` from the Collector's producer
/// section reach librdkafka; the write size is checked as the Collector
/// checks it.
#[test]
fn linger_and_broker_write_bytes_are_the_collectors() {
    let (c, _) = resolve("{}").unwrap();
    assert_eq!(c.producer.linger.0, StdDuration::from_millis(10));
    assert_eq!(c.producer.max_broker_write_bytes, 100 << 20);
    let (c, r) = resolve("producer: {linger: 2500us, max_broker_write_bytes: 209715200}").unwrap();
    let e = KafkaExporter::new(&c, r, StdDuration::from_secs(5));
    assert_eq!(e.settings.get("linger.ms"), Some("2.500"));
    assert_eq!(e.settings.get("message.max.bytes"), Some("209715200"));
    for (yaml, why) in [
        (
            "producer: {max_broker_write_bytes: 1000000}",
            "under 104857600",
        ),
        (
            "producer: {max_broker_write_bytes: 4294967296}",
            "32-bit integer",
        ),
        (
            "producer: {max_message_bytes: 209715200}",
            "under producer::max_message_bytes",
        ),
    ] {
        let err = create_errors(yaml);
        assert!(
            err.contains("producer::max_broker_write_bytes") && err.contains(why),
            "{yaml}: {err}"
        );
    }
}

/// What the pipeline keeps a batch as while it waits for this exporter:
/// the bytes alone only if sending needs nothing else.
#[test]
fn sends_bytes_alone_unless_it_reads_the_batch() {
    let sends_bytes = |yaml: &str| {
        let (c, r) = resolve(yaml).unwrap();
        KafkaExporter::new(&c, r, Duration::from_secs(5)).sends_received_bytes()
    };
    assert!(sends_bytes("{}"));
    assert!(!sends_bytes("{profiles: {encoding: otlp_json}}"));
    // It reads the resources only, from the bytes.
    assert!(sends_bytes("{topic_from_attribute: service.name}"));
}

#[test]
fn topic_from_attribute_reads_a_batch_held_as_bytes_without_decoding_it() {
    let exporter = |yaml: &str| {
        let (c, r) = resolve(yaml).unwrap();
        KafkaExporter::new(&c, r, Duration::from_secs(5))
    };
    let data = profcol_model::synth::Config {
        samples: 100,
        resources: 2,
        ..Default::default()
    }
    .build();
    let batch = profcol_model::testing::as_received(&data);
    let e = exporter("{topic_from_attribute: service.instance.id}");
    assert_eq!(e.topic_of(&batch), "instance-0");
    assert!(!batch.is_decoded());
    assert_eq!(e.topic_of(&ProfileBatch::new(data.clone())), "instance-0");
    // No resource has it: the configured topic.
    let e = exporter("{topic_from_attribute: nope, profiles: {topic: fallback}}");
    assert_eq!(e.topic_of(&batch), "fallback");
    assert_eq!(e.topic_of(&ProfileBatch::new(data)), "fallback");
}
