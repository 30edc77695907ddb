//! Three tiers of real processes on loopback, as a load-balanced gateway is
//! deployed: two sidecars (one receiving OTLP, one Sentry envelopes) send
//! to a `loadbalancing` tier, which routes by `service.name` to three
//! gateways, each exporting to its own sink. One gateway is killed with
//! SIGKILL mid-run and started again on its persistent queue: every request
//! the sidecars accepted arrives, none is lost, and every service arrives at
//! one gateway only. Delivery across a kill is at least once (as the
//! Collector's persistent queue): a request the killed gateway had stored
//! but not yet answered, or sent but not yet removed from its queue, is
//! sent again, so a few requests may arrive twice; the test bounds that.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{client, metric, profcol, replay_fixture, Ports, Running, Sink};
use profcol_model::proto::any_value::Value;
use profcol_model::proto::ExportProfilesServiceRequest;
use profcol_model::synth;

/// What every process has besides its pipeline: health_check and metrics
/// on port 0 ([`Ports`]), and `file_storage` in `storage`.
struct Base;

impl Base {
    fn yaml(storage: Option<&Path>) -> String {
        let (ext, list) = match storage {
            Some(dir) => (
                format!(
                    "  file_storage: {{directory: \"{}\", create_directory: true}}\n",
                    dir.display()
                ),
                "[health_check, file_storage]",
            ),
            None => (String::new(), "[health_check]"),
        };
        format!(
            "extensions:\n  health_check: {{endpoint: \"127.0.0.1:0\"}}\n{ext}service:\n  extensions: {list}\n  telemetry: {{metrics: {{address: \"127.0.0.1:0\"}}, logs: {{level: warn}}}}\n"
        )
    }
}

const RETRY: &str =
    "retry_on_failure: {initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 0s}";

