//! An in-process fake Kubernetes API server: what a watching client
//! (client-go's informers, kube-rs' watcher) sees of `pods`, `namespaces`
//! and `nodes`. It keeps objects and a history of events, each with a
//! `resourceVersion`; a list returns the objects and the current version;
//! a watch (`?watch=true&resourceVersion=N`) streams every event after N,
//! then new ones as the test makes them; a streaming list
//! (`sendInitialEvents=true`, client-go's WatchList) streams the objects,
//! a bookmark marking the end of them, then the new events. The test can break every open
//! watch (clients resume from the last version they saw), compact the
//! history (a watch from before it gets `410 Gone`, forcing a relist),
//! and forbid a resource (`403`). Requests are logged, so a test can see
//! that a client resumed or relisted. A kubeconfig file points clients at
//! it (`auth_type: kubeConfig`), profcol and the Collector alike.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode, Uri};
use serde_json::{json, Value};

/// One event of the history.
#[derive(Clone)]
struct Event {
    rv: u64,
    kind: &'static str,
    what: &'static str,
    object: Value,
}

#[derive(Default)]
struct State {
    rv: u64,
    /// `(kind, namespace/name)` to the object.
    objects: BTreeMap<(&'static str, String), Value>,
    history: Vec<Event>,
    /// A watch from a version before this one gets 410 Gone.
    oldest: u64,
    /// Bumped to end every open watch.
    generation: u64,
    forbidden: BTreeSet<&'static str>,
    /// Open watches send nothing (a client that misses events).
    held: bool,
}

struct Inner {
    state: Mutex<State>,
    changed: tokio::sync::watch::Sender<u64>,
    requests: Mutex<Vec<String>>,
}

pub struct FakeK8s {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeK8s {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn kind_of(plural: &str) -> Option<&'static str> {
    Some(match plural {
        "pods" => "Pod",
        "namespaces" => "Namespace",
        "nodes" => "Node",
        _ => return None,
    })
}

fn key_of(object: &Value) -> String {
    let m = &object["metadata"];
    format!(
        "{}/{}",
        m["namespace"].as_str().unwrap_or(""),
        m["name"].as_str().unwrap_or("")
    )
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    })
}

fn json_response(code: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The object as a metadata-only client asked for it
/// (`Accept: ...;as=PartialObjectMetadata...`).
fn as_partial(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object["metadata"].clone(),
    })
}

impl FakeK8s {
    pub async fn start() -> FakeK8s {
        let (changed, _) = tokio::sync::watch::channel(0);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                rv: 100,
                oldest: 0,
                ..State::default()
            }),
            changed,
            requests: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app_inner = inner.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let inner = app_inner.clone();
            async move { serve(inner, uri, headers).await }
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeK8s { addr, inner, task }
    }

    /// A kubeconfig naming this server, written into `dir`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n    token: fake-token\n",
                self.addr
            ),
        )
        .unwrap();
        path
    }

    fn record(&self, plural: &str, what: &'static str, mut object: Value) -> u64 {
        let kind = kind_of(plural).expect("pods, namespaces or nodes");
        let mut s = self.inner.state.lock().unwrap();
        s.rv += 1;
        let rv = s.rv;
        object["kind"] = json!(kind);
        object["apiVersion"] = json!("v1");
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let key = (kind, key_of(&object));
        let what = match what {
            "DELETED" => {
                s.objects.remove(&key);
                "DELETED"
            }
            _ if s.objects.contains_key(&key) => "MODIFIED",
            _ => "ADDED",
        };
        if what != "DELETED" {
            s.objects.insert(key, object.clone());
        }
        s.history.push(Event {
            rv,
            kind,
            what,
            object,
        });
        drop(s);
        self.inner.changed.send_modify(|v| *v += 1);
        rv
    }

    /// Adds or changes an object (`ADDED` or `MODIFIED`); its version.
    pub fn apply(&self, plural: &str, object: Value) -> u64 {
        self.record(plural, "APPLY", object)
    }

    /// Deletes an object (`DELETED` with its last state).
    pub fn delete(&self, plural: &str, namespace: &str, name: &str) -> u64 {
        let kind = kind_of(plural).unwrap();
        let last = self
            .inner
            .state
            .lock()
            .unwrap()
            .objects
            .get(&(kind, format!("{namespace}/{name}")))
            .cloned()
            .unwrap_or_else(|| panic!("no {plural} {namespace}/{name}"));
        self.record(plural, "DELETED", last)
    }

    /// Ends every open watch: clients reconnect from the last version.
    pub fn break_watches(&self) {
        self.inner.state.lock().unwrap().generation += 1;
        self.inner.changed.send_modify(|v| *v += 1);
    }

    /// Forgets the history up to now: a watch resuming from this version
    /// or an older one gets `410 Gone` and must list again.
    pub fn compact(&self) {
        let mut s = self.inner.state.lock().unwrap();
        s.oldest = s.rv + 1;
        s.history.clear();
    }

    /// Open watches stop sending (`true`) until released: what changes
    /// meanwhile reaches a client only by its next list or watch.
    pub fn hold(&self, held: bool) {
        self.inner.state.lock().unwrap().held = held;
        self.inner.changed.send_modify(|v| *v += 1);
    }

    /// Answers `403 Forbidden` to every request for `plural`.
    pub fn forbid(&self, plural: &str) {
        let kind = kind_of(plural).unwrap();
        self.inner.state.lock().unwrap().forbidden.insert(kind);
    }

    /// Stops forbidding `plural`.
    pub fn allow(&self, plural: &str) {
        let kind = kind_of(plural).unwrap();
        self.inner.state.lock().unwrap().forbidden.remove(kind);
    }

    /// The current resourceVersion.
    pub fn version(&self) -> u64 {
        self.inner.state.lock().unwrap().rv
    }

    /// Every request so far, `path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.inner.requests.lock().unwrap().clone()
    }
}

