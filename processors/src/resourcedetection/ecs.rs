//! The `ecs` detector (the Collector's `internal/aws/ecs`, over
//! `internal/aws/ecsutil`): the task's cloud, `aws.ecs.*` and CloudWatch
//! log attributes from the ECS task metadata endpoint, whose URI the ECS
//! agent sets in `ECS_CONTAINER_METADATA_URI_V4` (v4), else
//! `ECS_CONTAINER_METADATA_URI` (v3): the task's metadata at
//! `${uri}/task`, then this container's at `${uri}`. Outside ECS (neither
//! variable a URI) it finds nothing, unless `fail_on_missing_metadata`.
//!
//! The URI is parsed by the `url` crate (the WHATWG URL standard) where
//! ecsutil uses Go's `url.ParseRequestURI`; they differ only on odd
//! values (one without a scheme, `/v4/x`, counts as unset here; a tab is
//! dropped, a bad `%` escape kept). The answers are decoded with serde,
//! only the fields the detector reads.
//!
//! ecsutil's client is Go's `http.Client` with confighttp's defaults: no
//! timeout of its own (30s to connect), no retry; the processor retries the
//! whole detection with backoff until `timeout`, as here (see
//! `detect::retrying`), which also bounds each attempt. Unlike Go's client
//! profcol follows no redirect, uses no `HTTP_PROXY`, and reaches the
//! endpoint over plain `http://` only (an `https://` URI is refused when
//! the processor is made): the ECS agent's endpoint is
//! `http://169.254.170.2/v4/<id>`.

use hyper::body::Bytes;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use url::Url;

use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue};

use super::detect::{enabled, Host};
use super::http::request;

/// The attributes, in the order the Collector sets them, all on by
/// default (its `metadata.yaml`).
pub(super) const ATTRIBUTES: [(&str, bool); 15] = [
    ("cloud.provider", true),
    ("cloud.platform", true),
    ("aws.ecs.task.arn", true),
    ("aws.ecs.task.family", true),
    ("aws.ecs.task.revision", true),
    ("cloud.account.id", true),
    ("cloud.region", true),
    ("aws.ecs.task.id", true),
    ("aws.ecs.cluster.arn", true),
    ("cloud.availability_zone", true),
    ("aws.ecs.launchtype", true),
    ("aws.log.group.names", true),
    ("aws.log.group.arns", true),
    ("aws.log.stream.names", true),
    ("aws.log.stream.arns", true),
];

const V4: &str = "ECS_CONTAINER_METADATA_URI_V4";
const V3: &str = "ECS_CONTAINER_METADATA_URI";

/// A task metadata endpoint: the URI a variable gives.
pub(super) type Endpoint = Url;

/// The endpoint as ecsutil's `GetTMEFromEnv` finds it: the v4 variable's
/// URI, else the v3 one's; `None` when neither is a URI (not on ECS: the
/// Collector's detector then detects nothing). An `https://` one is a
/// setup error: profcol cannot reach it.
pub(super) fn endpoint(host: &dyn Host) -> Result<Option<Endpoint>, String> {
    let mut why = Vec::new();
    for var in [V4, V3] {
        let uri = host.env(var).unwrap_or_default();
        match Url::parse(uri.trim()) {
            Ok(url) if url.scheme() == "https" => {
                return Err(format!(
                    "{var} {:?}: profcol reaches the task metadata endpoint over http:// only",
                    uri.trim()
                ))
            }
            Ok(url) => return Ok(Some(url)),
            Err(e) => why.push(format!(
                "no valid endpoint for environment variable {var}: {e}"
            )),
        }
    }
    tracing::debug!(why = %why.join("; "), "no ECS task metadata endpoint detected");
    Ok(None)
}

/// Without an endpoint: nothing, or with `fail_on_missing_metadata` the
/// Collector's error.
pub(super) fn unavailable(fail: bool) -> Result<Vec<KeyValue>, String> {
    if fail {
        return Err("ecs metadata unavailable: no task metadata endpoint detected".into());
    }
    Ok(Vec::new())
}

