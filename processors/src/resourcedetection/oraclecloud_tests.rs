//! The `oraclecloud` detector against a fake OCI instance metadata
//! service.

use super::tests::{fake_http, make, metadata_host, resources, FakeHost};

const INSTANCE: &str = r#"{"availabilityDomain":"AD-1","canonicalRegionName":"us-ashburn-1","displayName":"my-instance","id":"ocid1.instance.oc1..aaaaaaa","region":"iad","shape":"VM.Standard.E4.Flex","metadata":{"oke-cluster-display-name":"my-oke-cluster","realm":"oc1","ssh_authorized_keys":"x"}}"#;

const PATH: &str = "/opc/v2/instance/";

/// A metadata service answering, with `Authorization: Bearer Oracle`,
/// `HEAD /opc/v2/instance/` with `probe` and its `GET` with `status` and
/// `body` (401 without the header); the requests it saw.
fn oracle(
    probe: u16,
    status: u16,
    body: &'static str,
) -> (FakeHost, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let auth = headers.iter().any(|h| h == "authorization: bearer oracle");
        let (status, body) = match (method, path, auth) {
            (_, _, false) => (401, ""),
            ("HEAD", PATH, _) => (probe, ""),
            ("GET", PATH, _) => (status, body),
            _ => (404, ""),
        };
        let note = if auth { " (bearer)" } else { "" };
        (
            status,
            "",
            body.to_string(),
            format!("{method} {path}{note}"),
        )
    });
    (metadata_host(&at), seen)
}

#[test]
fn oraclecloud_reads_the_instance_metadata() {
    let (h, seen) = oracle(200, 200, INSTANCE);
    // cloud.resource_id is off by default, as in the Collector.
    let r = resources("detectors: [oraclecloud]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=oracle_cloud",
            "cloud.platform=oracle_cloud_oke",
            "cloud.region=us-ashburn-1",
            "cloud.availability_zone=AD-1",
            "host.id=ocid1.instance.oc1..aaaaaaa",
            "host.name=my-instance",
            "host.type=VM.Standard.E4.Flex",
            "k8s.cluster.name=my-oke-cluster",
            "oracle_cloud.realm=oc1",
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [
            "HEAD /opc/v2/instance/ (bearer)",
            "GET /opc/v2/instance/ (bearer)"
        ]
    );
    // The Collector's TestDetectCloudResourceIDEnabledHostIDDisabled.
    let r = resources(
        "detectors: [oraclecloud]\noraclecloud: {resource_attributes: \
         {cloud.resource_id: {enabled: true}, host.id: {enabled: false}, k8s.cluster.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=oracle_cloud",
            "cloud.platform=oracle_cloud_oke",
            "cloud.region=us-ashburn-1",
            "cloud.resource_id=ocid1.instance.oc1..aaaaaaa",
            "cloud.availability_zone=AD-1",
            "host.name=my-instance",
            "host.type=VM.Standard.E4.Flex",
            "oracle_cloud.realm=oc1",
        ],
        "{r:?}"
    );
    let e = make(
        "detectors: [oraclecloud]\noraclecloud: {resource_attributes: {host.arch: {enabled: true}}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::oraclecloud::resource_attributes::host.arch: unknown attribute"),
        "{e}"
    );
}

#[test]
fn oraclecloud_sets_what_the_document_lacks_as_empty() {
    // Off OKE the instance metadata has no cluster name: set empty, as the
    // Collector's resource builder sets it.
    let (h, _) = oracle(200, 200, r#"{"id":"ocid1.instance.x","metadata":null}"#);
    let r = resources("detectors: [oraclecloud]", &h);
    assert_eq!(
        r[0][2..],
        [
            "cloud.provider=oracle_cloud",
            "cloud.platform=oracle_cloud_oke",
            "cloud.region=",
            "cloud.availability_zone=",
            "host.id=ocid1.instance.x",
            "host.name=",
            "host.type=",
            "k8s.cluster.name=",
            "oracle_cloud.realm=",
        ],
        "{r:?}"
    );
}

#[test]
fn oraclecloud_off_oracle_cloud_finds_nothing_even_when_metadata_must_be_there() {
    // No service (port 9), or a probe not answered 200: not Oracle Cloud,
    // and not a failure, as the Collector's.
    let (not_found, seen) = oracle(404, 200, INSTANCE);
    for h in [metadata_host("127.0.0.1:9"), not_found] {
        let r = resources(
            "detectors: [oraclecloud, env]\nfail_on_missing_metadata: true",
            &h,
        );
        assert_eq!(r[0][2..], ["team=a"], "{r:?}");
    }
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["HEAD /opc/v2/instance/ (bearer)"]
    );
}

#[test]
fn oraclecloud_metadata_that_cannot_be_read_is_an_error() {
    for (status, body, want) in [
        (
            500,
            "",
            "received non-OK response from OracleCloud IMDS: 500 Internal Server Error",
        ),
        (
            200,
            "not json",
            "failed to decode OracleCloud IMDS reply: expected ident",
        ),
        (
            200,
            r#"{"id": 5}"#,
            "failed to decode OracleCloud IMDS reply: invalid type: integer `5`",
        ),
        (200, "null", "failed to decode OracleCloud IMDS reply: null"),
    ] {
        let (h, _) = oracle(200, status, body);
        let r = resources("detectors: [oraclecloud, env]", &h);
        assert_eq!(r[0][2..], ["team=a"], "{body}: {r:?}");
        let e = make(
            "detectors: [oraclecloud]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!(
                "detectors::0: failed to detect: failed to get Oracle Cloud metadata: {want}"
            )),
            "{body}: {e}"
        );
    }
}
