//! The `otlp` exporter's `round_robin`, the Collector's default
//! `balancer_name`: calls spread over every address the endpoint's host
//! name resolves to (a gateway behind a headless Service), an address
//! that does not answer skipped without losing a call.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{send, until, Ports, Sink};
use profcol_exporters::lookup::ScriptedLookup;
use profcol_model::proto::{data_into_request, ExportProfilesServiceRequest};
use profcol_model::{profile_sample_count, profiles, synth};
use profcol_pipeline::runtime::{self, RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

/// `extra` goes under the exporter (`balancer_name`).
fn config(extra: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
exporters:
  otlp:
    endpoint: gateway.test:4317
    tls: {{insecure: true}}
    compression: none
    retry_on_failure:
      initial_interval: 20ms
      max_interval: 100ms
      max_elapsed_time: 60s
{extra}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlp]
"#
    )
}

/// A collector whose `otlp` exporter looks names up in `lookup`.
async fn start(yaml: &str, lookup: Arc<ScriptedLookup>) -> RunningService {
    let registry = profcol::components::registry()
        .exporter(profcol_exporters::otlp::factory_with_lookup(lookup));
    let cfg = profcol_pipeline::config::load_str(yaml).unwrap();
    let graph = runtime::build(&cfg, &registry).unwrap();
    RunningService::start(graph, RuntimeOptions::default(), Arc::new(Telemetry::new()))
        .await
        .unwrap()
}

fn requests(n: u64) -> Vec<ExportProfilesServiceRequest> {
    (0..n)
        .map(|seed| {
            data_into_request(
                synth::Config {
                    samples: 200,
                    stacks: 50,
                    seed,
                    ..synth::Config::default()
                }
                .build(),
            )
        })
        .collect()
}

fn samples(reqs: &[ExportProfilesServiceRequest]) -> u64 {
    reqs.iter()
        .flat_map(|r| profiles(&r.resource_profiles))
        .map(profile_sample_count)
        .sum()
}

/// Three sinks, the addresses the name resolves to.
async fn three_sinks() -> ([Sink; 3], Arc<ScriptedLookup>) {
    let sinks = [
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    ];
    let lookup = Arc::new(ScriptedLookup::new(sinks.iter().map(|s| s.addr).collect()));
    (sinks, lookup)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_to_every_address_in_turn() {
    let (sinks, lookup) = three_sinks().await;
    // Unset, as in the Collector's default config, and spelled out.
    for extra in ["", "    balancer_name: round_robin"] {
        let before: Vec<usize> = sinks.iter().map(Sink::calls).collect();
        let svc = start(&config(extra), lookup.clone()).await;
        let telemetry = svc.telemetry().clone();
        let sent = requests(30);
        send(svc.grpc_port(), &sent).await;
        svc.shutdown().await;
        let got: u64 = sinks.iter().map(Sink::samples).sum();
        assert_eq!(got, samples(&sent) * if extra.is_empty() { 1 } else { 2 });
        let calls: Vec<usize> = sinks
            .iter()
            .zip(&before)
            .map(|(s, b)| s.calls() - b)
            .collect();
        assert_eq!(calls, [10, 10, 10], "{extra:?}: calls per address");
        assert_eq!(telemetry.send_failed("otlp"), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_that_does_not_answer_is_skipped_and_nothing_is_lost() {
    let (sinks, lookup) = three_sinks().await;
    sinks[1].stop();
    let svc = start(&config(""), lookup).await;
    let telemetry = svc.telemetry().clone();
    let sent = requests(30);
    send(svc.grpc_port(), &sent).await;
    until(
        Duration::from_secs(20),
        "every sample reached the live addresses",
        || sinks[0].samples() + sinks[2].samples() == samples(&sent),
    )
    .await;
    svc.shutdown().await;
    assert_eq!(sinks[1].calls(), 0);
    // Both live addresses take their turn; the dead one's calls go on to
    // the next at once, never failing.
    assert!(
        sinks[0].calls() >= 10 && sinks[2].calls() >= 10,
        "{} {}",
        sinks[0].calls(),
        sinks[2].calls()
    );
    assert_eq!(telemetry.sent("otlp"), samples(&sent));
    assert_eq!(telemetry.send_failed("otlp"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_does_not_resolve_yet_is_retried() {
    let sink = Sink::start().await;
    let lookup = Arc::new(ScriptedLookup::new(vec![]));
    lookup.fail("no such host");
    let svc = start(&config(""), lookup.clone()).await;
    let telemetry = svc.telemetry().clone();
    let sent = requests(3);
    send(svc.grpc_port(), &sent).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sink.samples(), 0);
    lookup.set(vec![sink.addr]);
    until(
        Duration::from_secs(20),
        "the retries found the address",
        || sink.samples() == samples(&sent),
    )
    .await;
    svc.shutdown().await;
    assert_eq!(telemetry.send_failed("otlp"), 0);
}

/// Each address is dialled with TLS verifying the host name (the
/// certificate is for `localhost`, the connection to an address of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verifies_the_host_name_on_every_address() {
    let pki = crate::otlp_http::Pki::new();
    let (cert, key) = pki.issue("gateway");
    let sink = Sink::start().await;
    let gateway = format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
        tls: {{cert_file: {cert}, key_file: {key}}}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink}
    tls: {{insecure: true}}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp]}}
"#,
        sink = sink.addr.port()
    );
    let gw = profcol::app::start_str(&gateway, RuntimeOptions::default())
        .await
        .unwrap();
    let lookup = Arc::new(ScriptedLookup::new(vec![std::net::SocketAddr::from((
        [127, 0, 0, 1],
        gw.grpc_port(),
    ))]));
    let sidecar = config(&format!(
        "    balancer_name: round_robin\n    tls: {{ca_file: {}}}",
        pki.path("ca.pem")
    ))
    .replace("    tls: {insecure: true}\n", "")
    .replace(
        "gateway.test:4317",
        &format!("localhost:{}", gw.grpc_port()),
    );
    let svc = start(&sidecar, lookup).await;
    let sent = requests(4);
    send(svc.grpc_port(), &sent).await;
    until(
        Duration::from_secs(20),
        "the gateway passed every sample on",
        || sink.samples() == samples(&sent),
    )
    .await;
    svc.shutdown().await;
    gw.shutdown().await;
}
