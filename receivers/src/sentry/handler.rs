//! One envelope request: size limits, auth, framing, conversion, hand-off,
//! and the answers Sentry SDKs understand.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde_json::json;

use profcol_model::dictionary::merge_all;
use profcol_model::memory::{Held, Reservation};
use profcol_model::Origin;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ConsumeError, Output};
use profcol_pipeline::telemetry::Telemetry;
use profcol_sentry::{self as sentry, Converted, Dsn, Envelope, ReceiveOptions};

use super::auth;
use super::config::SentryReceiverConfig;
use super::forward::{self, Answer, Forwarder, Outgoing};
use crate::body::{BodyError, BodyReader};

/// Categories a backed-up pipeline asks SDKs to pause.
const LIMITED_CATEGORIES: &str = "profile_chunk;profile_chunk_ui;profile";

pub(super) struct Handler {
    cfg: SentryReceiverConfig,
    id: String,
    output: Output,
    telemetry: Arc<Telemetry>,
    allowed_projects: Vec<String>,
    recorder: Option<crate::record::Recorder>,
    auth: Option<Arc<dyn profcol_pipeline::component::Authenticator>>,
    forwarder: Option<Arc<Forwarder>>,
    /// Item types already logged as dropped for want of `forward_to`.
    unforwarded: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

/// Item types logged as dropped without `forward_to`, at most: a client
/// may name any type, and the log must stay bounded.
const UNFORWARDED_LOGGED: usize = 32;

/// An HTTP answer in Relay's shapes, with what a refusal's log line says.
pub(super) struct Reply(Box<Response>, Option<String>);

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        *self.0
    }
}

fn error(status: StatusCode, detail: impl Into<String>, causes: Vec<String>) -> Reply {
    let detail = detail.into();
    let logged = if causes.is_empty() {
        detail.clone()
    } else {
        format!("{detail}: {}", causes.join("; "))
    };
    let body = if causes.is_empty() {
        json!({ "detail": detail })
    } else {
        json!({ "detail": detail, "causes": causes })
    };
    Reply(Box::new((status, Json(body)).into_response()), Some(logged))
}

impl Handler {
    pub(super) fn new(
        cfg: SentryReceiverConfig,
        id: String,
        output: Output,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        let allowed_projects = cfg.project_ids.iter().map(|p| p.as_string()).collect();
        Self {
            cfg,
            id,
            output,
            telemetry,
            allowed_projects,
            recorder: None,
            auth: None,
            forwarder: None,
            unforwarded: Default::default(),
        }
    }

    /// Says once per item type that SDK data is answered 200 and dropped
    /// because no `forward_to` is set: without it a user of the shipped
    /// config loses their events without a word.
    fn log_unforwarded(&self, ty: &str) {
        let mut seen = self.unforwarded.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= UNFORWARDED_LOGGED || !seen.insert(ty.to_owned()) {
            return;
        }
        tracing::warn!(
            receiver = %self.id,
            item_type = ty,
            "{ty} items are answered 200 and dropped: set forward_to to send them to Sentry \
             (counted in profcol_receiver_items_total{{outcome=\"ignored\"}}; logged once per type)"
        );
    }

    /// Forwards what the pipeline does not consume (`forward_to`).
    pub(super) fn with_forwarder(mut self, forwarder: Option<Arc<Forwarder>>) -> Self {
        self.forwarder = forwarder;
        self
    }

    /// Whether an item of type `ty` goes upstream.
    fn forwards(&self, ty: &str) -> bool {
        self.forwarder.is_some() && (self.cfg.forward_profiles || !consumed(ty))
    }

    /// Requires the credentials `auth` checks (`auth: { authenticator }`),
    /// before `keys` and before any of the body is read.
    pub(super) fn with_auth(
        mut self,
        auth: Option<Arc<dyn profcol_pipeline::component::Authenticator>>,
    ) -> Self {
        self.auth = auth;
        self
    }

