//! The `resourcedetection` processor through the binary: what
//! `OTEL_RESOURCE_ATTRIBUTES` of the collector's own process and the host
//! say lands on every resource it exports.

use crate::common;

use std::time::{Duration, Instant};

use common::fake_k8s::FakeK8s;
use common::{client, request, Ports, Running, Sink};
use profcol_model::proto::{any_value::Value as A, request_into_data};

fn config(sink: &Sink, processor: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
processors:
  resourcedetection:
{processor}
exporters:
  otlp:
    endpoint: 127.0.0.1:{}
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [resourcedetection]
      exporters: [otlp]
"#,
        sink.addr.port()
    )
}

/// Each exported resource's attributes, `k=v`.
async fn through(processor: &str, env: &str) -> Vec<Vec<String>> {
    through_with(processor, &[("OTEL_RESOURCE_ATTRIBUTES", env.as_ref())]).await
}

async fn through_with(processor: &str, env: &[(&str, &std::ffi::OsStr)]) -> Vec<Vec<String>> {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profcol.yaml");
    std::fs::write(&path, config(&sink, processor)).unwrap();
    let mut cmd = common::profcol();
    cmd.arg("--config").arg(&path).envs(env.iter().copied());
    let p = Running::ready(&mut cmd).await;
    let sent = request("otlp/two-resources-request.bin");
    client(p.grpc_port()).await.export(sent).await.unwrap();
    let started = Instant::now();
    while sink.received().is_empty() {
        if started.elapsed() > Duration::from_secs(20) {
            p.fail("nothing arrived").await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = request_into_data(sink.received().remove(0));
    got.resource_profiles
        .iter()
        .map(|rp| {
            rp.resource
                .iter()
                .flat_map(|r| &r.attributes)
                .map(
                    |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::StringValue(s)) => format!("{}={s}", kv.key),
                        other => format!("{}={other:?}", kv.key),
                    },
                )
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn detected_attributes_land_on_every_resource() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let env = "service.name=from-env,deployment.environment.name=staging%20eu";
    let got = through("    detectors: [env, system]", env).await;
    assert_eq!(got.len(), 2, "{got:?}");
    for attrs in &got {
        for want in [
            "service.name=from-env".to_string(),
            "deployment.environment.name=staging eu".into(),
            format!("host.name={}", host.trim()),
            "os.type=linux".into(),
        ] {
            assert!(attrs.contains(&want), "{want} missing: {attrs:?}");
        }
        assert_eq!(
            attrs
                .iter()
                .filter(|a| a.starts_with("service.name="))
                .count(),
            1,
            "{attrs:?}"
        );
    }

    // `override: false` keeps what the sender said.
    let kept = through("    detectors: [env]\n    override: false", env).await;
    let sent = request_into_data(request("otlp/two-resources-request.bin"));
    let mut named = 0;
    for (attrs, rp) in kept.iter().zip(&sent.resource_profiles) {
        let own = rp
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref()?.value.as_ref());
        if let Some(A::StringValue(name)) = own {
            assert!(attrs.contains(&format!("service.name={name}")), "{attrs:?}");
            named += 1;
        }
        assert!(attrs.contains(&"deployment.environment.name=staging eu".to_string()));
    }
    assert!(
        named > 0,
        "the request names no service: the check above ran on nothing"
    );
}

fn node(name: &str, uid: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": uid, "labels": {"kubernetes.io/os": "linux"}},
    })
}

