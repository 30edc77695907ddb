//! The `kafka` exporter and receiver against a real Apache Kafka broker
//! (tests/it/common/kafka.rs): every fixture through a topic in both
//! encodings, a request over `max_message_bytes` in several messages, the
//! real Collector's kafka exporter and receiver sharing topics with
//! profcol, the broker down at start and mid-stream, a message of garbage
//! on a topic, and a consumer group that loses a member to SIGKILL.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::kafka::Broker;
use common::seen::{all_seen, difference};
use common::{otelcol, Ports, Running, Sink};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use profcol_model::synth;
use profcol_model::testing::fixtures_dir;
use prost::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::ClientConfig;

/// Recorded and synthetic requests: current and earlier revisions, several
/// resources, inlined lines, links, attributes.
fn fixtures() -> Vec<ExportProfilesServiceRequest> {
    let dir = fixtures_dir();
    let mut out: Vec<ExportProfilesServiceRequest> = [
        "otlp/go-cpu.otlp.bin",
        "otlp/minimal-request.bin",
        "otlp/two-resources-request.bin",
    ]
    .iter()
    .map(|rel| {
        ExportProfilesServiceRequest::decode(&std::fs::read(dir.join(rel)).unwrap()[..]).unwrap()
    })
    .collect();
    for (k, timestamps) in [(1u64, true), (2, false)] {
        let data = synth::Config {
            samples: 3_000,
            stacks: 400,
            functions: 300,
            resources: 3,
            timestamps,
            seed: k,
            ..synth::Config::default()
        }
        .build();
        out.push(ExportProfilesServiceRequest {
            resource_profiles: data.resource_profiles,
            dictionary: data.dictionary,
        });
    }
    out
}

/// One small synthetic request per seed, each distinct.
fn distinct_requests(
    seeds: std::ops::Range<u64>,
    samples: usize,
    stacks: usize,
    functions: usize,
) -> Vec<ExportProfilesServiceRequest> {
    seeds
        .map(|seed| {
            let data = synth::Config {
                samples,
                stacks,
                functions,
                seed,
                ..synth::Config::default()
            }
            .build();
            ExportProfilesServiceRequest {
                resource_profiles: data.resource_profiles,
                dictionary: data.dictionary,
            }
        })
        .collect()
}

fn samples(reqs: &[ExportProfilesServiceRequest]) -> u64 {
    reqs.iter()
        .flat_map(|r| &r.resource_profiles)
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
        .map(|p| p.samples.len() as u64)
        .sum()
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

async fn profcol(config: &Path) -> Running {
    Running::ready(common::profcol().arg("--config").arg(config)).await
}

/// A profcol taking OTLP gRPC on port 0 and sending it to `exporters`
/// (YAML lines under `exporters:`, ids listed in `ids`).
fn producer_config(exporters: &str, ids: &str) -> String {
    format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
exporters:
{exporters}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [{ids}]}}
"#
    )
}

/// A profcol consuming `receivers` (YAML lines under `receivers:`, ids in
/// `ids`) and sending everything to `sink`.
fn consumer_config(receivers: &str, ids: &str, sink: &Sink) -> String {
    format!(
        r#"
receivers:
{receivers}
exporters:
  otlp: {{endpoint: "{}", tls: {{insecure: true}}, retry_on_failure: {{initial_interval: 50ms}}}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [{ids}], exporters: [otlp]}}
"#,
        sink.addr
    )
}

