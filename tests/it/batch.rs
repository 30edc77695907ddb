//! The `batch` processor in a running collector: a gateway receiving many
//! small requests from sidecars forwards few merged ones, and every sample
//! stays accounted for while held, at shutdown, and with the exporter down.

use crate::common;

use std::time::Duration;

use tonic::Code;

use common::{client, until, Answer, Ports, Sink};
use profcol_model::proto::{request_into_data, ExportProfilesServiceRequest, ProfilesData};
use profcol_model::resolved::{resolve, Detail};
use profcol_model::{synth, ProfileBatch};
use profcol_pipeline::runtime::RuntimeOptions;

fn config(sink: u16, batch: &str, exporter_extra: &str) -> String {
    format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
processors:
  batch: {batch}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink}
    tls: {{insecure: true}}
{exporter_extra}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], processors: [batch], exporters: [otlp]}}
"#
    )
}

fn request(data: &ProfilesData) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles.clone(),
        dictionary: data.dictionary.clone(),
    }
}

/// Every profile resolved (folded stacks, resource, scope, every field),
/// sorted: what a user sees, however the requests were batched.
fn view<'a>(data: impl IntoIterator<Item = &'a ProfilesData>) -> Vec<String> {
    let mut v: Vec<String> = data
        .into_iter()
        .flat_map(|d| resolve(d, Detail::Full).profiles)
        .map(|p| profcol_model::ResolvedView { profiles: vec![p] }.to_text())
        .collect();
    v.sort();
    v
}

fn samples(d: &ProfilesData) -> u64 {
    ProfileBatch::new(d.clone()).sample_count()
}

