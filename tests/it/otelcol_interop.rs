//! profcol beside the real OpenTelemetry Collector (the pinned build of
//! tests/otelcol): every recorded payload and producer through
//! `producer -> profcol -> otelcol -> profcol -> sink`, over each transport,
//! encoding and compression both sides speak, arrives as it left; and what
//! profcol does when the Collector refuses.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::seen::{all_seen, difference, seen, Seen};
use common::{otelcol, replay_sentry, Ports, Running, Sink};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use profcol_model::synth;
use profcol_model::testing::fixtures_dir;
use prost::Message as _;

/// Waits until every sink in `paths` holds as many samples as `direct`,
/// and `direct` has stopped growing; then compares each with `direct`.
async fn assert_paths_agree(direct: &Sink, paths: &[(&str, &Sink)], procs: &mut [&mut Running]) {
    let started = Instant::now();
    let mut last = (u64::MAX, Instant::now());
    loop {
        let d = direct.samples();
        if d != last.0 {
            last = (d, Instant::now());
        }
        let settled = last.1.elapsed() > Duration::from_millis(500) && d > 0;
        if settled && paths.iter().all(|(_, s)| s.samples() == d) {
            break;
        }
        if started.elapsed() > Duration::from_secs(90) {
            break;
        }
        for p in procs.iter_mut() {
            assert!(p.is_running(), "a process of the chain exited");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let expected = all_seen(&direct.received());
    assert!(!expected.is_empty(), "nothing arrived on the direct path");
    for (name, sink) in paths {
        if let Some(diff) = difference(&expected, &all_seen(&sink.received())) {
            panic!("{name}: what went through the Collector differs from the direct path: {diff}");
        }
    }
}

/// The recorded OTLP requests: current and earlier revisions, protobuf.
fn otlp_fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = fixtures_dir();
    let mut out: Vec<(String, Vec<u8>)> = [
        "otlp/go-cpu.otlp.bin",
        "otlp/minimal-request.bin",
        "otlp/two-resources-request.bin",
    ]
    .iter()
    .map(|rel| (rel.to_string(), std::fs::read(dir.join(rel)).unwrap()))
    .collect();
    for line in std::fs::read_to_string(dir.join("otlp-revisions/EXPECTED.tsv"))
        .unwrap()
        .lines()
        .skip(1)
    {
        let rel = format!("otlp-revisions/{}", line.split('\t').next().unwrap());
        if rel.ends_with(".binpb") {
            out.push((rel.clone(), std::fs::read(dir.join(&rel)).unwrap()));
        }
    }
    // Synthetic: inlined lines, mappings, links, thread attributes, several
    // resources, aggregated values and timestamps.
    for (k, timestamps) in [(1u64, true), (2, false)] {
        let data = synth::Config {
            samples: 3_000,
            stacks: 400,
            functions: 300,
            resources: 3,
            timestamps,
            seed: k,
            ..synth::Config::default()
        }
        .build();
        let req = ExportProfilesServiceRequest {
            resource_profiles: data.resource_profiles,
            dictionary: data.dictionary,
        };
        out.push((format!("synth/{k}"), req.encode_to_vec()));
    }
    out
}

/// Recorded Sentry and Pyroscope requests (`NNNN.meta.json` beside
/// `NNNN.body.bin`), by path without the extensions.
fn recordings(under: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![fixtures_dir().join(under)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // Envelopes of errors and transactions only, forwarded as they are.
                if p.file_name().is_some_and(|n| n != "forward") {
                    stack.push(p);
                }
            } else if let Some(stem) = p.to_str().and_then(|s| s.strip_suffix(".meta.json")) {
                out.push(std::path::PathBuf::from(stem));
            }
        }
    }
    out.sort();
    out
}

/// A profcol config file in `dir`.
fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

async fn start_profcol(config: &Path) -> Running {
    Running::ready(common::profcol().arg("--config").arg(config)).await
}

/// One path through the Collector: how profcol sends to it, and how it
/// sends on to the second profcol.
struct Route {
    /// profcol's exporter: `otlp` or `otlphttp`, and its extra keys.
    out: (&'static str, &'static str),
    /// The Collector's exporter: `otlp_grpc` or `otlp_http`, and its keys.
    back: (&'static str, &'static str),
}