/// ecsutil's `Get`: `GET ${uri}/${segment}` (`${uri}` when `segment` is
/// empty) with `Content-Type: application/json`; the body of a 200, else
/// its error.
async fn get(at: &Endpoint, segment: &str) -> Result<Bytes, String> {
    let mut url = at.clone();
    if !segment.is_empty() {
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push(segment);
        }
    }
    let failed = |why: String| format!("Get {:?}: {why}", url.as_str());
    if url.scheme() != "http" {
        return Err(failed(format!(
            "unsupported protocol scheme {:?}",
            url.scheme()
        )));
    }
    // An http URL has a host. User information (which Go would send as
    // basic authentication) is not sent: the agent's endpoint has none.
    let host = url.host_str().unwrap_or_default();
    let addr = format!("{host}:{}", url.port().unwrap_or(80));
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| failed(format!("dial tcp {addr}: {e}")))?;
    let authority = match url.port() {
        Some(_) => addr.as_str(),
        None => host,
    };
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let (status, body) = request(
        stream,
        authority,
        hyper::Method::GET,
        &target,
        Some(("Content-Type", "application/json")),
    )
    .await
    .map_err(failed)?;
    if status != 200 {
        let reason = hyper::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        return Err(format!(
            "request GET {url} failed - {:?}",
            format!("{status} {reason}").trim_end()
        ));
    }
    Ok(body)
}

