//! `forward_to`: what the pipeline does not consume goes to an upstream
//! Sentry or Relay, so profcol can stand in front of one without an event
//! lost.
//!
//! Each envelope is tried once while its SDK waits, so the upstream's
//! answer (status, `X-Sentry-Rate-Limits`, `Retry-After`) reaches the SDK
//! and its back-off keeps working. An upstream that cannot be reached (a
//! connection error, a timeout, 502/503/504: what Relay treats as an
//! outage) puts the envelope in a bounded queue retried in the background
//! with `retry_on_failure`, and the SDK hears 200, as from Relay. Every
//! forwarded item ends counted: forwarded, failed or dropped, by reason.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;
use tokio::sync::Notify;

use profcol_model::memory::{MemoryBudget, Reservation};
use profcol_pipeline::config::Sizer;
use profcol_pipeline::net::error_chain;
use profcol_pipeline::runtime::Backoff;
use profcol_pipeline::telemetry::Telemetry;
use profcol_queue::{BlobLog, Location, RecoveredBlobs};

use super::config::{ForwardingSettings, SentryReceiverConfig};

/// Request headers an envelope keeps on its way upstream (hop-by-hop
/// ones, `Host` and the lengths are the client's own).
const KEPT: [&str; 6] = [
    "x-sentry-auth",
    "authorization",
    "user-agent",
    "content-type",
    "origin",
    "referer",
];

/// Upstream answer headers an SDK acts on, passed back to it.
pub const PASSED_BACK: [&str; 3] = ["x-sentry-rate-limits", "retry-after", "x-sentry-error"];

/// One envelope (or the part of one the pipeline does not consume) on its
/// way upstream.
pub struct Outgoing {
    /// `/api/<project>/envelope/` and the SDK's query.
    path: String,
    headers: HeaderMap,
    /// The envelope bytes, each item as it came.
    body: Bytes,
    /// Whether to gzip it (the SDK sent it compressed).
    gzip: bool,
    /// Item types, for counting.
    items: Vec<String>,
    /// The body's room in the memory budget, held while queued.
    _memory: Option<Reservation>,
    /// Where it is stored, with a persistent queue.
    at: Option<Location>,
}

impl Outgoing {
    /// What a persistent queue stores beside the body.
    fn meta(&self) -> Vec<u8> {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "path": self.path,
            "headers": headers,
            "gzip": self.gzip,
            "items": self.items,
        }))
        .expect("JSON of strings serializes")
    }

    /// An envelope a persistent queue kept from an earlier run.
    fn stored(meta: &[u8], body: Bytes, at: Location, memory: Option<Reservation>) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Meta {
            path: String,
            headers: Vec<(String, String)>,
            gzip: bool,
            items: Vec<String>,
        }
        let m: Meta = serde_json::from_slice(meta).ok()?;
        let mut headers = HeaderMap::new();
        for (k, v) in m.headers {
            headers.append(
                HeaderName::from_bytes(k.as_bytes()).ok()?,
                HeaderValue::from_str(&v).ok()?,
            );
        }
        Some(Self {
            path: m.path,
            headers,
            body,
            gzip: m.gzip,
            items: m.items,
            _memory: memory,
            at: Some(at),
        })
    }
}

