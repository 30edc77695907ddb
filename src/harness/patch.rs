//! Points a config at the test run: receivers on free loopback ports and not
//! recording, the `sentry` exporter at the local envelope sink, `pprof` into
//! scratch space.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_yaml_ng::{Mapping, Value};

use super::inputs::Target;

pub(super) struct Patched {
    pub yaml: Value,
    /// Receiver id -> where it will listen.
    pub receivers: BTreeMap<String, Target>,
}

pub(super) fn pprof_dir(scratch: &Path, exporter_id: &str) -> PathBuf {
    scratch.join(exporter_id.replace('/', "_"))
}

pub(super) fn patch(mut yaml: Value, scratch: &Path, sentry_port: u16) -> anyhow::Result<Patched> {
    let Some(root) = yaml.as_mapping_mut() else {
        bail!("the config's top level must be a map");
    };
    let mut receivers = BTreeMap::new();
    if let Some(section) = root.get_mut("receivers").and_then(Value::as_mapping_mut) {
        for (id, body) in section.iter_mut() {
            let Some(id) = id.as_str() else { continue };
            strip(body, &RECORDING_KEYS);
            // The harness speaks plain text and carries no credentials.
            strip(body, &LISTENER_KEYS);
            let port = free_port()?;
            let endpoint = Value::from(format!("127.0.0.1:{port}"));
            match type_of(id) {
                "otlp" => {
                    let protocols = child(body, "protocols");
                    // Inputs go in over gRPC; an HTTP listener still binds,
                    // so it moves off its production port too.
                    if let Some(http) = protocols.get_mut("http").filter(|h| h.is_mapping()) {
                        strip(http, &LISTENER_KEYS);
                        set(
                            http,
                            "endpoint",
                            Value::from(format!("127.0.0.1:{}", free_port()?)),
                        );
                    } else if protocols.get("http").is_some() {
                        set(
                            child(protocols, "http"),
                            "endpoint",
                            Value::from(format!("127.0.0.1:{}", free_port()?)),
                        );
                    }
                    let grpc = child(protocols, "grpc");
                    strip(grpc, &LISTENER_KEYS);
                    set(grpc, "endpoint", endpoint);
                    receivers.insert(id.to_owned(), Target::Otlp(port));
                }
                "sentry" => {
                    set(body, "endpoint", endpoint);
                    receivers.insert(id.to_owned(), Target::Sentry { port, key: None });
                }
                "pyroscope" => {
                    set(body, "endpoint", endpoint);
                    receivers.insert(id.to_owned(), Target::Pyroscope(port));
                }
                _ => {}
            }
        }
    }
    if let Some(section) = root.get_mut("exporters").and_then(Value::as_mapping_mut) {
        for (id, body) in section.iter_mut() {
            let Some(id) = id.as_str() else { continue };
            match type_of(id) {
                "sentry" => {
                    let key = "harness";
                    let project = project_id(body).unwrap_or_else(|| "1".into());
                    let dsn = format!("http://{key}@127.0.0.1:{sentry_port}/{project}");
                    set(body, "dsn", Value::from(dsn));
                }
                "pprof" => {
                    let dir = pprof_dir(scratch, id);
                    set(
                        body,
                        "directory",
                        Value::from(dir.to_string_lossy().into_owned()),
                    );
                    set(body, "create_directory", Value::from(true));
                }
                _ => {}
            }
        }
    }
    Ok(Patched { yaml, receivers })
}

fn type_of(id: &str) -> &str {
    id.split('/').next().unwrap_or(id)
}

/// The project id at the end of the exporter's DSN, when it is literal.
fn project_id(body: &Value) -> Option<String> {
    let dsn = body.get("dsn")?.as_str()?;
    let last = dsn.trim_end_matches('/').rsplit('/').next()?;
    last.chars()
        .all(|c| c.is_ascii_digit())
        .then(|| last.to_owned())
}

/// Receiver keys that would write test traffic outside the scratch space: a
/// production config's `record_to` names its real capture directory.
const RECORDING_KEYS: [&str; 2] = ["record_to", "record_max_files"];

/// Listener keys the harness's plain-text, credential-less clients could
/// not satisfy (the extensions `auth` names are not started either).
const LISTENER_KEYS: [&str; 2] = ["tls", "auth"];

fn strip(v: &mut Value, keys: &[&str]) {
    if let Some(m) = v.as_mapping_mut() {
        for key in keys {
            m.remove(*key);
        }
    }
}

/// The map under `key`, created when missing or null.
fn child<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    if !v.is_mapping() {
        *v = Value::Mapping(Mapping::new());
    }
    let m = v.as_mapping_mut().expect("just made a map");
    let entry = m.entry(Value::from(key)).or_insert(Value::Null);
    if !entry.is_mapping() {
        *entry = Value::Mapping(Mapping::new());
    }
    entry
}

fn set(v: &mut Value, key: &str, value: Value) {
    if !v.is_mapping() {
        *v = Value::Mapping(Mapping::new());
    }
    v.as_mapping_mut()
        .expect("just made a map")
        .insert(Value::from(key), value);
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_lose_tls_and_auth_and_every_listener_moves() {
        let yaml: Value = serde_yaml_ng::from_str(
            "receivers:\n  otlp:\n    protocols:\n      grpc: { endpoint: 0.0.0.0:4317, tls: { cert_file: c, key_file: k }, auth: { authenticator: bearertokenauth } }\n      http: { endpoint: 0.0.0.0:4318, tls: { cert_file: c, key_file: k } }\n  otlp/http_only:\n    protocols:\n      http:\n  sentry: { tls: { cert_file: c, key_file: k }, auth: { authenticator: basicauth } }\n",
        )
        .unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let patched = patch(yaml, scratch.path(), 1).unwrap();
        let r = &patched.yaml["receivers"];
        for section in [
            &r["otlp"]["protocols"]["grpc"],
            &r["otlp"]["protocols"]["http"],
            &r["sentry"],
        ] {
            assert!(
                section.get("tls").is_none() && section.get("auth").is_none(),
                "{section:?}"
            );
        }
        for http in [
            &r["otlp"]["protocols"]["http"],
            &r["otlp/http_only"]["protocols"]["http"],
        ] {
            let endpoint = http["endpoint"].as_str().unwrap();
            assert!(
                endpoint.starts_with("127.0.0.1:") && endpoint != "127.0.0.1:4318",
                "{endpoint}"
            );
        }
        assert!(r["otlp/http_only"]["protocols"]["grpc"]["endpoint"].is_string());
    }

    #[test]
    fn receivers_do_not_record_test_traffic() {
        let yaml: Value = serde_yaml_ng::from_str(
            "receivers:\n  otlp: { record_to: /var/lib/profcol/otlp, record_max_files: 10 }\n  sentry/mobile: { keys: [k], record_to: /var/lib/profcol/sentry }\n  sentry/plain:\n",
        )
        .unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let patched = patch(yaml, scratch.path(), 1).unwrap();
        let receivers = patched.yaml["receivers"].as_mapping().unwrap();
        assert_eq!(receivers.len(), 3);
        for (id, body) in receivers {
            for key in RECORDING_KEYS {
                assert!(body.get(key).is_none(), "{id:?} keeps {key}: {body:?}");
            }
        }
        // Everything else stays.
        assert_eq!(patched.yaml["receivers"]["sentry/mobile"]["keys"][0], "k");
        assert_eq!(patched.receivers.len(), 3);
    }
}