    /// Records every accepted envelope (`record_to`).
    pub(super) fn with_recorder(mut self, recorder: Option<crate::record::Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    fn record(
        &self,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
        body: Bytes,
    ) {
        if let Some(r) = &self.recorder {
            r.record(crate::record::Recording {
                method: "POST",
                path: format!("/api/{project_id}/envelope/"),
                query: crate::record::query(query),
                http_version: format!("{version:?}"),
                headers: crate::record::headers(headers),
                transport: "http",
                // No copy; the writer redacts a `dsn` in the header line.
                body,
                ext: "envelope",
            });
        }
    }

    fn refuse(&self, outcome: &str, reply: Reply) -> Reply {
        self.telemetry.receiver_item(&self.id, "envelope", outcome);
        reply
    }

    /// One envelope request, in stages: authenticate, read, parse and
    /// convert (on the blocking pool), hand off, reply. A refusal is logged
    /// (rate-limited) with its reason and the client's address.
    pub(super) async fn handle(
        self: &Arc<Self>,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
        body: axum::body::Body,
        peer: Option<std::net::SocketAddr>,
    ) -> Reply {
        let reply = self
            .stages(project_id, query, headers, version, body, peer)
            .await;
        if !reply.0.status().is_success() {
            let status = reply.0.status().as_u16();
            let peer = peer.map(|p| p.to_string()).unwrap_or_default();
            let detail = reply.1.as_deref().unwrap_or("");
            profcol_model::info_limited!(receiver = %self.id, status, peer = %peer, detail, "envelope refused");
        }
        reply
    }

    async fn stages(
        self: &Arc<Self>,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
        body: axum::body::Body,
        peer: Option<std::net::SocketAddr>,
    ) -> Reply {
        if let Some(a) = &self.auth {
            if let Err(why) = a.authenticate(headers) {
                return self.refuse("unauthorized", error(StatusCode::UNAUTHORIZED, why, vec![]));
            }
        }
        if let Err(reply) = self.check_project(project_id) {
            return reply;
        }
        let request_key = auth::key_from_headers(headers).or_else(|| auth::key_from_query(query));
        // Refuse a wrong key before reading a possibly large body.
        if let Some(reply) = request_key.as_deref().and_then(|k| self.check_key(k)) {
            return reply;
        }
        let (bytes, memory) = match self.read(headers, body, request_key.is_none()).await {
            Ok(b) => b,
            Err(reply) => return reply,
        };
        let (handler, pid) = (self.clone(), project_id.to_owned());
        let request = Forwarding {
            query: query.map(str::to_owned),
            headers: headers.clone(),
            peer,
        };
        let parsed = profcol_model::cpu::run(move || {
            handler.parse(bytes, memory, &pid, request_key, &request)
        })
        .await;
        match parsed {
            Ok(p) => self.hand_off(p, project_id, query, headers, version).await,
            Err(reply) => reply,
        }
    }

    /// 400 for a project id that is not a number, 403 for one not allowed.
    fn check_project(&self, project_id: &str) -> Result<(), Reply> {
        if project_id.is_empty() || !project_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.refuse(
                "invalid_project",
                error(
                    StatusCode::BAD_REQUEST,
                    format!("invalid project id {project_id:?}"),
                    vec![],
                ),
            ));
        }
        if !self.allowed_projects.is_empty()
            && !self.allowed_projects.iter().any(|p| p == project_id)
        {
            return Err(self.refuse(
                "project_not_allowed",
                error(
                    StatusCode::FORBIDDEN,
                    format!("project {project_id} is not accepted here"),
                    vec![],
                ),
            ));
        }
        Ok(())
    }

    /// Reads the body under the size limit and the memory budget. With keys
    /// required and none in the request (`keyless`), the envelope header's
    /// `dsn` is the only credential: it is checked on the first line,
    /// before the rest of the body is read (or decompressed).
    async fn read(
        &self,
        headers: &HeaderMap,
        body: axum::body::Body,
        keyless: bool,
    ) -> Result<(Vec<u8>, Reservation), Reply> {
        let encoding = headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok());
        let budget = self.output.budget();
        let mut reader = BodyReader::new(
            body,
            encoding,
            self.cfg.server.max_request_body_size,
            budget,
        )
        .map_err(|e| self.body_error(e))?;
        if keyless && !self.cfg.keys.is_empty() {
            let line = reader
                .first_line(MAX_HEADER_LINE)
                .await
                .map_err(|e| self.body_error(e))?;
            let dsn_key = serde_json::from_slice::<serde_json::Value>(line)
                .ok()
                .and_then(|h| h.get("dsn")?.as_str().map(Dsn::parse))
                .and_then(Result::ok)
                .map(|d| d.public_key().to_owned());
            match dsn_key {
                Some(k) => {
                    if let Some(reply) = self.check_key(&k) {
                        return Err(reply);
                    }
                }
                None => return Err(self.refuse("unauthorized", missing_key())),
            }
        }
        reader.finish().await.map_err(|e| self.body_error(e))
    }

    /// Frames the envelope, checks its `dsn` against the request, and
    /// converts its profile items into one batch. CPU-bound: runs on the
    /// blocking pool.
    fn parse(
        &self,
        bytes: Vec<u8>,
        mut memory: Reservation,
        project_id: &str,
        request_key: Option<String>,
        request: &Forwarding,
    ) -> Result<Parsed, Reply> {
        let bytes = Bytes::from(bytes);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(self.refuse(
                "malformed",
                error(StatusCode::BAD_REQUEST, "empty envelope", vec![]),
            ));
        }
        let envelope = sentry::parse_envelope(&bytes).map_err(|e| {
            self.refuse(
                "malformed",
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid envelope",
                    vec![e.to_string()],
                ),
            )
        })?;
        self.check_dsn(&envelope, project_id, request_key)?;
        // The payloads parsed into Sentry's shapes and the OTLP made of
        // them: a few times the JSON at most, reserved before it is taken.
        memory
            .try_grow_to(bytes.len().saturating_mul(3))
            .map_err(|_| self.memory_full())?;
        let has_profile = envelope.items.iter().any(|i| i.item_type() == "profile");
        let converted = self.convert(&envelope, has_profile, project_id);
        // The transactions a v1 profile came with: `used` with an accepted
        // profile, else `ignored`.
        let paired = if has_profile {
            envelope
                .items
                .iter()
                .filter(|i| i.item_type() == "transaction")
                .count()
        } else {
            0
        };
        let event_id = envelope
            .header
            .get("event_id")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let items: Vec<String> = converted.iter().map(|(ty, _)| ty.to_string()).collect();
        let forward = self.forwarder.as_ref().and_then(|f| {
            f.outgoing(
                &envelope,
                &bytes,
                |ty| self.forwards(ty),
                project_id,
                request.query.as_deref(),
                &request.headers,
                request.peer,
            )
            .transpose()
            .map(|out| (f.clone(), out))
        });
        let batch = (!converted.is_empty()).then(|| {
            let data = merge_all(converted.into_iter().map(|(_, c)| c.data));
            let mut batch = ProfileBatch::new(data);
            batch.meta.transport = "http";
            batch.meta.origin = Origin::Sentry {
                project_id: project_id.to_owned(),
                envelope_header: envelope.header.clone(),
            };
            memory.set(batch.held_bytes());
            batch.meta.memory = Some(Held::new(memory));
            batch
        });
        Ok(Parsed {
            event_id,
            paired,
            items,
            batch,
            bytes,
            forward,
        })
    }

    /// The envelope header may carry the DSN instead of (or besides) the
    /// request's auth: it must name the URL's project and the same key.
    fn check_dsn(
        &self,
        envelope: &Envelope<'_>,
        project_id: &str,
        request_key: Option<String>,
    ) -> Result<(), Reply> {
        let mut key = request_key;
        if let Some(dsn) = envelope.header.get("dsn").and_then(|d| d.as_str()) {
            match Dsn::parse(dsn) {
                Ok(d) if d.project_id() != project_id => {
                    return Err(self.refuse(
                        "dsn_mismatch",
                        error(
                            StatusCode::BAD_REQUEST,
                            format!(
                                "the envelope's dsn names project {}, the URL project {project_id}",
                                d.project_id()
                            ),
                            vec![],
                        ),
                    ))
                }
                Ok(d) => {
                    if key.is_none() {
                        key = Some(d.public_key().to_owned());
                    } else if key.as_deref() != Some(d.public_key()) {
                        return Err(self.refuse(
                            "dsn_mismatch",
                            error(
                                StatusCode::BAD_REQUEST,
                                "the envelope's dsn names another public key than the request",
                                vec![],
                            ),
                        ));
                    }
                }
                Err(e) => {
                    return Err(self.refuse(
                        "malformed",
                        error(StatusCode::BAD_REQUEST, "invalid envelope", vec![e]),
                    ))
                }
            }
        }
        match &key {
            Some(k) => self.check_key(k).map_or(Ok(()), Err),
            None if !self.cfg.keys.is_empty() => Err(self.refuse("unauthorized", missing_key())),
            None => Ok(()),
        }
    }

    /// Hands the batch to the pipelines; answers once they took it or not,
    /// counting every item with its outcome.
    async fn hand_off(
        &self,
        p: Parsed,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
    ) -> Reply {
        let count_transactions = |outcome: &str| {
            for _ in 0..p.paired {
                self.telemetry
                    .receiver_item(&self.id, "transaction", outcome);
            }
        };
        let forwarded = match p.forward {
            None => None,
            Some((_, Err(detail))) => Some(Answer::Refused {
                status: StatusCode::SERVICE_UNAVAILABLE,
                detail,
            }),
            Some((f, Ok(out))) => Some(f.forward(out).await),
        };
        let Some(batch) = p.batch else {
            count_transactions(if self.forwarder.is_some() {
                "forwarded"
            } else {
                "ignored"
            });
            let reply = match forwarded {
                Some(answer) => upstream_reply(answer, &p.event_id),
                None => ok(&p.event_id),
            };
            if reply.0.status().is_success() {
                self.record(project_id, query, headers, version, p.bytes);
            }
            return reply;
        };
        let reply = self
            .consume(batch, &p.items, &p.event_id, &count_transactions)
            .await;
        let reply = match forwarded {
            Some(answer) => with_upstream(reply, answer),
            None => reply,
        };
        if reply.0.status().is_success() {
            self.record(project_id, query, headers, version, p.bytes);
        }
        reply
    }

    /// Hands the batch to the pipelines and answers for it.
    async fn consume(
        &self,
        batch: ProfileBatch,
        items: &[String],
        event_id: &str,
        count_transactions: &(dyn Fn(&str) + Sync),
    ) -> Reply {
        let consumed = self.output.consume(batch).await;
        // Items count as accepted only once the pipelines took them; a
        // refused envelope's items take its reason (their samples were
        // counted as refused by `consume`).
        let outcome = consumed
            .as_ref()
            .map_or_else(|e| e.reason(), |()| "accepted");
        for ty in items {
            self.telemetry.receiver_item(&self.id, ty, outcome);
        }
        let with_profile = items.iter().any(|ty| ty == "profile");
        count_transactions(match outcome {
            "accepted" if with_profile => "used",
            "accepted" => "ignored",
            refused => refused,
        });
        let e = match consumed {
            Ok(()) => return ok(event_id),
            Err(e) => e,
        };
        self.refuse(e.reason(), refusal_reply(&e))
    }

    /// 429 for a full memory budget.
    fn memory_full(&self) -> Reply {
        self.refuse(
            "memory_limit",
            rate_limited(
                "the memory limit is reached, retry later",
                std::time::Duration::from_secs(1),
            ),
        )
    }

    /// The answer to a body that could not be read.
    fn body_error(&self, e: BodyError) -> Reply {
        match e {
            BodyError::TooLarge { limit } => self.refuse(
                "too_large",
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("envelope exceeds the size limit of {limit} bytes"),
                    vec![],
                ),
            ),
            BodyError::UnsupportedEncoding(e) => self.refuse(
                "unsupported_encoding",
                error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    format!("unsupported content encoding {e:?}"),
                    vec![],
                ),
            ),
            BodyError::Corrupt(msg) => self.refuse(
                "malformed",
                error(StatusCode::BAD_REQUEST, "invalid body", vec![msg]),
            ),
            BodyError::TimedOut(msg) => self.refuse(
                "timeout",
                error(
                    StatusCode::REQUEST_TIMEOUT,
                    "the body did not arrive in time",
                    vec![msg],
                ),
            ),
            BodyError::MemoryLimit => self.memory_full(),
            BodyError::OverBudget { wanted, limit } => self.refuse(
                "too_large",
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the envelope ({wanted} bytes so far) exceeds the memory budget of {limit} bytes"),
                    vec![],
                ),
            ),
        }
    }

    /// 401 for a key not in `keys`.
    fn check_key(&self, key: &str) -> Option<Reply> {
        if self.cfg.keys.is_empty() || self.cfg.keys.iter().any(|k| k == key) {
            return None;
        }
        Some(self.refuse(
            "unauthorized",
            error(
                StatusCode::UNAUTHORIZED,
                format!("invalid public key {key:?}"),
                vec![],
            ),
        ))
    }

    /// Converts every profile item; a refused item is counted with its
    /// Relay-style reason and the rest of the envelope goes on, as in Relay.
    /// Returns each converted item with its type, to be counted once the
    /// pipelines took them or not.
    fn convert<'e>(
        &self,
        envelope: &'e Envelope<'_>,
        has_profile: bool,
        project_id: &str,
    ) -> Vec<(&'e str, Converted)> {
        let opts = ReceiveOptions {
            service_name: self.cfg.service_name.clone(),
            include_original_payload: self.cfg.include_original_payload,
            max_item_size: usize::try_from(self.cfg.max_item_size).unwrap_or(usize::MAX),
            project_id: Some(project_id.to_owned()),
        };
        let transaction = envelope
            .items
            .iter()
            .find(|i| i.item_type() == "transaction")
            .map(|i| i.payload);
        let mut out = Vec::new();
        for item in &envelope.items {
            let ty = item.item_type();
            let result = match ty {
                "profile_chunk" => sentry::chunk_item_to_otlp(item, &envelope.header, &opts),
                "profile" => sentry::profile_v1_to_otlp(
                    item.payload,
                    item.platform(),
                    transaction,
                    &envelope.header,
                    &opts,
                ),
                // Counted by `handle`, once its profile's fate is known.
                "transaction" if has_profile => continue,
                _ if self.forwarder.is_some() => {
                    self.telemetry.receiver_item(&self.id, ty, "forwarded");
                    continue;
                }
                _ => {
                    self.telemetry.receiver_item(&self.id, ty, "ignored");
                    self.log_unforwarded(ty);
                    continue;
                }
            };
            match result {
                Ok(c) => {
                    for (reason, n) in &c.dropped {
                        self.telemetry
                            .receiver_refused(&self.id, "http", *n, reason.as_str());
                    }
                    out.push((ty, c));
                }
                Err(e) => {
                    profcol_model::warn_limited!(receiver = %self.id, item = ty, reason = e.reason.as_str(), error = %e.message, "item refused");
                    self.telemetry
                        .receiver_item(&self.id, ty, e.reason.as_str());
                }
            }
        }
        out
    }
}

