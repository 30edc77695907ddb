//! The `akamai`, `nova`, `alibaba_ecs`, `tencent_cvm`, `ibmcloud_classic`
//! and `ibmcloud_vpc` detectors against fake metadata services.

use std::sync::mpsc::Receiver;

use super::tests::{fake_http, host, make, resources, FakeHost};

/// An answer: status, body.
type Answer = (u16, String);

/// A fake metadata service answering `answer(method, path, headers)`
/// (headers lowercase), one connection per request; the requests it saw
/// (`METHOD path`) come back through the channel. The host asks it for
/// every metadata service and has no other variable than `env`.
fn service(
    env: &[(&'static str, &'static str)],
    answer: impl Fn(&str, &str, &[String]) -> Answer + Send + 'static,
) -> (FakeHost, Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let (status, body) = answer(method, path, headers);
        (
            status,
            "Connection: close\r\n",
            body,
            format!("{method} {path}"),
        )
    });
    let mut h = host();
    h.env.clear();
    h.env.extend(env.iter().copied());
    h.env
        .insert("TEST_LINK_LOCAL", Box::leak(at.into_boxed_str()));
    (h, seen)
}

/// A host whose metadata services are nowhere (port 9 refuses), with
/// `team=a` from the env detector.
fn nowhere() -> FakeHost {
    let mut h = host();
    h.env.clear();
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    h
}

/// The detected attributes (after the test batch's own two).
fn detected(yaml: &str, h: &FakeHost) -> Vec<String> {
    resources(yaml, h)[0][2..].to_vec()
}

/// The error making the processor fails with.
fn failure(yaml: &str, h: &FakeHost) -> String {
    make(yaml, h)
        .err()
        .unwrap_or_else(|| panic!("{yaml} started"))
}

fn has(headers: &[String], want: &str) -> bool {
    headers.iter().any(|h| h == want)
}

fn ok(body: &str) -> Answer {
    (200, body.to_string())
}

fn not_found() -> Answer {
    (404, "Not Found".into())
}

// ---- alibaba_ecs ----

/// The Collector's test instance.
fn alibaba(method: &str, path: &str, headers: &[String]) -> Answer {
    if method == "PUT" {
        return match path {
            "/latest/api/token"
                if has(headers, "x-aliyun-ecs-metadata-token-ttl-seconds: 21600") =>
            {
                ok("tok-1")
            }
            _ => (400, "bad token request".into()),
        };
    }
    if !has(headers, "x-aliyun-ecs-metadata-token: tok-1") {
        return (401, "no token".into());
    }
    match path.strip_prefix("/latest/meta-data/").unwrap_or("") {
        "hostname" => ok("ecs-instance-01"),
        "image-id" => ok("m-abcdef123456"),
        "instance-id" => ok("i-abcdef123456"),
        "instance/instance-type" => ok("ecs.g6.large"),
        "owner-account-id" => ok("1234567890123456"),
        "region-id" => ok("cn-hangzhou"),
        "zone-id" => ok("cn-hangzhou-a"),
        _ => not_found(),
    }
}

#[test]
fn alibaba_ecs_reads_the_instance_metadata_with_a_token() {
    let (h, seen) = service(&[], alibaba);
    assert_eq!(
        detected("detectors: [alibaba_ecs]", &h),
        [
            "cloud.provider=alibaba_cloud",
            "cloud.platform=alibaba_cloud_ecs",
            "cloud.account.id=1234567890123456",
            "cloud.region=cn-hangzhou",
            "cloud.availability_zone=cn-hangzhou-a",
            "host.id=i-abcdef123456",
            "host.name=ecs-instance-01",
            "host.image.id=m-abcdef123456",
            "host.type=ecs.g6.large",
        ]
    );
    let seen: Vec<String> = seen.try_iter().collect();
    assert_eq!(seen[0], "PUT /latest/api/token");
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert_eq!(
        detected(
            "detectors: [alibaba_ecs]\nalibaba_ecs: {resource_attributes: {host.name: {enabled: false}, cloud.platform: {enabled: false}}}",
            &h
        ),
        [
            "cloud.provider=alibaba_cloud",
            "cloud.account.id=1234567890123456",
            "cloud.region=cn-hangzhou",
            "cloud.availability_zone=cn-hangzhou-a",
            "host.id=i-abcdef123456",
            "host.image.id=m-abcdef123456",
            "host.type=ecs.g6.large",
        ]
    );
}

