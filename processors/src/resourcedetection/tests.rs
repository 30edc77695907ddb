use std::collections::HashMap;

use profcol_model::proto::any_value::Value as A;
use profcol_pipeline::component::Verdict;
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::detect::{parse_env, Host};
use super::*;
use crate::transform::tests::{batch, edited_as_bytes, resource_attrs, run};

#[derive(Default, Clone)]
pub(super) struct FakeHost {
    pub(super) env: HashMap<&'static str, &'static str>,
    pub(super) files: HashMap<&'static str, &'static str>,
    pub(super) resolver: Option<FakeResolver>,
}

/// Name lookups from tables: what is not in them fails.
#[derive(Default, Clone)]
pub(super) struct FakeResolver {
    cnames: HashMap<&'static str, &'static str>,
    addresses: HashMap<&'static str, Vec<std::net::IpAddr>>,
    reverse: HashMap<std::net::IpAddr, &'static str>,
}

impl super::detect::Resolver for FakeResolver {
    fn cname(&self, name: &str) -> Result<String, String> {
        self.cnames
            .get(name)
            .map(|c| c.to_string())
            .ok_or_else(|| format!("lookup {name}: no such host"))
    }
    fn addresses(&self, name: &str) -> Result<Vec<std::net::IpAddr>, String> {
        self.addresses
            .get(name)
            .cloned()
            .ok_or_else(|| format!("lookup {name}: no such host"))
    }
    fn reverse(&self, ip: std::net::IpAddr) -> Result<String, String> {
        self.reverse
            .get(&ip)
            .map(|n| n.to_string())
            .ok_or_else(|| format!("lookup {ip}: no such host"))
    }
}

impl Host for FakeHost {
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).map(|s| s.to_string())
    }
    fn file(&self, path: &str) -> Option<String> {
        self.files.get(path).map(|s| s.to_string())
    }
    fn link_local(&self) -> String {
        // Port 9 (discard) refuses on a test machine.
        self.env
            .get("TEST_LINK_LOCAL")
            .unwrap_or(&"127.0.0.1:9")
            .to_string()
    }
    fn scaleway_metadata(&self) -> [String; 2] {
        let v6 = self.env.get("TEST_LINK_LOCAL_V6").unwrap_or(&"127.0.0.1:9");
        [self.link_local(), v6.to_string()]
    }
    fn metadata_dns_name(&self) -> Option<String> {
        None
    }
    fn read_file(&self, path: &str) -> Result<Option<String>, String> {
        match self.files.get(path) {
            Some(&UNREADABLE) => Err(format!("open {path}: permission denied")),
            other => Ok(other.map(|s| s.to_string())),
        }
    }
    fn kube_api(&self) -> Option<String> {
        self.env.get("TEST_KUBE_API").map(|s| s.to_string())
    }
    fn metadata_service(&self, _usual: &str) -> String {
        format!("http://{}", self.link_local())
    }
    fn resolver(&self) -> Option<&dyn super::detect::Resolver> {
        self.resolver.as_ref().map(|r| r as _)
    }
}

/// A file's content that [`FakeHost`] cannot read.
pub(super) const UNREADABLE: &str = "\0unreadable";

pub(super) fn host() -> FakeHost {
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
        resolver: None,
    }
}

/// The processor of `yaml` on `h`. Retries wait exactly 1s, 2s, ... (no
/// jitter) unless `yaml` sets `retry`, so tests can count attempts.
pub(super) fn make(yaml: &str, h: &FakeHost) -> Result<Box<dyn Processor>, String> {
    let steady = "retry: {randomization_factor: 0}";
    let yaml = match yaml.contains("retry:") || yaml.trim().starts_with('{') {
        true => yaml.to_string(),
        false => format!("{steady}\n{yaml}"),
    };
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "resourcedetection", &yaml)
        .map_err(|e| e.to_string())?;
    create_with(&cfg, h).map_err(|e| e.to_string())
}

pub(super) fn resources(yaml: &str, h: &FakeHost) -> Vec<Vec<String>> {
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

/// `cname`, `lookup` and `dns` past the hosts file ask the system
/// resolver, as the Collector's do: the CNAME, the first address that
/// reverses, the trailing dot dropped; a source that fails gives way to
/// the next.
#[test]
fn system_hostname_sources_ask_the_resolver() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let mut h = host();
    h.files.insert("/etc/hosts", "127.0.0.1 localhost\n");
    h.resolver = Some(FakeResolver {
        cnames: HashMap::from([("box", "box.corp.example.")]),
        addresses: HashMap::from([("box", vec![ip("10.0.0.5"), ip("10.0.0.6")])]),
        reverse: HashMap::from([(ip("10.0.0.6"), "box-6.rev.example.")]),
    });
    let name = |yaml: &str, h: &FakeHost| {
        let r = resources(yaml, h);
        r[0].iter().find(|a| a.starts_with("host.name=")).cloned()
    };
    let sources =
        |list: &str| format!("detectors: [system]\nsystem: {{hostname_sources: [{list}]}}");
    let want = |n: &str| Some(format!("host.name={n}"));
    assert_eq!(name(&sources("cname"), &h), want("box.corp.example"));
    assert_eq!(name(&sources("lookup"), &h), want("box-6.rev.example"));
    // dns: not in the hosts file, so the CNAME; without one, the reverse.
    assert_eq!(name(&sources("dns"), &h), want("box.corp.example"));
    assert_eq!(name("detectors: [system]", &h), want("box.corp.example"));
    let mut no_cname = h.clone();
    no_cname.resolver.as_mut().unwrap().cnames.clear();
    assert_eq!(name(&sources("dns"), &no_cname), want("box-6.rev.example"));
    assert_eq!(name(&sources("cname, os"), &no_cname), want("box"));
    // Nothing reverses: lookup fails, and with no other source, no name.
    no_cname.resolver.as_mut().unwrap().reverse.clear();
    assert_eq!(name(&sources("lookup, os"), &no_cname), want("box"));
    assert_eq!(name(&sources("lookup"), &no_cname), None);
}

