//! The `ec2` detector (the Collector's `internal/aws/ec2`): the instance's
//! cloud and host attributes from the EC2 instance metadata service
//! (IMDS), as the AWS SDK reads it: a session token first (IMDSv2), the
//! token-less IMDSv1 where the service answers the token request 403, 404
//! or 405. Off EC2 (no instance id) it finds nothing, unless
//! `fail_on_missing_metadata`.

use std::time::Duration;

use hyper::body::Bytes;
use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::Ec2Plan;
use super::detect::{enabled, string_kv, text, Host};
use super::http::request;

/// The attributes, in the order the Collector sets them.
pub(super) const ATTRIBUTES: [&str; 9] = [
    "cloud.provider",
    "cloud.platform",
    "cloud.region",
    "cloud.account.id",
    "cloud.availability_zone",
    "host.id",
    "host.image.id",
    "host.type",
    "host.name",
];

/// Per request: the service is on the instance's own link.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
const TOKEN_TTL_SECONDS: &str = "21600";

/// Where the service listens, as the SDK finds it: the variables
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT` and `..._ENDPOINT_MODE`, else the
/// link-local address; `None` when `AWS_EC2_METADATA_DISABLED` is true.
pub(super) fn endpoint(host: &dyn Host) -> Result<Option<String>, String> {
    if host
        .env("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Ok(None);
    }
    let url = match host.env("AWS_EC2_METADATA_SERVICE_ENDPOINT") {
        Some(u) if !u.is_empty() => u,
        _ => match host.env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE") {
            Some(m) if m.eq_ignore_ascii_case("ipv6") => "http://[fd00:ec2::254]".into(),
            _ => "http://169.254.169.254".into(),
        },
    };
    let Some(authority) = url.strip_prefix("http://") else {
        return Err(format!(
            "AWS_EC2_METADATA_SERVICE_ENDPOINT {url:?}: profcol reaches the metadata service over http://"
        ));
    };
    let authority = authority.trim_end_matches('/');
    let has_port = match authority.rsplit_once(':') {
        Some((h, _)) => !h.ends_with(':') && (!h.starts_with('[') || h.ends_with(']')),
        None => false,
    };
    Ok(Some(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    }))
}

/// The instance identity document's fields the detector reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Identity {
    account_id: String,
    availability_zone: String,
    image_id: String,
    instance_id: String,
    instance_type: String,
    region: String,
}

/// A session with the service.
struct Imds<'a> {
    at: &'a str,
    token: Option<String>,
    plan: &'a Ec2Plan,
}

pub(super) async fn detect(plan: &Ec2Plan, at: Option<&str>) -> Result<Vec<KeyValue>, String> {
    let Some(at) = at else {
        return unavailable(plan, "AWS_EC2_METADATA_DISABLED is true".into());
    };
    let imds = match Imds::open(at, plan).await {
        Ok(s) => s,
        Err(e) => return unavailable(plan, e),
    };
    // As the Collector: an instance id answers, or this is no EC2 instance.
    if let Err(e) = imds.get("/latest/meta-data/instance-id").await {
        return unavailable(plan, e);
    }
    let doc = imds
        .get("/latest/dynamic/instance-identity/document")
        .await
        .and_then(|b| serde_json::from_slice::<Identity>(&b).map_err(|e| e.to_string()))
        .map_err(|e| format!("failed getting identity document: {e}"))?;
    let hostname = imds
        .get("/latest/meta-data/hostname")
        .await
        .map_err(|e| format!("failed getting hostname: {e}"))?;
    let values = [
        "aws".to_string(),
        "aws_ec2".to_string(),
        doc.region,
        doc.account_id,
        doc.availability_zone,
        doc.instance_id,
        doc.image_id,
        doc.instance_type,
        String::from_utf8_lossy(&hostname).into_owned(),
    ];
    let mut out = enabled(ATTRIBUTES, values.map(|v| Some(text(v))), &plan.attributes);
    if !plan.tags.is_empty() {
        // As the Collector: tags that cannot be read are left out.
        match imds.tags().await {
            Ok(tags) => out.extend(tags),
            Err(e) => tracing::warn!(error = %e, "failed to fetch tags from IMDS"),
        }
    }
    Ok(out)
}

fn unavailable(plan: &Ec2Plan, why: String) -> Result<Vec<KeyValue>, String> {
    if plan.fail_on_missing_metadata {
        return Err(format!("EC2 metadata unavailable: {why}"));
    }
    tracing::debug!(error = %why, "EC2 metadata unavailable");
    Ok(Vec::new())
}

impl<'a> Imds<'a> {
    /// A session token (IMDSv2), or none where the service has no token
    /// API (IMDSv1).
    async fn open(at: &'a str, plan: &'a Ec2Plan) -> Result<Self, String> {
        let mut s = Imds {
            at,
            token: None,
            plan,
        };
        let (status, body) = s.retrying(hyper::Method::PUT, "/latest/api/token").await?;
        match status {
            200 => s.token = Some(String::from_utf8_lossy(&body).trim().to_string()),
            403..=405 => {}
            _ => return Err(format!("/latest/api/token: status {status}")),
        }
        Ok(s)
    }

    async fn get(&self, path: &str) -> Result<Bytes, String> {
        match self.retrying(hyper::Method::GET, path).await? {
            (200, body) => Ok(body),
            (status, _) => Err(format!("{path}: status {status}")),
        }
    }

    /// The instance's tags whose keys `tags` matches, from the metadata's
    /// `tags/instance` (the instance must allow tags in its metadata).
    async fn tags(&self) -> Result<Vec<KeyValue>, String> {
        let keys = self.get("/latest/meta-data/tags/instance").await?;
        let mut out = Vec::new();
        let mut errs = Vec::new();
        for key in String::from_utf8_lossy(&keys).lines().map(str::trim) {
            if key.is_empty() || !self.plan.tags.iter().any(|r| r.is_match(key)) {
                continue;
            }
            let path = format!("/latest/meta-data/tags/instance/{}", escape(key));
            match self.get(&path).await {
                Ok(v) => out.push(string_kv(
                    &format!("ec2.tag.{key}"),
                    String::from_utf8_lossy(&v).into_owned(),
                )),
                Err(e) => errs.push(format!("failed to get tag value for key {key:?}: {e}")),
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            Err(errs.join("; "))
        }
    }

    /// The SDK's retries: a failed connection or a 5xx again, up to
    /// `max_attempts`, waiting twice as long each time up to
    /// `max_backoff`.
    async fn retrying(&self, method: hyper::Method, path: &str) -> Result<(u16, Bytes), String> {
        let mut wait = Duration::from_millis(100);
        let mut attempt = 1;
        loop {
            let r = tokio::time::timeout(REQUEST_TIMEOUT, self.once(method.clone(), path))
                .await
                .unwrap_or_else(|_| Err(format!("{path}: no answer within {REQUEST_TIMEOUT:?}")));
            match r {
                Ok((status, _)) if status >= 500 && attempt < self.plan.max_attempts => {}
                Ok(answer) => return Ok(answer),
                Err(_) if attempt < self.plan.max_attempts => {}
                Err(e) => return Err(e),
            }
            tokio::time::sleep(wait.min(self.plan.max_backoff)).await;
            wait *= 2;
            attempt += 1;
        }
    }

    async fn once(&self, method: hyper::Method, path: &str) -> Result<(u16, Bytes), String> {
        let header = match &self.token {
            Some(t) => Some(("X-aws-ec2-metadata-token", t.as_str())),
            None if path == "/latest/api/token" => {
                Some(("X-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL_SECONDS))
            }
            None => None,
        };
        let stream = tokio::net::TcpStream::connect(self.at)
            .await
            .map_err(|e| format!("{}: {e}", self.at))?;
        request(stream, self.at, method, path, header).await
    }
}

/// A tag key as one path segment.
fn escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
