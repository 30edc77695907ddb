//! OTLP/HTTP for profiles (`POST /v1development/profiles`), as the OTLP
//! spec has it: `application/x-protobuf` or `application/json` bodies
//! (OTLP/JSON), `Content-Encoding` gzip, deflate, zstd, br or none, the
//! answer in the request's content type (partial success in the body), and
//! refusals as `google.rpc.Status` with the status code the Collector maps
//! them to (400, 401, 413, 415, 429/503 with `Retry-After`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::{HeaderMap, HeaderValue, StatusCode};
use prost::Message;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::compressed_copy::CompressedCopy;
use crate::gunzip;
use profcol_model::compressed::Encoding as Compression;
use profcol_model::proto::{ExportProfilesPartialSuccess, ExportProfilesServiceResponse};
use profcol_pipeline::component::Authenticator;

use super::config::{CorsConfig, HttpConfig};
use crate::body::BodyReader;
use crate::ingest::{self, Accepted, Ingest, Origin, Refusal};

struct HttpService {
    ingest: Arc<Ingest>,
    recorder: Option<Arc<crate::record::Recorder>>,
    path: String,
    max_body: u64,
    include_metadata: bool,
    auth: Option<Arc<dyn Authenticator>>,
}

pub(super) fn router(
    cfg: &HttpConfig,
    ingest: Arc<Ingest>,
    recorder: Option<Arc<crate::record::Recorder>>,
    auth: Option<Arc<dyn Authenticator>>,
) -> axum::Router {
    let service = Arc::new(HttpService {
        ingest,
        recorder,
        path: cfg.profiles_url_path.clone(),
        max_body: cfg.server.max_request_body_size,
        include_metadata: cfg.include_metadata,
        auth,
    });
    let router = axum::Router::new()
        .route(&cfg.profiles_url_path, post(export))
        .with_state(service);
    match &cfg.cors {
        Some(c) if !c.allowed_origins.is_empty() => router.layer(cors(c)),
        _ => router,
    }
}

/// `cors:` as confighttp applies it.
fn cors(c: &CorsConfig) -> CorsLayer {
    let origins = c.allowed_origins.clone();
    let allowed = move |origin: &HeaderValue, _: &http::request::Parts| {
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        origins.iter().any(|o| match o.split_once('*') {
            None => o == origin,
            Some((pre, post)) => {
                origin.len() >= pre.len() + post.len()
                    && origin.starts_with(pre)
                    && origin.ends_with(post)
            }
        })
    };
    let mut layer = CorsLayer::new()
        .allow_methods([http::Method::POST])
        .allow_origin(AllowOrigin::predicate(allowed));
    let headers: Vec<http::HeaderName> = c
        .allowed_headers
        .iter()
        .filter_map(|h| h.parse().ok())
        .chain([http::header::CONTENT_TYPE, http::header::CONTENT_ENCODING])
        .collect();
    layer = layer.allow_headers(headers);
    if c.max_age > 0 {
        layer = layer.max_age(Duration::from_secs(c.max_age));
    }
    layer
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Proto,
    Json,
}

impl Encoding {
    fn of(headers: &HeaderMap) -> Option<Self> {
        let ct = headers
            .get(http::header::CONTENT_TYPE)?
            .to_str()
            .ok()?
            .split(';')
            .next()?
            .trim()
            .to_ascii_lowercase();
        match ct.as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Self::Proto),
            "application/json" => Some(Self::Json),
            _ => None,
        }
    }

    fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Self::Proto => "application/x-protobuf",
            Self::Json => "application/json",
        })
    }
}

async fn export(
    State(svc): State<Arc<HttpService>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(enc) = Encoding::of(&headers) else {
        let ct = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let r = Refusal {
            http: Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            ..Refusal::invalid(
                "unsupported_content_type",
                format!("content-type {ct:?} is not application/x-protobuf or application/json"),
            )
        };
        let origin = Origin {
            transport: "http",
            client: Some(peer),
            metadata: Vec::new(),
            resource: Vec::new(),
        };
        svc.ingest.refused(&origin, 0, &r);
        return refusal(Encoding::Json, &r);
    };
    let origin = Origin {
        transport: "http",
        client: Some(peer),
        metadata: if svc.include_metadata {
            ingest::metadata(&headers)
        } else {
            Vec::new()
        },
        resource: Vec::new(),
    };
    let result = accept(&svc, enc, &headers, body, origin).await;
    match result {
        Ok((a, recorded)) => {
            if let (Some(r), Some(bytes)) = (&svc.recorder, recorded) {
                r.record(crate::record::Recording {
                    method: "POST",
                    path: svc.path.clone(),
                    query: String::new(),
                    http_version: "HTTP/1.1".to_owned(),
                    headers: crate::record::headers(&headers),
                    transport: "http",
                    body: bytes,
                    ext: match enc {
                        Encoding::Proto => "binpb",
                        Encoding::Json => "json",
                    },
                });
            }
            accepted(enc, a)
        }
        Err(r) => refusal(enc, &r),
    }
}

