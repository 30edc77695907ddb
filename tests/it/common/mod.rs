//! Test peers that profcol did not write: an OTLP sink built on the generated
//! tonic server, and helpers to send recorded requests.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::profiles::v1development::{
    profiles_service_client::ProfilesServiceClient,
    profiles_service_server::{ProfilesService, ProfilesServiceServer},
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use prost::Message;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status};

pub mod fake_k8s;
pub mod go;
pub mod java;
pub mod kafka;
pub mod otelcol;
pub mod seen;
pub mod webdriver;

/// A port on 127.0.0.1 that refuses connections (a peer that is down):
/// bound but never listening, so nothing else can take it while the
/// returned socket lives.
pub fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

pub use profcol_model::testing::fixture;

pub fn request(rel: &str) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest::decode(fixture(rel).as_slice()).unwrap()
}

/// What the sink answers to the next calls; when empty it accepts.
#[derive(Clone, Debug)]
pub enum Answer {
    Fail(Code, &'static str),
    /// `RESOURCE_EXHAUSTED` with a `RetryInfo` of this many milliseconds.
    Throttle(u64),
    /// Accepts, but answers that this many profiles were rejected.
    Partial(i64, &'static str),
    /// Accepts after holding the call this many milliseconds.
    Hold(u64),
}

#[derive(Default)]
struct SinkState {
    received: Vec<ExportProfilesServiceRequest>,
    /// gRPC metadata of every call.
    metadata: Vec<tonic::metadata::MetadataMap>,
    answers: VecDeque<Answer>,
    calls: usize,
    call_times: Vec<std::time::Instant>,
    /// Answer UNAVAILABLE until then.
    down_until: Option<std::time::Instant>,
    /// Keep only counts, not the requests (for load).
    counting_only: bool,
    /// Observations in the requests accepted.
    samples: u64,
}

/// A collector with one `receiver` (listening on port 0, recording to
/// `record_to` if given) sending to `sink` over OTLP/gRPC.
pub fn receiver_to_sink(
    receiver: &str,
    sink: &Sink,
    record_to: Option<&std::path::Path>,
) -> String {
    let record = record_to.map_or(String::new(), |d| {
        format!("\n    record_to: {}", d.display())
    });
    format!(
        r#"
receivers:
  {receiver}:
    endpoint: 127.0.0.1:0{record}
exporters:
  otlp:
    endpoint: 127.0.0.1:{}
    tls: {{insecure: true}}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [{receiver}], exporters: [otlp]}}
"#,
        sink.addr.port()
    )
}

/// An OTLP profiles gRPC server that stores every request it accepts.
#[derive(Clone)]
pub struct Sink {
    state: Arc<Mutex<SinkState>>,
    pub addr: SocketAddr,
    stop: CancellationToken,
}

struct SinkSvc(Arc<Mutex<SinkState>>);

#[tonic::async_trait]
impl ProfilesService for SinkSvc {
    async fn export(
        &self,
        req: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        let answer = {
            let mut s = self.0.lock().unwrap();
            s.calls += 1;
            if s.down_until.is_some_and(|t| std::time::Instant::now() < t) {
                return Err(Status::unavailable("down for now"));
            }
            if !s.counting_only {
                s.call_times.push(std::time::Instant::now());
                s.metadata.push(req.metadata().clone());
            }
            s.answers.pop_front()
        };
        if let Some(Answer::Hold(ms)) = answer {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let mut s = self.0.lock().unwrap();
        match answer {
            Some(Answer::Fail(code, msg)) => Err(Status::new(code, msg)),
            Some(Answer::Throttle(ms)) => {
                use tonic_types::{ErrorDetails, StatusExt};
                let details =
                    ErrorDetails::with_retry_info(Some(std::time::Duration::from_millis(ms)));
                Err(Status::with_error_details(
                    Code::ResourceExhausted,
                    "slow down",
                    details,
                ))
            }
            Some(Answer::Partial(rejected_profiles, msg)) => {
                s.received.push(req.into_inner());
                Ok(Response::new(ExportProfilesServiceResponse {
                    partial_success: Some(ExportProfilesPartialSuccess {
                        rejected_profiles,
                        error_message: msg.into(),
                    }),
                }))
            }
            None | Some(Answer::Hold(_)) => {
                let req = req.into_inner();
                s.samples += profcol_model::profiles(&req.resource_profiles)
                    .map(profcol_model::profile_sample_count)
                    .sum::<u64>();
                if !s.counting_only {
                    s.received.push(req);
                }
                Ok(Response::new(ExportProfilesServiceResponse::default()))
            }
        }
    }
}

impl Sink {
    /// On a port of its own: bound here, so no other test can take it
    /// between choosing and binding.
    pub async fn start() -> Sink {
        Self::start_on(0).await
    }

