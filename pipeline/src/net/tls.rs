//! TLS for every listener (rustls with aws-lc): the server certificate
//! read again every `reload_interval` (a renewed certificate is served
//! without a restart), and, with `client_ca_file`, client certificates
//! required and verified (mutual TLS). HTTP/2 and HTTP/1.1 are offered by
//! ALPN, so gRPC and HTTP clients both work over one listener.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use crate::config::ServerTls;

/// What the files of a `tls:` section hold.
pub struct Loaded {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    client_roots: Option<RootCertStore>,
}

/// Reads and parses the certificate, key and client CA; on failure, the
/// key that failed and why.
pub fn load(cfg: &ServerTls) -> Result<Loaded, (&'static str, String)> {
    let read = |key: &'static str, file: &Option<String>, pem: &Option<String>| match (file, pem) {
        (_, Some(p)) => Ok(p.as_bytes().to_vec()),
        (Some(f), None) => std::fs::read(f).map_err(|e| (key, format!("cannot read {f}: {e}"))),
        (None, None) => Err((key, "is required".to_owned())),
    };
    let cert_key = if cfg.cert_pem.is_some() {
        "cert_pem"
    } else {
        "cert_file"
    };
    let key_key = if cfg.key_pem.is_some() {
        "key_pem"
    } else {
        "key_file"
    };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read(cert_key, &cfg.cert_file, &cfg.cert_pem)?)
            .collect::<Result<_, _>>()
            .map_err(|e| (cert_key, format!("not a PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err((cert_key, "holds no PEM certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key_key, &cfg.key_file, &cfg.key_pem)?)
        .map_err(|e| (key_key, format!("not a PEM private key: {e}")))?;
    let client_roots = match &cfg.client_ca_file {
        None => None,
        Some(f) => {
            let pem = std::fs::read(f)
                .map_err(|e| ("client_ca_file", format!("cannot read {f}: {e}")))?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert =
                    cert.map_err(|e| ("client_ca_file", format!("not a PEM certificate: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| ("client_ca_file", format!("not a CA certificate: {e}")))?;
            }
            if roots.is_empty() {
                return Err(("client_ca_file", "holds no PEM certificate".into()));
            }
            Some(roots)
        }
    };
    // Loaded and dropped: the Collector loads it as a server's root CAs,
    // which verify nothing, so it fails only on a file it cannot read.
    if let Some(f) = &cfg.ca_file {
        let pem = std::fs::read(f).map_err(|e| ("ca_file", format!("cannot read {f}: {e}")))?;
        let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| ("ca_file", format!("not a PEM certificate: {e}")))?;
        if certs.is_empty() {
            return Err(("ca_file", "holds no PEM certificate".into()));
        }
    }
    // The key must sign with this provider, and match what it is used for.
    certified(&chain, &key).map_err(|e| (key_key, e))?;
    Ok(Loaded {
        chain,
        key,
        client_roots,
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn certified(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, String> {
    let signer = provider()
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| format!("unusable private key: {e}"))?;
    let ck = CertifiedKey::new(chain.to_vec(), signer);
    ck.keys_match()
        .map_err(|e| format!("the key does not match the certificate: {e}"))?;
    Ok(Arc::new(ck))
}

/// Serves whatever certificate was read last.
#[derive(Debug)]
struct Reloading(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The rustls config of a listener; with `reload_interval`, a task reads
/// the certificate files again on that interval until `stop` (a bad new
/// file is logged and the old certificate kept).
pub fn server_config(
    cfg: &ServerTls,
    listener: &str,
    stop: CancellationToken,
) -> anyhow::Result<Arc<ServerConfig>> {
    let loaded = load(cfg).map_err(|(key, e)| anyhow::anyhow!("{listener}::tls::{key}: {e}"))?;
    let (min, max) = cfg
        .versions()
        .map_err(|e| anyhow::anyhow!("{listener}::tls: {e}"))?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(2, &rustls::version::TLS12), (3, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, p)| p)
            .collect();
    let resolver = Arc::new(Reloading(RwLock::new(
        certified(&loaded.chain, &loaded.key)
            .map_err(|e| anyhow::anyhow!("{listener}::tls: {e}"))?,
    )));
    let builder =
        ServerConfig::builder_with_provider(provider()).with_protocol_versions(&versions)?;
    let builder = match loaded.client_roots {
        Some(roots) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider()).build()?,
        ),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver.clone());
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    if let Some(every) = cfg.reload_interval.nonzero() {
        tokio::spawn(reload(
            cfg.clone(),
            listener.to_owned(),
            resolver,
            every,
            stop,
        ));
    }
    Ok(Arc::new(config))
}

async fn reload(
    cfg: ServerTls,
    listener: String,
    resolver: Arc<Reloading>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match load(&cfg).and_then(|l| certified(&l.chain, &l.key).map_err(|e| ("key_file", e))) {
            Ok(ck) => *resolver.0.write().unwrap_or_else(|e| e.into_inner()) = ck,
            Err((key, e)) => {
                crate::warn_limited!(listener = %listener, key, error = %e, "cannot reload the TLS certificate; serving the previous one")
            }
        }
    }
}