/// `GET /api/v1/nodes/<name>` or `/api/v1/namespaces/<name>` (the
/// `k8s_api` detector's reads of its node and of `kube-system`).
fn get_named(inner: &Inner, kind: &'static str, plural: &str, name: &str) -> Response<Body> {
    let s = inner.state.lock().unwrap();
    if s.forbidden.contains(kind) {
        return json_response(
            StatusCode::FORBIDDEN,
            &status(
                403,
                "Forbidden",
                &format!("{plural} \"{name}\" is forbidden"),
            ),
        );
    }
    match s.objects.get(&(kind, format!("/{name}"))) {
        Some(object) => json_response(StatusCode::OK, object),
        None => json_response(
            StatusCode::NOT_FOUND,
            &status(404, "NotFound", &format!("{plural} \"{name}\" not found")),
        ),
    }
}

/// `/api/v1/<plural>` or `/api/v1/namespaces/<ns>/<plural>`.
fn route(path: &str) -> Option<(Option<String>, &'static str)> {
    let rest = path.strip_prefix("/api/v1/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [plural] => Some((None, kind_of(plural)?)),
        ["namespaces", ns, "pods"] => Some((Some(ns.to_string()), "Pod")),
        _ => None,
    }
}

fn matches(object: &Value, namespace: &Option<String>, fields: &str) -> bool {
    if let Some(ns) = namespace {
        if object["metadata"]["namespace"].as_str() != Some(ns) {
            return false;
        }
    }
    // The one field selector the processor uses: spec.nodeName=<node>.
    for f in fields.split(',').filter(|f| !f.is_empty()) {
        if let Some(node) = f.strip_prefix("spec.nodeName=") {
            if object["spec"]["nodeName"].as_str().unwrap_or("") != node {
                return false;
            }
        }
    }
    true
}

