//! One request to `/ingest` or Push: the query, the body under its limits,
//! the conversion on the CPU pool, the hand-off, and Pyroscope's answers
//! (200 with an empty body; errors as `{"code": ..., "message": ...}`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::body::BodyReader;
use crate::ingest::{Ingest, Origin, Refusal};
use crate::record::{Recorder, Recording};

use super::config::PyroscopeReceiverConfig;
use super::convert::{Converter, JfrUpload, SampleTypes, Window, Work};
use super::folded::{self, Shape, Text};
use super::labels::{describe, Spy};
use super::multipart;
use super::push::{self, Codec};
use super::query::{now_nanos, IngestParams};
use profcol_pyroscope::tree::{self, Layout};
use profcol_pyroscope::{speedscope, Error as BodyError};

pub(super) struct Handler {
    pub ingest: Ingest,
    pub cfg: PyroscopeReceiverConfig,
    pub recorder: Option<Recorder>,
    /// Checks every request's credentials (`auth:`) before its body.
    pub auth: Option<Arc<dyn profcol_pipeline::component::Authenticator>>,
}

/// What an `/ingest` body holds, by `format` and `Content-Type`, in the
/// order the Pyroscope server decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// The whole body is a pprof (gzip'd or not).
    Pprof,
    /// A form with a `profile` part and an optional `sample_type_config`.
    Multipart(String),
    Text(Text),
    /// Old clients' binary trie or tree, read into folded text.
    Binary(Layout),
    Speedscope,
    /// `format=jfr` of the Java agent: a JFR (gzip'd or not), raw or in a
    /// form with a `jfr` part and an optional `labels` part; the form's
    /// boundary when it is one.
    Jfr(Option<String>),
}

impl Kind {
    /// The `type` label its accepted requests are counted under.
    fn item(&self) -> &'static str {
        match self {
            Kind::Pprof | Kind::Multipart(_) => "pprof",
            Kind::Text(Text::Folded) => "folded",
            Kind::Text(Text::Lines) => "lines",
            Kind::Binary(Layout::Trie) => "trie",
            Kind::Binary(Layout::Tree) => "tree",
            Kind::Speedscope => "speedscope",
            Kind::Jfr(_) => "jfr",
        }
    }
}

/// A converted request; `None` data when it held no samples.
struct Converted {
    data: Option<profcol_model::proto::ProfilesData>,
    work: Work,
    /// The body as parsed, kept for `record_to`.
    body: Option<Bytes>,
}

impl Handler {
    pub(super) fn origin(peer: Option<SocketAddr>) -> Origin {
        Origin {
            transport: "http",
            client: peer,
            metadata: Vec::new(),
            resource: Vec::new(),
        }
    }

    /// A refusal before or during conversion: counted with its reason.
    pub(super) fn refuse(&self, origin: &Origin, r: Refusal) -> Refusal {
        self.ingest.refused(origin, 0, &r);
        r
    }

    /// The credentials `auth` asks for, checked before anything else of
    /// the request: 401 `unauthenticated`, counted `unauthorized`.
    pub(super) fn authenticate(&self, headers: &HeaderMap, origin: &Origin) -> Result<(), Refusal> {
        crate::ingest::authenticate(self.auth.as_ref(), headers).map_err(|r| self.refuse(origin, r))
    }

    async fn read(&self, headers: &HeaderMap, body: Body) -> Result<(Vec<u8>, Work), Refusal> {
        let encoding = headers
            .get(http::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok());
        let limit = self.cfg.server.max_request_body_size;
        let (bytes, memory) = BodyReader::new(body, encoding, limit, self.ingest.output.budget())?
            .finish()
            .await?;
        Ok((
            bytes,
            Work {
                memory,
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            },
        ))
    }