    pub async fn start_on(port: u16) -> Sink {
        let state = Arc::new(Mutex::new(SinkState::default()));
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let svc = ProfilesServiceServer::new(SinkSvc(state.clone()))
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .accept_compressed(tonic::codec::CompressionEncoding::Zstd)
            .max_decoding_message_size(256 << 20);
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let s = stop.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(incoming, s.cancelled_owned())
                .await
                .unwrap();
        });
        Sink { state, addr, stop }
    }

    /// Answers UNAVAILABLE for `d` from now on.
    pub fn down_for(&self, d: std::time::Duration) {
        self.state.lock().unwrap().down_until = Some(std::time::Instant::now() + d);
    }

    /// Keeps counts only, not the requests.
    pub fn counting_only(&self) {
        self.state.lock().unwrap().counting_only = true;
    }

    /// Observations in the requests accepted so far.
    pub fn samples(&self) -> u64 {
        self.state.lock().unwrap().samples
    }

    pub fn answer_next(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state.lock().unwrap().answers.extend(answers);
    }

    pub fn received(&self) -> Vec<ExportProfilesServiceRequest> {
        self.state.lock().unwrap().received.clone()
    }

    pub fn metadata(&self) -> Vec<tonic::metadata::MetadataMap> {
        self.state.lock().unwrap().metadata.clone()
    }

    pub fn calls(&self) -> usize {
        self.state.lock().unwrap().calls
    }

    /// When each call arrived.
    pub fn call_times(&self) -> Vec<std::time::Instant> {
        self.state.lock().unwrap().call_times.clone()
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }
}

pub async fn client(port: u16) -> ProfilesServiceClient<tonic::transport::Channel> {
    client_at(SocketAddr::from(([127, 0, 0, 1], port))).await
}

pub async fn client_at(addr: SocketAddr) -> ProfilesServiceClient<tonic::transport::Channel> {
    ProfilesServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .max_encoding_message_size(usize::MAX)
}

/// Sends a recorded Sentry request (`NNNN.meta.json` beside `NNNN.body.bin`,
/// `recording` being the path without the extensions) as its SDK did: the
/// raw body with its headers, in arrival order. Given `body`, that envelope
/// is sent instead, uncompressed, with the recorded headers.
pub async fn replay_sentry(port: u16, recording: &std::path::Path, body: Option<Vec<u8>>) {
    let read = |ext: &str| {
        let mut name = recording.as_os_str().to_owned();
        name.push(ext);
        std::fs::read(&name).unwrap_or_else(|e| panic!("{name:?}: {e}"))
    };
    let meta: serde_json::Value = serde_json::from_slice(&read(".meta.json")).unwrap();
    let mut url = format!("http://127.0.0.1:{port}{}", meta["path"].as_str().unwrap());
    let query = meta["query"].as_str().unwrap_or("");
    if !query.is_empty() {
        url = format!("{url}?{query}");
    }
    let mut skip = vec!["host", "content-length", "transfer-encoding", "connection"];
    if body.is_some() {
        skip.push("content-encoding");
    }
    let body = body.unwrap_or_else(|| read(".body.bin"));
    let mut req = reqwest::Client::new().post(url).body(body);
    for pair in meta["headers"].as_array().unwrap() {
        let (k, v) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        if !skip.contains(&k.to_ascii_lowercase().as_str()) {
            req = req.header(k, v);
        }
    }
    let resp = req.send().await.unwrap();
    assert!(
        resp.status().is_success(),
        "{}: {}",
        recording.display(),
        resp.status()
    );
}

/// [`replay_sentry`] of a recording under the fixtures directory.
pub async fn replay_fixture(port: u16, recording: &str, body: Option<Vec<u8>>) {
    replay_sentry(
        port,
        &profcol_model::testing::fixtures_dir().join(recording),
        body,
    )
    .await
}

/// Runs `f` on a thread of its own and fails, naming `what`, if it has not
/// finished within `limit`: a runaway loop fails the test instead of
/// hanging the suite.
pub fn within(limit: std::time::Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished within {limit:?}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// The `profcol` binary of this build.
pub fn profcol() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_profcol"))
}

