use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use http::uri::PathAndQuery;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use profcol_pipeline::component::{ExportError, ExportOutcome, Exporter, ExporterContext};
use profcol_pipeline::proto::EXPORT_PATH;
use profcol_pipeline::ProfileBatch;

use super::classify::classify;
use super::codec::BatchCodec;
use super::compress::Compressing;
use super::config::{Compression, OtlpExporterConfig};

pub struct OtlpExporter {
    endpoint_cfg: Endpoint,
    // Made on first use: tonic needs a running Tokio reactor for it, and
    // `profcol validate` builds exporters without one.
    channel: OnceLock<Channel>,
    metadata: MetadataMap,
    compression: Compression,
    endpoint: String,
}

impl OtlpExporter {
    /// Checks the settings; the channel connects lazily on the first export,
    /// so a gateway that starts later is fine.
    pub fn new(cfg: OtlpExporterConfig) -> Result<Self, String> {
        let plaintext = cfg.plaintext();
        let bare = cfg
            .endpoint
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/');
        let uri = format!("{}://{bare}", if plaintext { "http" } else { "https" });
        let mut ep = Endpoint::from_shared(uri.clone())
            .map_err(|e| format!("invalid endpoint {:?}: {e}", cfg.endpoint))?
            .tcp_nodelay(true)
            .connect_timeout(cfg.timeout.get());
        if !plaintext {
            let mut tls = ClientTlsConfig::new().with_native_roots();
            if let Some(ca) = &cfg.tls.ca_file {
                let pem = std::fs::read(ca).map_err(|e| format!("tls::ca_file {ca}: {e}"))?;
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            if let (Some(c), Some(k)) = (&cfg.tls.cert_file, &cfg.tls.key_file) {
                let cert = std::fs::read(c).map_err(|e| format!("tls::cert_file {c}: {e}"))?;
                let key = std::fs::read(k).map_err(|e| format!("tls::key_file {k}: {e}"))?;
                tls = tls.identity(Identity::from_pem(cert, key));
            }
            if let Some(name) = &cfg.tls.server_name_override {
                tls = tls.domain_name(name.clone());
            }
            ep = ep.tls_config(tls).map_err(|e| format!("tls: {e}"))?;
        }
        let mut metadata = MetadataMap::new();
        for (k, v) in &cfg.headers {
            let key = AsciiMetadataKey::from_bytes(k.as_bytes())
                .map_err(|e| format!("headers::{k}: {e}"))?;
            let value: AsciiMetadataValue = v.parse().map_err(|e| format!("headers::{k}: {e}"))?;
            metadata.insert(key, value);
        }
        Ok(Self {
            endpoint_cfg: ep,
            channel: OnceLock::new(),
            metadata,
            compression: cfg.compression,
            endpoint: uri,
        })
    }
}

#[async_trait]
impl Exporter for OtlpExporter {
    async fn export(
        &self,
        batch: Arc<ProfileBatch>,
        _ctx: &ExporterContext,
    ) -> Result<ExportOutcome, ExportError> {
        let channel = self
            .channel
            .get_or_init(|| self.endpoint_cfg.connect_lazy());
        let mut grpc =
            tonic::client::Grpc::new(Compressing::new(channel.clone(), self.compression));
        grpc.ready()
            .await
            .map_err(|e| ExportError::retryable(format!("connecting to {}: {e}", self.endpoint)))?;
        let counts = (batch.profile_count(), batch.sample_count());
        let mut req = tonic::Request::new(batch);
        *req.metadata_mut() = self.metadata.clone();
        let resp = grpc
            .unary(req, PathAndQuery::from_static(EXPORT_PATH), BatchCodec)
            .await
            .map_err(|s| classify(&s))?;
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
pub(super) fn rejected_samples((profiles, samples): &(u64, u64), rejected_profiles: i64) -> u64 {
    let rejected = u64::try_from(rejected_profiles).unwrap_or(0);
    if rejected == 0 || *profiles == 0 {
        return 0;
    }
    if rejected >= *profiles {
        return *samples;
    }
    (u128::from(*samples) * u128::from(rejected) / u128::from(*profiles)) as u64
}
