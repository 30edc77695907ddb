//! The persistent sending queue (`file_storage`), tried on real processes:
//! stopped with SIGTERM and killed with SIGKILL while their peer is down,
//! started again on a damaged queue, and run out of disk.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prost::Message;
use tonic::Code;

use common::{client, metric, profcol, Ports, Running, Sink};
use profcol_model::proto::ProfilesData;

/// otlp in, otlp out to `sink` through a persistent queue in `queue_dir`.
fn config(dir: &Path, sink: u16, queue_dir: &Path) -> PathBuf {
    let path = dir.join("c.yaml");
    std::fs::write(
        &path,
        format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink}
    tls: {{insecure: true}}
    retry_on_failure: {{initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 0s}}
    sending_queue: {{storage: file_storage}}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
  file_storage: {{directory: "{queue}", create_directory: true}}
service:
  extensions: [health_check, file_storage]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}, logs: {{level: warn}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp]}}
"#,
            queue = queue_dir.display(),
        ),
    )
    .unwrap();
    path
}

fn command(cfg: &Path) -> std::process::Command {
    let mut c = profcol();
    c.arg("--config")
        .arg(cfg)
        .args(["--shutdown-timeout", "5s"]);
    c
}

/// Started, and ready: its listeners on port 0 ([`Ports`]).
async fn start(cmd: &mut std::process::Command) -> Running {
    Running::ready(cmd).await
}

/// Request `n`: its own profile id, so the sink can tell each apart.
fn numbered(n: u32, samples: usize) -> ProfilesData {
    let mut data = profcol_model::synth::request(samples, samples / 10 + 1);
    let id = &mut data.resource_profiles[0].scope_profiles[0].profiles[0].profile_id;
    *id = [n.to_be_bytes(); 4].concat();
    data
}

/// Sends requests `range`, each of `samples`; all must be accepted.
async fn send_all(port: u16, range: std::ops::Range<u32>, samples: usize) {
    let mut c = client(port).await;
    for n in range {
        let data = numbered(n, samples);
        let req = profcol_model::proto::ExportProfilesServiceRequest {
            resource_profiles: data.resource_profiles,
            dictionary: data.dictionary,
        };
        c.export(req)
            .await
            .unwrap_or_else(|e| panic!("request {n}: {e}"));
    }
}

/// Waits until the sink holds `n` requests; returns their ids, sorted.
async fn arrived(sink: &Sink, n: usize, limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    loop {
        let got = sink.received();
        if got.len() >= n || Instant::now() > deadline {
            // A moment more, to see a duplicate that is on its way.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut ids: Vec<u32> = sink
                .received()
                .iter()
                .flat_map(|r| profcol_model::profiles(&r.resource_profiles))
                .map(|p| u32::from_be_bytes(p.profile_id[..4].try_into().unwrap()))
                .collect();
            ids.sort_unstable();
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The sink is down throughout: 20 requests (1,000 samples each) accepted,
/// then SIGTERM; 20 more after a restart, then SIGKILL. Started a third
/// time with the sink up, every one of the 40 arrives, each exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sigkill_lose_nothing_accepted() {
    let sink = Sink::start().await;
    sink.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), &dir.path().join("q"));

    let p = start(&mut command(&cfg)).await;
    send_all(p.grpc_port(), 0..20, 1000).await;
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert!(
        !logs.contains("reason=\"shutdown\""),
        "nothing dropped at shutdown: {logs}"
    );

    let p = start(&mut command(&cfg)).await;
    // Queued again (less what the 10 consumers hold, retrying).
    let queued = metric(p.metrics_port(), "otelcol_exporter_queue_size").await;
    assert!((10..=20).contains(&queued), "the queue came back: {queued}");
    send_all(p.grpc_port(), 20..40, 1000).await;
    p.signal("KILL");
    p.wait(Duration::from_secs(10)).await;
    assert!(sink.received().is_empty());

    sink.down_for(Duration::ZERO);
    let p = start(&mut command(&cfg)).await;
    let ids = arrived(&sink, 40, Duration::from_secs(60)).await;
    assert_eq!(ids, (0..40).collect::<Vec<_>>(), "each request once");
    assert_eq!(sink.samples(), 40 * 1000);
    // Delivered requests leave the disk.
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(p.metrics_port(), "otelcol_exporter_queue_size").await > 0 {
        assert!(Instant::now() < deadline, "the queue drains");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    let queue = dir.path().join("q/exporter_otlp_profiles");
    let left: u64 = std::fs::read_dir(&queue)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(left, 0, "no queued bytes left in {}", queue.display());
}

/// A queue damaged while the collector was down (a page of a segment
/// zeroed, as a torn write leaves it): the collector starts, sends every
/// request the damage did not touch, and counts what it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_queue_starts_and_counts_what_it_lost() {
    let sink = Sink::start().await;
    sink.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), &dir.path().join("q"));
    let p = start(&mut command(&cfg)).await;
    send_all(p.grpc_port(), 0..10, 1000).await;
    p.signal("KILL");
    p.wait(Duration::from_secs(10)).await;

    let queue = dir.path().join("q/exporter_otlp_profiles");
    let seg = std::fs::read_dir(&queue)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .expect("a segment");
    let mut bytes = std::fs::read(&seg).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 4096].fill(0);
    std::fs::write(&seg, bytes).unwrap();

    sink.down_for(Duration::ZERO);
    let p = start(&mut command(&cfg)).await;
    let lost = metric(
        p.metrics_port(),
        "profcol_exporter_queue_corrupt_records_total",
    )
    .await;
    assert!((1..=2).contains(&lost), "{lost} records counted lost");
    let ids = arrived(&sink, 10 - lost as usize, Duration::from_secs(30)).await;
    assert_eq!(ids.len() as u64, 10 - lost, "{ids:?}");
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids, "no duplicates");
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
    assert!(
        logs.contains("damaged records skipped"),
        "the damage is logged: {logs}"
    );
}

