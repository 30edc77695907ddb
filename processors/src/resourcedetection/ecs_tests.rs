//! The `ecs` detector against a fake task metadata endpoint.

use std::sync::mpsc::Receiver;

use profcol_model::proto::any_value::Value as A;

use super::ecs::parse_task_arn;
use super::tests::{fake_http, host, make, FakeHost};
use crate::transform::tests::{batch, run};

/// A Fargate task (TMDE v4, as AWS documents it): the cluster as an ARN,
/// the task ARN in the new format; the application, this collector as its
/// sidecar, and an init container that has stopped, all logging to
/// CloudWatch.
const FARGATE_TASK: &str = r#"{
  "Cluster": "arn:aws:ecs:us-west-2:111122223333:cluster/default",
  "TaskARN": "arn:aws:ecs:us-west-2:111122223333:task/default/e9028f8d5d8e4f258373e7b93ce9a3c3",
  "Family": "curltest",
  "Revision": "3",
  "DesiredStatus": "RUNNING",
  "KnownStatus": "RUNNING",
  "Limits": {"CPU": 0.25, "Memory": 512},
  "PullStartedAt": "2020-10-08T20:47:16.053330955Z",
  "PullStoppedAt": "2020-10-08T20:47:19.592684631Z",
  "AvailabilityZone": "us-west-2a",
  "LaunchType": "FARGATE",
  "Containers": [
    {
      "DockerId": "e9028f8d5d8e4f258373e7b93ce9a3c3-2495160603",
      "Name": "curl",
      "DockerName": "curl",
      "Image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/curltest:latest",
      "ImageID": "sha256:25f3695bedfb454a50f12d127839a68ad3caf91e451c1da073db34c542c4d2cb",
      "Labels": {
        "com.amazonaws.ecs.cluster": "arn:aws:ecs:us-west-2:111122223333:cluster/default",
        "com.amazonaws.ecs.container-name": "curl",
        "com.amazonaws.ecs.task-arn": "arn:aws:ecs:us-west-2:111122223333:task/default/e9028f8d5d8e4f258373e7b93ce9a3c3",
        "com.amazonaws.ecs.task-definition-family": "curltest",
        "com.amazonaws.ecs.task-definition-version": "3"
      },
      "DesiredStatus": "RUNNING",
      "KnownStatus": "RUNNING",
      "Limits": {"CPU": 10, "Memory": 128},
      "CreatedAt": "2020-10-08T20:47:20.567813946Z",
      "StartedAt": "2020-10-08T20:47:20.567813946Z",
      "Type": "NORMAL",
      "LogDriver": "awslogs",
      "LogOptions": {
        "awslogs-create-group": "true",
        "awslogs-group": "/ecs/containerlogs",
        "awslogs-region": "us-west-2",
        "awslogs-stream": "ecs/curl/e9028f8d5d8e4f258373e7b93ce9a3c3"
      },
      "ContainerARN": "arn:aws:ecs:us-west-2:111122223333:container/05966557-f16c-49cb-9352-24b3a0dcd0e1",
      "Networks": [
        {
          "NetworkMode": "awsvpc",
          "IPv4Addresses": ["192.0.2.3"],
          "IPv4SubnetCIDRBlock": "192.0.2.0/24"
        }
      ]
    },
    {
      "DockerId": "e9028f8d5d8e4f258373e7b93ce9a3c3-3693182271",
      "Name": "otel-collector",
      "KnownStatus": "RUNNING",
      "Type": "NORMAL",
      "LogDriver": "awslogs",
      "LogOptions": {
        "awslogs-group": "/ecs/collector",
        "awslogs-region": "us-west-2",
        "awslogs-stream": "ecs/otel-collector/e9028f8d5d8e4f258373e7b93ce9a3c3"
      }
    },
    {
      "DockerId": "e9028f8d5d8e4f258373e7b93ce9a3c3-1037416911",
      "Name": "migrate",
      "KnownStatus": "STOPPED",
      "ExitCode": 0,
      "Type": "NORMAL",
      "LogDriver": "awslogs",
      "LogOptions": {
        "awslogs-group": "/ecs/migrate",
        "awslogs-region": "us-west-2",
        "awslogs-stream": "ecs/migrate/e9028f8d5d8e4f258373e7b93ce9a3c3"
      }
    }
  ],
  "ClockDrift": {"ClockErrorBound": 0.5458234999999999, "ReferenceTimestamp": "2021-09-07T16:57:44Z", "ClockSynchronizationStatus": "SYNCHRONIZED"},
  "EphemeralStorageMetrics": {"Utilized": 261, "Reserved": 20496}
}"#;