async fn serve(inner: Arc<Inner>, uri: Uri, headers: HeaderMap) -> Response<Body> {
    inner.requests.lock().unwrap().push(
        uri.path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
    );
    let query: BTreeMap<String, String> = uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    if let Some(name) = uri.path().strip_prefix("/api/v1/nodes/") {
        return get_named(&inner, "Node", "nodes", name);
    }
    if let Some(name) = uri
        .path()
        .strip_prefix("/api/v1/namespaces/")
        .filter(|n| !n.contains('/'))
    {
        return get_named(&inner, "Namespace", "namespaces", name);
    }
    let Some((namespace, kind)) = route(uri.path()) else {
        return json_response(
            StatusCode::NOT_FOUND,
            &status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        );
    };
    let partial = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"));
    let fields = query.get("fieldSelector").cloned().unwrap_or_default();
    if inner.state.lock().unwrap().forbidden.contains(kind) {
        return json_response(
            StatusCode::FORBIDDEN,
            &status(403, "Forbidden", &format!("{kind} is forbidden")),
        );
    }
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    if !watch {
        let s = inner.state.lock().unwrap();
        let items: Vec<Value> = s
            .objects
            .iter()
            .filter(|((k, _), o)| *k == kind && matches(o, &namespace, &fields))
            .map(|(_, o)| if partial { as_partial(o) } else { o.clone() })
            .collect();
        let (api_version, list_kind) = if partial {
            ("meta.k8s.io/v1", "PartialObjectMetadataList".to_string())
        } else {
            ("v1", format!("{kind}List"))
        };
        return json_response(
            StatusCode::OK,
            &json!({
                "kind": list_kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": s.rv.to_string()},
                "items": items,
            }),
        );
    }
    let from: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(300));
    let initial_events = query.get("sendInitialEvents").map(String::as_str) == Some("true");
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(64);
    tokio::spawn(async move {
        let line = |v: Value| bytes::Bytes::from(format!("{v}\n"));
        let (generation, gone) = {
            let s = inner.state.lock().unwrap();
            (
                s.generation,
                !initial_events && from != 0 && from < s.oldest,
            )
        };
        if gone {
            let e = json!({"type": "ERROR", "object": status(410, "Expired", "too old resource version")});
            let _ = tx.send(Ok(line(e))).await;
            return;
        }
        let mut changed = inner.changed.subscribe();
        let mut sent = from.max(if from == 0 {
            inner.state.lock().unwrap().rv
        } else {
            0
        });
        // A streaming list (client-go's WatchList): the objects as ADDED
        // events, then a bookmark that ends the initial events.
        if initial_events {
            let (objects, rv) = {
                let s = inner.state.lock().unwrap();
                let objects: Vec<Value> = s
                    .objects
                    .iter()
                    .filter(|((k, _), o)| *k == kind && matches(o, &namespace, &fields))
                    .map(|(_, o)| o.clone())
                    .collect();
                (objects, s.rv)
            };
            for o in objects {
                let object = if partial { as_partial(&o) } else { o };
                if tx
                    .send(Ok(line(json!({"type": "ADDED", "object": object}))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            let (api_version, bookmark_kind) = if partial {
                ("meta.k8s.io/v1", "PartialObjectMetadata")
            } else {
                ("v1", kind)
            };
            let bookmark = json!({"type": "BOOKMARK", "object": {
                "kind": bookmark_kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": rv.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"}},
            }});
            if tx.send(Ok(line(bookmark))).await.is_err() {
                return;
            }
            sent = rv;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (events, broken) = {
                let s = inner.state.lock().unwrap();
                let held = s.held;
                let events: Vec<Event> = s
                    .history
                    .iter()
                    .filter(|e| {
                        !held
                            && e.rv > sent
                            && e.kind == kind
                            && matches(&e.object, &namespace, &fields)
                    })
                    .cloned()
                    .collect();
                (events, s.generation != generation)
            };
            if broken {
                return;
            }
            for e in events {
                sent = e.rv;
                let object = if partial {
                    as_partial(&e.object)
                } else {
                    e.object
                };
                if tx
                    .send(Ok(line(json!({"type": e.what, "object": object}))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            tokio::select! {
                r = changed.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("transfer-encoding", "chunked")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap()
}

/// A pod as the API server returns it, running on `node` with `ip`.
pub fn pod(namespace: &str, name: &str, uid: &str, ip: &str, node: &str) -> Value {
    json!({
        "metadata": {
            "name": name, "namespace": namespace, "uid": uid,
            "creationTimestamp": "2026-11-28T10:00:00Z",
            "labels": {"app": name},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": format!("registry.example/{name}:1.2.3")}],
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "startTime": "2026-11-28T10:00:01Z",
            "containerStatuses": [{
                "name": "main", "ready": true, "restartCount": 0,
                "image": format!("registry.example/{name}:1.2.3"),
                "imageID": "",
                "containerID": format!("containerd://{uid}-main"),
            }],
        },
    })
}
