//! The `loadbalancing` exporter in one process: requests of ten services
//! through the `otlp` receiver, routed by service to three OTLP sinks.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{send, until, Ports, Sink};
use profcol_exporters::loadbalancing::ring::{hash_bytes, HashRing};
use profcol_exporters::lookup::ScriptedLookup;
use profcol_model::proto::{
    any_value::Value, data_into_request, AnyValue, ExportProfilesServiceRequest, KeyValue,
};
use profcol_model::{profile_sample_count, synth};
use profcol_pipeline::runtime::{self, RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

const SERVICES: usize = 10;

/// A request holding every service, each its own resource.
fn request(seed: u64) -> ExportProfilesServiceRequest {
    let mut data = synth::Config {
        samples: 3_000,
        stacks: 500,
        resources: SERVICES,
        seed,
        ..synth::Config::default()
    }
    .build();
    for (i, r) in data.resource_profiles.iter_mut().enumerate() {
        let res = r.resource.get_or_insert_with(Default::default);
        res.attributes.retain(|a| a.key != "service.name");
        res.attributes.push(KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(service(i))),
            }),
            ..KeyValue::default()
        });
    }
    data_into_request(data)
}

fn service(i: usize) -> String {
    format!("svc-{i}")
}

/// Samples per service in `reqs`.
fn by_service(reqs: &[ExportProfilesServiceRequest]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for req in reqs {
        for r in &req.resource_profiles {
            let name = r
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .and_then(|a| a.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let n: u64 = r
                .scope_profiles
                .iter()
                .flat_map(|s| &s.profiles)
                .map(profile_sample_count)
                .sum();
            *m.entry(name).or_default() += n;
        }
    }
    m
}

/// The receiver listens on port 0 ([`Ports`]).
fn config(exporter: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
exporters:
  loadbalancing:
    routing_key: service
    protocol:
      otlp:
        tls: {{insecure: true}}
        compression: none
    retry_on_failure:
      initial_interval: 20ms
      max_interval: 100ms
      max_elapsed_time: 60s
{exporter}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [loadbalancing]
"#
    )
}

/// A collector whose `loadbalancing` exporter looks names up in `lookup`.
async fn start(yaml: &str, lookup: Arc<ScriptedLookup>) -> RunningService {
    let registry = profcol::components::registry().exporter(
        profcol_exporters::loadbalancing::factory_with_lookup(lookup),
    );
    let cfg = profcol_pipeline::config::load_str(yaml).unwrap();
    let graph = runtime::build(&cfg, &registry).unwrap();
    RunningService::start(graph, RuntimeOptions::default(), Arc::new(Telemetry::new()))
        .await
        .unwrap()
}

