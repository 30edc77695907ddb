//! Extension `health_check`, as in the Collector: `GET {path}` answers 200
//! when every component has started and 503 while starting or draining.

use std::sync::Arc;

use async_trait::async_trait;
use axum::{extract::State, http::StatusCode, routing::get, Json, Router};
use serde::{Deserialize, Serialize};

use profcol_pipeline::component::{Extension, ExtensionFactory};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::runtime::{ExtensionContext, Health};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthCheckConfig {
    pub endpoint: String,
    pub path: String,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self {
            endpoint: "localhost:13133".into(),
            path: "/".into(),
        }
    }
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
        if let Err(e) = profcol_receivers::endpoint::check(&self.endpoint) {
            errs.push(cfg.key_path("endpoint"), e);
        }
        if !self.path.starts_with('/') {
            errs.push(
                cfg.key_path("path"),
                format!("must start with '/', got {:?}", self.path),
            );
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

async fn status(State(h): State<Arc<Health>>) -> (StatusCode, Json<Body>) {
    if h.is_ready() {
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
        let listener =
            profcol_receivers::endpoint::bind(&self.0.endpoint, &format!("extensions::{}", ctx.id))
                .await?;
        let app = Router::new()
            .route(&self.0.path, get(status))
            .with_state(ctx.health.clone());
        Ok(profcol_pipeline::net::spawn(
            &format!("extensions::{}", ctx.id),
            listener,
            app,
            profcol_pipeline::net::ServerSettings::small(),
            ctx.shutdown.clone(),
        ))
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
                path: "/".into()
            }
        );
        assert_eq!(
            create("endpoint: 127.0.0.1:1\npath: /health").unwrap(),
            HealthCheckConfig {
                endpoint: "127.0.0.1:1".into(),
                path: "/health".into()
            }
        );
        assert_eq!(
            create("path: health").unwrap_err(),
            r#"extensions::health_check::path: must start with '/', got "health""#
        );
        assert_eq!(
            create("check_collector_pipeline: {}").unwrap_err(),
            r#"extensions::health_check: unknown field "check_collector_pipeline", expected one of "endpoint", "path""#
        );
        // Every problem at once: the unknown key does not hide the checks.
        assert_eq!(
            create("check_collector_pipeline: {}\nendpoint: '13133'\npath: health").unwrap_err(),
            "extensions::health_check: unknown field \"check_collector_pipeline\", expected one of \"endpoint\", \"path\"\n\
             extensions::health_check::endpoint: invalid endpoint \"13133\": expected host:port\n\
             extensions::health_check::path: must start with '/', got \"health\""
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
        };
        let health = Arc::new(Health::default());
        let shutdown = CancellationToken::new();
        let task = Box::new(HealthCheck(cfg))
            .start(ExtensionContext {
                id: "health_check".into(),
                shutdown: shutdown.clone(),
                telemetry: Arc::new(Telemetry::new()),
                health: health.clone(),
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
}