/// The C library's resolver finds `localhost` on any machine, at a
/// loopback address.
#[test]
fn the_system_resolver_finds_localhost() {
    use super::detect::{Resolver, SystemResolver};
    let found = SystemResolver.addresses("localhost").unwrap();
    assert!(
        !found.is_empty() && found.iter().all(|ip| ip.is_loopback()),
        "{found:?}"
    );
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
    // As the Collector: a detector failing is logged and the others' go
    // on; with fail_on_missing_metadata it fails the start.
    let r = resources("detectors: [system, env]", &h);
    assert_eq!(
        r[0][2..],
        [
            "host.name=box.example.com".to_string(),
            format!("os.type={}", super::detect::os_type())
        ]
    );
    let e = make(
        "detectors: [system, env]\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: OTEL_RESOURCE_ATTRIBUTES: invalid resource format"),
        "{e}"
    );
}

#[test]
fn config_errors_at_their_key() {
    let h = host();
    for (yaml, want) in [
        ("detectors: [env, eks]", "processors::resourcedetection::detectors::1: profcol has no eks detector"),
        ("detectors: [ec2]\nec2: {tags: ['^team$']}", "processors::resourcedetection::ec2::tags: profcol reads instance tags from the instance metadata only"),
        ("detectors: [ec2]\nec2: {tags: ['(' ], tags_from_imds: true}", "processors::resourcedetection::ec2::tags::0: regex parse error"),
        ("detectors: [ec2]\nec2: {resource_attributes: {host.arch: {enabled: true}}}", "ec2::resource_attributes::host.arch: unknown attribute"),
        ("detectors: [k8s_api]\nk8s_api: {auth_type: none}", "processors::resourcedetection::k8s_api::auth_type: \"none\" is not supported"),
        ("detectors: [kubeadm]\nkubeadm: {resource_attributes: {k8s.node.name: {enabled: true}}}", "kubeadm::resource_attributes::k8s.node.name: unknown attribute"),
        ("detectors: [openshift]\nopenshift: {tls: {cert_file: /c.pem}}", "processors::resourcedetection::openshift::tls::cert_file: not supported by profcol's openshift detector"),
        ("detectors: [consul]\nconsul: {resource_attributes: {host.ip: {enabled: true}}}", "consul::resource_attributes::host.ip: unknown attribute"),
        ("detectors: [consul]\nconsul: {scheme: https}", "unknown field \"scheme\""),
        ("detectors: [elastic_beanstalk]\nelasticbeanstalk: {resource_attributes: {host.id: {enabled: true}}}", "elasticbeanstalk::resource_attributes::host.id: unknown attribute"),
        ("detectors: [azureappservice]\nazureappservice: {resource_attributes: {host.id: {enabled: true}}}", "azureappservice::resource_attributes::host.id: unknown attribute"),
        ("detectors: [azurecontainerapps]\nazurecontainerapps: {resource_attributes: {service.instance.id: {enabled: true}}}", "azurecontainerapps::resource_attributes::service.instance.id: unknown attribute"),
        ("detectors: [dynatrace]\ndynatrace: {}", "unknown field \"dynatrace\""),
        ("detectors: [elasticbeanstalk]", "processors::resourcedetection::detectors::0: invalid detector key: \"elasticbeanstalk\""),
        ("detectors: [k8snode]\nk8snode: {auth_type: tls}", "processors::resourcedetection::k8snode::auth_type: \"tls\" is not supported"),
        ("detectors: [k8snode]\nk8snode: {resource_attributes: {k8s.node.ip: {enabled: true}}}", "k8snode::resource_attributes::k8s.node.ip: unknown attribute"),
        ("detectors: [docker]\ndocker: {resource_attributes: {host.ip: {enabled: true}}}", "docker::resource_attributes::host.ip: unknown attribute"),
        ("detectors: [docker]\ndocker: {endpoint: x}", "unknown field \"endpoint\""),
        ("detectors: [nope]", "processors::resourcedetection::detectors::0: invalid detector key"),
        ("detectors: [system]\nsystem: {hostname_sources: [bogus]}", "hostname_sources contains invalid value"),
        ("detectors: [system]\nsystem: {resource_attributes: {host.ip: {enabled: true}}}", "system::resource_attributes::host.ip: profcol's system detector does not detect host.ip"),
        ("detectors: [env]\nrefresh_interval: 5m", "processors::resourcedetection::refresh_interval"),
        ("detectors: [env]\nendpoint: http://x", "unknown field \"endpoint\""),
    ] {
        let e = make(yaml, &h).err().unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains(want), "{yaml}\nwant {want}\ngot {e}");
    }
    // ecs and aks are detectors; eks is still refused.
    let e = make("detectors: [ecs, aks, eks]", &h).err().unwrap();
    assert!(
        e.contains("detectors::2: profcol has no eks detector")
            && !e.contains("detectors::0")
            && !e.contains("detectors::1"),
        "{e}"
    );
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

#[test]
fn k8snode_needs_its_node_name_variable() {
    let e = make("detectors: [k8snode]", &host()).err().unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::0: failed creating detector: node name can't be found: set K8S_NODE_NAME"),
        "{e}"
    );
    let e = make(
        "detectors: [k8snode]\nk8snode: {node_from_env_var: MY_NODE}",
        &host(),
    )
    .err()
    .unwrap();
    assert!(e.contains("set MY_NODE"), "{e}");
}