fn write(dir: &Path, name: &str, yaml: String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

async fn start(cfg: &Path) -> Running {
    Running::ready(
        profcol()
            .arg("--config")
            .arg(cfg)
            .args(["--shutdown-timeout", "10s"]),
    )
    .await
}

/// The `service.name` of every resource in `requests`, with its samples.
fn samples_by_service(requests: &[ExportProfilesServiceRequest]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for r in requests {
        for rp in &r.resource_profiles {
            let name = rp
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let n: u64 = rp
                .scope_profiles
                .iter()
                .flat_map(|s| &s.profiles)
                .map(|p| p.samples.len() as u64)
                .sum();
            *out.entry(name).or_default() += n;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_to_balanced_gateways_lose_nothing_when_one_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = [
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    ];

    // Gateways: otlp in, otlp out through a persistent queue. Each starts
    // on port 0; the one killed comes back on the port it had (the tier
    // lists it), so its config is written again with that port.
    let mut gateway_ports = Vec::new();
    let mut gateways = Vec::new();
    let mut gateway_cfgs = Vec::new();
    for (i, sink) in sinks.iter().enumerate() {
        let storage = dir.path().join(format!("g{i}"));
        let yaml = |port: u16| {
            format!(
                "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{port}\"}}}}}}\nexporters:\n  otlp:\n    endpoint: 127.0.0.1:{}\n    tls: {{insecure: true}}\n    {RETRY}\n    sending_queue: {{storage: file_storage}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp]}}\n",
                sink.addr.port(),
                Base::yaml(Some(&storage)),
            )
        };
        let cfg = write(dir.path(), &format!("g{i}.yaml"), yaml(0));
        let gateway = start(&cfg).await;
        gateway_ports.push(gateway.grpc_port());
        write(dir.path(), &format!("g{i}.yaml"), yaml(gateway.grpc_port()));
        gateways.push(Some(gateway));
        gateway_cfgs.push(cfg);
    }

    // The load-balancing tier, with a persistent queue of its own.
    let hostnames: Vec<String> = gateway_ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let lb_cfg = write(
        dir.path(),
        "lb.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\"}}}}}}\nexporters:\n  loadbalancing:\n    routing_key: service\n    protocol: {{otlp: {{tls: {{insecure: true}}, timeout: 5s}}}}\n    resolver: {{static: {{hostnames: [{}]}}}}\n    {RETRY}\n    sending_queue: {{storage: file_storage}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [loadbalancing]}}\n",
            hostnames.join(", "),
            Base::yaml(Some(&dir.path().join("lb"))),
        ),
    );
    let lb = start(&lb_cfg).await;
    let lb_port = lb.grpc_port();

    // Sidecars: one OTLP, one Sentry, both sending to the tier.
    let to_lb = format!(
        "exporters:\n  otlp:\n    endpoint: 127.0.0.1:{lb_port}\n    tls: {{insecure: true}}\n    {RETRY}\n"
    );
    let a_cfg = write(
        dir.path(),
        "a.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\"}}}}}}\n{to_lb}{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp]}}\n",
            Base::yaml(None)
        ),
    );
    let b_cfg = write(
        dir.path(),
        "b.yaml",
        format!(
            "receivers:\n  sentry: {{endpoint: \"127.0.0.1:0\"}}\n{to_lb}{}  pipelines:\n    profiles: {{receivers: [sentry], exporters: [otlp]}}\n",
            Base::yaml(None)
        ),
    );
    let a = start(&a_cfg).await;
    let b = start(&b_cfg).await;
    let (otlp_port, sentry_port) = (a.grpc_port(), b.port("receivers::sentry"));

    // Load: 300 requests from 12 services, and Sentry envelopes, while the
    // second gateway is killed after a third and started again after two.
    let requests = synth::service_requests(300, 12, 40);
    let mut otlp = client(otlp_port).await;
    for (n, data) in requests.into_iter().enumerate() {
        if n == 100 {
            gateways[1].take().unwrap().signal("KILL");
        }
        if n == 200 {
            gateways[1] = Some(start(&gateway_cfgs[1]).await);
        }
        let mut req = ExportProfilesServiceRequest {
            resource_profiles: data.resource_profiles,
            dictionary: data.dictionary,
        };
        // Its number as the profile id, to tell requests apart at the sinks.
        for p in req
            .resource_profiles
            .iter_mut()
            .flat_map(|r| &mut r.scope_profiles)
            .flat_map(|s| &mut s.profiles)
        {
            p.profile_id = (n as u128 + 1).to_be_bytes().to_vec();
        }
        otlp.export(req).await.expect("the sidecar accepts");
        if n % 50 == 0 {
            replay_fixture(sentry_port, "sentry-python/manual/0001", None).await;
        }
    }

    let accepted = metric(
        a.metrics_port(),
        "otelcol_receiver_accepted_profile_samples_total",
    )
    .await
        + metric(
            b.metrics_port(),
            "otelcol_receiver_accepted_profile_samples_total",
        )
        .await;
    // Every numbered request, at least once; the Sentry chunks by count.
    let deadline = Instant::now() + Duration::from_secs(90);
    let seen = || {
        let mut times: BTreeMap<Vec<u8>, (u64, u64)> = BTreeMap::new();
        for s in &sinks {
            for r in s.received() {
                for p in r
                    .resource_profiles
                    .iter()
                    .flat_map(|r| &r.scope_profiles)
                    .flat_map(|s| &s.profiles)
                {
                    let e = times.entry(p.profile_id.clone()).or_default();
                    e.0 += 1;
                    e.1 = p.samples.len() as u64;
                }
            }
        }
        times
    };
    let arrived = || sinks.iter().map(Sink::samples).sum::<u64>();
    // The same Sentry recording is replayed, so its id repeats by design:
    // only numbered requests count as duplicates.
    let is_numbered = |id: &[u8]| id.len() == 16 && id[..12] == [0; 12];
    let duplicated = |times: &BTreeMap<Vec<u8>, (u64, u64)>| -> u64 {
        times
            .iter()
            .filter(|(id, _)| is_numbered(id))
            .map(|(_, &(n, samples))| (n - 1) * samples)
            .sum()
    };
    loop {
        let times = seen();
        if arrived() >= accepted + duplicated(&times) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Anything sent twice more would show up now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let times = seen();
    let numbered = times.keys().filter(|id| is_numbered(id)).count();
    assert_eq!(numbered, 300, "every OTLP request arrived");
    let twice: Vec<_> = times
        .iter()
        .filter(|(id, (n, _))| is_numbered(id) && *n > 1)
        .collect();
    eprintln!("{} requests arrived more than once: {twice:?}", twice.len());
    assert!(
        twice.len() <= 8,
        "duplicates bounded by what was in flight at the kill: {twice:?}"
    );
    assert_eq!(
        arrived(),
        accepted + duplicated(&times),
        "every accepted sample arrived; only the duplicates above twice"
    );

    // The kill was felt: the tier's calls to that gateway failed, then
    // went through again once it was back.
    let calls = |ok: bool| {
        format!(
            "otelcol_loadbalancer_backend_outcome_total{{exporter=\"loadbalancing\",endpoint=\"127.0.0.1:{}\",success=\"{ok}\"}}",
            gateway_ports[1]
        )
    };
    assert!(
        metric(lb.metrics_port(), &calls(false)).await > 0,
        "no failed call to the killed gateway"
    );
    assert!(metric(lb.metrics_port(), &calls(true)).await > 0);

    let per_sink: Vec<BTreeMap<String, u64>> = sinks
        .iter()
        .map(|s| samples_by_service(&s.received()))
        .collect();
    let mut seen = BTreeSet::new();
    for (i, services) in per_sink.iter().enumerate() {
        for name in services.keys() {
            assert!(
                seen.insert(name.clone()),
                "{name} reached gateway {i} and another"
            );
        }
    }
    assert_eq!(
        seen.len(),
        13,
        "12 OTLP services and the Sentry one: {seen:?}"
    );
    assert!(
        per_sink.iter().all(|s| !s.is_empty()),
        "every gateway got a share: {per_sink:?}"
    );

    for p in [a, b, lb].into_iter().chain(gateways.into_iter().flatten()) {
        p.signal("TERM");
        let (code, logs) = p.wait(Duration::from_secs(30)).await;
        assert!(code.success(), "{logs}");
    }
}

/// A gateway that takes smaller requests than a sidecar sends (its
/// `max_recv_msg_size_mib`, or its HTTP `max_request_body_size`): the
/// sidecar sends each too-large request again in parts, and every sample
/// arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_cuts_what_a_gateway_refuses_as_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start().await;
    let gw_cfg = write(
        dir.path(),
        "gateway.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\", max_recv_msg_size_mib: 1}}, http: {{endpoint: \"127.0.0.1:0\", max_request_body_size: 1048576}}}}}}\nexporters:\n  otlp: {{endpoint: \"{}\", tls: {{insecure: true}}}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp]}}\n",
            sink.addr,
            Base::yaml(None)
        ),
    );
    let gw = start(&gw_cfg).await;
    let (gw_grpc, gw_http) = (gw.grpc_port(), gw.http_port());
    let sc_cfg = write(
        dir.path(),
        "sidecar.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\"}}}}}}\nexporters:\n  otlp: {{endpoint: \"127.0.0.1:{gw_grpc}\", tls: {{insecure: true}}, compression: none, {RETRY}}}\n  otlphttp: {{endpoint: \"http://127.0.0.1:{gw_http}\", compression: none, {RETRY}}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp, otlphttp]}}\n",
            Base::yaml(None)
        ),
    );
    let sc = start(&sc_cfg).await;
    let sc_grpc = sc.grpc_port();

    let data = synth::Config {
        samples: 60_000,
        stacks: 5_000,
        resources: 12,
        ..synth::Config::default()
    }
    .build();
    let req = ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    };
    assert!(prost::Message::encoded_len(&req) > 1 << 20);
    client(sc_grpc).await.export(req).await.unwrap();
    let started = Instant::now();
    while sink.samples() < 120_000 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sink.samples(),
        120_000,
        "each exporter delivers all 60,000 once"
    );
    assert!(sink.received().len() > 2, "sent whole");
    let failed = metric(
        sc.metrics_port(),
        "otelcol_exporter_send_failed_profile_samples_total",
    )
    .await;
    assert_eq!(failed, 0);
}