    /// `POST /ingest?name=...`.
    pub(super) async fn ingest(
        self: &Arc<Self>,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        version: http::Version,
        body: Body,
        peer: Option<SocketAddr>,
    ) -> Response {
        let origin = Self::origin(peer);
        if let Err(r) = self.authenticate(headers, &origin) {
            return error(&r);
        }
        let params = match IngestParams::parse(query) {
            Ok(p) => p,
            Err(m) => return error(&self.refuse(&origin, Refusal::invalid("malformed", m))),
        };
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let kind = match kind(&params.format, content_type) {
            Ok(k) => k,
            Err(r) => return error(&self.refuse(&origin, r)),
        };
        let (bytes, work) = match self.read(headers, body).await {
            Ok(b) => b,
            Err(r) => return error(&self.refuse(&origin, r)),
        };
        let keep = self.recorder.is_some();
        let item = kind.item();
        let converted =
            profcol_model::cpu::run(move || convert_ingest(&params, &kind, bytes, work, keep))
                .await;
        let c = match converted {
            Ok(c) => c,
            Err(r) => return error(&self.refuse(&origin, r)),
        };
        let handed = self.hand_off(c, item, origin, |h, body| {
            h.record(path, query.unwrap_or(""), headers, version, body)
        });
        match handed.await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(r) => error(&r),
        }
    }

    /// `POST /push.v1.PusherService/Push`.
    pub(super) async fn push(
        self: &Arc<Self>,
        headers: &HeaderMap,
        version: http::Version,
        body: Body,
        peer: Option<SocketAddr>,
    ) -> Response {
        let origin = Self::origin(peer);
        if let Err(r) = self.authenticate(headers, &origin) {
            return error(&r);
        }
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
        if let Some(v) = header("connect-protocol-version").filter(|v| v.trim() != "1") {
            let r = Refusal::invalid(
                "malformed",
                format!("connect-protocol-version must be \"1\", got {v:?}"),
            );
            return error(&self.refuse(&origin, r));
        }
        let Some(codec) = Codec::of(header("content-type")) else {
            let r = Refusal {
                http: Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
                ..Refusal::invalid(
                    "unsupported_media_type",
                    format!(
                        "Push takes application/proto or application/json (Connect unary), not {:?}",
                        header("content-type").unwrap_or("")
                    ),
                )
            };
            let mut resp = error(&self.refuse(&origin, r));
            resp.headers_mut()
                .insert("accept-post", HeaderValue::from_static(push::ACCEPTED));
            return resp;
        };
        let spy = Spy::from_user_agent(header("user-agent"));
        let (bytes, work) = match self.read(headers, body).await {
            Ok(b) => b,
            Err(r) => return error(&self.refuse(&origin, r)),
        };
        let keep = self.recorder.is_some();
        let converted =
            profcol_model::cpu::run(move || convert_push(bytes, codec, spy.as_ref(), work, keep))
                .await;
        let c = match converted {
            Ok(c) => c,
            Err(r) => return error(&self.refuse(&origin, r)),
        };
        let ok = self
            .hand_off(c, "push", origin, |h, body| {
                h.record("/push.v1.PusherService/Push", "", headers, version, body)
            })
            .await;
        match ok {
            Ok(()) => (
                StatusCode::OK,
                [(http::header::CONTENT_TYPE, codec.content_type())],
                codec.empty_response(),
            )
                .into_response(),
            Err(r) => error(&r),
        }
    }

    /// Hands converted profiles to the pipelines (a request without samples
    /// is answered and counted `empty`); records an accepted request.
    async fn hand_off(
        &self,
        c: Converted,
        item: &'static str,
        origin: Origin,
        record: impl FnOnce(&Self, Option<Bytes>),
    ) -> Result<(), Refusal> {
        let outcome = match c.data {
            Some(data) => {
                self.ingest.converted(data, c.work.memory, origin).await?;
                "accepted"
            }
            None => "empty",
        };
        self.ingest
            .telemetry
            .receiver_item(&self.ingest.id, item, outcome);
        record(self, c.body);
        Ok(())
    }

    fn record(
        &self,
        path: &str,
        query: &str,
        headers: &HeaderMap,
        version: http::Version,
        body: Option<Bytes>,
    ) {
        let (Some(r), Some(body)) = (&self.recorder, body) else {
            return;
        };
        r.record(Recording {
            method: "POST",
            path: path.to_owned(),
            query: crate::record::query(Some(query)),
            http_version: format!("{version:?}"),
            headers: crate::record::headers(headers),
            transport: "http",
            body,
            // `NNNN.body.bin` next to `NNNN.meta.json`, as the SDK
            // recordings are laid out, so `profcol test` replays either.
            ext: "body.bin",
        });
    }
}