/// A Docker daemon on a unix socket: answers each connection's request
/// with the next of `answers` (status, body); returns the request lines.
fn fake_docker(
    path: &std::path::Path,
    answers: Vec<(u16, &'static str)>,
) -> std::thread::JoinHandle<Vec<String>> {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        for (status, body) in answers {
            let (mut conn, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            seen.push(line.trim_end().to_string());
            // The rest of the head.
            loop {
                let mut l = String::new();
                if reader.read_line(&mut l).unwrap() == 0 || l == "\r\n" {
                    break;
                }
            }
            // Chunked, as the daemon answers.
            let resp = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            );
            conn.write_all(resp.as_bytes()).unwrap();
        }
        seen
    })
}

const INFO: &str = r#"{"ID":"x","Name":"docker-host-7","OSType":"linux","KernelVersion":"6.1"}"#;

fn docker_host(dir: &tempfile::TempDir) -> FakeHost {
    let sock = dir.path().join("docker.sock");
    let mut h = host();
    h.env.insert(
        "DOCKER_HOST",
        Box::leak(format!("unix://{}", sock.display()).into_boxed_str()),
    );
    h
}

#[test]
fn docker_reads_the_daemons_info() {
    let dir = tempfile::tempdir().unwrap();
    let h = docker_host(&dir);
    let server = fake_docker(
        &dir.path().join("docker.sock"),
        vec![(200, INFO), (200, INFO)],
    );
    // Earlier detectors win: docker's host.name under env's none, over system's.
    let r = resources("detectors: [docker, system]", &h);
    assert_eq!(
        r[0][2..],
        ["host.name=docker-host-7", "os.type=linux"],
        "{r:?}"
    );
    let r = resources(
        "detectors: [docker]\ndocker: {resource_attributes: {os.type: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][2..], ["host.name=docker-host-7"]);
    assert_eq!(server.join().unwrap(), ["GET /info HTTP/1.1"; 2]);
}

/// The `retry` block (the README's example loads): off, one attempt;
/// `max_elapsed_time` retries past `timeout`; neither bound is refused.
#[test]
fn retry_settings_shape_the_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let h = docker_host(&dir);
    let sock = dir.path().join("docker.sock");
    // Off: the failure stands.
    let server = fake_docker(&sock, vec![(500, r#"{"message":"busy"}"#)]);
    let r = resources("detectors: [docker]\nretry: {enabled: false}", &h);
    assert!(r[0].iter().all(|a| !a.starts_with("os.type")), "{r:?}");
    assert_eq!(server.join().unwrap().len(), 1);
    // timeout 1s alone allows no retry after a 1s wait; a 4s budget does.
    std::fs::remove_file(&sock).unwrap();
    let server = fake_docker(&sock, vec![(500, r#"{"message":"busy"}"#), (200, INFO)]);
    let r = resources(
        "detectors: [docker]\ntimeout: 1s\nretry: {randomization_factor: 0, max_elapsed_time: 4s}",
        &h,
    );
    assert_eq!(r[0][2..], ["host.name=docker-host-7", "os.type=linux"]);
    assert_eq!(server.join().unwrap().len(), 2);
    // The Collector's README example.
    assert!(make(
        "detectors: [env]\ntimeout: 5s\nretry:\n  enabled: true\n  initial_interval: 1s\n  max_interval: 10s\n  max_elapsed_time: 2m",
        &h
    )
    .is_ok());
    let e = make("detectors: [env]\ntimeout: 0s\nretry: {}", &h)
        .err()
        .unwrap();
    assert!(
        e.contains("processors::resourcedetection::retry::enabled: retry.enabled requires either timeout > 0 or retry.max_elapsed_time > 0"),
        "{e}"
    );
    let e = make("detectors: [env]\nretry: {multiplier: 0.5}", &h)
        .err()
        .unwrap();
    assert!(e.contains("retry::multiplier"), "{e}");
}

#[test]
fn docker_retries_within_the_timeout_then_goes_on_or_fails() {
    let dir = tempfile::tempdir().unwrap();
    let h = docker_host(&dir);
    // A daemon failing once, then answering: the retry (after 1s) finds it.
    let server = fake_docker(
        &dir.path().join("docker.sock"),
        vec![(500, r#"{"message":"busy"}"#), (200, INFO)],
    );
    let r = resources("detectors: [docker]\ntimeout: 5s", &h);
    assert_eq!(r[0][2..], ["host.name=docker-host-7", "os.type=linux"]);
    assert_eq!(server.join().unwrap().len(), 2);
    // No daemon: within the timeout, nothing detected, the start goes on...
    std::fs::remove_file(dir.path().join("docker.sock")).unwrap();
    let r = {
        // Gives up at its timeout: a detector that did not would never
        // come back.
        let (h, (done, back)) = (h.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            let _ = done.send(resources("detectors: [docker, env]\ntimeout: 1500ms", &h));
        });
        back.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the docker detector did not give up at its timeout")
    };
    assert!(r[0].iter().all(|a| !a.starts_with("os.type")), "{r:?}");
    assert!(r[0].contains(&"team=a,b c".to_string()), "{r:?}");
    // ...unless fail_on_missing_metadata.
    let e = make(
        "detectors: [env, docker]\ntimeout: 1500ms\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: failed getting OS hostname from the Docker daemon"),
        "{e}"
    );
    // A DOCKER_HOST profcol cannot reach fails the start.
    let mut h = host();
    h.env.insert("DOCKER_HOST", "ssh://me@box");
    let e = make("detectors: [docker]", &h).err().unwrap();
    assert!(
        e.contains("failed creating detector: DOCKER_HOST \"ssh://me@box\""),
        "{e}"
    );
}

#[test]
fn a_batch_held_as_received_is_edited_without_decoding_its_samples() {
    let mut p = make("detectors: [env]", &host()).unwrap();
    for attrs in resource_attrs(&edited_as_bytes(&mut *p, Default::default())) {
        assert!(attrs.contains(&"team=a,b c".to_string()), "{attrs:?}");
    }
}

/// A fake HTTP/1.1 service on a TCP port (`host:port`): each request's
/// method, path and header lines (lowercase) go to `answer`, which gives
/// the status, extra header lines (each ending in `\r\n`), the body, and
/// the line sent back through the returned channel for the request.
pub(super) fn fake_http<F>(answer: F) -> (String, std::sync::mpsc::Receiver<String>)
where
    F: Fn(&str, &str, &[String]) -> (u16, &'static str, String, String) + Send + 'static,
{
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = listener.local_addr().unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            let mut headers = Vec::new();
            loop {
                let mut l = String::new();
                if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                    break;
                }
                headers.push(l.to_ascii_lowercase().trim_end().to_string());
            }
            // A request's body is read (and dropped).
            let length = headers.iter().find_map(|h| {
                h.strip_prefix("content-length:")
                    .and_then(|n| n.trim().parse::<u64>().ok())
            });
            if let Some(n) = length {
                let _ = std::io::copy(&mut (&mut reader).take(n), &mut std::io::sink());
            }
            let mut parts = line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let (status, extra, body, seen) = answer(method, path, &headers);
            let _ = tx.send(seen);
            let resp = format!(
                "HTTP/1.1 {status} X\r\n{extra}Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(resp.as_bytes());
        }
    });
    (at, rx)
}

/// A host whose instance metadata service (`link_local`) listens at `at`
/// (`host:port`), and whose `OTEL_RESOURCE_ATTRIBUTES` is `team=a`.
pub(super) fn metadata_host(at: &str) -> FakeHost {
    let mut h = host();
    h.env.clear();
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    h.env.insert(
        "TEST_LINK_LOCAL",
        Box::leak(at.to_string().into_boxed_str()),
    );
    h
}

/// A metadata service answering `GET path` (any other request 404) with
/// `status` and `body`; the requests it saw (`METHOD path`) come back
/// through the channel.
pub(super) fn metadata_service(
    path: &'static str,
    status: u16,
    body: &'static str,
) -> (FakeHost, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, p, _| {
        let (status, body) = match (method, p) {
            ("GET", p) if p == path => (status, body),
            _ => (404, ""),
        };
        (status, "", body.to_string(), format!("{method} {p}"))
    });
    (metadata_host(&at), seen)
}

/// A fake instance metadata service: answers every request with
/// `answer(method, path, token header)`; the requests it saw are sent
/// back through the returned channel.
fn fake_imds(
    answer: fn(&str, &str, Option<&str>) -> (u16, String),
) -> (String, std::sync::mpsc::Receiver<String>) {
    let (at, rx) = fake_http(move |method, path, headers| {
        let token = headers.iter().find_map(|h| {
            h.strip_prefix("x-aws-ec2-metadata-token:")
                .map(|v| v.trim().to_string())
        });
        let ttl = headers
            .iter()
            .any(|h| h.starts_with("x-aws-ec2-metadata-token-ttl-seconds: 21600"));
        let meta = headers.iter().any(|h| h.starts_with("metadata: true"));
        let (status, body) = answer(method, path, token.as_deref());
        let note = match (ttl, meta) {
            (true, _) => " (ttl)",
            (_, true) => " (metadata)",
            _ => "",
        };
        (status, "", body, format!("{method} {path}{note}"))
    });
    (format!("http://{at}"), rx)
}

const IDENTITY: &str = r#"{"accountId":"123456789012","architecture":"x86_64","availabilityZone":"eu-west-1b","imageId":"ami-0abc","instanceId":"i-0123","instanceType":"m7g.large","privateIp":"10.0.0.5","region":"eu-west-1"}"#;

/// The metadata of one instance, its three tags included.
fn instance(path: &str) -> (u16, String) {
    match path {
        "/latest/meta-data/instance-id" => (200, "i-0123".into()),
        "/latest/dynamic/instance-identity/document" => (200, IDENTITY.into()),
        "/latest/meta-data/hostname" => (200, "ip-10-0-0-5.eu-west-1.compute.internal".into()),
        "/latest/meta-data/tags/instance" => (200, "team\nName\ncost center".into()),
        "/latest/meta-data/tags/instance/team" => (200, "profiling".into()),
        "/latest/meta-data/tags/instance/cost%20center" => (200, "42".into()),
        _ => (404, String::new()),
    }
}

fn imds_host(at: &str) -> FakeHost {
    let mut h = host();
    h.env.clear();
    h.env.insert(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        Box::leak(at.to_string().into_boxed_str()),
    );
    h
}

#[test]
fn ec2_reads_the_instance_metadata_with_a_session_token() {
    // IMDSv2 only: every read needs the token the PUT gave.
    let (at, seen) = fake_imds(|method, path, token| match (method, path, token) {
        ("PUT", "/latest/api/token", None) => (200, "tok-1".into()),
        ("GET", _, Some("tok-1")) => instance(path),
        _ => (401, String::new()),
    });
    let h = imds_host(&at);
    let r = resources("detectors: [ec2]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=aws",
            "cloud.platform=aws_ec2",
            "cloud.region=eu-west-1",
            "cloud.account.id=123456789012",
            "cloud.availability_zone=eu-west-1b",
            "host.id=i-0123",
            "host.image.id=ami-0abc",
            "host.type=m7g.large",
            "host.name=ip-10-0-0-5.eu-west-1.compute.internal",
        ],
        "{r:?}"
    );
    let asked: Vec<String> = seen.try_iter().collect();
    assert_eq!(asked[0], "PUT /latest/api/token (ttl)");
    assert_eq!(asked.len(), 4, "{asked:?}");
    // Tags matched by the regular expressions, a key with a space escaped;
    // an attribute turned off.
    let r = resources(
        "detectors: [ec2]\nec2: {tags_from_imds: true, tags: ['^team$', '^cost'], \
         resource_attributes: {host.name: {enabled: false}, cloud.platform: {enabled: false}}}",
        &h,
    );
    let attrs = &r[0][2..];
    assert!(
        attrs.contains(&"ec2.tag.team=profiling".to_string()),
        "{attrs:?}"
    );
    assert!(
        attrs.contains(&"ec2.tag.cost center=42".to_string()),
        "{attrs:?}"
    );
    assert!(!attrs.iter().any(|a| a.starts_with("ec2.tag.Name")
        || a.starts_with("host.name")
        || a.starts_with("cloud.platform")));
    assert_eq!(attrs.len(), 9, "{attrs:?}");
}

#[test]
fn ec2_falls_back_to_imdsv1_where_there_is_no_token_api() {
    let (at, seen) = fake_imds(|method, path, token| match (method, token) {
        ("PUT", _) => (405, String::new()),
        ("GET", None) => instance(path),
        _ => (400, String::new()),
    });
    let r = resources("detectors: [ec2]", &imds_host(&at));
    assert!(r[0].contains(&"host.id=i-0123".to_string()), "{r:?}");
    assert_eq!(seen.try_iter().count(), 4);
}

#[test]
fn ec2_off_ec2_finds_nothing_unless_metadata_must_be_there() {
    // A port nobody listens on: no instance id, no attributes, no failure.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    let mut h = imds_host(&at);
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    let r = resources("detectors: [ec2, env]\nec2: {max_attempts: 1}", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [ec2, env]\nec2: {max_attempts: 2, fail_on_missing_metadata: true}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::0: failed to detect: EC2 metadata unavailable"),
        "{e}"
    );
    // Turned off by the SDK's variable: not even asked.
    h.env.insert("AWS_EC2_METADATA_DISABLED", "true");
    let r = resources("detectors: [ec2, env]", &h);
    assert_eq!(r[0][2..], ["team=a"]);
    // The endpoint must be plain http.
    h.env.insert("AWS_EC2_METADATA_DISABLED", "false");
    h.env
        .insert("AWS_EC2_METADATA_SERVICE_ENDPOINT", "https://imds");
    let e = make("detectors: [ec2]", &h).err().unwrap();
    assert!(
        e.contains("failed creating detector: AWS_EC2_METADATA_SERVICE_ENDPOINT"),
        "{e}"
    );
}

const COMPUTE: &str = r#"{"location":"westeurope","name":"vm-1","vmId":"02aab8a4-74ef-476e-8182-f6d2ba4166a6","vmSize":"Standard_D2s_v3","subscriptionId":"8d10da13-8125-4ba9-a717-bf7490507b3d","resourceGroupName":"rg-1","vmScaleSetName":"","zone":"2","osProfile":{"computerName":"vm-1-host","adminUsername":"x"},"tagsList":[{"name":"team","value":"prof"},{"name":"env","value":"prod"}]}"#;

#[test]
fn azure_reads_the_vm_metadata() {
    let (at, seen) = fake_imds(|method, path, _| match (method, path) {
        ("GET", "/metadata/instance/compute?api-version=2020-09-01&format=json") => {
            (200, COMPUTE.into())
        }
        _ => (404, String::new()),
    });
    let mut h = host();
    h.env.clear();
    h.env.insert(
        "TEST_LINK_LOCAL",
        Box::leak(
            at.trim_start_matches("http://")
                .to_string()
                .into_boxed_str(),
        ),
    );
    let r = resources("detectors: [azure]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=azure",
            "cloud.platform=azure.vm",
            "host.name=vm-1-host",
            "cloud.region=westeurope",
            "host.id=02aab8a4-74ef-476e-8182-f6d2ba4166a6",
            "cloud.account.id=8d10da13-8125-4ba9-a717-bf7490507b3d",
            "azure.vm.name=vm-1",
            "azure.vm.size=Standard_D2s_v3",
            "azure.resourcegroup.name=rg-1",
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /metadata/instance/compute?api-version=2020-09-01&format=json (metadata)"]
    );
    // The zone when enabled, tags by name, an attribute turned off.
    let r = resources(
        "detectors: [azure]\nazure: {tags: ['^team$'], resource_attributes: \
         {cloud.availability_zone: {enabled: true}, azure.vm.size: {enabled: false}}}",
        &h,
    );
    let attrs = &r[0][2..];
    assert!(
        attrs.contains(&"cloud.availability_zone=2".to_string()),
        "{attrs:?}"
    );
    assert!(
        attrs.contains(&"azure.tag.team=prof".to_string()),
        "{attrs:?}"
    );
    assert!(!attrs
        .iter()
        .any(|a| a.starts_with("azure.tag.env") || a.starts_with("azure.vm.size")));
}

#[test]
fn azure_off_azure_finds_nothing_unless_metadata_must_be_there() {
    let mut h = host();
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    let r = resources("detectors: [azure, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [env, azure]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: azure metadata unavailable: failed to query Azure IMDS"),
        "{e}"
    );
    let e = make("detectors: [azure]\nazure: {tags: ['(']}", &h)
        .err()
        .unwrap();
    assert!(
        e.contains("processors::resourcedetection::azure::tags::0"),
        "{e}"
    );
}

/// A fake Azure IMDS whose compute document names `resource_group`, and a
/// pod's host (`KUBERNETES_SERVICE_HOST` set) that asks it.
fn aks_host(resource_group: &'static str) -> (FakeHost, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let meta = headers.iter().any(|h| h == "metadata: true");
        let body = COMPUTE.replace("\"rg-1\"", &format!("{resource_group:?}"));
        let (status, body) = match path {
            "/metadata/instance/compute?api-version=2020-09-01&format=json" if meta => (200, body),
            _ => (400, String::new()),
        };
        let note = if meta { " (metadata)" } else { "" };
        (status, "", body, format!("{method} {path}{note}"))
    });
    let mut h = host();
    h.env.clear();
    h.env.insert("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    h.env
        .insert("TEST_LINK_LOCAL", Box::leak(at.into_boxed_str()));
    (h, seen)
}

