//! Extension `profilez`: pages showing what each profiles pipeline carries
//! (services, sample types, producers, rates, refusals) and flame graphs of
//! the last windows per service and sample type, with a differential view
//! between two windows. A tap after each pipeline's processors feeds it
//! ([`tap`]), bounded and never making the pipeline wait.

pub mod clock;
pub mod config;
pub mod fold;
pub mod page;
pub mod render;
pub mod store;
pub mod tap;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use profcol_pipeline::component::{AuthConfig, Extension, ExtensionFactory, Observer};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::runtime::ExtensionContext;

pub use config::ProfilezConfig;
use fold::SeriesKey;
use store::Store;
use tap::{Shared, Tap};

pub struct ProfilezFactory;

impl ExtensionFactory for ProfilezFactory {
    fn type_name(&self) -> &'static str {
        "profilez"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Extension>, ConfigErrors> {
        let (c, ()) = cfg.decode_checked(|c: &ProfilezConfig| c.validate(cfg))?;
        Ok(Box::new(Profilez::new(c)))
    }
}

pub fn factory() -> Arc<dyn ExtensionFactory> {
    Arc::new(ProfilezFactory)
}

/// The tap is made with the extension (the pipelines are built before
/// extensions start) and fed from then on; the store is sized at start.
struct Profilez {
    cfg: ProfilezConfig,
    tap: Arc<LazyTap>,
}

/// The tap before start: batches seen before the store exists are not
/// shown (there are none: receivers start after extensions).
#[derive(Default)]
struct LazyTap(std::sync::OnceLock<Arc<Tap>>);

impl Observer for LazyTap {
    fn accepted(&self, pipeline: &str, batch: &Arc<profcol_model::ProfileBatch>) {
        if let Some(t) = self.0.get() {
            t.accepted(pipeline, batch)
        }
    }

    fn refused(&self, pipeline: &str, samples: u64, reason: &str) {
        if let Some(t) = self.0.get() {
            t.refused(pipeline, samples, reason)
        }
    }
}

impl Profilez {
    fn new(cfg: ProfilezConfig) -> Self {
        Self {
            cfg,
            tap: Arc::default(),
        }
    }
}

#[async_trait]
impl Extension for Profilez {
    fn endpoints(&self) -> Vec<String> {
        vec![self.cfg.endpoint.clone()]
    }

    fn observer(&self) -> Option<Arc<dyn Observer>> {
        Some(self.tap.clone())
    }

    fn authenticators(&self) -> Vec<(String, String)> {
        AuthConfig::references(&self.cfg.auth)
    }

    async fn start(
        self: Box<Self>,
        ctx: ExtensionContext,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let name = format!("extensions::{}", ctx.id);
        let auth = ctx.authenticators.resolve(self.cfg.auth.as_ref(), &name)?;
        let opened = profcol_pipeline::net::open(
            &name,
            &self.cfg.endpoint,
            self.cfg.tls.as_ref(),
            profcol_pipeline::net::ServerSettings::small(),
            &ctx.shutdown,
        )
        .await?;
        let max_bytes = usize::try_from(self.cfg.max_memory_mib << 20).unwrap_or(usize::MAX);
        let shared = Arc::new(Shared {
            telemetry: Some((ctx.telemetry.clone(), ctx.id.clone())),
            ..Shared::new(Store::new(
                self.cfg.window.get(),
                self.cfg.windows,
                max_bytes,
                ctx.budget.force(0),
            ))
        });
        let tap = Tap::start(shared.clone(), self.cfg.queue_size, self.cfg.max_cpu_share)?;
        let _ = self.tap.0.set(tap);
        let app = Router::new()
            .route("/", get(index))
            .route("/pipeline", get(pipeline))
            .route("/flamegraph", get(flamegraph))
            .route("/diff", get(diff))
            .with_state(shared)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let auth = auth.clone();
                    async move {
                        if let Some(a) = &auth {
                            if let Err(why) = a.authenticate(req.headers()) {
                                return (StatusCode::UNAUTHORIZED, why).into_response();
                            }
                        }
                        next.run(req).await
                    }
                },
            ));
        Ok(opened.serve(app, ctx.shutdown.clone()))
    }
}

async fn index(State(s): State<Arc<Shared>>) -> Html<String> {
    Html(page::index(&s.lock()))
}

#[derive(Deserialize)]
struct PipelineQuery {
    name: String,
}

async fn pipeline(State(s): State<Arc<Shared>>, Query(q): Query<PipelineQuery>) -> Response {
    let skipped = s.skipped(&q.name);
    match page::pipeline(&s.lock(), &q.name, skipped, Instant::now()) {
        Some(h) => Html(h).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no data seen in pipeline {:?}", q.name),
        )
            .into_response(),
    }
}