/// What the SDK is told about its forwarded items.
pub enum Answer {
    /// The upstream's answer.
    Upstream {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// The upstream is unreachable; the envelope waits in the queue.
    Queued,
    /// Neither sent nor queued (queue full or disabled, memory limit):
    /// 503, or 502/504 for an unreachable upstream without a queue.
    Refused { status: StatusCode, detail: String },
}

enum Attempt {
    /// Any answer but an outage; `ok` for 2xx.
    Answered {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// Connection error, timeout, 502/503/504.
    Unreachable { detail: String, timeout: bool },
}

pub struct Forwarder {
    id: String,
    base: String,
    project: Option<String>,
    key: Option<String>,
    http: reqwest::Client,
    settings: ForwardingSettings,
    telemetry: Arc<Telemetry>,
    budget: Arc<MemoryBudget>,
    state: Mutex<State>,
    not_empty: Notify,
    settled: Notify,
    next_id: AtomicU64,
    /// The persistent queue (`sending_queue.storage`), if any.
    log: Option<Arc<BlobLog>>,
}

#[derive(Default)]
struct State {
    pending: VecDeque<Outgoing>,
    used: usize,
    /// Item types of the envelopes consumers hold, to count them if the
    /// process stops before they settle.
    in_flight: HashMap<u64, Vec<String>>,
}

impl Forwarder {
    /// `None` without `forward_to`. With `log` (a persistent queue), what
    /// an earlier run left in it is queued again first.
    pub fn new(
        cfg: &SentryReceiverConfig,
        id: &str,
        telemetry: Arc<Telemetry>,
        budget: Arc<MemoryBudget>,
        log: Option<(BlobLog, RecoveredBlobs)>,
    ) -> anyhow::Result<Option<Arc<Self>>> {
        if cfg.forward_to.is_empty() {
            return Ok(None);
        }
        let f = &cfg.forwarding;
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("profcol/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(f.timeout.get())
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            // Envelopes go as the SDK compressed them (or as we did).
            .no_gzip()
            .danger_accept_invalid_certs(f.tls.insecure_skip_verify);
        if let Some(ca) = &f.tls.ca_file {
            let pem = std::fs::read(ca)?;
            builder = builder.tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem)?);
        }
        let mut state = State::default();
        let log = log.map(|(log, recovered)| {
            let log = Arc::new(log);
            let mut corrupt = recovered.corrupt;
            for b in recovered.blobs {
                let memory = budget.try_admit(b.body.len()).ok();
                match Outgoing::stored(&b.meta, b.body, b.at, memory) {
                    Some(out) => {
                        state.used += match f.sending_queue.sizer {
                            Sizer::Requests => 1,
                            Sizer::Bytes => out.body.len(),
                        };
                        state.pending.push_back(out);
                    }
                    None => {
                        corrupt += 1;
                        let _ = log.done(b.at);
                    }
                }
            }
            if corrupt > 0 {
                tracing::error!(receiver = %id, records = corrupt, "forwarding queue: damaged records skipped");
                telemetry.exporter_queue_corrupt(&format!("{id}/forward"), corrupt);
            }
            if !state.pending.is_empty() {
                tracing::info!(receiver = %id, envelopes = state.pending.len(), "forwarding queue: envelopes of an earlier run queued again");
            }
            log
        });
        Ok(Some(Arc::new(Self {
            id: id.to_owned(),
            base: cfg.forward_to.trim_end_matches('/').to_owned(),
            project: cfg.forward_to_project.as_ref().map(|p| p.as_string()),
            key: cfg.forward_to_key.clone(),
            http: builder.build()?,
            settings: f.clone(),
            telemetry,
            budget,
            state: Mutex::new(state),
            not_empty: Notify::new(),
            settled: Notify::new(),
            next_id: AtomicU64::new(0),
            log,
        })))
    }

    /// Starts the consumers of the retry queue.
    pub fn start(self: &Arc<Self>) {
        let q = &self.settings.sending_queue;
        if !q.enabled {
            return;
        }
        for _ in 0..q.num_consumers {
            let f = self.clone();
            tokio::spawn(async move { f.consume().await });
        }
        let queued = self.state.lock().unwrap().pending.len();
        self.telemetry.receiver_forward_queue(&self.id, queued);
    }

