//! One envelope request: size limits, auth, framing, conversion, hand-off,
//! and the answers Sentry SDKs understand.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use profcol_pipeline::component::{ConsumeError, Output};
use profcol_pipeline::formats::sentry::{self, Converted, Envelope, ReceiveOptions};
use profcol_pipeline::model::dictionary::merge_all;
use profcol_pipeline::model::Origin;
use profcol_pipeline::telemetry::Telemetry;
use profcol_pipeline::ProfileBatch;

use super::auth;
use super::config::SentryReceiverConfig;
use crate::body::{BodyError, BodyReader};

/// Categories a backed-up pipeline asks SDKs to pause.
const LIMITED_CATEGORIES: &str = "profile_chunk;profile_chunk_ui;profile";

pub struct Handler {
    cfg: SentryReceiverConfig,
    id: String,
    output: Output,
    telemetry: Arc<Telemetry>,
    allowed_projects: Vec<String>,
    recorder: Option<crate::record::Recorder>,
}

/// An HTTP answer in Relay's shapes.
pub struct Reply(Response);

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        self.0
    }
}

fn error(status: StatusCode, detail: impl Into<String>, causes: Vec<String>) -> Reply {
    let detail = detail.into();
    let body = if causes.is_empty() {
        json!({ "detail": detail })
    } else {
        json!({ "detail": detail, "causes": causes })
    };
    Reply((status, Json(body)).into_response())
}