#[test]
fn alibaba_ecs_off_alibaba_finds_nothing_unless_metadata_must_be_there() {
    let h = nowhere();
    assert_eq!(detected("detectors: [alibaba_ecs, env]", &h), ["team=a"]);
    let e = failure(
        "detectors: [env, alibaba_ecs]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: failed to get metadata token: dial tcp 127.0.0.1:9"),
        "{e}"
    );
    // Its own, deprecated, flag too.
    let e = failure(
        "detectors: [alibaba_ecs]\ntimeout: 1s\nalibaba_ecs: {fail_on_missing_metadata: true}",
        &h,
    );
    assert!(
        e.contains("detectors::0: failed to detect: failed to get metadata token"),
        "{e}"
    );
    // A service answering one key with an error: all or nothing.
    let (h, _) = service(&[], |m, p, hd| match p {
        "/latest/meta-data/zone-id" => (500, "oops".into()),
        _ => alibaba(m, p, hd),
    });
    assert!(detected("detectors: [alibaba_ecs]", &h).is_empty());
    let e = failure(
        "detectors: [alibaba_ecs]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains("failed to detect: failed to get zone-id: metadata zone-id returned 500: oops"),
        "{e}"
    );
    // No token.
    let (h, _) = service(&[], |_, _, _| (403, "forbidden".into()));
    let e = failure(
        "detectors: [alibaba_ecs]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains("failed to detect: token request returned 403: forbidden"),
        "{e}"
    );
}

// ---- tencent_cvm ----

/// The Collector's test instance.
fn tencent(_: &str, path: &str, _: &[String]) -> Answer {
    match path.strip_prefix("/latest/meta-data/").unwrap_or("") {
        "instance-name" => ok("cvm-instance-01"),
        "instance/image-id" => ok("img-abcdef12"),
        "instance-id" => ok("ins-abcdef12"),
        "instance/instance-type" => ok("S5.MEDIUM4"),
        "app-id" => ok("1234567890"),
        "placement/region" => ok("ap-guangzhou"),
        "placement/zone" => ok("ap-guangzhou-3"),
        _ => not_found(),
    }
}

#[test]
fn tencent_cvm_reads_the_instance_metadata() {
    let (h, seen) = service(&[], tencent);
    assert_eq!(
        detected("detectors: [tencent_cvm]", &h),
        [
            "cloud.provider=tencent_cloud",
            "cloud.platform=tencent_cloud_cvm",
            "cloud.account.id=1234567890",
            "cloud.region=ap-guangzhou",
            "cloud.availability_zone=ap-guangzhou-3",
            "host.id=ins-abcdef12",
            "host.name=cvm-instance-01",
            "host.image.id=img-abcdef12",
            "host.type=S5.MEDIUM4",
        ]
    );
    assert_eq!(seen.try_iter().count(), 7);
    assert_eq!(
        detected(
            "detectors: [tencent_cvm]\ntencent_cvm: {resource_attributes: {cloud.account.id: {enabled: false}, host.type: {enabled: false}}}",
            &h
        )
        .len(),
        7
    );
}

#[test]
fn tencent_cvm_off_tencent_finds_nothing_unless_metadata_must_be_there() {
    let h = nowhere();
    assert_eq!(detected("detectors: [tencent_cvm, env]", &h), ["team=a"]);
    let e = failure(
        "detectors: [tencent_cvm]\ntimeout: 1s\ntencent_cvm: {fail_on_missing_metadata: true}",
        &h,
    );
    assert!(
        e.contains("detectors::0: failed to detect: failed to get "),
        "{e}"
    );
    assert!(e.contains("dial tcp 127.0.0.1:9"), "{e}");
    let (h, _) = service(&[], |m, p, hd| match p {
        "/latest/meta-data/app-id" => not_found(),
        _ => tencent(m, p, hd),
    });
    assert!(detected("detectors: [tencent_cvm]", &h).is_empty());
    let e = failure(
        "detectors: [tencent_cvm]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains(
            "failed to detect: failed to get app-id: metadata app-id returned 404: Not Found"
        ),
        "{e}"
    );
}

// ---- nova ----

/// The Collector's provider test's document.
const NOVA_DOC: &str = r#"{
    "uuid": "12345678-abcd-ef00-1234-56789abcdef0",
    "meta": {"key1": "value1", "key2": "value2", "role": "db"},
    "hostname": "test-vm-01",
    "name": "test-vm-01",
    "availability_zone": "zone-a",
    "project_id": "proj-123456",
    "launch_index": 0
}"#;

