//! The `gcp` detector against a fake metadata server.

use std::sync::mpsc::Receiver;

use super::tests::{fake_http, host, make, resources, FakeHost};

/// A fake GCE metadata server on a TCP port: `GET /computeMetadata/v1/<key>`
/// answers the value `answers` gives `<key>` (404 if none), and only to a
/// request carrying `Metadata-Flavor: Google` (403 otherwise); `GET /`
/// answers as the real one, with `Metadata-Flavor: Google`. The requests
/// it saw come back through the channel, `(flavor)` marking the header.
fn fake_metadata(answers: Vec<(&'static str, &'static str)>) -> (String, Receiver<String>) {
    fake_http(move |method, path, headers| {
        let flavor = headers.iter().any(|h| h == "metadata-flavor: google");
        let (status, body) = match path.strip_prefix("/computeMetadata/v1/") {
            _ if path == "/" => (200, ""),
            Some(_) if !flavor => (403, "Missing Metadata-Flavor:Google header."),
            Some(key) => answers
                .iter()
                .find(|(k, _)| *k == key)
                .map_or((404, "Not Found"), |(_, v)| (200, *v)),
            None => (404, "Not Found"),
        };
        let seen = format!("{method} {path}{}", if flavor { " (flavor)" } else { "" });
        (
            status,
            "Metadata-Flavor: Google\r\nContent-Type: application/text\r\n",
            body.to_string(),
            seen,
        )
    })
}

/// A host whose only variables are `vars` and `GCE_METADATA_HOST` at `at`.
fn gcp_host(at: &str, vars: &[(&'static str, &'static str)]) -> FakeHost {
    let mut h = host();
    h.env.clear();
    h.env.insert(
        "GCE_METADATA_HOST",
        Box::leak(at.to_string().into_boxed_str()),
    );
    h.env.extend(vars.iter().copied());
    h
}

/// The detected attributes: the test batch's first resource, its own two
/// attributes left out.
fn detected(yaml: &str, h: &FakeHost) -> Vec<String> {
    resources(yaml, h)[0][2..].to_vec()
}

const PROJECT: (&str, &str) = ("project/project-id", "my-project\n");
const ID: (&str, &str) = ("instance/id", "4520031799277581759\n");

fn gce() -> Vec<(&'static str, &'static str)> {
    vec![
        PROJECT,
        ID,
        ("instance/zone", "projects/123456/zones/us-central1-a"),
        (
            "instance/machine-type",
            "projects/123456/machineTypes/e2-medium",
        ),
        ("instance/name", "vm-1\n"),
        (
            "instance/hostname",
            "vm-1.us-central1-a.c.my-project.internal",
        ),
        (
            "instance/attributes/created-by",
            "projects/123456/zones/us-central1-a/instanceGroupManagers/mig-1",
        ),
    ]
}

#[test]
fn gce_instance_with_its_managed_instance_group() {
    let (at, seen) = fake_metadata(gce());
    let h = gcp_host(&at, &[]);
    assert_eq!(
        detected("detectors: [gcp]", &h),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_compute_engine",
            "cloud.availability_zone=us-central1-a",
            "cloud.region=us-central1",
            "host.type=projects/123456/machineTypes/e2-medium",
            "host.id=4520031799277581759",
            "host.name=vm-1",
            "gcp.gce.instance_group_manager.name=mig-1",
            "gcp.gce.instance_group_manager.zone=us-central1-a",
        ]
    );
    // Every metadata request carried the header the server requires.
    let asked: Vec<String> = seen.try_iter().collect();
    assert!(!asked.is_empty());
    assert!(
        asked
            .iter()
            .all(|r| r.starts_with("GET /computeMetadata/v1/") && r.ends_with(" (flavor)")),
        "{asked:?}"
    );
    // The two off by default, turned on; one turned off.
    assert_eq!(
        detected(
            "detectors: [gcp]\ngcp: {resource_attributes: {gcp.gce.instance.hostname: {enabled: true}, \
             gcp.gce.instance.name: {enabled: true}, host.type: {enabled: false}, \
             cloud.account.id: {enabled: false}}}",
            &h
        ),
        [
            "cloud.provider=gcp",
            "cloud.platform=gcp_compute_engine",
            "cloud.availability_zone=us-central1-a",
            "cloud.region=us-central1",
            "host.id=4520031799277581759",
            "host.name=vm-1",
            "gcp.gce.instance.hostname=vm-1.us-central1-a.c.my-project.internal",
            "gcp.gce.instance.name=vm-1",
            "gcp.gce.instance_group_manager.name=mig-1",
            "gcp.gce.instance_group_manager.zone=us-central1-a",
        ]
    );
}

