//! Bounded memory and honest acceptance, read from outside: a real
//! `profcol` process under load, bombs and overload, its resident memory
//! from `/proc`, what its clients were told and what its metrics count.

use crate::common;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{export_framed, grpc_frame, metric, profcol, Ports, Running, Sink};

/// A config: otlp and sentry receivers, the four processors or none, an
/// `otlp` exporter to `sink` with `queue`, metrics and health, each
/// listening on port 0 ([`start`] says where).
fn config(
    dir: &tempfile::TempDir,
    sink: u16,
    processors: bool,
    queue: &str,
    sentry_extra: &str,
) -> std::path::PathBuf {
    let (procs, list) = if processors {
        (
            "processors:\n  dictionary_dedup: {}\n  unit_normalization: {target: ucum}\n  thread_pruning: {rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]}\n  sampling: {sampling_percentage: 100}\n",
            "[dictionary_dedup, unit_normalization, thread_pruning, sampling]",
        )
    } else {
        ("", "[]")
    };
    let path = dir.path().join("c.yaml");
    std::fs::write(
        &path,
        format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
  sentry: {{endpoint: "127.0.0.1:0"{sentry_extra}}}
{procs}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink}
    tls: {{insecure: true}}
    compression: none
    retry_on_failure: {{initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 120s}}
    sending_queue: {{{queue}}}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}, logs: {{level: warn}}}}
  pipelines:
    profiles: {{receivers: [otlp, sentry], processors: {list}, exporters: [otlp]}}
"#
        ),
    )
    .unwrap();
    path
}

/// Started on `cfg` and ready, with the ports of its otlp and sentry
/// receivers, health_check and metrics.
async fn start(cfg: &std::path::Path, limit_mib: u64) -> (Running, (u16, u16, u16, u16)) {
    let p = Running::ready(
        profcol()
            .arg("--config")
            .arg(cfg)
            .args(["--memory-limit-mib", &limit_mib.to_string()])
            .args(["--shutdown-timeout", "10s"]),
    )
    .await;
    let ports = (
        p.grpc_port(),
        p.port("receivers::sentry"),
        p.health_port(),
        p.metrics_port(),
    );
    (p, ports)
}

async fn channel(port: u16) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Four processors, medium requests (100k samples, ~2.5 MB), four in
/// flight for 20 s, `--memory-limit-mib 256`: resident memory never passes
/// 256 + 64 MiB; what is refused is refused with a code to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resident_memory_stays_under_the_limit_with_four_processors() {
    let sink = Sink::start().await;
    sink.counting_only();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, sink.addr.port(), true, "", "");
    let (p, ports) = start(&cfg, 256).await;
    let medium = profcol_model::synth::request(100_000, 20_000).encode_to_vec();
    let framed = grpc_frame(&medium, false);
    let (ok, _) = drive(ports.0, framed, Duration::from_secs(20)).await;
    let (hwm, _) = p.memory_mib();
    assert!(ok > 0, "nothing went through");
    assert!(hwm <= 256 + 64, "peak RSS {hwm} MiB over 256 + 64 MiB");
    // Once idle, memory goes back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, idle) = p.memory_mib();
    assert!(idle < 128, "{idle} MiB resident once idle");
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// gzip or zlib of `gib` GiB of zeros, built from one chunk repeated: after
/// the first, a chunk only refers back to zeros, so it can follow itself
/// (a sync flush ends each on a byte boundary). The trailer is not written:
/// nothing reads that far.
fn deflate_bomb(gib: u64, gzip: bool) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut enc = Compress::new(Compression::fast(), false);
    let zeros = vec![0u8; 1 << 20];
    let mut chunk = || {
        let (start, mut out) = (enc.total_in(), Vec::new());
        loop {
            let fed = (enc.total_in() - start) as usize;
            out.reserve(64 << 10);
            enc.compress_vec(&zeros[fed..], &mut out, FlushCompress::Sync)
                .unwrap();
            // Flushed once all is in and the output did not fill up.
            if (enc.total_in() - start) as usize == zeros.len() && out.len() < out.capacity() {
                return out;
            }
        }
    };
    let (first, next) = (chunk(), chunk());
    let mut out = if gzip {
        vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]
    } else {
        vec![0x78, 0x01]
    };
    out.extend_from_slice(&first);
    for _ in 1..(gib << 10) {
        out.extend_from_slice(&next);
    }
    out
}

