use std::collections::HashMap;

use profcol_model::proto::any_value::Value as A;
use profcol_pipeline::component::Verdict;
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::detect::{parse_env, Host};
use super::*;
use crate::transform::tests::{batch, resource_attrs, run};

#[derive(Default)]
struct FakeHost {
    env: HashMap<&'static str, &'static str>,
    files: HashMap<&'static str, &'static str>,
}

impl Host for FakeHost {
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).map(|s| s.to_string())
    }
    fn file(&self, path: &str) -> Option<String> {
        self.files.get(path).map(|s| s.to_string())
    }
}

fn host() -> FakeHost {
    FakeHost {
        env: HashMap::from([(
            "OTEL_RESOURCE_ATTRIBUTES",
            " host=from-env , team=a%2Cb+c,deployment.environment=prod ",
        )]),
        files: HashMap::from([
            ("/proc/sys/kernel/hostname", "box\n"),
            (
                "/etc/hosts",
                "127.0.0.1 localhost\n10.0.0.5 box.example.com box # me\n",
            ),
            ("/var/lib/dbus/machine-id", "0123456789abcdef\n"),
        ]),
    }
}

fn make(yaml: &str, h: &FakeHost) -> Result<Box<dyn Processor>, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "resourcedetection", yaml)
        .map_err(|e| e.to_string())?;
    create_with(&cfg, h).map_err(|e| e.to_string())
}

fn resources(yaml: &str, h: &FakeHost) -> Vec<Vec<String>> {
    let mut p = make(yaml, h).unwrap();
    let mut b = batch();
    assert_eq!(run(&mut *p, &mut b).0, Verdict::Keep);
    resource_attrs(&b)
}

#[test]
fn env_detector_decodes_and_overrides_by_default() {
    let r = resources("detectors: [env]", &host());
    assert_eq!(
        r[0],
        [
            "host=from-env",
            "service.name=svc",
            "team=a,b c",
            "deployment.environment=prod"
        ]
    );
    assert_eq!(r[0][1..], r[1][1..]);
    // override: false keeps the resource's own value.
    let r = resources("detectors: [env]\noverride: false", &host());
    assert_eq!(r[0][0], "host=h1");
    assert_eq!(r[1][0], "host=h2");
}

#[test]
fn system_detector_with_its_defaults_and_toggles() {
    let h = host();
    let os = std::env::consts::OS;
    let r = resources("detectors: [system]", &h);
    // hostname_sources default [dns, os]: /etc/hosts' canonical name.
    assert_eq!(
        r[0],
        [
            "host=h1".to_string(),
            "service.name=svc".into(),
            "host.name=box.example.com".into(),
            format!("os.type={}", if os == "macos" { "darwin" } else { os })
        ]
    );
    let r = resources(
        "detectors: [system]\nsystem:\n  hostname_sources: [os]\n  resource_attributes:\n    os.type: {enabled: false}\n    host.id: {enabled: true}\n    host.arch: {enabled: true}",
        &h,
    );
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    };
    assert_eq!(
        r[0][2..],
        [
            "host.name=box".to_string(),
            format!("host.arch={arch}"),
            "host.id=0123456789abcdef".into()
        ]
    );
}

#[test]
fn an_earlier_detector_wins() {
    let mut h = host();
    h.env
        .insert("OTEL_RESOURCE_ATTRIBUTES", "host.name=named-by-env");
    let r = resources("detectors: [env, system]", &h);
    assert!(
        r[0].contains(&"host.name=named-by-env".to_string()),
        "{r:?}"
    );
    let r = resources("detectors: [system, env]", &h);
    assert!(
        r[0].contains(&"host.name=box.example.com".to_string()),
        "{r:?}"
    );
}

#[test]
fn env_format_errors() {
    assert!(parse_env("a=1,b").unwrap_err().contains("invalid text"));
    assert!(parse_env("a=%zz")
        .unwrap_err()
        .contains("invalid resource format"));
    assert_eq!(parse_env("k=").unwrap()[0].key, "k");
    let mut h = host();
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "oops");
    let e = make("detectors: [system, env]", &h).err().unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: OTEL_RESOURCE_ATTRIBUTES: invalid resource format"),
        "{e}"
    );
}

#[test]
fn config_errors_at_their_key() {
    let h = host();
    for (yaml, want) in [
        ("detectors: [env, ec2]", "processors::resourcedetection::detectors::1: profcol has no ec2 detector"),
        ("detectors: [docker]", "processors::resourcedetection::detectors::0: profcol has no docker detector"),
        ("detectors: [nope]", "processors::resourcedetection::detectors::0: invalid detector key"),
        ("detectors: [system]\nsystem: {hostname_sources: [cname]}", "processors::resourcedetection::system::hostname_sources::0"),
        ("detectors: [system]\nsystem: {hostname_sources: [bogus]}", "hostname_sources contains invalid value"),
        ("detectors: [system]\nsystem: {resource_attributes: {host.ip: {enabled: true}}}", "system::resource_attributes::host.ip: profcol's system detector does not detect host.ip"),
        ("detectors: [env]\nrefresh_interval: 5m", "processors::resourcedetection::refresh_interval"),
        ("detectors: [env]\nendpoint: http://x", "unknown field \"endpoint\""),
    ] {
        let e = make(yaml, &h).err().unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains(want), "{yaml}\nwant {want}\ngot {e}");
    }
    // Sections of detectors not listed load unused; timeout is a duration.
    make("detectors: [env]\ntimeout: 2s\nec2: {tags: ['^tag$']}\nsystem: {resource_attributes: {host.ip: {enabled: false}}}", &h).unwrap();
}

/// On this machine: the kernel's host name, as `hostname` prints it.
#[cfg(target_os = "linux")]
#[test]
fn the_real_host_has_a_name() {
    let cfg = ComponentConfig::from_yaml(
        Kind::Processor,
        "resourcedetection",
        "detectors: [system]\nsystem: {hostname_sources: [os]}",
    )
    .unwrap();
    let mut p = create_with(&cfg, &super::detect::RealHost).unwrap();
    let mut b = batch();
    run(&mut *p, &mut b);
    let want = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let attrs = &b.data().resource_profiles[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    let got = profcol_ottl::value::map_get(attrs, "host.name").unwrap();
    assert_eq!(got.value, Some(A::StringValue(want.trim().to_string())));
}
