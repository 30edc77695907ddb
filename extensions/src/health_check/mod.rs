//! Extension `health_check`, as in the Collector: `GET {path}` answers 200
//! when every component has started and 503 while starting or draining.

use std::sync::Arc;

use async_trait::async_trait;
use axum::{extract::State, http::StatusCode, routing::get, Json, Router};
use serde::{Deserialize, Serialize};

use profcol_pipeline::component::{Extension, ExtensionFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors, Duration, ServerTls};
use profcol_pipeline::runtime::{ExtensionContext, Health};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthCheckConfig {
    pub endpoint: String,
    pub path: String,
    /// Plain-text bodies instead of the JSON status, as in the Collector.
    pub response_body: Option<ResponseBody>,
    /// Serve over TLS (the receivers' `tls:` keys).
    pub tls: Option<ServerTls>,
    /// The Collector's pipeline check, which its v0.161.0 health_check
    /// reads and never uses: accepted, checked, no effect.
    pub check_collector_pipeline: Option<CheckCollectorPipeline>,
    /// The Collector's v2 keys (behind its
    /// `extension.healthcheck.useComponentStatus` gate): read so that they
    /// are refused with the reason.
    #[serde(skip_serializing)]
    pub http: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    pub grpc: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    pub component_health: Option<serde::de::IgnoredAny>,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self {
            endpoint: "localhost:13133".into(),
            path: "/".into(),
            response_body: None,
            tls: None,
            check_collector_pipeline: None,
            http: None,
            grpc: None,
            component_health: None,
        }
    }
}

/// `response_body`: the text answered when ready (200) and when not (503).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResponseBody {
    pub healthy: String,
    pub unhealthy: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckCollectorPipeline {
    pub enabled: bool,
    pub interval: Option<Duration>,
    pub exporter_failure_threshold: Option<i64>,
}

pub struct HealthCheckFactory;

impl ExtensionFactory for HealthCheckFactory {
    fn type_name(&self) -> &'static str {
        "health_check"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Extension>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &HealthCheckConfig| c.validate(cfg))?;
        Ok(Box::new(HealthCheck(c)))
    }
}

impl HealthCheckConfig {
    /// Checks every key, reporting all problems at once.
    pub fn validate(&self, cfg: &ComponentConfig) -> Result<(), ConfigErrors> {
        let mut errs = ConfigErrors::default();
        if let Err(e) = profcol_pipeline::net::endpoint::check(&self.endpoint) {
            errs.push(cfg.key_path("endpoint"), e);
        }
        if !self.path.starts_with('/') {
            errs.push(
                cfg.key_path("path"),
                format!("must start with '/', got {:?}", self.path),
            );
        }
        if let Some(t) = &self.tls {
            t.validate(&cfg.key_path("tls"), &mut errs);
        }
        for (key, set) in [
            ("http", self.http.is_some()),
            ("grpc", self.grpc.is_some()),
            ("component_health", self.component_health.is_some()),
        ] {
            if set {
                errs.push(
                    cfg.key_path(key),
                    "is not supported: it is the Collector's v2 health_check (behind its extension.healthcheck.useComponentStatus gate), which reports each component; profcol's answers for the whole collector at endpoint and path",
                );
            }
        }
        errs.into_result(())
    }
}

pub fn factory() -> Arc<dyn ExtensionFactory> {
    Arc::new(HealthCheckFactory)
}

struct HealthCheck(HealthCheckConfig);

#[derive(Serialize)]
struct Body {
    status: &'static str,
}

/// `response_body`'s text, or else the JSON status.
async fn status(
    State((h, body)): State<(Arc<Health>, Option<Arc<ResponseBody>>)>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let ready = h.is_ready();
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    match body {
        Some(b) if ready => (code, b.healthy.clone()).into_response(),
        Some(b) => (code, b.unhealthy.clone()).into_response(),
        None => json_status(ready).into_response(),
    }
}

