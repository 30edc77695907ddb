//! Reading recorded payloads and sending them to a running receiver the way
//! their client did: OTLP over gRPC, Sentry envelopes and Pyroscope requests
//! over HTTP.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use profcol_model::proto::{ExportProfilesServiceRequest, ProfilesData};

use super::spec::InputFormat;

/// A payload ready to send.
pub(super) enum Payload {
    /// One or more OTLP requests (a `file` exporter output holds several).
    Otlp(Vec<ExportProfilesServiceRequest>),
    /// A recorded HTTP request (Sentry or Pyroscope).
    Http(HttpRequest),
}

/// An HTTP request to replay against a Sentry or Pyroscope receiver.
pub(super) struct HttpRequest {
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Headers that describe the original connection, not the request.
const HOP_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "keep-alive",
    "expect",
];

pub(super) fn load(path: &Path, format: Option<InputFormat>) -> anyhow::Result<Payload> {
    let format = format
        .or_else(|| InputFormat::guess(path))
        .with_context(|| {
            format!(
                "{}: cannot tell the format from the name; set `format:` \
                 (otlp_proto, otlp_json, otlp_file, sentry_envelope, sentry_request, \
                 pyroscope_request, pprof)",
                path.display()
            )
        })?;
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let otlp = |data: ProfilesData| ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    };
    let file_output = |bytes: &[u8]| -> anyhow::Result<Payload> {
        let all = profcol_exporters::file::read_requests(bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(Payload::Otlp(all.into_iter().map(otlp).collect()))
    };
    Ok(match format {
        InputFormat::OtlpProto => {
            let bytes = read(path)?;
            if is_length_prefixed(&bytes) {
                return file_output(&bytes);
            }
            // Any revision the receiver reads (async-profiler 4.2 writes
            // v1.7.0), translated to v1.10.0 as the receiver translates it.
            let read = profcol_otlp::revisions::decode(&bytes.into()).map_err(|e| {
                anyhow::anyhow!("{}: not an OTLP protobuf request: {e}", path.display())
            })?;
            Payload::Otlp(vec![otlp(read.data)])
        }
        InputFormat::OtlpJson => {
            let bytes = read(path)?;
            // `compression: zstd` frames JSON as it frames protobuf.
            if holds_several_json_values(&bytes) || is_length_prefixed(&bytes) {
                return file_output(&bytes);
            }
            let data = profcol_otlp::json::decode(&bytes)
                .with_context(|| format!("{}: not an OTLP/JSON request", path.display()))?;
            Payload::Otlp(vec![otlp(data)])
        }
        InputFormat::OtlpFile => file_output(&read(path)?)?,
        InputFormat::Pprof => {
            let profile = profcol_pprof::decode_pprof(&read(path)?)
                .map_err(|e| anyhow::anyhow!("{}: not a pprof profile: {e}", path.display()))?;
            let data = profcol_pprof::pprof_to_otlp(&profile)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Payload::Otlp(vec![otlp(data)])
        }
        InputFormat::SentryEnvelope => {
            let body = read(path)?;
            // A recording's meta next to it gives the path, query and auth.
            let meta = sibling(path, ".envelope", ".meta.json").filter(|m| m.exists());
            let mut req = match meta {
                Some(m) => request_from_meta(&m)?,
                None => HttpRequest {
                    path: "/api/1/envelope/".into(),
                    query: String::new(),
                    headers: Vec::new(),
                    body: Vec::new(),
                },
            };
            // The `.envelope` is the decoded body.
            req.headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("content-encoding"));
            req.body = body;
            Payload::Http(req)
        }
        InputFormat::SentryRequest | InputFormat::PyroscopeRequest => {
            let meta = sibling(path, ".body.bin", ".meta.json").unwrap_or_else(|| path.to_owned());
            let mut req = request_from_meta(&meta)?;
            let raw = sibling(&meta, ".meta.json", ".body.bin").filter(|p| p.exists());
            let decoded = sibling(&meta, ".meta.json", ".envelope").filter(|p| p.exists());
            match (raw, decoded) {
                // The body as sent, still compressed as its headers say.
                (Some(raw), _) => req.body = read(&raw)?,
                (None, Some(env)) => {
                    req.headers
                        .retain(|(k, _)| !k.eq_ignore_ascii_case("content-encoding"));
                    req.body = read(&env)?;
                }
                (None, None) => bail!(
                    "{}: no NNNN.body.bin or NNNN.envelope next to the meta",
                    meta.display()
                ),
            }
            Payload::Http(req)
        }
    })
}

