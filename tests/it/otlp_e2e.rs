//! The collector in one process: recorded OTLP requests through the `otlp`
//! receiver and exporter to an independent sink.

use crate::common;

use std::time::Duration;

use common::{client, request, Answer, Ports, Sink};
use profcol_model::proto::{request_into_data, ExportProfilesServiceRequest};
use profcol_model::resolved::{resolve, Detail};
use profcol_pipeline::runtime::RuntimeOptions;
use tonic::codec::CompressionEncoding;
use tonic::Code;

const FIXTURES: [&str; 3] = [
    "otlp/minimal-request.bin",
    "otlp/two-resources-request.bin",
    "otlp/go-cpu.otlp.bin",
];

/// The receiver and the metrics endpoint listen on port 0: ask the
/// started service for theirs ([`Ports`]).
fn config(exporters: &str, pipeline_exporters: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
exporters:
{exporters}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [{pipeline_exporters}]
"#
    )
}

fn sink_exporter(name: &str, port: u16) -> String {
    format!(
        r#"  {name}:
    endpoint: 127.0.0.1:{port}
    tls:
      insecure: true
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 50ms
      max_elapsed_time: 2s
"#
    )
}

/// A config whose one `otlp` exporter sends to `sink`.
fn to_sink(sink: &Sink) -> String {
    config(&sink_exporter("otlp", sink.addr.port()), "otlp")
}

fn resolved(reqs: &[ExportProfilesServiceRequest]) -> String {
    reqs.iter()
        .map(|r| resolve(&request_into_data(r.clone()), Detail::Full).to_text())
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`resolved`] per request, sorted: an exporter's consumers send
/// concurrently, so requests may arrive in another order.
fn resolved_in_any_order(reqs: &[ExportProfilesServiceRequest]) -> Vec<String> {
    let mut v: Vec<String> = reqs
        .iter()
        .map(|r| resolved(std::slice::from_ref(r)))
        .collect();
    v.sort();
    v
}

fn samples(reqs: &[ExportProfilesServiceRequest]) -> u64 {
    reqs.iter()
        .map(|r| profcol_model::ProfileBatch::new(request_into_data(r.clone())).sample_count())
        .sum()
}

