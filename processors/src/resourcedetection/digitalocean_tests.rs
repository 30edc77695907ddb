//! The `digitalocean` detector against a fake droplet metadata service.

use super::tests::{make, metadata_host, metadata_service, resources};

/// The Collector's test document.
const DROPLET: &str = r#"{
  "droplet_id": 2756294,
  "hostname": "sample-droplet",
  "region": "nyc3",
  "public_keys": [],
  "interfaces": {},
  "floating_ip": {},
  "reserved_ip": {},
  "dns": {},
  "features": {}
}"#;

const PATH: &str = "/metadata/v1.json";

#[test]
fn digitalocean_reads_the_droplet_metadata() {
    let (h, seen) = metadata_service(PATH, 200, DROPLET);
    let r = resources("detectors: [digitalocean]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=digitalocean",
            "host.id=2756294",
            "host.name=sample-droplet",
            "cloud.region=nyc3",
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /metadata/v1.json"]
    );
    let r = resources(
        "detectors: [digitalocean]\ndigitalocean: {resource_attributes: \
         {host.name: {enabled: false}, cloud.provider: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][2..], ["host.id=2756294", "cloud.region=nyc3"], "{r:?}");
    let e = make(
        "detectors: [digitalocean]\ndigitalocean: {resource_attributes: {host.type: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::digitalocean::resource_attributes::host.type: unknown attribute \"host.type\" of the digitalocean detector"),
        "{e}"
    );
}

#[test]
fn digitalocean_reads_the_first_json_value_as_go_s_decoder() {
    // What follows the document is not read; a `null` one is empty, as
    // the client's `json.Decoder` leaves its value.
    let (h, _) = metadata_service(PATH, 200, r#"{"droplet_id":7,"hostname":"d"} trailing"#);
    let r = resources("detectors: [digitalocean]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=digitalocean",
            "host.id=7",
            "host.name=d",
            "cloud.region="
        ],
        "{r:?}"
    );
    let (h, _) = metadata_service(PATH, 200, "null");
    let r = resources("detectors: [digitalocean]", &h);
    assert_eq!(r[0][3], "host.id=0", "{r:?}");
}

#[test]
fn digitalocean_off_digitalocean_finds_nothing_unless_metadata_must_be_there() {
    // Nothing listening (port 9).
    let h = metadata_host("127.0.0.1:9");
    let r = resources("detectors: [digitalocean, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [env, digitalocean]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: digitalocean metadata unavailable: Get \"http://127.0.0.1:9/metadata/v1.json\": dial tcp 127.0.0.1:9"),
        "{e}"
    );
    // Another cloud's metadata service: 404.
    let (h, _) = metadata_service("/elsewhere", 200, "");
    let r = resources("detectors: [digitalocean, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [digitalocean]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("failed to detect: digitalocean metadata unavailable: unexpected response from metadata API, status 404: 404 Not Found"),
        "{e}"
    );
}

#[test]
fn digitalocean_malformed_metadata_is_an_error() {
    for (body, want) in [
        ("<html>", "expected value at line 1 column 1"),
        (r#"{"droplet_id": "2756294"}"#, "invalid type: string"),
        ("", "EOF"),
    ] {
        let (h, _) = metadata_service(PATH, 200, body);
        let r = resources("detectors: [digitalocean, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{body}: {r:?}");
        let e = make(
            "detectors: [digitalocean]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!(
                "failed to detect: digitalocean metadata unavailable: {want}"
            )),
            "{body}: {e}"
        );
    }
}