/// Every transport, encoding and compression both speak, each way:
/// configgrpc's `gzip`, `zstd` and `snappy` (framed), confighttp's
/// `gzip`, `zstd`, `snappy` (a raw block), `x-snappy-framed`, `zlib`,
/// `deflate` and `lz4`.
const PATHS: [Route; 12] = [
    Route {
        out: ("otlp", "compression: gzip"),
        back: ("otlp_grpc", "compression: zstd"),
    },
    Route {
        out: ("otlp", "compression: zstd"),
        back: ("otlp_grpc", "compression: gzip"),
    },
    Route {
        out: ("otlp", "compression: none"),
        back: ("otlp_http", "compression: none"),
    },
    Route {
        out: ("otlphttp", "compression: zstd"),
        back: ("otlp_http", "compression: gzip"),
    },
    Route {
        out: ("otlphttp", "compression: gzip"),
        back: ("otlp_http", "compression: zstd"),
    },
    Route {
        out: ("otlphttp", "encoding: json, compression: none"),
        back: ("otlp_http", "encoding: json, compression: none"),
    },
    Route {
        out: ("otlp", "compression: snappy"),
        back: ("otlp_grpc", "compression: snappy"),
    },
    Route {
        out: ("otlphttp", "compression: snappy"),
        back: ("otlp_http", "compression: snappy"),
    },
    Route {
        out: ("otlphttp", "compression: x-snappy-framed"),
        back: ("otlp_http", "compression: x-snappy-framed"),
    },
    Route {
        out: ("otlphttp", "compression: zlib"),
        back: ("otlp_http", "compression: zlib"),
    },
    Route {
        out: ("otlphttp", "encoding: json, compression: deflate"),
        back: ("otlp_http", "compression: deflate"),
    },
    Route {
        out: ("otlphttp", "compression: lz4"),
        back: ("otlp_http", "compression: lz4"),
    },
];

impl Route {
    fn name(&self) -> String {
        format!(
            "profcol {} {{{}}} -> otelcol {} {{{}}}",
            self.out.0, self.out.1, self.back.0, self.back.1
        )
    }
}

/// `endpoint` as an exporter of `kind` names it.
fn endpoint(kind: &str, port: u16) -> String {
    if kind.ends_with("http") {
        format!("http://127.0.0.1:{port}")
    } else {
        format!("127.0.0.1:{port}")
    }
}

/// The OTLP protocol an exporter of `kind` sends.
fn proto(kind: &str) -> &'static str {
    if kind.ends_with("http") {
        "http"
    } else {
        "grpc"
    }
}

/// A receiver section listening on `port` with the protocol `kind` sends.
fn listener(kind: &str, port: u16) -> String {
    let proto = proto(kind);
    format!("{{protocols: {{{proto}: {{endpoint: \"127.0.0.1:{port}\"}}}}}}")
}

