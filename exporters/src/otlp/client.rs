use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use http::uri::PathAndQuery;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use profcol_model::proto::metrics::{
    self, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use profcol_model::proto::EXPORT_PATH;
use profcol_otlp::development_version;
use profcol_otlp::revisions::Revision;
use profcol_pipeline::component::{ExportError, ExportOutcome, Exporter, ExporterContext, Request};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};

use super::classify::classify;
use super::codec::{BatchCodec, Body};
use super::compress::{Compressing, Prebuilt};
use super::config::{dial_target, metadata_entry, Compression, OtlpExporterConfig};
use super::spread::{self, Spread};
use crate::client_auth::ClientAuth;
use crate::http_client::read_tls_file;
use crate::lookup::Lookup;
use crate::parts::{self, PeerLimit};

pub(crate) struct OtlpExporter {
    target: Target,
    metadata: MetadataMap,
    compression: Compression,
    endpoint: String,
    auth: ClientAuth,
    revision: Revision,
    /// What the peer takes, once it refused a request as too large.
    limit: PeerLimit,
}

/// Where calls go.
enum Target {
    /// One connection: `pick_first`, an address, or `passthrough`. Made
    /// on first use: tonic needs a running Tokio reactor for it, and
    /// `profcol validate` builds exporters without one.
    One {
        endpoint: Box<Endpoint>,
        channel: OnceLock<Channel>,
    },
    /// `round_robin` over the addresses of a host name.
    Spread(Arc<Spread>),
}

/// The connection settings every endpoint of the exporter gets.
struct Settings {
    connect_timeout: std::time::Duration,
    keepalive: super::ClientKeepalive,
}

impl Settings {
    fn endpoint(&self, uri: &str) -> Result<Endpoint, tonic::transport::Error> {
        let ep = Endpoint::from_shared(uri.to_owned())?
            .tcp_nodelay(true)
            .connect_timeout(self.connect_timeout)
            .keep_alive_timeout(self.keepalive.timeout.get())
            .keep_alive_while_idle(self.keepalive.permit_without_stream);
        Ok(match self.keepalive.interval() {
            Some(t) => ep.http2_keep_alive_interval(t),
            None => ep,
        })
    }
}

/// The host and port of a `host:port` or `[v6]:port` dial target.
fn host_and_port(target: &str) -> Option<(&str, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host, port.parse().ok()?))
}

impl OtlpExporter {
    /// Checks what only building the client can tell (the endpoint as a
    /// URI, the TLS files), reporting every problem at its key path under
    /// `section`. A missing endpoint and headers
    /// [`OtlpExporterConfig::validate`] refuses are left out here: it
    /// reports them, and the factory runs both. The channel connects lazily
    /// on the first export, so a gateway that starts later is fine.
    pub(crate) fn new(
        cfg: &OtlpExporterConfig,
        section: &ComponentConfig,
        connect_timeout: std::time::Duration,
        lookup: Arc<dyn Lookup>,
    ) -> Result<Self, ConfigErrors> {
        let mut errs = ConfigErrors::default();
        let plaintext = cfg.plaintext();
        let scheme = if plaintext { "http" } else { "https" };
        // An endpoint that is missing or not host:port is reported by
        // `OtlpExporterConfig::validate`.
        let target = dial_target(&cfg.endpoint).ok();
        let uri = format!("{scheme}://{}", target.unwrap_or_default());
        let settings = Settings {
            connect_timeout,
            keepalive: cfg.keepalive.clone(),
        };
        let ep = target.and_then(|_| match settings.endpoint(&uri) {
            Ok(ep) => Some(ep),
            Err(e) => {
                errs.push(
                    section.key_path("endpoint"),
                    format!("invalid endpoint {:?}: {e}", cfg.endpoint),
                );
                None
            }
        });
        let mut tls = None;
        if !plaintext {
            let path = section.key_path("tls");
            let ca = read_tls_file(&path, "ca_file", &cfg.tls.ca_file, &mut errs);
            let cert = read_tls_file(&path, "cert_file", &cfg.tls.cert_file, &mut errs);
            let key = read_tls_file(&path, "key_file", &cfg.tls.key_file, &mut errs);
            let mut t = ClientTlsConfig::new().with_native_roots();
            if let Some(pem) = ca {
                t = t.ca_certificate(Certificate::from_pem(pem));
            }
            if let (Some(cert), Some(key)) = (cert, key) {
                t = t.identity(Identity::from_pem(cert, key));
            }
            if let Some(name) = &cfg.tls.server_name_override {
                t = t.domain_name(name.clone());
            }
            tls = Some(t);
        }
        let ep = match (ep, &tls) {
            (Some(ep), Some(tls)) => match ep.tls_config(tls.clone()) {
                Ok(ep) => Some(ep),
                Err(e) => {
                    errs.push(section.key_path("tls"), e.to_string());
                    None
                }
            },
            (ep, _) => ep,
        };
        let mut metadata = MetadataMap::new();
        for (k, v) in &cfg.headers {
            if let (Ok(key), Ok(value)) = metadata_entry(k, v) {
                metadata.insert(key, value);
            }
        }
        // round_robin over the addresses of a host name; one connection for
        // pick_first, an address, or gRPC's `passthrough` (no resolver).
        let spread = target.and_then(host_and_port).filter(|(host, _)| {
            cfg.round_robin()
                && host.parse::<std::net::IpAddr>().is_err()
                && !cfg.endpoint.starts_with("passthrough:")
        });
        let target = match (ep, spread) {
            (Some(_), Some((host, port))) => {
                // Each address is dialled with the host name as what TLS
                // verifies (unless overridden) and as the calls' :authority.
                let name = host.to_owned();
                let tls = tls.map(|t| match cfg.tls.server_name_override {
                    Some(_) => t,
                    None => t.domain_name(name.clone()),
                });
                let origin = format!("{scheme}://{name}:{port}");
                let make = move |addr: std::net::SocketAddr| {
                    let mut ep = settings
                        .endpoint(&format!("{scheme}://{addr}"))
                        .map_err(|e| e.to_string())?;
                    if let Some(tls) = &tls {
                        ep = ep.tls_config(tls.clone()).map_err(|e| e.to_string())?;
                    }
                    Ok(ep.origin(origin.parse().map_err(|e| format!("{origin}: {e}"))?))
                };
                Some(Target::Spread(Arc::new(Spread::new(
                    host,
                    port,
                    lookup,
                    Box::new(make),
                ))))
            }
            (Some(ep), None) => Some(Target::One {
                endpoint: Box::new(ep),
                channel: OnceLock::new(),
            }),
            (None, _) => None,
        };
        match target {
            Some(target) if errs.is_empty() => Ok(Self {
                target,
                metadata,
                compression: cfg.compression,
                endpoint: uri,
                auth: ClientAuth::new(cfg.auth.clone()),
                revision: cfg.proto_revision,
                limit: PeerLimit::default(),
            }),
            _ => Err(errs),
        }
    }
}

