//! The `scaleway` detector against fake Scaleway metadata services.

use super::tests::{fake_http, make, metadata_host, resources, FakeHost};

/// The Collector's test document, shortened.
const INSTANCE: &str = r#"{
  "allowed_actions": ["poweroff","terminate","reboot","stop_in_place","backup"],
  "arch": "x86_64",
  "bootscript": null,
  "commercial_type": "STARDUST1-S",
  "hostname": "scw-interesting-bassi",
  "id": "daa2ea5a-0ee6-4cdc-9f1a-e0d1cb4e6d86",
  "image": {
    "arch": "x86_64",
    "id": "01fe25a9-2e95-41e2-9f3f-f7d3a00604be",
    "name": "Ubuntu 24.04 Noble Numbat",
    "root_volume": {"id": "4f312959-ef1f-41c9-9a98-a90f800e09c3", "size": 0},
    "zone": "nl-ams-1"
  },
  "ipv6": null,
  "location": {
    "cluster_id": "15",
    "hypervisor_id": "402",
    "node_id": "134",
    "platform_id": "23",
    "zone_id": "nl-ams-1"
  },
  "name": "scw-interesting-bassi",
  "organization": "10542306-0c75-4265-9c2c-1fbfe4ea0bf0",
  "placement_group": null,
  "private_ip": null,
  "project": "10542306-0c75-4265-9c2c-1fbfe4ea0bf0",
  "volumes": {"0": {"boot": false, "id": "76d8ae14-6a36-43b3-b0e3-bce79cbd7b06"}},
  "zone": "nl-ams-1"
}"#;

const ATTRIBUTES: [&str; 10] = [
    "cloud.account.id=10542306-0c75-4265-9c2c-1fbfe4ea0bf0",
    "cloud.availability_zone=nl-ams-1",
    "cloud.provider=scaleway_cloud",
    "cloud.platform=scaleway_cloud_compute",
    "cloud.region=nl-ams",
    "host.id=daa2ea5a-0ee6-4cdc-9f1a-e0d1cb4e6d86",
    "host.image.id=01fe25a9-2e95-41e2-9f3f-f7d3a00604be",
    "host.image.name=Ubuntu 24.04 Noble Numbat",
    "host.name=scw-interesting-bassi",
    "host.type=STARDUST1-S",
];

/// A metadata service answering `GET /` with `probe` and `GET
/// /conf?format=json` with `status` and `body`; its address and the
/// requests it saw.
fn service(
    probe: u16,
    status: u16,
    body: &'static str,
) -> (String, std::sync::mpsc::Receiver<String>) {
    fake_http(move |method, path, _| {
        let (status, body) = match (method, path) {
            ("GET", "/") => (probe, "conf\n"),
            ("GET", "/conf?format=json") => (status, body),
            _ => (404, "404 page not found\n"),
        };
        (status, "", body.to_string(), format!("{method} {path}"))
    })
}

/// A host whose Scaleway service's IPv4 address is `v4` and IPv6 one
/// `v6`.
fn scaleway_host(v4: &str, v6: &str) -> FakeHost {
    let mut h = metadata_host(v4);
    h.env.insert(
        "TEST_LINK_LOCAL_V6",
        Box::leak(v6.to_string().into_boxed_str()),
    );
    h
}

#[test]
fn scaleway_reads_the_instance_metadata() {
    let (at, seen) = service(200, 200, INSTANCE);
    let h = scaleway_host(&at, "127.0.0.1:9");
    let r = resources("detectors: [scaleway]", &h);
    assert_eq!(r[0][2..], ATTRIBUTES, "{r:?}");
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /", "GET /conf?format=json"]
    );
    let r = resources(
        "detectors: [scaleway]\nscaleway: {resource_attributes: \
         {host.image.name: {enabled: false}, cloud.account.id: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0].len(), 2 + 8, "{r:?}");
    assert!(
        !r[0]
            .iter()
            .any(|a| a.starts_with("host.image.name") || a.starts_with("cloud.account.id")),
        "{r:?}"
    );
    let e = make(
        "detectors: [scaleway]\nscaleway: {resource_attributes: {host.arch: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::scaleway::resource_attributes::host.arch: unknown attribute"),
        "{e}"
    );
}

#[test]
fn scaleway_asks_the_ipv6_address_when_the_ipv4_one_does_not_answer_200() {
    let (v4, v4_seen) = service(404, 404, "404 page not found\n");
    let (v6, v6_seen) = service(200, 200, INSTANCE);
    let r = resources("detectors: [scaleway]", &scaleway_host(&v4, &v6));
    assert_eq!(r[0][2..], ATTRIBUTES, "{r:?}");
    assert_eq!(v4_seen.try_iter().collect::<Vec<_>>(), ["GET /"]);
    assert_eq!(
        v6_seen.try_iter().collect::<Vec<_>>(),
        ["GET /", "GET /conf?format=json"]
    );
}

#[test]
fn scaleway_reads_the_document_whatever_its_status() {
    // As the SDK: the status is not looked at; a zone without a `-` has
    // no region; what the document lacks is empty.
    let (at, _) = service(200, 500, r#"{"location":{"zone_id":"par1"},"name":"n"}"#);
    let r = resources("detectors: [scaleway]", &scaleway_host(&at, "127.0.0.1:9"));
    assert_eq!(
        r[0][2..],
        [
            "cloud.account.id=",
            "cloud.availability_zone=par1",
            "cloud.provider=scaleway_cloud",
            "cloud.platform=scaleway_cloud_compute",
            "host.id=",
            "host.image.id=",
            "host.image.name=",
            "host.name=n",
            "host.type=",
        ],
        "{r:?}"
    );
    for (zone, region) in [
        ("fr-par-1", Some("fr-par")),
        ("nl-ams-1", Some("nl-ams")),
        ("par1", None),
        ("-1", None),
        ("", None),
    ] {
        assert_eq!(super::scaleway::region(zone), region, "{zone}");
    }
}

#[test]
fn scaleway_off_scaleway_finds_nothing_unless_metadata_must_be_there() {
    let h = scaleway_host("127.0.0.1:9", "127.0.0.1:9");
    let r = resources("detectors: [scaleway, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [env, scaleway]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: scaleway metadata unavailable: scaleway-sdk-go: error getting metadataURL: Get \"http://127.0.0.1:9/conf?format=json\": dial tcp 127.0.0.1:9"),
        "{e}"
    );
}

#[test]
fn scaleway_malformed_metadata_is_an_error() {
    for (status, body) in [
        (404, "404 page not found\n"),
        (200, "<html>"),
        (200, r#"{"image": "ubuntu"}"#),
        (200, ""),
    ] {
        let (at, _) = service(200, status, body);
        let h = scaleway_host(&at, "127.0.0.1:9");
        let r = resources("detectors: [scaleway, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{body}: {r:?}");
        let e = make(
            "detectors: [scaleway]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains("failed to detect: scaleway metadata unavailable: scaleway-sdk-go: error decoding metadata: "),
            "{body}: {e}"
        );
    }
}