/// Every recorded payload and producer through `producer -> profcol ->
/// otelcol -> profcol -> sink`, on each of [`PATHS`]. The first profcol also
/// sends everything straight to a sink; each path's sink must then hold the
/// same profiles: equal resolved views (stacks, values, attributes, links,
/// mappings) and equal times, ids and schema URLs. Both profcols must count
/// every sample as sent and none as failed, and what the Collector's `file`
/// exporter wrote must read back, with profcol's OTLP/JSON reader, to the
/// same profiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_payload_crosses_the_collector_and_back_unchanged() {
    let Some(bin) = otelcol::binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let direct = Sink::start().await;
    let mut sinks = Vec::new();
    for _ in &PATHS {
        sinks.push(Sink::start().await);
    }
    let file = |n: usize| dir.path().join(format!("otelcol-{n}.jsonl"));

    // The second profcol: one receiver and pipeline per path.
    let mut b = String::from("receivers:\n");
    for (n, p) in PATHS.iter().enumerate() {
        b += &format!("  otlp/{n}: {}\n", listener(p.back.0, 0));
    }
    b += "exporters:\n";
    for (n, s) in sinks.iter().enumerate() {
        b += &format!(
            "  otlp/{n}: {{endpoint: \"{}\", tls: {{insecure: true}}, compression: none}}\n",
            s.addr
        );
    }
    b += "extensions:\n  health_check: {endpoint: \"127.0.0.1:0\"}\nservice:\n  extensions: [health_check]\n  telemetry: {metrics: {address: \"127.0.0.1:0\"}}\n  pipelines:\n";
    for n in 0..PATHS.len() {
        b += &format!("    profiles/{n}: {{receivers: [otlp/{n}], exporters: [otlp/{n}]}}\n");
    }
    let mut b = start_profcol(&write(dir.path(), "b.yaml", &b)).await;
    let into_b: Vec<u16> = PATHS
        .iter()
        .enumerate()
        .map(|(n, p)| {
            b.port(&format!(
                "receivers::otlp/{n}::protocols::{}",
                proto(p.back.0)
            ))
        })
        .collect();

    // The Collector: one pipeline per path, each also to a `file` exporter.
    let collector = |ports: &[u16]| {
        let mut c = String::from("receivers:\n");
        for (n, p) in PATHS.iter().enumerate() {
            c += &format!("  otlp/{n}: {}\n", listener(p.out.0, ports[n]));
        }
        c += "exporters:\n";
        for (n, p) in PATHS.iter().enumerate() {
            c += &format!(
                "  {}/{n}: {{endpoint: \"{}\", tls: {{insecure: true}}, {}}}\n  file/{n}: {{path: \"{}\"}}\n",
                p.back.0,
                endpoint(p.back.0, into_b[n]),
                p.back.1,
                file(n).display()
            );
        }
        c += &format!("extensions:\n  health_check: {{endpoint: \"127.0.0.1:{}\"}}\nservice:\n  extensions: [health_check]\n  telemetry: {{metrics: {{level: none}}}}\n  pipelines:\n", ports[PATHS.len()]);
        for (n, p) in PATHS.iter().enumerate() {
            c += &format!(
                "    profiles/{n}: {{receivers: [otlp/{n}], exporters: [{}/{n}, file/{n}]}}\n",
                p.back.0
            );
        }
        c
    };
    let (mut c, _c_dir, into_collector) =
        otelcol::start_on_free_ports(&bin, PATHS.len() + 1, collector).await;

    // The first profcol: every receiver, to the sink and to each path.
    let mut a = format!(
        "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\"}}, http: {{endpoint: \"127.0.0.1:0\"}}}}}}\n  sentry: {{endpoint: \"127.0.0.1:0\"}}\n  pyroscope: {{endpoint: \"127.0.0.1:0\"}}\nexporters:\n  otlp/direct: {{endpoint: \"{}\", tls: {{insecure: true}}, compression: none}}\n",
        direct.addr
    );
    let mut list = vec!["otlp/direct".to_owned()];
    for (n, p) in PATHS.iter().enumerate() {
        a += &format!(
            "  {}/{n}: {{endpoint: \"{}\", tls: {{insecure: true}}, {}}}\n",
            p.out.0,
            endpoint(p.out.0, into_collector[n]),
            p.out.1
        );
        list.push(format!("{}/{n}", p.out.0));
    }
    a += &format!(
        "extensions:\n  health_check: {{endpoint: \"127.0.0.1:0\"}}\nservice:\n  extensions: [health_check]\n  telemetry: {{metrics: {{address: \"127.0.0.1:0\"}}}}\n  pipelines:\n    profiles: {{receivers: [otlp, sentry, pyroscope], exporters: [{}]}}\n",
        list.join(", ")
    );
    let mut a_proc = start_profcol(&write(dir.path(), "a.yaml", &a)).await;
    let (a_grpc, a_http, a_sentry, a_pyroscope, a_metrics, b_metrics) = (
        a_proc.grpc_port(),
        a_proc.http_port(),
        a_proc.port("receivers::sentry"),
        a_proc.port("receivers::pyroscope"),
        a_proc.metrics_port(),
        b.metrics_port(),
    );

    // Producers: recorded OTLP requests over gRPC, OTLP/JSON over HTTP,
    // Sentry envelopes, Pyroscope SDK uploads, pprof files.
    let mut channel = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{a_grpc}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut sent = 0;
    for (name, bytes) in otlp_fixtures() {
        // As recorded: earlier revisions are read (and translated) by profcol.
        let code =
            common::export_framed(&mut channel, common::grpc_frame(&bytes, false), None).await;
        assert_eq!(code, 0, "{name}: gRPC status {code}");
        sent += 1;
    }
    let json = std::fs::read(fixtures_dir().join("otlp/minimal-request.json")).unwrap();
    let resp = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{a_http}/v1development/profiles"))
        .header("content-type", "application/json")
        .body(json)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    sent += 1;
    for rec in recordings("sentry-python")
        .into_iter()
        .chain(recordings("sentry-node"))
    {
        replay_sentry(a_sentry, &rec, None).await;
        sent += 1;
    }
    for rec in recordings("pyroscope") {
        replay_sentry(a_pyroscope, &rec, None).await;
        sent += 1;
    }
    for pprof in ["pprof/go-cpu.pb.gz", "pprof/dd-wall.pb.gz"] {
        let body = std::fs::read(fixtures_dir().join(pprof)).unwrap();
        let resp = reqwest::Client::new()
            .post(format!(
                "http://127.0.0.1:{a_pyroscope}/ingest?name=pprof-file&format=pprof"
            ))
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{pprof}: {}", resp.status());
        sent += 1;
    }

    let names: Vec<String> = PATHS.iter().map(Route::name).collect();
    let paths: Vec<(&str, &Sink)> = names.iter().map(String::as_str).zip(sinks.iter()).collect();
    assert_paths_agree(&direct, &paths, &mut [&mut a_proc, &mut b, &mut c]).await;
    let expected = all_seen(&direct.received());
    assert!(
        expected.len() >= sent,
        "{sent} requests sent, {} profiles arrived",
        expected.len()
    );

    // Each profcol heard success for every sample it sent: a response it
    // could not read (gRPC-Go answers gzip'd requests gzip'd) would count
    // a delivered batch as failed.
    let d = direct.samples();
    let exporters = PATHS.len() as u64;
    for (port, who, each) in [
        (a_metrics, "the first profcol", exporters + 1),
        (b_metrics, "the second profcol", exporters),
    ] {
        let started = Instant::now();
        while common::metric(port, "otelcol_exporter_sent_profile_samples_total").await < each * d
            && started.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            common::metric(port, "otelcol_exporter_sent_profile_samples_total").await,
            each * d,
            "{who}: samples sent"
        );
        assert_eq!(
            common::metric(port, "otelcol_exporter_send_failed_profile_samples_total").await,
            0,
            "{who}: samples failed"
        );
    }

    // What the Collector's file exporter wrote: OTLP/JSON lines, as the
    // Collector marshals them (attribute keys as string table references).
    for (n, name) in names.iter().enumerate() {
        let text = std::fs::read_to_string(file(n)).unwrap();
        let mut got: Vec<Seen> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .flat_map(|l| {
                let data = profcol_otlp::json::decode(l.as_bytes())
                    .unwrap_or_else(|e| panic!("{name}: the file exporter's line: {e}"));
                seen(&data)
            })
            .collect();
        got.sort();
        if let Some(diff) = difference(&expected, &got) {
            panic!("{name}: the Collector's file exporter output, read by profcol: {diff}");
        }
    }
}

