//! `record_to`: every accepted request written to a directory, byte for
//! byte, so production traffic becomes `profcol test` input. Recording runs
//! on its own thread behind a bounded queue and never slows or fails a
//! request: when the queue is full the recording is skipped and logged.
//!
//! Files: `NNNN.<ext>` (the body the receiver parsed) and `NNNN.meta.json`
//! (method, path, query, headers, receiver, transport, body file name), with
//! secrets redacted. Numbering continues after the highest recording already
//! in the directory; files appear atomically (temp file and rename).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderMap;

/// Recordings waiting for the writer thread.
const QUEUE: usize = 64;
/// Replaces secrets in recorded headers, queries and envelope headers.
pub const REDACTED: &str = "REDACTED";

/// `record_to` must not be empty when set, nor name what [`Recorder::start`]
/// will refuse and can be seen without creating anything: a path that
/// exists but is not a directory, or one below a file.
pub fn validate(
    record_to: Option<&str>,
    cfg: &profcol_pipeline::config::ComponentConfig,
    errs: &mut profcol_pipeline::config::ConfigErrors,
) {
    let Some(dir) = record_to else {
        return;
    };
    if dir.trim().is_empty() {
        errs.push(cfg.key_path("record_to"), "must be a directory, not empty");
        return;
    }
    let dir = Path::new(dir);
    let problem = match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!("{} exists but is not a directory", dir.display())),
        // Created at start.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("cannot use {}: {e}", dir.display())),
    };
    if let Some(p) = problem {
        errs.push(cfg.key_path("record_to"), p);
    }
}

/// One accepted request, as it will be written.
pub struct Recording {
    pub method: &'static str,
    pub path: String,
    pub query: String,
    pub http_version: String,
    /// Already redacted, see [`headers`].
    pub headers: Vec<(String, String)>,
    /// `http` or `grpc`.
    pub transport: &'static str,
    /// The bytes the receiver parsed (after undoing any compression). An
    /// `envelope` gets its header line redacted by the writer.
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
    /// Creates `dir` (and its parents) and starts the writer; an unusable
    /// directory is an error naming `receivers::<receiver>::record_to`.
    /// `max_files` recordings are kept, 0 keeps all.
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
        let existing = recordings(dir);
        let next = existing.last().map_or(1, |s| s + 1);
        let mut kept = existing.len();
        let (tx, rx) = sync_channel::<Recording>(QUEUE);
        let (dir, id) = (dir.to_path_buf(), receiver.to_owned());
        let writer = std::thread::Builder::new()
            .name(format!("record-{receiver}"))
            .spawn(move || {
                let mut seq = next;
                for r in rx {
                    if let Err(e) = write(&dir, seq, &id, &r) {
                        tracing::warn!(receiver = %id, error = %e, dir = %dir.display(), "recording failed");
                        continue;
                    }
                    seq += 1;
                    kept += 1;
                    if max_files > 0 && kept > max_files {
                        kept = rotate(&dir, max_files);
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

    /// A recorder when `record_to` is set.
    pub fn for_config(
        record_to: Option<&str>,
        max_files: usize,
        receiver: &str,
    ) -> anyhow::Result<Option<Self>> {
        record_to
            .map(|dir| Self::start(Path::new(dir), max_files, receiver))
            .transpose()
    }

    /// Queues a recording; never blocks. A full queue skips it (counted,
    /// logged at 1, 2, 4, 8… skips).
    pub fn record(&self, r: Recording) {
        let Some(tx) = &self.tx else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(r) {
            let n = self.skipped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(receiver = %self.receiver, skipped = n, "recording queue full; requests not recorded");
            }
        }
    }

    /// Recordings skipped because the queue was full.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// The sequence number of a recording file: `0042.envelope` -> 42.
fn seq_of(name: &str) -> Option<u64> {
    let (n, _) = name.split_once('.')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Sequence numbers of the recordings (`NNNN.meta.json`) in `dir`, ascending.
fn recordings(dir: &Path) -> Vec<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.strip_suffix(".meta.json")?;
                    seq_of(&name)
                })
                .collect()
        })
        .unwrap_or_default();
    seqs.sort_unstable();
    seqs
}

/// `NNNN.meta.json`, in the recorded fixtures' key order.
#[derive(serde::Serialize)]
struct Meta<'a> {
    seq: u64,
    /// Unix seconds.
    time: f64,
    method: &'a str,
    path: &'a str,
    query: &'a str,
    http_version: &'a str,
    /// `[name, value]` pairs.
    headers: &'a [(String, String)],
    receiver: &'a str,
    transport: &'a str,
    /// The body's file name, next to this one.
    body: &'a str,
}