    /// What goes upstream for an envelope: the items `keep` selects under
    /// its header line, with the request's credentials and the project and
    /// key rewritten if configured. Err: why it cannot be held (503).
    #[allow(clippy::too_many_arguments)]
    pub fn outgoing(
        &self,
        envelope: &profcol_sentry::Envelope<'_>,
        whole: &Bytes,
        keep: impl Fn(&str) -> bool,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<Option<Outgoing>, String> {
        let items: Vec<String> = envelope
            .items
            .iter()
            .map(|i| i.item_type().to_owned())
            .filter(|t| keep(t))
            .collect();
        if items.is_empty() {
            return Ok(None);
        }
        let header_line = self.header_line(envelope);
        let body = if items.len() == envelope.items.len() && header_line.is_none() {
            whole.clone()
        } else {
            let line = header_line.as_deref().unwrap_or(envelope.raw_header);
            Bytes::from(envelope.write_selected(line, |i| keep(i.item_type())))
        };
        let memory = match self.budget.try_admit(body.len()) {
            Ok(m) => m,
            Err(_) => {
                self.count(&items, "dropped", "memory_limit");
                return Err("the memory limit is reached; cannot hold the items to forward".into());
            }
        };
        let project = self.project.as_deref().unwrap_or(project_id);
        let query = query.map(|q| self.rewrite_query(q));
        let path = match query.as_deref() {
            Some(q) if !q.is_empty() => format!("/api/{project}/envelope/?{q}"),
            _ => format!("/api/{project}/envelope/"),
        };
        let mut out = HeaderMap::new();
        for name in KEPT {
            if let Some(v) = headers.get(name) {
                out.insert(name, self.rewrite_auth(v));
            }
        }
        // The SDK's address for the upstream's own limits and geo lookup.
        let mut xff: Vec<String> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        if let Some(p) = peer {
            xff.push(p.ip().to_string());
        }
        if let Ok(v) = HeaderValue::from_str(&xff.join(", ")) {
            if !xff.is_empty() {
                out.insert("x-forwarded-for", v);
            }
        }
        let gzip = headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| !v.trim().is_empty() && !v.eq_ignore_ascii_case("identity"));
        Ok(Some(Outgoing {
            path,
            headers: out,
            body,
            gzip,
            items,
            _memory: Some(memory),
            at: None,
        }))
    }

    /// The envelope header line with its `dsn` rewritten, when the project
    /// or key is and the header has one.
    fn header_line(&self, envelope: &profcol_sentry::Envelope<'_>) -> Option<Vec<u8>> {
        if self.project.is_none() && self.key.is_none() {
            return None;
        }
        let dsn = envelope.header.get("dsn")?.as_str()?;
        let mut url = url::Url::parse(dsn).ok()?;
        if let Some(k) = &self.key {
            url.set_username(k).ok()?;
        }
        if let Some(p) = &self.project {
            let path = url.path().trim_end_matches('/');
            let prefix = path.rsplit_once('/').map_or("", |(a, _)| a);
            let new = format!("{prefix}/{p}");
            url.set_path(&new);
        }
        let mut header = envelope.header.clone();
        header["dsn"] = serde_json::Value::String(url.to_string());
        serde_json::to_vec(&header).ok()
    }

    fn rewrite_query(&self, query: &str) -> String {
        let Some(key) = &self.key else {
            return query.to_owned();
        };
        query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some(("sentry_key", _)) => format!("sentry_key={key}"),
                _ => kv.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&")
    }

    /// `sentry_key=<key>` in an `X-Sentry-Auth` / `Authorization: Sentry`
    /// value, replaced by `forward_to_key`.
    fn rewrite_auth(&self, v: &HeaderValue) -> HeaderValue {
        let (Some(key), Ok(text)) = (&self.key, v.to_str()) else {
            return v.clone();
        };
        if !text.contains("sentry_key=") {
            return v.clone();
        }
        let rewritten: Vec<String> = text
            .split(',')
            .map(|part| match part.split_once("sentry_key=") {
                Some((before, _)) => format!("{before}sentry_key={key}"),
                None => part.to_owned(),
            })
            .collect();
        HeaderValue::from_str(&rewritten.join(",")).unwrap_or_else(|_| v.clone())
    }

    /// Forwards `out` while its SDK waits; an unreachable upstream queues
    /// it for the consumers.
    pub async fn forward(&self, out: Outgoing) -> Answer {
        match self.attempt(&out).await {
            Attempt::Answered {
                status,
                headers,
                body,
            } => {
                self.settle(&out.items, status);
                Answer::Upstream {
                    status,
                    headers,
                    body,
                }
            }
            Attempt::Unreachable { detail, timeout } => self.enqueue(out, detail, timeout).await,
        }
    }