/// A profcol that sends what its OTLP receiver (gRPC and HTTP) gets to
/// `exporter` (a YAML flow map), retrying fast; its config path. It
/// listens on port 0 ([`Ports`]).
fn forwarder(dir: &Path, exporter: &str) -> std::path::PathBuf {
    let cfg = write(
        dir,
        "forwarder.yaml",
        &format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}, http: {{endpoint: "127.0.0.1:0"}}}}}}
exporters:
  {exporter}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [{}]}}
"#,
            exporter.split(':').next().unwrap().trim()
        ),
    );
    cfg
}

/// A Collector receiving on `ports` (gRPC, HTTP, health_check) and sending
/// everything on to `sink` (its address) over gRPC, with `processors` (YAML
/// flow map) and `receiver` extra keys.
fn collector_to_sink(
    ports: &[u16],
    sink: impl std::fmt::Display,
    processors: &str,
    extra: &str,
) -> String {
    let list = if processors.is_empty() {
        "[]".to_owned()
    } else {
        format!("[{}]", processors.split(':').next().unwrap().trim())
    };
    let processors = if processors.is_empty() {
        String::new()
    } else {
        format!("processors:\n  {processors}\n")
    };
    let (grpc, http, health) = (ports[0], ports[1], ports[2]);
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: "127.0.0.1:{grpc}"{extra}}}
      http: {{endpoint: "127.0.0.1:{http}"}}
{processors}
exporters:
  otlp_grpc: {{endpoint: "{}", tls: {{insecure: true}}}}