/// Whether `bytes` is the `file` exporter's proto or zstd output (each
/// request after its length as 4 big-endian bytes, or the whole file one
/// zstd stream) rather than one request. A protobuf message never starts
/// with a byte below 0x08 (that would be field number 0), while the length
/// prefix of a record under 128 MiB does; nor with the zstd magic (field 5,
/// which `ExportProfilesServiceRequest` does not have).
fn is_length_prefixed(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|&b| b < 0x08)
        || bytes.starts_with(&profcol_exporters::file::ZSTD_MAGIC)
}

/// Whether `bytes` holds several JSON values one after the other (the `file`
/// exporter's JSON lines) rather than one request, which may be
/// pretty-printed over many lines.
fn holds_several_json_values(bytes: &[u8]) -> bool {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<serde::de::IgnoredAny>()
        .take(2)
        .filter(Result::is_ok)
        .count()
        > 1
}

/// `dir/0001.body.bin` -> `dir/0001.meta.json`.
fn sibling(path: &Path, from: &str, to: &str) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(from)?;
    Some(path.with_file_name(format!("{stem}{to}")))
}

fn request_from_meta(meta: &Path) -> anyhow::Result<HttpRequest> {
    let text = std::fs::read(meta).with_context(|| format!("reading {}", meta.display()))?;
    let v: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{}: not JSON", meta.display()))?;
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
    let headers = v
        .get("headers")
        .and_then(|h| h.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|pair| {
                    let k = pair.get(0)?.as_str()?;
                    let val = pair.get(1)?.as_str()?;
                    (!HOP_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
                        .then(|| (k.to_owned(), val.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default();
    let path = match s("path") {
        p if p.is_empty() => "/api/1/envelope/".to_owned(),
        p => p,
    };
    Ok(HttpRequest {
        path,
        query: s("query"),
        headers,
        body: Vec::new(),
    })
}

/// Where a receiver listens and which protocol it speaks.
#[derive(Debug, Clone)]
pub(super) enum Target {
    Otlp(u16),
    Sentry {
        port: u16,
        /// A key the receiver accepts, for recordings whose key was redacted.
        key: Option<String>,
    },
    Pyroscope(u16),
}

pub(super) async fn send(target: &Target, payload: Payload, what: &str) -> anyhow::Result<()> {
    match (target, payload) {
        (Target::Otlp(port), Payload::Otlp(requests)) => {
            let mut client = ProfilesServiceClient::connect(format!("http://127.0.0.1:{port}"))
                .await
                .context("connecting to the OTLP receiver")?
                .max_encoding_message_size(usize::MAX);
            for req in requests {
                let resp = client.export(req).await.map_err(|s| {
                    anyhow::anyhow!("{what}: refused: {:?} {}", s.code(), s.message())
                })?;
                if let Some(p) = resp.into_inner().partial_success {
                    if p.rejected_profiles > 0 || !p.error_message.is_empty() {
                        bail!(
                            "{what}: partial success: {} profiles rejected: {}",
                            p.rejected_profiles,
                            p.error_message
                        );
                    }
                }
            }
            Ok(())
        }
        // As recorded: path, query, headers, the body as sent.
        (Target::Pyroscope(port), Payload::Http(req)) => {
            post(*port, &req.path, &req.query, &req.headers, req.body, what).await
        }
        (Target::Sentry { port, key }, Payload::Http(req)) => {
            let mut query = req.query.clone();
            let has_key = |q: &str, hs: &[(String, String)]| {
                let redacted = |s: &str| s.contains("REDACTED");
                (q.contains("sentry_key=") && !redacted(q))
                    || hs.iter().any(|(k, v)| {
                        (k.eq_ignore_ascii_case("x-sentry-auth")
                            || k.eq_ignore_ascii_case("authorization"))
                            && !redacted(v)
                    })
            };
            let mut headers = req.headers.clone();
            if let Some(key) = key {
                if !has_key(&query, &headers) {
                    headers.retain(|(k, _)| {
                        !k.eq_ignore_ascii_case("x-sentry-auth")
                            && !k.eq_ignore_ascii_case("authorization")
                    });
                    query = strip_param(&query, "sentry_key");
                    headers.push((
                        "X-Sentry-Auth".into(),
                        format!(
                            "Sentry sentry_key={key}, sentry_version=7, sentry_client=profcol-test"
                        ),
                    ));
                }
            }
            let mut body = req.body;
            if let Some(key) = key {
                body = unredact_dsn(body, key, &headers);
            }
            post(*port, &req.path, &query, &headers, body, what).await
        }
        (Target::Otlp(_), Payload::Http(_)) => {
            bail!("{what}: an OTLP receiver takes OTLP or pprof input, not a recorded HTTP request")
        }
        (Target::Sentry { .. }, Payload::Otlp(_)) => {
            bail!("{what}: a Sentry receiver takes Sentry envelopes, not OTLP or pprof")
        }
        (Target::Pyroscope(_), Payload::Otlp(_)) => {
            bail!(
                "{what}: a Pyroscope receiver takes recorded Pyroscope requests \
                 (NNNN.meta.json), not OTLP or pprof"
            )
        }
    }
}

/// POSTs a request to a local receiver; a refusal is an error with its
/// status and answer.
async fn post(
    port: u16,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    what: &str,
) -> anyhow::Result<()> {
    let mut url = format!("http://127.0.0.1:{port}{path}");
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    let mut builder = reqwest::Client::new().post(url).body(body);
    for (k, v) in headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let resp = builder
        .send()
        .await
        .with_context(|| format!("{what}: sending to port {port}"))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        bail!("{what}: refused with {status}: {body}");
    }
    Ok(())
}

/// A recording's envelope `dsn` names the key `REDACTED`; with the key the
/// receiver accepts in its place, the envelope agrees with the auth header.
/// Only the header line of an uncompressed body is touched.
fn unredact_dsn(body: Vec<u8>, key: &str, headers: &[(String, String)]) -> Vec<u8> {
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-encoding"))
    {
        return body;
    }
    let end = body.iter().position(|b| *b == b'\n').unwrap_or(body.len());
    let marker = b"//REDACTED@";
    let Some(at) = body[..end].windows(marker.len()).position(|w| w == marker) else {
        return body;
    };
    let mut out = Vec::with_capacity(body.len() + key.len());
    out.extend_from_slice(&body[..at + 2]);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&body[at + marker.len() - 1..]);
    out
}

fn strip_param(query: &str, name: &str) -> String {
    query
        .split('&')
        .filter(|p| !p.is_empty() && p.split('=').next() != Some(name))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    fn fixture(rel: &str) -> Vec<u8> {
        profcol_model::testing::fixture(rel)
    }

    fn requests(payload: Payload) -> Vec<ExportProfilesServiceRequest> {
        match payload {
            Payload::Otlp(r) => r,
            Payload::Http(_) => panic!("expected OTLP"),
        }
    }

    /// `.binpb` and `.json` are read as one request, or as what the `file`
    /// exporter writes (length-prefixed protobuf, JSON lines) when they hold
    /// several.
    #[test]
    fn proto_and_json_inputs_may_be_file_exporter_output() {
        let dir = tempfile::tempdir().unwrap();
        let load_file = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            requests(load(&p, None).unwrap())
        };
        let one = fixture("otlp/minimal-request.bin");
        let two = fixture("otlp/two-resources-request.bin");
        let want: Vec<ExportProfilesServiceRequest> = [&one, &two]
            .map(|b| ExportProfilesServiceRequest::decode(b.as_slice()).unwrap())
            .to_vec();

        // Plain: one request each.
        assert_eq!(load_file("one.binpb", &one), want[..1]);
        let pretty = fixture("otlp/minimal-request.json");
        assert!(pretty.iter().filter(|&&b| b == b'\n').count() > 100);
        assert_eq!(load_file("one.json", &pretty).len(), 1);

        // The file exporter's proto format under a `.binpb`, `.pb` or `.bin` name.
        let mut framed = Vec::new();
        for b in [&one, &two] {
            framed.extend_from_slice(&(b.len() as u32).to_be_bytes());
            framed.extend_from_slice(b);
        }
        for name in ["out.binpb", "out.pb", "out.bin"] {
            assert_eq!(load_file(name, &framed), want, "{name}");
        }

        // JSON lines under a `.json` name.
        let data = want.iter().map(|r| profcol_model::proto::ProfilesData {
            resource_profiles: r.resource_profiles.clone(),
            dictionary: r.dictionary.clone(),
        });
        let mut lines = Vec::new();
        for d in data {
            lines.extend(profcol_otlp::json::encode(&d));
            lines.push(b'\n');
        }
        assert_eq!(load_file("out.json", &lines), want);

        // `compression: zstd` (each request a zstd frame after its length),
        // JSON or protobuf, under any name; a file compressed whole as `.zst`.
        let mut zstd_json = Vec::new();
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let frame = zstd::bulk::compress(line, 3).unwrap();
            zstd_json.extend_from_slice(&(frame.len() as u32).to_be_bytes());
            zstd_json.extend_from_slice(&frame);
        }
        for name in ["out.json", "out.jsonl", "out.bin"] {
            assert_eq!(load_file(name, &zstd_json), want, "{name}");
        }
        let whole = zstd::encode_all(lines.as_slice(), 3).unwrap();
        assert_eq!(load_file("out.jsonl.zst", &whole), want);
    }

    /// A recording in an older revision (async-profiler 4.2 writes v1.7.0,
    /// 4.3 v1.9.0) is read as the receiver reads it, not as v1.10.0 bytes.
    #[test]
    fn older_revisions_are_read_as_the_receiver_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        for v in ["4.2", "4.3"] {
            let bytes = fixture(&format!("otlp-revisions/async-profiler-{v}/cpu.binpb"));
            let p = dir.path().join(format!("{v}.binpb"));
            std::fs::write(&p, &bytes).unwrap();
            let got = requests(load(&p, None).unwrap());
            let want = profcol_otlp::revisions::decode(&bytes.into()).unwrap().data;
            assert_eq!(got.len(), 1, "{v}");
            assert_eq!(got[0].resource_profiles, want.resource_profiles, "{v}");
            assert_eq!(got[0].dictionary, want.dictionary, "{v}");
        }
    }

    #[test]
    fn a_redacted_dsn_gets_the_replay_key() {
        let env =
            b"{\"dsn\":\"https://REDACTED@o1.ingest.sentry.io/42\"}\n{\"type\":\"session\"}\n{}"
                .to_vec();
        let out = unredact_dsn(env.clone(), "k3y", &[]);
        assert!(out.starts_with(b"{\"dsn\":\"https://k3y@o1.ingest.sentry.io/42\"}\n"));
        assert!(out.ends_with(b"\n{\"type\":\"session\"}\n{}"));
        let gz = [("Content-Encoding".to_owned(), "gzip".to_owned())];
        assert_eq!(unredact_dsn(env.clone(), "k3y", &gz), env);
    }
}
