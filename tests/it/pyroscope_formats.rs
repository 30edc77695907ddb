//! Pyroscope's other `/ingest` formats through the running binary to the
//! `pprof` exporter: speedscope as py-spy writes it (recorded live from a
//! Python program with a known hot function) and the binary trie and tree
//! of old clients.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::{Ports, Running};
use profcol_pprof::decode_pprof;

const CONFIG: &str = r#"
receivers:
  pyroscope:
    endpoint: 127.0.0.1:0
exporters:
  pprof:
    directory: DIR
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [pyroscope]
      exporters: [pprof]
"#;

/// Per file: its sample type, and the value of each leaf function.
fn leaves(dir: &std::path::Path) -> BTreeMap<String, (String, BTreeMap<String, i64>)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let p = decode_pprof(&std::fs::read(&path).unwrap()).unwrap();
        let s = |i: i64| p.string_table[i as usize].clone();
        let t = &p.sample_type[0];
        let mut by_leaf: BTreeMap<String, i64> = BTreeMap::new();
        for sample in &p.sample {
            let loc = p
                .location
                .iter()
                .find(|l| l.id == sample.location_id[0])
                .unwrap();
            let f = p
                .function
                .iter()
                .find(|f| f.id == loc.line[0].function_id)
                .unwrap();
            *by_leaf.entry(s(f.name)).or_default() += sample.value[0];
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        out.insert(name, (format!("{}/{}", s(t.r#type), s(t.unit)), by_leaf));
    }
    out
}

fn node(out: &mut Vec<u8>, name: &str, value: u64, children: u64) {
    prost::encoding::encode_varint(name.len() as u64, out);
    out.extend_from_slice(name.as_bytes());
    prost::encoding::encode_varint(value, out);
    prost::encoding::encode_varint(children, out);
}

#[tokio::test]
async fn speedscope_from_py_spy_and_old_clients_trie_and_tree_arrive() {
    let Some(python) = profcol_model::testing::python(&["hashlib"]) else {
        return;
    };
    let py_spy = python.with_file_name("py-spy");
    if !py_spy.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no py-spy beside {python:?}: CI must install tests/python/requirements.txt into target/py"
        );
        profcol_model::testing::skipped("no py-spy beside the test Python (pip install py-spy)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("burn.py");
    std::fs::write(
        &script,
        "import hashlib, time\n\
         def burn_sha256(n):\n    h = b'x'\n    for _ in range(n):\n        h = hashlib.sha256(h).digest()\n\
         def light_work():\n    return sum(range(200))\n\
         t = time.time()\n\
         while time.time() - t < 2.0:\n    burn_sha256(20000)\n    light_work()\n",
    )
    .unwrap();
    let speedscope = dir.path().join("profile.speedscope.json");
    let out = Command::new(&py_spy)
        .args([
            "record",
            "--nonblocking",
            "-r",
            "100",
            "-f",
            "speedscope",
            "-o",
        ])
        .arg(&speedscope)
        .arg("--")
        .arg(&python)
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let pprof_dir = dir.path().join("pprof");
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        CONFIG.replace("DIR", &pprof_dir.display().to_string()),
    )
    .unwrap();
    let running = Running::ready(common::profcol().arg("--config").arg(&cfg)).await;
    let base = format!("http://127.0.0.1:{}", running.port("receivers::pyroscope"));
    let client = reqwest::Client::new();
    let post = |query: &str, ct: &str, body: Vec<u8>| {
        client
            .post(format!("{base}/ingest?{query}"))
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let resp = post(
        "name=burner&format=speedscope&spyName=pyspy&from=1795000000&until=1795000010",
        "application/json",
        std::fs::read(&speedscope).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());

    // Pyroscope's own trie test case, and a tree.
    let mut trie = Vec::new();
    node(&mut trie, "", 0, 2);
    node(&mut trie, "ba", 0, 2);
    node(&mut trie, "r", 1, 0);
    node(&mut trie, "z", 3, 0);
    node(&mut trie, "foo", 2, 1);
    node(&mut trie, ";bar", 5, 0);
    let resp = post("name=trieapp.cpu&format=trie", "", trie)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let mut tree = Vec::new();
    node(&mut tree, "", 0, 1);
    node(&mut tree, "main", 1, 2);
    node(&mut tree, "work", 7, 0);
    node(&mut tree, "gc", 2, 0);
    let resp = post("name=treeapp.cpu", "binary/octet-stream+tree", tree)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    // A speedscope file that is not one: 400 with the reason.
    let resp = post(
        "name=x&format=speedscope",
        "application/json",
        b"{}".to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 400);

    running.signal("TERM");
    let (code, logs) = running.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");

    let got = leaves(&pprof_dir);
    let file = |prefix: &str| {
        got.iter()
            .find(|(k, _)| k.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} file in {got:?}"))
            .1
            .clone()
    };
    // py-spy's seconds as nanoseconds; the hot function on top.
    let (ty, burner) = file("burner");
    assert_eq!(ty, "cpu/nanoseconds");
    let total: i64 = burner.values().sum();
    assert!(total > 1_000_000_000, "about 2 s recorded: {burner:?}");
    let hot = burner.get("burn_sha256").copied().unwrap_or(0);
    assert!(
        hot * 10 > total * 7,
        "burn_sha256 is most of it: {burner:?}"
    );
    let leaf_totals = |m: &BTreeMap<String, i64>| m.clone();
    let (_, trie) = file("trieapp");
    assert_eq!(
        leaf_totals(&trie),
        [("bar", 6), ("baz", 3), ("foo", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        "leaves: bar 1 + foo;bar 5, baz 3, foo 2"
    );
    let (_, tree) = file("treeapp");
    assert_eq!(tree.get("work"), Some(&7));
    assert_eq!(tree.get("gc"), Some(&2));
    assert_eq!(tree.get("main"), Some(&1));
}