/// Waits until `sink` holds at least `want` samples (fails after 60 s
/// with what arrived), then briefly for anything more.
async fn wait_samples(sink: &Sink, want: u64, procs: &mut [&mut Running]) {
    let started = Instant::now();
    while sink.samples() < want {
        for p in procs.iter_mut() {
            assert!(p.is_running(), "a process exited");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {want} samples arrived within 60 s",
            sink.samples()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `reqs` as messages on `topic`, keyed by their place (so that every
/// partition gets some), flushed.
fn produce_keyed(
    producer: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    reqs: &[ExportProfilesServiceRequest],
) {
    for (i, r) in reqs.iter().enumerate() {
        let value = r.encode_to_vec();
        let key = i.to_string();
        producer
            .send(BaseRecord::to(topic).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(10)).unwrap();
}

async fn send_all(port: u16, reqs: &[ExportProfilesServiceRequest]) {
    let mut client = common::client(port).await;
    for r in reqs {
        client.export(r.clone()).await.unwrap();
    }
}

/// Every message on `topic` from the start, read until `want` messages
/// arrived or 20 s passed.
fn read_topic(broker: &Broker, topic: &str, want: usize) -> Vec<Vec<u8>> {
    read_messages(broker, topic, want, |m| {
        m.payload().unwrap_or_default().to_vec()
    })
}

/// A message's headers, name and value (as text), in order.
fn headers_of(m: &rdkafka::message::BorrowedMessage<'_>) -> Vec<(String, String)> {
    use rdkafka::message::Headers;
    m.headers()
        .iter()
        .flat_map(|h| h.iter())
        .map(|h| {
            let value = String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned();
            (h.key.to_owned(), value)
        })
        .collect()
}

/// [`read_topic`], each message read with `read`.
fn read_messages<T>(
    broker: &Broker,
    topic: &str,
    want: usize,
    read: impl Fn(&rdkafka::message::BorrowedMessage<'_>) -> T,
) -> Vec<T> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .set("group.id", format!("test-reader-{topic}"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    while out.len() < want && started.elapsed() < Duration::from_secs(20) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push(read(&m));
        }
    }
    out
}

/// Every fixture through Kafka, in protobuf and in OTLP/JSON, arrives as it
/// was sent (equal resolved views); a producer's request over
/// `max_message_bytes` travels as several messages, each within the limit.
#[tokio::test(flavor = "multi_thread")]
async fn every_fixture_crosses_kafka_in_both_encodings() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let brokers = broker.address();
    let sink = Sink::start().await;
    let out = write(
        dir.path(),
        "out.yaml",
        &producer_config(
            &format!(
                "  kafka/proto: {{brokers: [\"{brokers}\"], profiles: {{topic: p}}, producer: {{max_message_bytes: 60000}}}}\n\
                 \x20 kafka/json: {{brokers: [\"{brokers}\"], profiles: {{topic: j, encoding: otlp_json}}, producer: {{max_message_bytes: 4000000, compression: zstd}}}}"
            ),
            "kafka/proto, kafka/json",
        ),
    );
    let inp = write(
        dir.path(),
        "in.yaml",
        &consumer_config(
            &format!(
                "  kafka/proto: {{brokers: [\"{brokers}\"], profiles: {{topics: [p]}}, initial_offset: earliest, group_id: g1}}\n\
                 \x20 kafka/json: {{brokers: [\"{brokers}\"], profiles: {{topics: [j], encoding: otlp_json}}, initial_offset: earliest, group_id: g1}}"
            ),
            "kafka/proto, kafka/json",
            &sink,
        ),
    );
    let mut producer = profcol(&out).await;
    let mut consumer = profcol(&inp).await;
    let reqs = fixtures();
    send_all(producer.grpc_port(), &reqs).await;
    let want = samples(&reqs);
    wait_samples(&sink, 2 * want, &mut [&mut producer, &mut consumer]).await;
    // Through both topics: everything twice, nothing else.
    let expected = {
        let mut e = all_seen(&reqs);
        e.extend(all_seen(&reqs));
        e.sort();
        e
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(diff) = difference(&expected, &all_seen(&sink.received())) {
        panic!("what crossed Kafka differs from what was sent: {diff}");
    }
    // The synthetic requests are larger than 60000 bytes: more messages
    // than requests on the protobuf topic, each within the limit.
    let big = reqs.iter().filter(|r| r.encoded_len() > 60_000).count();
    assert!(big >= 2, "the fixtures hold requests over the limit");
    let messages = read_topic(&broker, "p", reqs.len() + big);
    assert!(
        messages.len() > reqs.len(),
        "{} messages for {} requests",
        messages.len(),
        reqs.len()
    );
    for m in &messages {
        assert!(m.len() <= 60_000, "a message of {} bytes", m.len());
        ExportProfilesServiceRequest::decode(&m[..]).expect("each message is a request");
    }
}

/// A message of garbage bytes on the topic is counted as refused and
/// skipped; the messages after it arrive.
#[tokio::test(flavor = "multi_thread")]
async fn a_garbage_message_is_counted_and_skipped() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("mixed", 1).await;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    let good = ExportProfilesServiceRequest::decode(
        &std::fs::read(fixtures_dir().join("otlp/go-cpu.otlp.bin")).unwrap()[..],
    )
    .unwrap();
    let garbage = vec![0xffu8; 300];
    let good_bytes = good.encode_to_vec();
    for value in [&garbage[..], &good_bytes[..]] {
        producer
            .send(BaseRecord::<(), [u8]>::to("mixed").payload(value))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "in.yaml",
        &consumer_config(
            &format!(
                "  kafka: {{brokers: [\"{}\"], profiles: {{topics: [mixed]}}, initial_offset: earliest}}",
                broker.address()
            ),
            "kafka",
            &sink,
        ),
    );
    let mut consumer = profcol(&cfg).await;
    wait_samples(
        &sink,
        samples(std::slice::from_ref(&good)),
        &mut [&mut consumer],
    )
    .await;
    // The two messages are offered at once: the garbage may be counted
    // only after the good one arrived.
    let malformed =
        "profcol_receiver_items_total{receiver=\"kafka\",type=\"request\",outcome=\"malformed\"}";
    let started = Instant::now();
    let mut refused = 0;
    while refused == 0 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        refused = common::metric(consumer.metrics_port(), malformed).await;
    }
    assert_eq!(refused, 1, "the garbage message counted once");
    if let Some(diff) = difference(&all_seen(&[good]), &all_seen(&sink.received())) {
        panic!("{diff}");
    }
    // The Collector's receiver metrics, as its dashboards read them; the
    // lag comes with librdkafka's statistics, every 2 s.
    let place = "receiver=\"kafka\",topic=\"mixed\",partition=\"0\"";
    let want = [
        format!("otelcol_kafka_receiver_records_total{{{place},outcome=\"success\"}} 1"),
        format!("otelcol_kafka_receiver_records_total{{{place},outcome=\"failure\"}} 1"),
        format!("otelcol_kafka_receiver_messages_total{{{place},outcome=\"success\"}} 1"),
        format!("otelcol_kafka_receiver_unmarshal_failed_profiles_total{{{place}}} 1"),
        format!("otelcol_kafka_receiver_current_offset{{{place}}} 1"),
        format!("otelcol_kafka_receiver_offset_lag{{{place}}} 0"),
        "otelcol_kafka_receiver_partition_start_total{receiver=\"kafka\"} 1".to_owned(),
    ];
    let started = std::time::Instant::now();
    loop {
        let text = reqwest::get(format!(
            "http://127.0.0.1:{}/metrics",
            consumer.metrics_port()
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
        let missing: Vec<&String> = want
            .iter()
            .filter(|w| !text.lines().any(|l| l == *w))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "missing {missing:#?} in\n{}",
            text.lines()
                .filter(|l| l.contains("kafka"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The broker is down when profcol starts and again mid-stream: the
/// exporter keeps what it accepted queued and retries; once the broker is
/// back every accepted request is on the topic.
#[tokio::test(flavor = "multi_thread")]
async fn broker_down_at_start_and_mid_stream_loses_nothing() {
    let Some(mut broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("t", 1).await;
    broker.kill().await;
    let dir = tempfile::tempdir().unwrap();
    let out = write(
        dir.path(),
        "out.yaml",
        &producer_config(
            &format!(
                "  kafka: {{brokers: [\"{}\"], profiles: {{topic: t}}, timeout: 2s, retry_on_failure: {{initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 0s}}}}",
                broker.address()
            ),
            "kafka",
        ),
    );
    let mut producer = profcol(&out).await;
    let reqs = fixtures();
    // Accepted into the queue while the broker is away.
    send_all(producer.grpc_port(), &reqs[..3]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    broker.restart().await;
    let first = read_topic(&broker, "t", 3);
    assert!(first.len() >= 3, "{} of 3 requests arrived", first.len());
    // Down again mid-stream.
    broker.kill().await;
    send_all(producer.grpc_port(), &reqs[3..]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    broker.restart().await;
    let all = read_topic(&broker, "t", reqs.len());
    assert!(producer.is_running());
    let got: Vec<ExportProfilesServiceRequest> = all
        .iter()
        .map(|m| ExportProfilesServiceRequest::decode(&m[..]).unwrap())
        .collect();
    // At least once: each request is there; none is missing.
    let mut expected = all_seen(&reqs);
    expected.dedup();
    let mut seen = all_seen(&got);
    seen.dedup();
    if let Some(diff) = difference(&expected, &seen) {
        panic!("after the outages: {diff}");
    }
}

/// The Collector's kafka exporter and profcol's kafka receiver share one
/// topic, and profcol's kafka exporter and the Collector's kafka receiver
/// another: every fixture crosses each way unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn profcol_and_the_collector_share_topics_both_ways() {
    let Some(bin) = otelcol::binary() else {
        return;
    };
    let Some(broker) = Broker::start().await else {
        return;
    };
    let plain = format!("brokers: [\"{}\"]", broker.address());
    let clients = [&plain, &plain, &plain, &plain];
    share_topics_with_the_collector(&bin, &broker, ["from_collector", "from_profcol"], clients)
        .await;
}

/// The Collector and profcol share two topics on `broker`: the
/// Collector's kafka exporter writes the first, which profcol's kafka
/// receiver reads; profcol's kafka exporter writes the second, which the
/// Collector's receiver reads. `clients` are the client keys (brokers,
/// auth, tls as flow YAML) of the Collector's exporter, profcol's
/// receiver, profcol's exporter and the Collector's receiver. Every
/// fixture crosses each way unchanged.
async fn share_topics_with_the_collector(
    bin: &Path,
    broker: &Broker,
    [from_collector, from_profcol]: [&str; 2],
    [collector_out, profcol_in, profcol_out, collector_in]: [&String; 4],
) {
    // Topics made up front: both sides then start on existing partitions.
    broker.create_topic(from_collector, 1).await;
    broker.create_topic(from_profcol, 1).await;
    let to_profcol = Sink::start().await;
    let to_collector = Sink::start().await;
    let (mut collector, _cdir, cports) = otelcol::start_on_free_ports(bin, 2, |p| {
        format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:{}"}}}}}}
  kafka: {{{collector_in}, profiles: {{topics: [{from_profcol}]}}, initial_offset: earliest, group_id: collector}}
exporters:
  kafka: {{{collector_out}, profiles: {{topic: {from_collector}}}}}
  otlp_grpc: {{endpoint: "{}", tls: {{insecure: true}}}}
extensions:
  health_check: {{endpoint: "127.0.0.1:{}"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles/out: {{receivers: [otlp], exporters: [kafka]}}
    profiles/in: {{receivers: [kafka], exporters: [otlp_grpc]}}
"#,
            p[0], to_collector.addr, p[1]
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "profcol.yaml",
        &format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
  kafka: {{{profcol_in}, profiles: {{topics: [{from_collector}]}}, initial_offset: earliest, group_id: profcol}}
exporters:
  kafka: {{{profcol_out}, profiles: {{topic: {from_profcol}}}}}
  otlp: {{endpoint: "{}", tls: {{insecure: true}}}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles/out: {{receivers: [otlp], exporters: [kafka]}}
    profiles/in: {{receivers: [kafka], exporters: [otlp]}}
"#,
            to_profcol.addr
        ),
    );
    let mut profcol = profcol(&cfg).await;
    let reqs = fixtures();
    let want = samples(&reqs);
    send_all(cports[0], &reqs).await;
    send_all(profcol.grpc_port(), &reqs).await;
    wait_samples(&to_profcol, want, &mut [&mut profcol, &mut collector]).await;
    wait_samples(&to_collector, want, &mut [&mut profcol, &mut collector]).await;
    let expected = all_seen(&reqs);
    for (name, sink) in [
        ("Collector -> Kafka -> profcol", &to_profcol),
        ("profcol -> Kafka -> Collector", &to_collector),
    ] {
        if let Some(diff) = difference(&expected, &all_seen(&sink.received())) {
            panic!("{name}: {diff}");
        }
    }
}

/// Two profcol gateways in one consumer group share a topic of four
/// partitions; one is killed (SIGKILL) mid-stream. Its partitions move to
/// the other, which reads again what the dead one had not committed: every
/// message is processed at least once; duplicates are counted, not lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_group_survives_a_member_killed_mid_stream() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("shared", 4).await;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    // A distinct small request per message.
    let reqs = distinct_requests(0..60, 40, 20, 30);
    let produce = |reqs: &[ExportProfilesServiceRequest]| produce_keyed(&producer, "shared", reqs);
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Commits every 5 s: a member killed between commits leaves work that
    // is done again.
    let cfg = write(
        dir.path(),
        "gw.yaml",
        &consumer_config(
            &format!(
                "  kafka: {{brokers: [\"{}\"], profiles: {{topics: [shared]}}, initial_offset: earliest, group_id: gateways, session_timeout: 6s, heartbeat_interval: 1s, autocommit: {{interval: 5s}}}}",
                broker.address()
            ),
            "kafka",
            &sink,
        ),
    );
    let mut a = profcol(&cfg).await;
    let mut b = profcol(&cfg).await;
    produce(&reqs[..30]);
    let first = samples(&reqs[..30]);
    wait_samples(&sink, first, &mut [&mut a, &mut b]).await;
    a.signal("KILL");
    produce(&reqs[30..]);
    // Until every message was processed once at least (the dead member's
    // partitions move after its session times out).
    let mut expected = all_seen(&reqs);
    expected.sort();
    let unique = |got: &[common::seen::Seen]| {
        let mut u = got.to_vec();
        u.sort();
        u.dedup();
        u
    };
    let started = Instant::now();
    let got = loop {
        let got = all_seen(&sink.received());
        match difference(&expected, &unique(&got)) {
            None => break got,
            Some(diff) if started.elapsed() > Duration::from_secs(60) => {
                panic!("after a member was killed: {diff}")
            }
            Some(_) => {}
        }
        assert!(b.is_running(), "the surviving gateway exited");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let unique = unique(&got);
    eprintln!(
        "{} messages, {} processed, {} duplicates",
        reqs.len(),
        got.len(),
        got.len() - unique.len()
    );
}

/// While the pipeline cannot take more (its exporter's queue is full, the
/// backend away), the receiver waits and offers the same message again
/// instead of dropping or skipping it: once the backend is back, every
/// message arrives.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_pipeline_pauses_consumption_and_loses_nothing() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("slow", 1).await;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    let reqs = distinct_requests(100..120, 30, 10, 20);
    for r in &reqs {
        let value = r.encode_to_vec();
        producer
            .send(BaseRecord::<(), [u8]>::to("slow").payload(&value))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    let sink = Sink::start().await;
    sink.down_for(Duration::from_secs(3));
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "in.yaml",
        &format!(
            r#"
receivers:
  kafka: {{brokers: ["{}"], profiles: {{topics: [slow]}}, initial_offset: earliest}}
exporters:
  otlp:
    endpoint: "{}"
    tls: {{insecure: true}}
    retry_on_failure: {{initial_interval: 100ms, max_interval: 200ms}}
    sending_queue: {{queue_size: 2, num_consumers: 1}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [kafka], exporters: [otlp]}}
"#,
            broker.address(),
            sink.addr
        ),
    );
    let mut consumer = profcol(&cfg).await;
    wait_samples(&sink, samples(&reqs), &mut [&mut consumer]).await;
    let mut expected = all_seen(&reqs);
    expected.sort();
    let mut got = all_seen(&sink.received());
    got.sort();
    if let Some(diff) = difference(&expected, &got) {
        panic!("after the pause: {diff}");
    }
    let paused = common::metric(
        consumer.metrics_port(),
        "otelcol_receiver_refused_profile_samples_total{receiver=\"kafka\",transport=\"kafka\",reason=\"queue_full\"}",
    )
    .await;
    assert!(paused > 0, "the full queue refused messages meanwhile");
}

/// A broker that asks for SASL and TLS: profcol's exporter and receiver and
/// the Collector's, configured with the same keys, share its topics over
/// every mechanism and protocol (SCRAM-SHA-512 with TLS, PLAIN and
/// SCRAM-SHA-256 in plain text, TLS alone); every fixture crosses each way
/// unchanged. A wrong password gets nothing onto the topic.
#[tokio::test(flavor = "multi_thread")]
async fn sasl_and_tls_as_the_collector_configures_them() {
    use common::kafka::USERS;
    let Some(bin) = otelcol::binary() else {
        return;
    };
    let Some(broker) = Broker::secured().await else {
        return;
    };
    let s = broker.secured_ports();
    let ca = broker.ca_file().display().to_string();
    let auth = |mechanism: &str, (user, password): (&str, &str)| {
        format!(
            "auth: {{sasl: {{mechanism: {mechanism}, username: {user}, password: {password}}}}}"
        )
    };
    let scram512_tls = format!(
        "brokers: [\"127.0.0.1:{}\"], {}, tls: {{ca_file: \"{ca}\"}}",
        s.sasl_ssl,
        auth("SCRAM-SHA-512", USERS[2])
    );
    let plain = format!(
        "brokers: [\"127.0.0.1:{}\"], {}",
        s.sasl_plaintext,
        auth("PLAIN", USERS[0])
    );
    let tls_only = format!(
        "brokers: [\"127.0.0.1:{}\"], tls: {{ca_file: \"{ca}\"}}",
        s.ssl
    );
    let scram256 = format!(
        "brokers: [\"127.0.0.1:{}\"], {}",
        s.sasl_plaintext,
        auth("SCRAM-SHA-256", USERS[1])
    );
    // Collector SCRAM-SHA-512 over SASL_SSL -> profcol PLAIN in plain
    // text; profcol TLS alone -> Collector SCRAM-SHA-256 in plain text.
    share_topics_with_the_collector(
        &bin,
        &broker,
        ["secure_from_collector", "secure_from_profcol"],
        [&scram512_tls, &plain, &tls_only, &scram256],
    )
    .await;

    // A wrong password: the export fails and nothing reaches the topic.
    broker.create_topic("refused", 1).await;
    let (dir, reqs) = (tempfile::tempdir().unwrap(), fixtures());
    let wrong = format!(
        "brokers: [\"127.0.0.1:{}\"], {}, tls: {{ca_file: \"{ca}\"}}",
        s.sasl_ssl,
        auth("SCRAM-SHA-512", (USERS[2].0, "not-the-password"))
    );
    let cfg = write(
        dir.path(),
        "wrong.yaml",
        &producer_config(
            &format!(
                "  kafka: {{{wrong}, profiles: {{topic: refused}}, timeout: 2s, sending_queue: {{enabled: false}}, retry_on_failure: {{enabled: false}}}}"
            ),
            "kafka",
        ),
    );
    let refused = Running::ready(common::profcol().arg("--config").arg(&cfg)).await;
    send_all(refused.grpc_port(), &reqs[..1]).await;
    let failed = "otelcol_exporter_send_failed_profile_samples_total{exporter=\"kafka\"}";
    let started = Instant::now();
    while common::metric(refused.metrics_port(), failed).await < samples(&reqs[..1]) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the export with a wrong password did not fail within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(read_topic(&broker, "refused", 1).is_empty());
}

/// `header_extraction`: the named headers of each message become
/// `kafka.header.<name>` attributes of every resource it carries, as the
/// Collector's receiver sets them; a header the message lacks sets nothing.
#[tokio::test(flavor = "multi_thread")]
async fn header_extraction_puts_headers_on_every_resource() {
    use rdkafka::message::{Header, OwnedHeaders};
    let Some(broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("with_headers", 1).await;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    let reqs = fixtures();
    for (i, r) in reqs.iter().enumerate() {
        let mut headers = OwnedHeaders::new().insert(Header {
            key: "tenant",
            value: Some(format!("team-{i}").as_bytes()),
        });
        if i == 0 {
            headers = headers.insert(Header {
                key: "region",
                value: Some("eu-1"),
            });
        }
        let value = r.encode_to_vec();
        producer
            .send(
                BaseRecord::<(), [u8]>::to("with_headers")
                    .payload(&value[..])
                    .headers(headers),
            )
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "in.yaml",
        &consumer_config(
            &format!(
                "  kafka: {{brokers: [\"{}\"], profiles: {{topics: [with_headers]}}, initial_offset: earliest, \
                 header_extraction: {{extract_headers: true, headers: [tenant, region, absent]}}}}",
                broker.address()
            ),
            "kafka",
            &sink,
        ),
    );
    let mut consumer = profcol(&cfg).await;
    wait_samples(&sink, samples(&reqs), &mut [&mut consumer]).await;
    let attr = |r: &opentelemetry_proto::tonic::resource::v1::Resource, key: &str| {
        r.attributes.iter().find(|kv| kv.key == key).map(|kv| {
            match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => {
                    s.clone()
                }
                other => panic!("{key}: {other:?}"),
            }
        })
    };
    let received = sink.received();
    let mut tenants = Vec::new();
    for req in &received {
        let mut seen = None;
        for rp in &req.resource_profiles {
            let r = rp.resource.clone().unwrap_or_default();
            let tenant = attr(&r, "kafka.header.tenant").expect("every resource has the tenant");
            assert!(
                seen.get_or_insert(tenant.clone()) == &tenant,
                "one tenant per message"
            );
            assert_eq!(
                attr(&r, "kafka.header.region").is_some(),
                tenant == "team-0"
            );
            assert_eq!(attr(&r, "kafka.header.absent"), None);
        }
        tenants.extend(seen);
    }
    tenants.sort();
    tenants.dedup();
    assert_eq!(tenants.len(), reqs.len(), "{tenants:?}");
    // Besides the attributes, what arrived is what was sent.
    let strip = |mut reqs: Vec<ExportProfilesServiceRequest>| {
        for r in &mut reqs {
            for rp in &mut r.resource_profiles {
                if let Some(res) = &mut rp.resource {
                    res.attributes
                        .retain(|kv| !kv.key.starts_with("kafka.header."));
                }
            }
        }
        reqs
    };
    if let Some(diff) = difference(&all_seen(&strip(reqs)), &all_seen(&strip(received))) {
        panic!("{diff}");
    }
}

/// `exclude_topics` beside a topic pattern, as the Collector's README
/// configures them: the topics the pattern matches are read, the excluded
/// one is not, and a matching topic created later is found at the next
/// `metadata.refresh_interval`.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_pattern_leaves_out_the_excluded_topics() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    for t in ["prof-a", "prof-b", "prof-test", "other"] {
        broker.create_topic(t, 2).await;
    }
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    let reqs = |seed: u64| distinct_requests(seed..seed + 3, 20, 10, 10);
    for (topic, seed) in [
        ("prof-a", 0),
        ("prof-b", 10),
        ("prof-test", 20),
        ("other", 30),
    ] {
        produce_keyed(&producer, topic, &reqs(seed));
    }
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "in.yaml",
        &consumer_config(
            &format!(
                "  kafka: {{brokers: [\"{}\"], metadata: {{refresh_interval: 1s}}, initial_offset: earliest, \
                 profiles: {{topics: ['^prof-.*'], exclude_topics: ['^prof-test$']}}}}",
                broker.address()
            ),
            "kafka",
            &sink,
        ),
    );
    let mut consumer = profcol(&cfg).await;
    let mut want = reqs(0);
    want.extend(reqs(10));
    wait_samples(&sink, samples(&want), &mut [&mut consumer]).await;
    // Created after the start, found at the next read of the topics.
    broker.create_topic("prof-c", 1).await;
    produce_keyed(&producer, "prof-c", &reqs(40));
    want.extend(reqs(40));
    wait_samples(&sink, samples(&want), &mut [&mut consumer]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    if let Some(diff) = difference(&all_seen(&want), &all_seen(&sink.received())) {
        panic!("only prof-a, prof-b and prof-c were to be read: {diff}");
    }
}

/// Three brokers, topics replicated on each: the node leading the topic is
/// killed (SIGKILL) mid-stream. The exporter (`required_acks: all`) and
/// the receiver move to the new leader; every request profcol accepted
/// arrives at least once.
#[tokio::test(flavor = "multi_thread")]
async fn a_three_node_cluster_loses_its_leader_mid_stream() {
    let Some(mut cluster) = common::kafka::Cluster::start(3).await else {
        return;
    };
    cluster.nodes[0].create_topic("replicated", 2).await;
    let brokers = cluster
        .addresses()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let dir = tempfile::tempdir().unwrap();
    let out = write(
        dir.path(),
        "out.yaml",
        &producer_config(
            &format!(
                "  kafka: {{brokers: [{brokers}], profiles: {{topic: replicated}}, producer: {{required_acks: all}}, retry_on_failure: {{initial_interval: 100ms}}}}"
            ),
            "kafka",
        ),
    );
    let sink = Sink::start().await;
    let gw = write(
        dir.path(),
        "in.yaml",
        &consumer_config(
            &format!(
                "  kafka: {{brokers: [{brokers}], profiles: {{topics: [replicated]}}, initial_offset: earliest, group_id: ha}}"
            ),
            "kafka",
            &sink,
        ),
    );
    let mut agent = profcol(&out).await;
    let mut gateway = profcol(&gw).await;
    let reqs = distinct_requests(0..40, 50, 20, 30);
    send_all(agent.grpc_port(), &reqs[..20]).await;
    wait_samples(&sink, samples(&reqs[..20]), &mut [&mut agent, &mut gateway]).await;
    let leader = cluster.leader("replicated", 0);
    cluster.nodes[leader].kill().await;
    send_all(agent.grpc_port(), &reqs[20..]).await;
    let mut expected = all_seen(&reqs);
    expected.sort();
    let started = Instant::now();
    loop {
        let mut got = all_seen(&sink.received());
        got.sort();
        got.dedup();
        match difference(&expected, &got) {
            None => break,
            Some(diff) if started.elapsed() > Duration::from_secs(90) => {
                panic!("after the leader (node {}) was killed: {diff}", leader + 1)
            }
            Some(_) => {}
        }
        assert!(
            agent.is_running() && gateway.is_running(),
            "a profcol exited"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// As the Collector's exporter: with `include_metadata` on the receiver,
/// `profiles.topic_from_metadata_key` names the topic of a request that
/// carries that header (others go to `profiles.topic`), and every value of
/// the `include_metadata_keys` becomes a message header.
#[tokio::test(flavor = "multi_thread")]
async fn client_metadata_names_the_topic_and_becomes_headers() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("by-metadata", 1).await;
    broker.create_topic("fallback", 1).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "out.yaml",
        &format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0", include_metadata: true}}}}}}
exporters:
  kafka:
    brokers: ["{}"]
    include_metadata_keys: [X-Tenant, x-absent]
    profiles: {{topic: fallback, topic_from_metadata_key: X-Topic}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [kafka]}}
"#,
            broker.address()
        ),
    );
    let producer = profcol(&cfg).await;
    let mut client = common::client(producer.grpc_port()).await;
    let req = fixtures().remove(0);
    for (tenant, topic) in [("team-a", Some("by-metadata")), ("team-b", None)] {
        let mut call = tonic::Request::new(req.clone());
        call.metadata_mut()
            .insert("x-tenant", tenant.parse().unwrap());
        if let Some(t) = topic {
            call.metadata_mut().insert("x-topic", t.parse().unwrap());
        }
        client.export(call).await.unwrap();
    }
    let headers = |m: &rdkafka::message::BorrowedMessage<'_>| {
        let out = headers_of(m);
        ExportProfilesServiceRequest::decode(m.payload().unwrap_or_default())
            .expect("the message is the request");
        out
    };
    let pair = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    assert_eq!(
        read_messages(&broker, "by-metadata", 1, headers),
        vec![pair("X-Tenant", "team-a")]
    );
    assert_eq!(
        read_messages(&broker, "fallback", 1, headers),
        vec![pair("X-Tenant", "team-b")]
    );
}

/// The Collector v0.165.1's producer keys: `record_headers` and
/// `signal_header` on every message, `profiles.message_key_from_metadata_key`
/// as its key, placed as the default `sticky_key` partitioner (Sarama's
/// FNV-1a) places a key; `round_robin` gives each partition its turn and
/// `least_backup` uses them all.
#[tokio::test(flavor = "multi_thread")]
async fn record_headers_keys_and_partitioners_as_the_collector_writes_them() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    for topic in ["keyed", "spread-rr", "spread-lb"] {
        broker.create_topic(topic, 3).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let b = broker.address();
    let cfg = write(
        dir.path(),
        "out.yaml",
        &format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0", include_metadata: true}}}}}}
exporters:
  kafka/keyed:
    brokers: ["{b}"]
    record_headers: [{{name: team, value: profiling}}]
    signal_header: true
    profiles: {{topic: keyed, message_key_from_metadata_key: X-Tenant}}
  kafka/rr:
    brokers: ["{b}"]
    record_partitioner: {{round_robin: {{}}}}
    profiles: {{topic: spread-rr}}
  kafka/lb:
    brokers: ["{b}"]
    record_partitioner: {{least_backup: {{}}}}
    profiles: {{topic: spread-lb}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [kafka/keyed, kafka/rr, kafka/lb]}}
"#
        ),
    );
    let producer = profcol(&cfg).await;
    let mut client = common::client(producer.grpc_port()).await;
    let req = fixtures().remove(0);
    let tenants = ["team-a", "team-b", "team-c", "team-d", "team-e", "team-f"];
    for tenant in tenants {
        let mut call = tonic::Request::new(req.clone());
        call.metadata_mut()
            .insert("x-tenant", tenant.parse().unwrap());
        client.export(call).await.unwrap();
    }
    let read = |m: &rdkafka::message::BorrowedMessage<'_>| {
        let headers = headers_of(m);
        let key = m.key().map(|k| String::from_utf8_lossy(k).into_owned());
        (key, m.partition(), headers)
    };
    // Sarama's hash partitioner, which the Collector's default keeps.
    let sarama = |key: &str| {
        let mut h: u32 = 0x811c_9dc5;
        for b in key.bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        ((h as i32) % 3).abs()
    };
    let keyed = read_messages(&broker, "keyed", tenants.len(), read);
    assert_eq!(keyed.len(), tenants.len());
    let mut keys = Vec::new();
    for (key, partition, headers) in keyed {
        let key = key.expect("every message has its tenant as key");
        assert_eq!(partition, sarama(&key), "{key}");
        let pairs = [("team", "profiling"), ("otelcol.signal", "profiles")];
        let want: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(headers, want);
        keys.push(key);
    }
    keys.sort();
    assert_eq!(keys, tenants);
    let per_partition = |topic: &str| {
        let mut n = [0; 3];
        for (key, partition, headers) in read_messages(&broker, topic, tenants.len(), read) {
            assert_eq!((key, headers.len()), (None, 0), "{topic}");
            n[partition as usize] += 1;
        }
        n
    };
    assert_eq!(per_partition("spread-rr"), [2, 2, 2]);
    let lb = per_partition("spread-lb");
    assert_eq!(lb.iter().sum::<i32>(), 6);
    assert!(
        lb.iter().all(|&n| n > 0),
        "least_backup left a partition unused: {lb:?}"
    );
}

/// profcol and the Collector as members of one consumer group: both
/// advertise `cooperative-sticky` (the Collector's default, and
/// profcol's), so both join and share the topic's partitions, and every
/// message is read by one of them at least once. With librdkafka's
/// default assignors (`range,roundrobin`) profcol could not join.
#[tokio::test(flavor = "multi_thread")]
async fn profcol_and_the_collector_share_a_consumer_group() {
    let Some(bin) = otelcol::binary() else {
        return;
    };
    let Some(broker) = Broker::start().await else {
        return;
    };
    broker.create_topic("mixed", 4).await;
    let group = "brokers: [\"{}\"], profiles: {topics: [mixed]}, initial_offset: earliest, group_id: mixed, session_timeout: 6s, heartbeat_interval: 1s";
    let group = group.replace("{}", &broker.address());
    let to_collector = Sink::start().await;
    let to_profcol = Sink::start().await;
    let (mut collector, _cdir, _) = otelcol::start_on_free_ports(&bin, 1, |p| {
        format!(
            r#"
receivers:
  kafka: {{{group}}}
exporters:
  otlp_grpc: {{endpoint: "{}", tls: {{insecure: true}}}}
extensions:
  health_check: {{endpoint: "127.0.0.1:{}"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [kafka], exporters: [otlp_grpc]}}
"#,
            to_collector.addr, p[0]
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "member.yaml",
        &consumer_config(&format!("  kafka: {{{group}}}"), "kafka", &to_profcol),
    );
    let mut member = profcol(&cfg).await;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    // Both members in the group, its assignment done, before any message.
    let admin: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .unwrap();
    let started = Instant::now();
    loop {
        // The coordinator may still be loading on a fresh broker: asked
        // again.
        let state = match admin.fetch_group_list(Some("mixed"), Duration::from_secs(5)) {
            Ok(groups) => groups.groups().first().map(|g| {
                (
                    g.members().len(),
                    g.state().to_owned(),
                    g.protocol().to_owned(),
                )
            }),
            Err(e) => Some((0, e.to_string(), String::new())),
        };
        if let Some((2, ref s, ref protocol)) = state {
            if s == "Stable" {
                assert_eq!(protocol, "cooperative-sticky");
                break;
            }
        }
        assert!(member.is_running() && collector.is_running());
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the group did not settle with both members (members, state, protocol): {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reqs = distinct_requests(0..80, 40, 20, 30);
    produce_keyed(&producer, "mixed", &reqs);
    let mut expected = all_seen(&reqs);
    expected.sort();
    let started = Instant::now();
    loop {
        let mut got = all_seen(&to_collector.received());
        got.extend(all_seen(&to_profcol.received()));
        got.sort();
        got.dedup();
        match difference(&expected, &got) {
            None => break,
            Some(diff) if started.elapsed() > Duration::from_secs(60) => {
                panic!("through a mixed group: {diff}")
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    assert!(
        to_collector.samples() > 0 && to_profcol.samples() > 0,
        "both members read partitions: Collector {} samples, profcol {}",
        to_collector.samples(),
        to_profcol.samples()
    );
}

/// Batching in the exporter (`sending_queue::batch`) keeps only the client
/// metadata keys it partitions by: as the Collector, `validate` refuses a
/// kafka exporter that would read other keys from its batches, at each
/// key that names one (another signal's too).
#[test]
fn batching_in_the_exporter_must_keep_the_metadata_kafka_reads() {
    let dir = tempfile::tempdir().unwrap();
    let config = |partition: &str| {
        write(
            dir.path(),
            "batched.yaml",
            &format!(
                r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0", include_metadata: true}}}}}}
exporters:
  kafka:
    include_metadata_keys: [X-Tenant]
    profiles: {{topic_from_metadata_key: X-Topic, message_key_from_metadata_key: X-Key}}
    logs: {{topic_from_metadata_key: X-Logs}}
    sending_queue: {{batch: {{sizer: items{partition}}}}}
service:
  pipelines:
    profiles: {{receivers: [otlp], exporters: [kafka]}}
"#
            ),
        )
    };
    let out = common::profcol()
        .arg("validate")
        .arg("--config")
        .arg(config(", partition: {metadata_keys: [x-tenant]}"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for at in [
        "exporters::kafka::profiles::topic_from_metadata_key: \"X-Topic\" must be present in sending_queue::batch::partition::metadata_keys",
        "exporters::kafka::profiles::message_key_from_metadata_key: \"X-Key\" must be present",
        // Not read for profiles, and checked as the Collector checks it.
        "exporters::kafka::logs::topic_from_metadata_key: \"X-Logs\" must be present",
    ] {
        assert!(err.contains(at), "{at}\n{err}");
    }
    assert!(!err.contains("include_metadata_keys"), "{err}");
    let out = common::profcol()
        .arg("validate")
        .arg("--config")
        .arg(config(
            ", partition: {metadata_keys: [X-Tenant, X-Topic, X-Key, X-Logs]}",
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