fn nova(_: &str, path: &str, _: &[String]) -> Answer {
    match path {
        "/openstack/latest/meta_data.json" => ok(NOVA_DOC),
        "/latest/meta-data/instance-type" => ok("m1.small"),
        _ => not_found(),
    }
}

#[test]
fn nova_reads_the_openstack_metadata() {
    let (h, seen) = service(&[], nova);
    assert_eq!(
        detected("detectors: [nova]", &h),
        [
            "host.type=m1.small",
            "cloud.provider=openstack",
            "cloud.platform=openstack_nova",
            "cloud.account.id=proj-123456",
            "cloud.availability_zone=zone-a",
            "host.id=12345678-abcd-ef00-1234-56789abcdef0",
            "host.name=test-vm-01",
        ]
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [
            "GET /openstack/latest/meta_data.json",
            "GET /latest/meta-data/instance-type"
        ]
    );
    // Labels by key; an attribute turned off.
    assert_eq!(
        detected(
            "detectors: [nova]\nnova: {labels: ['^key', '^nope$'], resource_attributes: {cloud.account.id: {enabled: false}}}",
            &h
        )[5..],
        [
            "host.name=test-vm-01",
            "openstack.nova.meta.key1=value1",
            "openstack.nova.meta.key2=value2",
        ]
    );
    // Without the EC2-compatible instance type: no host.type.
    let (h, _) = service(&[], |m, p, hd| match p {
        "/latest/meta-data/instance-type" => not_found(),
        _ => nova(m, p, hd),
    });
    let r = detected("detectors: [nova]", &h);
    assert_eq!(r.len(), 6, "{r:?}");
    assert_eq!(r[0], "cloud.provider=openstack");
    let e = failure("detectors: [nova]\nnova: {labels: ['(']}", &h);
    assert!(
        e.contains("processors::resourcedetection::nova::labels::0: regex parse error"),
        "{e}"
    );
}

