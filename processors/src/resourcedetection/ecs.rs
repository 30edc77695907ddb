//! The `ecs` detector (the Collector's `internal/aws/ecs`, over
//! `internal/aws/ecsutil`): the task's cloud, `aws.ecs.*` and CloudWatch
//! log attributes from the ECS task metadata endpoint, whose URI the ECS
//! agent sets in `ECS_CONTAINER_METADATA_URI_V4` (v4), else
//! `ECS_CONTAINER_METADATA_URI` (v3): the task's metadata at
//! `${uri}/task`, then this container's at `${uri}`. Outside ECS (neither
//! variable a valid URI) it finds nothing, unless
//! `fail_on_missing_metadata`.
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
use serde_json::{Map, Value};

use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue};

use super::detect::Host;
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

/// A task metadata endpoint: its URI as the variable gives it (trimmed),
/// and its scheme, lowercase.
#[derive(Debug)]
pub(super) struct Endpoint {
    uri: String,
    scheme: String,
}

/// The endpoint as ecsutil's `GetTMEFromEnv` finds it: the v4 variable's
/// URI, else the v3 one's; `None` when neither is a valid URI (not on ECS:
/// the Collector's detector then detects nothing). An `https://` one is a
/// setup error: profcol cannot reach it.
pub(super) fn endpoint(host: &dyn Host) -> Result<Option<Endpoint>, String> {
    let mut why = Vec::new();
    for var in [V4, V3] {
        match validate(host.env(var).unwrap_or_default().trim()) {
            Ok(e) if e.scheme == "https" => {
                return Err(format!(
                    "{var} {:?}: profcol reaches the task metadata endpoint over http:// only",
                    e.uri
                ))
            }
            Ok(e) => return Ok(Some(e)),
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

/// ecsutil's `validateEndpoint`: not empty, and a URI Go's
/// `url.ParseRequestURI` takes.
fn validate(candidate: &str) -> Result<Endpoint, String> {
    if candidate.is_empty() {
        return Err("endpoint is empty".into());
    }
    parse_request_uri(candidate).map_err(|e| format!("parse {candidate:?}: {e}"))
}

/// What Go's `url.ParseRequestURI` refuses, in what matters here: control
/// characters, a scheme that is empty (`:x`), no scheme and no absolute
/// path, a port that is not digits, an unclosed `[`, a host character or
/// an escape (`%zz`) it does not allow. The URI itself is kept as given.
fn parse_request_uri(s: &str) -> Result<Endpoint, String> {
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let (scheme, rest) = split_scheme(s)?;
    let endpoint = Endpoint {
        uri: s.to_string(),
        scheme: scheme.to_ascii_lowercase(),
    };
    if s == "*" {
        return Ok(endpoint);
    }
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    if !rest.starts_with('/') {
        // A rootless path after a scheme is opaque (`http:x`): valid.
        return if scheme.is_empty() {
            Err("invalid URI for request".into())
        } else {
            Ok(endpoint)
        };
    }
    let path = match rest.strip_prefix("//").filter(|_| !scheme.is_empty()) {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            check_authority(&after[..end])?;
            &after[end..]
        }
        None => rest,
    };
    check_escapes(path)?;
    Ok(endpoint)
}

/// Go's `getScheme`: letters, then letters, digits, `+`, `-`, `.`, up to a
/// colon; anything else first means no scheme.
fn split_scheme(s: &str) -> Result<(&str, &str), String> {
    for (i, c) in s.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&s[..i], &s[i + 1..])),
            _ => return Ok(("", s)),
        }
    }
    Ok(("", s))
}

fn check_authority(authority: &str) -> Result<(), String> {
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port = if host.starts_with('[') {
        let Some(i) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        &host[i + 1..]
    } else {
        host.rfind(':').map_or("", |i| &host[i..])
    };
    let valid_port = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
    if !valid_port {
        return Err(format!("invalid port {port:?} after host"));
    }
    if let Some(c) = host.chars().find(|c| {
        c.is_ascii() && !c.is_ascii_alphanumeric() && !"-._~!$&'()*+,;=:[]<>\"%".contains(*c)
    }) {
        return Err(format!(
            "invalid character {:?} in host name",
            c.to_string()
        ));
    }
    check_escapes(host)
}

/// Every `%` starts two hex digits.
fn check_escapes(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    for (i, _) in s.match_indices('%') {
        let ok = b.len() > i + 2 && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
        if !ok {
            let end = (i + 3).min(s.len());
            let bad = s.get(i..end).unwrap_or(&s[i..]);
            return Err(format!("invalid URL escape {bad:?}"));
        }
    }
    Ok(())
}

