use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue};

use profcol_model::proto::metrics::ExportMetricsServiceRequest;
use profcol_model::ProfileBatch;
use profcol_otlp::development_version;
use profcol_otlp::json as otlp_json;
use profcol_otlp::revisions::{self as otlp_revisions, Lost, Revision};
use profcol_pipeline::component::{ExportError, ExportOutcome, Exporter, ExporterContext, Request};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use super::config::{Encoding, OtlpHttpExporterConfig};
use super::response::{self, Answer};
use crate::client_auth::ClientAuth;
use crate::http_client::header_map;
use crate::http_common::error_chain;
use crate::otlp::compress::{compress_into, encoding_name};
use crate::otlp::Compression;
use crate::parts::{self, PeerLimit};

const USER_AGENT: &str = concat!("profcol/", env!("CARGO_PKG_VERSION"));

pub struct OtlpHttpExporter {
    http: reqwest::Client,
    url: String,
    metrics_url: Option<String>,
    headers: HeaderMap,
    encoding: Encoding,
    compression: Compression,
    /// `compression_params.level` (0: profcol's level 1).
    level: i32,
    auth: ClientAuth,
    revision: Revision,
    /// What the peer takes, once it refused a request as too large.
    limit: PeerLimit,
    /// `max_conns_per_host`: a request waits for one of these.
    conns: Option<Arc<tokio::sync::Semaphore>>,
}

impl OtlpHttpExporter {
    /// Builds the client: reads the TLS files, reporting each problem at
    /// its key path. What [`OtlpHttpExporterConfig::validate`] refuses (the
    /// URL, headers) is left to it; the factory runs both.
    pub fn new(
        cfg: &OtlpHttpExporterConfig,
        section: &ComponentConfig,
        connect_timeout: std::time::Duration,
    ) -> Result<Self, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let builder = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .connect_timeout(connect_timeout)
            // A redirected POST would turn into a GET: report it instead.
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true);
        let builder = match &cfg.keepalive {
            Some(k) => k.apply(builder),
            None => builder,
        };
        let builder = cfg.http_settings(builder);
        // validate() reported a bad proxy_url at its key.
        let builder = match cfg.proxy() {
            Ok(Some(p)) => builder.proxy(p),
            _ => builder,
        };
        let http = cfg
            .tls
            .configure(builder, &section.key_path("tls"), &mut errs)
            .build()
            .map_err(|e| errs.push(section.key_path("tls"), error_chain(&e)))
            .ok();
        let headers = header_map(&cfg.headers);
        match http {
            Some(http) if errs.is_empty() => Ok(Self {
                http,
                url: cfg.url(),
                metrics_url: cfg.metrics_url(),
                headers,
                encoding: cfg.encoding,
                compression: cfg.compression,
                level: cfg.compression_params.level,
                auth: ClientAuth::new(cfg.auth.clone()),
                revision: cfg.proto_revision,
                limit: PeerLimit::default(),
                conns: (cfg.max_conns_per_host > 0)
                    .then(|| Arc::new(tokio::sync::Semaphore::new(cfg.max_conns_per_host))),
            }),
            _ => Err(errs),
        }
    }

    /// The request body, encoded (in the peer's proto revision) and
    /// compressed off the async runtime. A protobuf batch nothing changed
    /// is sent as it was received, to a v1.10.0 peer: as its client
    /// compressed it if that is this exporter's compression.
    async fn body(&self, batch: &Arc<ProfileBatch>) -> Result<Bytes, ExportError> {
        let (encoding, compression, revision) = (self.encoding, self.compression, self.revision);
        let level = self.level;
        let current = revision == Revision::CURRENT;
        if encoding == Encoding::Proto && current {
            if compression == Compression::None {
                return Ok(batch.encode_to_bytes());
            }
            if let Some(bytes) = batch.compressed_as(compression.encoding()) {
                return Ok(bytes.clone());
            }
        }
        // The size of a batch held as bytes is known without inflating or
        // measuring it; a small one is encoded and compressed here.
        let size = match (batch.plain_bytes(), batch.compressed()) {
            (Some(b), _) => b.len(),
            (None, Some(c)) => c.plain_len,
            (None, None) => usize::MAX,
        };
        let batch = Arc::clone(batch);
        profcol_model::cpu::run_sized(size, move || {
            let (plain, lost) = match encoding {
                Encoding::Proto if current => (batch.encode_to_bytes(), Lost::default()),
                Encoding::Proto => {
                    let mut buf = Vec::new();
                    let lost = otlp_revisions::encode_as(batch.data(), revision, &mut buf)
                        .map_err(std::io::Error::other)?;
                    (Bytes::from(buf), lost)
                }
                Encoding::Json => {
                    let (json, lost) = otlp_json::encode_as(batch.data(), revision);
                    (Bytes::from(json), lost)
                }
            };
            lost.warn(revision);
            if compression == Compression::None {
                return Ok(plain);
            }
            let out = Vec::with_capacity(plain.len() / 4);
            compress_into(out, &plain, compression, level).map(Bytes::from)
        })
        .await
        .map_err(|e| ExportError::permanent(format!("encoding the request: {e}")))
    }
}