#[test]
fn aks_reads_the_vm_metadata_on_kubernetes() {
    let (h, seen) = aks_host("MC_rg-shop_shop-prod_westeurope");
    // k8s.cluster.name is off by default, as in the Collector.
    let r = resources("detectors: [aks]", &h);
    assert_eq!(
        r[0][2..],
        ["cloud.provider=azure", "cloud.platform=azure.aks"],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /metadata/instance/compute?api-version=2020-09-01&format=json (metadata)"]
    );
    let r = resources(
        "detectors: [aks]\naks: {resource_attributes: {k8s.cluster.name: {enabled: true}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=azure",
            "cloud.platform=azure.aks",
            "k8s.cluster.name=shop-prod"
        ],
        "{r:?}"
    );
    let r = resources(
        "detectors: [aks]\naks: {resource_attributes: {k8s.cluster.name: {enabled: true}, \
         cloud.platform: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        ["cloud.provider=azure", "k8s.cluster.name=shop-prod"],
        "{r:?}"
    );
    // A custom infrastructure resource group: its name as the cluster's.
    let (h, _) = aks_host("shop_infra");
    let r = resources(
        "detectors: [aks]\naks: {resource_attributes: {k8s.cluster.name: {enabled: true}}}",
        &h,
    );
    assert_eq!(r[0][4], "k8s.cluster.name=shop_infra", "{r:?}");
    let e = make(
        "detectors: [aks]\naks: {resource_attributes: {k8s.cluster.uid: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::aks::resource_attributes::k8s.cluster.uid: unknown attribute \"k8s.cluster.uid\" of the aks detector"),
        "{e}"
    );
}

