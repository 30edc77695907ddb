use std::collections::BTreeMap;
use std::time::Duration;

use profcol_pipeline::config::{ComponentConfig, Kind};

use super::config::ProfileKind;
use super::*;
use profcol_pipeline::config::scrape_targets::{
    parse_file, Target, TargetFiles, MAX_TARGETS_PER_FILE,
};

fn section(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Receiver, "pprof/app", yaml).unwrap()
}

fn create_errors(yaml: &str) -> String {
    match factory().create(&section(yaml)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted {yaml}"),
    }
}

fn resolve(yaml: &str) -> (PprofReceiverConfig, Vec<Target>) {
    let cfg = section(yaml);
    let c: PprofReceiverConfig = cfg.decode().unwrap();
    let t = c.validate(&cfg).unwrap();
    (c, t)
}

#[test]
fn defaults_scrape_every_profile_each_minute() {
    let (c, t) = resolve("targets: [localhost:6060]");
    assert_eq!(c.collection_interval.0, Duration::from_secs(60));
    assert_eq!(c.profiles, ProfileKind::ALL);
    assert_eq!(c.max_response_body_size, 64 << 20);
    // No timeout: the interval, one second kept for the answer.
    assert_eq!(c.cpu_seconds(), 59);
    assert_eq!(
        t[0].url(&c.path_prefix, &ProfileKind::Cpu.path(c.cpu_seconds())),
        "http://localhost:6060/debug/pprof/profile?seconds=59"
    );
    assert_eq!(
        t[0].url(&c.path_prefix, &ProfileKind::Allocs.path(1)),
        "http://localhost:6060/debug/pprof/allocs"
    );
}

#[test]
fn the_cpu_profile_is_as_long_as_the_timeout_allows() {
    let (c, _) = resolve("{targets: [a:1], collection_interval: 15s, timeout: 10s}");
    assert_eq!(c.cpu_seconds(), 9);
    let (c, _) = resolve("{targets: [a:1], collection_interval: 5s, timeout: 30s}");
    assert_eq!(c.cpu_seconds(), 4);
}

#[test]
fn a_target_url_keeps_its_scheme_and_path() {
    let t = Target::parse("https://[::1]:8443/internal/pprof/", &BTreeMap::new()).unwrap();
    assert_eq!(t.instance(), "[::1]:8443");
    assert_eq!(
        t.url("/debug/pprof", &ProfileKind::Heap.path(1)),
        "https://[::1]:8443/internal/pprof/heap"
    );
    let t = Target::parse("http://host", &BTreeMap::new()).unwrap();
    assert_eq!(t.port, 80);
}

/// Every mistake is reported at once, at its key path.
#[test]
fn errors_name_their_key_path() {
    let err = create_errors(
        "{targets: ['ftp://x:1', 'a:1/?x=1', ok:1], profiles: [cpu, heap, cpu], \
         collection_interval: 500ms, timeout: 1s, path_prefix: debug, \
         max_response_body_size: 0, max_concurrent_scrapes: 0, labels: {'1x': y}}",
    );
    for want in [
        "receivers::pprof/app::targets::0: target \"ftp://x:1\": the scheme must be http or https",
        "receivers::pprof/app::targets::1: target \"a:1/?x=1\": a query or fragment is not allowed",
        "receivers::pprof/app::profiles::2: cpu is listed twice",
        "receivers::pprof/app::collection_interval: must be at least 1s",
        "receivers::pprof/app::timeout: must be at least 2s",
        "receivers::pprof/app::path_prefix: must start with '/'",
        "receivers::pprof/app::max_response_body_size: must be greater than 0",
        "receivers::pprof/app::max_concurrent_scrapes: must be greater than 0",
        "receivers::pprof/app::labels::1x: label \"1x\"",
    ] {
        assert!(err.contains(want), "{want}\nnot in:\n{err}");
    }
    assert!(create_errors("{}").contains("receivers::pprof/app::targets: no targets"));
    assert!(create_errors("{targets: [a:1], profiles: [trace]}").contains("profiles"));
    assert!(create_errors("{targets: [a:1], interval: 1s}").contains("unknown field"));
}

