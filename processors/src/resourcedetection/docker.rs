//! The `docker` detector (the Collector's `internal/docker`): `host.name`
//! and `os.type` of the host the Docker daemon runs on, from its `GET
//! /info`, over `DOCKER_HOST` (`unix://` or `tcp://`) or
//! `/var/run/docker.sock`.

use hyper::body::Bytes;
use serde::Deserialize;

use profcol_model::proto::KeyValue;

use super::detect::{string_kv, Host};
use super::http::request;

const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

#[derive(Deserialize)]
struct Info {
    #[serde(rename = "Name", default)]
    name: String,
    #[serde(rename = "OSType", default)]
    os_type: String,
}

/// Where the daemon listens.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Endpoint {
    Unix(String),
    Tcp(String),
}

pub(super) fn endpoint(host: &dyn Host) -> Result<Endpoint, String> {
    let v = host.env("DOCKER_HOST").unwrap_or_default();
    if v.is_empty() {
        return Ok(Endpoint::Unix(DEFAULT_SOCKET.into()));
    }
    if let Some(path) = v.strip_prefix("unix://") {
        return Ok(Endpoint::Unix(path.into()));
    }
    if let Some(addr) = v.strip_prefix("tcp://") {
        return Ok(Endpoint::Tcp(addr.trim_end_matches('/').into()));
    }
    Err(format!(
        "DOCKER_HOST {v:?}: profcol reaches the daemon over unix:// or tcp://"
    ))
}

pub(super) async fn detect(at: &Endpoint, enabled: [bool; 2]) -> Result<Vec<KeyValue>, String> {
    let info = info(at)
        .await
        .map_err(|e| format!("failed getting OS hostname from the Docker daemon: {e}"))?;
    let mut out = Vec::new();
    if enabled[0] {
        out.push(string_kv("host.name", info.name));
    }
    if enabled[1] {
        out.push(string_kv("os.type", info.os_type.to_lowercase()));
    }
    Ok(out)
}

async fn info(at: &Endpoint) -> Result<Info, String> {
    let body = match at {
        Endpoint::Unix(path) => {
            let s = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| format!("{path}: {e}"))?;
            get_info(s).await?
        }
        Endpoint::Tcp(addr) => {
            let s = tokio::net::TcpStream::connect(addr.as_str())
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
            get_info(s).await?
        }
    };
    serde_json::from_slice(&body).map_err(|e| format!("/info: {e}"))
}

async fn get_info<S>(stream: S) -> Result<Bytes, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (status, body) = request(stream, "docker", hyper::Method::GET, "/info", None).await?;
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Err(format!("/info: {status}: {text}"));
    }
    Ok(body)
}
