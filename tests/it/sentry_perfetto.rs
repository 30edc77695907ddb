//! Perfetto `profile_chunk`s through the running collector: an envelope
//! as sentry-java sends one from Android 15+ (chunk JSON and a binary
//! Perfetto trace in one item, split by `meta_length`), its trace built by
//! `tests/python/perfetto_chunk.py` with Perfetto's own generated protobuf
//! classes. What reaches Sentry is a sample format v2 chunk with the same
//! stacks per thread, as Relay converts it; a hostile trace is refused with
//! Relay's reason and costs nothing else.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

use crate::common::Ports;
use profcol_exporters::sentry::mock::MockSentry;
use profcol_pipeline::runtime::RuntimeOptions;

fn script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/perfetto_chunk.py")
}

/// Folded stacks (root first) with the thread's name, from a v2 chunk.
fn folded(chunk: &Json) -> BTreeMap<String, u64> {
    let p = &chunk["profile"];
    let names = &p["thread_metadata"];
    let mut out = BTreeMap::new();
    for s in p["samples"].as_array().unwrap() {
        let stack = &p["stacks"][s["stack_id"].as_u64().unwrap() as usize];
        let frames: Vec<&str> = stack
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .map(|f| {
                p["frames"][f.as_u64().unwrap() as usize]["function"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        let tid = s["thread_id"].as_str().unwrap();
        let thread = names[tid]["name"].as_str().unwrap_or(tid);
        *out.entry(format!("{} [{thread}]", frames.join(";")))
            .or_default() += 1;
    }
    out
}

#[tokio::test]
async fn a_perfetto_chunk_reaches_sentry_as_sample_format_v2() {
    let Some(python) =
        profcol_model::testing::python(&["perfetto.protos.perfetto.trace.perfetto_trace_pb2"])
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perfetto.envelope");
    let out = Command::new(&python)
        .arg(script())
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Json = serde_json::from_slice(&out.stdout).unwrap();
    let envelope = std::fs::read(&path).unwrap();

    let mock = MockSentry::start().await;
    let yaml = format!(
        r#"
receivers:
  sentry:
    endpoint: 127.0.0.1:0
exporters:
  sentry:
    dsn: {dsn}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [sentry]
      exporters: [sentry]
"#,
        dsn = mock.dsn()
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::sentry");
    let telemetry = svc.telemetry().clone();
    let client = reqwest::Client::new();
    let post = |body: Vec<u8>| {
        client
            .post(format!("http://127.0.0.1:{port}/api/42/envelope/"))
            .header(
                "x-sentry-auth",
                "Sentry sentry_key=public, sentry_version=7, sentry_client=sentry.java.android/8.28.0",
            )
            .body(body)
            .send()
    };
    let resp = post(envelope.clone()).await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());

    // The same envelope whose trace claims a 1 TiB packet: refused as
    // Relay refuses it, without reading (or allocating) the claim.
    let text = String::from_utf8_lossy(&envelope).into_owned();
    let header_end = text.find('\n').unwrap() + 1;
    let item_header_end = header_end + text[header_end..].find('\n').unwrap() + 1;
    let item: Json = serde_json::from_str(&text[header_end..item_header_end - 1]).unwrap();
    let meta_len = item["meta_length"].as_u64().unwrap() as usize;
    let mut hostile = envelope[..item_header_end + meta_len].to_vec();
    let mut claim = vec![0x0a];
    prost::encoding::encode_varint(1 << 40, &mut claim);
    hostile.extend(&claim);
    hostile.push(b'\n');
    let total = meta_len + claim.len();
    let fixed_header = text[header_end..item_header_end].replace(
        &format!("\"length\": {}", item["length"]),
        &format!("\"length\": {total}"),
    );
    hostile.splice(header_end..item_header_end, fixed_header.into_bytes());
    let resp = post(hostile).await.unwrap();
    assert!(
        resp.status().is_success(),
        "Relay answers 200 and drops the item"
    );

    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();

    let mut arrived = Vec::new();
    for r in mock.requests() {
        let env = r.envelope();
        let mut lines = env.split(|&b| b == b'\n').skip(1);
        while let (Some(h), Some(p)) = (lines.next(), lines.next()) {
            if h.is_empty() {
                break;
            }
            let header: Json = serde_json::from_slice(h).unwrap();
            assert_eq!(header["type"], "profile_chunk");
            assert_eq!(header["platform"], "android");
            arrived.push(serde_json::from_slice::<Json>(p).unwrap());
        }
    }
    assert_eq!(arrived.len(), 1, "one chunk, the hostile one refused");
    let chunk = &arrived[0];
    assert_eq!(chunk["chunk_id"], expected["chunk_id"]);
    assert_eq!(chunk["version"], "2");
    let want: BTreeMap<String, u64> = serde_json::from_value(expected["folded"].clone()).unwrap();
    assert_eq!(folded(chunk), want);
    // Boot-clock times moved to the wall clock by the clock snapshot.
    let first = chunk["profile"]["samples"][0]["timestamp"]
        .as_f64()
        .unwrap();
    let want_first = expected["first_ns"].as_f64().unwrap() / 1e9;
    assert!((first - want_first).abs() < 1e-3, "{first} vs {want_first}");

    let samples = expected["samples"].as_u64().unwrap();
    assert_eq!(telemetry.accepted("sentry"), samples);
    assert_eq!(telemetry.sent("sentry"), samples);
    assert_eq!(
        telemetry.items("sentry", "profile_chunk", "profiling_exceed_size_limit"),
        1
    );
}
