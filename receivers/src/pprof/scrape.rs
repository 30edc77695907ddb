//! One scrape: each profile of a target fetched under the timeout and the
//! body limit, converted by the pprof import the `pyroscope` receiver uses,
//! and handed to the one ingest path. A failure is logged, counted, and
//! the target is scraped again at the next interval.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::io::StreamReader;

use profcol_model::memory::Reservation;
use profcol_model::proto::{any_value::Value, AnyValue, KeyValue};

use super::config::{PprofReceiverConfig, ProfileKind};
use super::delta::{Delta, Deltas};
use crate::body::{BodyReader, RawReader};
use crate::ingest::{Ingest, Origin, Refusal};
use crate::pyroscope::convert::{Converter, SampleTypes, Window, Work};
use crate::pyroscope::labels::Described;
use profcol_pipeline::component::Authenticator;
use profcol_pipeline::config::scrape_targets::Target;

/// What every scrape of one receiver shares.
pub(super) struct Scraper {
    pub ingest: Ingest,
    pub client: reqwest::Client,
    /// `auth`'s extension: its credentials go with every request.
    pub auth: Option<Arc<dyn Authenticator>>,
    pub cfg: PprofReceiverConfig,
    /// `service.name` of targets whose labels name no `job`.
    pub job: String,
    /// Requests in flight over every target (`max_concurrent_scrapes`).
    pub permits: Semaphore,
    /// The cumulative profiles' baselines, unless `delta: false`.
    pub deltas: Option<Deltas>,
}

/// Why a scrape failed: the `outcome` it is counted under and the detail.
#[derive(Debug)]
pub(super) struct Failed {
    pub reason: &'static str,
    pub message: String,
}

impl From<Refusal> for Failed {
    fn from(r: Refusal) -> Self {
        Failed {
            reason: r.reason,
            message: r.message,
        }
    }
}

impl Scraper {
    /// Every profile of `t`, each when a permit is free.
    pub(super) async fn target(self: &Arc<Self>, t: &Target) {
        let d = Arc::new(describe(t, &self.job));
        let kinds = self.cfg.profiles.clone();
        futures::future::join_all(kinds.into_iter().map(|k| self.profile(t, k, d.clone()))).await;
    }

    async fn profile(&self, t: &Target, kind: ProfileKind, d: Arc<Described>) {
        let Ok(_permit) = self.permits.acquire().await else {
            return;
        };
        let url = t.url(&self.cfg.path_prefix, &kind.path(self.cfg.cpu_seconds()));
        let id = &self.ingest.id;
        let telemetry = &self.ingest.telemetry;
        match self.scrape(&url, &t.key(), kind, d).await {
            Ok(outcome) => {
                telemetry.scraper_scraped(id, kind.name(), 1);
                telemetry.receiver_item(id, kind.name(), outcome);
            }
            Err(f) => {
                telemetry.scraper_errored(id, kind.name(), 1);
                telemetry.receiver_item(id, kind.name(), f.reason);
                profcol_model::warn_limited!(receiver = %id, target = %t.instance(), profile = kind.name(), reason = f.reason, error = %f.message, "scrape failed; trying again at the next interval");
            }
        }
    }