async fn metrics_text(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn recorded_requests_arrive_unchanged_and_are_counted() {
    let sink = Sink::start().await;
    let exporter =
        sink_exporter("otlp/sink", sink.addr.port()) + "    headers: {x-scope-orgid: team-a}\n";
    let yaml = config(&exporter, "otlp/sink");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let (recv, metrics) = (svc.grpc_port(), svc.metrics_port());

    let sent: Vec<_> = FIXTURES.iter().map(|f| request(f)).collect();
    // zstd-compressed requests (gzip in the fan-out test).
    let mut c = client(recv)
        .await
        .send_compressed(CompressionEncoding::Zstd);
    for r in &sent {
        let resp = c.export(r.clone()).await.unwrap().into_inner();
        assert!(
            resp.partial_success.is_none(),
            "full success has no partial_success"
        );
    }
    let n = samples(&sent);
    assert!(n > 0);
    // The exporter's count shows on /metrics once the sink has everything.
    let sent_line =
        format!("otelcol_exporter_sent_profile_samples_total{{exporter=\"otlp/sink\"}} {n}");
    let started = std::time::Instant::now();
    let text_before = loop {
        let text = metrics_text(metrics).await;
        if text.contains(&sent_line) {
            break text;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    svc.shutdown().await;

    // The configured headers, gzip-compressed by default.
    for md in sink.metadata() {
        assert_eq!(md.get("x-scope-orgid").unwrap(), "team-a");
        assert_eq!(md.get("grpc-encoding").unwrap(), "gzip");
    }
    // Nothing mutated the batches, so the exact requests were forwarded, in
    // whatever order the exporter's concurrent consumers sent them.
    let sorted = |reqs: &[ExportProfilesServiceRequest]| {
        let mut v: Vec<Vec<u8>> = reqs.iter().map(prost::Message::encode_to_vec).collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&sink.received()), sorted(&sent));
    assert!(
        text_before.contains(&format!(
            "otelcol_receiver_accepted_profile_samples_total{{receiver=\"otlp\",transport=\"grpc\"}} {n}"
        )),
        "{text_before}"
    );
    assert!(text_before.contains(
        "otelcol_exporter_queue_capacity{exporter=\"otlp/sink\",data_type=\"profiles\"} 1000"
    ));
}

/// Two pipelines share the receiver and one exporter; a processor in one
/// pipeline does not change what the other exports.
#[tokio::test]
async fn pipelines_share_receivers_and_exporters() {
    let (shared, other) = (Sink::start().await, Sink::start().await);
    let yaml = format!(
        r#"
receivers:
  otlp:
    protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}
processors:
  thread_pruning:
    rename_threads: [{{pattern: main, replacement: renamed}}]
exporters:
{}{}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlp/shared]
    profiles/renamed:
      receivers: [otlp]
      processors: [thread_pruning]
      exporters: [otlp/shared, otlp/other]
"#,
        sink_exporter("otlp/shared", shared.addr.port()),
        sink_exporter("otlp/other", other.addr.port())
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let telemetry = svc.telemetry().clone();
    let req = request("otlp/minimal-request.bin");
    client(svc.grpc_port())
        .await
        .export(req.clone())
        .await
        .unwrap();
    svc.shutdown().await;

    let n = samples(std::slice::from_ref(&req));
    assert_eq!(telemetry.accepted("otlp"), n, "counted once per receiver");
    assert_eq!(telemetry.sent("otlp/shared"), 2 * n, "once per pipeline");
    assert_eq!(telemetry.sent("otlp/other"), n);
    let renamed = other.received();
    assert_eq!(renamed.len(), 1);
    let view = resolved(&renamed);
    assert!(
        view.contains("thread.name=renamed") && !view.contains("thread.name=main"),
        "{view}"
    );
    let mut got = shared.received();
    got.sort_by_key(|r| resolved(std::slice::from_ref(r)));
    let mut want = vec![req, renamed[0].clone()];
    want.sort_by_key(|r| resolved(std::slice::from_ref(r)));
    assert_eq!(got, want, "the unprocessed copy is the request as sent");
}

#[tokio::test]
async fn fan_out_survives_a_dead_exporter() {
    let sink = Sink::start().await;
    // A peer that is down: it drops every connection at once. Counting the
    // connections shows the exporter retried.
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = down.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = down.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(conn);
        }
    });
    let exporters = format!(
        "{}{}",
        sink_exporter("otlp/up", sink.addr.port()),
        sink_exporter("otlp_grpc/down", dead)
            .replace("max_elapsed_time: 2s", "max_elapsed_time: 300ms")
    );
    let yaml = config(&exporters, "otlp/up, otlp_grpc/down");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let recv = svc.grpc_port();
    let telemetry = svc.telemetry().clone();

    let sent: Vec<_> = FIXTURES.iter().map(|f| request(f)).collect();
    let mut c = client(recv)
        .await
        .send_compressed(CompressionEncoding::Gzip);
    for r in &sent {
        c.export(r.clone()).await.unwrap();
    }
    svc.shutdown().await;

    assert_eq!(
        resolved_in_any_order(&sink.received()),
        resolved_in_any_order(&sent)
    );
    let n = samples(&sent);
    assert_eq!(telemetry.accepted("otlp"), n);
    assert_eq!(telemetry.sent("otlp/up"), n);
    assert_eq!(telemetry.sent("otlp_grpc/down"), 0);
    assert_eq!(
        telemetry.send_failed("otlp_grpc/down"),
        n,
        "each batch retried, then counted as failed"
    );
    let tries = connections.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        tries > sent.len(),
        "more connections than batches: retried ({tries})"
    );
}