/// The client keys are checked as the `otlphttp` exporter checks them:
/// a certificate needs its key, the files are read at start-up, a header
/// must be sendable.
#[test]
fn client_keys_are_checked_at_their_key_path() {
    let err = create_errors(
        "{targets: [a:1], tls: {cert_file: /x.pem}, headers: {'bad name': v, ok: \"a\\nb\"}}",
    );
    for want in [
        "receivers::pprof/app::tls: cert_file and key_file must be set together",
        "receivers::pprof/app::headers::bad name: invalid header name",
        "receivers::pprof/app::headers::ok: invalid header value",
    ] {
        assert!(err.contains(want), "{want}\nnot in:\n{err}");
    }
    let err = create_errors("{targets: [a:1], tls: {ca_file: /nonexistent/ca.pem}}");
    assert!(
        err.contains("receivers::pprof/app::tls::ca_file: cannot read /nonexistent/ca.pem"),
        "{err}"
    );
    let (c, _) = resolve("{targets: [a:1], auth: {authenticator: bearertokenauth}}");
    let r = factory()
        .create(&section(
            "{targets: [a:1], auth: {authenticator: bearertokenauth}}",
        ))
        .ok()
        .unwrap();
    assert_eq!(
        r.authenticators(),
        [(
            "auth::authenticator".to_owned(),
            "bearertokenauth".to_owned()
        )]
    );
    assert!(c.auth.is_some());
}

#[test]
fn a_target_file_is_yaml_or_json_with_labels() {
    let yaml =
        b"- targets: [a:1, 'https://b:2']\n  labels: {env: prod, __meta: x}\n- targets: [c:3]\n";
    let t = parse_file(yaml).unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(t[0].labels.get("env").map(String::as_str), Some("prod"));
    assert!(
        !t[0].labels.contains_key("__meta"),
        "Prometheus' own labels are left out"
    );
    assert_eq!(t[1].scheme, "https");
    assert!(t[2].labels.is_empty());
    let json = br#"[{"targets": ["a:1"], "labels": {"job": "api"}}]"#;
    assert_eq!(parse_file(json).unwrap()[0].labels["job"], "api");

    let err = parse_file(b"- targets: [a:1, 'gopher://x:1']").unwrap_err();
    assert!(err.starts_with("[0].targets[1]: target"), "{err}");
    let err = parse_file(b"- {targets: [a:1], lables: {}}").unwrap_err();
    assert!(err.contains("unknown field"), "{err}");
    let err = parse_file(b"targets: [a:1]").unwrap_err();
    assert!(err.contains("not a list"), "{err}");
    let many: String = (0..=MAX_TARGETS_PER_FILE)
        .map(|i| format!("h{i}:1,"))
        .collect();
    let err = parse_file(format!("- targets: [{many}]").as_bytes()).unwrap_err();
    assert!(err.contains("more than"), "{err}");
}

/// A file is read again when it changes; a broken version keeps the last
/// good targets, a removed file lists none, and each problem is told once.
#[test]
fn target_files_are_reloaded_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.yaml");
    let mut files = TargetFiles::new(&[path.display().to_string()]);
    let names = |f: &TargetFiles| f.targets().map(Target::instance).collect::<Vec<_>>();

    // Not there yet: told once.
    assert_eq!(files.refresh().len(), 1);
    assert!(files.refresh().is_empty());
    assert!(names(&files).is_empty());

    std::fs::write(&path, "- targets: [a:1]").unwrap();
    assert!(files.refresh().is_empty());
    assert_eq!(names(&files), ["a:1"]);

    // Another length: noticed whatever the clock's granularity.
    std::fs::write(&path, "- targets: [a:1, bb:2]").unwrap();
    assert!(files.refresh().is_empty());
    assert_eq!(names(&files), ["a:1", "bb:2"]);

    std::fs::write(&path, "- targets: [broken").unwrap();
    let errs = files.refresh();
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].message.contains("last good targets are kept"),
        "{errs:?}"
    );
    assert_eq!(names(&files), ["a:1", "bb:2"]);
    assert!(files.refresh().is_empty(), "told once per version");

    std::fs::remove_file(&path).unwrap();
    assert_eq!(files.refresh().len(), 1);
    assert!(names(&files).is_empty());
}

