//! Headless Chromium driven through chromedriver (Debian's
//! `chromium-driver`) over W3C WebDriver: for what `--dump-dom` cannot
//! do, reading the browser's own timings of a page and clicking in it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Chromium's flags for a headless run in a container (no sandbox, no
/// GPU, no /dev/shm), as the tests start it.
pub const HEADLESS: [&str; 6] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--hide-scrollbars",
];

/// chromedriver, or `None` (skipped, a failure under CI) without one.
pub fn chromedriver() -> Option<&'static str> {
    let ok = Command::new("chromedriver")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some("chromedriver");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no chromedriver on PATH: CI must install it (.ci/run: apt-get install chromium-driver)"
    );
    profcol_model::testing::skipped("no chromedriver on PATH (Debian package `chromium-driver`)");
    None
}

/// One browser session; the browser is closed when it drops.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a port of its choosing and a headless
    /// `chromium` with a profile of its own.
    pub async fn start(chromedriver: &str, chromium: &Path) -> Browser {
        let mut driver = Command::new(chromedriver)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let port = port_of(&mut driver);
        let profile = tempfile::tempdir().unwrap();
        let args: Vec<String> = HEADLESS
            .iter()
            .map(|a| a.to_string())
            .chain([
                "--window-size=1200,800".to_owned(),
                format!("--user-data-dir={}", profile.path().display()),
            ])
            .collect();
        // chromedriver wants a path, not a name to look up.
        let binary = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join(chromium))
            .find(|p| p.is_file())
            .unwrap_or_else(|| chromium.to_owned());
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": binary, "args": args}}}});
        let http = reqwest::Client::new();
        let r = post(&http, &format!("http://127.0.0.1:{port}/session"), &caps).await;
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_owned();
        Browser {
            driver,
            port,
            session,
            http,
            _profile: profile,
        }
    }

    async fn command(&self, path: &str, body: Value) -> Value {
        let url = format!(
            "http://127.0.0.1:{}/session/{}/{path}",
            self.port, self.session
        );
        let r = post(&self.http, &url, &body).await;
        assert!(r["value"].get("error").is_none(), "WebDriver {path}: {r}");
        r["value"].clone()
    }

    /// Loads `url` and returns once its `load` event has run.
    pub async fn goto(&self, url: &str) {
        self.command("url", json!({ "url": url })).await;
    }

    /// The value of a script's `return`.
    pub async fn eval(&self, script: &str) -> Value {
        self.command("execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// The value a script passes to its last argument, a callback; its
    /// `arguments` before it are `args`.
    pub async fn eval_async(&self, script: &str, args: &[Value]) -> Value {
        self.command("execute/async", json!({"script": script, "args": args}))
            .await
    }

    /// Clicks the first element `css` selects, at its centre, as a user.
    pub async fn click(&self, css: &str) {
        let found = self
            .command("element", json!({"using": "css selector", "value": css}))
            .await;
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned();
        self.command(&format!("element/{id}/click"), json!({}))
            .await;
    }

    /// Evaluates `script` until it returns true, for up to 10 s.
    pub async fn wait_for(&self, script: &str) {
        let started = Instant::now();
        while self.eval(script).await != Value::Bool(true) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "never true: {script}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Browser {
    /// Ends the session (which closes Chromium: killing chromedriver
    /// alone would leave it running), then chromedriver.
    fn drop(&mut self) {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = write!(
                s,
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            let _ = s.read_to_end(&mut Vec::new());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// WebDriver's answer to a POST of `body`.
async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

/// The port in chromedriver's `... started successfully on port N.`
fn port_of(driver: &mut Child) -> u16 {
    let mut out = driver.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let n = out.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "chromedriver exited: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        let port = text
            .split_once("successfully on port ")
            .and_then(|(_, rest)| rest.split_once('.'))
            .and_then(|(port, _)| port.parse().ok());
        if let Some(port) = port {
            // What it writes later is read and dropped, so that a write
            // to a closed pipe does not end it.
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            return port;
        }
    }
}
