//! The detectors on the Kubernetes API (`k8s_api`, its alias `k8snode`,
//! `kubeadm`) against a fake API server, and `openshift` against a fake
//! OpenShift API.

use super::tests::{fake_http, host, make, resources, FakeHost};

const NODE: &str =
    r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","uid":"node-uid-1"}}"#;
const KUBE_SYSTEM: &str = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","uid":"cluster-uid-1"}}"#;
const KUBEADM_CONFIG: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kubeadm-config","namespace":"kube-system"},"data":{"ClusterConfiguration":"apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nclusterName: my-cluster\nnetworking:\n  podSubnet: 10.244.0.0/16\n"}}"#;

fn status(code: u16, reason: &str) -> String {
    format!(
        r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"{reason}","reason":"{reason}","code":{code}}}"#
    )
}

/// A fake Kubernetes API: `answer(path)` gives the status and body; each
/// request's path comes back through the channel. The host points the
/// client at it, names the node `node-1`.
fn kube_host(answer: fn(&str) -> (u16, String)) -> (FakeHost, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, _| {
        let (status, body) = answer(path);
        (
            status,
            "Connection: close\r\nContent-Type: application/json\r\n",
            body,
            format!("{method} {path}"),
        )
    });
    let mut h = host();
    h.env.clear();
    h.env.insert("K8S_NODE_NAME", "node-1");
    h.env.insert(
        "TEST_KUBE_API",
        Box::leak(format!("http://{at}").into_boxed_str()),
    );
    (h, seen)
}

fn cluster(path: &str) -> (u16, String) {
    match path {
        "/api/v1/nodes/node-1" => (200, NODE.into()),
        "/api/v1/namespaces/kube-system" => (200, KUBE_SYSTEM.into()),
        "/api/v1/namespaces/kube-system/configmaps/kubeadm-config" => (200, KUBEADM_CONFIG.into()),
        _ => (404, status(404, "NotFound")),
    }
}