#[test]
fn gce_regional_group_and_none() {
    let mut md = gce();
    md[6].1 = "projects/123456/regions/us-central1/instanceGroupManagers/mig-r";
    let (at, _) = fake_metadata(md);
    let got = detected("detectors: [gcp]", &gcp_host(&at, &[]));
    assert_eq!(
        got[8..],
        [
            "gcp.gce.instance_group_manager.name=mig-r",
            "gcp.gce.instance_group_manager.region=us-central1",
        ]
    );
    // Created by something else than a group; no created-by at all.
    for created_by in [
        Some("projects/123456/zones/us-central1-a/instances/x"),
        None,
    ] {
        let mut md = gce();
        match created_by {
            Some(c) => md[6].1 = c,
            None => {
                md.pop();
            }
        }
        let (at, _) = fake_metadata(md);
        let got = detected(
            "detectors: [gcp]\nfail_on_missing_metadata: true",
            &gcp_host(&at, &[]),
        );
        assert_eq!(got.len(), 8, "{got:?}");
        assert_eq!(got[7], "host.name=vm-1");
    }
}

#[test]
fn gce_found_by_probing_the_metadata_server() {
    // No GCE_METADATA_HOST: the link-local server answers `GET /` with
    // `Metadata-Flavor: Google`, so this is Google Cloud.
    let (at, seen) = fake_metadata(gce());
    let mut h = host();
    h.env.clear();
    h.env
        .insert("TEST_LINK_LOCAL", Box::leak(at.into_boxed_str()));
    let got = detected("detectors: [gcp]", &h);
    assert_eq!(got[2], "cloud.platform=gcp_compute_engine", "{got:?}");
    assert_eq!(seen.try_iter().next().unwrap(), "GET /");
}

#[test]
fn gke_cluster_location_zone_or_region() {
    let mut md = vec![
        PROJECT,
        ID,
        ("instance/attributes/cluster-location", "us-central1-c"),
        ("instance/attributes/cluster-name", "prod-cluster"),
        ("instance/name", "gke-prod-pool-1-abcd\n"),
        ("instance/zone", "projects/123456/zones/us-central1-c"),
        (
            "instance/machine-type",
            "projects/123456/machineTypes/e2-standard-4",
        ),
    ];
    let k8s = [("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
    let (at, _) = fake_metadata(md.clone());
    assert_eq!(
        detected("detectors: [gcp]", &gcp_host(&at, &k8s)),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_kubernetes_engine",
            "cloud.availability_zone=us-central1-c",
            "cloud.region=us-central1",
            "k8s.cluster.name=prod-cluster",
            "host.id=4520031799277581759",
            "host.name=gke-prod-pool-1-abcd",
        ]
    );
    // A regional cluster; no instance name (workload identity): host.name
    // is fallible, not missing metadata.
    md[2].1 = "europe-west1";
    md.remove(4);
    let (at, _) = fake_metadata(md.clone());
    assert_eq!(
        detected(
            "detectors: [gcp]\nfail_on_missing_metadata: true",
            &gcp_host(&at, &k8s)
        ),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_kubernetes_engine",
            "cloud.region=europe-west1",
            "k8s.cluster.name=prod-cluster",
            "host.id=4520031799277581759",
        ]
    );
    // Kubernetes without a cluster-location: not GKE, a GCE VM.
    md.remove(2);
    let (at, _) = fake_metadata(md);
    let got = detected("detectors: [gcp]", &gcp_host(&at, &k8s));
    assert_eq!(got[2], "cloud.platform=gcp_compute_engine", "{got:?}");
}