fn json_status(ready: bool) -> (StatusCode, Json<Body>) {
    if ready {
        (
            StatusCode::OK,
            Json(Body {
                status: "Server available",
            }),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Body {
                status: "Server not available",
            }),
        )
    }
}

#[async_trait]
impl Extension for HealthCheck {
    fn endpoints(&self) -> Vec<String> {
        vec![self.0.endpoint.clone()]
    }

    async fn start(
        self: Box<Self>,
        ctx: ExtensionContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let opened = profcol_pipeline::net::open(
            &format!("extensions::{}", ctx.id),
            &self.0.endpoint,
            self.0.tls.as_ref(),
            profcol_pipeline::net::ServerSettings::small(),
            &ctx.shutdown,
        )
        .await?;
        let body = self.0.response_body.clone().map(Arc::new);
        let app = Router::new()
            .route(&self.0.path, get(status))
            .with_state((ctx.health.clone(), body));
        Ok(opened.serve(app, ctx.shutdown.clone()))
    }
}

#[cfg(test)]
mod tests {
    use profcol_pipeline::config::Kind;
    use profcol_pipeline::telemetry::Telemetry;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn create(yaml: &str) -> Result<HealthCheckConfig, String> {
        let cfg = ComponentConfig::from_yaml(Kind::Extension, "health_check", yaml)
            .map_err(|e| e.to_string())?;
        HealthCheckFactory.create(&cfg).map_err(|e| e.to_string())?;
        cfg.decode().map_err(|e| e.to_string())
    }

    #[test]
    fn decodes_defaults_exactly_and_names_bad_keys() {
        for yaml in ["{}", ""] {
            assert_eq!(create(yaml).unwrap(), HealthCheckConfig::default());
        }
        assert_eq!(
            HealthCheckConfig::default(),
            HealthCheckConfig {
                endpoint: "localhost:13133".into(),
                path: "/".into(),
                response_body: None,
                tls: None,
                check_collector_pipeline: None,
                http: None,
                grpc: None,
                component_health: None,
            }
        );
        assert_eq!(
            create("endpoint: 127.0.0.1:1\npath: /health").unwrap(),
            HealthCheckConfig {
                endpoint: "127.0.0.1:1".into(),
                path: "/health".into(),
                ..HealthCheckConfig::default()
            }
        );
        // The Collector's other keys: a body, TLS, and the pipeline check
        // it reads and never uses.
        let c = create(
            "response_body: {healthy: I'm OK, unhealthy: I'm not well}\ncheck_collector_pipeline: {enabled: false, interval: 5m, exporter_failure_threshold: 5}",
        )
        .unwrap();
        assert_eq!(
            c.response_body,
            Some(ResponseBody {
                healthy: "I'm OK".into(),
                unhealthy: "I'm not well".into()
            })
        );
        assert_eq!(
            create("tls: {cert_file: /nonexistent/c.pem, key_file: /nonexistent/k.pem}")
                .unwrap_err(),
            "extensions::health_check::tls::cert_file: cannot read /nonexistent/c.pem: No such file or directory (os error 2)"
        );
        assert_eq!(
            create("path: health").unwrap_err(),
            r#"extensions::health_check::path: must start with '/', got "health""#
        );
        // Every problem at once: the unknown key does not hide the checks.
        assert_eq!(
            create("grps: {}\nendpoint: '13133'\npath: health").unwrap_err(),
            "extensions::health_check: unknown field \"grps\", expected one of \"endpoint\", \"path\", \"response_body\", \"tls\", \"check_collector_pipeline\", \"http\", \"grpc\", \"component_health\"\n\
             extensions::health_check::endpoint: invalid endpoint \"13133\": expected host:port\n\
             extensions::health_check::path: must start with '/', got \"health\""
        );
        // The Collector's v2 form, refused with why.
        let err = create("http: {endpoint: 'localhost:13133'}\ncomponent_health: {}").unwrap_err();
        assert!(
            err.starts_with("extensions::health_check::http: is not supported: it is the Collector's v2 health_check")
                && err.contains("extensions::health_check::component_health: is not supported"),
            "{err}"
        );
    }

