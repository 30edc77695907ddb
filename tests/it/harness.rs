//! `profcol test`: this repository's pipeline tests, and the harness itself.

use crate::common::{self, Ports};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn profcol(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_profcol"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// tests/pipelines/*.yaml cover config.yaml and each processor.
#[test]
fn the_repository_pipeline_tests_pass() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo("tests/pipelines"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2);
    let mut args = vec!["test".to_owned()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let out = Command::new(env!("CARGO_BIN_EXE_profcol"))
        .args(&args)
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(" passed, 0 failed"), "{t}");
}

/// A test file in a scratch dir using the minimal OTLP request.
fn scratch_test(expect: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo("tests/fixtures/otlp/minimal-request.bin"),
        dir.path().join("min.binpb"),
    )
    .unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(
        &file,
        format!(
            r#"
config:
  receivers: {{ otlp: {{}} }}
  exporters: {{ debug: {{}} }}
  service: {{ pipelines: {{ profiles: {{ receivers: [otlp], exporters: [debug] }} }} }}
tests:
  - name: minimal
    inputs: [{{ receiver: otlp, file: min.binpb }}]
    expect:
      debug:
{expect}
"#
        ),
    )
    .unwrap();
    (dir, file)
}

/// The minimal request's folded stacks, as the resolved view prints them.
fn minimal_stacks() -> Vec<(String, i64)> {
    let req = common::request("otlp/minimal-request.bin");
    let data = profcol_model::proto::request_into_data(req);
    profcol_model::resolved::folded(&data)
        .into_iter()
        .flat_map(|p| p.samples.into_iter())
        .collect()
}

