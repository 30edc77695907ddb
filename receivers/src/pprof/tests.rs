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