impl Handler {
    pub fn new(
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
        }
    }

    /// Records every accepted envelope (`record_to`).
    pub fn with_recorder(mut self, recorder: Option<crate::record::Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    fn record(
        &self,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
        body: Vec<u8>,
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
                body: body.into(),
                ext: "envelope",
            });
        }
    }

    fn refuse(&self, outcome: &str, reply: Reply) -> Reply {
        self.telemetry.receiver_item(&self.id, "envelope", outcome);
        reply
    }

    pub async fn handle(
        &self,
        project_id: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
        body: axum::body::Body,
    ) -> Reply {
        if project_id.is_empty() || !project_id.bytes().all(|b| b.is_ascii_digit()) {
            return self.refuse(
                "invalid_project",
                error(
                    StatusCode::BAD_REQUEST,
                    format!("invalid project id {project_id:?}"),
                    vec![],
                ),
            );
        }
        if !self.allowed_projects.is_empty()
            && !self.allowed_projects.iter().any(|p| p == project_id)
        {
            return self.refuse(
                "project_not_allowed",
                error(
                    StatusCode::FORBIDDEN,
                    format!("project {project_id} is not accepted here"),
                    vec![],
                ),
            );
        }
        let header_key = auth::key_from_headers(headers).or_else(|| auth::key_from_query(query));
        // Refuse a wrong key before reading a possibly large body.
        if let Some(k) = &header_key {
            if let Some(reply) = self.check_key(k) {
                return reply;
            }
        }

        let encoding = headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok());
        let mut reader = match BodyReader::new(body, encoding, self.cfg.max_request_body_size) {
            Ok(r) => r,
            Err(e) => return self.body_error(e),
        };
        // With keys required and none in the request, the envelope header's
        // `dsn` is the only credential: it is checked on the first line,
        // before the rest of the body is read (or decompressed).
        if header_key.is_none() && !self.cfg.keys.is_empty() {
            let line = match reader.first_line(MAX_HEADER_LINE).await {
                Ok(l) => l,
                Err(e) => return self.body_error(e),
            };
            let dsn_key = serde_json::from_slice::<serde_json::Value>(line)
                .ok()
                .and_then(|h| h.get("dsn")?.as_str().map(auth::parse_dsn))
                .and_then(Result::ok)
                .map(|d| d.public_key);
            match dsn_key {
                Some(k) => {
                    if let Some(reply) = self.check_key(&k) {
                        return reply;
                    }
                }
                None => return self.refuse("unauthorized", missing_key()),
            }
        }
        let bytes = match reader.finish().await {
            Ok(b) => b,
            Err(e) => return self.body_error(e),
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return self.refuse(
                "malformed",
                error(StatusCode::BAD_REQUEST, "empty envelope", vec![]),
            );
        }
        let envelope = match sentry::parse_envelope(&bytes) {
            Ok(e) => e,
            Err(e) => {
                return self.refuse(
                    "malformed",
                    error(
                        StatusCode::BAD_REQUEST,
                        "invalid envelope",
                        vec![e.to_string()],
                    ),
                )
            }
        };

        // The envelope header may carry the DSN instead of (or besides) auth.
        let mut key = header_key;
        if let Some(dsn) = envelope.header.get("dsn").and_then(|d| d.as_str()) {
            match auth::parse_dsn(dsn) {
                Ok(d) if d.project_id != project_id => {
                    return self.refuse(
                        "dsn_mismatch",
                        error(
                            StatusCode::BAD_REQUEST,
                            format!(
                                "the envelope's dsn names project {}, the URL project {project_id}",
                                d.project_id
                            ),
                            vec![],
                        ),
                    )
                }
                Ok(d) => {
                    if key.is_none() {
                        key = Some(d.public_key);
                    } else if key.as_deref() != Some(d.public_key.as_str()) {
                        return self.refuse(
                            "dsn_mismatch",
                            error(
                                StatusCode::BAD_REQUEST,
                                "the envelope's dsn names another public key than the request",
                                vec![],
                            ),
                        );
                    }
                }
                Err(e) => {
                    return self.refuse(
                        "malformed",
                        error(StatusCode::BAD_REQUEST, "invalid envelope", vec![e]),
                    )
                }
            }
        }
        match &key {
            Some(k) => {
                if let Some(reply) = self.check_key(k) {
                    return reply;
                }
            }
            None if !self.cfg.keys.is_empty() => return self.refuse("unauthorized", missing_key()),
            None => {}
        }

        let has_profile = envelope.items.iter().any(|i| i.item_type() == "profile");
        let converted = self.convert(&envelope, has_profile, project_id, &bytes);
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
        let with_profile = converted.iter().any(|(ty, _)| *ty == "profile");
        let count_transactions = |outcome: &str| {
            for _ in 0..paired {
                self.telemetry
                    .receiver_item(&self.id, "transaction", outcome);
            }
        };
        let event_id = envelope
            .header
            .get("event_id")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        if converted.is_empty() {
            count_transactions("ignored");
            self.record(project_id, query, headers, version, bytes);
            return ok(&event_id);
        }
        let items: Vec<&str> = converted.iter().map(|(ty, _)| *ty).collect();
        let data = merge_all(converted.into_iter().map(|(_, c)| c.data));
        let mut batch = ProfileBatch::new(data);
        batch.meta.transport = "http";
        batch.meta.origin = Origin::Sentry {
            project_id: project_id.to_owned(),
            envelope_header: envelope.header.clone(),
        };
        let consumed = self.output.consume(batch);
        // Items count as accepted only once the pipelines took them; a
        // refused envelope's items take its reason (their samples were
        // counted as refused by `consume`).
        let outcome = consumed
            .as_ref()
            .map_or_else(|e| e.reason(), |()| "accepted");
        for ty in items {
            self.telemetry.receiver_item(&self.id, ty, outcome);
        }
        count_transactions(match outcome {
            "accepted" if with_profile => "used",
            "accepted" => "ignored",
            refused => refused,
        });
        let e = match consumed {
            Ok(()) => {
                self.record(project_id, query, headers, version, bytes);
                return ok(&event_id);
            }
            Err(e) => e,
        };
        let reply = match e {
            ConsumeError::Full { retry_after, .. } => {
                let secs = retry_after.as_secs().max(1);
                let mut r = error(StatusCode::TOO_MANY_REQUESTS, e.to_string(), vec![]).0;
                let h = r.headers_mut();
                h.insert("retry-after", HeaderValue::from(secs));
                if let Ok(v) =
                    HeaderValue::from_str(&format!("{secs}:{LIMITED_CATEGORIES}:organization"))
                {
                    h.insert("x-sentry-rate-limits", v);
                }
                Reply(r)
            }
            ConsumeError::TooLarge { .. } => {
                error(StatusCode::PAYLOAD_TOO_LARGE, e.to_string(), vec![])
            }
            ConsumeError::ShuttingDown => {
                error(StatusCode::SERVICE_UNAVAILABLE, e.to_string(), vec![])
            }
        };
        self.refuse(e.reason(), reply)
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
        _raw: &[u8],
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
                "profile_chunk" => sentry::to_otlp::chunk_to_otlp_in_envelope(
                    item.payload,
                    item.platform(),
                    &envelope.header,
                    &opts,
                ),
                "profile" => sentry::profile_v1_to_otlp(
                    item.payload,
                    item.platform(),
                    transaction,
                    &envelope.header,
                    &opts,
                ),
                // Counted by `handle`, once its profile's fate is known.
                "transaction" if has_profile => continue,
                _ => {
                    self.telemetry.receiver_item(&self.id, ty, "ignored");
                    continue;
                }
            };
            match result {
                Ok(c) => {
                    for (reason, n) in &c.dropped {
                        self.telemetry
                            .receiver_refused(&self.id, "http", *n, reason);
                    }
                    out.push((ty, c));
                }
                Err(e) => {
                    profcol_pipeline::warn_limited!(receiver = %self.id, item = ty, reason = e.reason, error = %e.message, "item refused");
                    self.telemetry.receiver_item(&self.id, ty, e.reason);
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

fn ok(event_id: &str) -> Reply {
    Reply((StatusCode::OK, Json(json!({ "id": event_id }))).into_response())
}