    /// Queues `out` for the consumers (on disk first, with a persistent
    /// queue: the SDK hears 200 only once it is stored).
    async fn enqueue(&self, mut out: Outgoing, detail: String, timeout: bool) -> Answer {
        let q = &self.settings.sending_queue;
        if !q.enabled || !self.settings.retry_on_failure.enabled {
            self.count(&out.items, "failed", "upstream_unreachable");
            let status = if timeout {
                StatusCode::GATEWAY_TIMEOUT
            } else {
                StatusCode::BAD_GATEWAY
            };
            return Answer::Refused {
                status,
                detail: format!("the upstream is unreachable: {detail}"),
            };
        }
        let size = match q.sizer {
            Sizer::Requests => 1,
            Sizer::Bytes => out.body.len(),
        };
        {
            let mut s = self.state.lock().unwrap();
            // One envelope larger than the whole queue goes in alone.
            if s.used > 0 && s.used + size > q.queue_size {
                drop(s);
                self.count(&out.items, "dropped", "queue_full");
                return Answer::Refused {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    detail: format!(
                        "the upstream is unreachable ({detail}) and the forwarding queue is full"
                    ),
                };
            }
            s.used += size;
        }
        if let Some(log) = &self.log {
            let (log, meta, body) = (log.clone(), out.meta(), out.body.clone());
            let stored = tokio::task::spawn_blocking(move || log.append(&meta, &body)).await;
            match stored {
                Ok(Ok(at)) => out.at = Some(at),
                failed => {
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "the storage task failed".to_owned(),
                    };
                    self.state.lock().unwrap().used -= size;
                    self.count(&out.items, "dropped", "queue_storage");
                    return Answer::Refused {
                        status: StatusCode::SERVICE_UNAVAILABLE,
                        detail: format!(
                            "the upstream is unreachable ({detail}) and the forwarding queue cannot store the envelope ({why})"
                        ),
                    };
                }
            }
        }
        profcol_model::warn_limited!(receiver = %self.id, error = %detail, "forwarding failed, will retry");
        let mut s = self.state.lock().unwrap();
        s.pending.push_back(out);
        self.telemetry
            .receiver_forward_queue(&self.id, s.pending.len());
        drop(s);
        self.not_empty.notify_one();
        Answer::Queued
    }

    /// A consumer: takes queued envelopes and retries each until it is
    /// answered or `max_elapsed_time` passes.
    async fn consume(self: Arc<Self>) {
        loop {
            let Some((id, out)) = self.take() else {
                self.not_empty.notified().await;
                continue;
            };
            let started = Instant::now();
            let mut backoff = Backoff::new(&self.settings.retry_on_failure);
            let max = self.settings.retry_on_failure.max_elapsed_time.get();
            loop {
                let delay = backoff.next_delay();
                if !max.is_zero() && started.elapsed() + delay > max {
                    self.count(&out.items, "failed", "retries_exhausted");
                    break;
                }
                tokio::time::sleep(delay).await;
                match self.attempt(&out).await {
                    Attempt::Answered { status, .. } => {
                        self.settle(&out.items, status);
                        break;
                    }
                    Attempt::Unreachable { detail, .. } => {
                        profcol_model::warn_limited!(receiver = %self.id, error = %detail, interval = ?delay, "forwarding failed, will retry");
                    }
                }
            }
            self.release(id, &out).await;
        }
    }

    fn take(&self) -> Option<(u64, Outgoing)> {
        let mut s = self.state.lock().unwrap();
        let out = s.pending.pop_front()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        s.in_flight.insert(id, out.items.clone());
        self.telemetry
            .receiver_forward_queue(&self.id, s.pending.len());
        Some((id, out))
    }

    async fn release(&self, id: u64, out: &Outgoing) {
        if let (Some(log), Some(at)) = (&self.log, out.at) {
            let log = log.clone();
            let settled = tokio::task::spawn_blocking(move || log.done(at)).await;
            if !matches!(settled, Ok(Ok(()))) {
                tracing::warn!(receiver = %self.id, "forwarding queue: cannot record a settled envelope; it may be sent again after a restart");
            }
        }
        let mut s = self.state.lock().unwrap();
        s.in_flight.remove(&id);
        s.used -= match self.settings.sending_queue.sizer {
            Sizer::Requests => 1,
            Sizer::Bytes => out.body.len(),
        };
        drop(s);
        self.settled.notify_waiters();
    }

    /// Waits until the queue is empty and nothing is in flight.
    pub async fn drain(&self) {
        loop {
            let settled = self.settled.notified();
            {
                let s = self.state.lock().unwrap();
                if s.pending.is_empty() && s.in_flight.is_empty() {
                    return;
                }
            }
            settled.await;
        }
    }