/// A running `profcol` with its stdout/stderr read on threads (a full pipe
/// would block it). Killed when dropped still running, so that a failing
/// test leaves no process behind.
pub struct Running {
    child: std::process::Child,
    out: Option<std::thread::JoinHandle<std::io::Result<u64>>>,
    err: Option<std::thread::JoinHandle<std::io::Result<String>>>,
    /// `--ready-file` (in a directory of its own) and what it last listed.
    ready: Option<(tempfile::TempDir, std::path::PathBuf)>,
    listeners: BTreeMap<String, SocketAddr>,
}

/// Where the listeners of a collector are bound, by name
/// (`receivers::otlp::protocols::grpc`): configs here listen on port 0,
/// and the test asks which port each got.
pub trait Ports {
    fn addr(&self, listener: &str) -> SocketAddr;

    fn port(&self, listener: &str) -> u16 {
        self.addr(listener).port()
    }
    fn grpc_port(&self) -> u16 {
        self.port("receivers::otlp::protocols::grpc")
    }
    fn http_port(&self) -> u16 {
        self.port("receivers::otlp::protocols::http")
    }
    fn metrics_port(&self) -> u16 {
        self.port("service::telemetry::metrics")
    }
    fn health_port(&self) -> u16 {
        self.port("extensions::health_check")
    }
}

impl Ports for profcol_pipeline::runtime::RunningService {
    fn addr(&self, listener: &str) -> SocketAddr {
        self.address(listener)
            .unwrap_or_else(|| panic!("no listener {listener}; listening: {:?}", self.listeners()))
    }
}