/// One consumer whose first send is held, then fails and is retried: at
/// shutdown most batches are still queued, and draining delivers them all.
#[tokio::test]
async fn shutdown_with_data_in_flight_loses_nothing() {
    let sink = Sink::start().await;
    sink.answer_next([
        Answer::Hold(1500),
        Answer::Fail(Code::Unavailable, "warming up"),
    ]);
    let yaml = to_sink(&sink);
    let yaml = yaml.replace(
        "      max_elapsed_time: 2s\n",
        "      max_elapsed_time: 2s\n    sending_queue:\n      num_consumers: 1\n",
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let telemetry = svc.telemetry().clone();

    let req = request("otlp/go-cpu.otlp.bin");
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    let mut sent = 0;
    for _ in 0..40 {
        c.export(req.clone()).await.unwrap();
        sent += 1;
    }
    assert!(
        telemetry.sent("otlp") < telemetry.accepted("otlp"),
        "data still in flight when shutdown starts"
    );
    svc.shutdown().await;

    let n = samples(&[req]) * sent;
    assert_eq!(telemetry.accepted("otlp"), n);
    assert_eq!(
        telemetry.sent("otlp"),
        n,
        "accepted = exported, nothing dropped"
    );
    assert_eq!(
        telemetry.send_failed("otlp") + telemetry.enqueue_failed("otlp"),
        0
    );
    assert_eq!(samples(&sink.received()), n);
}

#[tokio::test]
async fn retry_info_and_permanent_errors_are_honoured() {
    let sink = Sink::start().await;
    sink.answer_next([
        Answer::Throttle(400),
        Answer::Fail(Code::InvalidArgument, "bad data"),
    ]);
    let yaml = to_sink(&sink);
    let svc = profcol::app::start_str(
        &yaml.replace(
            "      max_elapsed_time: 2s\n",
            "      max_elapsed_time: 2s\n    sending_queue:\n      num_consumers: 1\n",
        ),
        RuntimeOptions::default(),
    )
    .await
    .unwrap();
    let telemetry = svc.telemetry().clone();
    let req = request("otlp/minimal-request.bin");
    let n = samples(std::slice::from_ref(&req));
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    c.export(req.clone()).await.unwrap(); // throttled, then delivered
    c.export(req.clone()).await.unwrap(); // permanent error: not retried
    svc.shutdown().await;

    assert_eq!(
        sink.calls(),
        3,
        "one retry after RetryInfo, none after INVALID_ARGUMENT"
    );
    let t = sink.call_times();
    assert!(
        t[1] - t[0] >= Duration::from_millis(400),
        "the retry waited for RetryInfo's 400ms, not the 10ms backoff: {:?}",
        t[1] - t[0]
    );
    assert_eq!(telemetry.sent("otlp"), n);
    assert_eq!(telemetry.send_failed("otlp"), n);
}

/// A peer that never recovers: retries go on (`max_elapsed_time: 0`) until
/// the one shutdown deadline, then what is left is counted as dropped.
#[tokio::test]
async fn the_shutdown_deadline_bounds_retries_and_counts_the_rest() {
    let sink = Sink::start().await;
    sink.answer_next(std::iter::repeat_n(
        Answer::Fail(Code::Unavailable, "down"),
        1000,
    ));
    let yaml = to_sink(&sink);
    let yaml = yaml.replace("max_elapsed_time: 2s", "max_elapsed_time: 0s");
    let options = RuntimeOptions {
        shutdown_timeout: Duration::from_millis(500),
        ..RuntimeOptions::default()
    };
    let svc = profcol::app::start_str(&yaml, options).await.unwrap();
    let telemetry = svc.telemetry().clone();
    let req = request("otlp/minimal-request.bin");
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    for _ in 0..5 {
        c.export(req.clone()).await.unwrap();
    }
    let started = std::time::Instant::now();
    svc.shutdown().await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "shutdown waits for the deadline, then stops: {took:?}"
    );
    let n = samples(std::slice::from_ref(&req)) * 5;
    assert_eq!(telemetry.accepted("otlp"), n);
    assert_eq!(telemetry.sent("otlp"), 0);
    let dropped =
        telemetry.exporter_dropped_total("otlp") + telemetry.pipeline_dropped_total("profiles");
    assert_eq!(dropped + telemetry.send_failed("otlp"), n);
    assert!(dropped > 0, "dropped at the deadline with reason shutdown");
}