/// Which series, and how far back, in seconds: a flame graph covers the
/// windows of the last `secs` (all kept by default); a diff compares the
/// windows after the point `ago` seconds back with those of the `secs`
/// before it (both one window by default: the current window against the
/// one before).
#[derive(Deserialize)]
struct GraphQuery {
    pipeline: String,
    service: String,
    sample_type: String,
    secs: Option<f64>,
    ago: Option<f64>,
    /// A frame path (`main;module42`) to zoom into: the server draws its
    /// subtree, which shows frames too narrow to draw in the whole graph.
    zoom: Option<String>,
}

impl GraphQuery {
    fn key(&self) -> SeriesKey {
        SeriesKey {
            service: self.service.clone(),
            sample_type: self.sample_type.clone(),
        }
    }

    /// A query's seconds (none, negative or not finite: `default`).
    fn duration(v: Option<f64>, default: Duration) -> Duration {
        v.and_then(|s| Duration::try_from_secs_f64(s).ok())
            .unwrap_or(default)
    }

    /// The unit the values count, for the tooltips.
    fn unit(&self) -> &str {
        self.sample_type.split_once('/').map_or("", |(_, u)| u)
    }

    fn view(&self) -> render::View<'_> {
        render::View {
            zoom: self.zoom.as_deref().filter(|z| !z.is_empty()),
            served: true,
        }
    }
}

/// What a graph's subtitle adds when the tap skipped batches of the
/// windows it covers (`(seen, folded)` samples, [`Store::coverage`]): its
/// values count the batches folded only, a sample of the traffic.
fn skipped_note((seen, folded): (u64, u64)) -> String {
    if folded >= seen {
        return String::new();
    }
    format!(
        "; values count the batches folded: {folded} of {seen} samples ({:.1}%), the rest skipped under the tap's CPU budget or a full queue",
        100.0 * folded as f64 / seen as f64
    )
}

fn svg(body: Vec<u8>) -> Response {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        "image/svg+xml".parse().expect("valid"),
    );
    h.insert(header::CACHE_CONTROL, "no-store".parse().expect("valid"));
    (h, body).into_response()
}

/// Rendering is CPU work: off the async threads.
async fn render(f: impl FnOnce() -> Vec<u8> + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(body) => svg(body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn flamegraph(State(s): State<Arc<Shared>>, Query(q): Query<GraphQuery>) -> Response {
    let (stacks, span, coverage) = {
        let store = s.lock();
        let now = Instant::now();
        let kept = store.window() * u32::try_from(store.windows()).unwrap_or(u32::MAX);
        let span = GraphQuery::duration(q.secs, kept).min(kept);
        let (from, to) = (store.index_back(now, span), store.index(now));
        let stacks = store.stacks(&q.pipeline, &q.key(), from, to);
        let coverage = store.coverage(&q.pipeline, &q.key(), from, to);
        (stacks, span, coverage)
    };
    render(move || {
        let labels = render::Labels {
            title: &format!("{} {} ({})", q.service, q.sample_type, q.pipeline),
            subtitle: Some(format!(
                "the last {}{}",
                humantime::format_duration(whole_ms(span)),
                skipped_note(coverage)
            )),
            unit: q.unit(),
        };
        render::flamegraph_view(stacks.iter().map(|(k, v)| (&**k, *v)), &labels, &q.view())
    })
    .await
}

async fn diff(State(s): State<Arc<Shared>>, Query(q): Query<GraphQuery>) -> Response {
    let (before, after, ago, span, coverage) = {
        let store = s.lock();
        let now = Instant::now();
        let span = GraphQuery::duration(q.secs, store.window());
        let ago = GraphQuery::duration(q.ago, span);
        let key = q.key();
        // Windows (split, now] against (split - span, split].
        let split = store.index_back(now, ago);
        let after = store.stacks(
            &q.pipeline,
            &key,
            split + 1,
            store.index(now).max(split + 1),
        );
        let from = store.index_back(now, ago + span) + 1;
        let before = store.stacks(&q.pipeline, &key, from.min(split), split);
        let coverage = store.coverage(&q.pipeline, &key, from.min(split), store.index(now));
        (before, after, ago, span, coverage)
    };
    render(move || {
        let labels = render::Labels {
            title: &format!(
                "{} {} ({}): what changed",
                q.service, q.sample_type, q.pipeline
            ),
            subtitle: Some(format!(
                "the last {} against the {} before: red grew, blue shrank{}",
                humantime::format_duration(whole_ms(ago)),
                humantime::format_duration(whole_ms(span)),
                skipped_note(coverage)
            )),
            unit: q.unit(),
        };
        render::differential_view(
            before.iter().map(|(k, v)| (&**k, *v)),
            after.iter().map(|(k, v)| (&**k, *v)),
            &labels,
            &q.view(),
        )
    })
    .await
}

/// A duration to the millisecond, for titles.
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

#[cfg(test)]
mod tests;