#[async_trait]
impl Exporter for OtlpExporter {
    fn authenticators(&self) -> Vec<(String, String)> {
        self.auth.references()
    }

    async fn start(&self, ctx: &ExporterContext) -> anyhow::Result<()> {
        self.auth.start(ctx)
    }

    async fn export(
        &self,
        req: &Request,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let in_parts = || parts::send(req, &self.limit, |b, c| self.send(Body::Batch(b), c));
        if self.limit.applies_to(req) {
            return in_parts().await;
        }
        let counts = (req.batch.profile_count(), req.batch.sample_count());
        let result = self.send(Body::Batch(req.batch.clone()), counts).await;
        if self.limit.refused(&result, req) {
            return in_parts().await;
        }
        result
    }

    fn sends_received_bytes(&self) -> bool {
        self.sends_encoded()
    }

    fn sends_compressed(&self) -> Option<profcol_model::compressed::Encoding> {
        self.compression.encoding()
    }

    fn exports_metrics(&self) -> bool {
        true
    }

    /// MetricsService/Export on the same channel, with the same metadata,
    /// compression and authentication.
    async fn export_metrics(
        &self,
        req: &ExportMetricsServiceRequest,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let resp = self
            .call(|channel| async move {
                let mut grpc = self.grpc(channel).await?;
                let mut call = tonic::Request::new(req.clone());
                self.add_headers(call.metadata_mut())?;
                let codec: tonic_prost::ProstCodec<
                    ExportMetricsServiceRequest,
                    ExportMetricsServiceResponse,
                > = tonic_prost::ProstCodec::default();
                grpc.unary(call, PathAndQuery::from_static(metrics::EXPORT_PATH), codec)
                    .await
                    .map_err(Failed::Status)
            })
            .await?;
        let Some(p) = resp.into_inner().partial_success else {
            return Ok(ExportOutcome::delivered());
        };
        if p.rejected_data_points > 0 || !p.error_message.is_empty() {
            tracing::warn!(
                endpoint = %self.endpoint,
                rejected_data_points = p.rejected_data_points,
                message = %p.error_message,
                "partial success response"
            );
        }
        Ok(ExportOutcome::rejected(
            u64::try_from(p.rejected_data_points).unwrap_or(0),
        ))
    }
}

/// A call that failed: its connection not ready, or with a status.
enum Failed {
    Ready(tower::BoxError),
    Status(tonic::Status),
    Auth(ExportError),
}

impl From<ExportError> for Failed {
    fn from(e: ExportError) -> Self {
        Failed::Auth(e)
    }
}

impl Failed {
    fn not_connected(&self) -> bool {
        match self {
            Failed::Ready(e) => spread::not_connected(&**e),
            Failed::Status(s) => spread::not_connected(s),
            Failed::Auth(_) => false,
        }
    }

    fn into_export_error(self, endpoint: &dyn std::fmt::Display) -> ExportError {
        match self {
            Failed::Ready(e) => ExportError::retryable(format!("connecting to {endpoint}: {e}")),
            Failed::Status(s) => classify(&s),
            Failed::Auth(e) => e,
        }
    }
}

