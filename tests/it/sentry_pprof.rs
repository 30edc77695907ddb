//! Recorded Sentry SDK requests through the `sentry` receiver and the `pprof`
//! exporter, judged by Go's own pprof tool: `go tool pprof -top` opens the
//! file, its sample total is the Sentry sample count, and the thread names
//! are labels.
//!
//! Needs `go` on PATH (Debian `golang-go`); skipped locally without it and
//! failing under CI (`CI` set), as the pprof round-trip tests do.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{replay_fixture, Ports};
use profcol_model::testing::{go_available, go_tool_pprof};
use profcol_pipeline::runtime::RuntimeOptions;

fn go_pprof(args: &[&str], file: &Path) -> String {
    go_tool_pprof(args, file, file.parent().unwrap())
}

/// The receiver listens on port 0 ([`Ports`]).
fn collector_yaml(dir: &Path) -> String {
    format!(
        r#"
receivers:
  sentry:
    endpoint: 127.0.0.1:0
exporters:
  pprof:
    directory: {}
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 20ms
      max_elapsed_time: 200ms
service:
  telemetry:
    metrics:
      address: 127.0.0.1:0
  pipelines:
    profiles:
      receivers: [sentry]
      exporters: [pprof]
"#,
        dir.display()
    )
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Runs the recordings through sentry -> pprof; returns the files written.
async fn sentry_to_pprof(dir: &Path, recordings: &[&str]) -> Vec<PathBuf> {
    let yaml = collector_yaml(dir);
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::sentry");
    for r in recordings {
        replay_fixture(port, r, None).await;
    }
    // Shutdown drains the exporter's queue.
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();
    files_in(dir)
}

/// The `N` of `Showing nodes accounting for X, Y% of N total`.
fn top_total(top: &str) -> u64 {
    let line = top
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .unwrap_or_else(|| panic!("no total in:\n{top}"));
    let total = line.rsplit(" of ").next().unwrap();
    total.trim_end_matches(" total").parse().unwrap()
}

#[tokio::test]
async fn sentry_chunks_become_pprof_files_go_tool_pprof_reads() {
    if !go_available() {
        return;
    }
    // (recordings, Sentry samples and thread names from SUMMARY.txt)
    let cases: [(&[&str], u64, &[&str]); 2] = [
        (
            &["sentry-python/manual/0001"],
            1085,
            &["MainThread", "sentry.profiler.ThreadContinuousScheduler"],
        ),
        (
            &["sentry-node/manual/0001", "sentry-node/manual/0002"],
            475,
            &["main"],
        ),
    ];
    for (recordings, samples, threads) in cases {
        let dir = tempfile::tempdir().unwrap();
        let files = sentry_to_pprof(dir.path(), recordings).await;
        assert_eq!(files.len(), 1, "{recordings:?}: {files:?}");
        let file = &files[0];
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(name.ends_with("-samples.pb.gz"), "{name}");

        let top = go_pprof(&["-top"], file);
        assert!(top.contains("Type: samples"), "{top}");
        assert_eq!(top_total(&top), samples, "{recordings:?}:\n{top}");

        let tags = go_pprof(&["-tags"], file);
        let thread_names: Vec<&str> = tags
            .split("\n\n")
            .find(|block| block.trim_start().starts_with("thread.name:"))
            .unwrap_or_else(|| panic!("no thread.name label:\n{tags}"))
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        for t in threads {
            assert!(thread_names.contains(t), "{t} not in {thread_names:?}");
        }
        // Profile metadata too big for a label is neither a label nor a
        // comment; one short comment names it.
        assert!(!tags.contains("sentry.thread_metadata"), "{tags}");
        let comments = go_pprof(&["-comments"], file);
        assert!(
            !comments.contains("sentry.thread_metadata: {"),
            "{comments}"
        );
        assert!(
            comments.contains("not written: sentry.thread_metadata ("),
            "{comments}"
        );
        assert!(
            comments.contains("profcol: received by sentry"),
            "{comments}"
        );
    }
}

/// A directory that stops being usable while the collector runs fails the
/// exports (counted), and the collector keeps serving and writes again once
/// the directory is back.
#[tokio::test]
async fn a_directory_lost_at_run_time_fails_exports_but_not_the_collector() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profiles");
    let svc = profcol::app::start_str(&collector_yaml(&dir), RuntimeOptions::default())
        .await
        .unwrap();
    let port = svc.port("receivers::sentry");
    let telemetry = svc.telemetry().clone();
    assert!(dir.is_dir(), "created at start-up");

    // The directory is replaced by a regular file: every write fails.
    std::fs::remove_dir(&dir).unwrap();
    std::fs::write(&dir, "not a directory").unwrap();
    replay_fixture(port, "sentry-python/manual/0001", None).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while telemetry.send_failed("pprof") == 0 {
        assert!(std::time::Instant::now() < deadline, "no failure counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(telemetry.send_failed("pprof"), 1085);

    // Back: the collector is still serving, and writes the next chunk.
    std::fs::remove_file(&dir).unwrap();
    replay_fixture(port, "sentry-node/manual/0001", None).await;
    tokio::time::timeout(Duration::from_secs(30), svc.shutdown())
        .await
        .unwrap();
    assert_eq!(telemetry.sent("pprof"), 475);
    let files = files_in(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().contains("holdout-node"));
}