/// zstd at level 1 (the `Compressing` layer) arrives as the peer decodes it.
#[tokio::test]
async fn zstd_requests_arrive_unchanged() {
    let sink = Sink::start().await;
    let yaml = config(
        &format!(
            "{}    compression: zstd\n",
            sink_exporter("otlp", sink.addr.port())
        ),
        "otlp",
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let reqs: Vec<_> = FIXTURES.iter().map(|f| request(f)).collect();
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    for r in &reqs {
        c.export(r.clone()).await.unwrap();
    }
    svc.shutdown().await;
    assert_eq!(
        resolved_in_any_order(&sink.received()),
        resolved_in_any_order(&reqs)
    );
    for md in sink.metadata() {
        assert_eq!(md.get("grpc-encoding").unwrap(), "zstd");
    }
}

/// A partial success is not retried; the rejected profiles' samples are
/// counted as failed, the rest as sent.
#[tokio::test]
async fn partial_success_is_counted_not_retried() {
    let sink = Sink::start().await;
    sink.answer_next([Answer::Partial(1, "one profile too old")]);
    let yaml = to_sink(&sink);
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let telemetry = svc.telemetry().clone();
    // Two profiles (samples/count and cpu/nanoseconds) of the same samples.
    let req = request("otlp/go-cpu.otlp.bin");
    assert_eq!(req.resource_profiles[0].scope_profiles[0].profiles.len(), 2);
    let n = samples(std::slice::from_ref(&req));
    let recv = svc.grpc_port();
    client(recv).await.export(req).await.unwrap();
    svc.shutdown().await;

    assert_eq!(sink.calls(), 1, "a partial success is not retried");
    assert_eq!(telemetry.sent("otlp"), n / 2);
    assert_eq!(telemetry.send_failed("otlp"), n - n / 2);
}

/// One invalid Profile of a request is left out, the rest accepted, as
/// OTLP's partial success: the answer says how many and why.
#[tokio::test]
async fn an_invalid_profile_is_rejected_alone() {
    let sink = Sink::start().await;
    let yaml = to_sink(&sink);
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let telemetry = svc.telemetry().clone();
    let mut req = request("otlp/go-cpu.otlp.bin");
    let profiles = &mut req.resource_profiles[0].scope_profiles[0].profiles;
    // Counted in observations, the unit of every metric, not in Samples:
    // one sample of the invalid Profile holds three.
    profiles[1].samples[0].values = vec![1, 2, 3];
    // Not one of the mistakes `on_invalid: repair` repairs.
    profiles[1].samples[3].values = vec![5];
    profiles[1].samples[3].timestamps_unix_nano = vec![1, 2];
    let bad = profcol_model::profile_sample_count(&profiles[1]);
    assert_eq!(bad, profiles[1].samples.len() as u64 + 3);
    let n = samples(std::slice::from_ref(&req));
    let recv = svc.grpc_port();
    let answer = client(recv)
        .await
        .export(req.clone())
        .await
        .unwrap()
        .into_inner();
    svc.shutdown().await;

    let partial = answer.partial_success.expect("partial success");
    assert_eq!(partial.rejected_profiles, 1);
    assert!(
        partial
            .error_message
            .contains("profiles[1].samples[3].values: 1 values but 2 timestamps"),
        "{}",
        partial.error_message
    );
    let got = sink.received();
    assert_eq!(got.len(), 1);
    let kept = &got[0].resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(
        kept,
        &req.resource_profiles[0].scope_profiles[0].profiles[..1]
    );
    assert_eq!(telemetry.refused_for("otlp", "invalid"), bad);
    assert_eq!(telemetry.accepted("otlp"), n - bad);
}

#[tokio::test]
async fn bad_input_is_refused_and_the_receiver_keeps_serving() {
    let sink = Sink::start().await;
    let yaml = to_sink(&sink);
    let yaml = yaml
        .replace(
            "        endpoint: 127.0.0.1",
            "        max_recv_msg_size_mib: 16\n        endpoint: 127.0.0.1",
        )
        .replace("    metrics:\n", "    metrics:\n      level: basic\n");
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let telemetry = svc.telemetry().clone();
    let (recv, metrics) = (svc.grpc_port(), svc.metrics_port());
    let mut c = client(recv).await;

    // Garbage bytes: not protobuf at all.
    let status = raw_export(recv, vec![0xff; 64]).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("cannot decode"),
        "{}",
        status.message()
    );

    // Valid protobuf whose sample points past the stack table.
    let mut bad = request("otlp/minimal-request.bin");
    let stacks = bad.dictionary.as_ref().unwrap().stack_table.len();
    bad.resource_profiles[0].scope_profiles[0].profiles[0].samples[1].stack_index = 42;
    let status = c.export(bad).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("samples[1].stack_index") && status.message().contains("42"),
        "message names the bad index: {} ({stacks} stacks)",
        status.message()
    );
    // Such indices are what a sender on another revision of the unstable
    // proto produces: the message says which one profcol reads.
    assert!(
        status.message().contains("opentelemetry-proto v1.10.0"),
        "{}",
        status.message()
    );

    // Over max_recv_msg_size_mib: refused before it is read.
    let status = raw_export(recv, vec![0u8; 100 << 20]).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");

    // Still serving.
    let good = request("otlp/minimal-request.bin");
    c.export(good.clone()).await.unwrap();
    // `level: basic` serves the Collector's own metrics only.
    let text = metrics_text(metrics).await;
    assert!(
        text.contains("otelcol_receiver_refused_profile_samples_total{receiver=\"otlp\",transport=\"grpc\",reason=\"invalid\"} 3"),
        "{text}"
    );
    assert!(!text.contains("profcol_"), "{text}");
    svc.shutdown().await;
    assert_eq!(sink.received(), vec![good.clone()]);
    assert_eq!(
        telemetry.refused_for("otlp", "invalid"),
        3,
        "the bad request's samples"
    );
    // Unreadable requests have no samples to count: the requests are.
    for reason in ["malformed", "invalid", "too_large"] {
        assert_eq!(telemetry.items("otlp", "request", reason), 1, "{reason}");
    }
    assert_eq!(telemetry.accepted("otlp"), samples(&[good]));
}