const RUN: [(&str, &str); 3] = [
    PROJECT,
    ("instance/id", "00bf4bf02d3e9f1e7b\n"),
    ("instance/region", "projects/123456/regions/us-east1"),
];

#[test]
fn cloud_run_service_job_and_function() {
    let (at, _) = fake_metadata(RUN.to_vec());
    let service = gcp_host(
        &at,
        &[
            ("K_CONFIGURATION", "svc-a"),
            ("K_SERVICE", "svc-a"),
            ("K_REVISION", "svc-a-00001-xyz"),
        ],
    );
    assert_eq!(
        detected("detectors: [gcp]", &service),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_cloud_run",
            "faas.name=svc-a",
            "faas.version=svc-a-00001-xyz",
            "faas.instance=00bf4bf02d3e9f1e7b",
            "cloud.region=us-east1",
        ]
    );
    let job = gcp_host(
        &at,
        &[
            ("CLOUD_RUN_JOB", "job-1"),
            ("CLOUD_RUN_EXECUTION", "job-1-7xk2p"),
            ("CLOUD_RUN_TASK_INDEX", "3"),
        ],
    );
    assert_eq!(
        detected("detectors: [gcp]", &job),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_cloud_run",
            "faas.name=job-1",
            "cloud.region=us-east1",
            "faas.instance=00bf4bf02d3e9f1e7b",
            "gcp.cloud_run.job.execution=job-1-7xk2p",
            "gcp.cloud_run.job.task_index=3",
        ]
    );
    let pool = gcp_host(
        &at,
        &[
            ("CLOUD_RUN_WORKER_POOL", "pool-1"),
            ("CLOUD_RUN_REVISION", "pool-1-00002"),
        ],
    );
    assert_eq!(
        detected("detectors: [gcp]", &pool)[2..5],
        [
            "cloud.platform=gcp_cloud_run",
            "faas.name=pool-1",
            "faas.version=pool-1-00002",
        ]
    );
    // FUNCTION_TARGET: Cloud Functions, before Cloud Run.
    let function = gcp_host(
        &at,
        &[
            ("FUNCTION_TARGET", "HelloWorld"),
            ("K_CONFIGURATION", "fn-1"),
            ("K_SERVICE", "fn-1"),
            ("K_REVISION", "fn-1-00003"),
        ],
    );
    assert_eq!(
        detected("detectors: [gcp]", &function),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_cloud_functions",
            "faas.name=fn-1",
            "faas.version=fn-1-00003",
            "faas.instance=00bf4bf02d3e9f1e7b",
            "cloud.region=us-east1",
        ]
    );
}

#[test]
fn app_engine_standard_and_flex() {
    let mut md = RUN.to_vec();
    md.push(("instance/zone", "projects/123456/zones/us-east1-b"));
    let (at, _) = fake_metadata(md);
    let gae = [
        ("GAE_SERVICE", "default"),
        ("GAE_VERSION", "20240101t000000"),
        ("GAE_INSTANCE", "aef-default-0001"),
    ];
    let mut standard = gcp_host(&at, &gae);
    standard.env.insert("GAE_ENV", "standard");
    assert_eq!(
        detected("detectors: [gcp]", &standard),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_app_engine",
            "faas.name=default",
            "faas.version=20240101t000000",
            "faas.instance=aef-default-0001",
            "cloud.availability_zone=us-east1-b",
            "cloud.region=us-east1",
        ]
    );
    assert_eq!(
        detected("detectors: [gcp]", &gcp_host(&at, &gae)),
        [
            "cloud.provider=gcp",
            "cloud.account.id=my-project",
            "cloud.platform=gcp_app_engine",
            "cloud.availability_zone=us-east1-b",
            "cloud.region=us-east1",
            "faas.name=default",
            "faas.version=20240101t000000",
            "faas.instance=aef-default-0001",
        ]
    );
}