// The fields the detector reads of ecsutil's `TaskMetadata` and
// `ContainerMetadata`. As with Go's decoder, a missing or `null` field is
// empty, other keys are ignored and a value of the wrong type is an error.
// Keys are matched exactly, not also in another case as Go's: AWS writes
// these names. (No `#[serde(default)]`: with it `[]` would decode as an
// empty struct.)

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct Task {
    #[serde(rename = "TaskARN")]
    task_arn: Option<String>,
    family: Option<String>,
    revision: Option<String>,
    cluster: Option<String>,
    availability_zone: Option<String>,
    launch_type: Option<String>,
    containers: Option<Vec<Option<Container>>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct Container {
    docker_id: Option<String>,
    r#type: Option<String>,
    known_status: Option<String>,
    log_driver: Option<String>,
    log_options: Option<LogOptions>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct LogOptions {
    awslogs_group: Option<String>,
    awslogs_region: Option<String>,
    awslogs_stream: Option<String>,
}

/// An answer as Go's `json.Decoder` reads it: the first JSON value (what
/// follows is not read), `null` the empty struct.
fn decode<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, String> {
    let first = serde_json::Deserializer::from_slice(body)
        .into_iter::<Option<T>>()
        .next()
        .ok_or("EOF")?;
    Ok(first.map_err(|e| e.to_string())?.unwrap_or_default())
}

fn string(v: impl Into<String>) -> AnyValue {
    AnyValue {
        value: Some(A::StringValue(v.into())),
    }
}

fn strings(v: Vec<String>) -> AnyValue {
    AnyValue {
        value: Some(A::ArrayValue(ArrayValue {
            values: v.into_iter().map(string).collect(),
        })),
    }
}

pub(super) async fn detect(
    on: &[bool; 15],
    fail: bool,
    at: &Endpoint,
) -> Result<Vec<KeyValue>, String> {
    let Task {
        task_arn,
        family,
        revision,
        cluster,
        availability_zone,
        launch_type,
        containers,
    } = get(at, "task")
        .await
        .and_then(|body| {
            decode(&body).map_err(|e| {
                format!("encountered unexpected error reading response from ECS Task Metadata Endpoint: {e}")
            })
        })
        .map_err(|e| format!("unable to fetch task metadata: {e}"))?;
    let arn = task_arn.unwrap_or_default();
    let (region, account, task_id) = parse_task_arn(&arn);
    let present = |v: &str| (!v.is_empty()).then(|| string(v));
    // Only TMDE v4 gives the launch type.
    let launch_type = match launch_type.unwrap_or_default().to_lowercase().as_str() {
        "ec2" => Some(string("ec2")),
        "fargate" => Some(string("fargate")),
        _ => None,
    };
    let mut values: [Option<AnyValue>; 15] = [
        Some(string("aws")),
        Some(string("aws_ecs")),
        Some(string(arn.as_str())),
        Some(string(family.unwrap_or_default())),
        Some(string(revision.unwrap_or_default())),
        present(&account),
        present(&region),
        present(&task_id),
        // The endpoint gives the cluster's short name or its ARN.
        Some(string(cluster_arn(
            &cluster.unwrap_or_default(),
            &region,
            &account,
        ))),
        present(&availability_zone.unwrap_or_default()),
        launch_type,
        None,
        None,
        None,
        None,
    ];
    let me = get(at, "").await.and_then(|body| {
        decode::<Container>(&body).map_err(|e| {
            format!("encountered unexpected error reading response from ECS Container Metadata Endpoint: {e}")
        })
    });
    match me {
        Ok(me) => {
            if let Some(logs) = log_data(containers, &me, &account) {
                for (slot, list) in values[11..].iter_mut().zip(logs) {
                    *slot = Some(strings(list));
                }
            }
        }
        Err(e) if fail => return Err(format!("ecs container metadata unavailable: {e}")),
        // As the Collector: the task's attributes without the logs'.
        Err(e) => tracing::debug!(error = %e, "ECS container metadata unavailable"),
    }
    Ok(enabled(ATTRIBUTES.map(|(k, _)| k), values, on))
}

/// The Collector's `constructClusterArn`: a name with a colon is an ARN.
fn cluster_arn(cluster: &str, region: &str, account: &str) -> String {
    if cluster.contains(':') {
        return cluster.to_string();
    }
    format!("arn:aws:ecs:{region}:{account}:cluster/{cluster}")
}

/// The region, account and task id of a task ARN, old
/// (`arn:aws:ecs:<region>:<account>:task/<id>`) or new
/// (`...:task/<cluster>/<id>`); all empty when it has fewer than five
/// parts. (The Collector indexes the sixth part unchecked and panics on an
/// ARN of exactly five; here the task id is then empty.)
pub(super) fn parse_task_arn(arn: &str) -> (String, String, String) {
    let parts: Vec<&str> = arn.split(':').collect();
    if parts.len() < 5 {
        return Default::default();
    }
    let id = parts
        .get(5)
        .and_then(|info| info.rsplit('/').next())
        .unwrap_or("");
    (parts[3].to_string(), parts[4].to_string(), id.to_string())
}

/// The log groups and streams of the task's other containers that log to
/// CloudWatch (`NORMAL`, `RUNNING`, driver `awslogs`, log options given),
/// as names and ARNs: group names, group ARNs, stream names, stream ARNs;
/// `None` when no container qualifies. The collector's own container is
/// left out (it is taken to run as a sidecar).
fn log_data(
    containers: Option<Vec<Option<Container>>>,
    me: &Container,
    account: &str,
) -> Option<[Vec<String>; 4]> {
    let mut out: [Vec<String>; 4] = Default::default();
    for c in containers.into_iter().flatten().flatten() {
        let opts = c.log_options.unwrap_or_default();
        let (group, region, stream) = (
            opts.awslogs_group.unwrap_or_default(),
            opts.awslogs_region.unwrap_or_default(),
            opts.awslogs_stream.unwrap_or_default(),
        );
        let qualifies = c.r#type.as_deref() == Some("NORMAL")
            && c.known_status.as_deref() == Some("RUNNING")
            && c.log_driver.as_deref() == Some("awslogs")
            && c.docker_id.unwrap_or_default() != me.docker_id.as_deref().unwrap_or_default()
            && !(group.is_empty() && region.is_empty() && stream.is_empty());
        if !qualifies {
            continue;
        }
        let group_arn = format!("arn:aws:logs:{region}:{account}:log-group:{group}");
        out[3].push(format!("{group_arn}:log-stream:{stream}"));
        out[1].push(group_arn);
        out[0].push(group);
        out[2].push(stream);
    }
    (!out[0].is_empty()).then_some(out)
}
