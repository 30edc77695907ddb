use prost::Message;
use std::collections::BTreeMap;

use profcol_model::proto::{any_value::Value, AnyValue, KeyValue, ProfilesData};
use profcol_model::{self as model, synth, Detail, ProfileBatch};
use profcol_pipeline::component::Progress;
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::runtime::create_exporter;

use super::config::{decode, Resolver, RoutingKey};
use super::ring::{hash_bytes, HashRing};
use super::routing::{self, SETTLED};
use super::KEY;
use super::*;
use crate::settled::Settled;

fn ring(endpoints: &[&str]) -> HashRing {
    HashRing::new(endpoints.iter().map(|e| e.to_string()))
}

fn keys(n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| hash_bytes(format!("key-{i}").as_bytes()))
        .collect()
}

#[test]
fn a_fourth_endpoint_takes_about_a_quarter_of_the_keys_from_the_others() {
    let three = ring(&["10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317"]);
    let four = ring(&[
        "10.0.0.1:4317",
        "10.0.0.2:4317",
        "10.0.0.3:4317",
        "10.0.0.4:4317",
    ]);
    let keys = keys(10_000);
    let mut moved = 0;
    for &k in &keys {
        let (before, after) = (three.endpoint_for(k), four.endpoint_for(k));
        if before != after {
            moved += 1;
            assert_eq!(
                after,
                Some("10.0.0.4:4317"),
                "a key moved between old endpoints"
            );
        }
    }
    let share = moved as f64 / keys.len() as f64;
    assert!(
        (0.17..=0.33).contains(&share),
        "{moved} of 10000 keys moved"
    );
}

#[test]
fn removing_an_endpoint_moves_only_its_keys() {
    let four = ring(&["a:1", "b:1", "c:1", "d:1"]);
    let three = ring(&["a:1", "c:1", "d:1"]);
    let mut moved = 0;
    for k in keys(10_000) {
        let (before, after) = (four.endpoint_for(k), three.endpoint_for(k));
        if before == Some("b:1") {
            moved += 1;
        } else {
            assert_eq!(before, after, "a key of a remaining endpoint moved");
        }
    }
    assert!(moved > 1500, "b owned {moved} keys");
}

#[test]
fn every_endpoint_gets_a_fair_share() {
    let endpoints: Vec<String> = (1..=5).map(|i| format!("backend-{i}:4317")).collect();
    let r = HashRing::new(endpoints.clone());
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for k in keys(50_000) {
        *count.entry(r.endpoint_for(k).unwrap()).or_default() += 1;
    }
    assert_eq!(count.len(), 5);
    for (e, n) in count {
        let share = n as f64 / 50_000.0;
        assert!((0.12..=0.28).contains(&share), "{e}: {share}");
    }
}

fn three_backends() -> HashRing {
    ring(&["10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317"])
}

#[test]
fn the_ring_depends_only_on_the_set_of_endpoints() {
    assert_eq!(
        ring(&["c:1", "a:1", "b:1", "a:1"]),
        ring(&["a:1", "b:1", "c:1"])
    );
    assert_eq!(HashRing::default().owner(42), None);
    let one = ring(&["only:4317"]);
    assert!(keys(100).iter().all(|&k| one.owner(k) == Some(0)));
    // The hash is part of the contract: collectors of other builds in
    // front of the same backends must agree on where a key goes.
    assert_eq!(hash_bytes(b""), 0xc381_7c01_6ba4_ff30);
    assert_eq!(hash_bytes(b"checkout"), 0x7203_ee38_592c_7f03);
    let three = three_backends();
    let placed: Vec<&str> = ["checkout", "cart", "search", "auth"]
        .iter()
        .map(|s| three.endpoint_for(hash_bytes(s.as_bytes())).unwrap())
        .collect();
    assert_eq!(
        placed,
        [
            "10.0.0.3:4317",
            "10.0.0.3:4317",
            "10.0.0.3:4317",
            "10.0.0.1:4317"
        ]
    );
}

// --- config ---

fn cfg(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Exporter, "loadbalancing", yaml).unwrap()
}