/// ecsutil's `Get`: `GET ${uri}${suffix}` with `Content-Type:
/// application/json`; the body of a 200, else its error.
async fn get(at: &Endpoint, suffix: &str) -> Result<Bytes, String> {
    let url = format!("{}{suffix}", at.uri);
    let failed = |why: String| format!("Get {url:?}: {why}");
    if at.scheme != "http" {
        return Err(failed(format!(
            "unsupported protocol scheme {:?}",
            at.scheme
        )));
    }
    let Some(rest) = url[at.scheme.len() + 1..].strip_prefix("//") else {
        return Err(failed("http: no Host in request URL".into()));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    // User information (which Go would send as basic authentication) is
    // not sent: the agent's endpoint has none.
    let authority = &rest[..end];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .trim_end_matches(':');
    if host.is_empty() {
        return Err(failed("http: no Host in request URL".into()));
    }
    let mut target = rest[end..].split('#').next().unwrap_or("").to_string();
    if !target.starts_with('/') {
        target.insert(0, '/');
    }
    let has_port = match host.rsplit_once(':') {
        Some((h, _)) => !host.starts_with('[') || h.ends_with(']'),
        None => false,
    };
    let addr = if has_port {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| failed(format!("dial tcp {addr}: {e}")))?;
    let (status, body) = request(
        stream,
        host,
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

/// A field of the Go structs the answers decode into (ecsutil's
/// `TaskMetadata` and `ContainerMetadata`), for the decoding's type checks.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    I64,
    U64,
    F64,
    Strs,
    StrMap,
    Struct(&'static Struct),
    List(&'static Struct),
}

struct Struct {
    name: &'static str,
    fields: &'static [(&'static str, Ty)],
}

static LIMITS: Struct = Struct {
    name: "Limits",
    fields: &[("CPU", Ty::F64), ("Memory", Ty::U64)],
};

static LOG_OPTIONS: Struct = Struct {
    name: "LogOptions",
    fields: &[
        ("awslogs-group", Ty::Str),
        ("awslogs-region", Ty::Str),
        ("awslogs-stream", Ty::Str),
    ],
};

static NETWORK: Struct = Struct {
    name: "Network",
    fields: &[("IPv4Addresses", Ty::Strs), ("NetworkMode", Ty::Str)],
};

static CONTAINER: Struct = Struct {
    name: "ContainerMetadata",
    fields: &[
        ("ContainerARN", Ty::Str),
        ("Name", Ty::Str),
        ("CreatedAt", Ty::Str),
        ("DockerId", Ty::Str),
        ("DockerName", Ty::Str),
        ("ExitCode", Ty::I64),
        ("FinishedAt", Ty::Str),
        ("Image", Ty::Str),
        ("ImageID", Ty::Str),
        ("KnownStatus", Ty::Str),
        ("Labels", Ty::StrMap),
        ("Limits", Ty::Struct(&LIMITS)),
        ("LogDriver", Ty::Str),
        ("LogOptions", Ty::Struct(&LOG_OPTIONS)),
        ("Networks", Ty::List(&NETWORK)),
        ("StartedAt", Ty::Str),
        ("Type", Ty::Str),
    ],
};

static EPHEMERAL_STORAGE: Struct = Struct {
    name: "EphemeralStorageMetrics",
    fields: &[("Utilized", Ty::I64), ("Reserved", Ty::I64)],
};

static TASK: Struct = Struct {
    name: "TaskMetadata",
    fields: &[
        ("AvailabilityZone", Ty::Str),
        ("Cluster", Ty::Str),
        ("Containers", Ty::List(&CONTAINER)),
        ("EphemeralStorageMetrics", Ty::Struct(&EPHEMERAL_STORAGE)),
        ("Family", Ty::Str),
        ("KnownStatus", Ty::Str),
        ("LaunchType", Ty::Str),
        ("Limits", Ty::Struct(&LIMITS)),
        ("PullStartedAt", Ty::Str),
        ("PullStoppedAt", Ty::Str),
        ("Revision", Ty::Str),
        ("ServiceName", Ty::Str),
        ("TaskARN", Ty::Str),
    ],
};

/// An answer decoded as Go's `json.Decoder` decodes it into `s`: the first
/// JSON value (what follows is not read), `null` an empty struct, keys
/// matched to fields exactly or else without regard to ASCII case, other
/// keys ignored, a value of the wrong type an error.
fn decode(body: &[u8], s: &'static Struct) -> Result<Map<String, Value>, String> {
    let first = serde_json::Deserializer::from_slice(body)
        .into_iter::<Value>()
        .next()
        .ok_or("EOF")?
        .map_err(|e| e.to_string())?;
    match first {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => {
            check_fields(&m, s, s.name)?;
            Ok(m)
        }
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type ecsutil.{}",
            kind(&other),
            s.name
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The struct field `name` is decoded from: the key spelled so, else the
/// first spelled so in another case.
fn field<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    m.get(name).or_else(|| {
        m.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn check_fields(m: &Map<String, Value>, s: &Struct, at: &str) -> Result<(), String> {
    for (name, ty) in s.fields {
        if let Some(v) = field(m, name) {
            check(v, *ty, &format!("{at}.{name}"))?;
        }
    }
    Ok(())
}

/// `null` leaves a field as it is, in any type.
fn check(v: &Value, ty: Ty, at: &str) -> Result<(), String> {
    let wrong = |go: &str| {
        Err(format!(
            "json: cannot unmarshal {} into Go struct field {at} of type {go}",
            kind(v)
        ))
    };
    match (ty, v) {
        (_, Value::Null) | (Ty::Str, Value::String(_)) | (Ty::F64, Value::Number(_)) => Ok(()),
        (Ty::I64, Value::Number(n)) if n.is_i64() => Ok(()),
        (Ty::U64, Value::Number(n)) if n.is_u64() => Ok(()),
        (Ty::Strs, Value::Array(a)) => a.iter().try_for_each(|e| check(e, Ty::Str, at)),
        (Ty::StrMap, Value::Object(m)) => m.values().try_for_each(|e| check(e, Ty::Str, at)),
        (Ty::Struct(s), Value::Object(m)) => check_fields(m, s, at),
        (Ty::List(s), Value::Array(a)) => a.iter().try_for_each(|e| check(e, Ty::Struct(s), at)),
        (Ty::Str, _) => wrong("string"),
        (Ty::I64, _) => wrong("int64"),
        (Ty::U64, _) => wrong("uint64"),
        (Ty::F64, _) => wrong("float64"),
        (Ty::Strs, _) => wrong("[]string"),
        (Ty::StrMap, _) => wrong("map[string]string"),
        (Ty::Struct(s), _) => wrong(&format!("ecsutil.{}", s.name)),
        (Ty::List(s), _) => wrong(&format!("[]ecsutil.{}", s.name)),
    }
}

/// A string field of a decoded struct (`""` when missing or `null`).
fn text(m: &Map<String, Value>, name: &str) -> String {
    field(m, name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A struct field of a decoded struct (empty when missing or `null`).
fn object<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Map<String, Value>> {
    field(m, name).and_then(Value::as_object)
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
    let task = get(at, "/task")
        .await
        .and_then(|body| {
            decode(&body, &TASK).map_err(|e| {
                format!("encountered unexpected error reading response from ECS Task Metadata Endpoint: {e}")
            })
        })
        .map_err(|e| format!("unable to fetch task metadata: {e}"))?;
    let arn = text(&task, "TaskARN");
    let (region, account, task_id) = parse_task_arn(&arn);
    let present = |v: &str| (!v.is_empty()).then(|| string(v));
    // Only TMDE v4 gives the launch type.
    let launch_type = match text(&task, "LaunchType").to_lowercase().as_str() {
        "ec2" => Some(string("ec2")),
        "fargate" => Some(string("fargate")),
        _ => None,
    };
    let mut values: [Option<AnyValue>; 15] = [
        Some(string("aws")),
        Some(string("aws_ecs")),
        Some(string(arn.as_str())),
        Some(string(text(&task, "Family"))),
        Some(string(text(&task, "Revision"))),
        present(&account),
        present(&region),
        present(&task_id),
        // The endpoint gives the cluster's short name or its ARN.
        Some(string(cluster_arn(
            &text(&task, "Cluster"),
            &region,
            &account,
        ))),
        present(&text(&task, "AvailabilityZone")),
        launch_type,
        None,
        None,
        None,
        None,
    ];
    let me = get(at, "").await.and_then(|body| {
        decode(&body, &CONTAINER).map_err(|e| {
            format!("encountered unexpected error reading response from ECS Container Metadata Endpoint: {e}")
        })
    });
    match me {
        Ok(me) => {
            if let Some(logs) = log_data(&task, &me, &account) {
                for (slot, list) in values[11..].iter_mut().zip(logs) {
                    *slot = Some(strings(list));
                }
            }
        }
        Err(e) if fail => return Err(format!("ecs container metadata unavailable: {e}")),
        // As the Collector: the task's attributes without the logs'.
        Err(e) => tracing::debug!(error = %e, "ECS container metadata unavailable"),
    }
    Ok(ATTRIBUTES
        .iter()
        .zip(values)
        .zip(on)
        .filter_map(|(((k, _), v), &on)| {
            Some(KeyValue {
                key: (*k).to_string(),
                value: Some(v.filter(|_| on)?),
                ..Default::default()
            })
        })
        .collect())
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
    task: &Map<String, Value>,
    me: &Map<String, Value>,
    account: &str,
) -> Option<[Vec<String>; 4]> {
    let my_id = text(me, "DockerId");
    let mut out: [Vec<String>; 4] = Default::default();
    let none = Vec::new();
    let containers = field(task, "Containers")
        .and_then(Value::as_array)
        .unwrap_or(&none);
    for c in containers.iter().filter_map(Value::as_object) {
        let empty = Map::new();
        let opts = object(c, "LogOptions").unwrap_or(&empty);
        let (group, region, stream) = (
            text(opts, "awslogs-group"),
            text(opts, "awslogs-region"),
            text(opts, "awslogs-stream"),
        );
        let qualifies = text(c, "Type") == "NORMAL"
            && text(c, "KnownStatus") == "RUNNING"
            && text(c, "LogDriver") == "awslogs"
            && text(c, "DockerId") != my_id
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