fn write(dir: &Path, seq: u64, receiver: &str, r: &Recording) -> std::io::Result<()> {
    let body_name = format!("{seq:04}.{}", r.ext);
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let meta = Meta {
        seq,
        time,
        method: r.method,
        path: &r.path,
        query: &r.query,
        http_version: &r.http_version,
        headers: &r.headers,
        receiver,
        transport: r.transport,
        body: &body_name,
    };
    // Only the envelope's header line may change; items stay as received.
    let header = (r.ext == "envelope")
        .then(|| redact_envelope_header(&r.body))
        .flatten();
    let parts: [&[u8]; 2] = match &header {
        Some((line, end)) => [line, &r.body[*end..]],
        None => [&r.body, &[]],
    };
    // Body first: a meta file always has its body.
    atomic_write(dir, &body_name, &parts)?;
    let meta = serde_json::to_vec_pretty(&meta).map_err(std::io::Error::other)?;
    atomic_write(dir, &format!("{seq:04}.meta.json"), &[&meta])
}

/// Written under a hidden temporary name, then renamed into place.
fn atomic_write(dir: &Path, name: &str, parts: &[&[u8]]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        f.flush()?;
        drop(f);
        std::fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Deletes the oldest recordings (every file of their sequence number)
/// until `max_files` are left; returns how many are left.
fn rotate(dir: &Path, max_files: usize) -> usize {
    let seqs = recordings(dir);
    let excess = seqs.len().saturating_sub(max_files);
    if excess == 0 {
        return seqs.len();
    }
    let oldest_kept = seqs[excess];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name();
            if seq_of(&name.to_string_lossy()).is_some_and(|s| s < oldest_kept) {
                if let Err(err) = std::fs::remove_file(e.path()) {
                    tracing::warn!(file = %e.path().display(), error = %err, "cannot delete an old recording");
                }
            }
        }
    }
    seqs.len() - excess
}

/// Headers in arrival order (values of a repeated name together) with
/// secrets redacted. The recorded body is already decoded, so
/// `content-encoding` (and gRPC's `grpc-encoding`) is kept only as
/// `x-profcol-original-…` and `content-length` is dropped: body and headers
/// replay consistently.
pub fn headers(map: &HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .filter(|(k, _)| *k != http::header::CONTENT_LENGTH)
        .map(|(k, v)| {
            let name = k.as_str();
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            if name == "content-encoding" || name == "grpc-encoding" {
                return (format!("x-profcol-original-{name}"), value);
            }
            (name.to_owned(), redact_header(name, &value))
        })
        .collect()
}

/// Names (lowercase) whose values are secrets wherever they appear.
const SECRET_NAME_PARTS: [&str; 7] = [
    "auth", "cookie", "token", "api-key", "apikey", "secret", "password",
];

/// Whether a header (lowercase name) carries a credential.
pub fn is_secret(name: &str) -> bool {
    name == "x-sentry-auth" || SECRET_NAME_PARTS.iter().any(|s| name.contains(s))
}

fn redact_header(name: &str, value: &str) -> String {
    if name == "x-sentry-auth"
        || (name == "authorization" && value.trim_start().starts_with("Sentry "))
    {
        // Keep the structure, e.g. `Sentry sentry_key=REDACTED, sentry_version=7`.
        redact_params(value, ',')
    } else if SECRET_NAME_PARTS.iter().any(|s| name.contains(s)) {
        REDACTED.to_owned()
    } else {
        value.to_owned()
    }
}