impl OtlpExporter {
    /// Runs `call` on the connection: with `round_robin`, on the next
    /// address in turn, and on the ones after it while a call could not
    /// connect (it never left).
    async fn call<T, F, Fut>(&self, call: F) -> Result<T, ExportError>
    where
        F: Fn(Channel) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failed>>,
    {
        let spread = match &self.target {
            Target::One { endpoint, channel } => {
                let channel = channel.get_or_init(|| endpoint.connect_lazy()).clone();
                return call(channel)
                    .await
                    .map_err(|e| e.into_export_error(&self.endpoint));
            }
            Target::Spread(s) => s,
        };
        let mut last = None;
        for (addr, channel) in spread.candidates().await.map_err(ExportError::retryable)? {
            match call(channel).await {
                Ok(r) => {
                    spread.answered(addr);
                    return Ok(r);
                }
                Err(e) if e.not_connected() => {
                    spread.failed(addr);
                    last = Some((addr, e));
                }
                Err(e) => return Err(e.into_export_error(&addr)),
            }
        }
        let (addr, e) = last.expect("candidates are never empty");
        Err(e.into_export_error(&addr))
    }

    /// A gRPC client on `channel`, ready. gRPC-Go servers (the
    /// Collector's) answer in the encoding the request came in: a response
    /// that could not be read would fail a call the peer had accepted.
    async fn grpc(&self, channel: Channel) -> Result<tonic::client::Grpc<Compressing>, Failed> {
        let mut grpc = tonic::client::Grpc::new(Compressing::new(channel, self.compression))
            .accept_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Zstd);
        grpc.ready().await.map_err(Failed::Ready)?;
        Ok(grpc)
    }

    /// The configured headers and the authenticator's.
    fn add_headers(&self, metadata: &mut MetadataMap) -> Result<(), ExportError> {
        *metadata = self.metadata.clone();
        for (k, v) in self.auth.headers()? {
            let key = AsciiMetadataKey::from_bytes(k.as_str().as_bytes());
            let value = AsciiMetadataValue::try_from(v.as_bytes());
            if let (Ok(k), Ok(v)) = (key, value) {
                metadata.insert(k, v);
            }
        }
        Ok(())
    }

    /// Whether [`OtlpExporter::send`] takes [`Body::Encoded`]: the peer
    /// reads the current revision.
    pub(crate) fn sends_encoded(&self) -> bool {
        self.revision == Revision::CURRENT
    }

    /// One call carrying `body`, of `counts` (profiles, samples).
    pub(crate) async fn send(
        &self,
        body: Body,
        counts: (u64, u64),
    ) -> Result<ExportOutcome, ExportError> {
        // A batch received compressed as this exporter compresses, and
        // changed by nothing, goes as it came; bytes the batch or the
        // caller hold go without a copy into tonic's buffer.
        let prebuilt = match &body {
            Body::Batch(b) if self.sends_encoded() => b
                .compressed_as(self.compression.encoding())
                .map(|bytes| Prebuilt::Compressed(bytes.clone()))
                .or_else(|| b.encoded().map(|bytes| Prebuilt::Plain(bytes.clone()))),
            Body::Encoded(bytes) if self.sends_encoded() => Some(Prebuilt::Plain(bytes.clone())),
            _ => None,
        };
        let resp = self
            .call(|channel| {
                let (body, prebuilt) = (body.clone(), prebuilt.clone());
                async move {
                    let mut grpc = self.grpc(channel).await?;
                    let mut req = match prebuilt {
                        Some(p) => {
                            let mut req = tonic::Request::new(Body::Prebuilt);
                            req.extensions_mut().insert(p);
                            req
                        }
                        None => tonic::Request::new(body),
                    };
                    self.add_headers(req.metadata_mut())?;
                    // The form the request is written in, whatever `headers` says.
                    if let Some(v) = self.revision.development_version() {
                        req.metadata_mut().insert(
                            development_version::HEADER,
                            AsciiMetadataValue::from_static(v),
                        );
                    }
                    grpc.unary(
                        req,
                        PathAndQuery::from_static(EXPORT_PATH),
                        BatchCodec(self.revision),
                    )
                    .await
                    .map_err(Failed::Status)
                }
            })
            .await?;
        let Some(p) = resp.into_inner().partial_success else {
            return Ok(ExportOutcome::delivered());
        };
        if p.rejected_profiles > 0 || !p.error_message.is_empty() {
            // As the Collector: a partial success is logged, not retried.
            tracing::warn!(
                endpoint = %self.endpoint,
                rejected_profiles = p.rejected_profiles,
                message = %p.error_message,
                "partial success response"
            );
        }
        Ok(ExportOutcome::rejected(rejected_samples(
            &counts,
            p.rejected_profiles,
        )))
    }
}

/// Samples the peer rejected, in the runtime's unit. The response names how
/// many profiles, not which: each is counted at the batch's mean size.
pub fn rejected_samples((profiles, samples): &(u64, u64), rejected_profiles: i64) -> u64 {
    let rejected = u64::try_from(rejected_profiles).unwrap_or(0);
    if rejected == 0 || *profiles == 0 {
        return 0;
    }
    if rejected >= *profiles {
        return *samples;
    }
    (u128::from(*samples) * u128::from(rejected) / u128::from(*profiles)) as u64
}