/// The body kind: `format=pprof` (a form too, which Pyroscope would
/// refuse), `format=lines`, a form, else folded text (Pyroscope's default
/// for no format, `folded`, `groups` and any other name), `format=jfr`
/// raw or in a form. The formats of old clients are refused before the
/// body is read.
fn kind(format: &str, content_type: &str) -> Result<Kind, Refusal> {
    let unsupported = |what: &str| {
        Err(Refusal {
            http: Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            ..Refusal::invalid(
                "unsupported_format",
                format!("{what} is not supported: send pprof, jfr, speedscope, trie, tree, folded or lines"),
            )
        })
    };
    let ct = content_type.to_ascii_lowercase();
    // In Pyroscope's order: `format`, then the binary content types.
    match format {
        "trie" => return Ok(Kind::Binary(Layout::Trie)),
        "tree" => return Ok(Kind::Binary(Layout::Tree)),
        "speedscope" => return Ok(Kind::Speedscope),
        _ if ct == "binary/octet-stream+trie" => return Ok(Kind::Binary(Layout::Trie)),
        _ if ct == "binary/octet-stream+tree" => return Ok(Kind::Binary(Layout::Tree)),
        _ if ct.starts_with("binary/octet-stream+") => {
            return unsupported(&format!("Content-Type {content_type}"))
        }
        _ => {}
    }
    let boundary = multipart::boundary(content_type);
    if format == "jfr" {
        return match boundary {
            Some(b) => b
                .map(|b| Kind::Jfr(Some(b)))
                .map_err(|e| Refusal::invalid("malformed", e)),
            None => Ok(Kind::Jfr(None)),
        };
    }
    if let Some(b) = boundary {
        if matches!(format, "" | "pprof") {
            return b
                .map(Kind::Multipart)
                .map_err(|e| Refusal::invalid("malformed", e));
        }
    }
    Ok(match format {
        "pprof" => Kind::Pprof,
        "lines" => Kind::Text(Text::Lines),
        _ => Kind::Text(Text::Folded),
    })
}

/// Converts an `/ingest` body. CPU-bound: runs on the CPU pool.
fn convert_ingest(
    p: &IngestParams,
    kind: &Kind,
    bytes: Vec<u8>,
    mut work: Work,
    keep: bool,
) -> Result<Converted, Refusal> {
    let window = Window {
        from: p.from,
        until: p.until,
    };
    let mut types = SampleTypes {
        aggregation: p.aggregation.clone(),
        ..SampleTypes::default()
    };
    // `app.cpu` names the service `app` whatever the body (a pprof
    // carries its own sample types).
    let (app, type_name, unit, period_type) = folded::split_suffix(&p.name.app);
    let mut c = Converter::new();
    match kind {
        Kind::Pprof => {
            let d = describe(Some(app), &p.name.labels, p.spy.as_ref());
            c.pprof(&bytes, &d, &types, window, &mut work)?;
        }
        Kind::Multipart(boundary) => {
            let bad = |m: String| Refusal::invalid("malformed", m);
            let parts = multipart::parse(&bytes, boundary).map_err(bad)?;
            let part = |name: &str| parts.iter().find(|p| p.name == name);
            for prev in ["prev_profile", "previous_profile"] {
                if part(prev).is_some_and(|p| !p.data.is_empty()) {
                    return Err(bad(format!(
                        "the {prev} part (cumulative profiles of old SDKs) is not supported: \
                         update the SDK, which sends deltas"
                    )));
                }
            }
            let profile = part("profile").ok_or_else(|| {
                let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
                bad(format!("the form has no profile part (parts: {names:?})"))
            })?;
            if let Some(cfg) = part("sample_type_config") {
                types = types.with_config(cfg.data).map_err(bad)?;
            }
            let d = describe(Some(app), &p.name.labels, p.spy.as_ref());
            c.pprof(profile.data, &d, &types, window, &mut work)?;
        }
        Kind::Jfr(boundary) => {
            let bad = |m: String| Refusal::invalid("malformed", m);
            let d = describe(Some(app), &p.name.labels, p.spy.as_ref());
            let jfr = JfrUpload {
                sample_rate: p.sample_rate,
                window,
            };
            match boundary {
                None => c.jfr(&bytes, None, &d, &jfr, &mut work)?,
                Some(b) => {
                    let parts = multipart::parse(&bytes, b).map_err(bad)?;
                    let part = |name: &str| parts.iter().find(|p| p.name == name);
                    let body = part("jfr").ok_or_else(|| {
                        let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
                        bad(format!("the form has no jfr part (parts: {names:?})"))
                    })?;
                    let labels = part("labels").map(|l| l.data).filter(|l| !l.is_empty());
                    c.jfr(body.data, labels, &d, &jfr, &mut work)?;
                }
            }
        }
        Kind::Text(text) => {
            let unit = folded::unit_of(&p.units).unwrap_or(unit);
            let shape = text_shape(p, (type_name, unit), period_type);
            let d = describe(Some(app), &p.name.labels, p.spy.as_ref());
            c.text(&bytes, *text, &shape, &d, &types, &mut work)?;
        }
        Kind::Binary(layout) => {
            let text =
                tree::to_folded(&bytes, *layout, &mut |n| work.reserve(n)).map_err(body_refusal)?;
            let unit = folded::unit_of(&p.units).unwrap_or(unit);
            let shape = text_shape(p, (type_name, unit), period_type);
            let d = describe(Some(app), &p.name.labels, p.spy.as_ref());
            c.text(&text, Text::Folded, &shape, &d, &types, &mut work)?;
        }
        Kind::Speedscope => {
            let parts =
                speedscope::to_folded(&bytes, &mut |n| work.reserve(n)).map_err(body_refusal)?;
            for part in parts {
                let sample_type = match part.unit {
                    speedscope::Unit::Count => {
                        (type_name, folded::unit_of(&p.units).unwrap_or(unit))
                    }
                    speedscope::Unit::Nanoseconds => (period_type.unwrap_or("cpu"), "nanoseconds"),
                    speedscope::Unit::Bytes if unit == "bytes" => (type_name, "bytes"),
                    speedscope::Unit::Bytes => ("alloc_space", "bytes"),
                };
                let shape = text_shape(p, sample_type, period_type);
                let mut labels = p.name.labels.clone();
                if !part.name.is_empty() {
                    // As Pyroscope labels each profile of a file.
                    labels.push(("profile_name".to_owned(), part.name));
                }
                let d = describe(Some(app), &labels, p.spy.as_ref());
                c.text(&part.folded, Text::Folded, &shape, &d, &types, &mut work)?;
            }
        }
    }
    Ok(Converted {
        data: c.finish(),
        work,
        body: keep.then(|| Bytes::from(bytes)),
    })
}

