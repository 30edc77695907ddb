//! Pyroscope SDK requests through the `pyroscope` receiver of the running
//! binary to the `pprof` exporter.
//!
//! The recordings in tests/fixtures/pyroscope were made by running each SDK
//! (pyroscope-io 1.4.0, 0.8.16 and 0.8.4; @pyroscope/nodejs 0.6.4 and
//! 0.6.1; pyroscope-go 1.2.8) for about 25 s with 10 s uploads against a
//! loopback recorder that answered as Pyroscope does and stored each
//! request byte for byte (see tests/fixtures/pyroscope/README.md and each
//! folder's SUMMARY.txt for the programs and init options). Nothing is
//! installed at test time: the live check with a real SDK,
//! tests/pyroscope_live.py, runs with the Python the other client tests
//! use (`PROFCOL_PYTHON`, target/py or `python3`) when it imports
//! `pyroscope`; `.ci/run` installs pyroscope-io there.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Ports, Running};
use profcol_model::testing::fixtures_dir;
use profcol_pprof::decode_pprof;

/// Every listener on port 0 ([`Ports`]).
fn config(dir: &Path) -> String {
    format!(
        r#"
receivers:
  pyroscope:
    endpoint: 127.0.0.1:0
exporters:
  pprof:
    directory: {}
extensions:
  health_check:
    endpoint: 127.0.0.1:0
service:
  extensions: [health_check]
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [pyroscope]
      exporters: [pprof]
"#,
        dir.join("pprof").display()
    )
}

/// Sends a recording as its SDK did: path, query, headers, raw body.
pub async fn replay(port: u16, rel: &str) {
    let resp = send(
        &reqwest::Client::new(),
        &format!("http://127.0.0.1:{port}"),
        rel,
        None,
    )
    .await
    .unwrap();
    let status = resp.status();
    assert_eq!(
        status,
        200,
        "{rel}: {}",
        resp.text().await.unwrap_or_default()
    );
}

/// A recording sent to `base` (scheme, host and port) with `client`, with
/// an `Authorization` header when given.
async fn send(
    client: &reqwest::Client,
    base: &str,
    rel: &str,
    authorization: Option<&str>,
) -> reqwest::Result<reqwest::Response> {
    let dir = fixtures_dir().join("pyroscope");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{rel}.meta.json"))).unwrap())
            .unwrap();
    let body = std::fs::read(dir.join(format!("{rel}.body.bin"))).unwrap();
    let mut url = format!("{base}{}", meta["path"].as_str().unwrap());
    if let Some(q) = meta["query"].as_str().filter(|q| !q.is_empty()) {
        url = format!("{url}?{q}");
    }
    let mut req = client.post(url).body(body);
    for h in meta["headers"].as_array().unwrap() {
        let (k, v) = (h[0].as_str().unwrap(), h[1].as_str().unwrap());
        if !matches!(
            k.to_ascii_lowercase().as_str(),
            "host" | "content-length" | "connection"
        ) {
            req = req.header(k, v);
        }
    }
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    req.send().await
}