fn errors(yaml: &str) -> String {
    match create_exporter(&*factory(), &cfg(yaml)) {
        Ok(_) => panic!("{yaml} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn config_defaults_and_every_key() {
    let d = decode(&cfg("resolver: {static: {hostnames: [b:1, a]}}")).unwrap();
    assert_eq!(d.routing_key, RoutingKey::TraceId);
    assert_eq!(
        d.resolver,
        Resolver::Static(vec!["a:4317".into(), "b:1".into()])
    );
    assert_eq!(d.backend_timeout, None);
    assert!(!d.otlp.plaintext());

    let yaml = r#"
routing_key: profile_session
timeout: 3s
retry_on_failure: {enabled: true, initial_interval: 10ms}
sending_queue: {queue_size: 10}
protocol:
  otlp:
    timeout: 1s
    tls: {insecure: true}
    compression: zstd
    headers: {x-tenant: a}
    retry_on_failure: {enabled: false}
resolver:
  dns: {hostname: collectors.internal, port: "4318", interval: 2s, timeout: 500ms}
"#;
    let d = decode(
        &cfg(yaml)
            .split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS)
            .0,
    )
    .unwrap();
    assert_eq!(d.routing_key, RoutingKey::ProfileSession);
    assert_eq!(d.backend_timeout, Some(std::time::Duration::from_secs(1)));
    assert!(d.otlp.plaintext());
    assert_eq!(d.otlp.compression, crate::otlp::Compression::Zstd);
    assert_eq!(
        d.resolver,
        Resolver::Dns {
            hostname: "collectors.internal".into(),
            port: 4318,
            interval: std::time::Duration::from_secs(2),
            timeout: std::time::Duration::from_millis(500),
        }
    );
    let (_, settings) = create_exporter(&*factory(), &cfg(yaml)).unwrap();
    assert_eq!(settings.timeout, std::time::Duration::from_secs(3));
    assert_eq!(settings.sending_queue.queue_size, 10);
}

#[test]
fn config_errors_name_the_key() {
    let base = "exporters::loadbalancing";
    assert_eq!(
        errors("routing_key: service"),
        format!("{base}::resolver: exactly one of static, dns or k8s is required")
    );
    assert_eq!(
        errors("resolver: {static: {hostnames: [a]}, dns: {hostname: b}}"),
        format!("{base}::resolver: static and dns are all set; exactly one resolver is allowed")
    );
    assert_eq!(
        errors("resolver: {k8s: {service: lb-svc.ns, ports: [4317]}}"),
        format!(
            "{base}::resolver::k8s: k8s resolver is not built in; use dns with a headless Service"
        )
    );
    assert_eq!(
        errors("resolver: {aws_cloud_map: {namespace: cloudmap, service_name: otelcollectors, port: 4317}}"),
        format!(
            "{base}::resolver::aws_cloud_map: aws_cloud_map resolver is not built in; use static, or dns with the service's DNS name"
        )
    );
    let e = errors("resolver: {static: {hostnames: [a]}}\nrouting_key: spanID");
    assert!(e.starts_with(&format!("{base}::routing_key: ")), "{e}");
    assert!(
        e.contains("traceID") && e.contains("profile_session"),
        "{e}"
    );
    let e = errors("resolver: {static: {hostnames: [a], weights: [1]}}");
    assert!(
        e.starts_with(&format!("{base}::resolver::static: unknown field")),
        "{e}"
    );
    let e = errors("resolver: {dns: {hostname: ''}}");
    assert_eq!(e, format!("{base}::resolver::dns::hostname: is required"));
    let e = errors("resolver: {dns: {hostname: 'a:1', interval: 0s}}");
    assert!(
        e.contains("resolver::dns::hostname: \"a:1\" is not a host name"),
        "{e}"
    );
    assert!(
        e.contains("resolver::dns::interval: must be greater than 0"),
        "{e}"
    );
    let e = errors("resolver: {static: {hostnames: ['a:x', '::1', 'b', 'b:4317']}}");
    assert!(
        e.contains("hostnames::0: \"a:x\": invalid port \"x\""),
        "{e}"
    );
    assert!(
        e.contains("hostnames::1: \"::1\": write an IPv6 address in brackets"),
        "{e}"
    );
    assert!(e.contains("hostnames::3: b:4317 is listed twice"), "{e}");
    // The otlp keys are checked as the otlp exporter checks them, at
    // their path under protocol::otlp.
    let e = errors(
        "resolver: {static: {hostnames: [a]}}\nprotocol: {otlp: {compression: lz4, tls: {cert_file: x}, endpointt: y}}",
    );
    assert!(
        e.contains(&format!("{base}::protocol::otlp::compression: ")),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "{base}::protocol::otlp: unknown field \"endpointt\""
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "{base}::protocol::otlp::tls: cert_file and key_file must be set together"
        )),
        "{e}"
    );
    let e = errors("resolver: {static: {hostnames: [a]}}\nprotocol: {otlphttp: {}}");
    assert_eq!(
        e,
        format!("{base}::protocol::otlphttp: unknown protocol; only otlp is supported")
    );
    let e = errors(
        "resolver: {static: {hostnames: [a]}}\nprotocol: {otlp: {sending_queue: {enabled: true}}}",
    );
    assert!(
        e.starts_with(&format!(
            "{base}::protocol::otlp::sending_queue: per-backend queues are not supported"
        )),
        "{e}"
    );
}

