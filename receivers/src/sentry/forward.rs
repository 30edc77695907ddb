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
//!
//! The queue drains at the upstream's pace: each consumer backs off per
//! envelope, but only while the upstream is down; the first answer any
//! attempt gets (a consumer's or an SDK's) wakes every consumer waiting
//! out a backoff, and an envelope taken while the upstream answers goes at
//! once (Relay likewise holds its queue during an outage and sends it all
//! when its probe gets through).
//!
//! A POST that timed out (or got 504) after it was sent may have been
//! taken: it is retried, as Relay retries, but with twice the time to
//! answer each time, so a slow upstream is waited for rather than sent the
//! envelope again and again; one delivered after such an attempt is
//! counted as a possible duplicate.
//!
//! A 429 with `X-Sentry-Rate-Limits` is Sentry discarding the envelope (it
//! was received): a queued one is not retried, and its limits are kept per
//! category and scope so that queued envelopes under them are discarded
//! before they are sent, as Relay does (see `upstream_limits`). A 429
//! without them is throttling on the way (a proxy): held and retried after
//! `Retry-After`.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;
use tokio::sync::Notify;

use profcol_model::memory::{MemoryBudget, Reservation};
use profcol_pipeline::config::{ConfigErrors, Sizer};
use profcol_pipeline::net::error_chain;
use profcol_pipeline::runtime::Backoff;
use profcol_pipeline::telemetry::Telemetry;
use profcol_queue::{BlobLog, Location, RecoveredBlobs};

use super::config::{ForwardingSettings, SentryReceiverConfig};
use super::upstream_limits::{retry_after_secs, Scoping, UpstreamLimits};

/// How much longer than `forwarding.timeout` a retry of a POST that timed
/// out may wait for its answer (doubling per attempt).
const MAX_TIMEOUT_GROWTH: u32 = 8;

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
pub(super) const PASSED_BACK: [&str; 3] = ["x-sentry-rate-limits", "retry-after", "x-sentry-error"];

/// One envelope (or the part of one the pipeline does not consume) on its
/// way upstream.
pub(super) struct Outgoing {
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
    /// An attempt may have reached the upstream without an answer (a
    /// timeout or 504 after the request was sent).
    maybe_taken: bool,
    /// The time the next attempt gives the upstream to answer.
    timeout: Duration,
    /// The body's length as queued (what `sizer: bytes` charged), kept
    /// when a rate limit takes items out of the body.
    queued_len: usize,
}

/// How much of the queue's capacity `out` takes. `items` is refused for
/// this queue by the config (an envelope is forwarded whole), so it counts
/// as a request.
fn queued_size(sizer: Sizer, out: &Outgoing) -> usize {
    match sizer {
        Sizer::Requests | Sizer::Items => 1,
        Sizer::Bytes => out.queued_len,
    }
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
            gzip: m.gzip,
            items: m.items,
            _memory: memory,
            at: Some(at),
            maybe_taken: false,
            timeout: Duration::ZERO,
            queued_len: body.len(),
            body,
        })
    }
}

/// What the SDK is told about its forwarded items.
pub(super) enum Answer {
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
    /// Connection error, timeout, 502/503/504. `maybe_taken`: the request
    /// was sent and may have been taken (a timeout after connecting, 504).
    Unreachable {
        detail: String,
        timeout: bool,
        maybe_taken: bool,
    },
}