/// A trie, tree or speedscope body that did not convert.
fn body_refusal(e: BodyError<Refusal>) -> Refusal {
    match e {
        BodyError::Malformed(m) => Refusal::invalid("malformed", m),
        BodyError::Budget(r) => r,
    }
}

/// The profile a text body describes: its sample type, the period the
/// sample rate gives a CPU or wall profile, the request's window.
fn text_shape(
    p: &IngestParams,
    (type_name, unit): (&str, &str),
    period_type: Option<&str>,
) -> Shape {
    let period = match (period_type, p.sample_rate) {
        (Some(_), rate @ 1..) => 1_000_000_000 / i64::from(rate),
        _ => 0,
    };
    Shape {
        sample_type: (type_name.to_owned(), unit.to_owned()),
        period_type: period_type
            .filter(|_| period > 0)
            .map(|t| (t.to_owned(), "nanoseconds".to_owned())),
        period,
        time_unix_nano: p.from,
        duration_nano: p.until.saturating_sub(p.from),
    }
}

/// Converts a Push request: each series a resource of its labels, each of
/// its samples a pprof. Any sample that does not convert refuses the whole
/// request, naming it. CPU-bound: runs on the CPU pool.
fn convert_push(
    bytes: Vec<u8>,
    codec: Codec,
    spy: Option<&Spy>,
    mut work: Work,
    keep: bool,
) -> Result<Converted, Refusal> {
    let body = Bytes::from(bytes);
    if codec == Codec::Json {
        // The raw profiles are copied out of their base64.
        work.reserve(body.len())?;
    }
    let req = push::decode(body.clone(), codec).map_err(|e| Refusal::invalid("malformed", e))?;
    if req.series.iter().all(|s| s.samples.is_empty()) {
        return Err(Refusal::invalid("malformed", "no profiles received"));
    }
    let now = now_nanos();
    let window = Window {
        from: now,
        until: now,
    };
    let mut c = Converter::new();
    for (i, s) in req.series.iter().enumerate() {
        let labels: Vec<(String, String)> = s
            .labels
            .iter()
            .map(|l| (l.name.clone(), l.value.clone()))
            .collect();
        let d = describe(None, &labels, spy);
        for (j, sample) in s.samples.iter().enumerate() {
            c.pprof(
                &sample.raw_profile,
                &d,
                &SampleTypes::default(),
                window,
                &mut work,
            )
            .map_err(|r| Refusal {
                message: format!("series[{i}].samples[{j}]: {}", r.message),
                ..r
            })?;
        }
    }
    drop(req);
    Ok(Converted {
        data: c.finish(),
        work,
        body: keep.then_some(body),
    })
}