/// 401 when `keys` is set and the request names no key anywhere.
fn missing_key() -> Reply {
    error(
        StatusCode::UNAUTHORIZED,
        "missing authorization: no sentry_key in X-Sentry-Auth, Authorization, the query or the dsn",
        vec![],
    )
}

/// The longest envelope header line read to find a `dsn` before the rest
/// of the body (real headers are a few hundred bytes).
const MAX_HEADER_LINE: usize = 64 << 10;

/// An envelope read and converted, waiting to be handed off.
struct Parsed {
    event_id: String,
    /// `transaction` items that came with a v1 profile.
    paired: usize,
    /// Types of the items converted.
    items: Vec<String>,
    batch: Option<ProfileBatch>,
    /// The envelope as received, for `record_to`.
    bytes: Bytes,
    /// What goes upstream and through which forwarder, or why it cannot.
    forward: Option<(Arc<Forwarder>, Result<Outgoing, String>)>,
}

/// What forwarding needs of the request.
struct Forwarding {
    query: Option<String>,
    headers: HeaderMap,
    peer: Option<std::net::SocketAddr>,
}

/// Items the pipeline takes; the rest is forwarded.
fn consumed(ty: &str) -> bool {
    matches!(ty, "profile" | "profile_chunk")
}

/// The SDK's answer for an envelope that was forwarded only.
fn upstream_reply(answer: Answer, event_id: &str) -> Reply {
    match answer {
        Answer::Upstream {
            status,
            headers,
            body,
        } => {
            let mut r = (status, body).into_response();
            r.headers_mut().extend(headers);
            let detail = (!status.is_success()).then(|| format!("the upstream answered {status}"));
            Reply(Box::new(r), detail)
        }
        Answer::Queued => ok(event_id),
        Answer::Refused { status, detail } => error(status, detail, vec![]),
    }
}

