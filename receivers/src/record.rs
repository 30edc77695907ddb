//! `record_to`: every accepted request written to a directory, byte for
//! byte, so production traffic becomes `profcol test` input. Recording runs
//! on its own thread behind a bounded queue and never slows or fails a
//! request: when the queue is full the recording is skipped and logged.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderMap;
use serde_json::json;

/// Recordings waiting for the writer thread.
const QUEUE: usize = 64;
/// Replaces secrets in recorded headers, queries and DSNs.
pub const REDACTED: &str = "REDACTED";

/// `record_to` must not be empty when set.
pub fn validate(
    record_to: Option<&str>,
    cfg: &profcol_pipeline::config::ComponentConfig,
    errs: &mut profcol_pipeline::config::ConfigErrors,
) {
    if record_to.is_some_and(|d| d.trim().is_empty()) {
        errs.push(cfg.key_path("record_to"), "must be a directory, not empty");
    }
}

/// One accepted request, as it will be written.
pub struct Recording {
    pub method: &'static str,
    pub path: String,
    pub query: String,
    pub http_version: String,
    pub headers: Vec<(String, String)>,
    pub transport: &'static str,
    /// The bytes the receiver parsed (after undoing any compression).
    pub body: Bytes,
    /// `envelope` or `binpb`.
    pub ext: &'static str,
}

pub struct Recorder {
    tx: Option<SyncSender<Recording>>,
    writer: Option<std::thread::JoinHandle<()>>,
    skipped: AtomicU64,
    receiver: String,
}

/// What was queued is written before the receiver is gone (bounded by the
/// queue's 64 recordings).
impl Drop for Recorder {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Recorder {
    /// Creates `dir` and starts the writer; sequence numbers continue after
    /// the highest recording already there.
    pub fn start(dir: &Path, max_files: usize, receiver: &str) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!(
                "receivers::{receiver}::record_to: cannot create {}: {e}",
                dir.display()
            )
        })?;
        let probe = dir.join(".profcol-write-test");
        std::fs::write(&probe, b"")
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|e| {
                anyhow::anyhow!(
                    "receivers::{receiver}::record_to: cannot write in {}: {e}",
                    dir.display()
                )
            })?;
        let next = recordings(dir).last().map_or(1, |s| s + 1);
        let (tx, rx) = sync_channel::<Recording>(QUEUE);
        let (dir, id) = (dir.to_path_buf(), receiver.to_owned());
        let writer = std::thread::Builder::new()
            .name(format!("record-{receiver}"))
            .spawn(move || {
                let mut seq = next;
                for r in rx {
                    if let Err(e) = write(&dir, seq, &id, &r) {
                        tracing::warn!(receiver = %id, error = %e, "recording failed");
                        continue;
                    }
                    seq += 1;
                    if max_files > 0 {
                        rotate(&dir, max_files);
                    }
                }
            })?;
        Ok(Self {
            tx: Some(tx),
            writer: Some(writer),
            skipped: AtomicU64::new(0),
            receiver: receiver.to_owned(),
        })
    }

    pub fn record(&self, r: Recording) {
        let Some(tx) = &self.tx else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(r) {
            let n = self.skipped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(receiver = %self.receiver, skipped = n, "recording queue full; requests not recorded");
            }
        }
    }
}

/// Sequence numbers of the recordings in `dir`, ascending.
fn recordings(dir: &Path) -> Vec<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.strip_suffix(".meta.json")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    seqs.sort_unstable();
    seqs
}

fn write(dir: &Path, seq: u64, receiver: &str, r: &Recording) -> std::io::Result<()> {
    let body_name = format!("{seq:04}.{}", r.ext);
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let meta = json!({
        "seq": seq,
        "time": time,
        "method": r.method,
        "path": r.path,
        "query": r.query,
        "http_version": r.http_version,
        "headers": r.headers,
        "receiver": receiver,
        "transport": r.transport,
        "body": body_name,
    });
    // Body first: a meta file always has its body.
    atomic_write(&dir.join(&body_name), &r.body)?;
    let meta = serde_json::to_vec_pretty(&meta).map_err(std::io::Error::other)?;
    atomic_write(&dir.join(format!("{seq:04}.meta.json")), &meta)
}