#[test]
fn aks_off_kubernetes_asks_nothing() {
    let (mut h, seen) = aks_host("MC_rg_cluster_westeurope");
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    for k8s in [None, Some("")] {
        match k8s {
            Some(v) => h.env.insert("KUBERNETES_SERVICE_HOST", v),
            None => h.env.remove("KUBERNETES_SERVICE_HOST"),
        };
        // Even with fail_on_missing_metadata, as the Collector's.
        let r = resources("detectors: [aks, env]\nfail_on_missing_metadata: true", &h);
        assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    }
    assert_eq!(seen.try_iter().count(), 0);
}

#[test]
fn aks_off_azure_finds_nothing_unless_metadata_must_be_there() {
    let mut h = host();
    h.env.insert("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    // Nothing listening at the metadata address (port 9).
    let r = resources("detectors: [aks, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [env, aks]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: aks metadata unavailable: failed to query Azure IMDS"),
        "{e}"
    );
    // Another cloud's metadata service (EKS, GKE) refusing the request.
    let (at, _) = fake_http(|_, _, _| (404, "", "Not Found".into(), String::new()));
    h.env
        .insert("TEST_LINK_LOCAL", Box::leak(at.into_boxed_str()));
    let r = resources("detectors: [aks]", &h);
    assert_eq!(r[0].len(), 2, "{r:?}");
    let e = make(
        "detectors: [aks]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("aks metadata unavailable: Azure IMDS replied with status code: 404"),
        "{e}"
    );
}