/// `reply` (the pipeline's answer for the profiles) with what the
/// upstream said about the rest: its rate limits merged in, and a refusal
/// to forward taking precedence (the SDK must not think its events went).
fn with_upstream(reply: Reply, answer: Answer) -> Reply {
    let ours = reply.0.headers().get("x-sentry-rate-limits").cloned();
    match answer {
        Answer::Upstream { headers, .. } => {
            let mut reply = reply;
            let merged =
                forward::merge_rate_limits(ours.as_ref(), headers.get("x-sentry-rate-limits"));
            let h = reply.0.headers_mut();
            if let Some(v) = merged {
                h.insert("x-sentry-rate-limits", v);
            }
            for name in ["retry-after", "x-sentry-error"] {
                if let (false, Some(v)) = (h.contains_key(name), headers.get(name)) {
                    h.insert(name, v.clone());
                }
            }
            reply
        }
        Answer::Queued => reply,
        Answer::Refused { status, detail } => {
            let mut r = error(status, detail, vec![]);
            if let Some(v) = ours {
                r.0.headers_mut().insert("x-sentry-rate-limits", v);
            }
            r
        }
    }
}

/// 429 with `Retry-After` and `X-Sentry-Rate-Limits` for the profile
/// categories, so that SDKs pause.
/// What an SDK is told when the pipeline refuses an envelope. Full memory,
/// pipelines or queues are load: 429 with `Retry-After` and
/// `X-Sentry-Rate-Limits`, which make an SDK hold off. A persistent queue
/// that cannot write is a fault, not load: 503, as the OTLP receivers
/// answer it, so SDKs do not take it for a rate limit.
fn refusal_reply(e: &ConsumeError) -> Reply {
    match e {
        ConsumeError::Full {
            reason: "queue_storage",
            retry_after,
            ..
        } => {
            let mut r = error(StatusCode::SERVICE_UNAVAILABLE, e.to_string(), vec![]);
            r.0.headers_mut().insert(
                "retry-after",
                HeaderValue::from(retry_after.as_secs().max(1)),
            );
            r
        }
        ConsumeError::Full { retry_after, .. } => rate_limited(&e.to_string(), *retry_after),
        ConsumeError::TooLarge { .. } => {
            error(StatusCode::PAYLOAD_TOO_LARGE, e.to_string(), vec![])
        }
        ConsumeError::ShuttingDown => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string(), vec![]),
    }
}