    /// At a hard stop: what is still queued or in flight is kept for the
    /// next start with a persistent queue, else counted as dropped
    /// (`shutdown`); either is logged.
    pub fn abandon(&self) {
        let mut s = self.state.lock().unwrap();
        if self.log.is_some() {
            let kept = s.pending.len() + s.in_flight.len();
            if kept > 0 {
                tracing::info!(receiver = %self.id, envelopes = kept, "forwarding: envelopes kept for the next start");
            }
            return;
        }
        let pending: Vec<Vec<String>> = s.pending.drain(..).map(|o| o.items).collect();
        let in_flight: Vec<Vec<String>> = s.in_flight.drain().map(|(_, v)| v).collect();
        drop(s);
        let envelopes = pending.len() + in_flight.len();
        if envelopes > 0 {
            tracing::warn!(receiver = %self.id, envelopes, "forwarding: envelopes dropped at shutdown");
        }
        for items in pending.iter().chain(&in_flight) {
            self.count(items, "dropped", "shutdown");
        }
    }

    async fn attempt(&self, out: &Outgoing) -> Attempt {
        let body = if out.gzip {
            let raw = out.body.clone();
            profcol_model::cpu::run(move || gzip(&raw)).await
        } else {
            out.body.clone()
        };
        let mut req = self
            .http
            .post(format!("{}{}", self.base, out.path))
            .headers(out.headers.clone())
            .timeout(self.settings.timeout.get());
        if out.gzip {
            req = req.header("content-encoding", "gzip");
        }
        let resp = match req.body(body).send().await {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Unreachable {
                    detail: error_chain(&e),
                    timeout: e.is_timeout(),
                }
            }
        };
        let status = resp.status();
        let mut headers = HeaderMap::new();
        for name in PASSED_BACK {
            for v in resp.headers().get_all(name) {
                headers.append(HeaderName::from_static(name), v.clone());
            }
        }
        if let Some(ct) = resp.headers().get("content-type") {
            headers.insert("content-type", ct.clone());
        }
        let body = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => {
                return Attempt::Unreachable {
                    detail: format!("reading the answer: {}", error_chain(&e)),
                    timeout: e.is_timeout(),
                }
            }
        };
        if matches!(status.as_u16(), 502..=504) {
            return Attempt::Unreachable {
                detail: format!("HTTP {status}"),
                timeout: status == StatusCode::GATEWAY_TIMEOUT,
            };
        }
        Attempt::Answered {
            status,
            headers,
            body,
        }
    }

    /// Counts an answered envelope's items: forwarded on 2xx, else failed
    /// with the upstream's status.
    fn settle(&self, items: &[String], status: StatusCode) {
        if status.is_success() {
            self.count(items, "forwarded", "");
        } else {
            let reason = if status == StatusCode::TOO_MANY_REQUESTS {
                "rate_limited".to_owned()
            } else {
                format!("upstream_{}", status.as_u16())
            };
            profcol_model::info_limited!(receiver = %self.id, status = status.as_u16(), "the upstream refused forwarded items");
            self.count(items, "failed", &reason);
        }
    }

    fn count(&self, items: &[String], outcome: &str, reason: &str) {
        for ty in items {
            self.telemetry
                .receiver_forwarded(&self.id, ty, outcome, reason);
        }
    }
}

fn gzip(data: &[u8]) -> Bytes {
    let mut e = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::fast(),
    );
    e.write_all(data).expect("writing to a Vec cannot fail");
    Bytes::from(e.finish().expect("writing to a Vec cannot fail"))
}