#[test]
fn nova_off_openstack_finds_nothing_unless_metadata_must_be_there() {
    let h = nowhere();
    assert_eq!(detected("detectors: [nova, env]", &h), ["team=a"]);
    for yaml in [
        "detectors: [nova]\ntimeout: 1s\nfail_on_missing_metadata: true",
        "detectors: [nova]\ntimeout: 1s\nnova: {fail_on_missing_metadata: true}",
    ] {
        let e = failure(yaml, &h);
        assert!(
            e.contains("detectors::0: failed to detect: failed to query nova metadata service: dial tcp 127.0.0.1:9"),
            "{e}"
        );
    }
    // Another cloud's service, a document without uuid, a bad document.
    for (doc, status, want) in [
        ("Not Found", 404, "metadata service returned 404: Not Found"),
        (
            r#"{"hostname": "vm"}"#,
            200,
            "instance ID (uuid) not found in metadata",
        ),
        ("{not-json", 200, "failed to decode nova metadata: "),
        (r#"{"uuid": 7}"#, 200, "failed to decode nova metadata: "),
    ] {
        let (h, _) = service(&[], move |_, _, _| (status, doc.to_string()));
        assert!(detected("detectors: [nova]", &h).is_empty(), "{doc}");
        let e = failure(
            "detectors: [nova]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        );
        assert!(e.contains(&format!("failed to detect: {want}")), "{e}");
    }
    // A document without hostname fails the detector, whatever the flag:
    // logged, the start goes on; with the flag, it fails.
    let (h, _) = service(
        &[("OTEL_RESOURCE_ATTRIBUTES", "team=a")],
        |_, p, _| match p {
            "/openstack/latest/meta_data.json" => ok(r#"{"uuid": "u-1"}"#),
            _ => not_found(),
        },
    );
    assert_eq!(
        detected("detectors: [nova, env]\ntimeout: 1s", &h),
        ["team=a"]
    );
    let e = failure(
        "detectors: [nova]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains("failed to detect: failed getting hostname: hostname not found in metadata"),
        "{e}"
    );
}

// ---- akamai ----

/// The Collector's test instance.
const LINODE: &str = r#"{"id": 4242, "label": "linode-4242", "region": "us-southeast", "type": "g6-standard-4", "host_uuid": "h-1", "tags": [], "specs": {"vcpus": 4}, "image": {"id": "linode/ubuntu24.04", "label": "Ubuntu 24.04 LTS"}, "account_euuid": "acc-eeee-uuuu-iiiii-dddd"}"#;

fn akamai(method: &str, path: &str, headers: &[String]) -> Answer {
    match (method, path) {
        ("PUT", "/v1/token") if has(headers, "metadata-token-expiry-seconds: 3600") => {
            ok(r#"["tok-1"]"#)
        }
        ("GET", "/v1/instance") if has(headers, "metadata-token: tok-1") => ok(LINODE),
        _ => (401, r#"{"errors": [{"reason": "Unauthorized"}]}"#.into()),
    }
}

#[test]
fn akamai_reads_the_instance_with_a_token() {
    let (h, seen) = service(&[], akamai);
    assert_eq!(
        detected("detectors: [akamai]", &h),
        [
            "cloud.account.id=acc-eeee-uuuu-iiiii-dddd",
            "cloud.provider=akamai_cloud",
            "cloud.platform=akamai_cloud.compute",
            "cloud.region=us-southeast",
            "host.id=4242",
            "host.image.id=linode/ubuntu24.04",
            "host.image.name=Ubuntu 24.04 LTS",
            "host.name=linode-4242",
            "host.type=g6-standard-4",
        ]
    );
    // A token when made, another for the instance, as the Collector's.
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["PUT /v1/token", "PUT /v1/token", "GET /v1/instance"]
    );
    let r = detected(
        "detectors: [akamai]\nakamai: {resource_attributes: {host.image.name: {enabled: false}, cloud.account.id: {enabled: false}}}",
        &h,
    );
    assert_eq!(r.len(), 7, "{r:?}");
    assert!(!r
        .iter()
        .any(|a| a.starts_with("host.image.name") || a.starts_with("cloud.account.id")));
    let e = failure(
        "detectors: [akamai]\nakamai: {resource_attributes: {host.arch: {enabled: true}}}",
        &h,
    );
    assert!(
        e.contains("akamai::resource_attributes::host.arch: unknown attribute"),
        "{e}"
    );
}

#[test]
fn akamai_without_a_token_fails_to_be_made() {
    // As the Collector's, whatever fail_on_missing_metadata.
    let e = failure("detectors: [env, akamai]\ntimeout: 1s", &nowhere());
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed creating detector: failed to refresh metadata token: failed to generate metadata token: dial tcp 127.0.0.1:9"),
        "{e}"
    );
    for (status, body) in [(404, "Not Found"), (200, "[]"), (200, "{}")] {
        let (h, _) = service(&[], move |_, _, _| (status, body.to_string()));
        let e = failure("detectors: [akamai]\ntimeout: 1s", &h);
        assert!(
            e.contains("failed creating detector: failed to refresh metadata token: failed to generate metadata token: "),
            "{status} {body}: {e}"
        );
    }
}

#[test]
fn akamai_without_the_instance_finds_nothing_unless_metadata_must_be_there() {
    for (status, body, want) in [
        (
            404,
            r#"{"errors": [{"reason": "Not found"}, {"field": "id", "reason": "bad"}]}"#,
            "[404] Not found; [id] bad",
        ),
        (500, "oops", "[500] oops"),
        (200, "{not-json", "[000] "),
        (200, r#"{"id": "x"}"#, "[000] invalid type"),
    ] {
        let (h, _) = service(
            &[("OTEL_RESOURCE_ATTRIBUTES", "team=a")],
            move |m, p, hd| match (m, p) {
                ("GET", "/v1/instance") => (status, body.to_string()),
                _ => akamai(m, p, hd),
            },
        );
        assert_eq!(detected("detectors: [akamai, env]", &h), ["team=a"]);
        let e = failure(
            "detectors: [akamai]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        );
        assert!(
            e.contains(&format!(
                "detectors::0: failed to detect: akamai metadata unavailable: {want}"
            )),
            "{e}"
        );
    }
}

// ---- ibmcloud_classic ----

fn classic(_: &str, path: &str, _: &[String]) -> Answer {
    match path
        .strip_prefix("/rest/v3.1/SoftLayer_Resource_Metadata/")
        .unwrap_or("")
    {
        "getId.txt" => ok("123456789\n"),
        "getHostname.txt" => ok("my-classic-host"),
        "getDatacenter.txt" => ok("dal13"),
        "getAccountId.txt" => ok("987654"),
        "getGlobalIdentifier.txt" => ok("a1b2c3d4-e5f6-7890-abcd-ef1234567890"),
        _ => not_found(),
    }
}

#[test]
fn ibmcloud_classic_reads_the_resource_metadata() {
    let (h, seen) = service(&[], classic);
    assert_eq!(
        detected("detectors: [ibmcloud_classic]", &h),
        [
            "cloud.provider=ibm_cloud",
            "cloud.platform=ibm_cloud.classic",
            "cloud.account.id=987654",
            "cloud.availability_zone=dal13",
            "cloud.resource_id=a1b2c3d4-e5f6-7890-abcd-ef1234567890",
            "host.id=123456789",
            "host.name=my-classic-host",
        ]
    );
    assert_eq!(seen.try_iter().count(), 5);
    assert_eq!(
        detected(
            "detectors: [ibmcloud_classic]\nibmcloud_classic: {resource_attributes: {cloud.resource_id: {enabled: false}, host.name: {enabled: false}}}",
            &h
        ),
        [
            "cloud.provider=ibm_cloud",
            "cloud.platform=ibm_cloud.classic",
            "cloud.account.id=987654",
            "cloud.availability_zone=dal13",
            "host.id=123456789",
        ]
    );
}

#[test]
fn ibmcloud_classic_off_ibm_finds_nothing_unless_metadata_must_be_there() {
    let h = nowhere();
    assert_eq!(
        detected("detectors: [ibmcloud_classic, env]", &h),
        ["team=a"]
    );
    let e = failure(
        "detectors: [ibmcloud_classic]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains(
            "detectors::0: failed to detect: ibmcloud classic metadata unavailable: failed to get "
        ),
        "{e}"
    );
    let (h, _) = service(&[], |m, p, hd| match p {
        "/rest/v3.1/SoftLayer_Resource_Metadata/getDatacenter.txt" => (500, "oops".into()),
        _ => classic(m, p, hd),
    });
    assert!(detected("detectors: [ibmcloud_classic]", &h).is_empty());
    let e = failure(
        "detectors: [ibmcloud_classic]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains("ibmcloud classic metadata unavailable: failed to get datacenter: getDatacenter.txt returned 500: oops"),
        "{e}"
    );
}

// ---- ibmcloud_vpc ----

/// The Collector's test instance, as the service answers it.
const VPC_INSTANCE: &str = r#"{
  "id": "0717_1e09281b-f177-46fb-b1f1-bc152b2e391a",
  "crn": "crn:v1:bluemix:public:is:us-south-1:a/123456789012::instance:0717_1e09281b-f177-46fb-b1f1-bc152b2e391a",
  "name": "my-instance",
  "profile": {"name": "bx2-2x8", "href": "x"},
  "zone": {"name": "us-south-1"},
  "image": {"id": "r006-ed3f775f-ad7e-4e37-ae62-7199b4988b00", "name": "ibm-ubuntu-22-04-4-minimal-amd64-3"},
  "status": "running"
}"#;

fn vpc(method: &str, path: &str, headers: &[String]) -> Answer {
    match (method, path) {
        ("PUT", "/identity/v1/token?version=2026-01-30")
            if has(headers, "metadata-flavor: ibm") =>
        {
            ok(r#"{"access_token": "tok-1", "expires_in": 300}"#)
        }
        ("GET", "/metadata/v1/instance?version=2026-01-30")
            if has(headers, "authorization: bearer tok-1") =>
        {
            ok(VPC_INSTANCE)
        }
        _ => (401, "unauthorized".into()),
    }
}

#[test]
fn ibmcloud_vpc_reads_the_instance_with_a_token() {
    let (h, seen) = service(&[], vpc);
    assert_eq!(
        detected("detectors: [ibmcloud_vpc]", &h),
        [
            "cloud.account.id=123456789012",
            "cloud.availability_zone=us-south-1",
            "cloud.platform=ibm_cloud.vpc",
            "cloud.provider=ibm_cloud",
            "cloud.region=us-south",
            "cloud.resource_id=crn:v1:bluemix:public:is:us-south-1:a/123456789012::instance:0717_1e09281b-f177-46fb-b1f1-bc152b2e391a",
            "host.id=0717_1e09281b-f177-46fb-b1f1-bc152b2e391a",
            "host.image.id=r006-ed3f775f-ad7e-4e37-ae62-7199b4988b00",
            "host.image.name=ibm-ubuntu-22-04-4-minimal-amd64-3",
            "host.name=my-instance",
            "host.type=bx2-2x8",
        ]
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [
            "PUT /identity/v1/token?version=2026-01-30",
            "GET /metadata/v1/instance?version=2026-01-30"
        ]
    );
    let r = detected(
        "detectors: [ibmcloud_vpc]\nibmcloud_vpc: {protocol: https, resource_attributes: {cloud.region: {enabled: false}, host.type: {enabled: false}}}",
        &h,
    );
    assert_eq!(r.len(), 9, "{r:?}");
    assert!(!r
        .iter()
        .any(|a| a.starts_with("cloud.region") || a.starts_with("host.type")));
    // Empty values are left out; provider and platform stay.
    let (h, _) = service(&[], |m, p, hd| match m {
        "GET" => ok(r#"{"id": "i-1", "zone": null}"#),
        _ => vpc(m, p, hd),
    });
    assert_eq!(
        detected("detectors: [ibmcloud_vpc]", &h),
        [
            "cloud.platform=ibm_cloud.vpc",
            "cloud.provider=ibm_cloud",
            "host.id=i-1"
        ]
    );
    let e = failure(
        "detectors: [ibmcloud_vpc]\nibmcloud_vpc: {protocol: ftp}",
        &h,
    );
    assert!(
        e.contains("processors::resourcedetection::ibmcloud_vpc::protocol: invalid protocol \"ftp\": must be \"http\" or \"https\""),
        "{e}"
    );
}

#[test]
fn ibmcloud_vpc_off_ibm_finds_nothing_unless_metadata_must_be_there() {
    let h = nowhere();
    assert_eq!(detected("detectors: [ibmcloud_vpc, env]", &h), ["team=a"]);
    let e = failure(
        "detectors: [ibmcloud_vpc]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    );
    assert!(
        e.contains("detectors::0: failed to detect: ibmcloud vpc metadata unavailable: failed to get instance identity token: failed to get metadata token"),
        "{e}"
    );
    for (method, status, body, want) in [
        (
            "PUT",
            200,
            r#"{"expires_in": 300}"#,
            "metadata token response missing access_token",
        ),
        ("PUT", 200, "nope", "failed to decode token response"),
        (
            "PUT",
            404,
            "Not Found",
            "token request returned 404: Not Found",
        ),
        (
            "GET",
            500,
            "oops",
            "instance metadata request returned 500: oops",
        ),
        (
            "GET",
            200,
            r#"{"zone": {"name": 3}}"#,
            "failed to decode instance metadata",
        ),
    ] {
        let (h, _) = service(&[], move |m, p, hd| {
            if m == method {
                (status, body.to_string())
            } else {
                vpc(m, p, hd)
            }
        });
        assert!(
            detected("detectors: [ibmcloud_vpc]", &h).is_empty(),
            "{body}"
        );
        let e = failure(
            "detectors: [ibmcloud_vpc]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        );
        assert!(
            e.contains(&format!(
                "ibmcloud vpc metadata unavailable: {}",
                if method == "PUT" {
                    format!("failed to get instance identity token: {want}")
                } else {
                    want.to_string()
                }
            )),
            "{e}"
        );
    }
}

/// The SDK's `regionFromZone` and `accountIDFromCRN`.
#[test]
fn ibmcloud_vpc_region_and_account() {
    use super::ibmcloud_vpc::{account_id_from_crn, region_from_zone};
    for (zone, want) in [
        ("us-south-1", "us-south"),
        ("eu-de-2", "eu-de"),
        ("nodash", "nodash"),
        ("-1", "-1"),
        ("", ""),
    ] {
        assert_eq!(region_from_zone(zone), want, "{zone}");
    }
    for (crn, want) in [
        (
            "crn:v1:bluemix:public:is:us-south-1:a/123456789012::instance:x",
            "123456789012",
        ),
        ("crn:v1:bluemix:public:is:us-south-1:123::instance:x", "123"),
        ("crn:v1:bluemix", ""),
        ("", ""),
    ] {
        assert_eq!(account_id_from_crn(crn), want, "{crn}");
    }
}

#[test]
fn the_new_detectors_sections_load_unused_when_not_listed() {
    make(
        "detectors: [env]\nnova: {labels: ['(']}\nibmcloud_vpc: {protocol: ftp}\nakamai: {resource_attributes: {x: {enabled: true}}}",
        &host(),
    )
    .unwrap();
}