/// Sample totals per `type/unit` over every file.
fn totals(files: &[PathBuf]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for f in files {
        let p = decode_pprof(&std::fs::read(f).unwrap()).unwrap();
        let s = |i: i64| p.string_table[i as usize].clone();
        for (i, t) in p.sample_type.iter().enumerate() {
            *out.entry(format!("{}/{}", s(t.r#type), s(t.unit)))
                .or_default() += p.sample.iter().map(|x| x.value[i]).sum::<i64>();
        }
    }
    out
}

/// Go's multipart CPU profile, Node's gzip'd pprof body, Python 1.x's Push
/// and Python 0.8's folded text, through the binary: every sample lands in
/// a pprof file named after its service, with the SDK's totals.
#[tokio::test]
async fn recorded_sdk_requests_become_pprof_files() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, config(dir.path())).unwrap();
    let running = Running::ready(common::profcol().arg("--config").arg(&cfg)).await;
    let port = running.port("receivers::pyroscope");
    for rel in [
        "go-pyroscope-go-1.2.8/cpu/0005",
        "nodejs-pyroscope-0.6.4/default/0001",
        "python-pyroscope-io-1.4.0/default/0001",
        "python-pyroscope-io-0.8.4/0001",
    ] {
        replay(port, rel).await;
    }
    running.signal("TERM");
    let (code, logs) = running.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");

    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("pprof"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let services: std::collections::BTreeSet<String> = files
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            name.split('-').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        services.into_iter().collect::<Vec<_>>(),
        ["goapp", "nodeapp", "pyapp"],
        "{files:?}"
    );
    // From each folder's SUMMARY.txt: Go [1670, 16.7e9], Node wall
    // [324, 3.3291e9], Python 1.4.0 7.73e9 ns, Python 0.8.4 77+2+8+22.
    let want: BTreeMap<String, i64> = [
        ("samples/count", 1670 + 324 + 109),
        ("cpu/nanoseconds", 16_700_000_000 + 7_730_000_000),
        ("wall/nanoseconds", 3_329_100_000),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(totals(&files), want, "{files:?}\n{logs}");
}

/// A Pyroscope receiver behind TLS and `bearertokenauth`, as a gateway
/// off a trusted network runs it: the SDKs' `Authorization: Bearer` (Go's
/// `AuthToken`, Node's `authToken`, Python's `http_headers`) over HTTPS
/// gets in, on `/ingest` and Push; a missing or wrong token gets 401 with
/// Pyroscope's error body, and plain HTTP no answer at all.
#[tokio::test]
async fn tls_and_a_bearer_token_guard_the_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let tls = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, tls.cert.pem()).unwrap();
    std::fs::write(&key, tls.signing_key.serialize_pem()).unwrap();
    let yaml = config(dir.path())
        .replace(
            "  pyroscope:\n    endpoint: 127.0.0.1:0\n",
            &format!(
                "  pyroscope:\n    endpoint: 127.0.0.1:0\n    tls: {{cert_file: {}, key_file: {}}}\n    auth: {{authenticator: bearertokenauth}}\n",
                cert.display(),
                key.display()
            ),
        )
        .replace(
            "extensions:\n",
            "extensions:\n  bearertokenauth:\n    token: pyro-s3cret\n",
        )
        .replace(
            "  extensions: [health_check]",
            "  extensions: [health_check, bearertokenauth]",
        );
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let running = Running::ready(common::profcol().arg("--config").arg(&cfg)).await;
    let port = running.port("receivers::pyroscope");

    let ca = reqwest::Certificate::from_pem(tls.cert.pem().as_bytes()).unwrap();
    let https = reqwest::Client::builder()
        .tls_certs_only([ca])
        .build()
        .unwrap();
    let base = format!("https://localhost:{port}");
    let go = "go-pyroscope-go-1.2.8/cpu/0005";
    let push = "python-pyroscope-io-1.4.0/default/0001";
    for rel in [go, push] {
        for auth in [None, Some("Bearer wrong"), Some("Basic cHlyby1zM2NyZXQ=")] {
            let resp = send(&https, &base, rel, auth).await.unwrap();
            assert_eq!(resp.status(), 401, "{rel} {auth:?}");
            let json: serde_json::Value =
                serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
            assert_eq!(json["code"], "unauthenticated", "{rel} {auth:?}");
            assert!(!json.to_string().contains("s3cret"), "{json}");
        }
        let resp = send(&https, &base, rel, Some("Bearer pyro-s3cret"))
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{rel}: {}", resp.text().await.unwrap());
    }
    let plain = send(
        &reqwest::Client::new(),
        &format!("http://127.0.0.1:{port}"),
        go,
        Some("Bearer pyro-s3cret"),
    )
    .await;
    assert!(
        plain.as_ref().map_or(true, |r| !r.status().is_success()),
        "{plain:?}"
    );

    running.signal("TERM");
    let (code, logs) = running.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert!(!logs.contains("pyro-s3cret"), "{logs}");
    let files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("pprof"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // The two authorised requests and nothing else: Go's 1670 samples /
    // 16.7 s and Python's 7.73 s of CPU (SUMMARY.txt).
    let want: BTreeMap<String, i64> = [
        ("samples/count".to_owned(), 1670),
        ("cpu/nanoseconds".to_owned(), 16_700_000_000 + 7_730_000_000),
    ]
    .into();
    assert_eq!(totals(&files), want, "{files:?}");
}

/// tests/pyroscope_live.py with the real pyroscope-io (pinned in
/// tests/python/requirements.txt, which `.ci/run` installs into target/py),
/// the receiver requiring the token the SDK sends in its `http_headers`.
/// Skipped without the SDK, except under `CI`.
#[test]
fn the_live_python_check_passes_where_the_sdk_is_installed() {
    let Some(python) = profcol_model::testing::python(&["pyroscope"]) else {
        return;
    };
    let out = std::process::Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pyroscope_live.py"))
        .args(["--profcol", env!("CARGO_BIN_EXE_profcol"), "--seconds", "8"])
        .args(["--token", "live-token"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("ok: hot_leaf leads"),
        "{text}"
    );
}