/// This collector's own container, as `${ECS_CONTAINER_METADATA_URI_V4}`
/// answers.
const FARGATE_SELF: &str = r#"{
  "DockerId": "e9028f8d5d8e4f258373e7b93ce9a3c3-3693182271",
  "Name": "otel-collector",
  "DockerName": "otel-collector",
  "Image": "public.ecr.aws/aws-observability/aws-otel-collector:latest",
  "Labels": {"com.amazonaws.ecs.container-name": "otel-collector"},
  "DesiredStatus": "RUNNING",
  "KnownStatus": "RUNNING",
  "Limits": {"CPU": 2},
  "Type": "NORMAL",
  "LogDriver": "awslogs",
  "LogOptions": {
    "awslogs-group": "/ecs/collector",
    "awslogs-region": "us-west-2",
    "awslogs-stream": "ecs/otel-collector/e9028f8d5d8e4f258373e7b93ce9a3c3"
  },
  "ContainerARN": "arn:aws:ecs:us-west-2:111122223333:container/1bdcca8b-f905-4ee6-885c-4064cb70f6e6"
}"#;

/// A task on EC2 (TMDE v4): the cluster's short name, the task ARN in the
/// old format, the `awsvpc` pause container, two applications logging to
/// CloudWatch (one's group in another region), one to `json-file`, and
/// this collector logging nowhere.
const EC2_TASK: &str = r#"{
  "Cluster": "default",
  "TaskARN": "arn:aws:ecs:us-west-2:111122223333:task/158d1c8083dd49d6b527399fd6414f5c",
  "Family": "curltest",
  "ServiceName": "MyService",
  "Revision": "26",
  "DesiredStatus": "RUNNING",
  "KnownStatus": "RUNNING",
  "AvailabilityZone": "us-west-2d",
  "VPCID": "vpc-1234567890abcdef0",
  "LaunchType": "EC2",
  "Containers": [
    {
      "DockerId": "598cba581fe3f939459eaba1e071d5c93bb2c49b7d1ba7db6bb19deeb70d8e38",
      "Name": "~internal~ecs~pause",
      "DesiredStatus": "RESOURCES_PROVISIONED",
      "KnownStatus": "RESOURCES_PROVISIONED",
      "Limits": {"CPU": 0, "Memory": 0},
      "Type": "CNI_PAUSE"
    },
    {
      "DockerId": "ee08638adaaf009d78c248913f629e38299471d45fe7dc944d1039077e3424ca",
      "Name": "curl",
      "KnownStatus": "RUNNING",
      "Limits": {"CPU": 10, "Memory": 128},
      "Type": "NORMAL",
      "LogDriver": "awslogs",
      "LogOptions": {
        "awslogs-create-group": "true",
        "awslogs-group": "/ecs/containerlogs",
        "awslogs-region": "us-west-2",
        "awslogs-stream": "ecs/curl/cd189a933e5849daa93386466019ab50"
      }
    },
    {
      "DockerId": "1f73d099cbc8c4d5e2bd6c8e52e1f4b6f34c6b9f2d3c7c3bd9e3f9c1d6a0e2f1",
      "Name": "web",
      "KnownStatus": "RUNNING",
      "Type": "NORMAL",
      "LogDriver": "awslogs",
      "LogOptions": {
        "awslogs-group": "web",
        "awslogs-region": "eu-west-1",
        "awslogs-stream": "web/web/cd189a933e5849daa93386466019ab50"
      }
    },
    {
      "DockerId": "7d2b1e0c5f0f4f5e9d8c1b2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e",
      "Name": "sidecar",
      "KnownStatus": "RUNNING",
      "Type": "NORMAL",
      "LogDriver": "json-file",
      "LogOptions": {"max-size": "10m"}
    },
    {
      "DockerId": "c0ffee0c5f0f4f5e9d8c1b2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e",
      "Name": "otel-collector",
      "KnownStatus": "RUNNING",
      "Type": "NORMAL"
    }
  ]
}"#;