/// Our own `X-Sentry-Rate-Limits` and the upstream's, as one value: the
/// SDKs keep the longest limit per category themselves.
pub fn merge_rate_limits(
    ours: Option<&HeaderValue>,
    theirs: Option<&HeaderValue>,
) -> Option<HeaderValue> {
    match (ours, theirs) {
        (Some(a), Some(b)) => {
            let (a, b) = (a.to_str().ok()?, b.to_str().ok()?);
            HeaderValue::from_str(&format!("{a}, {b}")).ok()
        }
        (a, b) => a.or(b).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profcol_pipeline::config::{ComponentConfig, Kind};
    use profcol_sentry::parse_envelope;

    fn forwarder(yaml: &str) -> Arc<Forwarder> {
        let cfg = ComponentConfig::from_yaml(Kind::Receiver, "sentry", yaml).unwrap();
        let c: SentryReceiverConfig = cfg.decode().unwrap();
        c.validate(&cfg).unwrap();
        let budget = MemoryBudget::new(1 << 30);
        Forwarder::new(&c, "sentry", Arc::new(Telemetry::new()), budget, None)
            .unwrap()
            .unwrap()
    }

    const ENVELOPE: &[u8] = b"{\"event_id\":\"9ec79c33ec9942ab8353589fcb2e04dc\",\"dsn\":\"https://abc@o1.ingest.sentry.io/42\"}\n\
{\"type\":\"event\"}\n{\"message\":\"boom\"}\n\
{\"type\":\"profile_chunk\",\"platform\":\"python\",\"length\":2}\n{}\n\
{\"type\":\"attachment\",\"length\":3,\"filename\":\"a.bin\"}\n\x00\n\x01";

    #[test]
    fn only_the_items_not_consumed_go_byte_for_byte() {
        let f = forwarder("forward_to: https://up.example/");
        let e = parse_envelope(ENVELOPE).unwrap();
        let whole = Bytes::from_static(ENVELOPE);
        let out = f
            .outgoing(
                &e,
                &whole,
                |t| t != "profile_chunk",
                "42",
                None,
                &HeaderMap::new(),
                None,
            )
            .unwrap()
            .unwrap();
        assert_eq!(out.items, ["event", "attachment"]);
        assert_eq!(
            &out.body[..],
            &b"{\"event_id\":\"9ec79c33ec9942ab8353589fcb2e04dc\",\"dsn\":\"https://abc@o1.ingest.sentry.io/42\"}\n\
{\"type\":\"event\"}\n{\"message\":\"boom\"}\n\
{\"type\":\"attachment\",\"length\":3,\"filename\":\"a.bin\"}\n\x00\n\x01\n"[..]
        );
        assert_eq!(out.path, "/api/42/envelope/");
        // Everything kept: the very bytes received.
        let all = f
            .outgoing(&e, &whole, |_| true, "42", None, &HeaderMap::new(), None)
            .unwrap()
            .unwrap();
        assert_eq!(all.body.as_ptr(), whole.as_ptr());
        // Nothing to forward: nothing.
        assert!(f
            .outgoing(&e, &whole, |_| false, "42", None, &HeaderMap::new(), None)
            .unwrap()
            .is_none());
    }

    #[test]
    fn project_and_key_are_rewritten_everywhere_the_sdk_put_them() {
        let f = forwarder(
            "{forward_to: https://up.example, forward_to_project: 7, forward_to_key: newkey}",
        );
        let e = parse_envelope(ENVELOPE).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-sentry-auth",
            HeaderValue::from_static("Sentry sentry_key=abc, sentry_version=7, sentry_client=x/1"),
        );
        headers.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.9"));
        let peer = Some("192.0.2.1:5000".parse().unwrap());
        let out = f
            .outgoing(
                &e,
                &Bytes::from_static(ENVELOPE),
                |_| true,
                "42",
                Some("sentry_version=7&sentry_key=abc"),
                &headers,
                peer,
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            out.path,
            "/api/7/envelope/?sentry_version=7&sentry_key=newkey"
        );
        assert_eq!(
            out.headers["x-sentry-auth"],
            "Sentry sentry_key=newkey, sentry_version=7, sentry_client=x/1"
        );
        assert_eq!(out.headers["x-forwarded-for"], "10.0.0.9, 192.0.2.1");
        let sent = parse_envelope(&out.body).unwrap();
        assert_eq!(sent.header["dsn"], "https://newkey@o1.ingest.sentry.io/7");
        // The items are untouched.
        let raw: Vec<&[u8]> = sent.items.iter().map(|i| i.raw).collect();
        let want: Vec<&[u8]> = e.items.iter().map(|i| i.raw).collect();
        assert_eq!(raw, want);
    }

    #[test]
    fn rate_limits_are_merged_for_the_sdk() {
        let ours = HeaderValue::from_static("1:profile_chunk;profile:organization");
        let theirs = HeaderValue::from_static("60:error:key");
        assert_eq!(
            merge_rate_limits(Some(&ours), Some(&theirs)).unwrap(),
            "1:profile_chunk;profile:organization, 60:error:key"
        );
        assert_eq!(merge_rate_limits(None, Some(&theirs)).unwrap(), theirs);
        assert!(merge_rate_limits(None, None).is_none());
    }
}