impl Ports for Running {
    fn addr(&self, listener: &str) -> SocketAddr {
        *self
            .listeners
            .get(listener)
            .unwrap_or_else(|| panic!("no listener {listener}; listening: {:?}", self.listeners))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Running {
    pub fn start(args: &[&std::ffi::OsStr]) -> Running {
        Self::spawn(profcol().args(args))
    }

    /// Starts `cmd` (a [`profcol`] command) with its output captured.
    pub fn spawn(cmd: &mut std::process::Command) -> Running {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let err = std::thread::spawn(move || {
            let mut logs = String::new();
            stderr.read_to_string(&mut logs).map(|_| logs)
        });
        Running {
            child,
            out: Some(out),
            err: Some(err),
            ready: None,
            listeners: BTreeMap::new(),
        }
    }

    /// Starts `cmd` (a [`profcol`] command running a collector) with
    /// `--ready-file` and waits until it is ready, its listeners' addresses
    /// read ([`Ports`]); fails the test with the logs if it exits first or
    /// is not ready within 60 s.
    pub async fn ready(cmd: &mut std::process::Command) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready");
        let mut p = Self::spawn(cmd.arg("--ready-file").arg(&path));
        p.ready = Some((dir, path));
        p.reread_when(|_| true).await;
        p
    }

    /// Reads the ready file again once `done` holds for what it lists (a
    /// reload rewrote it); fails as [`Running::ready`] does.
    pub async fn reread_when(&mut self, done: impl Fn(&BTreeMap<String, SocketAddr>) -> bool) {
        let path = self
            .ready
            .as_ref()
            .expect("started with Running::ready")
            .1
            .clone();
        let started = std::time::Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let listeners: BTreeMap<String, SocketAddr> = text
                    .lines()
                    .filter_map(|l| {
                        let (name, addr) = l.split_once(' ')?;
                        Some((name.to_owned(), addr.parse().ok()?))
                    })
                    .collect();
                if done(&listeners) {
                    self.listeners = listeners;
                    return;
                }
            }
            if !self.is_running() {
                let (code, logs) = self.finish(std::time::Duration::from_secs(5)).await;
                panic!("exited before it was ready: {code:?}\n{logs}");
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                self.signal("KILL");
                let (code, logs) = self.finish(std::time::Duration::from_secs(10)).await;
                panic!("not ready within 60 s; exit {code:?}\n{logs}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak and current resident memory of the process, in MiB
    /// (`VmHWM`, `VmRSS` from `/proc`).
    pub fn memory_mib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
                / 1024
        };
        (field("VmHWM:"), field("VmRSS:"))
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits until its health_check on `port` answers 200; fails the test
    /// with the process's logs if it exits or is not healthy within 30 s.
    pub async fn healthy(mut self, port: u16) -> Running {
        let started = std::time::Instant::now();
        while health_status(port).await != Some(200) {
            if !self.is_running() {
                let (code, logs) = self.wait(std::time::Duration::from_secs(5)).await;
                panic!("exited before it became healthy: {code:?}\n{logs}");
            }
            if started.elapsed() > std::time::Duration::from_secs(30) {
                self.fail("never became healthy").await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        self
    }

    /// [`Running::healthy`], or the logs if it exits first.
    pub async fn healthy_or_exit(mut self, port: u16) -> Result<Running, String> {
        let started = std::time::Instant::now();
        while health_status(port).await != Some(200) {
            if !self.is_running() {
                let (code, logs) = self.finish(std::time::Duration::from_secs(5)).await;
                return Err(format!("exit {code:?}\n{logs}"));
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                self.fail("never became healthy").await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok(self)
    }

    /// Kills the process and fails the test with its logs.
    pub async fn fail(self, what: &str) -> ! {
        self.signal("KILL");
        let (code, logs) = self.wait(std::time::Duration::from_secs(10)).await;
        panic!("{what}; exit {code:?}\n{logs}");
    }

    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for exit (polling, so this runtime stays free to answer the
    /// server's GOAWAY); returns the status and the logs.
    pub async fn wait(mut self, limit: std::time::Duration) -> (std::process::ExitStatus, String) {
        self.finish(limit).await
    }

    async fn finish(&mut self, limit: std::time::Duration) -> (std::process::ExitStatus, String) {
        let started = std::time::Instant::now();
        let code = loop {
            if let Some(code) = self.child.try_wait().unwrap() {
                break code;
            }
            if started.elapsed() > limit {
                self.child.kill().unwrap();
                panic!("still running {limit:?} after the signal");
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let (out, err) = (self.out.take(), self.err.take());
        out.expect("waited once").join().unwrap().unwrap();
        (code, err.expect("waited once").join().unwrap().unwrap())
    }
}

pub async fn health_status(port: u16) -> Option<u16> {
    let r = reqwest::get(format!("http://127.0.0.1:{port}/"))
        .await
        .ok()?;
    Some(r.status().as_u16())
}

/// Waits until health_check answers 200 (the process needs a moment to bind).
pub async fn wait_healthy(port: u16) {
    let started = std::time::Instant::now();
    while health_status(port).await != Some(200) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "never became healthy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// One `Export` call with `message` as the request's protobuf bytes
/// (framed once by the caller with [`grpc_frame`]), over `channel`; the
/// gRPC status code, or -1 when the call itself failed. Sends pre-encoded
/// bytes so that a load test spends its CPU in the collector, not here.
pub async fn export_framed(
    channel: &mut tonic::transport::Channel,
    framed: bytes::Bytes,
    encoding: Option<&str>,
) -> i32 {
    use http_body_util::BodyExt;
    use tower::{Service, ServiceExt};
    let mut req = http::Request::builder()
        .method("POST")
        .uri(profcol_model::proto::EXPORT_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(e) = encoding {
        req = req.header("grpc-encoding", e);
    }
    let req = req
        .body(tonic::body::Body::new(http_body_util::Full::new(framed)))
        .unwrap();
    let Ok(ch) = channel.ready().await else {
        return -1;
    };
    let Ok(resp) = ch.call(req).await else {
        return -1;
    };
    let code = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
    };
    if let Some(c) = code(resp.headers()) {
        return c;
    }
    match resp.into_body().collect().await {
        Ok(b) => b.trailers().and_then(code).unwrap_or(-1),
        Err(_) => -1,
    }
}

/// A gRPC message frame: flag, length, bytes.
pub fn grpc_frame(message: &[u8], compressed: bool) -> bytes::Bytes {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(u8::from(compressed));
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

/// The sum of the metrics whose exposition line starts with `prefix`
/// (name and, optionally, the first labels), from the collector's
/// `/metrics` on `port`.
pub async fn metric(port: u16, prefix: &str) -> u64 {
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Waits until `f` holds, checking every 10 ms, failing with `what` after
/// `limit`: for events no drain can wait for.
pub async fn until(limit: std::time::Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Sends `reqs` one by one to the OTLP gRPC receiver on `port`, each
/// accepted.
pub async fn send(port: u16, reqs: &[ExportProfilesServiceRequest]) {
    let mut c = client(port).await;
    for r in reqs {
        c.export(r.clone()).await.unwrap();
    }
}