/// Every service reached exactly one sink, with all its samples.
fn assert_each_service_once(
    sinks: &[&Sink],
    sent: &[ExportProfilesServiceRequest],
) -> BTreeMap<String, SocketAddr> {
    let want = by_service(sent);
    assert_eq!(want.len(), SERVICES);
    let mut home = BTreeMap::new();
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for s in sinks {
        for (svc, n) in by_service(&s.received()) {
            if let Some(other) = home.insert(svc.clone(), s.addr) {
                panic!("{svc} reached both {other} and {}", s.addr);
            }
            *got.entry(svc).or_default() += n;
        }
    }
    assert_eq!(got, want, "samples per service");
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_lands_once_on_one_backend() {
    let sinks = [
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    ];
    let hostnames: Vec<String> = sinks.iter().map(|s| s.addr.to_string()).collect();
    let resolver = format!(
        "    resolver: {{static: {{hostnames: [{}]}}}}",
        hostnames.join(", ")
    );
    let svc = start(&config(&resolver), Arc::new(ScriptedLookup::new(vec![]))).await;
    let recv = svc.grpc_port();
    let telemetry = svc.telemetry().clone();
    let sent: Vec<_> = (1..=5).map(request).collect();
    send(recv, &sent).await;
    svc.shutdown().await;

    let home = assert_each_service_once(&sinks.iter().collect::<Vec<_>>(), &sent);
    let total: u64 = by_service(&sent).values().sum();
    assert_eq!(telemetry.sent("loadbalancing"), total);
    assert_eq!(telemetry.send_failed("loadbalancing"), 0);
    assert_eq!(telemetry.lb_resolutions("loadbalancing", true), 1);
    // The ring decides, as the unit tests have it.
    let ring = HashRing::new(sinks.iter().map(|s| s.addr.to_string()));
    for (svc, addr) in &home {
        assert_eq!(
            ring.endpoint_for(hash_bytes(svc.as_bytes())),
            Some(addr.to_string().as_str())
        );
    }
    // Each request was cut into one call per backend that owns a service.
    let used: std::collections::BTreeSet<_> = home.values().collect();
    let calls: usize = sinks.iter().map(Sink::calls).sum();
    assert_eq!(calls, 5 * used.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_backends_data_goes_to_its_new_owner_once_dns_drops_it() {
    let sinks = [
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    ];
    let addrs: Vec<SocketAddr> = sinks.iter().map(|s| s.addr).collect();
    // The backend that owns the most services dies before anything is sent.
    let ring = HashRing::new(addrs.iter().map(SocketAddr::to_string));
    let mut owned: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..SERVICES {
        let e = ring
            .endpoint_for(hash_bytes(service(i).as_bytes()))
            .unwrap();
        *owned.entry(e.to_owned()).or_default() += 1;
    }
    let (dead_addr, _) = owned.iter().max_by_key(|(_, n)| **n).unwrap();
    let dead = sinks
        .iter()
        .find(|s| &s.addr.to_string() == dead_addr)
        .unwrap();
    dead.stop();
    let alive: Vec<&Sink> = sinks.iter().filter(|s| s.addr != dead.addr).collect();

    let lookup = Arc::new(ScriptedLookup::new(addrs.clone()));
    let resolver = "    resolver:\n      dns: {hostname: backends.test, interval: 20ms}";
    let svc = start(&config(resolver), lookup.clone()).await;
    let recv = svc.grpc_port();
    let telemetry = svc.telemetry().clone();
    let sent: Vec<_> = (1..=4).map(request).collect();
    send(recv, &sent).await;

    // The live backends get their share at once; the dead one's is retried.
    let want = by_service(&sent);
    let dead_share: u64 = (0..SERVICES)
        .filter(|&i| ring.endpoint_for(hash_bytes(service(i).as_bytes())) == Some(dead_addr))
        .map(|i| want[&service(i)])
        .sum();
    let total: u64 = want.values().sum();
    until(
        Duration::from_secs(20),
        "the live backends got their share",
        || alive.iter().map(|s| s.samples()).sum::<u64>() == total - dead_share,
    )
    .await;
    until(
        Duration::from_secs(20),
        "the dead backend was retried",
        || telemetry.lb_backend_calls("loadbalancing", dead_addr, false) >= 2 * sent.len() as u64,
    )
    .await;

    // DNS stops answering the dead backend: its queued data is re-routed.
    let updates = telemetry.lb_backend_updates("loadbalancing");
    lookup.set(alive.iter().map(|s| s.addr).collect());
    until(
        Duration::from_secs(20),
        "the resolver saw the change",
        || telemetry.lb_backend_updates("loadbalancing") > updates,
    )
    .await;
    svc.shutdown().await;

    let home = assert_each_service_once(&alive, &sent);
    assert!(home.values().all(|a| a != &dead.addr));
    assert_eq!(telemetry.sent("loadbalancing"), total, "0 lost");
    assert_eq!(telemetry.send_failed("loadbalancing"), 0);
    // Services the live backends owned stayed where they were.
    for (svc, addr) in &home {
        let before = ring.endpoint_for(hash_bytes(svc.as_bytes())).unwrap();
        if before != dead_addr {
            assert_eq!(before, addr.to_string());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_lookup_keeps_the_last_backends() {
    let sink = Sink::start().await;
    let lookup = Arc::new(ScriptedLookup::new(vec![sink.addr]));
    let resolver = "    resolver:\n      dns: {hostname: backends.test, interval: 10ms}";
    let svc = start(&config(resolver), lookup.clone()).await;
    let recv = svc.grpc_port();
    let telemetry = svc.telemetry().clone();
    lookup.fail("no such host");
    until(Duration::from_secs(20), "a failed resolution", || {
        telemetry.lb_resolutions("loadbalancing", false) >= 2
    })
    .await;
    let sent = vec![request(9)];
    send(recv, &sent).await;
    svc.shutdown().await;
    assert_each_service_once(&[&sink], &sent);
    let text = telemetry.encode_text();
    assert!(
        text.contains(
            "otelcol_loadbalancer_num_backends{exporter=\"loadbalancing\",resolver=\"dns\"} 1"
        ),
        "{text}"
    );
}