pub(super) struct Forwarder {
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
    /// The last attempt found the upstream down: consumers back off.
    outage: std::sync::atomic::AtomicBool,
    /// Woken when an attempt is answered, ending every backoff.
    answered: Notify,
    /// The upstream's rate limits, per category and scope.
    limits: Mutex<UpstreamLimits>,
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
    pub(super) fn new(
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
            .no_gzip();
        let mut errs = ConfigErrors::default();
        builder = f.tls.configure(builder, "tls", &mut errs);
        if !errs.0.is_empty() {
            anyhow::bail!("{errs}");
        }
        let mut state = State::default();
        let log = log.map(|(log, recovered)| {
            let log = Arc::new(log);
            let mut corrupt = recovered.corrupt;
            for b in recovered.blobs {
                let memory = budget.try_admit(b.body.len()).ok();
                match Outgoing::stored(&b.meta, b.body, b.at, memory) {
                    Some(out) => {
                        state.used += queued_size(f.sending_queue.sizer, &out);
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
            outage: std::sync::atomic::AtomicBool::new(false),
            answered: Notify::new(),
            limits: Mutex::new(UpstreamLimits::default()),
        })))
    }

    /// Starts the consumers of the retry queue.
    pub(super) fn start(self: &Arc<Self>) {
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
    pub(super) fn outgoing(
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
            gzip,
            items,
            _memory: Some(memory),
            at: None,
            maybe_taken: false,
            timeout: self.settings.timeout.get(),
            queued_len: body.len(),
            body,
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
    pub(super) async fn forward(&self, mut out: Outgoing) -> Answer {
        match self.attempt(&out).await {
            Attempt::Answered {
                status,
                headers,
                body,
            } => {
                self.note(true);
                self.record_limits(&out, status, &headers);
                self.settle(&out.items, status);
                Answer::Upstream {
                    status,
                    headers,
                    body,
                }
            }
            Attempt::Unreachable {
                detail,
                timeout,
                maybe_taken,
            } => {
                self.note(false);
                if maybe_taken {
                    out.maybe_taken = true;
                    out.timeout = self.longer(out.timeout);
                }
                self.enqueue(out, detail, timeout).await
            }
        }
    }

    /// The time to answer after an attempt that may have been taken.
    fn longer(&self, t: Duration) -> Duration {
        let base = self.settings.timeout.get();
        t.max(base).saturating_mul(2).min(base * MAX_TIMEOUT_GROWTH)
    }

    /// Records the rate limits of an answer (any status: Sentry sends them
    /// with 200 too when it dropped some items).
    fn record_limits(&self, out: &Outgoing, status: StatusCode, headers: &HeaderMap) {
        let values: Vec<&str> = headers
            .get_all("x-sentry-rate-limits")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if values.is_empty() {
            return;
        }
        let (project, key) = scoping(out);
        let scoping = Scoping {
            project: &project,
            key: key.as_deref(),
        };
        let mut limits = self.limits.lock().unwrap();
        for v in values {
            limits.record(v, &scoping, Instant::now());
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            profcol_model::info_limited!(receiver = %self.id, limits = ?headers.get("x-sentry-rate-limits"), "the upstream rate-limits forwarded items; queued items under the limit are discarded, as Relay does");
        }
    }

    /// Drops the items of a queued envelope that a rate limit in effect
    /// covers, as Relay does before sending; false when none is left.
    fn apply_limits(&self, out: &mut Outgoing) -> bool {
        let (project, key) = scoping(out);
        let scoping = Scoping {
            project: &project,
            key: key.as_deref(),
        };
        let now = Instant::now();
        let limited: Vec<bool> = {
            let limits = self.limits.lock().unwrap();
            out.items
                .iter()
                .map(|t| limits.is_limited(t, &scoping, now))
                .collect()
        };
        if !limited.contains(&true) {
            return true;
        }
        let dropped: Vec<String> = out
            .items
            .iter()
            .zip(&limited)
            .filter(|(_, &l)| l)
            .map(|(t, _)| t.clone())
            .collect();
        self.count(&dropped, "dropped", "rate_limited");
        profcol_model::info_limited!(receiver = %self.id, items = dropped.len(), "queued items discarded under the upstream's rate limit, as Relay does");
        if dropped.len() == out.items.len() {
            return false;
        }
        // Keep the other items, byte for byte, under the same header.
        let Ok(env) = profcol_sentry::parse_envelope(&out.body) else {
            return true;
        };
        let mut i = 0;
        let body = env.write_selected(env.raw_header, |_| {
            i += 1;
            !limited.get(i - 1).copied().unwrap_or(false)
        });
        out.items = out
            .items
            .iter()
            .zip(&limited)
            .filter(|(_, &l)| !l)
            .map(|(t, _)| t.clone())
            .collect();
        out.body = Bytes::from(body);
        true
    }

    /// Whether a consumer should back off before its next attempt.
    fn in_outage(&self) -> bool {
        self.outage.load(Ordering::Relaxed)
    }

    fn note(&self, answered: bool) {
        self.outage.store(!answered, Ordering::Relaxed);
        if answered {
            // Every consumer waiting out a backoff goes now.
            self.answered.notify_waiters();
        }
    }

    /// Waits `delay`, or less if an attempt is answered meanwhile.
    async fn pause(&self, delay: Duration) {
        let answered = self.answered.notified();
        if delay.is_zero() || !self.in_outage() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = answered => {}
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
        let size = queued_size(q.sizer, &out);
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
            let mut out = out;
            self.deliver(&mut out).await;
            self.release(id, &out).await;
        }
    }

    /// Retries `out` until it is answered, discarded under a rate limit or
    /// `max_elapsed_time` passes. Backoff is this envelope's own, and is
    /// waited only while the upstream is down (or throttles).
    async fn deliver(&self, out: &mut Outgoing) {
        let started = Instant::now();
        let mut backoff = Backoff::new(&self.settings.retry_on_failure);
        let max = self.settings.retry_on_failure.max_elapsed_time.get();
        let mut wait = if self.in_outage() {
            backoff.next_delay()
        } else {
            Duration::ZERO
        };
        let mut throttled = false;
        loop {
            if !max.is_zero() && started.elapsed() + wait > max {
                self.count(&out.items, "failed", "retries_exhausted");
                return;
            }
            if throttled {
                tokio::time::sleep(wait).await;
            } else {
                self.pause(wait).await;
            }
            if !self.apply_limits(out) {
                return;
            }
            match self.attempt(out).await {
                Attempt::Answered {
                    status, headers, ..
                } => {
                    self.note(true);
                    if status == StatusCode::TOO_MANY_REQUESTS
                        && !headers.contains_key("x-sentry-rate-limits")
                    {
                        // Throttled on the way, not discarded by Sentry.
                        throttled = true;
                        let next = backoff.next_delay();
                        wait = headers
                            .get("retry-after")
                            .and_then(|v| v.to_str().ok())
                            .and_then(retry_after_secs)
                            .unwrap_or(next);
                        profcol_model::info_limited!(receiver = %self.id, retry_after = ?wait, "the upstream throttles forwarding (429 without X-Sentry-Rate-Limits); holding the envelope");
                        continue;
                    }
                    self.record_limits(out, status, &headers);
                    if status == StatusCode::TOO_MANY_REQUESTS {
                        // Received and discarded under a limit (Relay's
                        // `rate_limited` outcome): the SDK was told 200.
                        self.count(&out.items, "dropped", "rate_limited");
                        return;
                    }
                    if status.is_success() && out.maybe_taken {
                        for ty in &out.items {
                            self.telemetry.receiver_forward_duplicate(&self.id, ty);
                        }
                    }
                    self.settle(&out.items, status);
                    return;
                }
                Attempt::Unreachable {
                    detail,
                    maybe_taken,
                    ..
                } => {
                    self.note(false);
                    throttled = false;
                    if maybe_taken {
                        out.maybe_taken = true;
                        out.timeout = self.longer(out.timeout);
                    }
                    wait = backoff.next_delay();
                    profcol_model::warn_limited!(receiver = %self.id, error = %detail, interval = ?wait, "forwarding failed, will retry");
                }
            }
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
        s.used -= queued_size(self.settings.sending_queue.sizer, out);
        drop(s);
        self.settled.notify_waiters();
    }

    /// Waits until the queue is empty and nothing is in flight.
    pub(super) async fn drain(&self) {
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
    pub(super) fn abandon(&self) {
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
            .timeout(if out.timeout.is_zero() {
                self.settings.timeout.get()
            } else {
                out.timeout
            });
        if out.gzip {
            req = req.header("content-encoding", "gzip");
        }
        let resp = match req.body(body).send().await {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Unreachable {
                    detail: error_chain(&e),
                    timeout: e.is_timeout(),
                    // Only a connection never made is surely not taken.
                    maybe_taken: !e.is_connect(),
                };
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
                    maybe_taken: true,
                }
            }
        };
        if matches!(status.as_u16(), 502..=504) {
            // A gateway that timed out may have passed the request on.
            let timeout = status == StatusCode::GATEWAY_TIMEOUT;
            return Attempt::Unreachable {
                detail: format!("HTTP {status}"),
                timeout,
                maybe_taken: timeout,
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

/// The project (from the path) and DSN key (from the auth header or the
/// query) an envelope goes to, for rate-limit scopes.
fn scoping(out: &Outgoing) -> (String, Option<String>) {
    let project = out
        .path
        .strip_prefix("/api/")
        .and_then(|p| p.split('/').next())
        .unwrap_or("")
        .to_owned();
    let from = |text: &str| {
        text.split([',', '&', ' '])
            .find_map(|kv| kv.trim().strip_prefix("sentry_key="))
            .map(str::to_owned)
    };
    let key = ["x-sentry-auth", "authorization"]
        .iter()
        .filter_map(|h| out.headers.get(*h)?.to_str().ok())
        .find_map(from)
        .or_else(|| from(out.path.split_once('?')?.1));
    (project, key)
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
pub(super) fn merge_rate_limits(
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

    /// A Sentry stand-in: answers each request after `delay` with the
    /// next scripted reply, or 503 while `down`, else 200; counts what it
    /// answered 200.
    /// A scripted answer: status and headers.
    type Scripted = (u16, Vec<(&'static str, &'static str)>);

    #[derive(Clone, Default)]
    struct Mock {
        down: Arc<std::sync::atomic::AtomicBool>,
        delay: Arc<Mutex<Duration>>,
        script: Arc<Mutex<VecDeque<Scripted>>>,
        received: Arc<AtomicU64>,
        delivered: Arc<AtomicU64>,
    }

    async fn mock() -> (Mock, String) {
        let m = Mock::default();
        let state = m.clone();
        let app = axum::Router::new().fallback(move || {
            let m = state.clone();
            async move {
                m.received.fetch_add(1, Ordering::SeqCst);
                let delay = *m.delay.lock().unwrap();
                tokio::time::sleep(delay).await;
                let (status, headers) = if m.down.load(Ordering::SeqCst) {
                    (503, vec![])
                } else {
                    m.script
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or((200, vec![]))
                };
                if status == 200 {
                    m.delivered.fetch_add(1, Ordering::SeqCst);
                }
                let mut r = axum::response::Response::builder().status(status);
                for (k, v) in headers {
                    r = r.header(k, v);
                }
                r.body(axum::body::Body::empty()).unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (m, format!("http://{addr}"))
    }

    const EVENT: &[u8] = b"{}\n{\"type\":\"event\"}\n{\"message\":\"boom\"}\n";

    fn event_out(f: &Forwarder, envelope: &'static [u8]) -> Outgoing {
        let e = parse_envelope(envelope).unwrap();
        f.outgoing(
            &e,
            &Bytes::from_static(envelope),
            |_| true,
            "42",
            Some("sentry_key=abc"),
            &HeaderMap::new(),
            None,
        )
        .unwrap()
        .unwrap()
    }

    async fn until(what: impl Fn() -> bool, limit: Duration) -> Duration {
        let start = Instant::now();
        while !what() && start.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        start.elapsed()
    }

    fn metric(t: &Telemetry, prefix: &str) -> Vec<String> {
        t.encode_text()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    /// What queued during an outage goes as soon as the upstream answers
    /// again, not one envelope per consumer per backoff interval: with a
    /// backoff of a minute, only the first answer's wake-up can drain the
    /// queue within the wait.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_queue_drains_at_the_upstreams_pace_after_an_outage() {
        let (m, url) = mock().await;
        let f = forwarder(&format!(
            "{{forward_to: '{url}', forwarding: {{retry_on_failure: {{initial_interval: 1m, max_interval: 1m}}}}}}"
        ));
        f.start();
        m.down.store(true, Ordering::SeqCst);
        for _ in 0..60 {
            assert!(matches!(
                f.forward(event_out(&f, EVENT)).await,
                Answer::Queued
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        m.down.store(false, Ordering::SeqCst);
        // The SDKs' traffic gets through: the queue follows at once.
        assert!(matches!(
            f.forward(event_out(&f, EVENT)).await,
            Answer::Upstream { status, .. } if status == StatusCode::OK
        ));
        let took = until(
            || m.delivered.load(Ordering::SeqCst) == 61,
            Duration::from_secs(20),
        )
        .await;
        assert_eq!(m.delivered.load(Ordering::SeqCst), 61, "after {took:?}");
        f.drain().await;
    }

    /// An upstream slower than `forwarding.timeout`: the retry of the POST
    /// that timed out waits twice as long instead of sending it again and
    /// again, and the copy the upstream may hold twice is counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_timed_out_post_is_retried_with_more_time_and_counted() {
        let (m, url) = mock().await;
        *m.delay.lock().unwrap() = Duration::from_millis(1500);
        let f = forwarder(&format!(
            "{{forward_to: '{url}', forwarding: {{timeout: 1s, retry_on_failure: {{initial_interval: 50ms, max_interval: 100ms}}}}}}"
        ));
        f.start();
        assert!(matches!(
            f.forward(event_out(&f, EVENT)).await,
            Answer::Queued
        ));
        until(
            || m.delivered.load(Ordering::SeqCst) >= 2,
            Duration::from_secs(5),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The first POST was taken late, the retry in time: two copies,
        // not one per second until the backoff ran out.
        assert_eq!(m.received.load(Ordering::SeqCst), 2);
        assert_eq!(
            metric(&f.telemetry, "profcol_receiver_forwarded_possible_duplicates_total"),
            ["profcol_receiver_forwarded_possible_duplicates_total{receiver=\"sentry\",type=\"event\"} 1"]
        );
        // A connection never made is not a possible duplicate.
        assert!(!f.longer(Duration::from_secs(1)).is_zero());
    }

    /// A 429 without `X-Sentry-Rate-Limits` (a proxy throttling) holds the
    /// queued envelope until `Retry-After`; one with them is Sentry
    /// discarding it: counted as dropped under the limit, and later queued
    /// envelopes under it are not sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_envelopes_are_held_when_throttled_and_discarded_when_limited() {
        let (m, url) = mock().await;
        let f = forwarder(&format!(
            "{{forward_to: '{url}', forwarding: {{retry_on_failure: {{initial_interval: 50ms, max_interval: 100ms}}}}}}"
        ));
        f.start();
        m.down.store(true, Ordering::SeqCst);
        assert!(matches!(
            f.forward(event_out(&f, EVENT)).await,
            Answer::Queued
        ));
        m.script
            .lock()
            .unwrap()
            .push_back((429, vec![("retry-after", "1")]));
        m.down.store(false, Ordering::SeqCst);
        let took = until(
            || m.delivered.load(Ordering::SeqCst) == 1,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(m.delivered.load(Ordering::SeqCst), 1, "held and retried");
        assert!(
            took >= Duration::from_millis(900),
            "after Retry-After: {took:?}"
        );

        // Now Sentry's own limit on errors.
        m.down.store(true, Ordering::SeqCst);
        assert!(matches!(
            f.forward(event_out(&f, EVENT)).await,
            Answer::Queued
        ));
        m.script.lock().unwrap().push_back((
            429,
            vec![("x-sentry-rate-limits", "60:error:project:org_quota")],
        ));
        m.down.store(false, Ordering::SeqCst);
        until(
            || m.received.load(Ordering::SeqCst) >= 4,
            Duration::from_secs(5),
        )
        .await;
        f.drain().await;
        let received = m.received.load(Ordering::SeqCst);
        // A queued envelope under the limit: its event is discarded
        // unsent, its attachment goes alone.
        const MIXED: &[u8] =
            b"{}\n{\"type\":\"event\"}\n{}\n{\"type\":\"attachment\",\"length\":1}\nx\n";
        let mut out = event_out(&f, MIXED);
        assert!(f.apply_limits(&mut out));
        assert_eq!(out.items, ["attachment"]);
        assert_eq!(
            &out.body[..],
            b"{}\n{\"type\":\"attachment\",\"length\":1}\nx\n"
        );
        let mut out = event_out(&f, EVENT);
        assert!(!f.apply_limits(&mut out));
        assert_eq!(m.received.load(Ordering::SeqCst), received);
        let counted = metric(&f.telemetry, "profcol_receiver_forwarded_items_total");
        assert!(
            counted.contains(
                &"profcol_receiver_forwarded_items_total{receiver=\"sentry\",type=\"event\",outcome=\"dropped\",reason=\"rate_limited\"} 3".to_owned()
            ),
            "{counted:?}"
        );
    }
}
