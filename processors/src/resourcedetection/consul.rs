//! The `consul` detector (the Collector's `internal/consul`): the node's
//! name, datacenter and ID, and the node metadata keys `meta` lists, from
//! the local Consul agent's `GET /v1/agent/self`, asked as the Consul Go
//! client asks it (its `CONSUL_*` variables fill the settings the section
//! leaves empty). When the agent does not answer it finds nothing, unless
//! `fail_on_missing_metadata`.

use std::collections::BTreeMap;

use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::config::ConsulPlan;
use super::detect::{enabled, string_kv, text, Host};

/// The attributes, in the order the Collector sets them, all on by
/// default; the metadata keys follow, unprefixed (the Collector's
/// `prefixMetaAttributes` feature gate is off by default and absent from
/// profcol).
pub(super) const ATTRIBUTES: [(&str, bool); 3] = [
    ("host.name", true),
    ("cloud.region", true),
    ("host.id", true),
];

/// The Consul client's variables that profcol cannot honour.
const REFUSED: [&str; 4] = [
    "CONSUL_CLIENT_CERT",
    "CONSUL_CLIENT_KEY",
    "CONSUL_CAPATH",
    "CONSUL_TLS_SERVER_NAME",
];

/// The agent's URL, the query and the headers, once the host is read.
pub(super) struct Target {
    url: url::Url,
    token: String,
    basic: Option<(String, Option<String>)>,
    client: reqwest::Client,
}

/// As the Consul client's `DefaultConfig` and `NewClient`: the variables,
/// then the section's settings; a token file replaces the token. A
/// setting it cannot honour, a token file or CA it cannot read, or an
/// address of an unknown scheme, and the detector cannot be made.
pub(super) fn target(plan: &ConsulPlan, host: &dyn Host) -> Result<Target, String> {
    let env = |k: &str| host.env(k).filter(|v| !v.is_empty());
    if let Some(v) = REFUSED.iter().find(|v| env(v).is_some()) {
        return Err(format!(
            "failed creating consul client: {v} is set: profcol's consul detector does not support it"
        ));
    }
    let or_env = |set: &str, var: &str| {
        if set.is_empty() {
            env(var).unwrap_or_default()
        } else {
            set.to_string()
        }
    };
    let mut address = or_env(&plan.address, "CONSUL_HTTP_ADDR");
    if address.is_empty() {
        address = "127.0.0.1:8500".into();
    }
    let mut scheme = match env("CONSUL_HTTP_SSL").as_deref().map(parse_bool) {
        Some(Some(true)) => "https",
        Some(Some(false)) | None => "http",
        Some(None) => {
            return Err("failed creating consul client: could not parse CONSUL_HTTP_SSL".into())
        }
    };
    if let Some((s, rest)) = address.split_once("://") {
        scheme = match s {
            "http" => "http",
            "https" => "https",
            "unix" => {
                return Err(
                    "failed creating consul client: profcol's consul detector does not reach the agent over a unix socket"
                        .into(),
                )
            }
            other => return Err(format!("failed creating consul client: Unknown protocol scheme: {other}")),
        };
        address = rest.to_string();
    }
    let mut token = or_env(&plan.token, "CONSUL_HTTP_TOKEN");
    let token_file = or_env(&plan.token_file, "CONSUL_HTTP_TOKEN_FILE");
    if !token_file.is_empty() {
        let read = host
            .read_file(&token_file)?
            .ok_or_else(|| format!("failed creating consul client: Error loading token file {token_file}: no such file"))?;
        if !read.trim().is_empty() {
            token = read.trim().to_string();
        }
    }
    let mut query = Vec::new();
    if !plan.datacenter.is_empty() {
        query.push(("dc", plan.datacenter.clone()));
    }
    if let Some(p) = env("CONSUL_PARTITION") {
        query.push(("partition", p));
    }
    let namespace = or_env(&plan.namespace, "CONSUL_NAMESPACE");
    if !namespace.is_empty() {
        query.push(("ns", namespace));
    }
    let basic = env("CONSUL_HTTP_AUTH").map(|a| match a.split_once(':') {
        Some((u, p)) => (u.to_string(), Some(p.to_string())),
        None => (a, None),
    });
    let mut builder = reqwest::Client::builder();
    if let Some(ca) = env("CONSUL_CACERT") {
        let pem = host.read_file(&ca)?.ok_or_else(|| {
            format!("failed creating consul client: open {ca}: no such file or directory")
        })?;
        for c in reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|e| format!("failed creating consul client: {ca}: {e}"))?
        {
            builder = builder.add_root_certificate(c);
        }
    }
    match env("CONSUL_HTTP_SSL_VERIFY").as_deref().map(parse_bool) {
        Some(Some(false)) => builder = builder.tls_danger_accept_invalid_certs(true),
        Some(None) => {
            return Err(
                "failed creating consul client: could not parse CONSUL_HTTP_SSL_VERIFY".into(),
            )
        }
        _ => {}
    }
    let mut url = url::Url::parse(&format!("{scheme}://{address}/v1/agent/self"))
        .map_err(|e| format!("failed creating consul client: {address}: {e}"))?;
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(&query);
    }
    Ok(Target {
        url,
        token,
        basic,
        client: builder.build().map_err(|e| e.to_string())?,
    })
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The agent's answer: its configuration's values and the node metadata.
#[derive(Deserialize, Default)]
#[serde(default)]
struct AgentSelf {
    #[serde(rename = "Config")]
    config: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(rename = "Meta")]
    meta: Option<BTreeMap<String, serde_json::Value>>,
}