#[test]
fn the_resource_is_the_prometheus_receivers() {
    let labels = BTreeMap::from([
        ("job".to_owned(), "api".to_owned()),
        ("env".to_owned(), "prod".to_owned()),
    ]);
    let t = Target::parse("10.0.0.7:6060", &labels).unwrap();
    let d = super::scrape::describe(&t, "pprof/app");
    let attrs: Vec<String> = d
        .resource
        .iter()
        .map(|kv| {
            format!(
                "{}={:?}",
                kv.key,
                kv.value.as_ref().unwrap().value.as_ref().unwrap()
            )
        })
        .collect();
    assert_eq!(
        attrs,
        [
            "service.name=StringValue(\"api\")",
            "service.instance.id=StringValue(\"10.0.0.7:6060\")",
            "server.address=StringValue(\"10.0.0.7\")",
            "server.port=IntValue(6060)",
            "url.scheme=StringValue(\"http\")",
            "env=StringValue(\"prod\")",
        ]
    );
    let t = Target::parse("[::1]:1", &BTreeMap::new()).unwrap();
    let d = super::scrape::describe(&t, "pprof/app");
    assert_eq!(d.resource[0].key, "service.name");
    assert!(format!("{:?}", d.resource[0].value).contains("pprof/app"));
    assert!(format!("{:?}", d.resource[2].value).contains("\"::1\""));
}

mod deltas {
    use prost::Message;

    use super::super::delta::{Delta, Deltas};
    use super::ProfileKind;
    use crate::pyroscope::convert::{Converter, SampleTypes, Window, Work};
    use crate::pyroscope::labels::Described;
    use profcol_model::memory::MemoryBudget;
    use profcol_model::proto::ProfilesData;
    use profcol_pprof::proto as pp;

