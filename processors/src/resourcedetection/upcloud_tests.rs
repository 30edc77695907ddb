//! The `upcloud` detector against a fake UpCloud metadata service.

use super::tests::{make, metadata_host, metadata_service, resources};

const SERVER: &str = r#"{"cloud_name":"upcloud","hostname":"ubuntu-1cpu-1gb-es-mad1","instance_id":"00133099-f1fd-4ed2-b1c7-d027eb43a8f5","region":"es-mad1","network":{"interfaces":[]},"tags":[]}"#;

const PATH: &str = "/metadata/v1.json";

#[test]
fn upcloud_reads_the_server_metadata() {
    let (h, seen) = metadata_service(PATH, 200, SERVER);
    let r = resources("detectors: [upcloud]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=upcloud",
            "cloud.region=es-mad1",
            "host.id=00133099-f1fd-4ed2-b1c7-d027eb43a8f5",
            "host.name=ubuntu-1cpu-1gb-es-mad1",
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /metadata/v1.json"]
    );
    let r = resources(
        "detectors: [upcloud]\nupcloud: {resource_attributes: \
         {cloud.region: {enabled: false}, host.id: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=upcloud",
            "host.name=ubuntu-1cpu-1gb-es-mad1"
        ],
        "{r:?}"
    );
    let e = make(
        "detectors: [upcloud]\nupcloud: {resource_attributes: {cloud.platform: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::upcloud::resource_attributes::cloud.platform: unknown attribute"),
        "{e}"
    );
}

#[test]
fn upcloud_sets_what_the_document_lacks_as_empty() {
    // As the Collector's resource builder: every attribute, as it is.
    let (h, _) = metadata_service(PATH, 200, r#"{"cloud_name":"upcloud","region":null}"#);
    let r = resources("detectors: [upcloud]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=upcloud",
            "cloud.region=",
            "host.id=",
            "host.name="
        ],
        "{r:?}"
    );
}

#[test]
fn upcloud_off_upcloud_finds_nothing_unless_metadata_must_be_there() {
    let h = metadata_host("127.0.0.1:9");
    let r = resources("detectors: [upcloud, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    // The top-level flag, or the deprecated one of the detector alone.
    for flags in [
        "fail_on_missing_metadata: true",
        "upcloud: {fail_on_missing_metadata: true}",
    ] {
        let e = make(
            &format!("detectors: [env, upcloud]\ntimeout: 1s\n{flags}"),
            &h,
        )
        .err()
        .unwrap_or_else(|| panic!("{flags}: started"));
        assert!(
            e.contains("processors::resourcedetection::detectors::1: failed to detect: query Upcloud metadata: Get \"http://127.0.0.1:9/metadata/v1.json\": dial tcp 127.0.0.1:9"),
            "{flags}: {e}"
        );
    }
    let (h, _) = metadata_service(PATH, 500, "busy");
    let r = resources("detectors: [upcloud, env]", &h);
    assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    let e = make(
        "detectors: [upcloud]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("failed to detect: Upcloud metadata replied with status code: 500 Internal Server Error"),
        "{e}"
    );
}

#[test]
fn upcloud_malformed_metadata_is_an_error() {
    for body in ["not json", r#"{"hostname": 5}"#, r#"{"hostname":"h"} {}"#] {
        let (h, _) = metadata_service(PATH, 200, body);
        let r = resources("detectors: [upcloud, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{body}: {r:?}");
        let e = make(
            "detectors: [upcloud]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains("failed to detect: decode Upcloud metadata: "),
            "{body}: {e}"
        );
    }
}