/// Sends `reqs` over `clients` concurrent connections, each request until
/// it is accepted, as an exporter retries `UNAVAILABLE`; the retries.
async fn send_retrying(recv: u16, reqs: &[ExportProfilesServiceRequest], clients: usize) -> usize {
    let chunk = reqs.len().div_ceil(clients);
    let tasks: Vec<_> = reqs
        .chunks(chunk)
        .map(|part| {
            let part = part.to_vec();
            tokio::spawn(async move {
                let mut c = client(recv).await;
                let mut retries = 0;
                for r in part {
                    loop {
                        match c.export(r.clone()).await {
                            Ok(_) => break,
                            Err(s) if s.code() == Code::Unavailable => {
                                retries += 1;
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                            Err(s) => panic!("{s}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let mut retries = 0;
    for t in tasks {
        retries += t.await.unwrap();
    }
    retries
}

/// Sends `reqs` over `clients` concurrent connections; the gRPC code of
/// each (in order).
async fn send(recv: u16, reqs: &[ExportProfilesServiceRequest], clients: usize) -> Vec<Code> {
    let chunk = reqs.len().div_ceil(clients);
    let tasks: Vec<_> = reqs
        .chunks(chunk)
        .map(|part| {
            let part = part.to_vec();
            tokio::spawn(async move {
                let mut c = client(recv).await;
                let mut codes = Vec::with_capacity(part.len());
                for r in part {
                    codes.push(match c.export(r).await {
                        Ok(_) => Code::Ok,
                        Err(s) => s.code(),
                    });
                }
                codes
            })
        })
        .collect();
    let mut codes = Vec::with_capacity(reqs.len());
    for t in tasks {
        codes.extend(t.await.unwrap());
    }
    codes
}

/// Ordinary load through `batch` with its defaults but `send_batch_size`
/// (8192), the exporter keeping up: 1k-sample requests from 4, then 16
/// clients at once are all accepted, none refused `pipeline_full`
/// (receivers check requests faster than the stage merges them: a full
/// inbox makes clients wait their turn, not retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_refuses_nothing_under_ordinary_load() {
    for clients in [4, 16] {
        let sink = Sink::start().await;
        let yaml = config(sink.addr.port(), "{send_batch_size: 8192}", "");
        let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
            .await
            .unwrap();
        let recv = svc.grpc_port();
        let t = svc.telemetry().clone();
        let inputs = synth::requests(clients * 40, 1000, 200);
        let reqs: Vec<_> = inputs.iter().map(request).collect();
        let codes = send(recv, &reqs, clients).await;
        let refused = codes.iter().filter(|c| **c != Code::Ok).count();
        assert_eq!(
            refused,
            0,
            "{clients} clients: {refused} of {} refused",
            codes.len()
        );
        assert_eq!(t.refused("otlp"), 0);
        svc.shutdown().await;
        assert_eq!(t.sent("otlp"), inputs.iter().map(samples).sum::<u64>());
    }
}

/// 1000 requests of 20 samples from 10 services through `batch` (3000
/// samples a batch, no timeout to speak of): six batches go out as they
/// fill, the rest is held, counted as held, and sent at shutdown. Samples
/// and what they resolve to arrive unchanged, in at most 1000 / 50
/// requests, in at most 40 % of the bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_small_requests_leave_as_a_few_merged_ones() {
    let sink = Sink::start().await;
    let yaml = config(sink.addr.port(), "{send_batch_size: 3000, timeout: 1h}", "");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let recv = svc.grpc_port();
    let t = svc.telemetry().clone();

    let inputs = synth::service_requests(1000, 10, 20);
    let total: u64 = inputs.iter().map(samples).sum();
    assert_eq!(total, 20_000);
    let reqs: Vec<_> = inputs.iter().map(request).collect();
    let bytes_in: usize = reqs.iter().map(prost::Message::encoded_len).sum();
    // Four sidecars at once; a busy gateway asks them to retry
    // (`pipeline_full`), as any full pipeline does, and loses nothing.
    let retries = send_retrying(recv, &reqs, 4).await;
    assert_eq!(t.refused("otlp"), t.refused_for("otlp", "pipeline_full"));
    assert_eq!(t.refused("otlp"), retries as u64 * 20);

    // Six full batches leave; 2000 samples stay held, counted as such.
    until(Duration::from_secs(20), "six batches sent", || {
        t.sent("otlp") == 18_000
    })
    .await;
    assert_eq!(t.accepted("otlp"), total);
    assert_eq!(svc.held_samples(), 2_000);
    assert_eq!(t.accepted("otlp"), t.sent("otlp") + svc.held_samples());
    let text = t.encode_text();
    assert!(
        text.contains(
            "profcol_processor_held_profile_samples{pipeline=\"profiles\",processor=\"batch\"} 2000"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "otelcol_processor_batch_batch_size_trigger_send_total{processor=\"batch\"} 6"
        ),
        "{text}"
    );

    // Shutdown sends what is held before the queues drain.
    svc.shutdown().await;
    assert_eq!(t.sent("otlp"), total);
    assert_eq!(svc_held_after(&t), 0);
    let received: Vec<ProfilesData> = sink.received().into_iter().map(request_into_data).collect();
    assert_eq!(received.iter().map(samples).sum::<u64>(), total);
    assert!(
        received.len() <= 1000 / 50,
        "{} requests out of 1000",
        received.len()
    );
    assert_eq!(received.len(), 7);
    assert_eq!(view(&received), view(&inputs));
    let bytes_out: usize = sink
        .received()
        .iter()
        .map(prost::Message::encoded_len)
        .sum();
    assert!(
        bytes_out * 100 <= bytes_in * 40,
        "merged {bytes_out} bytes from {bytes_in}"
    );
    eprintln!(
        "1000 requests, {bytes_in} bytes -> {} requests, {bytes_out} bytes ({}%); {retries} retries",
        received.len(),
        bytes_out * 100 / bytes_in
    );
    // Equal resources were merged: each request holds one per service.
    for r in &received {
        assert_eq!(r.resource_profiles.len(), 10);
    }
}

fn svc_held_after(t: &profcol_pipeline::telemetry::Telemetry) -> u64 {
    let text = t.encode_text();
    text.lines()
        .find(|l| l.starts_with("profcol_processor_held_profile_samples{"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap()
}

/// The peer is down for good. `batch` keeps taking data until the
/// exporter's queue is full and its own inbox too; then clients are told
/// to retry (`UNAVAILABLE`, `pipeline_full`). While it runs, every
/// accepted sample is held or queued; at the shutdown deadline what is
/// left is counted as dropped: accepted = sent + failed + dropped, exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exporter_that_is_down_keeps_the_accounting_exact() {
    let sink = Sink::start().await;
    sink.answer_next(std::iter::repeat_n(
        Answer::Fail(Code::Unavailable, "down"),
        100_000,
    ));
    let yaml = config(
        sink.addr.port(),
        "{send_batch_size: 100, timeout: 20ms}",
        "    retry_on_failure: {initial_interval: 10ms, max_interval: 20ms, max_elapsed_time: 0s}\n    sending_queue: {queue_size: 2, num_consumers: 1}",
    );
    let options = RuntimeOptions {
        inbox_capacity: 4,
        // A stage stopped for good: no use waiting for its inbox.
        inbox_patience: Duration::from_millis(20),
        shutdown_timeout: Duration::from_millis(800),
        ..RuntimeOptions::default()
    };
    let svc = profcol::app::start_str(&yaml, options).await.unwrap();
    let recv = svc.grpc_port();
    let t = svc.telemetry().clone();
    let inputs = synth::service_requests(120, 4, 20);
    let reqs: Vec<_> = inputs.iter().map(request).collect();
    let codes = send(recv, &reqs, 1).await;
    let ok: u64 = codes
        .iter()
        .zip(&inputs)
        .filter(|(c, _)| **c == Code::Ok)
        .map(|(_, d)| samples(d))
        .sum();
    assert!(
        codes.contains(&Code::Unavailable),
        "the stage's inbox filled: {codes:?}"
    );
    assert!(ok > 0);
    assert_eq!(t.accepted("otlp"), ok);
    assert_eq!(t.refused_for("otlp", "pipeline_full"), 120 * 20 - ok);
    assert_eq!(t.sent("otlp"), 0);
    // Held by batch (its inbox, its state, waiting for queue room) or
    // queued: nothing accepted was lost.
    assert!(svc.held_samples() > 0);
    assert!(svc.held_samples() < ok);

    svc.shutdown().await;
    assert_eq!(t.sent("otlp"), 0);
    let dropped = t.exporter_dropped_total("otlp") + t.pipeline_dropped_total("profiles");
    assert_eq!(dropped + t.send_failed("otlp"), ok);
    assert_eq!(svc_held_after(&t), 0);
}

/// The Collector's batching in the exporter (`sending_queue::batch`, its
/// docs' way): two pipelines' requests for one exporter go out merged,
/// `min_size` samples at a time, with nothing lost or changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sending_queue_batch_merges_what_every_pipeline_sends_the_exporter() {
    let sink = Sink::start().await;
    let yaml = format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
  otlp/b: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
exporters:
  otlp:
    endpoint: 127.0.0.1:{}
    tls: {{insecure: true}}
    sending_queue:
      batch:
        flush_timeout: 1h
        min_size: 200
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp]}}
    profiles/b: {{receivers: [otlp/b], exporters: [otlp]}}
"#,
        sink.addr.port()
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let (a, b) = (
        svc.grpc_port(),
        svc.port("receivers::otlp/b::protocols::grpc"),
    );
    let t = svc.telemetry().clone();

    let inputs = synth::service_requests(20, 4, 20);
    let reqs: Vec<_> = inputs.iter().map(request).collect();
    for (i, r) in reqs.iter().enumerate() {
        client(if i % 2 == 0 { a } else { b })
            .await
            .export(r.clone())
            .await
            .unwrap();
    }
    until(Duration::from_secs(20), "two batches sent", || {
        sink.calls() == 2
    })
    .await;
    assert_eq!(t.sent("otlp"), 400);
    let text = t.encode_text();
    assert!(
        text.contains(
            "otelcol_processor_batch_batch_size_trigger_send_total{processor=\"batch/sending_queue_otlp\"} 2"
        ),
        "{text}"
    );
    svc.shutdown().await;
    assert_eq!(sink.calls(), 2, "nothing was held back to send at shutdown");
    let received: Vec<ProfilesData> = sink.received().into_iter().map(request_into_data).collect();
    assert_eq!(received.iter().map(samples).collect::<Vec<_>>(), [200, 200]);
    assert_eq!(view(&received), view(&inputs));
}