    /// A Go heap profile as `/debug/pprof/heap` serves it: `alloc_objects`
    /// (cumulative) and `inuse_objects` (a snapshot), one sample per stack
    /// `(addresses, alloc, inuse)`.
    fn heap(time: i64, samples: &[(&[u64], i64, i64)]) -> Vec<u8> {
        let strings = ["", "alloc_objects", "count", "inuse_objects", "f"];
        let mut p = pp::Profile {
            sample_type: vec![
                pp::ValueType { r#type: 1, unit: 2 },
                pp::ValueType { r#type: 3, unit: 2 },
            ],
            string_table: strings.iter().map(|s| s.to_string()).collect(),
            function: vec![pp::Function {
                id: 1,
                name: 4,
                ..Default::default()
            }],
            time_nanos: time,
            ..Default::default()
        };
        for (stack, alloc, inuse) in samples {
            let mut ids = Vec::new();
            for &addr in *stack {
                let id = match p.location.iter().find(|l| l.address == addr) {
                    Some(l) => l.id,
                    None => {
                        let id = p.location.len() as u64 + 1;
                        p.location.push(pp::Location {
                            id,
                            address: addr,
                            line: vec![pp::Line {
                                function_id: 1,
                                ..Default::default()
                            }],
                            ..Default::default()
                        });
                        id
                    }
                };
                ids.push(id);
            }
            p.sample.push(pp::Sample {
                location_id: ids,
                value: vec![*alloc, *inuse],
                ..Default::default()
            });
        }
        p.encode_to_vec()
    }

    fn convert(pprof: &[u8]) -> ProfilesData {
        let budget = MemoryBudget::new(1 << 30);
        let mut work = Work {
            memory: budget.force(0),
            limit: 1 << 30,
        };
        let mut c = Converter::new();
        let now = 1_800_000_000_000_000_000;
        let window = Window {
            from: now,
            until: now,
        };
        c.pprof(
            pprof,
            &Described::default(),
            &SampleTypes::default(),
            window,
            &mut work,
        )
        .unwrap();
        c.finish().unwrap()
    }

    /// Each profile's sample type and its samples' values, sorted.
    fn values(data: &ProfilesData) -> Vec<(String, Vec<i64>, u64, u64)> {
        let d = profcol_model::proto::dictionary_of(data);
        profcol_model::profiles(&data.resource_profiles)
            .map(|p| {
                let t = p.sample_type.as_ref().unwrap().type_strindex as usize;
                let mut v: Vec<i64> = p.samples.iter().flat_map(|s| s.values.clone()).collect();
                v.sort();
                (
                    d.string_table[t].clone(),
                    v,
                    p.time_unix_nano,
                    p.duration_nano,
                )
            })
            .collect()
    }

    const S: u64 = 1_000_000_000;
    const T0: i64 = 1_800_000_000_000_000_000;

    #[test]
    fn cumulative_samples_are_sent_as_their_change_since_the_last_scrape() {
        let deltas = Deltas::new(MemoryBudget::new(1 << 30));
        let target = "10.0.0.1:6060";
        let (a, b, c): (&[u64], &[u64], &[u64]) = (&[0x10, 0x20], &[0x30, 0x20], &[0x40]);
        // First scrape: only the snapshot goes; the counts are the baseline.
        let mut first = convert(&heap(T0, &[(a, 100, 5), (b, 10, 1)]));
        assert_eq!(
            deltas.apply(target, ProfileKind::Heap, &mut first),
            Delta::Baseline
        );
        assert_eq!(
            values(&first),
            [("inuse_objects".into(), vec![1, 5], T0 as u64, 0)]
        );
        // Then the change: `a` grew by 50, `b` did not (left out), `c` is new.
        let t1 = T0 + 15 * S as i64;
        let mut second = convert(&heap(t1, &[(a, 150, 7), (b, 10, 1), (c, 3, 3)]));
        assert_eq!(
            deltas.apply(target, ProfileKind::Heap, &mut second),
            Delta::Change
        );
        assert_eq!(
            values(&second),
            [
                ("alloc_objects".into(), vec![3, 50], T0 as u64, 15 * S),
                ("inuse_objects".into(), vec![1, 3, 7], t1 as u64, 0),
            ]
        );
        // Another target, or another profile of the same, has its own
        // baseline.
        let mut other = convert(&heap(t1, &[(a, 150, 7)]));
        assert_eq!(
            deltas.apply("10.0.0.2:6060", ProfileKind::Heap, &mut other),
            Delta::Baseline
        );
        let mut allocs = convert(&heap(t1, &[(a, 150, 7)]));
        assert_eq!(
            deltas.apply(target, ProfileKind::Allocs, &mut allocs),
            Delta::Baseline
        );
        // Nothing allocated since: no alloc profile at all.
        let t2 = t1 + 15 * S as i64;
        let mut idle = convert(&heap(t2, &[(a, 150, 7), (b, 10, 1), (c, 3, 3)]));
        assert_eq!(
            deltas.apply(target, ProfileKind::Heap, &mut idle),
            Delta::Change
        );
        assert_eq!(
            values(&idle),
            [("inuse_objects".into(), vec![1, 3, 7], t2 as u64, 0)]
        );
        // The process restarted: counts went down, sent whole.
        let t3 = t2 + 15 * S as i64;
        let mut restarted = convert(&heap(t3, &[(a, 20, 2)]));
        assert_eq!(
            deltas.apply(target, ProfileKind::Heap, &mut restarted),
            Delta::Restarted
        );
        assert_eq!(
            values(&restarted),
            [
                ("alloc_objects".into(), vec![20], t3 as u64, 0),
                ("inuse_objects".into(), vec![2], t3 as u64, 0),
            ]
        );
        // Snapshots are never touched.
        let mut goroutines = convert(&heap(t3, &[(a, 20, 2)]));
        assert_eq!(
            deltas.apply(target, ProfileKind::Goroutine, &mut goroutines),
            Delta::None
        );
        assert_eq!(values(&goroutines).len(), 2);
    }

    #[test]
    fn baselines_are_held_in_the_memory_budget_and_go_with_their_target() {
        let budget = MemoryBudget::new(1 << 30);
        let deltas = Deltas::new(budget.clone());
        let stacks: Vec<Vec<u64>> = (1..=1000u64).map(|i| vec![i, i + 5000]).collect();
        let samples: Vec<(&[u64], i64, i64)> = stacks.iter().map(|s| (&s[..], 1, 1)).collect();
        let mut data = convert(&heap(T0, &samples));
        deltas.apply("a:1", ProfileKind::Heap, &mut data);
        let held = budget.used();
        assert!(held >= 1000 * 16, "{held}");
        deltas.retain(&std::collections::HashSet::from(["b:1".to_owned()]));
        assert_eq!(budget.used(), 0);
        // A budget without room: no baseline is kept, every scrape is a first.
        let tight = MemoryBudget::new(1024);
        let deltas = Deltas::new(tight.clone());
        for _ in 0..2 {
            let mut data = convert(&heap(T0, &samples));
            assert_eq!(
                deltas.apply("a:1", ProfileKind::Heap, &mut data),
                Delta::Baseline
            );
        }
        assert_eq!(tight.used(), 0);
    }
}