/// `k8snode` (the Collector's deprecated name of `k8s_api`) reads this
/// node (named by the downward API's variable) and `kube-system` from the
/// API server, here the fake one through a kubeconfig.
#[tokio::test]
async fn k8snode_adds_the_nodes_name_and_uid() {
    let fake = FakeK8s::start().await;
    fake.apply("nodes", node("node-a", "5f1c-node-a"));
    fake.apply("nodes", node("node-b", "5f1c-node-b"));
    fake.apply(
        "namespaces",
        serde_json::json!({"metadata": {"name": "kube-system", "uid": "c1u5-ter"}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path());
    let env = [
        ("KUBECONFIG", kubeconfig.as_os_str()),
        ("MY_NODE", "node-b".as_ref()),
    ];
    let got = through_with(
        "    detectors: [k8snode]\n    k8snode: {auth_type: kubeConfig, node_from_env_var: MY_NODE}",
        &env,
    )
    .await;
    assert_eq!(got.len(), 2, "{got:?}");
    for attrs in &got {
        assert!(
            attrs.contains(&"k8s.node.name=node-b".to_string()),
            "{attrs:?}"
        );
        assert!(
            attrs.contains(&"k8s.node.uid=5f1c-node-b".to_string()),
            "{attrs:?}"
        );
        assert!(
            attrs.contains(&"k8s.cluster.uid=c1u5-ter".to_string()),
            "{attrs:?}"
        );
    }
    for path in ["/api/v1/nodes/node-b", "/api/v1/namespaces/kube-system"] {
        assert!(
            fake.requests().iter().any(|r| r == path),
            "{path}: {:?}",
            fake.requests()
        );
    }
    // Without `get` on namespaces (an older RBAC), the node's attributes
    // and a warning, as the Collector's.
    fake.forbid("namespaces");
    let got = through_with(
        "    detectors: [k8s_api]\n    k8s_api: {auth_type: kubeConfig, node_from_env_var: MY_NODE}",
        &env,
    )
    .await;
    assert!(
        got[0].contains(&"k8s.node.name=node-b".to_string())
            && !got[0].iter().any(|a| a.starts_with("k8s.cluster.uid")),
        "{got:?}"
    );
    // The uid toggled off.
    let got = through_with(
        "    detectors: [k8snode]\n    k8snode:\n      auth_type: kubeConfig\n      node_from_env_var: MY_NODE\n      resource_attributes: {k8s.node.uid: {enabled: false}}",
        &env,
    )
    .await;
    assert!(
        got[0].contains(&"k8s.node.name=node-b".to_string()),
        "{got:?}"
    );
    assert!(
        !got[0].iter().any(|a| a.starts_with("k8s.node.uid")),
        "{got:?}"
    );
}

/// As the Collector v0.161.0: a node the API does not give (missing,
/// forbidden) adds nothing and the pipeline runs without it, or, with
/// `fail_on_missing_metadata`, does not start.
#[tokio::test]
async fn k8snode_missing_or_forbidden_node() {
    let fake = FakeK8s::start().await;
    fake.apply("nodes", node("node-a", "5f1c-node-a"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path());
    let env = [
        ("KUBECONFIG", kubeconfig.as_os_str()),
        ("K8S_NODE_NAME", "node-gone".as_ref()),
        ("OTEL_RESOURCE_ATTRIBUTES", "team=a".as_ref()),
    ];
    let processor =
        "    detectors: [k8snode, env]\n    timeout: 10s\n    k8snode: {auth_type: kubeConfig}";
    let got = through_with(processor, &env).await;
    assert!(got[0].contains(&"team=a".to_string()), "{got:?}");
    assert!(
        !got[0].iter().any(|a| a.starts_with("k8s.node.")),
        "{got:?}"
    );
    // Asked, not retried: the Collector's detector gives an empty
    // resource, not an error, for a node it cannot read.
    let gets = fake
        .requests()
        .iter()
        .filter(|r| *r == "/api/v1/nodes/node-gone")
        .count();
    assert_eq!(gets, 1, "{:?}", fake.requests());

    fake.forbid("nodes");
    let env = [env[0], ("K8S_NODE_NAME", "node-a".as_ref()), env[2]];
    let failing = format!("{processor}\n    fail_on_missing_metadata: true");
    let sink = Sink::start().await;
    let path = dir.path().join("profcol.yaml");
    std::fs::write(&path, config(&sink, &failing)).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_profcol"))
            .arg("--config")
            .arg(&path)
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("profcol stopped")
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("resourcedetection::detectors::0: failed to detect: failed getting k8s node UID: failed to fetch node with name node-a from K8s API")
            && err.contains("forbidden"),
        "{err}"
    );
    // `validate` checks the config, as the Collector's, without detecting
    // (the Collector detects when it starts).
    let asked = fake.requests().len();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_profcol"))
        .arg("validate")
        .arg("--config")
        .arg(&path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fake.requests().len(), asked, "{:?}", fake.requests());
}

/// A fake metadata service on a port of its own, for the process's
/// variables: `answer` gets a request's lines (lower case, the request
/// line first) and gives the body of a 200, or `None` for `miss`. Its
/// address.
fn fake_metadata(
    miss: &'static str,
    answer: impl Fn(&[String]) -> Option<&'static str> + Send + 'static,
) -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut head = Vec::new();
            loop {
                let mut l = String::new();
                if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                    break;
                }
                head.push(l.to_ascii_lowercase());
            }
            let resp = match answer(&head) {
                Some(b) => format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{b}", b.len()),
                None => format!("HTTP/1.1 {miss}\r\nContent-Length: 0\r\n\r\n"),
            };
            let _ = conn.write_all(resp.as_bytes());
        }
    });
    at
}

/// The path of a request's first line.
fn path(head: &[String]) -> Option<&str> {
    head.first()?.split_whitespace().nth(1)
}