#[async_trait]
impl Exporter for OtlpHttpExporter {
    fn authenticators(&self) -> Vec<(String, String)> {
        self.auth.references()
    }

    async fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        self.auth.start(ctx)
    }

    /// See [`OtlpHttpExporter::body`].
    fn sends_received_bytes(&self) -> bool {
        self.encoding == Encoding::Proto && self.revision == Revision::CURRENT
    }

    fn sends_compressed(&self) -> Option<profcol_model::compressed::Encoding> {
        self.compression.encoding()
    }

    fn exports_metrics(&self) -> bool {
        true
    }

    async fn export_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        self.send_metrics(req).await
    }

    async fn export(
        &self,
        req: &Request,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let in_parts = || parts::send(req, &self.limit, |b, c| self.send(b, c));
        if self.limit.applies_to(req) {
            return in_parts().await;
        }
        let counts = (req.batch.profile_count(), req.batch.sample_count());
        let result = self.send(req.batch.clone(), counts).await;
        if self.limit.refused(&result, req) {
            return in_parts().await;
        }
        result
    }
}

impl OtlpHttpExporter {
    /// One POST of `batch`, of `counts` (profiles, samples).
    async fn send(
        &self,
        batch: Arc<ProfileBatch>,
        counts: (u64, u64),
    ) -> Result<ExportOutcome, ExportError> {
        let body = self.body(&batch).await?;
        drop(batch);
        let rejected_profiles = self
            .post(&self.url, body, self.revision.development_version())
            .await?;
        Ok(ExportOutcome::rejected(crate::otlp::rejected_samples(
            &counts,
            rejected_profiles,
        )))
    }

    /// One POST of a metrics request to `metrics_endpoint` (or
    /// `endpoint` + `/v1/metrics`), encoded and compressed as profiles are.
    async fn send_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
    ) -> Result<ExportOutcome, ExportError> {
        let Some(url) = &self.metrics_url else {
            return Err(ExportError::permanent(
                "no metrics URL: set endpoint or metrics_endpoint",
            ));
        };
        let plain = match self.encoding {
            Encoding::Proto => Bytes::from(prost::Message::encode_to_vec(req)),
            Encoding::Json => Bytes::from(serde_json::to_vec(req).map_err(|e| {
                ExportError::permanent(format!("encoding the metrics request: {e}"))
            })?),
        };
        let body = match self.compression {
            Compression::None => plain,
            c => compress_into(Vec::with_capacity(plain.len() / 4), &plain, c, self.level)
                .map(Bytes::from)
                .map_err(|e| ExportError::permanent(format!("compressing the request: {e}")))?,
        };
        // The response's partial success has the profiles response's
        // field numbers: `rejected_data_points` reads as rejected profiles.
        let rejected = self.post(url, body, None).await?;
        Ok(ExportOutcome::rejected(
            u64::try_from(rejected).unwrap_or(0),
        ))
    }

    /// POSTs `body` to `url`, of the Profiles development `version` if
    /// given (whatever `headers` says); what the peer rejected (partial
    /// success).
    async fn post(
        &self,
        url: &str,
        body: Bytes,
        version: Option<&'static str>,
    ) -> Result<i64, ExportError> {
        // Go's transport dials no more than this per host; one request per
        // HTTP/1 connection makes that the requests at once.
        let _conn = match &self.conns {
            Some(c) => Some(c.acquire().await.expect("the semaphore stays open")),
            None => None,
        };
        let mut headers = self.headers.clone();
        if let Some(v) = version {
            headers.insert(development_version::HEADER, HeaderValue::from_static(v));
        }
        let mut req = self
            .http
            .post(url)
            .headers(headers)
            .header(CONTENT_TYPE, self.encoding.content_type());
        if let Some(name) = encoding_name(self.compression) {
            req = req.header(CONTENT_ENCODING, name);
        }
        for (k, v) in self.auth.headers()? {
            req = req.header(k, v);
        }
        let resp = req
            .body(body)
            .send()
            .await
            .map_err(|e| ExportError::retryable(format!("POST {url}: {}", error_chain(&e))))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| crate::http_common::parse_retry_after(v, SystemTime::now()));
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response::read_limited(resp).await;
        match response::answer(status, &content_type, &body, retry_after) {
            Answer::Delivered {
                rejected_profiles,
                message,
            } => {
                if rejected_profiles > 0 || !message.is_empty() {
                    // As the Collector: a partial success is logged, not retried.
                    tracing::warn!(
                        url = %url,
                        rejected = rejected_profiles,
                        message = %message,
                        "partial success response"
                    );
                }
                Ok(rejected_profiles)
            }
            Answer::Failed(mut e) => {
                match &mut e {
                    ExportError::Retryable { message, .. } | ExportError::Permanent { message } => {
                        *message = format!("POST {url}: {message}")
                    }
                }
                Err(e)
            }
        }
    }
}