/// zstd of `gib` GiB of zeros: one frame of RLE blocks (128 KiB each).
fn zstd_bomb(gib: u64) -> Vec<u8> {
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58];
    // Frame header descriptor 0x00: no content size, window descriptor
    // 0x58 (8 MiB window).
    let blocks = (gib << 30) / (128 << 10);
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = (128u32 << 10) << 3 | 1 << 1 | last;
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0);
    }
    out
}

/// brotli of `gib` GiB of zeros (compressed for real: slower to make).
fn brotli_bomb(gib: u64) -> Vec<u8> {
    let mut w = brotli::CompressorWriter::new(Vec::new(), 1 << 20, 0, 24);
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(gib << 10) {
        w.write_all(&zeros).unwrap();
    }
    w.into_inner()
}

/// Posts `body` as a Sentry envelope with `encoding`; the status code.
async fn post_bomb(port: u16, encoding: &str, body: Arc<Vec<u8>>) -> u16 {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let head = format!(
        "POST /api/1/envelope/ HTTP/1.1\r\nHost: x\r\nX-Sentry-Auth: Sentry sentry_key=k\r\nContent-Encoding: {encoding}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The server answers before the bomb is all sent: read while writing.
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&body).await;
        wr
    });
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(60), rd.read(&mut buf))
        .await
        .expect("an answer within 60 s")
        .unwrap_or(0);
    writer.abort();
    let text = String::from_utf8_lossy(&buf[..n]);
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Eight concurrent 10 GiB bombs of each encoding (brotli: 1 GiB, which
/// takes a second to make), with `max_request_body_size` 20 MiB and the
/// memory limit at 256 MiB: all are refused (413, or 429 while the others
/// hold the budget), one alone gets 413; resident memory stays under 256 +
/// 64 MiB; a valid envelope right after is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_bombs_are_refused_within_the_memory_limit() {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        sink.addr.port(),
        false,
        "",
        ", max_request_body_size: 20971520",
    );
    let (p, ports) = start(&cfg, 256).await;
    let bombs = [
        ("gzip", deflate_bomb(10, true)),
        ("deflate", deflate_bomb(10, false)),
        ("zstd", zstd_bomb(10)),
        ("br", brotli_bomb(1)),
    ];
    for (encoding, bomb) in bombs {
        let bomb = Arc::new(bomb);
        let answers: Vec<_> = (0..8)
            .map(|_| tokio::spawn(post_bomb(ports.1, encoding, bomb.clone())))
            .collect();
        // Eight at once may find the budget held by the others' buffers:
        // 429 (retry later) is then as right as 413; nothing else is.
        for a in answers {
            let status = a.await.unwrap();
            assert!(matches!(status, 413 | 429), "{encoding}: {status}");
        }
        // Alone, the bomb is what it is: too large. The eight's
        // reservations go back as the server sees their connections close;
        // until then the budget may still be held (429), so "alone" starts
        // when that answer stops, within 10 s (a leak would never).
        let mut status = post_bomb(ports.1, encoding, bomb.clone()).await;
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while status == 429 && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(200)).await;
            status = post_bomb(ports.1, encoding, bomb.clone()).await;
        }
        assert_eq!(status, 413, "{encoding}");
        let (hwm, _) = p.memory_mib();
        assert!(hwm <= 256 + 64, "{encoding}: peak RSS {hwm} MiB");
        // What the round freed goes back before the next round comes.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    common::replay_fixture(ports.1, "sentry-python/manual/0001", None).await;
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// Ten and more times what the exporter drains (its peer is down for 2 s,
/// then back), with `queue_size: 5` and with the default queue: clients
/// hear OK or UNAVAILABLE and nothing else; every accepted sample is sent
/// in the end (accepted == sent, nothing enqueue-failed); and within 10 s
/// of the load stopping the collector accepts again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_refuses_retryably_and_loses_nothing_accepted() {
    for queue in ["queue_size: 5", ""] {
        let sink = Sink::start().await;
        sink.counting_only();
        sink.down_for(Duration::from_secs(2));
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&dir, sink.addr.port(), false, queue, "");
        let (p, ports) = start(&cfg, 256).await;
        let req = common::request("otlp/two-resources-request.bin");
        let per_request = profcol_model::profiles(&req.resource_profiles)
            .map(profcol_model::profile_sample_count)
            .sum::<u64>();
        let framed = grpc_frame(&req.encode_to_vec(), false);
        let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let deadline = Instant::now() + Duration::from_secs(4);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (framed, ok, refused) = (framed.clone(), ok.clone(), refused.clone());
            let mut ch = channel(ports.0).await;
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    match export_framed(&mut ch, framed.clone(), None).await {
                        0 => ok.fetch_add(1, Ordering::Relaxed),
                        14 => refused.fetch_add(1, Ordering::Relaxed),
                        other => panic!("{queue}: unexpected gRPC status {other}"),
                    };
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let (ok, refused) = (ok.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
        assert!(refused > 0, "{queue}: the overload was refused ({ok} ok)");
        // Recovery: the peer is back, the queue drains, a request goes in.
        let started = Instant::now();
        let mut ch = channel(ports.0).await;
        loop {
            let t = Instant::now();
            if export_framed(&mut ch, framed.clone(), None).await == 0
                && t.elapsed() < Duration::from_secs(1)
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{queue}: not accepting again 10 s after the load"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let accepted_requests = ok + 1;
        while sink.samples() < accepted_requests * per_request {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{queue}: {} of {} samples arrived",
                sink.samples(),
                accepted_requests * per_request
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let m = ports.3;
        let accepted = metric(m, "otelcol_receiver_accepted_profile_samples_total").await;
        assert_eq!(accepted, accepted_requests * per_request, "{queue}");
        // The exporter counts a request as sent once the sink has answered.
        while metric(m, "otelcol_exporter_sent_profile_samples_total").await < accepted {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{queue}: not all sent"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let sent = metric(m, "otelcol_exporter_sent_profile_samples_total").await;
        assert_eq!(sent, accepted, "{queue}: every accepted sample was sent");
        assert_eq!(sink.samples(), accepted, "{queue}: and arrived once");
        // What the queue could not take was refused to the client.
        assert_eq!(
            metric(m, "otelcol_exporter_enqueue_failed_profile_samples_total").await,
            metric(m, "otelcol_receiver_refused_profile_samples_total{receiver=\"otlp\",transport=\"grpc\",reason=\"queue_full\"}").await,
            "{queue}"
        );
        assert_eq!(
            metric(m, "otelcol_exporter_send_failed_profile_samples_total").await,
            0,
            "{queue}"
        );
        p.signal("TERM");
        let (code, logs) = p.wait(Duration::from_secs(30)).await;
        assert!(code.success(), "{logs}");
        // A full queue refused the client: nothing was dropped, and the
        // log says so.
        assert!(!logs.contains("samples dropped"), "{queue}: {logs}");
        if queue == "queue_size: 5" {
            assert!(
                logs.contains("the request was refused to its client, which may retry it"),
                "{queue}: {logs}"
            );
        }
    }
}

/// `memory_limiter` as a Collector config sets it (limit 160 MiB, spike 32,
/// no `--memory-limit-mib`): a client sends far more than the exporter
/// drains (one consumer, its peer holds every call 1 s). Resident memory stays under
/// the limit + 64 MiB; everything refused is refused retryably
/// (`UNAVAILABLE`); once the load stops, data is accepted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limiter_holds_resident_memory_under_overload_and_recovers() {
    let sink = Sink::start().await;
    sink.counting_only();
    sink.answer_next(std::iter::repeat_n(common::Answer::Hold(1000), 100_000));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(
        &path,
        format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
processors:
  memory_limiter: {{check_interval: 100ms, limit_mib: 160, spike_limit_mib: 32}}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink}
    tls: {{insecure: true}}
    compression: none
    retry_on_failure: {{initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 120s}}
    sending_queue: {{num_consumers: 1}}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}, logs: {{level: warn}}}}
  pipelines:
    profiles: {{receivers: [otlp], processors: [memory_limiter], exporters: [otlp]}}