#[test]
fn the_otlp_template_keeps_its_authenticator_reference() {
    let c = cfg("resolver: {static: {hostnames: [a]}}\nprotocol: {otlp: {auth: {authenticator: bearertokenauth}}}");
    let (exporter, _) = create_exporter(&*factory(), &c).unwrap();
    assert_eq!(
        exporter.authenticators(),
        vec![(
            "protocol::otlp::auth::authenticator".to_owned(),
            "bearertokenauth".to_owned()
        )]
    );
}

// --- routing and split ---

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

/// `resources` resources, each its own `service.name`, of synth's data;
/// with `gather`, every profile moved into the first resource's scope,
/// so that one resource holds profiles of several trace ids.
fn mixed(samples: usize, resources: usize, gather: bool) -> ProfilesData {
    let mut data = synth::Config {
        samples,
        stacks: 2_000,
        resources,
        ..synth::Config::default()
    }
    .build();
    for (i, r) in data.resource_profiles.iter_mut().enumerate() {
        let res = r.resource.get_or_insert_with(Default::default);
        res.attributes.retain(|a| a.key != "service.name");
        res.attributes.push(kv("service.name", &format!("svc-{i}")));
    }
    if gather {
        let moved: Vec<_> = data.resource_profiles[1..]
            .iter_mut()
            .flat_map(|r| r.scope_profiles.iter_mut())
            .flat_map(|s| std::mem::take(&mut s.profiles))
            .collect();
        data.resource_profiles[0].scope_profiles[0]
            .profiles
            .extend(moved);
    }
    model::validate(&data).unwrap();
    data
}

fn sorted_view(data: &[&ProfilesData]) -> Vec<String> {
    let mut v: Vec<String> = data
        .iter()
        .flat_map(|d| model::resolve(d, Detail::Full).profiles)
        .map(|p| p.to_string())
        .collect();
    v.sort();
    v
}

fn total_profiles(data: &ProfilesData) -> usize {
    model::profiles(&data.resource_profiles).count()
}

/// What a part sends, as its backend reads it.
fn sent(p: &routing::Part, data: &ProfilesData) -> ProfilesData {
    ProfilesData::decode(p.subset.encode(data).as_slice()).expect("a part decodes")
}

fn route(data: &ProfilesData, key: RoutingKey, ring: &HashRing) -> Vec<routing::Part> {
    let mut keys = Vec::new();
    routing::profile_keys(data, key, &mut keys);
    assert_eq!(keys.len(), total_profiles(data));
    let mut owner = Vec::new();
    let settled = Settled::none(KEY, keys.len());
    routing::assign(&keys, &settled, ring, &mut owner).unwrap();
    routing::split(data, &owner, ring.endpoints().len())
}