const EC2_SELF: &str = r#"{"DockerId": "c0ffee0c5f0f4f5e9d8c1b2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e", "Name": "otel-collector", "KnownStatus": "RUNNING", "Type": "NORMAL"}"#;

/// A task through TMDE v3 (the ECS agent before 1.39.0): no launch type,
/// no log driver or options.
const V3_TASK: &str = r#"{
  "Cluster": "my-cluster",
  "TaskARN": "arn:aws:ecs:us-west-2:123456789123:task/my-cluster/123",
  "Family": "family",
  "Revision": "26",
  "AvailabilityZone": "us-west-2a",
  "Containers": [
    {"DockerId": "123", "Name": "app", "KnownStatus": "RUNNING", "Type": "NORMAL"},
    {"DockerId": "05281997", "Name": "collector", "KnownStatus": "RUNNING", "Type": "NORMAL"}
  ]
}"#;

const V3_SELF: &str =
    r#"{"DockerId": "05281997", "Name": "collector", "KnownStatus": "RUNNING", "Type": "NORMAL"}"#;

const ID: &str = "/v4/e9028f8d5d8e4f258373e7b93ce9a3c3-3693182271";

/// A fake task metadata endpoint at `ID`: `${ID}/task` answers
/// `task`, `${ID}` answers `me`, each a status and a body. The requests it
/// saw come back through the channel, `(json)` marking the content type
/// ecsutil's client sends.
fn fake_tmde(task: (u16, &'static str), me: (u16, &'static str)) -> (String, Receiver<String>) {
    let (at, seen) = fake_http(move |method, path, headers| {
        let json = headers
            .iter()
            .any(|h| h == "content-type: application/json");
        let (status, body) = match path.strip_prefix(ID) {
            Some("/task") => task,
            Some("") => me,
            _ => (404, "404 page not found"),
        };
        let note = if json { " (json)" } else { "" };
        (
            status,
            "",
            body.to_string(),
            format!("{method} {path}{note}"),
        )
    });
    (format!("http://{at}{ID}"), seen)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A host whose only variables are `vars`.
fn ecs_host(vars: &[(&'static str, String)]) -> FakeHost {
    let mut h = host();
    h.env.clear();
    h.env
        .extend(vars.iter().map(|(k, v)| (*k, leak(v.clone()))));
    h
}

fn v4(uri: &str) -> FakeHost {
    ecs_host(&[("ECS_CONTAINER_METADATA_URI_V4", uri.to_string())])
}

/// Why `detectors: [ecs]` with `fail_on_missing_metadata` (and a 1 s
/// timeout) cannot be made on `h`.
fn failure(h: &FakeHost) -> String {
    make(
        "detectors: [ecs]\ntimeout: 1s\nfail_on_missing_metadata: true",
        h,
    )
    .err()
    .expect("the processor fails to start")
}

/// The detected attributes, `k=v`, lists as `k=[a, b]`: the test batch's
/// first resource, its own two attributes left out.
fn detected(yaml: &str, h: &FakeHost) -> Vec<String> {
    let mut p = make(yaml, h).unwrap();
    let mut b = batch();
    run(&mut *p, &mut b);
    let attrs = &b.data().resource_profiles[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    let text = |v: &Option<A>| match v {
        Some(A::StringValue(s)) => s.clone(),
        other => format!("{other:?}"),
    };
    attrs[2..]
        .iter()
        .map(
            |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(A::ArrayValue(a)) => {
                    let items: Vec<String> = a.values.iter().map(|v| text(&v.value)).collect();
                    format!("{}=[{}]", kv.key, items.join(", "))
                }
                other => format!("{}={}", kv.key, text(&other.cloned())),
            },
        )
        .collect()
}

#[test]
fn fargate_task_with_its_logs_and_cluster_arn() {
    let (at, seen) = fake_tmde((200, FARGATE_TASK), (200, FARGATE_SELF));
    let h = v4(&at);
    assert_eq!(
        detected("detectors: [ecs]", &h),
        [
            "cloud.provider=aws",
            "cloud.platform=aws_ecs",
            "aws.ecs.task.arn=arn:aws:ecs:us-west-2:111122223333:task/default/e9028f8d5d8e4f258373e7b93ce9a3c3",
            "aws.ecs.task.family=curltest",
            "aws.ecs.task.revision=3",
            "cloud.account.id=111122223333",
            "cloud.region=us-west-2",
            "aws.ecs.task.id=e9028f8d5d8e4f258373e7b93ce9a3c3",
            "aws.ecs.cluster.arn=arn:aws:ecs:us-west-2:111122223333:cluster/default",
            "cloud.availability_zone=us-west-2a",
            "aws.ecs.launchtype=fargate",
            // Only the application: not this collector, not the stopped
            // init container.
            "aws.log.group.names=[/ecs/containerlogs]",
            "aws.log.group.arns=[arn:aws:logs:us-west-2:111122223333:log-group:/ecs/containerlogs]",
            "aws.log.stream.names=[ecs/curl/e9028f8d5d8e4f258373e7b93ce9a3c3]",
            "aws.log.stream.arns=[arn:aws:logs:us-west-2:111122223333:log-group:/ecs/containerlogs:log-stream:ecs/curl/e9028f8d5d8e4f258373e7b93ce9a3c3]",
        ]
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [format!("GET {ID}/task (json)"), format!("GET {ID} (json)")]
    );
}

#[test]
fn ec2_task_with_an_old_task_arn_and_the_clusters_short_name() {
    let (at, _) = fake_tmde((200, EC2_TASK), (200, EC2_SELF));
    assert_eq!(
        detected("detectors: [ecs]", &v4(&at)),
        [
            "cloud.provider=aws",
            "cloud.platform=aws_ecs",
            "aws.ecs.task.arn=arn:aws:ecs:us-west-2:111122223333:task/158d1c8083dd49d6b527399fd6414f5c",
            "aws.ecs.task.family=curltest",
            "aws.ecs.task.revision=26",
            "cloud.account.id=111122223333",
            "cloud.region=us-west-2",
            "aws.ecs.task.id=158d1c8083dd49d6b527399fd6414f5c",
            "aws.ecs.cluster.arn=arn:aws:ecs:us-west-2:111122223333:cluster/default",
            "cloud.availability_zone=us-west-2d",
            "aws.ecs.launchtype=ec2",
            // The pause container, the json-file one and this collector
            // left out; each group's ARN in its own region.
            "aws.log.group.names=[/ecs/containerlogs, web]",
            "aws.log.group.arns=[arn:aws:logs:us-west-2:111122223333:log-group:/ecs/containerlogs, \
             arn:aws:logs:eu-west-1:111122223333:log-group:web]",
            "aws.log.stream.names=[ecs/curl/cd189a933e5849daa93386466019ab50, web/web/cd189a933e5849daa93386466019ab50]",
            "aws.log.stream.arns=[arn:aws:logs:us-west-2:111122223333:log-group:/ecs/containerlogs:log-stream:ecs/curl/cd189a933e5849daa93386466019ab50, \
             arn:aws:logs:eu-west-1:111122223333:log-group:web:log-stream:web/web/cd189a933e5849daa93386466019ab50]",
        ]
    );
}

#[test]
fn v3_endpoint_when_there_is_no_v4_one() {
    // The Collector's Test_ecsDetectV3WithTaskArnVersion2: no launch type,
    // no logs. An invalid v4 URI is passed over as a missing one.
    let (at, _) = fake_tmde((200, V3_TASK), (200, V3_SELF));
    let want = [
        "cloud.provider=aws",
        "cloud.platform=aws_ecs",
        "aws.ecs.task.arn=arn:aws:ecs:us-west-2:123456789123:task/my-cluster/123",
        "aws.ecs.task.family=family",
        "aws.ecs.task.revision=26",
        "cloud.account.id=123456789123",
        "cloud.region=us-west-2",
        "aws.ecs.task.id=123",
        "aws.ecs.cluster.arn=arn:aws:ecs:us-west-2:123456789123:cluster/my-cluster",
        "cloud.availability_zone=us-west-2a",
    ];
    let h = ecs_host(&[("ECS_CONTAINER_METADATA_URI", at.clone())]);
    assert_eq!(detected("detectors: [ecs]", &h), want);
    let h = ecs_host(&[
        ("ECS_CONTAINER_METADATA_URI_V4", "endpoint".into()),
        ("ECS_CONTAINER_METADATA_URI", format!("  {at}\n")),
    ]);
    assert_eq!(detected("detectors: [ecs]", &h), want);
}

#[test]
fn attributes_turned_off_and_unknown_ones() {
    let (at, _) = fake_tmde((200, FARGATE_TASK), (200, FARGATE_SELF));
    let h = v4(&at);
    let got = detected(
        "detectors: [ecs]\necs: {resource_attributes: {cloud.provider: {enabled: false}, \
         aws.ecs.task.arn: {enabled: false}, aws.log.group.arns: {enabled: false}, \
         aws.log.stream.arns: {enabled: false}, aws.ecs.launchtype: {enabled: false}}}",
        &h,
    );
    let keys: Vec<&str> = got.iter().map(|a| a.split('=').next().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "cloud.platform",
            "aws.ecs.task.family",
            "aws.ecs.task.revision",
            "cloud.account.id",
            "cloud.region",
            "aws.ecs.task.id",
            "aws.ecs.cluster.arn",
            "cloud.availability_zone",
            "aws.log.group.names",
            "aws.log.stream.names",
        ]
    );
    for (yaml, want) in [
        (
            "detectors: [ecs]\necs: {resource_attributes: {aws.ecs.cluster.name: {enabled: true}}}",
            "processors::resourcedetection::ecs::resource_attributes::aws.ecs.cluster.name: unknown attribute \"aws.ecs.cluster.name\" of the ecs detector",
        ),
        ("detectors: [ecs]\necs: {endpoint: x}", "unknown field \"endpoint\""),
    ] {
        let e = make(yaml, &h).err().unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains(want), "{yaml}\nwant {want}\ngot {e}");
    }
    // Not listed: its section is not read.
    make(
        "detectors: [env]\necs: {resource_attributes: {nope: {enabled: true}}}",
        &h,
    )
    .unwrap();
}

#[test]
fn outside_ecs_nothing_unless_metadata_must_be_there() {
    let mut h = ecs_host(&[("OTEL_RESOURCE_ATTRIBUTES", "team=a".into())]);
    assert_eq!(detected("detectors: [ecs, env]", &h), ["team=a"]);
    let e = make("detectors: [env, ecs]\nfail_on_missing_metadata: true", &h)
        .err()
        .unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::1: failed to detect: ecs metadata unavailable: no task metadata endpoint detected"),
        "{e}"
    );
    // Not URIs: as if unset.
    for bad in [
        "",
        "endpoint",
        "   ",
        ":80/v4",
        "/v4/x",
        "http://",
        "http://169.254.170.2:x/v4",
        "http://[fd00:ec2::254/v4",
    ] {
        h.env.insert("ECS_CONTAINER_METADATA_URI_V4", bad);
        h.env.insert("ECS_CONTAINER_METADATA_URI", bad);
        assert_eq!(detected("detectors: [ecs, env]", &h), ["team=a"], "{bad}");
    }
    // One profcol cannot reach stops the start.
    h.env.insert(
        "ECS_CONTAINER_METADATA_URI_V4",
        "https://169.254.170.2/v4/x",
    );
    let e = make("detectors: [ecs]", &h).err().unwrap();
    assert!(
        e.contains("processors::resourcedetection::detectors::0: failed creating detector: ECS_CONTAINER_METADATA_URI_V4 \"https://169.254.170.2/v4/x\": profcol reaches the task metadata endpoint over http:// only"),
        "{e}"
    );
    // Another scheme: a URI, which no request reaches.
    h.env
        .insert("ECS_CONTAINER_METADATA_URI_V4", "ftp://169.254.170.2/v4/x");
    assert_eq!(
        detected("detectors: [ecs, env]\ntimeout: 1s", &h),
        ["team=a"]
    );
    let e = failure(&h);
    assert!(
        e.contains(
            "detectors::0: failed to detect: unable to fetch task metadata: \
                    Get \"ftp://169.254.170.2/v4/x/task\": unsupported protocol scheme \"ftp\""
        ),
        "{e}"
    );
}