    /// Fetches, converts and hands off one profile: `accepted`, `empty`
    /// (no sample: a mutex profile without contention), `baseline` (a
    /// first scrape of a cumulative profile, kept to subtract from the
    /// next) or `refused` (the pipelines did not take it; counted by the
    /// ingest path).
    async fn scrape(
        &self,
        url: &str,
        target: &str,
        kind: ProfileKind,
        d: Arc<Described>,
    ) -> Result<&'static str, Failed> {
        let from = crate::pyroscope::query::now_nanos();
        let timeout = self.cfg.timeout();
        let (bytes, memory) = tokio::time::timeout(timeout, self.fetch(url))
            .await
            .map_err(|_| Failed {
                reason: "timeout",
                message: format!("{url}: no whole answer within {timeout:?}"),
            })??;
        let until = crate::pyroscope::query::now_nanos();
        let limit = usize::try_from(self.cfg.max_response_body_size).unwrap_or(usize::MAX);
        let converted = profcol_model::cpu::run(move || {
            let mut work = Work { memory, limit };
            let mut c = Converter::new();
            c.pprof(
                &bytes,
                &d,
                &SampleTypes::default(),
                Window { from, until },
                &mut work,
            )?;
            Ok::<_, Refusal>((c.finish(), work.memory))
        })
        .await
        .map_err(|r| Failed {
            message: format!("{url}: {}", r.message),
            ..Failed::from(r)
        })?;
        let (Some(mut data), memory) = converted else {
            return Ok("empty");
        };
        if let Some(deltas) = &self.deltas {
            let delta = deltas.apply(target, kind, &mut data);
            if delta == Delta::Restarted {
                tracing::info!(receiver = %self.ingest.id, url, "the counts of a cumulative profile went down (the target restarted): sent whole, the new baseline");
            }
            if profcol_model::profiles(&data.resource_profiles)
                .next()
                .is_none()
            {
                return Ok(if delta == Delta::Baseline {
                    "baseline"
                } else {
                    "empty"
                });
            }
        }
        let origin = Origin {
            transport: "http",
            ..Origin::default()
        };
        match self.ingest.converted(data, memory, origin).await {
            Ok(_) => Ok("accepted"),
            Err(_) => Ok("refused"),
        }
    }

    /// The answer's body, decompressed as its `Content-Encoding` says,
    /// stopped at `max_response_body_size` and held in the memory budget.
    async fn fetch(&self, url: &str) -> Result<(Vec<u8>, Reservation), Failed> {
        let mut req = self.client.get(url);
        if let Some(a) = &self.auth {
            // Asked for on every request: a token file the extension
            // reloads takes effect at the next scrape.
            let headers = a.client_headers().map_err(|e| Failed {
                reason: "auth",
                message: format!("{url}: auth: {e}"),
            })?;
            for (k, v) in headers {
                req = req.header(k, v);
            }
        }
        let resp = req.send().await.map_err(|e| Failed {
            reason: "unreachable",
            message: format!("{url}: {}", error_chain(&e)),
        })?;
        let status = resp.status();
        if !status.is_success() {
            // A line of the answer says why (Go's "profile duration
            // exceeds server's WriteTimeout", say); no more is read.
            let mut resp = resp;
            let head = match tokio::time::timeout(Duration::from_secs(1), resp.chunk()).await {
                Ok(Ok(Some(c))) => String::from_utf8_lossy(&c[..c.len().min(200)]).into_owned(),
                _ => String::new(),
            };
            return Err(Failed {
                reason: "http_status",
                message: format!("{url} answered {status}: {}", head.trim()),
            });
        }
        let encoding = resp
            .headers()
            .get(http::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let chunks = futures::stream::unfold(resp, |mut r| async move {
            match r.chunk().await {
                Ok(Some(c)) => Some((Ok::<Bytes, std::io::Error>(c), r)),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e)), r)),
            }
        });
        let raw: RawReader = Box::new(StreamReader::new(Box::pin(chunks)));
        let limit = self.cfg.max_response_body_size;
        let read = async {
            BodyReader::from_reader(raw, encoding.as_deref(), limit, self.ingest.output.budget())?
                .finish()
                .await
        };
        read.await.map_err(|e| {
            let r = Refusal::from(e);
            let message = if r.reason == "too_large" {
                format!(
                    "{url}: the answer exceeds max_response_body_size ({limit} bytes); cut there"
                )
            } else {
                format!("{url}: {}", r.message)
            };
            Failed {
                reason: r.reason,
                message,
            }
        })
    }
}

/// An error with its causes (reqwest's own says only "error sending
/// request").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The resource of a target's profiles, as the Collector's `prometheus`
/// receiver makes it of a scrape target: `service.name` from the job,
/// `service.instance.id` from the instance, `server.address`,
/// `server.port`, `url.scheme`; then the target's labels (a `job` label
/// names the job).
pub(super) fn describe(t: &Target, job: &str) -> Described {
    let text = |v: &str| AnyValue {
        value: Some(Value::StringValue(v.to_owned())),
    };
    let kv = |k: &str, value: AnyValue| KeyValue {
        key: k.to_owned(),
        value: Some(value),
        ..Default::default()
    };
    let job = t.labels.get("job").map_or(job, String::as_str);
    let host = t.host.trim_start_matches('[').trim_end_matches(']');
    let mut resource = vec![
        kv("service.name", text(job)),
        kv("service.instance.id", text(&t.instance())),
        kv("server.address", text(host)),
        kv(
            "server.port",
            AnyValue {
                value: Some(Value::IntValue(i64::from(t.port))),
            },
        ),
        kv("url.scheme", text(&t.scheme)),
    ];
    for (k, v) in &t.labels {
        if k == "job" {
            continue;
        }
        match resource.iter_mut().find(|a| a.key == *k) {
            Some(a) => a.value = Some(text(v)),
            None => resource.push(kv(k, text(v))),
        }
    }
    Described {
        resource,
        ..Default::default()
    }
}