    /// 503 while starting, 200 once ready, 503 again while draining.
    #[tokio::test]
    async fn answers_503_until_ready_and_while_draining() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = HealthCheckConfig {
            endpoint: format!("127.0.0.1:{port}"),
            path: "/health".into(),
            ..HealthCheckConfig::default()
        };
        let health = Arc::new(Health::default());
        let shutdown = CancellationToken::new();
        let task = Box::new(HealthCheck(cfg))
            .start(ExtensionContext {
                id: "health_check".into(),
                shutdown: shutdown.clone(),
                telemetry: Arc::new(Telemetry::new()),
                health: health.clone(),
                authenticators: Default::default(),
                budget: profcol_model::memory::MemoryBudget::new(1 << 30),
            })
            .await
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/health");
        let get = || async {
            let r = reqwest::get(&url).await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        };
        assert_eq!(
            get().await,
            (503, r#"{"status":"Server not available"}"#.into())
        );
        health.set_ready(true);
        assert_eq!(
            get().await,
            (200, r#"{"status":"Server available"}"#.into())
        );
        health.set_ready(false);
        assert_eq!(get().await.0, 503);
        shutdown.cancel();
        task.await.unwrap();
    }

    /// `response_body`: its text instead of the JSON status.
    #[tokio::test]
    async fn answers_with_the_configured_bodies() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = HealthCheckConfig {
            endpoint: format!("127.0.0.1:{port}"),
            response_body: Some(ResponseBody {
                healthy: "I'm OK".into(),
                unhealthy: "I'm not well".into(),
            }),
            ..HealthCheckConfig::default()
        };
        let health = Arc::new(Health::default());
        let shutdown = CancellationToken::new();
        let task = Box::new(HealthCheck(cfg))
            .start(ExtensionContext {
                id: "health_check".into(),
                shutdown: shutdown.clone(),
                telemetry: Arc::new(Telemetry::new()),
                health: health.clone(),
                authenticators: Default::default(),
                budget: profcol_model::memory::MemoryBudget::new(1 << 30),
            })
            .await
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/");
        let get = || async {
            let r = reqwest::get(&url).await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        };
        assert_eq!(get().await, (503, "I'm not well".into()));
        health.set_ready(true);
        assert_eq!(get().await, (200, "I'm OK".into()));
        shutdown.cancel();
        task.await.unwrap();
    }

    /// `tls`: served over TLS with the receivers' keys; the Collector's
    /// `ca_file` of a server is read and has no effect.
    #[tokio::test]
    async fn serves_over_tls() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (c, k) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let yaml = format!(
            "endpoint: 127.0.0.1:{port}\ntls: {{cert_file: {c}, key_file: {k}, ca_file: {c}}}",
            c = c.display(),
            k = k.display()
        );
        let cfg = create(&yaml).unwrap();
        let health = Arc::new(Health::default());
        health.set_ready(true);
        let shutdown = CancellationToken::new();
        let task = Box::new(HealthCheck(cfg))
            .start(ExtensionContext {
                id: "health_check".into(),
                shutdown: shutdown.clone(),
                telemetry: Arc::new(Telemetry::new()),
                health: health.clone(),
                authenticators: Default::default(),
                budget: profcol_model::memory::MemoryBudget::new(1 << 30),
            })
            .await
            .unwrap();
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap()])
            .resolve("localhost", ([127, 0, 0, 1], port).into())
            .build()
            .unwrap();
        let r = client
            .get(format!("https://localhost:{port}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        shutdown.cancel();
        task.await.unwrap();
        // A ca_file that cannot be read fails, as it fails the Collector's
        // start.
        let bad = yaml.replace(
            &format!("ca_file: {}", c.display()),
            "ca_file: /nonexistent/ca.pem",
        );
        assert_eq!(
            create(&bad).unwrap_err(),
            "extensions::health_check::tls::ca_file: cannot read /nonexistent/ca.pem: No such file or directory (os error 2)"
        );
    }
}