#[test]
fn a_task_endpoint_that_fails_is_a_failure() {
    let (at, seen) = fake_tmde((500, "{\"error\": \"agent busy\"}"), (200, FARGATE_SELF));
    let mut h = v4(&at);
    h.env.insert("OTEL_RESOURCE_ATTRIBUTES", "team=a");
    // Logged; the start goes on with the other detectors'.
    assert_eq!(
        detected("detectors: [ecs, env]\ntimeout: 1s", &h),
        ["team=a"]
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [format!("GET {ID}/task (json)")]
    );
    let e = make(
        "detectors: [ecs, env]\ntimeout: 1s\nfail_on_missing_metadata: true",
        &h,
    )
    .err()
    .unwrap();
    assert!(
        e.contains(&format!(
            "processors::resourcedetection::detectors::0: failed to detect: unable to fetch task metadata: \
             request GET {at}/task failed - \"500 Internal Server Error\""
        )),
        "{e}"
    );
    // Nobody listening.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}/v4/x", free.local_addr().unwrap());
    drop(free);
    let e = failure(&v4(&gone));
    assert!(
        e.contains(&format!(
            "failed to detect: unable to fetch task metadata: Get \"{gone}/task\": dial tcp"
        )),
        "{e}"
    );
    // An answer that is not the task's metadata.
    let (at, _) = fake_tmde((200, r#"{"Revision": 26}"#), (200, FARGATE_SELF));
    let e = failure(&v4(&at));
    assert!(
        e.contains("detectors::0: failed to detect: unable to fetch task metadata: \
                    encountered unexpected error reading response from ECS Task Metadata Endpoint: "),
        "{e}"
    );
}

#[test]
fn a_container_endpoint_that_fails_leaves_the_tasks_attributes() {
    let (at, seen) = fake_tmde((200, FARGATE_TASK), (404, "404 page not found"));
    let h = v4(&at);
    let got = detected("detectors: [ecs]", &h);
    assert_eq!(got.len(), 11, "{got:?}");
    assert_eq!(got[10], "aws.ecs.launchtype=fargate");
    assert!(!got.iter().any(|a| a.starts_with("aws.log.")), "{got:?}");
    assert_eq!(seen.try_iter().count(), 2);
    let e = failure(&h);
    assert!(
        e.contains(&format!(
            "detectors::0: failed to detect: ecs container metadata unavailable: request GET {at} failed - \"404 Not Found\""
        )),
        "{e}"
    );
}

#[test]
fn answers_are_read_as_the_collector_reads_them() {
    // Unknown keys, fields the detector does not read, null fields and
    // containers, and text after the document: as Go's json.Decoder takes
    // them. A container without log options logs nowhere.
    let task = r#"{"TaskARN": "arn:aws:ecs:eu-central-1:210987654321:task/prod/abc",
        "Cluster": "prod", "Family": null, "Revision": "7", "LaunchType": "fargate",
        "Extra": [1, 2], "Limits": {"Memory": -1}, "Containers": [null,
        {"DockerId": "app", "Type": "NORMAL", "KnownStatus": "RUNNING", "LogDriver": "awslogs",
         "LogOptions": null},
        {"DockerId": "web", "Type": "NORMAL", "KnownStatus": "RUNNING", "LogDriver": "awslogs",
         "LogOptions": {"awslogs-group": "g", "awslogs-region": "eu-central-1", "awslogs-stream": "s"}}]}
        trailing"#;
    let (at, _) = fake_tmde((200, task), (200, "null"));
    assert_eq!(
        detected("detectors: [ecs]", &v4(&at)),
        [
            "cloud.provider=aws",
            "cloud.platform=aws_ecs",
            "aws.ecs.task.arn=arn:aws:ecs:eu-central-1:210987654321:task/prod/abc",
            "aws.ecs.task.family=",
            "aws.ecs.task.revision=7",
            "cloud.account.id=210987654321",
            "cloud.region=eu-central-1",
            "aws.ecs.task.id=abc",
            "aws.ecs.cluster.arn=arn:aws:ecs:eu-central-1:210987654321:cluster/prod",
            "aws.ecs.launchtype=fargate",
            "aws.log.group.names=[g]",
            "aws.log.group.arns=[arn:aws:logs:eu-central-1:210987654321:log-group:g]",
            "aws.log.stream.names=[s]",
            "aws.log.stream.arns=[arn:aws:logs:eu-central-1:210987654321:log-group:g:log-stream:s]",
        ]
    );
    // A field the detector reads of the wrong type fails the decoding, in
    // either answer; an empty answer too.
    let task_error = "unable to fetch task metadata: \
                      encountered unexpected error reading response from ECS Task Metadata Endpoint: ";
    let me_error = "ecs container metadata unavailable: \
                    encountered unexpected error reading response from ECS Container Metadata Endpoint: ";
    for (task, me, want) in [
        (r#"{"Containers": {}}"#, "{}", task_error),
        (
            r#"{"Containers": [{"LogOptions": {"awslogs-group": 1}}]}"#,
            "{}",
            task_error,
        ),
        ("[]", "{}", task_error),
        ("", "{}", task_error),
        (FARGATE_TASK, r#"{"DockerId": 5}"#, me_error),
        (FARGATE_TASK, "", me_error),
    ] {
        let (at, _) = fake_tmde((200, task), (200, me));
        let e = make(
            "detectors: [ecs]\ntimeout: 1s\nfail_on_missing_metadata: true",
            &v4(&at),
        )
        .err()
        .unwrap_or_else(|| panic!("{task} {me} decoded"));
        assert!(
            e.contains(&format!("detectors::0: failed to detect: {want}")),
            "{task} {me}\nwant {want}\ngot {e}"
        );
    }
}

#[test]
fn the_requests_go_to_the_uris_path() {
    // A trailing slash: the task's metadata is still one level down.
    let (at, seen) = fake_tmde((200, V3_TASK), (200, V3_SELF));
    let got = detected("detectors: [ecs]", &v4(&format!("{at}/")));
    assert_eq!(
        got[2],
        "aws.ecs.task.arn=arn:aws:ecs:us-west-2:123456789123:task/my-cluster/123"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        [format!("GET {ID}/task (json)"), format!("GET {ID}/ (json)")]
    );
}

#[test]
fn task_arns_old_and_new() {
    let parsed = |arn| {
        let (region, account, id) = parse_task_arn(arn);
        [region, account, id]
    };
    assert_eq!(
        parsed("arn:aws:ecs:us-west-2:123456789123:task/123"),
        ["us-west-2", "123456789123", "123"]
    );
    assert_eq!(
        parsed("arn:aws:ecs:us-west-2:123456789123:task/my-cluster/123"),
        ["us-west-2", "123456789123", "123"]
    );
    // Only the sixth part is read.
    assert_eq!(
        parsed("arn:aws-cn:ecs:cn-north-1:123456789123:task/c/1:2"),
        ["cn-north-1", "123456789123", "1"]
    );
    // Five parts: the Collector panics; no task id here.
    assert_eq!(
        parsed("arn:aws:ecs:us-west-2:123456789123"),
        ["us-west-2", "123456789123", ""]
    );
    assert_eq!(parsed("task/123"), ["", "", ""]);
    assert_eq!(parsed(""), ["", "", ""]);
}