/// A fake EC2 instance metadata service (IMDSv2: reads need the token a
/// PUT gave), for `AWS_EC2_METADATA_SERVICE_ENDPOINT`.
fn fake_ec2_metadata() -> String {
    let at = fake_metadata("401 Unauthorized", |head| {
        let token = head
            .iter()
            .any(|l| l.starts_with("x-aws-ec2-metadata-token: tok"));
        match (path(head), token) {
            (Some("/latest/api/token"), false) => Some("tok"),
            (Some("/latest/meta-data/instance-id"), true) => Some("i-0abc"),
            (Some("/latest/meta-data/hostname"), true) => Some("ip-10-1-2-3.ec2.internal"),
            (Some("/latest/dynamic/instance-identity/document"), true) => Some(
                r#"{"accountId":"210987654321","availabilityZone":"us-east-1a","imageId":"ami-1","instanceId":"i-0abc","instanceType":"c7i.xlarge","region":"us-east-1"}"#,
            ),
            _ => None,
        }
    });
    format!("http://{at}")
}

/// `ec2` asks the instance metadata service the process's variables name,
/// and every resource gets the instance's attributes.
#[tokio::test]
async fn ec2_adds_the_instances_attributes() {
    let at = fake_ec2_metadata();
    let env = [("AWS_EC2_METADATA_SERVICE_ENDPOINT", at.as_ref())];
    let got = through_with("    detectors: [ec2]", &env).await;
    assert_eq!(got.len(), 2, "{got:?}");
    for attrs in &got {
        for want in [
            "cloud.provider=aws",
            "cloud.platform=aws_ec2",
            "cloud.region=us-east-1",
            "cloud.account.id=210987654321",
            "cloud.availability_zone=us-east-1a",
            "host.id=i-0abc",
            "host.image.id=ami-1",
            "host.type=c7i.xlarge",
            "host.name=ip-10-1-2-3.ec2.internal",
        ] {
            assert!(
                attrs.contains(&want.to_string()),
                "{want} missing: {attrs:?}"
            );
        }
    }
}

/// A fake ECS task metadata endpoint (v4): the task's metadata at
/// `<uri>/task`, this container's at `<uri>`.
fn fake_ecs_metadata() -> String {
    let at = fake_metadata("404 Not Found", |head| match path(head) {
        Some("/v4/4f0c9ab2/task") => Some(
            r#"{"Cluster":"prod","TaskARN":"arn:aws:ecs:eu-west-1:210987654321:task/prod/4f0c9ab2","Family":"shop","Revision":"12","AvailabilityZone":"eu-west-1b","LaunchType":"FARGATE","Containers":[{"DockerId":"4f0c9ab2-1","Type":"NORMAL","KnownStatus":"RUNNING","LogDriver":"awslogs","LogOptions":{"awslogs-group":"/ecs/shop","awslogs-region":"eu-west-1","awslogs-stream":"ecs/app/4f0c9ab2"}},{"DockerId":"4f0c9ab2-2","Type":"NORMAL","KnownStatus":"RUNNING"}]}"#,
        ),
        Some("/v4/4f0c9ab2") => Some(r#"{"DockerId":"4f0c9ab2-2","Type":"NORMAL"}"#),
        _ => None,
    });
    format!("http://{at}/v4/4f0c9ab2")
}

/// `ecs` asks the task metadata endpoint the ECS agent names in the
/// process's `ECS_CONTAINER_METADATA_URI_V4`, and every resource gets the
/// task's attributes.
#[tokio::test]
async fn ecs_adds_the_tasks_attributes() {
    let uri = fake_ecs_metadata();
    let env = [("ECS_CONTAINER_METADATA_URI_V4", uri.as_ref())];
    let got = through_with("    detectors: [ecs]", &env).await;
    assert_eq!(got.len(), 2, "{got:?}");
    for attrs in &got {
        for want in [
            "cloud.provider=aws",
            "cloud.platform=aws_ecs",
            "cloud.region=eu-west-1",
            "cloud.account.id=210987654321",
            "cloud.availability_zone=eu-west-1b",
            "aws.ecs.task.arn=arn:aws:ecs:eu-west-1:210987654321:task/prod/4f0c9ab2",
            "aws.ecs.task.id=4f0c9ab2",
            "aws.ecs.task.family=shop",
            "aws.ecs.task.revision=12",
            "aws.ecs.cluster.arn=arn:aws:ecs:eu-west-1:210987654321:cluster/prod",
            "aws.ecs.launchtype=fargate",
        ] {
            assert!(
                attrs.contains(&want.to_string()),
                "{want} missing: {attrs:?}"
            );
        }
        assert!(
            attrs
                .iter()
                .any(|a| a.starts_with("aws.log.group.names=") && a.contains("\"/ecs/shop\"")),
            "{attrs:?}"
        );
    }
}