pub(super) async fn detect(plan: &ConsulPlan, at: &Target) -> Result<Vec<KeyValue>, String> {
    let (node, datacenter, id, meta) = match metadata(plan, at).await {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(error = %e, "consul metadata unavailable");
            if plan.fail_on_missing_metadata {
                return Err(format!("failed to get consul metadata: {e}"));
            }
            return Ok(Vec::new());
        }
    };
    let mut out = enabled(
        ATTRIBUTES.map(|(k, _)| k),
        [node, datacenter, id].map(|v| Some(text(v))),
        &plan.attributes,
    );
    for (k, v) in meta {
        out.push(string_kv(&k, v));
    }
    Ok(out)
}

type Metadata = (String, String, String, Vec<(String, String)>);

async fn metadata(plan: &ConsulPlan, at: &Target) -> Result<Metadata, String> {
    let mut req = at.client.get(at.url.clone());
    if !at.token.is_empty() {
        req = req.header("X-Consul-Token", &at.token);
    }
    if let Some((u, p)) = &at.basic {
        req = req.basic_auth(u, p.as_ref());
    }
    let failed = |e: String| format!("failed to get local agent information: {e}");
    let resp = req.send().await.map_err(|e| failed(e.to_string()))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| failed(e.to_string()))?;
    if status != reqwest::StatusCode::OK {
        return Err(failed(format!(
            "Unexpected response code: {} ({})",
            status.as_u16(),
            String::from_utf8_lossy(&body).trim()
        )));
    }
    let answer: AgentSelf = serde_json::from_slice(&body).map_err(|e| failed(e.to_string()))?;
    let config = answer
        .config
        .ok_or("failed getting consul agent configuration. was 'Config' returned by consul?")?;
    let field = |key: &str, what: &str| {
        config
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("failed getting {what}. was '{key}' returned by consul?"))
    };
    let node = field("NodeName", "consul hostname")?;
    let datacenter = field("Datacenter", "consul datacenter")?;
    let id = field("NodeID", "node ID")?;
    let mut meta = Vec::new();
    for (k, v) in answer.meta.unwrap_or_default() {
        if !plan.meta.contains(&k) {
            continue;
        }
        match v.as_str() {
            Some(v) => meta.push((k, v.to_string())),
            None => return Err(format!("consul node metadata {k:?} is not a string: {v}")),
        }
    }
    Ok((node, datacenter, id, meta))
}