/// A client hears "accepted" only once its batch is in the exporter's
/// queue: with the queue full it gets UNAVAILABLE (with RetryInfo) and
/// nothing of the refused requests is counted as accepted, so nothing
/// accepted is ever dropped for lack of room (`enqueue_failed` stays 0).
#[tokio::test]
async fn a_full_queue_answers_unavailable_and_loses_nothing_accepted() {
    let sink = Sink::start().await;
    sink.answer_next(std::iter::repeat_n(
        Answer::Fail(Code::Unavailable, "down"),
        1000,
    ));
    let yaml = to_sink(&sink);
    let yaml = yaml.replace(
        "      max_elapsed_time: 2s\n",
        "      max_elapsed_time: 2s\n    sending_queue:\n      queue_size: 1\n      num_consumers: 1\n",
    );
    let opts = RuntimeOptions {
        shutdown_timeout: Duration::from_millis(200),
        ..RuntimeOptions::default()
    };
    let svc = profcol::app::start_str(&yaml, opts).await.unwrap();
    let telemetry = svc.telemetry().clone();
    let req = request("otlp/minimal-request.bin");
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    // One in the exporter (retrying), then one in the queue.
    c.export(req.clone()).await.unwrap();
    while sink.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    c.export(req.clone()).await.unwrap();
    let mut unavailable = 0;
    for _ in 0..8 {
        let s = c.export(req.clone()).await.unwrap_err();
        assert_eq!(s.code(), Code::Unavailable, "{s:?}");
        assert!(
            s.message()
                .contains("the sending queue of exporters::otlp is full"),
            "{s:?}"
        );
        assert!(
            tonic_types::StatusExt::get_details_retry_info(&s).is_some(),
            "UNAVAILABLE carries RetryInfo"
        );
        unavailable += 1;
    }
    svc.shutdown().await;
    let n = samples(std::slice::from_ref(&req));
    assert_eq!(telemetry.accepted("otlp"), 2 * n);
    assert_eq!(telemetry.refused_for("otlp", "queue_full"), unavailable * n);
    assert_eq!(
        telemetry.items("otlp", "request", "queue_full"),
        unavailable
    );
    // Every sample the queue could not take was refused, none accepted.
    assert_eq!(telemetry.enqueue_failed("otlp"), unavailable * n);
    // Accounting: whatever was accepted is failed or dropped at shutdown.
    assert_eq!(
        telemetry.accepted("otlp"),
        telemetry.sent("otlp")
            + telemetry.send_failed("otlp")
            + telemetry.exporter_dropped_total("otlp")
    );
}