/// The Collector's `TestParseClusterName`.
#[test]
fn aks_cluster_name_from_the_resource_group() {
    for (group, want) in [
        ("MC_myResourceGroup_AKSCluster_eastus", "AKSCluster"),
        (
            "MC_Resource_Group_AKSCluster_eastus",
            "MC_Resource_Group_AKSCluster_eastus",
        ),
        (
            "MC_myResourceGroup_AKS_Cluster_eastus",
            "MC_myResourceGroup_AKS_Cluster_eastus",
        ),
        ("infra-group_name", "infra-group_name"),
        ("dev_infra_group_name", "dev_infra_group_name"),
        ("MC_group_name_location", "name"),
        // `mc` in any case.
        ("mc_rg_cluster_westeurope", "cluster"),
        ("Mc_rg_cluster_westeurope", "cluster"),
        ("", ""),
    ] {
        assert_eq!(super::aks::cluster_name(group), want, "{group}");
    }
}

#[test]
fn lambda_reads_the_runtimes_variables() {
    let mut h = host();
    h.env.extend([
        ("AWS_LAMBDA_FUNCTION_NAME", "fn"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/fn"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/30/[$LATEST]abc"),
    ]);
    let r = resources("detectors: [lambda]", &h);
    assert_eq!(
        r[0][2..9],
        [
            "cloud.provider=aws",
            "cloud.platform=aws_lambda",
            "cloud.region=eu-west-1",
            "faas.name=fn",
            "faas.version=$LATEST",
            "faas.instance=2026/11/30/[$LATEST]abc",
            "faas.max_memory=128",
        ],
        "{r:?}"
    );
    // The log names are lists of one string.
    for (at, key, value) in [
        (9, "aws.log.group.names", "/aws/lambda/fn"),
        (10, "aws.log.stream.names", "2026/11/30/[$LATEST]abc"),
    ] {
        let (k, v) = r[0][at].split_once('=').unwrap();
        assert_eq!(k, key);
        assert!(
            v.starts_with(
                "Some(ArrayValue(ArrayValue { values: [AnyValue { value: Some(StringValue("
            ) && v.contains(&format!("{value:?}"))
                && v.matches("StringValue").count() == 1,
            "{v}"
        );
    }
    let r = resources(
        "detectors: [lambda]\nlambda: {resource_attributes: {faas.max_memory: {enabled: false}, aws.log.group.names: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0].len(), 2 + 7, "{r:?}");
    assert!(!r[0].iter().any(|a| a.starts_with("faas.max_memory")));
    // Only the name is needed; without it, nothing (or a failure).
    h.env.retain(|k, _| !k.starts_with("AWS_"));
    h.env.insert("AWS_LAMBDA_FUNCTION_NAME", "fn");
    let r = resources("detectors: [lambda]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=aws",
            "cloud.platform=aws_lambda",
            "faas.name=fn"
        ]
    );
    h.env.remove("AWS_LAMBDA_FUNCTION_NAME");
    assert_eq!(resources("detectors: [lambda]", &h)[0].len(), 2);
    let e = make("detectors: [lambda]\nfail_on_missing_metadata: true", &h)
        .err()
        .unwrap();
    assert!(
        e.contains("detectors::0: failed to detect: lambda metadata unavailable: AWS_LAMBDA_FUNCTION_NAME env var not set"),
        "{e}"
    );
    let e = make(
        "detectors: [lambda]\nlambda: {resource_attributes: {faas.id: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("lambda::resource_attributes::faas.id: unknown attribute"),
        "{e}"
    );
}