fn rate_limited(detail: &str, retry_after: std::time::Duration) -> Reply {
    let secs = retry_after.as_secs().max(1);
    let mut r = error(StatusCode::TOO_MANY_REQUESTS, detail, vec![]);
    let h = r.0.headers_mut();
    h.insert("retry-after", HeaderValue::from(secs));
    if let Ok(v) = HeaderValue::from_str(&format!("{secs}:{LIMITED_CATEGORIES}:organization")) {
        h.insert("x-sentry-rate-limits", v);
    }
    r
}

fn ok(event_id: &str) -> Reply {
    Reply(
        Box::new((StatusCode::OK, Json(json!({ "id": event_id }))).into_response()),
        None,
    )
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn load_is_a_rate_limit_and_a_broken_queue_is_not() {
        let full = refusal_reply(&ConsumeError::queue_full("otlp"));
        assert_eq!(full.0.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(full.0.headers().contains_key("x-sentry-rate-limits"));

        let disk = refusal_reply(&ConsumeError::queue_storage("otlp", "disk full"));
        assert_eq!(disk.0.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(disk.0.headers()["retry-after"], "1");
        assert!(!disk.0.headers().contains_key("x-sentry-rate-limits"));

        let big = refusal_reply(&ConsumeError::TooLarge { size: 2, budget: 1 });
        assert_eq!(big.0.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
