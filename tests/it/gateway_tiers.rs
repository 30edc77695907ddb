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

use common::{client, free_port, metric, profcol, replay_fixture, wait_healthy, Running, Sink};
use profcol_model::proto::any_value::Value;
use profcol_model::proto::ExportProfilesServiceRequest;
use profcol_model::synth;

/// What every process has besides its pipeline.
struct Base {
    health: u16,
    metrics: u16,
}

impl Base {
    fn new() -> Self {
        Self {
            health: free_port(),
            metrics: free_port(),
        }
    }

    fn yaml(&self, storage: Option<&Path>) -> String {
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
            "extensions:\n  health_check: {{endpoint: \"127.0.0.1:{}\"}}\n{ext}service:\n  extensions: {list}\n  telemetry: {{metrics: {{address: \"127.0.0.1:{}\"}}, logs: {{level: warn}}}}\n",
            self.health, self.metrics
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

async fn start(cfg: &Path, base: &Base) -> Running {
    let p = Running::spawn(
        profcol()
            .arg("--config")
            .arg(cfg)
            .args(["--shutdown-timeout", "10s"]),
    );
    wait_healthy(base.health).await;
    p
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

    // Gateways: otlp in, otlp out through a persistent queue.
    let gateway_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut gateways = Vec::new();
    let mut gateway_cfgs = Vec::new();
    for (i, sink) in sinks.iter().enumerate() {
        let base = Base::new();
        let storage = dir.path().join(format!("g{i}"));
        let cfg = write(
            dir.path(),
            &format!("g{i}.yaml"),
            format!(
                "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{}\"}}}}}}\nexporters:\n  otlp:\n    endpoint: 127.0.0.1:{}\n    tls: {{insecure: true}}\n    {RETRY}\n    sending_queue: {{storage: file_storage}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp]}}\n",
                gateway_ports[i],
                sink.addr.port(),
                base.yaml(Some(&storage)),
            ),
        );
        gateways.push(Some(start(&cfg, &base).await));
        gateway_cfgs.push((cfg, base));
    }

    // The load-balancing tier, with a persistent queue of its own.
    let lb_port = free_port();
    let lb_base = Base::new();
    let hostnames: Vec<String> = gateway_ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let lb_cfg = write(
        dir.path(),
        "lb.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{lb_port}\"}}}}}}\nexporters:\n  loadbalancing:\n    routing_key: service\n    protocol: {{otlp: {{tls: {{insecure: true}}, timeout: 5s}}}}\n    resolver: {{static: {{hostnames: [{}]}}}}\n    {RETRY}\n    sending_queue: {{storage: file_storage}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [loadbalancing]}}\n",
            hostnames.join(", "),
            lb_base.yaml(Some(&dir.path().join("lb"))),
        ),
    );
    let lb = start(&lb_cfg, &lb_base).await;

    // Sidecars: one OTLP, one Sentry, both sending to the tier.
    let (otlp_port, sentry_port) = (free_port(), free_port());
    let (a_base, b_base) = (Base::new(), Base::new());
    let to_lb = format!(
        "exporters:\n  otlp:\n    endpoint: 127.0.0.1:{lb_port}\n    tls: {{insecure: true}}\n    {RETRY}\n"
    );
    let a_cfg = write(
        dir.path(),
        "a.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{otlp_port}\"}}}}}}\n{to_lb}{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp]}}\n",
            a_base.yaml(None)
        ),
    );
    let b_cfg = write(
        dir.path(),
        "b.yaml",
        format!(
            "receivers:\n  sentry: {{endpoint: \"127.0.0.1:{sentry_port}\"}}\n{to_lb}{}  pipelines:\n    profiles: {{receivers: [sentry], exporters: [otlp]}}\n",
            b_base.yaml(None)
        ),
    );
    let a = start(&a_cfg, &a_base).await;
    let b = start(&b_cfg, &b_base).await;

    // Load: 300 requests from 12 services, and Sentry envelopes, while the
    // second gateway is killed after a third and started again after two.
    let requests = synth::service_requests(300, 12, 40);
    let mut otlp = client(otlp_port).await;
    for (n, data) in requests.into_iter().enumerate() {
        if n == 100 {
            gateways[1].take().unwrap().signal("KILL");
        }
        if n == 200 {
            let (cfg, base) = &gateway_cfgs[1];
            gateways[1] = Some(start(cfg, base).await);
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
        a_base.metrics,
        "otelcol_receiver_accepted_profile_samples_total",
    )
    .await
        + metric(
            b_base.metrics,
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
        metric(lb_base.metrics, &calls(false)).await > 0,
        "no failed call to the killed gateway"
    );
    assert!(metric(lb_base.metrics, &calls(true)).await > 0);

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
    let gw = Base::new();
    let (gw_grpc, gw_http) = (free_port(), free_port());
    let gw_cfg = write(
        dir.path(),
        "gateway.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{gw_grpc}\", max_recv_msg_size_mib: 1}}, http: {{endpoint: \"127.0.0.1:{gw_http}\", max_request_body_size: 1048576}}}}}}\nexporters:\n  otlp: {{endpoint: \"{}\", tls: {{insecure: true}}}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp]}}\n",
            sink.addr,
            gw.yaml(None)
        ),
    );
    let sc = Base::new();
    let sc_grpc = free_port();
    let sc_cfg = write(
        dir.path(),
        "sidecar.yaml",
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{sc_grpc}\"}}}}}}\nexporters:\n  otlp: {{endpoint: \"127.0.0.1:{gw_grpc}\", tls: {{insecure: true}}, compression: none, {RETRY}}}\n  otlphttp: {{endpoint: \"http://127.0.0.1:{gw_http}\", compression: none, {RETRY}}}\n{}  pipelines:\n    profiles: {{receivers: [otlp], exporters: [otlp, otlphttp]}}\n",
            sc.yaml(None)
        ),
    );
    let _gw = Running::start(&["--config".as_ref(), gw_cfg.as_os_str()]);
    wait_healthy(gw.health).await;
    let _sc = Running::start(&["--config".as_ref(), sc_cfg.as_os_str()]);
    wait_healthy(sc.health).await;

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
        sc.metrics,
        "otelcol_exporter_send_failed_profile_samples_total",
    )
    .await;
    assert_eq!(failed, 0);
}