#[test]
fn heroku_reads_the_dyno_metadata() {
    let mut h = host();
    h.env.extend([
        ("HEROKU_DYNO_ID", "dyno-1"),
        ("HEROKU_APP_ID", "app-1"),
        ("HEROKU_APP_NAME", "shop"),
        ("HEROKU_RELEASE_CREATED_AT", "2026-11-30T10:00:00Z"),
        ("HEROKU_RELEASE_VERSION", "v42"),
        ("HEROKU_SLUG_COMMIT", "abc123"),
    ]);
    let r = resources("detectors: [heroku]", &h);
    assert_eq!(
        r[0][1..],
        [
            "service.name=shop",
            "service.instance.id=dyno-1",
            "heroku.app.id=app-1",
            "cloud.provider=heroku",
            "heroku.release.creation_timestamp=2026-11-30T10:00:00Z",
            "service.version=v42",
            "heroku.release.commit=abc123",
        ],
        "{r:?}"
    );
    // Without the app id, no provider; without both ids, what is there
    // (as the Collector), or a failure.
    h.env.remove("HEROKU_APP_ID");
    let r = resources("detectors: [heroku]", &h);
    assert!(
        !r[0].iter().any(|a| a.starts_with("cloud.provider")),
        "{r:?}"
    );
    h.env.remove("HEROKU_DYNO_ID");
    let r = resources("detectors: [heroku]", &h);
    assert!(r[0].contains(&"service.version=v42".to_string()), "{r:?}");
    let e = make("detectors: [heroku]\nfail_on_missing_metadata: true", &h)
        .err()
        .unwrap();
    assert!(
        e.contains(
            "heroku metadata unavailable: HEROKU_DYNO_ID and HEROKU_APP_ID env vars not set"
        ),
        "{e}"
    );
}

#[test]
fn elastic_beanstalk_reads_the_xray_configuration_file() {
    let mut h = host();
    h.env.clear();
    h.files.insert(
        super::elasticbeanstalk::PATH,
        r#"{"deployment_id":23,"environment_name":"BETA","version_label":"env-version-1234","noise":1}"#,
    );
    // The Collector's attributes with its default feature gates.
    let r = resources("detectors: [elastic_beanstalk]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.platform=aws_elastic_beanstalk",
            "cloud.provider=aws",
            "deployment.environment=BETA",
            "service.instance.id=23",
            "service.version=env-version-1234",
        ],
        "{r:?}"
    );
    let r = resources(
        "detectors: [elastic_beanstalk]\nelasticbeanstalk: {resource_attributes: \
         {deployment.environment: {enabled: false}, service.version: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "cloud.platform=aws_elastic_beanstalk",
            "cloud.provider=aws",
            "service.instance.id=23",
        ],
        "{r:?}"
    );
    // A file it cannot decode or read: an error, not a panic.
    for bad in [r#"{"deployment_id":"23"}"#, "", "not json", UNREADABLE] {
        h.files.insert(super::elasticbeanstalk::PATH, bad);
        let e = make(
            "detectors: [elastic_beanstalk]\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap_or_else(|| panic!("{bad:?} loaded"));
        assert!(
            e.contains("detectors::0: failed to detect:") && e.contains("environment.conf"),
            "{e}"
        );
        // Without fail_on_missing_metadata: logged, nothing found.
        assert_eq!(resources("detectors: [elastic_beanstalk]", &h)[0].len(), 2);
    }
    // Off Elastic Beanstalk.
    h.files.remove(super::elasticbeanstalk::PATH);
    assert_eq!(resources("detectors: [elastic_beanstalk]", &h)[0].len(), 2);
    let e = make(
        "detectors: [elastic_beanstalk]\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("detectors::0: failed to detect: elastic_beanstalk metadata unavailable"),
        "{e}"
    );
}