fn atomic_write(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn rotate(dir: &Path, max_files: usize) {
    let seqs = recordings(dir);
    let excess = seqs.len().saturating_sub(max_files);
    for seq in &seqs[..excess] {
        let prefix = format!("{seq:04}.");
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.filter_map(Result::ok) {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// Headers in arrival order with secrets redacted. The recorded body is
/// already decoded, so `content-encoding` is kept only as a note and
/// `content-length` is dropped.
pub fn headers(map: &HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .filter(|(k, _)| *k != http::header::CONTENT_LENGTH)
        .map(|(k, v)| {
            let name = k.as_str();
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            if name == "content-encoding" {
                return ("x-profcol-original-content-encoding".to_owned(), value);
            }
            (name.to_owned(), redact_header(name, &value))
        })
        .collect()
}

fn redact_header(name: &str, value: &str) -> String {
    let secret_name = [
        "token",
        "api-key",
        "apikey",
        "secret",
        "cookie",
        "proxy-authorization",
    ]
    .iter()
    .any(|s| name.contains(s));
    if name == "x-sentry-auth"
        || (name == "authorization" && value.trim_start().starts_with("Sentry "))
    {
        redact_params(value, ", ")
    } else if secret_name || name == "authorization" {
        REDACTED.to_owned()
    } else {
        value.to_owned()
    }
}

/// `sentry_key=abc, sentry_version=7` -> `sentry_key=REDACTED, sentry_version=7`.
fn redact_params(list: &str, sep: &str) -> String {
    list.split(sep)
        .map(|part| match part.split_once('=') {
            Some((k, _)) if is_secret_param(k) => format!("{k}={REDACTED}"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(sep)
}

fn is_secret_param(k: &str) -> bool {
    let k = k.trim().trim_start_matches("Sentry ").trim();
    matches!(k, "sentry_key" | "sentry_secret")
}

pub fn query(q: Option<&str>) -> String {
    q.map(|q| redact_params(q, "&")).unwrap_or_default()
}

/// The envelope with the public key of a header `dsn` redacted; only the
/// header line changes, so item bytes (and their `length`s) stay exact.
pub fn redact_envelope(body: Bytes) -> Bytes {
    let end = body.iter().position(|b| *b == b'\n').unwrap_or(body.len());
    let Ok(mut header) = serde_json::from_slice::<serde_json::Value>(&body[..end]) else {
        return body;
    };
    let Some(dsn) = header.get("dsn").and_then(|d| d.as_str()) else {
        return body;
    };
    let Ok(mut url) = url::Url::parse(dsn) else {
        return body;
    };
    if url.username().is_empty() || url.set_username(REDACTED).is_err() {
        return body;
    }
    let _ = url.set_password(None);
    header["dsn"] = json!(url.as_str());
    let mut out = serde_json::to_vec(&header).expect("a JSON value serializes");
    out.extend_from_slice(&body[end..]);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(body: &'static [u8]) -> Recording {
        Recording {
            method: "POST",
            path: "/api/1/envelope/".into(),
            query: String::new(),
            http_version: "HTTP/1.1".into(),
            headers: vec![],
            transport: "http",
            body: Bytes::from_static(body),
            ext: "envelope",
        }
    }

    #[test]
    fn sequence_continues_and_rotation_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0007.meta.json"), "{}").unwrap();
        std::fs::write(dir.path().join("0007.envelope"), "x").unwrap();
        let rec = Recorder::start(dir.path(), 3, "sentry").unwrap();
        for body in [&b"a"[..], b"b", b"c"] {
            rec.record(recording(body));
        }
        drop(rec); // waits for the writer
        assert_eq!(recordings(dir.path()), [8, 9, 10]);
        assert!(!dir.path().join("0007.envelope").exists());
        assert_eq!(
            std::fs::read(dir.path().join("0010.envelope")).unwrap(),
            b"c"
        );
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("0010.meta.json")).unwrap())
                .unwrap();
        assert_eq!(meta["body"], "0010.envelope");
        assert_eq!(meta["receiver"], "sentry");
    }

    #[test]
    fn secrets_are_redacted() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-sentry-auth",
            "Sentry sentry_key=abc, sentry_version=7, sentry_client=py"
                .parse()
                .unwrap(),
        );
        h.insert("x-api-token", "t0ps3cret".parse().unwrap());
        h.insert("content-encoding", "gzip".parse().unwrap());
        h.insert("content-length", "10".parse().unwrap());
        h.insert("user-agent", "sentry.python/2".parse().unwrap());
        let got = headers(&h);
        let text = format!("{got:?}");
        assert!(
            !text.contains("abc") && !text.contains("t0ps3cret"),
            "{text}"
        );
        assert!(
            text.contains("sentry_key=REDACTED, sentry_version=7"),
            "{text}"
        );
        assert!(
            text.contains("x-profcol-original-content-encoding")
                && !text.contains("content-length"),
            "{text}"
        );
        assert_eq!(
            query(Some("sentry_version=7&sentry_key=abc")),
            "sentry_version=7&sentry_key=REDACTED"
        );
    }

    #[test]
    fn only_the_dsn_key_changes_in_an_envelope() {
        let item = b"{\"type\":\"profile_chunk\",\"length\":3}\nabc\n";
        let mut env = br#"{"dsn":"https://abc123@o1.ingest.sentry.io/42","event_id":"e"}"#.to_vec();
        env.push(b'\n');
        env.extend_from_slice(item);
        let out = redact_envelope(Bytes::from(env));
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(!text.contains("abc123"), "{text}");
        assert!(
            text.contains("https://REDACTED@o1.ingest.sentry.io/42"),
            "{text}"
        );
        assert!(out.ends_with(item));
        let plain = Bytes::from_static(b"{}\n{\"type\":\"session\"}\n{}");
        assert_eq!(redact_envelope(plain.clone()), plain);
    }
}