/// A refused request's answer: its status, `Retry-After` when it should
/// come back (429 when the collector is full, 503 while it shuts down or
/// cannot write a persistent queue), and `{"code", "message"}` as
/// Pyroscope and Connect write errors.
pub(super) fn error(r: &Refusal) -> Response {
    let status = match r.retry_after {
        Some(_) if !matches!(r.reason, "shutdown" | "queue_storage") => {
            StatusCode::TOO_MANY_REQUESTS
        }
        _ => r.http_status(),
    };
    let body = serde_json::json!({ "code": push::code_for(status), "message": r.message });
    let mut resp = (status, axum::Json(body)).into_response();
    if let Some(after) = r.retry_after {
        let secs = after.as_secs_f64().ceil().max(1.0) as u64;
        resp.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Full: 429 (Pyroscope's answer to a tenant over its limit); a queue
    /// that cannot write its disk or a collector shutting down: 503. Both
    /// with `Retry-After` in whole seconds and the Connect code.
    #[tokio::test]
    async fn retryable_refusals_say_when_to_come_back() {
        use std::time::Duration;
        let full = (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted");
        let unavailable = (StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        for (reason, after_ms, (status, code), secs) in [
            ("queue_full", 1500, full, "2"),
            ("memory_limit", 1000, full, "1"),
            ("queue_storage", 5000, unavailable, "5"),
            ("shutdown", 100, unavailable, "1"),
        ] {
            let r = Refusal::retry_later(reason, "later", Duration::from_millis(after_ms));
            let resp = error(&r);
            assert_eq!(resp.status(), status, "{reason}");
            assert_eq!(resp.headers()[http::header::RETRY_AFTER], secs, "{reason}");
            let body = axum::body::to_bytes(resp.into_body(), 1 << 10)
                .await
                .unwrap();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["code"], code, "{reason}");
        }
        let resp = error(&Refusal::invalid("malformed", "bad"));
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert!(!resp.headers().contains_key(http::header::RETRY_AFTER));
    }

    #[test]
    fn the_body_kind_follows_pyroscope() {
        let form = "multipart/form-data; boundary=b";
        assert_eq!(kind("pprof", "binary/octet-stream"), Ok(Kind::Pprof));
        assert_eq!(kind("", form), Ok(Kind::Multipart("b".into())));
        assert_eq!(kind("pprof", form), Ok(Kind::Multipart("b".into())));
        assert_eq!(
            kind("", "binary/octet-stream"),
            Ok(Kind::Text(Text::Folded))
        );
        assert_eq!(kind("groups", ""), Ok(Kind::Text(Text::Folded)));
        assert_eq!(kind("lines", ""), Ok(Kind::Text(Text::Lines)));
        let trie = Ok(Kind::Binary(Layout::Trie));
        assert_eq!(kind("trie", ""), trie);
        assert_eq!(kind("", "binary/octet-stream+trie"), trie);
        assert_eq!(kind("tree", form), Ok(Kind::Binary(Layout::Tree)));
        assert_eq!(
            kind("", "binary/octet-stream+tree"),
            Ok(Kind::Binary(Layout::Tree))
        );
        assert_eq!(kind("speedscope", "application/json"), Ok(Kind::Speedscope));
        assert_eq!(kind("jfr", ""), Ok(Kind::Jfr(None)));
        assert_eq!(kind("jfr", form), Ok(Kind::Jfr(Some("b".into()))));
        let r = kind("", "binary/octet-stream+jfr").unwrap_err();
        assert_eq!(
            (r.reason, r.http_status()),
            ("unsupported_format", StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
    }
}