#[test]
fn a_passing_and_a_failing_test_file() {
    let (line, value) = minimal_stacks().into_iter().next().unwrap();
    let (_d, ok) = scratch_test(&format!(
        "        profiles: 1\n        samples: 3\n        stacks: [\"{line} {value}\"]\n        absent_stacks: [\"no;such;stack\"]\n        attributes: [service.name=holdout-minimal]\n"
    ));
    let out = profcol(&["test", ok.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("1 passed, 0 failed"), "{}", text(&out));

    let stack = line.split(' ').next().unwrap().to_owned();
    let (_d, bad) = scratch_test(&format!(
        "        samples: 4\n        stacks: [\"{stack} {}\", \"main;nowhere\"]\n",
        value + 1
    ));
    let out = profcol(&["test", bad.to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("expected 4 samples, got 3"), "{t}");
    assert!(
        t.contains(&format!(
            "stack \"{stack}\": expected {}, got {value}",
            value + 1
        )),
        "{t}"
    );
    assert!(t.contains("missing stack \"main;nowhere\""), "{t}");
    assert!(t.contains("0 passed, 1 failed"), "{t}");
}

#[test]
fn update_writes_the_snapshot_then_it_is_compared() {
    let (dir, file) = scratch_test("        snapshot: snap/min.txt\n");
    let f = file.to_str().unwrap();
    let out = profcol(&["test", f]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--update"), "{}", text(&out));

    let out = profcol(&["test", "--update", f]);
    assert!(out.status.success(), "{}", text(&out));
    let snap = std::fs::read_to_string(dir.path().join("snap/min.txt")).unwrap();
    let (line, value) = minimal_stacks().into_iter().next().unwrap();
    assert!(
        snap.contains(&format!("{line} {value}")) || snap.contains(&line),
        "{snap}"
    );
    assert!(profcol(&["test", f]).status.success());

    // A changed snapshot fails with a diff naming both sides.
    std::fs::write(
        dir.path().join("snap/min.txt"),
        snap.replace(&line, "main;changed"),
    )
    .unwrap();
    let out = profcol(&["test", f]);
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.contains("-") && t.contains("main;changed") && t.contains(&line),
        "{t}"
    );
}

#[test]
fn bad_test_files_and_inputs_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.yaml");
    std::fs::write(&f, "config: {}\ntests:\n  - name: x\n    inputz: []\n").unwrap();
    let out = profcol(&["test", f.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("inputz"), "{}", text(&out));

    let (_d, file) = scratch_test("        profiles: 1\n");
    let yaml = std::fs::read_to_string(&file)
        .unwrap()
        .replace("min.binpb", "missing.binpb");
    std::fs::write(&file, yaml).unwrap();
    let out = profcol(&["test", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("missing.binpb"), "{}", text(&out));

    // `--update` writes no snapshot from a run whose inputs failed.
    let (dir, file) = scratch_test("        snapshot: snap/min.txt\n");
    let yaml = std::fs::read_to_string(&file)
        .unwrap()
        .replace("min.binpb", "missing.binpb");
    std::fs::write(&file, yaml).unwrap();
    let out = profcol(&["test", "--update", file.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!dir.path().join("snap/min.txt").exists());
}

/// A stack expectation names attributes the stack must have (the unit
/// tests cover naming only some); a config may take its sections from a
/// `<<` merge key.
#[test]
fn stacks_match_on_the_attributes_named_and_merge_keys_work() {
    let (line, value) = minimal_stacks()
        .into_iter()
        .find(|(l, _)| l.contains(" ["))
        .expect("a stack with attributes");
    let (stack, attrs) = line.split_once(" [").unwrap();
    let first = attrs.trim_end_matches(']').split(", ").next().unwrap();
    let (dir, file) = scratch_test(&format!(
        "        stacks: [\"{stack} [{first}] {value}\"]\n        absent_stacks: [\"{stack} [{first}]\"]\n"
    ));
    let out = profcol(&["test", file.to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("must be absent"), "{t}");
    assert!(!t.contains("missing stack"), "{t}");

    std::fs::write(
        dir.path().join("merged.yaml"),
        "<<: {receivers: {otlp: {}}, exporters: {debug: {}}}\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}\n",
    )
    .unwrap();
    let yaml = std::fs::read_to_string(&file).unwrap();
    let body = &yaml[yaml.find("tests:").unwrap()..];
    let body = body.replace(
        &format!("        absent_stacks: [\"{stack} [{first}]\"]\n"),
        "",
    );
    std::fs::write(&file, format!("config: merged.yaml\n{body}")).unwrap();
    let out = profcol(&["test", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));

    // The file's `config` may be left out when each test has its own.
    let body = body.replacen("inputs:", "config: merged.yaml\n    inputs:", 1);
    std::fs::write(&file, &body).unwrap();
    let out = profcol(&["test", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(&file, body.replacen("config: merged.yaml\n    ", "", 1)).unwrap();
    let out = profcol(&["test", file.to_str().unwrap()]);
    assert!(text(&out).contains("no config"), "{}", text(&out));
}

/// `profcol test` in a blocking task, so a collector in this process keeps running.
async fn profcol_async(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        profcol(&args)
    })
    .await
    .unwrap()
}

/// Traffic recorded by `record_to` in a running collector replays through
/// `profcol test` to the same result as the original requests. `profcol
/// test` itself records nothing, although the config under test sets
/// `record_to`: testing a production config must not put test traffic into
/// its capture directory.
#[tokio::test]
async fn a_recorded_capture_replays_to_what_was_captured() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fixtures = repo("tests/fixtures");
    let (rec_sentry, rec_otlp) = (d.join("rec-sentry"), d.join("rec-otlp"));
    let pipelines = "  exporters: { debug: {} }\n  service: { pipelines: { profiles: { receivers: [sentry, otlp], exporters: [debug] } } }\n";
    let recording = format!(
        "  receivers: {{ sentry: {{ keys: [publickey], record_to: {} }}, otlp: {{ record_to: {}, record_max_files: 5 }} }}\n{pipelines}",
        rec_sentry.display(),
        rec_otlp.display(),
    );

    // The original requests through `profcol test`, with the recording
    // config: their snapshot, and no recordings.
    let original = d.join("original.yaml");
    std::fs::write(
        &original,
        format!(
            "config:\n{recording}tests:\n  - name: original\n    inputs:\n      - {{ receiver: sentry, file: {} }}\n      - {{ receiver: otlp, file: {} }}\n    expect:\n      debug: {{ snapshot: snap.txt }}\n",
            fixtures.join("sentry-node/manual/0001.meta.json").display(),
            fixtures.join("otlp/minimal-request.bin").display(),
        ),
    )
    .unwrap();
    let out = profcol_async(&["test", "--update", original.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(d.join("snap.txt").exists());
    for rec in [&rec_sentry, &rec_otlp] {
        assert!(
            !rec.exists(),
            "profcol test recorded into {}: {:?}",
            rec.display(),
            std::fs::read_dir(rec).map(|r| r.count())
        );
    }

    // The same requests captured by a running collector.
    let yaml = format!(
        "receivers:\n  sentry: {{ endpoint: \"127.0.0.1:0\", keys: [publickey], record_to: {} }}\n  otlp: {{ protocols: {{ grpc: {{ endpoint: \"127.0.0.1:0\" }} }}, record_to: {} }}\n\
         exporters: {{ debug: {{}} }}\n\
         service:\n  telemetry: {{ metrics: {{ level: none }} }}\n  pipelines: {{ profiles: {{ receivers: [sentry, otlp], exporters: [debug] }} }}\n",
        rec_sentry.display(),
        rec_otlp.display(),
    );
    let svc = profcol::app::start_str(&yaml, Default::default())
        .await
        .unwrap();
    let (sentry_port, otlp_port) = (svc.port("receivers::sentry"), svc.grpc_port());
    common::replay_sentry(sentry_port, &fixtures.join("sentry-node/manual/0001"), None).await;
    let mut c = common::client(otlp_port).await;
    c.export(common::request("otlp/minimal-request.bin"))
        .await
        .unwrap();
    drop(c);
    svc.shutdown().await;

    // Byte for byte what the receivers parsed, secrets redacted.
    let recorded = std::fs::read(rec_sentry.join("0001.envelope")).unwrap();
    assert_eq!(
        recorded,
        std::fs::read(fixtures.join("sentry-node/manual/0001.envelope")).unwrap()
    );
    let meta = std::fs::read_to_string(rec_sentry.join("0001.meta.json")).unwrap();
    assert!(
        meta.contains("sentry_key=REDACTED") && !meta.contains("sentry_key=publickey"),
        "{meta}"
    );
    assert!(!meta.contains("\"content-encoding\""), "{meta}");
    let sent = common::request("otlp/minimal-request.bin");
    let got = std::fs::read(rec_otlp.join("0001.binpb")).unwrap();
    assert_eq!(
        <opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest as prost::Message>::decode(got.as_slice()).unwrap(),
        sent
    );

    // The redacted key is replaced by the receiver's first `keys` entry.
    let replay = d.join("replay.yaml");
    std::fs::write(
        &replay,
        format!(
            "config:\n  receivers: {{ sentry: {{ keys: [publickey] }}, otlp: {{}} }}\n{pipelines}tests:\n  - name: replay\n    inputs:\n      - {{ receiver: sentry, file: rec-sentry/0001.meta.json }}\n      - {{ receiver: otlp, file: rec-otlp/0001.binpb }}\n    expect:\n      debug: {{ snapshot: snap.txt }}\n",
        ),
    )
    .unwrap();
    let out = profcol_async(&["test", replay.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("1 passed, 0 failed"), "{}", text(&out));
}

/// What the `file` exporter writes, in either format, is `profcol test`
/// input under the usual names, without `format:`.
#[tokio::test]
async fn file_exporter_output_is_test_input() {
    let dir = tempfile::tempdir().unwrap();
    let [jsonl, json, binpb, pb] =
        ["out.jsonl", "out.json", "out.binpb", "out.pb"].map(|n| dir.path().join(n));
    let yaml = format!(
        "receivers: {{ otlp: {{ protocols: {{ grpc: {{ endpoint: \"127.0.0.1:0\" }} }} }} }}\n\
         exporters:\n  file/jsonl: {{ path: {} }}\n  file/json: {{ path: {} }}\n  file/binpb: {{ path: {}, format: proto }}\n  file/pb: {{ path: {}, format: proto }}\n\
         service:\n  telemetry: {{ metrics: {{ level: none }} }}\n  pipelines: {{ profiles: {{ receivers: [otlp], exporters: [file/jsonl, file/json, file/binpb, file/pb] }} }}\n",
        jsonl.display(),
        json.display(),
        binpb.display(),
        pb.display(),
    );
    let svc = profcol::app::start_str(&yaml, Default::default())
        .await
        .unwrap();
    let mut c = common::client(svc.grpc_port()).await;
    for name in ["otlp/minimal-request.bin", "otlp/two-resources-request.bin"] {
        c.export(common::request(name)).await.unwrap();
    }
    drop(c);
    svc.shutdown().await;

    let test = dir.path().join("t.yaml");
    for (file, format) in [
        (&jsonl, ""),
        (&json, ""),
        (&binpb, ""),
        (&pb, ""),
        (&binpb, ", format: otlp_file"),
    ] {
        std::fs::write(
            &test,
            format!(
                "config:\n  receivers: {{ otlp: {{}} }}\n  exporters: {{ debug: {{}} }}\n  service: {{ pipelines: {{ profiles: {{ receivers: [otlp], exporters: [debug] }} }} }}\n\
                 tests:\n  - name: replay\n    inputs: [{{ receiver: otlp, file: {}{format} }}]\n    expect:\n      debug: {{ profiles: 3, samples: 8, attributes: [service.name=holdout-b] }}\n",
                file.display()
            ),
        )
        .unwrap();
        let out = profcol_async(&["test", test.to_str().unwrap()]).await;
        assert!(out.status.success(), "{}: {}", file.display(), text(&out));
    }
}
