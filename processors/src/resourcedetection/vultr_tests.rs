//! The `vultr` detector against a fake Vultr metadata service.

use super::tests::{make, metadata_host, metadata_service, resources};

/// As the SDK detector's test server encodes its `metadataResponse`.
const INSTANCE: &str = r#"{"hostname":"srv-abc","instanceid":"legacy-id","instance-v2-id":"550e8400-e29b-41d4-a716-446655440000","region":{"regioncode":"EWR","countrycode":"US"},"bgp":{}}"#;

const PATH: &str = "/v1.json";

#[test]
fn vultr_reads_the_instance_metadata() {
    let (h, seen) = metadata_service(PATH, 200, INSTANCE);
    // cloud.platform is off by default, as in the Collector; the order is
    // the SDK resource's, sorted by key; the region code in lower case.
    let r = resources("detectors: [vultr]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=vultr",
            "cloud.region=ewr",
            "host.id=550e8400-e29b-41d4-a716-446655440000",
            "host.name=srv-abc",
        ],
        "{r:?}"
    );
    assert_eq!(seen.try_iter().collect::<Vec<_>>(), ["GET /v1.json"]);
    let r = resources(
        "detectors: [vultr]\nvultr: {resource_attributes: \
         {cloud.platform: {enabled: true}, cloud.region: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "cloud.platform=vultr.cloud_compute",
            "cloud.provider=vultr",
            "host.id=550e8400-e29b-41d4-a716-446655440000",
            "host.name=srv-abc",
        ],
        "{r:?}"
    );
    let e = make(
        "detectors: [vultr]\nvultr: {resource_attributes: {host.type: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::vultr::resource_attributes::host.type: unknown attribute"),
        "{e}"
    );
}

#[test]
fn vultr_leaves_out_what_the_document_lacks() {
    // The legacy id without the v2 one; no region, no host name: left
    // out, even with fail_on_missing_metadata.
    let (h, _) = metadata_service(
        PATH,
        200,
        r#"{"instanceid":"legacy-only-id","instance-v2-id":"","region":null}"#,
    );
    for yaml in [
        "detectors: [vultr]",
        "detectors: [vultr]\nfail_on_missing_metadata: true",
    ] {
        let r = resources(yaml, &h);
        assert_eq!(
            r[0][2..],
            ["cloud.provider=vultr", "host.id=legacy-only-id"],
            "{yaml}: {r:?}"
        );
    }
}

#[test]
fn vultr_off_vultr_finds_nothing_unless_metadata_must_be_there() {
    // No service (port 9), or something else answering the address (4xx).
    let (not_found, _) = metadata_service("/elsewhere", 200, "");
    for h in [metadata_host("127.0.0.1:9"), not_found] {
        let r = resources("detectors: [vultr, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{r:?}");
        // The top-level flag, or the deprecated one of the detector alone.
        for flags in [
            "fail_on_missing_metadata: true",
            "vultr: {fail_on_missing_metadata: true}",
        ] {
            let e = make(
                &format!("detectors: [env, vultr]\ntimeout: 1s\n{flags}"),
                &h,
            )
            .err()
            .unwrap_or_else(|| panic!("{flags}: started"));
            assert!(
                e.contains("processors::resourcedetection::detectors::1: failed to detect: vultr metadata unavailable"),
                "{flags}: {e}"
            );
        }
    }
}

#[test]
fn vultr_service_errors_and_malformed_metadata_are_errors() {
    for (status, body, want) in [
        (500, "boom", "metadata request returned status 500"),
        (200, "not json", "expected ident at line 1 column 2"),
        (200, r#"{"hostname": 1}"#, "invalid type: integer `1`"),
    ] {
        let (h, _) = metadata_service(PATH, status, body);
        let r = resources("detectors: [vultr, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{body}: {r:?}");
        let e = make(
            "detectors: [vultr]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!("detectors::0: failed to detect: {want}")),
            "{body}: {e}"
        );
    }
}