#[test]
fn bare_metal_solution_from_its_variables_alone() {
    // No metadata server anywhere: the variables are enough.
    let mut h = host();
    h.env.clear();
    h.env.extend([
        ("BMS_PROJECT_ID", "bms-project"),
        ("BMS_REGION", "us-west2"),
        ("BMS_INSTANCE_ID", "bms-host-1"),
    ]);
    assert_eq!(
        detected("detectors: [gcp]", &h),
        [
            "cloud.provider=gcp",
            "cloud.account.id=bms-project",
            "cloud.platform=gcp_bare_metal_solution",
            "host.name=bms-host-1",
            "cloud.region=us-west2",
        ]
    );
}

#[test]
fn off_google_cloud_nothing_even_when_metadata_must_be_there() {
    // No GCE_METADATA_HOST and no server at the link-local address (the
    // fake host's refuses): not Google Cloud. The Collector returns an
    // empty resource and no error here, fail_on_missing_metadata or not.
    let mut h = host();
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    h.files
        .insert("/sys/class/dmi/id/product_name", "Google Compute Engine\n");
    let started = std::time::Instant::now();
    assert_eq!(detected("detectors: [gcp, env]", &h), ["team=a"]);
    assert_eq!(
        detected("detectors: [gcp, env]\nfail_on_missing_metadata: true", &h),
        ["team=a"]
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    // A server that is not Google's: no Metadata-Flavor in its answer.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = other.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut c in other.incoming().flatten() {
            let _ = c.read(&mut [0; 1024]);
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    h.env
        .insert("TEST_LINK_LOCAL", Box::leak(at.into_boxed_str()));
    assert_eq!(detected("detectors: [gcp, env]", &h), ["team=a"]);
}

#[test]
fn missing_metadata_is_left_out_or_fails_the_start() {
    // GCE without an instance id.
    let mut md = gce();
    md.remove(1);
    let (at, _) = fake_metadata(md);
    let h = gcp_host(&at, &[]);
    let got = detected("detectors: [gcp]", &h);
    assert_eq!(got.len(), 9, "{got:?}");
    assert!(!got.iter().any(|a| a.starts_with("host.id")), "{got:?}");
    let e = make(
        "detectors: [env, gcp]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains(
            "processors::resourcedetection::detectors::1: failed to detect: \
             metadata: GCE metadata \"instance/id\" not defined"
        ),
        "{e}"
    );
    // GCE_METADATA_HOST names a server with none of the platform's keys:
    // an unknown platform, the provider and project only.
    let (at, _) = fake_metadata(vec![PROJECT]);
    assert_eq!(
        detected("detectors: [gcp]", &gcp_host(&at, &[])),
        ["cloud.provider=gcp", "cloud.account.id=my-project"]
    );
}

#[test]
fn gcp_config_errors_at_their_key() {
    let h = host();
    for (yaml, want) in [
        (
            "detectors: [gcp]\ngcp: {labels: ['^team$']}",
            "processors::resourcedetection::gcp::labels: profcol does not read GCE instance labels",
        ),
        (
            "detectors: [gcp]\ngcp: {resource_attributes: {host.arch: {enabled: true}}}",
            "processors::resourcedetection::gcp::resource_attributes::host.arch: unknown attribute \"host.arch\" of the gcp detector",
        ),
        ("detectors: [gcp]\ngcp: {project: x}", "unknown field \"project\""),
    ] {
        let e = make(yaml, &h).err().unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains(want), "{yaml}\nwant {want}\ngot {e}");
    }
    // Unused when gcp is not listed, as every detector's section.
    make("detectors: [env]\ngcp: {labels: ['^team$']}", &h).unwrap();
}
