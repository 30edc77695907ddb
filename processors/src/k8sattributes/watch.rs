//! The background tasks: a watch of pods (and of namespaces and nodes
//! when the rules need them) through kube-runtime's watcher, which lists,
//! then watches from the list's `resourceVersion`, resumes a broken watch
//! from the last version it saw, and relists on `410 Gone`. Errors (API
//! down, slow, `403`) are counted and retried with backoff; batches never
//! wait for any of it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod as ApiPod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use tokio_util::sync::CancellationToken;

use profcol_pipeline::telemetry::Telemetry;

use super::cache::{Applied, Cache};
use super::client::client;
use super::config::From;
use super::pod::{meta_from_api, pod_from_api};

/// How often deleted pods past their grace period are removed.
const EXPIRE_EVERY: Duration = Duration::from_secs(1);

pub(super) struct Watches {
    pub cache: Arc<Cache>,
    pub telemetry: Arc<Telemetry>,
    pub id: String,
}

impl Watches {
    /// Spawns every task on the current runtime; they stop with `stop`.
    pub(super) fn spawn(self, stop: CancellationToken) {
        let me = Arc::new(self);
        tokio::spawn(run(me, stop));
    }
}

async fn run(w: Arc<Watches>, stop: CancellationToken) {
    // A client that cannot be made (no service account, a bad kubeconfig)
    // is retried as a failing watch is: the pipeline runs on meanwhile.
    let mut backoff = Duration::from_millis(500);
    let client = loop {
        match client(&w.cache.plan.auth).await {
            Ok(c) => break c,
            Err(e) => {
                w.telemetry.k8s_watch_error(&w.id, "client", &e.to_string());
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    };
    let plan = w.cache.plan.clone();
    let mut tasks = tokio::task::JoinSet::new();
    if plan.watches_namespaces() {
        tasks.spawn(watch_meta(w.clone(), client.clone(), false));
    }
    if plan.watches_nodes() {
        tasks.spawn(watch_meta(w.clone(), client.clone(), true));
    }
    tasks.spawn(watch_pods(w.clone(), client));
    tasks.spawn(expire(w.clone()));
    stop.cancelled().await;
    tasks.abort_all();
}

async fn expire(w: Arc<Watches>) {
    let grace = w.cache.plan.delete_grace;
    let mut tick = tokio::time::interval(EXPIRE_EVERY);
    loop {
        tick.tick().await;
        w.cache.expire(std::time::Instant::now(), grace);
    }
}

fn config(selector_labels: &str, selector_fields: &str) -> watcher::Config {
    let mut c = watcher::Config::default();
    if !selector_labels.is_empty() {
        c = c.labels(selector_labels);
    }
    if !selector_fields.is_empty() {
        c = c.fields(selector_fields);
    }
    c
}

async fn watch_pods(w: Arc<Watches>, client: Client) {
    let plan = w.cache.plan.clone();
    let api: Api<ApiPod> = if plan.namespace.is_empty() {
        Api::all(client)
    } else {
        Api::namespaced(client, &plan.namespace)
    };
    let cfg = config(&plan.label_selector, &plan.field_selector);
    let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
    let mut listed: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                w.telemetry.k8s_watch_error(&w.id, "pods", &e.to_string());
                continue;
            }
        };
        match event {
            Event::Init => listed = Some(HashSet::new()),
            Event::InitApply(p) | Event::Apply(p) => {
                if let Some(l) = listed.as_mut() {
                    l.insert(p.metadata.uid.clone().unwrap_or_default());
                }
                let pod = pod_from_api(&plan, &p, cluster_uid(&w.cache).as_deref());
                match w.cache.upsert_pod(pod) {
                    Applied::Added => w.telemetry.k8s_watcher(&w.id, "pod_added"),
                    Applied::Updated => w.telemetry.k8s_watcher(&w.id, "pod_updated"),
                    Applied::Refused => w.telemetry.k8s_cache_refused(&w.id, "pods"),
                }
            }
            Event::Delete(p) => {
                w.telemetry.k8s_watcher(&w.id, "pod_deleted");
                let uid = p.metadata.uid.clone().unwrap_or_default();
                let fallback = pod_from_api(&plan, &p, None);
                w.cache.forget_pod(&uid, fallback);
            }
            Event::InitDone => {
                if let Some(l) = listed.take() {
                    for _ in 0..w.cache.forget_pods_not_in(&l) {
                        w.telemetry.k8s_watcher(&w.id, "pod_deleted");
                    }
                }
                w.cache.set_synced();
            }
        }
    }
}

fn cluster_uid(cache: &Cache) -> Option<String> {
    if !cache.plan.rules.cluster_uid {
        return None;
    }
    cache
        .read()
        .namespaces
        .get("kube-system")
        .map(|m| m.uid.clone())
}

async fn watch_meta(w: Arc<Watches>, client: Client, node: bool) {
    let plan = w.cache.plan.clone();
    let (kind, from) = if node {
        ("node", From::Node)
    } else {
        ("namespace", From::Namespace)
    };
    let mut stream = if node {
        let api: Api<Node> = Api::all(client);
        watcher::metadata_watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|r| r.map(|e| e.map_meta()))
            .boxed()
    } else {
        let api: Api<Namespace> = Api::all(client);
        watcher::metadata_watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|r| r.map(|e| e.map_meta()))
            .boxed()
    };
    let mut listed: Option<HashSet<String>> = None;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                w.telemetry
                    .k8s_watch_error(&w.id, &format!("{kind}s"), &e.to_string());
                continue;
            }
        };
        match event {
            Event::Init => listed = Some(HashSet::new()),
            Event::InitApply(m) | Event::Apply(m) => {
                let name = m.name.clone().unwrap_or_default();
                if let Some(l) = listed.as_mut() {
                    l.insert(name.clone());
                }
                let meta = meta_from_api(&plan, &m, from);
                match w.cache.upsert_meta(node, name, meta) {
                    Applied::Added => w.telemetry.k8s_watcher(&w.id, &format!("{kind}_added")),
                    Applied::Updated => w.telemetry.k8s_watcher(&w.id, &format!("{kind}_updated")),
                    Applied::Refused => w.telemetry.k8s_cache_refused(&w.id, kind),
                }
            }
            Event::Delete(m) => {
                w.telemetry.k8s_watcher(&w.id, &format!("{kind}_deleted"));
                w.cache.delete_meta(node, m.name.as_deref().unwrap_or(""));
            }
            Event::InitDone => {
                if let Some(l) = listed.take() {
                    w.cache.forget_meta_not_in(node, &l);
                }
            }
        }
    }
}

trait MapMeta {
    type Out;
    fn map_meta(self) -> Self::Out;
}

impl<K> MapMeta for Event<kube::core::PartialObjectMeta<K>> {
    type Out = Event<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>;
    fn map_meta(self) -> Self::Out {
        match self {
            Event::Apply(m) => Event::Apply(m.metadata),
            Event::Delete(m) => Event::Delete(m.metadata),
            Event::Init => Event::Init,
            Event::InitApply(m) => Event::InitApply(m.metadata),
            Event::InitDone => Event::InitDone,
        }
    }
}