#[test]
fn k8s_api_reads_the_node_and_the_cluster_uid() {
    let (h, seen) = kube_host(cluster);
    // The Collector's order: the node's UID, its name, the cluster's UID.
    for name in ["k8s_api", "k8snode"] {
        let r = resources(&format!("detectors: [{name}]"), &h);
        assert_eq!(
            r[0][2..],
            [
                "k8s.node.uid=node-uid-1",
                "k8s.node.name=node-1",
                "k8s.cluster.uid=cluster-uid-1"
            ],
            "{name}: {r:?}"
        );
    }
    let paths: Vec<String> = seen.try_iter().collect();
    assert!(
        paths.contains(&"GET /api/v1/nodes/node-1".to_string()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"GET /api/v1/namespaces/kube-system".to_string()),
        "{paths:?}"
    );
    // Each name reads its own section.
    let r = resources(
        "detectors: [k8s_api]\nk8s_api: {resource_attributes: {k8s.cluster.uid: {enabled: false}, k8s.node.uid: {enabled: false}}}\n\
         k8snode: {resource_attributes: {k8s.node.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][2..], ["k8s.node.name=node-1"], "{r:?}");
    let r = resources(
        "detectors: [k8snode]\nk8snode: {resource_attributes: {k8s.node.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(
        r[0][2..],
        ["k8s.node.uid=node-uid-1", "k8s.cluster.uid=cluster-uid-1"],
        "{r:?}"
    );
}

#[test]
fn k8s_api_without_its_node_finds_nothing_unless_metadata_must_be_there() {
    let (h, _) = kube_host(|path| match path {
        "/api/v1/namespaces/kube-system" => (200, KUBE_SYSTEM.into()),
        _ => (404, status(404, "NotFound")),
    });
    let r = resources("detectors: [k8s_api]", &h);
    assert_eq!(r[0].len(), 2, "{r:?}");
    let e = make(
        "detectors: [k8s_api]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("detectors::0: failed to detect: failed getting k8s node UID: failed to fetch node with name node-1 from K8s API"),
        "{e}"
    );
    // Only the cluster's UID asked for: found.
    let r = resources(
        "detectors: [k8s_api]\nk8s_api: {resource_attributes: {k8s.node.name: {enabled: false}, k8s.node.uid: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][2..], ["k8s.cluster.uid=cluster-uid-1"], "{r:?}");
}

#[test]
fn k8s_api_skips_the_cluster_uid_it_may_not_read() {
    let (h, _) = kube_host(|path| match path {
        "/api/v1/nodes/node-1" => (200, NODE.into()),
        _ => (403, status(403, "Forbidden")),
    });
    let r = resources("detectors: [k8s_api]\nfail_on_missing_metadata: true", &h);
    assert_eq!(
        r[0][2..],
        ["k8s.node.uid=node-uid-1", "k8s.node.name=node-1"],
        "{r:?}"
    );
    // Another failure is an error whatever fail_on_missing_metadata
    // (profcol logs it without).
    let (h, _) = kube_host(|path| match path {
        "/api/v1/nodes/node-1" => (200, NODE.into()),
        _ => (500, status(500, "InternalError")),
    });
    let e = make(
        "detectors: [k8s_api]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("failed to detect: failed getting k8s cluster UID: failed to fetch kube-system namespace from K8s API"),
        "{e}"
    );
    assert_eq!(
        resources("detectors: [k8s_api]\ntimeout: 1s", &h)[0].len(),
        2
    );
}

#[test]
fn k8s_api_malformed_answers_are_errors() {
    let (h, _) = kube_host(|_| (200, "{not json".into()));
    let e = make(
        "detectors: [k8s_api]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(e.contains("failed getting k8s node UID"), "{e}");
    let e = make(
        "detectors: [k8s_api]\nk8s_api: {node_from_env_var: MY_NODE}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("detectors::0: failed creating detector: node name can't be found: set MY_NODE"),
        "{e}"
    );
}

#[test]
fn kubeadm_reads_the_cluster_name_and_uid() {
    let (h, seen) = kube_host(cluster);
    let r = resources("detectors: [kubeadm]", &h);
    assert_eq!(
        r[0][2..],
        [
            "k8s.cluster.name=my-cluster",
            "k8s.cluster.uid=cluster-uid-1"
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [
            "GET /api/v1/namespaces/kube-system/configmaps/kubeadm-config",
            "GET /api/v1/namespaces/kube-system"
        ]
    );
    let r = resources(
        "detectors: [kubeadm]\nkubeadm: {resource_attributes: {k8s.cluster.name: {enabled: false}}}",
        &h,
    );
    assert_eq!(r[0][2..], ["k8s.cluster.uid=cluster-uid-1"], "{r:?}");
    assert!(
        seen.try_iter().all(|p| !p.contains("configmaps")),
        "a disabled attribute is not asked for"
    );
}

#[test]
fn kubeadm_without_its_config_finds_nothing_unless_metadata_must_be_there() {
    for (answer, want) in [
        (
            (|path: &str| match path {
                "/api/v1/namespaces/kube-system" => (200, KUBE_SYSTEM.to_string()),
                _ => (404, status(404, "NotFound")),
            }) as fn(&str) -> (u16, String),
            "failed getting k8s cluster name: failed to fetch ConfigMap with name kubeadm-config and namespace kube-system from K8s API",
        ),
        (
            |path: &str| match path {
                "/api/v1/namespaces/kube-system" => (200, KUBE_SYSTEM.to_string()),
                _ => (200, KUBEADM_CONFIG.replace("ClusterConfiguration\"", "Other\"")),
            },
            "failed getting k8s cluster name: ClusterConfiguration key not found in ConfigMap kubeadm-config",
        ),
        (
            |path: &str| match path {
                "/api/v1/namespaces/kube-system" => (200, KUBE_SYSTEM.to_string()),
                _ => (200, KUBEADM_CONFIG.replace("clusterName: my-cluster", "[not: a map")),
            },
            "failed getting k8s cluster name: failed to parse ClusterConfiguration YAML",
        ),
        (
            |path: &str| match path {
                "/api/v1/namespaces/kube-system/configmaps/kubeadm-config" => {
                    (200, KUBEADM_CONFIG.to_string())
                }
                _ => (403, status(403, "Forbidden")),
            },
            "failed getting k8s cluster uid: failed to fetch Namespace kube-system from K8s API",
        ),
    ] {
        let (h, _) = kube_host(answer);
        let r = resources("detectors: [kubeadm]", &h);
        assert_eq!(r[0].len(), 2, "{want}: {r:?}");
        let e = make(
            "detectors: [kubeadm]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &h,
        )
        .err()
        .unwrap();
        assert!(e.contains(&format!("detectors::0: failed to detect: {want}")), "{e}");
    }
}

const INFRASTRUCTURE: &str = r#"{"apiVersion":"config.openshift.io/v1","kind":"Infrastructure","status":{"controlPlaneTopology":"HighlyAvailable","infrastructureName":"test-d-bm4rt","infrastructureTopology":"HighlyAvailable","platformStatus":{"type":"AWS","aws":{"region":"US-East-1"}}}}"#;

/// A fake OpenShift API answering `body` with `status` to a request with
/// the token `t0k3n`; the host is a pod's, its service account's token
/// `t0k3n`, and the section's address points at the fake.
fn openshift_host(
    status: u16,
    body: String,
) -> (FakeHost, String, std::sync::mpsc::Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let authorized = headers.iter().any(|h| h == "authorization: bearer t0k3n");
        let (status, body) = match path {
            "/apis/config.openshift.io/v1/infrastructures/cluster/status" if authorized => {
                (status, body.clone())
            }
            _ => (401, String::new()),
        };
        (status, "", body, format!("{method} {path}"))
    });
    let mut h = host();
    h.env.clear();
    h.files.insert(
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "t0k3n",
    );
    (h, format!("http://{at}"), seen)
}

#[test]
fn openshift_reads_the_infrastructure() {
    let (h, at, seen) = openshift_host(200, INFRASTRUCTURE.into());
    let yaml =
        format!("detectors: [openshift]\nopenshift: {{address: '{at}', tls: {{insecure: true}}}}");
    let r = resources(&yaml, &h);
    assert_eq!(
        r[0][2..],
        [
            "k8s.cluster.name=test-d-bm4rt",
            "cloud.provider=aws",
            "cloud.platform=aws_openshift",
            "cloud.region=us-east-1"
        ],
        "{r:?}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /apis/config.openshift.io/v1/infrastructures/cluster/status"]
    );
    // A token in the section, an attribute off; the other platforms.
    let yaml = format!(
        "detectors: [openshift]\nopenshift: {{address: '{at}', token: t0k3n, tls: {{insecure: true}}, \
         resource_attributes: {{cloud.platform: {{enabled: false}}}}}}"
    );
    let mut h2 = h.clone();
    h2.files.clear();
    let r = resources(&yaml, &h2);
    assert_eq!(
        r[0][2..],
        [
            "k8s.cluster.name=test-d-bm4rt",
            "cloud.provider=aws",
            "cloud.region=us-east-1"
        ],
        "{r:?}"
    );
    for (platform, want) in [
        (
            r#""type":"Azure","azure":{"cloudName":"AzurePublicCloud"}"#,
            vec![
                "cloud.provider=azure",
                "cloud.platform=azure.openshift",
                "cloud.region=azurepubliccloud",
            ],
        ),
        (
            r#""type":"GCP","gcp":{"region":"europe-west1"}"#,
            vec![
                "cloud.provider=gcp",
                "cloud.platform=gcp_openshift",
                "cloud.region=europe-west1",
            ],
        ),
        (
            r#""type":"IBMCloud","ibmcloud":{"location":"eu-de"}"#,
            vec![
                "cloud.provider=ibm_cloud",
                "cloud.platform=ibm_cloud_openshift",
                "cloud.region=eu-de",
            ],
        ),
        (
            r#""type":"OpenStack","openstack":{"cloudName":"Cloud-1"}"#,
            vec!["cloud.region=cloud-1"],
        ),
        (r#""type":"BareMetal""#, vec![]),
    ] {
        let body = INFRASTRUCTURE.replace(r#""type":"AWS","aws":{"region":"US-East-1"}"#, platform);
        let (h, at, _) = openshift_host(200, body);
        let yaml = format!(
            "detectors: [openshift]\nopenshift: {{address: '{at}', tls: {{insecure: true}}}}"
        );
        let r = resources(&yaml, &h);
        let mut all = vec!["k8s.cluster.name=test-d-bm4rt"];
        all.extend(want);
        assert_eq!(r[0][2..], all, "{platform}: {r:?}");
    }
}

#[test]
fn openshift_without_the_api_finds_nothing_unless_metadata_must_be_there() {
    for (status, body, want) in [
        (
            500,
            String::new(),
            "OpenShift API returned status 500 Internal Server Error",
        ),
        (
            200,
            "{not json".to_string(),
            "unable to unmarshal response, err:",
        ),
        (
            200,
            r#"{"status":{"infrastructureName":7}}"#.to_string(),
            "unable to unmarshal response",
        ),
    ] {
        let (h, at, _) = openshift_host(status, body);
        let base = format!(
            "detectors: [openshift]\nopenshift: {{address: '{at}', tls: {{insecure: true}}}}"
        );
        assert_eq!(resources(&base, &h)[0].len(), 2);
        let e = make(
            &format!("{base}\ntimeout: 1s\nfail_on_missing_metadata: true"),
            &h,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!(
                "detectors::0: failed to detect: openshift metadata unavailable: {want}"
            )),
            "{e}"
        );
    }
}

#[test]
fn openshift_needs_its_address_token_and_ca() {
    let mut h = host();
    h.env.clear();
    // No token file.
    let e = make("detectors: [openshift]", &h).err().unwrap();
    assert!(
        e.contains("detectors::0: failed creating detector: open /var/run/secrets/kubernetes.io/serviceaccount/token"),
        "{e}"
    );
    h.files
        .insert("/var/run/secrets/kubernetes.io/serviceaccount/token", "t");
    let e = make("detectors: [openshift]", &h).err().unwrap();
    assert!(e.contains("could not extract openshift api host"), "{e}");
    h.env.insert("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    let e = make("detectors: [openshift]", &h).err().unwrap();
    assert!(e.contains("could not extract openshift api port"), "{e}");
    h.env.insert("KUBERNETES_SERVICE_PORT", "443");
    // The service account's CA, by default.
    let e = make("detectors: [openshift]", &h).err().unwrap();
    assert!(
        e.contains("failed to load CA CertPool File: open /var/run/secrets/kubernetes.io/serviceaccount/ca.crt"),
        "{e}"
    );
    h.files.insert(
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        "not a certificate",
    );
    let e = make("detectors: [openshift]", &h).err().unwrap();
    assert!(e.contains("failed to load CA CertPool"), "{e}");
    let e = make(
        "detectors: [openshift]\nopenshift: {tls: {ca_file: /a.pem, ca_pem: x}}",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("processors::resourcedetection::openshift::tls: provide either a CA file"),
        "{e}"
    );
}