#[test]
fn dynatrace_reads_the_host_metadata_properties() {
    let mut h = host();
    h.env.clear();
    // The Collector's test file, and a repeated key, a value with '='
    // and spaces, an empty value.
    h.files.insert(
        super::dynatrace::PATH,
        "\ndt.entity.host=my-host-from-properties\nhost.name=my-host-from-properties\n\
         dt.entity.host_group=my-host-group-from-properties\ndt.foo=bar\n\
         dt.smartscape.host=my-smartscaped-host\ninvalid-entry\n\
         dt.entity.host= HOST-1=x \r\nhost.name=\n",
    );
    let r = resources("detectors: [dynatrace]", &h);
    assert_eq!(
        r[0][2..],
        [
            "dt.entity.host=HOST-1=x",
            "host.name=my-host-from-properties",
            "dt.smartscape.host=my-smartscaped-host",
        ],
        "{r:?}"
    );
    // No file: nothing, even with fail_on_missing_metadata.
    h.files.remove(super::dynatrace::PATH);
    let r = resources("detectors: [dynatrace]\nfail_on_missing_metadata: true", &h);
    assert_eq!(r[0].len(), 2, "{r:?}");
    h.files.insert(super::dynatrace::PATH, UNREADABLE);
    let e = make("detectors: [dynatrace]\nfail_on_missing_metadata: true", &h)
        .err()
        .unwrap();
    assert!(
        e.contains("detectors::0: failed to detect: open /var/lib/dynatrace/enrichment/dt_host_metadata.properties"),
        "{e}"
    );
}

fn app_service_host() -> FakeHost {
    let mut h = host();
    h.env.clear();
    h.env.extend([
        ("WEBSITE_SITE_NAME", "my-site"),
        ("WEBSITE_RESOURCE_GROUP", "my-rg"),
        (
            "WEBSITE_OWNER_NAME",
            "00000000-0000-0000-0000-000000000000+my-rg-CentralUSwebspace",
        ),
        ("REGION_NAME", "Central US"),
        ("WEBSITE_SLOT_NAME", "staging"),
        ("WEBSITE_INSTANCE_ID", "instance-1"),
        ("FUNCTIONS_WORKER_RUNTIME", ""),
    ]);
    h
}

#[test]
fn azureappservice_reads_the_app_services_variables() {
    let mut h = app_service_host();
    let r = resources("detectors: [azureappservice]", &h);
    assert_eq!(
        r[0][1..],
        [
            "service.name=my-site",
            "azure.app_service.instance.id=instance-1",
            "azure.resource_group.name=my-rg",
            "cloud.account.id=00000000-0000-0000-0000-000000000000",
            "cloud.platform=azure.app_service",
            "cloud.provider=azure",
            "cloud.region=Central US",
            "cloud.resource_id=/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/my-rg/providers/Microsoft.Web/sites/my-site",
            "deployment.environment.name=staging",
        ],
        "{r:?}"
    );
    let r = resources(
        "detectors: [azureappservice]\nazureappservice: {resource_attributes: {service.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][1], "service.name=svc", "{r:?}");
    assert_eq!(r[0].len(), 2 + 8, "{r:?}");
    // No instance id: the rest.
    h.env.insert("WEBSITE_INSTANCE_ID", "");
    let r = resources("detectors: [azureappservice]", &h);
    assert!(
        !r[0]
            .iter()
            .any(|a| a.starts_with("azure.app_service.instance.id")),
        "{r:?}"
    );
    assert_eq!(r[0].len(), 2 + 7, "{r:?}");
    // Everything off finds nothing, without failing.
    let all_off = "detectors: [azureappservice]\nfail_on_missing_metadata: true\nazureappservice: \
                   {resource_attributes: {azure.app_service.instance.id: {enabled: false}, \
                   azure.resource_group.name: {enabled: false}, cloud.account.id: {enabled: false}, \
                   cloud.platform: {enabled: false}, cloud.provider: {enabled: false}, \
                   cloud.region: {enabled: false}, cloud.resource_id: {enabled: false}, \
                   deployment.environment.name: {enabled: false}, service.name: {enabled: false}}}";
    assert_eq!(resources(all_off, &h)[0].len(), 2);
    // An Azure Functions app, and not App Service: nothing, or a failure.
    let mut functions = app_service_host();
    functions
        .env
        .insert("FUNCTIONS_WORKER_RUNTIME", "dotnet-isolated");
    let mut off = app_service_host();
    off.env.insert("WEBSITE_OWNER_NAME", "");
    for h in [functions, off] {
        assert_eq!(resources("detectors: [azureappservice]", &h)[0].len(), 2);
        let e = make(
            "detectors: [azureappservice]\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains("detectors::0: failed to detect: azure app service metadata unavailable"),
            "{e}"
        );
    }
}

#[test]
fn azurecontainerapps_reads_the_container_apps_variables() {
    let mut h = host();
    h.env.clear();
    h.env.extend([
        ("CONTAINER_APP_NAME", "my-app"),
        ("CONTAINER_APP_REPLICA_NAME", "my-app--abc123-7d9f8c5b6-xyz"),
    ]);
    let r = resources("detectors: [azurecontainerapps]", &h);
    assert_eq!(
        r[0][1..],
        [
            "service.name=my-app",
            "azure.container_app.instance.id=my-app--abc123-7d9f8c5b6-xyz",
            "cloud.platform=azure.container_apps",
            "cloud.provider=azure",
        ],
        "{r:?}"
    );
    let r = resources(
        "detectors: [azurecontainerapps]\nazurecontainerapps: {resource_attributes: {service.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][1], "service.name=svc", "{r:?}");
    assert_eq!(r[0].len(), 2 + 3, "{r:?}");
    h.env.remove("CONTAINER_APP_REPLICA_NAME");
    let r = resources("detectors: [azurecontainerapps]", &h);
    assert_eq!(r[0].len(), 2 + 2, "{r:?}");
    h.env.insert("CONTAINER_APP_NAME", "");
    assert_eq!(resources("detectors: [azurecontainerapps]", &h)[0].len(), 2);
    let e = make(
        "detectors: [azurecontainerapps]\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("detectors::0: failed to detect: azure container apps metadata unavailable"),
        "{e}"
    );
}