#[test]
fn the_parts_hold_every_sample_once_each_valid_on_its_own() {
    let ring = ring(&["a:1", "b:1", "c:1"]);
    for (key, gather) in [
        (RoutingKey::Service, false),
        (RoutingKey::Resource, false),
        (RoutingKey::TraceId, true),
        (RoutingKey::ProfileSession, false),
    ] {
        let data = mixed(20_000, 12, gather);
        let parts = route(&data, key, &ring);
        assert!(parts.len() > 1, "{key}: everything went to one backend");
        let total = ProfileBatch::new(data.clone()).sample_count();
        let mut seen = vec![false; total_profiles(&data)];
        let mut samples = 0;
        let sent: Vec<ProfilesData> = parts.iter().map(|p| sent(p, &data)).collect();
        for (p, d) in parts.iter().zip(&sent) {
            model::validate(d).unwrap_or_else(|e| panic!("{key}: {e}"));
            let n = ProfileBatch::new(d.clone()).sample_count();
            assert_eq!(n, p.subset.samples());
            samples += n;
            for &i in p.subset.profiles() {
                assert!(!std::mem::replace(&mut seen[i as usize], true));
            }
            // Self-contained: no more dictionary than it uses.
            assert!(model::dictionary::mark(d).all_live(), "{key}");
        }
        assert_eq!(samples, total, "{key}");
        assert!(seen.iter().all(|&s| s), "{key}");
        let parts_data: Vec<&ProfilesData> = sent.iter().collect();
        assert_eq!(sorted_view(&parts_data), sorted_view(&[&data]), "{key}");
    }
}

#[test]
fn a_service_lands_on_one_backend() {
    let ring = ring(&["a:1", "b:1", "c:1"]);
    let data = mixed(10_000, 12, false);
    let mut home: BTreeMap<String, u32> = BTreeMap::new();
    for p in route(&data, RoutingKey::Service, &ring) {
        for r in &sent(&p, &data).resource_profiles {
            let svc = r
                .resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .find(|a| a.key == "service.name")
                .unwrap();
            let name = format!("{:?}", svc.value);
            assert_eq!(*home.entry(name).or_insert(p.endpoint), p.endpoint);
        }
    }
    assert_eq!(home.len(), 12);
}

#[test]
fn trace_id_splits_a_resource_by_profile_and_falls_back_to_the_service() {
    let data = mixed(10_000, 8, true);
    let mut k = Vec::new();
    routing::profile_keys(&data, RoutingKey::TraceId, &mut k);
    assert_eq!(k.len(), 8);
    let distinct: std::collections::BTreeSet<_> = k.iter().collect();
    assert!(distinct.len() > 1, "every profile had the same trace id");
    // Without links, the key is the service's.
    let mut unlinked = data.clone();
    for p in model::profiles_mut(&mut unlinked.resource_profiles) {
        for s in &mut p.samples {
            s.link_index = 0;
        }
    }
    let (mut by_trace, mut by_service) = (Vec::new(), Vec::new());
    routing::profile_keys(&unlinked, RoutingKey::TraceId, &mut by_trace);
    routing::profile_keys(&unlinked, RoutingKey::Service, &mut by_service);
    assert_eq!(by_trace, by_service);
}

#[test]
fn profile_session_prefers_the_profiler_id_then_the_instance() {
    let mut data = mixed(1_000, 2, false);
    for r in &mut data.resource_profiles {
        let res = r.resource.as_mut().unwrap();
        res.attributes.retain(|a| a.key != "service.instance.id");
    }
    let key = |data: &ProfilesData| {
        let mut k = Vec::new();
        routing::profile_keys(data, RoutingKey::ProfileSession, &mut k);
        k
    };
    let service = {
        let mut k = Vec::new();
        routing::profile_keys(&data, RoutingKey::Service, &mut k);
        k
    };
    assert_eq!(key(&data), service);
    fn attrs(d: &mut ProfilesData) -> &mut Vec<KeyValue> {
        &mut d.resource_profiles[0].resource.as_mut().unwrap().attributes
    }
    attrs(&mut data).push(kv("service.instance.id", "pod-7"));
    assert_eq!(key(&data)[0], hash_bytes(b"pod-7"));
    attrs(&mut data).push(kv("sentry.profiler_id", "d8f8e8b7"));
    assert_eq!(key(&data)[0], hash_bytes(b"d8f8e8b7"));
    assert_eq!(key(&data)[1], service[1]);
}