/// Authenticates, reads and hands off one request; the bytes read (for
/// `record_to`) with the answer.
async fn accept(
    svc: &HttpService,
    enc: Encoding,
    headers: &HeaderMap,
    body: Body,
    origin: Origin,
) -> Result<(Accepted, Option<bytes::Bytes>), Refusal> {
    let refused = |r: Refusal| {
        svc.ingest.refused(&origin, 0, &r);
        r
    };
    ingest::authenticate(svc.auth.as_ref(), headers).map_err(refused)?;
    super::check_development_version(headers).map_err(refused)?;
    let encoding = headers
        .get(http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok());
    let budget = svc.ingest.output.budget();
    let wire = content_length(headers);
    let gzip = encoding.and_then(Compression::from_header) == Some(Compression::Gzip);
    let (bytes, memory, compressed) = match wire {
        // A gzip body of known length (most exporters'): read whole and
        // inflated in one call.
        Some(n) if gzip && n as u64 <= svc.max_body => {
            let (plain, compressed, memory) =
                gunzip::read(crate::body::raw(body), n, svc.max_body, budget)
                    .await
                    .map_err(|e| refused(e.into()))?;
            (
                plain,
                memory,
                (enc == Encoding::Proto).then_some(compressed),
            )
        }
        _ => {
            // A protobuf body compressed as an exporter may send it is
            // kept as it came too, for a batch nothing changes.
            let (raw, copy) = match enc {
                Encoding::Proto => {
                    CompressedCopy::tee(crate::body::raw(body), encoding, svc.max_body as usize)
                }
                Encoding::Json => (crate::body::raw(body), None),
            };
            let (bytes, memory) = BodyReader::admitted(raw, encoding, svc.max_body, budget, wire)
                .await
                .map_err(|e| refused(e.into()))?
                .finish()
                .await
                .map_err(|e| refused(e.into()))?;
            let compressed = copy.and_then(|c| c.finish(bytes.len()));
            (bytes, memory, compressed)
        }
    };
    let bytes = bytes::Bytes::from(bytes);
    let kept = svc.recorder.is_some().then(|| bytes.clone());
    let accepted = match enc {
        Encoding::Proto => svc.ingest.otlp(bytes, compressed, memory, origin).await?,
        Encoding::Json => svc.ingest.otlp_json(bytes, memory, origin).await?,
    };
    Ok((accepted, kept))
}

/// The body's `Content-Length`, when it says.
fn content_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn accepted(enc: Encoding, a: Accepted) -> Response {
    let body = match enc {
        Encoding::Proto => ExportProfilesServiceResponse {
            partial_success: a.partial,
        }
        .encode_to_vec(),
        Encoding::Json => partial_json(a.partial.as_ref()),
    };
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, enc.content_type());
    resp
}

/// `ExportProfilesServiceResponse` as OTLP/JSON (int64 as a string).
fn partial_json(p: Option<&ExportProfilesPartialSuccess>) -> Vec<u8> {
    let v = match p {
        None => serde_json::json!({}),
        Some(p) => serde_json::json!({
            "partialSuccess": {
                "rejectedProfiles": p.rejected_profiles.to_string(),
                "errorMessage": p.error_message,
            }
        }),
    };
    serde_json::to_vec(&v).expect("a JSON value serializes")
}

/// A refusal as the OTLP spec asks: its status, a `google.rpc.Status` body
/// in the request's encoding, `Retry-After` when the client should retry.
fn refusal(enc: Encoding, r: &Refusal) -> Response {
    let status = tonic_types::pb::Status {
        code: r.code as i32,
        message: r.message.clone(),
        details: Vec::new(),
    };
    let body = match enc {
        Encoding::Proto => status.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&serde_json::json!({
            "code": status.code,
            "message": status.message,
        }))
        .expect("a JSON value serializes"),
    };
    let mut resp = (r.http_status(), body).into_response();
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, enc.content_type());
    if let Some(after) = r.retry_after {
        h.insert(
            http::header::RETRY_AFTER,
            HeaderValue::from(after.as_secs().max(1)),
        );
    }
    resp
}
