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
            endpoint: "0.0.0.0:13133".into(),
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
        let c: HealthCheckConfig = cfg.decode()?;
        let mut errs = ConfigErrors::default();
        if let Err(e) = profcol_receivers::endpoint::check(&c.endpoint) {
            errs.push(cfg.key_path("endpoint"), e);
        }
        if !c.path.starts_with('/') {
            errs.push(
                cfg.key_path("path"),
                format!("must start with '/', got {:?}", c.path),
            );
        }
        errs.into_result(Box::new(HealthCheck(c)) as Box<dyn Extension>)
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
        Ok(tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(ctx.shutdown.cancelled_owned())
                .await;
        }))
    }
}