/// With `block_on_overflow`, a client waits for room instead; past the
/// batches a pipeline takes at once (its inbox), requests are refused
/// with UNAVAILABLE (`pipeline_full`).
#[tokio::test]
async fn a_blocked_queue_holds_clients_and_a_full_pipeline_refuses_more() {
    let sink = Sink::start().await;
    sink.answer_next(std::iter::repeat_n(
        Answer::Fail(Code::Unavailable, "down"),
        1000,
    ));
    let yaml = to_sink(&sink);
    let yaml = yaml.replace(
        "      max_elapsed_time: 2s\n",
        "      max_elapsed_time: 1s\n    sending_queue:\n      queue_size: 1\n      num_consumers: 1\n      block_on_overflow: true\n",
    );
    let opts = RuntimeOptions {
        inbox_capacity: 1,
        shutdown_timeout: Duration::from_millis(200),
        ..RuntimeOptions::default()
    };
    let svc = profcol::app::start_str(&yaml, opts).await.unwrap();
    let telemetry = svc.telemetry().clone();
    let req = request("otlp/minimal-request.bin");
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    c.export(req.clone()).await.unwrap();
    while sink.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    c.export(req.clone()).await.unwrap();
    // The third waits for room (holding the pipeline's one place), the
    // others are refused at once.
    let waiting = {
        let (mut c, req) = (c.clone(), req.clone());
        tokio::spawn(async move { c.export(req).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the client waits for room");
    let s = c.export(req.clone()).await.unwrap_err();
    assert_eq!(s.code(), Code::Unavailable, "{s:?}");
    assert!(
        s.message().contains("the pipeline profiles is full"),
        "{s:?}"
    );
    // Once the exporter gives up on the first (1 s), the waiting one gets in.
    waiting.await.unwrap().unwrap();
    svc.shutdown().await;
    let n = samples(std::slice::from_ref(&req));
    assert_eq!(telemetry.accepted("otlp"), 3 * n);
    assert_eq!(telemetry.items("otlp", "request", "pipeline_full"), 1);
    assert_eq!(
        telemetry.accepted("otlp"),
        telemetry.sent("otlp")
            + telemetry.send_failed("otlp")
            + telemetry.exporter_dropped_total("otlp")
    );
}

/// The memory budget (`--memory-limit-mib`) counts what a request will
/// take once decoded when it is admitted, what a batch holds while it waits
/// (forwarded as received, as here: its bytes), and the working space of
/// the exporter's attempt: past it a request gets UNAVAILABLE (retry
/// later), one larger than the whole budget RESOURCE_EXHAUSTED. Both are
/// counted with their reason.
#[tokio::test]
async fn the_memory_budget_bounds_what_is_in_flight() {
    let sink = Sink::start().await;
    // The sink holds the first two calls: their batches (and the attempts'
    // working space) stay in memory.
    sink.answer_next([Answer::Hold(3_000), Answer::Hold(3_000)]);
    let yaml = to_sink(&sink);
    let small = request("otlp/minimal-request.bin");
    let bytes = prost::Message::encode_to_vec(&small);
    let decoded = profcol_model::wire_check::check(&bytes)
        .expect("the recording is clean")
        .heap;
    let opts = RuntimeOptions {
        // Held by the sink, the first batch and its attempt hold its bytes
        // twice; the second is admitted with room to decode (its bytes and
        // what decoding takes); once it waits as bytes (queued or sent), a
        // third has no room.
        memory_limit_bytes: bytes.len() * 7 / 2 + decoded,
        shutdown_timeout: Duration::from_millis(200),
        ..RuntimeOptions::default()
    };
    let svc = profcol::app::start_str(&yaml, opts).await.unwrap();
    let telemetry = svc.telemetry().clone();
    let recv = svc.grpc_port();
    let mut c = client(recv).await;
    // Decoded, this one would be larger than the whole budget.
    let big = c.export(request("otlp/go-cpu.otlp.bin")).await.unwrap_err();
    assert_eq!(big.code(), Code::ResourceExhausted, "{big:?}");
    assert!(
        big.message().contains("exceeds the memory budget"),
        "{big:?}"
    );
    c.export(small.clone()).await.unwrap();
    while sink.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    c.export(small.clone()).await.unwrap();
    let full = c.export(small.clone()).await.unwrap_err();
    assert_eq!(full.code(), Code::Unavailable, "{full:?}");
    assert_eq!(full.message(), "the memory limit is reached, retry later");
    svc.shutdown().await;

    let n = samples(std::slice::from_ref(&small));
    assert_eq!(telemetry.accepted("otlp"), 2 * n);
    // Refused before decoding: no samples known, the requests counted.
    for reason in ["memory_limit", "too_large"] {
        assert_eq!(telemetry.items("otlp", "request", reason), 1, "{reason}");
    }
}

/// Sends raw bytes as the request message, as a broken client would.
async fn raw_export(port: u16, body: Vec<u8>) -> Result<(), tonic::Status> {
    use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
    struct Raw;
    struct RawEnc;
    struct RawDec;
    impl Encoder for RawEnc {
        type Item = Vec<u8>;
        type Error = tonic::Status;
        fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
            bytes::BufMut::put_slice(buf, &item);
            Ok(())
        }
    }
    impl Decoder for RawDec {
        type Item = ();
        type Error = tonic::Status;
        fn decode(&mut self, _: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
            Ok(Some(()))
        }
    }
    impl Codec for Raw {
        type Encode = Vec<u8>;
        type Decode = ();
        type Encoder = RawEnc;
        type Decoder = RawDec;
        fn encoder(&mut self) -> RawEnc {
            RawEnc
        }
        fn decoder(&mut self) -> RawDec {
            RawDec
        }
    }
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(usize::MAX);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(body),
        http::uri::PathAndQuery::from_static(profcol_model::proto::EXPORT_PATH),
        Raw,
    )
    .await
    .map(|_| ())
}

/// Producers on older proto revisions through an edge collector that
/// sends v1.9.0 (`proto_revision`) to a gateway that reads it, on to a
/// v1.10.0 sink: every hop keeps the meaning, and each receiver counts
/// the revision it read.
#[tokio::test]
async fn older_revisions_in_an_older_revision_out() {
    let sink = Sink::start().await;
    let gateway = config(&sink_exporter("otlp", sink.addr.port()), "otlp");
    let gw = profcol::app::start_str(&gateway, RuntimeOptions::default())
        .await
        .unwrap();
    let edge = config(
        &(sink_exporter("otlp", gw.grpc_port()) + "    proto_revision: v1.9.0\n"),
        "otlp",
    );
    let edge = profcol::app::start_str(&edge, RuntimeOptions::default())
        .await
        .unwrap();
    let edge_recv = edge.grpc_port();
    let (gw_t, edge_t) = (gw.telemetry().clone(), edge.telemetry().clone());

    let mut channel =
        tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{edge_recv}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let files = [
        ("python-proto-1.39.1/request.binpb", "v1.7.0"),
        ("python-protoc-v1.8.0/request.binpb", "v1.8.0"),
        (
            "opentelemetry-sdk-extension-profiling-0.63b4/0001.binpb",
            "v1.9.0",
        ),
        ("beacon-profiling-1.2.1/0001.binpb", "v1.10.0"),
    ];
    for (file, _) in files {
        let bytes = profcol_model::testing::fixture(&format!("otlp-revisions/{file}"));
        let code =
            common::export_framed(&mut channel, common::grpc_frame(&bytes, false), None).await;
        assert_eq!(code, 0, "{file}");
    }
    edge.shutdown().await;
    gw.shutdown().await;

    for (_, revision) in files {
        assert_eq!(edge_t.accepted_requests("otlp", revision), 1, "{revision}");
    }
    assert_eq!(gw_t.accepted_requests("otlp", "v1.9.0"), 4);
    assert_eq!(edge_t.repairs("otlp", "index_0_real_entry"), 4);
    let n = edge_t.accepted("otlp");
    assert_eq!(
        (
            edge_t.sent("otlp"),
            gw_t.accepted("otlp"),
            gw_t.sent("otlp")
        ),
        (n, n, n)
    );
    // What the sink got means what the producers sent.
    let mut want: Vec<String> = files
        .iter()
        .map(|(file, _)| {
            let b = bytes::Bytes::from(profcol_model::testing::fixture(&format!(
                "otlp-revisions/{file}"
            )));
            let mut d = profcol_otlp::revisions::decode(&b).unwrap().data;
            profcol_model::repair::repair(&mut d);
            resolve(&d, Detail::Full).to_text()
        })
        .collect();
    want.sort();
    assert_eq!(resolved_in_any_order(&sink.received()), want);
}