extensions:
  health_check: {{endpoint: "127.0.0.1:{health}"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], processors: {list}, exporters: [otlp_grpc]}}
"#,
        sink
    )
}

async fn send_all(port: u16, requests: &[ExportProfilesServiceRequest]) {
    let mut client = common::client(port).await;
    for r in requests {
        client.export(r.clone()).await.unwrap();
    }
}

/// The Collector's `memory_limiter` refuses everything (its limit is below
/// what the process holds): its receiver answers with a retryable error,
/// profcol keeps the batches queued and retries, and once the Collector is
/// back with room, every sample arrives and none is counted as failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_collector_refuses_for_memory_profcol_retries_until_it_takes_them() {
    let Some(bin) = otelcol::binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start().await;
    let refusing = |ports: &[u16]| {
        collector_to_sink(
            ports,
            sink.addr,
            "memory_limiter: {check_interval: 100ms, limit_mib: 2, spike_limit_mib: 1}",
            "",
        )
    };
    let (collector, _d, c_ports) = otelcol::start_on_free_ports(&bin, 3, refusing).await;
    // The limiter refuses from its first check on, up to 100 ms after the
    // Collector is ready: until it refuses a probe of its own, data gets
    // through (CI met that once). The probes it took reach the sink.
    let probe = synth::requests(1, 1, 1).pop().unwrap();
    let probe_samples: u64 = profcol_model::profiles(&probe.resource_profiles)
        .map(profcol_model::profile_sample_count)
        .sum();
    let probe = ExportProfilesServiceRequest {
        resource_profiles: probe.resource_profiles,
        dictionary: probe.dictionary,
    };
    let mut direct = common::client(c_ports[0]).await;
    let mut let_through = 0;
    let started = Instant::now();
    while direct.export(probe.clone()).await.is_ok() {
        let_through += probe_samples;
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the Collector's memory_limiter never refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while sink.samples() < let_through && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cfg = forwarder(
        dir.path(),
        &format!(
            "otlp: {{endpoint: \"127.0.0.1:{}\", tls: {{insecure: true}}, retry_on_failure: {{initial_interval: 100ms, max_interval: 300ms, max_elapsed_time: 0}}}}",
            c_ports[0]
        ),
    );
    let profcol = start_profcol(&cfg).await;
    let (grpc, metrics) = (profcol.grpc_port(), profcol.metrics_port());

    let requests: Vec<ExportProfilesServiceRequest> = synth::requests(4, 500, 100)
        .into_iter()
        .map(|d| ExportProfilesServiceRequest {
            resource_profiles: d.resource_profiles,
            dictionary: d.dictionary,
        })
        .collect();
    send_all(grpc, &requests).await;
    let total: u64 = requests
        .iter()
        .flat_map(|r| profcol_model::profiles(&r.resource_profiles))
        .map(profcol_model::profile_sample_count)
        .sum();

    // Refused and retried: nothing arrives, nothing is given up.
    let started = Instant::now();
    while common::metric(
        metrics,
        "otelcol_exporter_send_failed_profile_samples_total",
    )
    .await
        == 0
        && started.elapsed() < Duration::from_secs(3)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sink.samples(),
        let_through,
        "the refusing Collector let data through"
    );
    assert_eq!(
        common::metric(
            metrics,
            "otelcol_exporter_send_failed_profile_samples_total"
        )
        .await,
        0,
        "profcol gave up on data the Collector refused retryably"
    );
    let queued = common::metric(metrics, "otelcol_exporter_queue_size").await;

    // The Collector comes back with room on the same ports (profcol sends
    // there), which it held until now.
    collector.signal("TERM");
    let _ = collector.wait(Duration::from_secs(20)).await;
    let roomy = collector_to_sink(&c_ports, sink.addr, "", "");
    let (_collector, _d2) = otelcol::start(&bin, &roomy, c_ports[2]).await;
    let started = Instant::now();
    while sink.samples() < let_through + total && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sink.samples(),
        let_through + total,
        "queued {queued} batches; not all arrived"
    );
    assert_eq!(
        common::metric(metrics, "otelcol_exporter_sent_profile_samples_total").await,
        total
    );
    assert_eq!(
        common::metric(
            metrics,
            "otelcol_exporter_send_failed_profile_samples_total"
        )
        .await,
        0
    );
    drop(profcol);
}