/// Out of disk (a file size limit, which the kernel enforces as a full
/// disk: EFBIG): requests the queue cannot store are refused with
/// UNAVAILABLE, so the client retries; once the peer is back and the
/// queue drains, the same requests are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_retryably_and_recovers() {
    let sink = Sink::start().await;
    sink.down_for(Duration::from_secs(3600));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), &dir.path().join("q"));
    let mut cmd = command(&cfg);
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else
    // runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: 1 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Past the limit, write() fails with EFBIG instead of the
            // process being killed (an ignored signal stays so over exec).
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let p = start(&mut cmd).await;
    let mut c = client(p.grpc_port()).await;
    let request = |n| {
        let d = numbered(n, 2000);
        profcol_model::proto::ExportProfilesServiceRequest {
            resource_profiles: d.resource_profiles,
            dictionary: d.dictionary,
        }
    };
    let size = request(0).encoded_len();
    let mut accepted = 0u32;
    let refusal = loop {
        match c.export(request(accepted)).await {
            Ok(_) => accepted += 1,
            Err(status) => break status,
        }
        assert!(
            (accepted as usize) * size < 4 << 20,
            "{accepted} requests of {size} bytes accepted past a 1 MiB limit"
        );
    };
    assert!(accepted > 0);
    assert_eq!(refusal.code(), Code::Unavailable, "{refusal:?}");
    assert!(
        refusal.message().contains("cannot store"),
        "{}",
        refusal.message()
    );
    assert!(p.memory_mib().1 > 0, "still running");

    sink.down_for(Duration::ZERO);
    let ids = arrived(&sink, accepted as usize, Duration::from_secs(30)).await;
    assert_eq!(ids, (0..accepted).collect::<Vec<_>>());
    // Drained, the queue takes requests again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.export(request(accepted)).await {
            Ok(_) => break,
            Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(s) => panic!("not accepted after the queue drained: {s:?}"),
        }
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// The at-least-once edge, measured: killed while its peer is taking
/// requests (each answered after a second, 10 consumers sending), the
/// collector resends after the restart what was in flight. Every request
/// arrives; a duplicate is possible only for a request the peer had taken
/// when the kill came, so at most `num_consumers` of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_delivery_resends_at_most_what_was_in_flight() {
    let sink = Sink::start().await;
    sink.answer_next(std::iter::repeat_n(common::Answer::Hold(1000), 1000));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), sink.addr.port(), &dir.path().join("q"));
    let p = start(&mut command(&cfg)).await;
    send_all(p.grpc_port(), 0..60, 500).await;
    p.signal("KILL");
    p.wait(Duration::from_secs(10)).await;
    let before = sink.received().len();
    assert!(before < 60, "the kill came before the queue drained");

    let p = start(&mut command(&cfg)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let ids = loop {
        let mut ids = arrived(&sink, 60, Duration::from_secs(60)).await;
        ids.dedup();
        if ids.len() == 60 || Instant::now() > deadline {
            break ids;
        }
    };
    assert_eq!(ids, (0..60).collect::<Vec<_>>(), "every request arrives");
    let duplicates = sink.received().len() - 60;
    eprintln!("{before} delivered before the kill; {duplicates} sent twice");
    assert!(duplicates <= 10, "{duplicates} duplicates");
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}