"#,
            sink = sink.addr.port()
        ),
    )
    .unwrap();
    let p = Running::ready(
        profcol()
            .arg(format!("--config=file:{}", path.display()))
            .args(["--shutdown-timeout", "1s"]),
    )
    .await;
    let (otlp, metrics) = (p.grpc_port(), p.metrics_port());
    let medium = profcol_model::synth::request(100_000, 20_000).encode_to_vec();
    let framed = grpc_frame(&medium, false);
    // Until the exporter falls far enough behind for the limiter to act:
    // how long that takes depends on how fast this machine sends.
    let (mut ok, mut retry) = (0, 0);
    for _ in 0..6 {
        let (o, r) = drive(otlp, framed.clone(), Duration::from_secs(8)).await;
        (ok, retry) = (ok + o, retry + r);
        if retry > 0 {
            break;
        }
    }
    let (hwm, _) = p.memory_mib();
    let by_limiter = metric(
        metrics,
        "otelcol_receiver_refused_profile_samples_total{receiver=\"otlp\",transport=\"grpc\",reason=\"memory_limiter\"}",
    )
    .await;
    let by_budget = metric(
        metrics,
        "otelcol_receiver_refused_profile_samples_total{receiver=\"otlp\",transport=\"grpc\",reason=\"memory_limit\"}",
    )
    .await;
    eprintln!(
        "accepted {} requests, refused {} (memory_limiter {} samples, budget {} samples), peak RSS {hwm} MiB",
        ok, retry, by_limiter,
        by_budget
    );
    assert!(ok > 0, "nothing went through");
    assert!(retry > 0, "the load was refused in part");
    assert!(hwm <= 160 + 64, "peak RSS {hwm} MiB over 160 + 64 MiB");
    // The load stops: once the queue has drained below the soft limit, a
    // request is accepted again.
    let mut ch = channel(otlp).await;
    let started = Instant::now();
    loop {
        if export_framed(&mut ch, framed.clone(), None).await == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never accepted again after the load stopped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    p.signal("TERM");
    let (_, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(!logs.contains("panicked"), "{logs}");
}

/// Sends `framed` on 4 connections for `time`, retrying what is refused
/// with `UNAVAILABLE` (the memory limit) shortly after; returns the
/// requests accepted and refused.
async fn drive(port: u16, framed: bytes::Bytes, time: Duration) -> (u64, u64) {
    let (ok, retry) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let deadline = Instant::now() + time;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (framed, ok, retry) = (framed.clone(), ok.clone(), retry.clone());
        let mut ch = channel(port).await;
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                match export_framed(&mut ch, framed.clone(), None).await {
                    0 => ok.fetch_add(1, Ordering::Relaxed),
                    14 => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        retry.fetch_add(1, Ordering::Relaxed)
                    }
                    other => panic!("unexpected gRPC status {other}"),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (ok.load(Ordering::Relaxed), retry.load(Ordering::Relaxed))
}

/// Pass-through (an `otlp` exporter to a current-revision peer) queues a
/// request as the bytes it came in, and the memory budget then holds those
/// bytes only, not what decoding them would take: with the peer down, a
/// queue of medium requests that decoded would be several times the limit
/// is accepted whole, and all of it arrives once the peer is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_requests_hold_only_their_bytes_while_queued() {
    const LIMIT_MIB: usize = 160;
    let limit = LIMIT_MIB << 20;
    let data = profcol_model::synth::request(100_000, 20_000);
    let bytes = data.encode_to_vec();
    let heap = profcol_model::wire_check::check(&bytes)
        .expect("synthetic requests are clean")
        .heap;
    let n = 16;
    assert!(
        n * (bytes.len() + heap) > 2 * limit,
        "decoded, the queue would be over the limit ({} + {heap} bytes each)",
        bytes.len()
    );
    // Room left for the process itself (resident memory counts too).
    assert!(
        n * bytes.len() + bytes.len() + heap < limit / 2,
        "as bytes, it fits"
    );
    let per_request = profcol_model::ProfileBatch::new(data).sample_count();

    let sink = Sink::start().await;
    sink.counting_only();
    sink.down_for(Duration::from_secs(3));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, sink.addr.port(), false, "queue_size: 100", "");
    let (p, ports) = start(&cfg, LIMIT_MIB as u64).await;
    let framed = grpc_frame(&bytes, false);
    let mut ch = channel(ports.0).await;
    for i in 0..n {
        let code = export_framed(&mut ch, framed.clone(), None).await;
        if code != 0 {
            p.signal("TERM");
            let (_, logs) = p.wait(Duration::from_secs(30)).await;
            panic!("request {i} refused ({code}): {logs}");
        }
    }
    let started = Instant::now();
    while sink.samples() < n as u64 * per_request {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {} samples arrived",
            sink.samples(),
            n as u64 * per_request
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// Resident anonymous memory of a running profcol, in KiB (`RssAnon`: what
/// the process allocated, whatever the size of its binary).
fn anon_kib(p: &Running) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// With `--memory-limit-mib 96`, a request that needs more than the limit
/// less what the process itself holds at idle can never be accepted: it
/// is refused for good (`RESOURCE_EXHAUSTED`, no `RetryInfo`), not told to
/// retry forever; one that fits is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_can_never_fit_is_refused_for_good() {
    const LIMIT_MIB: u64 = 96;
    let sink = Sink::start().await;
    sink.counting_only();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, sink.addr.port(), false, "", "");
    // Not the size limit: the memory budget.
    let yaml = std::fs::read_to_string(&cfg).unwrap().replace(
        "grpc: {endpoint: \"127.0.0.1:0\"}",
        "grpc: {endpoint: \"127.0.0.1:0\", max_recv_msg_size_mib: 512}",
    );
    assert!(yaml.contains("max_recv_msg_size_mib"));
    std::fs::write(&cfg, yaml).unwrap();
    let (p, ports) = start(&cfg, LIMIT_MIB).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, idle_mib) = p.memory_mib();
    assert!(idle_mib < LIMIT_MIB / 2, "{idle_mib} MiB at idle");
    // What a request needs: its bytes and what decoding them takes.
    let need = |samples: usize| {
        let bytes = profcol_model::synth::request(samples, samples / 5).encode_to_vec();
        let heap = profcol_model::wire_check::check(&bytes).unwrap().heap;
        let n = (bytes.len() + heap) as u64;
        (bytes, n)
    };
    // Samples for a request that needs about `target` bytes (not quite
    // linear: vectors grow by doubling).
    let sized = |target: u64| {
        let mut samples = 10_000u64;
        let mut got = need(samples as usize);
        for _ in 0..4 {
            samples = samples * target / got.1;
            got = need(samples as usize);
        }
        got
    };
    // Needs the limit less a quarter of the idle memory: under the limit,
    // over what the budget could ever hold.
    let (too_big, n) = sized((LIMIT_MIB << 20) - (idle_mib << 20) / 4);
    assert!(
        n > (LIMIT_MIB - idle_mib) << 20 && n < LIMIT_MIB << 20,
        "{n}"
    );
    let mut ch = channel(ports.0).await;
    let mut client = common::client(ports.0).await;
    let req = profcol_model::proto::ExportProfilesServiceRequest::decode(&too_big[..]).unwrap();
    for _ in 0..3 {
        let status = client.export(req.clone()).await.unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::ResourceExhausted,
            "{status:?} (idle {idle_mib} MiB, request needs {} MiB)",
            n >> 20
        );
        assert!(
            tonic_types::StatusExt::get_details_retry_info(&status).is_none(),
            "not retryable: {status:?}"
        );
    }
    // Half the room fits.
    let (fits, _) = sized(((LIMIT_MIB - idle_mib) << 20) / 2);
    assert_eq!(
        export_framed(&mut ch, grpc_frame(&fits, false), None).await,
        0
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// The shipped config.yaml (its ports moved), loaded with medium requests
/// through its processors, then left idle: the memory it allocated goes
/// back to what it held before the load (the processors' buffers, kept
/// from batch to batch, are given back once idle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_memory_goes_back_to_where_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml")).unwrap();
    let cfg = shipped
        .replace("0.0.0.0:4317", "127.0.0.1:0")
        .replace("0.0.0.0:4318", "127.0.0.1:0")
        .replace("0.0.0.0:3000", "127.0.0.1:0")
        .replace("0.0.0.0:4040", "127.0.0.1:0")
        .replace("127.0.0.1:8888", "127.0.0.1:0")
        .replace("127.0.0.1:13133", "127.0.0.1:0")
        .replace("level: info", "level: warn");
    assert_eq!(
        cfg.matches("127.0.0.1:0").count(),
        6,
        "the shipped ports moved"
    );
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, cfg).unwrap();
    let p = Running::ready(profcol().current_dir(dir.path()).arg("--config").arg(&path)).await;
    let otlp = p.grpc_port();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = anon_kib(&p);
    let medium = profcol_model::synth::request(100_000, 20_000).encode_to_vec();
    let (ok, _) = drive(otlp, grpc_frame(&medium, false), Duration::from_secs(4)).await;
    assert!(ok > 0);
    let loaded = anon_kib(&p);
    // The exporters (pprof files, debug) have written what was accepted.
    let metrics = p.metrics_port();
    let started = Instant::now();
    while metric(metrics, "otelcol_exporter_queue_size").await > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "queues never drained"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Idle: the guard collects after 2 s; allow it a few rounds.
    let started = Instant::now();
    let mut idle = anon_kib(&p);
    while idle > before + 6 * 1024 && started.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        idle = anon_kib(&p);
    }
    eprintln!("RssAnon: {before} KiB at start, {loaded} KiB loaded, {idle} KiB idle");
    assert!(
        idle <= before + 6 * 1024,
        "{idle} KiB resident once idle, {before} KiB before the load"
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// Small requests from 8 clients keep the memory budget nearly full (the
/// exporter's peer answers slowly, so what was accepted waits in the
/// queue), each client sending again as soon as it may. Then a client
/// sends a large request that fits the limit but not the room the small
/// ones leave, and retries it as an OTLP exporter does on `UNAVAILABLE`,
/// after the `RetryInfo` delay: it gets in within 20 s (it was refused for
/// as long as the small ones kept coming: whatever room a small one freed,
/// another took before the large one came back), and small ones are
/// accepted again after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_request_is_not_starved_by_small_ones_that_keep_the_budget_full() {
    const LIMIT_MIB: u64 = 128;
    let sink = Sink::start().await;
    sink.counting_only();
    sink.answer_next(std::iter::repeat_n(common::Answer::Hold(50), 1_000_000));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, sink.addr.port(), false, "num_consumers: 2", "");
    let yaml = std::fs::read_to_string(&cfg).unwrap().replace(
        "grpc: {endpoint: \"127.0.0.1:0\"}",
        "grpc: {endpoint: \"127.0.0.1:0\", max_recv_msg_size_mib: 64}",
    );
    assert!(yaml.contains("max_recv_msg_size_mib"));
    std::fs::write(&cfg, yaml).unwrap();
    let (p, ports) = start(&cfg, LIMIT_MIB).await;
    let small = grpc_frame(
        &profcol_model::synth::request(20_000, 5_000).encode_to_vec(),
        false,
    );
    // What it needs to be admitted: its bytes and what decoding them takes
    // (well under the room of the limit less what the process holds).
    let large = profcol_model::synth::request(200_000, 40_000).encode_to_vec();
    let large_mib = (large.len() + profcol_model::wire_check::check(&large).unwrap().heap) >> 20;
    let (_, idle_mib) = p.memory_mib();
    assert!(
        (large_mib as u64) < (LIMIT_MIB - idle_mib) * 2 / 3,
        "{large_mib} MiB, {idle_mib} MiB idle"
    );
    let large = profcol_model::proto::ExportProfilesServiceRequest::decode(&large[..]).unwrap();
    let stop = Instant::now() + Duration::from_secs(90);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (small, ok, refused, done) = (small.clone(), ok.clone(), refused.clone(), done.clone());
        let mut ch = channel(ports.0).await;
        tasks.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) && Instant::now() < stop {
                match export_framed(&mut ch, small.clone(), None).await {
                    0 => ok.fetch_add(1, Ordering::Relaxed),
                    14 => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        refused.fetch_add(1, Ordering::Relaxed)
                    }
                    other => panic!("unexpected gRPC status {other}"),
                };
            }
        }));
    }
    // The small ones fill the budget: refused, or half the limit queued.
    let started = Instant::now();
    let queued_mib = || async {
        (metric(ports.3, "otelcol_exporter_queue_size").await * small.len() as u64) >> 20
    };
    while refused.load(Ordering::Relaxed) == 0 && queued_mib().await < LIMIT_MIB / 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the small requests never filled the budget ({} accepted)",
            ok.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut client = common::client(ports.0).await;
    let started = Instant::now();
    let small_before = ok.load(Ordering::Relaxed);
    let mut tries = 0;
    loop {
        tries += 1;
        match client.export(large.clone()).await {
            Ok(_) => break,
            Err(status) if status.code() == tonic::Code::Unavailable => {
                let delay = tonic_types::StatusExt::get_details_retry_info(&status)
                    .and_then(|r| r.retry_delay)
                    .expect("UNAVAILABLE carries RetryInfo");
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "a request needing {large_mib} MiB starved: refused {tries} times in {:?} while {} small ones were accepted",
                    started.elapsed(),
                    ok.load(Ordering::Relaxed) - small_before
                );
                tokio::time::sleep(delay).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    let waited = started.elapsed();
    let small_meanwhile = ok.load(Ordering::Relaxed) - small_before;
    // Nor are the small ones starved by it. While its room is kept, a
    // small one gets in only if it leaves that room free, so when the
    // large one got in at its first retry none may have: they must get
    // in again once it did.
    let in_after = ok.load(Ordering::Relaxed);
    let resumed = Instant::now();
    while ok.load(Ordering::Relaxed) == in_after {
        assert!(
            resumed.elapsed() < Duration::from_secs(20),
            "the small ones were starved instead: none accepted in 20 s after the large one"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    eprintln!(
        "a request needing {large_mib} MiB got in after {waited:?} ({tries} tries); {small_meanwhile} small ones accepted meanwhile, {} in all, {} refused",
        ok.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}

/// One large request (1e6 samples of one value each, 15 MB) through the
/// four processors and `batch` to three exporters, the `file` one writing
/// OTLP/JSON, at `--memory-limit-mib 384`: resident memory stays within
/// 384 + 64 MiB until all three have written it. The JSON encoding went
/// through a reflective copy of the batch, about 72 times its size, that
/// the budget did not count: 1,079 MiB here (609 MiB in a release build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_large_request_to_three_exporters_stays_within_the_limit() {
    let sink = Sink::start().await;
    sink.counting_only();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    let out = dir.path().join("out.json");
    std::fs::write(
        &path,
        format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0", max_recv_msg_size_mib: 64}}}}}}
processors:
  dictionary_dedup: {{}}
  unit_normalization: {{target: ucum}}
  thread_pruning: {{}}
  sampling: {{sampling_percentage: 100}}
  batch: {{}}
exporters:
  otlp:
    endpoint: 127.0.0.1:{sink}
    tls: {{insecure: true}}
  file: {{path: {out}}}
  pprof: {{directory: {pprof}}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}, logs: {{level: warn}}}}
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [dictionary_dedup, unit_normalization, thread_pruning, sampling, batch]
      exporters: [otlp, file, pprof]
"#,
            sink = sink.addr.port(),
            out = out.display(),
            pprof = dir.path().join("pprof").display(),
        ),
    )
    .unwrap();
    let p = Running::ready(
        profcol()
            .arg("--config")
            .arg(&path)
            .args(["--memory-limit-mib", "384"]),
    )
    .await;
    let large = profcol_model::synth::Config {
        samples: 1_000_000,
        timestamps: false,
        ..Default::default()
    }
    .build();
    let samples = profcol_model::ProfileBatch::new(large.clone()).sample_count();
    let body = profcol_model::proto::ExportProfilesServiceRequest {
        resource_profiles: large.resource_profiles,
        dictionary: large.dictionary,
    }
    .encode_to_vec();
    let mut ch = channel(p.grpc_port()).await;
    assert_eq!(
        export_framed(&mut ch, grpc_frame(&body, false), None).await,
        0
    );
    let metrics = p.metrics_port();
    let sent = |e: &'static str| async move {
        let series = format!("otelcol_exporter_sent_profile_samples_total{{exporter=\"{e}\"");
        metric(metrics, &series).await
    };
    let started = Instant::now();
    loop {
        let (o, f, pp) = (sent("otlp").await, sent("file").await, sent("pprof").await);
        if o == samples && f == samples && pp == samples {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "sent: otlp {o}, file {f}, pprof {pp} of {samples}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (hwm, _) = p.memory_mib();
    eprintln!("peak RSS {hwm} MiB");
    assert!(hwm <= 384 + 64, "peak RSS {hwm} MiB over 384 + 64 MiB");
    // The file holds the request, as OTLP/JSON that reads back.
    let text = std::fs::read(&out).unwrap();
    eprintln!(
        "{} bytes of JSON for {} of protobuf",
        text.len(),
        body.len()
    );
    let back = profcol_otlp::json::decode(&text).unwrap();
    assert_eq!(
        profcol_model::ProfileBatch::new(back).sample_count(),
        samples
    );
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{logs}");
}