#[test]
fn resource_key_ignores_attribute_order() {
    let mut data = mixed(1_000, 2, false);
    let mut a = Vec::new();
    routing::profile_keys(&data, RoutingKey::Resource, &mut a);
    data.resource_profiles[0]
        .resource
        .as_mut()
        .unwrap()
        .attributes
        .reverse();
    let mut b = Vec::new();
    routing::profile_keys(&data, RoutingKey::Resource, &mut b);
    assert_eq!(a, b);
    assert_ne!(a[0], a[1]);
}

#[test]
fn settled_profiles_are_not_routed_again() {
    let ring = ring(&["a:1", "b:1", "c:1"]);
    let data = mixed(10_000, 12, false);
    let parts = route(&data, RoutingKey::Service, &ring);
    // The first part was delivered; a retry (recorded, then read back)
    // routes only the others, on a ring without that backend.
    let mut settled = Settled::none(KEY, 12);
    for &p in parts[0].subset.profiles() {
        settled.set(p as usize);
    }
    let progress = Progress {
        delivered: parts[0].subset.samples(),
        rejected: 0,
        resume: Some(settled.to_resume()),
    };
    let back = Settled::from_progress(&progress, KEY, 12);
    assert_eq!(back, settled);
    assert_eq!(
        Settled::from_progress(&progress, KEY, 13),
        Settled::none(KEY, 13)
    );
    let gone = &ring.endpoints()[parts[0].endpoint as usize];
    let rest: Vec<String> = ring
        .endpoints()
        .iter()
        .filter(|e| *e != gone)
        .cloned()
        .collect();
    let smaller = HashRing::new(rest);
    let mut k = Vec::new();
    routing::profile_keys(&data, RoutingKey::Service, &mut k);
    let mut owner = Vec::new();
    routing::assign(&k, &back, &smaller, &mut owner).unwrap();
    let retried = routing::split(&data, &owner, 2);
    let mut all: Vec<u32> = retried
        .iter()
        .flat_map(|p| p.subset.profiles().to_vec())
        .collect();
    all.extend(parts[0].subset.profiles());
    all.sort();
    assert_eq!(all, (0..12).collect::<Vec<u32>>());
    for (i, &o) in owner.iter().enumerate() {
        assert_eq!(o == SETTLED, back.is_set(i));
    }
}

#[test]
fn a_refusal_for_good_fails_only_what_it_refused() {
    let progress = |delivered, rejected| Progress {
        delivered,
        rejected,
        resume: None,
    };
    // Nothing delivered: the whole request failed, with the backends' words.
    let e = finish(progress(0, 10), vec![], None, vec!["a:1: bad".into()]).unwrap_err();
    assert!(
        matches!(&e, ExportError::Permanent { message } if message == "a:1: bad"),
        "{e:?}"
    );
    // Part delivered: the rest counts as rejected.
    let ok = finish(progress(5, 10), vec![], None, vec!["a:1: bad".into()]).unwrap();
    assert_eq!(ok, ExportOutcome::rejected(10));
    // Any retryable failure retries, after the longest wait a peer asked.
    let e = finish(
        progress(5, 0),
        vec!["a:1: down".into(), "b:1: slow".into()],
        Some(std::time::Duration::from_secs(2)),
        vec!["c:1: bad".into()],
    )
    .unwrap_err();
    match e {
        ExportError::Retryable {
            message,
            retry_after,
        } => {
            assert_eq!(message, "a:1: down; b:1: slow");
            assert_eq!(retry_after, Some(std::time::Duration::from_secs(2)));
        }
        e => panic!("{e:?}"),
    }
}