/// The Collector takes gRPC messages up to `max_recv_msg_size_mib` (4 MiB
/// unless set) and HTTP bodies up to `max_request_body_size`. A request
/// over it is sent again in parts at profile boundaries: every profile
/// arrives, as it was, and nothing is counted as failed. A single profile
/// over the limit cannot be cut: it is refused for good, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_collectors_size_limit_arrives_in_parts() {
    let Some(bin) = otelcol::binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start().await;
    let collector = |ports: &[u16]| {
        collector_to_sink(ports, sink.addr, "", ", max_recv_msg_size_mib: 1").replace(
            "http: {endpoint:",
            "http: {max_request_body_size: 1048576, endpoint:",
        )
    };
    let (_collector, _d, c_ports) = otelcol::start_on_free_ports(&bin, 3, collector).await;
    let (c_grpc, c_http) = (c_ports[0], c_ports[1]);
    // 1.5 MB: twelve resources with one profile each.
    let data = synth::Config {
        samples: 60_000,
        stacks: 5_000,
        resources: 12,
        ..synth::Config::default()
    }
    .build();
    let many = ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles.clone(),
        dictionary: data.dictionary.clone(),
    };
    assert!(many.encoded_len() > 1 << 20);
    let expected = all_seen(std::slice::from_ref(&many));
    let one = synth::Config {
        samples: 60_000,
        stacks: 5_000,
        ..synth::Config::default()
    }
    .build();
    let one = ExportProfilesServiceRequest {
        resource_profiles: one.resource_profiles,
        dictionary: one.dictionary,
    };

    for exporter in [
        format!("otlp: {{endpoint: \"127.0.0.1:{c_grpc}\", tls: {{insecure: true}}, compression: gzip}}"),
        format!("otlphttp: {{endpoint: \"http://127.0.0.1:{c_http}\", compression: zstd}}"),
    ] {
        let (before, before_samples) = (sink.received().len(), sink.samples());
        let cfg = forwarder(dir.path(), &exporter);
        let profcol = start_profcol(&cfg).await;
        let (grpc, metrics) = (profcol.grpc_port(), profcol.metrics_port());
        send_all(grpc, std::slice::from_ref(&many)).await;
        let started = Instant::now();
        while (sink.samples() < before_samples + 60_000
            || common::metric(metrics, "otelcol_exporter_sent_profile_samples_total").await < 60_000)
            && started.elapsed() < Duration::from_secs(20)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let got = all_seen(&sink.received()[before..]);
        if let Some(diff) = difference(&expected, &got) {
            panic!("{exporter}: {diff}");
        }
        assert!(sink.received().len() - before > 1, "{exporter}: sent whole");
        assert_eq!(
            common::metric(metrics, "otelcol_exporter_send_failed_profile_samples_total").await,
            0,
            "{exporter}"
        );

        // One profile over the limit: refused for good, counted, logged.
        send_all(grpc, std::slice::from_ref(&one)).await;
        let started = Instant::now();
        while common::metric(metrics, "otelcol_exporter_send_failed_profile_samples_total").await == 0
            && started.elapsed() < Duration::from_secs(20)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            common::metric(metrics, "otelcol_exporter_send_failed_profile_samples_total").await,
            60_000,
            "{exporter}"
        );
        profcol.signal("TERM");
        let (_, logs) = profcol.wait(Duration::from_secs(20)).await;
        assert!(logs.contains("larger than the peer takes"), "{exporter}: {logs}");
    }
}