/// `sentry_key=abc, sentry_version=7` -> `sentry_key=REDACTED, sentry_version=7`;
/// everything but the secret values stays as it was.
fn redact_params(list: &str, sep: char) -> String {
    list.split(sep)
        .map(|part| match part.split_once('=') {
            Some((k, _)) if is_secret_param(k) => format!("{k}={REDACTED}"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(&sep.to_string())
}

fn is_secret_param(k: &str) -> bool {
    let k = k.trim();
    let k = k.strip_prefix("Sentry ").unwrap_or(k).trim();
    matches!(k, "sentry_key" | "sentry_secret")
}

/// The query string with `sentry_key`/`sentry_secret` values redacted.
pub fn query(q: Option<&str>) -> String {
    q.map(|q| redact_params(q, '&')).unwrap_or_default()
}

/// The envelope's header line with the public key redacted in its `dsn`
/// (`https://REDACTED@host/1`) and in `trace.public_key` (the same key),
/// and where that line ends; `None` when there is nothing to redact. Only
/// those string literals change: the rest of the line, and every item with
/// its `length`, stays byte for byte.
pub fn redact_envelope_header(body: &[u8]) -> Option<(Vec<u8>, usize)> {
    let end = body.iter().position(|b| *b == b'\n').unwrap_or(body.len());
    let line = &body[..end];
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()?
        .as_object()?;
    let mut out = Vec::with_capacity(line.len() + 16);
    let (mut copied, mut changed) = (0, false);
    // The object key the next string value belongs to.
    let mut key: Option<String> = None;
    let mut i = 0;
    while i < line.len() {
        if line[i] != b'"' {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < line.len() && line[j] != b'"' {
            j += if line[j] == b'\\' { 2 } else { 1 };
        }
        if j >= line.len() {
            return None;
        }
        let s: String = serde_json::from_slice(&line[i..=j]).ok()?;
        let is_key = line[j + 1..]
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| *b == b':');
        if is_key {
            key = Some(s);
        } else {
            let redacted = match key.take().as_deref() {
                Some("dsn") => redact_dsn(&s),
                Some("public_key") if !s.is_empty() => Some(REDACTED.to_owned()),
                _ => None,
            };
            if let Some(r) = redacted.filter(|r| *r != s) {
                out.extend_from_slice(&line[copied..i]);
                out.extend_from_slice(&serde_json::to_vec(&r).ok()?);
                copied = j + 1;
                changed = true;
            }
        }
        i = j + 1;
    }
    if !changed {
        return None;
    }
    out.extend_from_slice(&line[copied..]);
    Some((out, end))
}

/// `https://key[:secret]@host/1` -> `https://REDACTED@host/1`.
fn redact_dsn(dsn: &str) -> Option<String> {
    let (scheme, rest) = dsn.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    Some(format!("{scheme}://{REDACTED}@{}", &rest[at + 1..]))
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

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn sequence_continues_after_existing_recordings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0007.meta.json"), "{}").unwrap();
        std::fs::write(dir.path().join("0007.envelope"), "x").unwrap();
        std::fs::write(dir.path().join("0003.meta.json"), "{}").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a recording").unwrap();
        let rec = Recorder::start(dir.path(), 0, "sentry").unwrap();
        rec.record(recording(b"a"));
        rec.record(recording(b"b"));
        drop(rec); // waits for the writer
        assert_eq!(recordings(dir.path()), [3, 7, 8, 9]);
        assert_eq!(
            std::fs::read(dir.path().join("0007.envelope")).unwrap(),
            b"x"
        );
        assert_eq!(
            std::fs::read(dir.path().join("0009.envelope")).unwrap(),
            b"b"
        );
        let text = std::fs::read_to_string(dir.path().join("0009.meta.json")).unwrap();
        let keys = [
            "seq",
            "time",
            "method",
            "path",
            "query",
            "http_version",
            "headers",
            "receiver",
            "transport",
            "body",
        ];
        let at: Vec<usize> = keys
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "the fixtures' key order: {text}"
        );
        let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(meta["seq"], 9);
        assert_eq!(meta["body"], "0009.envelope");
        assert_eq!(meta["receiver"], "sentry");
        assert_eq!(meta["transport"], "http");
        assert!(meta["time"].as_f64().unwrap() > 1.7e9);
        // Restarting continues again, and no temporary file is left.
        let rec = Recorder::start(dir.path(), 0, "sentry").unwrap();
        rec.record(recording(b"c"));
        drop(rec);
        assert_eq!(recordings(dir.path()), [3, 7, 8, 9, 10]);
        assert!(
            names(dir.path()).iter().all(|n| !n.starts_with('.')),
            "{:?}",
            names(dir.path())
        );
    }

    #[test]
    fn rotation_keeps_the_newest_recordings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0007.meta.json"), "{}").unwrap();
        std::fs::write(dir.path().join("0007.envelope"), "x").unwrap();
        let rec = Recorder::start(dir.path(), 3, "sentry").unwrap();
        for body in [&b"a"[..], b"b", b"c", b"d", b"e"] {
            rec.record(recording(body));
        }
        drop(rec);
        assert_eq!(recordings(dir.path()), [10, 11, 12]);
        assert_eq!(
            names(dir.path()),
            [
                "0010.envelope",
                "0010.meta.json",
                "0011.envelope",
                "0011.meta.json",
                "0012.envelope",
                "0012.meta.json"
            ]
        );
        assert_eq!(
            std::fs::read(dir.path().join("0012.envelope")).unwrap(),
            b"e"
        );
    }

    #[test]
    fn an_unusable_directory_is_a_start_up_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = Recorder::start(&file.join("rec"), 10, "sentry/prod")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.starts_with("receivers::sentry/prod::record_to: cannot create"),
            "{err}"
        );
        // Parents are created.
        let nested = dir.path().join("a/b/c");
        drop(Recorder::start(&nested, 10, "sentry").unwrap());
        assert!(nested.is_dir());
    }

    #[test]
    fn secrets_are_redacted() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-sentry-auth",
            "Sentry sentry_key=abc,sentry_version=7, sentry_secret=s3, sentry_client=py"
                .parse()
                .unwrap(),
        );
        h.insert("x-api-token", "t0ps3cret".parse().unwrap());
        h.insert("authorization", "Bearer b3arer".parse().unwrap());
        h.insert("proxy-authorization", "Basic cHJveHk=".parse().unwrap());
        h.insert("cookie", "session=c00kie".parse().unwrap());
        h.insert("x-apikey", "k3y".parse().unwrap());
        h.insert("content-encoding", "gzip".parse().unwrap());
        h.insert("content-length", "10".parse().unwrap());
        h.insert("user-agent", "sentry.python/2".parse().unwrap());
        let got = headers(&h);
        let text = format!("{got:?}");
        for secret in [
            "abc",
            "s3,",
            "t0ps3cret",
            "b3arer",
            "cHJveHk",
            "c00kie",
            "k3y",
        ] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        assert_eq!(
            got[0].1,
            "Sentry sentry_key=REDACTED,sentry_version=7, sentry_secret=REDACTED, sentry_client=py"
        );
        assert!(got.contains(&("x-profcol-original-content-encoding".into(), "gzip".into())));
        assert!(got.contains(&("user-agent".into(), "sentry.python/2".into())));
        assert!(
            got.iter()
                .all(|(k, _)| k != "content-length" && k != "content-encoding"),
            "{text}"
        );
        let mut h = HeaderMap::new();
        h.insert("authorization", "Sentry sentry_key=abc".parse().unwrap());
        assert_eq!(headers(&h)[0].1, "Sentry sentry_key=REDACTED");
        assert_eq!(
            query(Some("sentry_version=7&sentry_key=abc&sentry_secret=x")),
            "sentry_version=7&sentry_key=REDACTED&sentry_secret=REDACTED"
        );
        assert_eq!(query(None), "");
    }

    #[test]
    fn only_the_key_changes_in_an_envelope_header() {
        let item = b"{\"type\":\"profile_chunk\",\"length\":3}\nabc\n";
        let header = br#"{"event_id":"e", "dsn" : "https://abc123:s3@o1.ingest.sentry.io/42","trace":{"trace_id":"t","public_key":"abc123"},"sdk":{"name":"x"}}"#;
        let mut env = header.to_vec();
        env.push(b'\n');
        env.extend_from_slice(item);
        let (line, end) = redact_envelope_header(&env).unwrap();
        assert_eq!(end, header.len());
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"{"event_id":"e", "dsn" : "https://REDACTED@o1.ingest.sentry.io/42","trace":{"trace_id":"t","public_key":"REDACTED"},"sdk":{"name":"x"}}"#
        );
        // Nothing to redact: the body is written as it is.
        for plain in [
            &b"{}\n{\"type\":\"session\"}\n{}"[..],
            b"{\"dsn\":\"https://REDACTED@h/1\"}\n",
            b"{\"event_id\":\"dsn\"}",
            b"not json\n",
        ] {
            assert!(redact_envelope_header(plain).is_none());
        }
    }

    #[test]
    fn envelopes_are_written_with_the_header_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::start(dir.path(), 0, "sentry").unwrap();
        let env =
            b"{\"dsn\":\"http://k3y@localhost:3000/1\"}\n{\"type\":\"x\",\"length\":3}\nk3y\n";
        rec.record(recording(env));
        rec.record(Recording {
            ext: "binpb",
            transport: "grpc",
            ..recording(env)
        });
        drop(rec);
        assert_eq!(
            std::fs::read(dir.path().join("0001.envelope")).unwrap(),
            b"{\"dsn\":\"http://REDACTED@localhost:3000/1\"}\n{\"type\":\"x\",\"length\":3}\nk3y\n"
        );
        // Only envelopes are rewritten.
        assert_eq!(std::fs::read(dir.path().join("0002.binpb")).unwrap(), env);
    }
}