/// The Profiles development version against the newest core Collector
/// (`tests/otelcol/latest.yaml`, v0.165.0, the first to check and send it):
/// - the same request with each value of `otlp-profiles-development-version`
///   (none, `1`, `2`, `01`, two values), over gRPC and HTTP, is accepted or
///   refused alike by profcol and the Collector, with the same status;
/// - `profcol -> otelcol -> profcol -> sink` over `otlp` and `otlphttp`, with
///   profcol's exporters told in `headers` to send version 7: the Collector
///   takes what profcol sends (profcol writes version 1, whatever `headers`
///   say) and profcol what the Collector sends (its own 1).
///
/// Every accepted request's samples reach the sink, and only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_collector_and_profcol_agree_on_the_development_version() {
    const KEY: &str = "otlp-profiles-development-version";
    let Some(bin) = otelcol::latest_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start().await;
    let b = forwarder(
        dir.path(),
        &format!(
            "otlp: {{endpoint: \"{}\", tls: {{insecure: true}}}}",
            sink.addr
        ),
    );
    let b = start_profcol(&b).await;
    let (b_grpc, b_http) = (b.grpc_port(), b.http_port());
    // The Collector sends what it takes on to the second profcol.
    let back = |ports: &[u16]| collector_to_sink(ports, format!("127.0.0.1:{b_grpc}"), "", "");
    let (mut c, _c_dir, c_ports) = otelcol::start_on_free_ports(&bin, 3, back).await;
    let (c_grpc, c_http) = (c_ports[0], c_ports[1]);
    let a = write(
        dir.path(),
        "a.yaml",
        &format!(
            r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
exporters:
  otlp: {{endpoint: "127.0.0.1:{c_grpc}", tls: {{insecure: true}}, headers: {{{KEY}: "7"}}}}
  otlphttp: {{endpoint: "http://127.0.0.1:{c_http}", headers: {{OTLP-Profiles-Development-Version: "7"}}}}
extensions:
  health_check: {{endpoint: "127.0.0.1:0"}}
service:
  extensions: [health_check]
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp, otlphttp]}}
"#
        ),
    );
    let mut a = start_profcol(&a).await;

    let request = common::request("otlp/minimal-request.bin");
    let samples: u64 = profcol_model::profiles(&request.resource_profiles)
        .map(profcol_model::profile_sample_count)
        .sum();
    let proto = request.encode_to_vec();
    let web = reqwest::Client::new();
    let mut deliveries = 0;
    let cases: [&[&str]; 5] = [&[], &["1"], &["2"], &["01"], &["1", "1"]];
    for values in cases {
        // (gRPC code, HTTP status) from profcol, then the Collector.
        let mut answers = Vec::new();
        for (grpc, http) in [(b_grpc, b_http), (c_grpc, c_http)] {
            let mut client = common::client(grpc).await;
            let mut req = tonic::Request::new(request.clone());
            for v in values {
                req.metadata_mut().append(KEY, v.parse().unwrap());
            }
            let code = match client.export(req).await {
                Ok(_) => tonic::Code::Ok,
                Err(s) => s.code(),
            };
            let mut req = web
                .post(format!("http://127.0.0.1:{http}/v1development/profiles"))
                .header("content-type", "application/x-protobuf")
                .body(proto.clone());
            for v in values {
                req = req.header("OTLP-Profiles-Development-Version", *v);
            }
            let status = req.send().await.unwrap().status().as_u16();
            deliveries += u64::from(code == tonic::Code::Ok) + u64::from(status == 200);
            answers.push((code, status));
        }
        let refused = values.len() > 1 || values.first().is_some_and(|v| *v != "1");
        let want = if refused {
            (tonic::Code::InvalidArgument, 400)
        } else {
            (tonic::Code::Ok, 200)
        };
        for (side, (code, status)) in ["profcol", "otelcol"].iter().zip(&answers) {
            assert_eq!(*code, want.0, "{side} gRPC {values:?}");
            assert_eq!(*status, want.1, "{side} HTTP {values:?}");
        }
    }
    // The chain: each request once through each of profcol's exporters.
    common::client(a.grpc_port())
        .await
        .export(request.clone())
        .await
        .unwrap();
    deliveries += 2;

    let want = deliveries * samples;
    let started = Instant::now();
    while sink.samples() < want && started.elapsed() < Duration::from_secs(30) {
        assert!(
            c.is_running() && a.is_running(),
            "a process of the chain exited"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        sink.samples(),
        want,
        "every accepted request arrives once, through profcol's two exporters too"
    );
    for md in sink.metadata() {
        let versions: Vec<_> = md.get_all(KEY).iter().collect();
        assert_eq!(versions, ["1"], "{md:?}");
    }
}
