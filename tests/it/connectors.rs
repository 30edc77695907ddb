//! Connectors in a running collector: the `forward` connector feeds one
//! pipeline's output to others, a batch is accepted by every pipeline it
//! reaches or refused by all, and the graph checks (each connector used
//! both ways with matching signals, no cycle) report at key paths, with the
//! Collector's words. The same graph of `forward` connectors writes the same
//! profiles in the Collector v0.161.0 as in profcol.

use std::time::Duration;

use tonic::Code;

use crate::common::{self, client, until, Ports, Sink};
use profcol_model::proto::{request_into_data, ExportProfilesServiceRequest, ProfilesData};
use profcol_model::{synth, ProfileBatch};
use profcol_pipeline::runtime::RuntimeOptions;

fn request(data: &ProfilesData) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles.clone(),
        dictionary: data.dictionary.clone(),
    }
}

fn samples(d: &ProfilesData) -> u64 {
    ProfileBatch::new(d.clone()).sample_count()
}

fn received(sink: &Sink) -> u64 {
    sink.received()
        .into_iter()
        .map(request_into_data)
        .map(|d| samples(&d))
        .sum()
}

fn exporter(name: &str, port: u16, extra: &str) -> String {
    format!("  otlp/{name}: {{endpoint: \"127.0.0.1:{port}\", tls: {{insecure: true}}{extra}}}\n")
}

/// One pipeline exports to an exporter and to `forward`; `forward` feeds
/// two pipelines, one through a `batch` processor. Every exporter gets
/// every sample; the accounting holds per exporter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_feeds_every_pipeline_it_is_a_receiver_of() {
    let (direct, a, b) = (
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    );
    let yaml = format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
processors:
  batch: {{send_batch_size: 100000, timeout: 1h}}
connectors:
  forward:
exporters:
{}{}{}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles/in: {{receivers: [otlp], exporters: [otlp/direct, forward]}}
    profiles/a: {{receivers: [forward], exporters: [otlp/a]}}
    profiles/b: {{receivers: [forward], processors: [batch], exporters: [otlp/b]}}
"#,
        exporter("direct", direct.addr.port(), ""),
        exporter("a", a.addr.port(), ""),
        exporter("b", b.addr.port(), ""),
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let t = svc.telemetry().clone();
    let inputs = synth::service_requests(50, 5, 20);
    let total: u64 = inputs.iter().map(samples).sum();
    let mut c = client(svc.grpc_port()).await;
    for d in &inputs {
        c.export(request(d)).await.unwrap();
    }
    assert_eq!(t.accepted("otlp"), total);
    until(Duration::from_secs(20), "direct and a sent", || {
        t.sent("otlp/direct") == total && t.sent("otlp/a") == total
    })
    .await;
    // `batch` holds what reached profiles/b until shutdown.
    assert_eq!(svc.held_samples(), total);
    svc.shutdown().await;
    assert_eq!(t.sent("otlp/b"), total);
    for (name, sink) in [("direct", &direct), ("a", &a), ("b", &b)] {
        assert_eq!(received(sink), total, "otlp/{name}");
    }
    // The batch merged what forward handed it.
    assert!(b.received().len() < inputs.len(), "{}", b.received().len());
}

/// A stateful stage before a connector: what `batch` emits at shutdown
/// still reaches the pipeline after the connector (pipelines finish
/// upstream first) and its exporter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_batch_holds_crosses_a_connector_at_shutdown() {
    let out = Sink::start().await;
    let yaml = format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
processors:
  batch: {{send_batch_size: 100000, timeout: 1h}}
connectors:
  forward/hop1:
  forward/hop2:
exporters:
{}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles/z: {{receivers: [otlp], processors: [batch], exporters: [forward/hop1]}}
    profiles/m: {{receivers: [forward/hop1], processors: [batch], exporters: [forward/hop2]}}
    profiles/a: {{receivers: [forward/hop2], exporters: [otlp/out]}}
"#,
        exporter("out", out.addr.port(), ""),
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let t = svc.telemetry().clone();
    let inputs = synth::service_requests(20, 4, 10);
    let total: u64 = inputs.iter().map(samples).sum();
    let mut c = client(svc.grpc_port()).await;
    for d in &inputs {
        c.export(request(d)).await.unwrap();
    }
    assert_eq!(svc.held_samples(), total);
    svc.shutdown().await;
    assert_eq!(t.sent("otlp/out"), total);
    assert_eq!(received(&out), total);
    assert_eq!(t.exporter_dropped_total("forward/hop1"), 0);
}

/// A pipeline after a connector that cannot take a batch (its exporter's
/// queue is full: the peer is down) refuses it for every pipeline before
/// the connector: the client is told to retry, and the exporter beside the
/// connector never sends a refused batch, so nothing is sent twice when
/// the client retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pipeline_after_a_connector_refuses_the_batch_everywhere() {
    let direct = Sink::start().await;
    let (_down, down_port) = common::refusing_port();
    let yaml = format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
connectors:
  forward:
exporters:
{}{}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles/in: {{receivers: [otlp], exporters: [otlp/direct, forward]}}
    profiles/out: {{receivers: [forward], exporters: [otlp/down]}}
"#,
        exporter("direct", direct.addr.port(), ""),
        exporter(
            "down",
            down_port,
            ", sending_queue: {queue_size: 2, num_consumers: 1}, retry_on_failure: {max_elapsed_time: 1h}"
        ),
    );
    let svc = profcol::app::start_str(&yaml, RuntimeOptions::default())
        .await
        .unwrap();
    let t = svc.telemetry().clone();
    let inputs = synth::service_requests(10, 2, 10);
    let each = samples(&inputs[0]);
    assert!(inputs.iter().all(|d| samples(d) == each));
    let mut c = client(svc.grpc_port()).await;
    let mut refused = 0;
    for d in &inputs {
        match c.export(request(d)).await {
            Ok(_) => {}
            Err(s) => {
                assert_eq!(s.code(), Code::Unavailable, "{s}");
                refused += 1;
            }
        }
    }
    // One being sent, two queued: the rest refused.
    assert!(refused >= 10 - 3, "{refused} refused");
    let accepted = t.accepted("otlp");
    assert_eq!(accepted + t.refused("otlp"), 10 * each);
    assert_eq!(t.refused("otlp"), refused * each);
    until(Duration::from_secs(20), "direct sent", || {
        t.sent("otlp/direct") == accepted
    })
    .await;
    assert_eq!(received(&direct), accepted);
    assert_eq!(t.enqueue_failed("otlp/down"), refused * each);
    svc.shutdown_with(Duration::from_millis(200)).await;
}

fn errors(yaml: &str) -> Vec<String> {
    match profcol::app::load_str(yaml) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

const HEAD: &str = r#"
receivers:
  otlp:
exporters:
  debug:
connectors:
  forward:
  forward/2:
"#;

#[test]
fn the_graph_is_checked_at_key_paths() {
    let cases: &[(&str, &[&str])] = &[
        (
            "    profiles: {receivers: [otlp], exporters: [forward]}\n",
            &[r#"service::pipelines::profiles::exporters: connector "forward" used as exporter in [profiles] pipeline but not used in any supported receiver pipeline"#],
        ),
        (
            "    profiles: {receivers: [otlp], exporters: [debug]}\n    profiles/b: {receivers: [forward], exporters: [debug]}\n",
            &[r#"service::pipelines::profiles/b::receivers: connector "forward" used as receiver in [profiles/b] pipeline but not used in any supported exporter pipeline"#],
        ),
        (
            "    profiles/a: {receivers: [otlp, forward/2], exporters: [forward]}\n    profiles/b: {receivers: [forward], exporters: [debug, forward/2]}\n",
            &[r#"service::pipelines: cycle detected: pipeline "profiles/a" -> connector "forward" -> pipeline "profiles/b" -> connector "forward/2" -> pipeline "profiles/a""#],
        ),
        (
            "    profiles/a: {receivers: [otlp, forward], exporters: [debug, forward]}\n",
            &[r#"service::pipelines: cycle detected: pipeline "profiles/a" -> connector "forward" -> pipeline "profiles/a""#],
        ),
        (
            "    profiles: {receivers: [otlp], exporters: [forward/3]}\n",
            &[r#"service::pipelines::profiles::exporters: references exporter "forward/3" which is not configured"#],
        ),
    ];
    for (pipelines, want) in cases {
        let yaml = format!("{HEAD}service:\n  pipelines:\n{pipelines}");
        assert_eq!(errors(&yaml), *want, "{yaml}");
    }
    // Ambiguous: a connector and an exporter of one id.
    let yaml = "receivers: {otlp: }\nexporters: {forward: }\nconnectors: {forward: }\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [forward]}}}";
    let errs = errors(yaml);
    assert!(
        errs.iter().any(|e| e.starts_with(
            r#"connectors::forward: ambiguous ID: found both "forward" exporter and "forward" connector"#
        )),
        "{errs:?}"
    );
    let yaml = format!("{HEAD}  sum:\nservice:\n  pipelines:\n    profiles: {{receivers: [otlp], exporters: [debug]}}\n");
    let yaml = yaml
        .replace("  sum:\n", "")
        .replace("connectors:\n", "connectors:\n  sum:\n");
    assert_eq!(
        errors(&yaml),
        [
            r#"connectors::sum: unknown type "sum"; profcol has no sum connector (see docs/collector-compatibility.md)"#
        ]
    );
    let yaml = format!(
        "{HEAD}service:\n  pipelines:\n    profiles: {{receivers: [otlp], exporters: [debug]}}\n"
    )
    .replace("  forward:\n", "  forward: {foo: 1}\n");
    assert_eq!(
        errors(&yaml),
        [r#"connectors::forward: unknown field "foo", there are no fields"#]
    );
}

/// The same profiles through the same graph in the Collector v0.161.0 and
/// in profcol: `forward` forks one pipeline into two, one of which goes on
/// through a second `forward`; each pipeline's `file` exporter writes the
/// same profiles in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_fans_out_as_the_collectors_does() {
    use crate::common::{otelcol, profcol, Running};
    use crate::file_exporter::profiles;

    let Some(bin) = otelcol::binary() else { return };
    let out = tempfile::tempdir().unwrap();
    let graph = |dir: &std::path::Path| {
        format!(
            r#"connectors:
  forward:
  forward/2:
exporters:
  file/direct: {{path: "{d}/direct.jsonl"}}
  file/a: {{path: "{d}/a.jsonl"}}
  file/c: {{path: "{d}/c.jsonl"}}
"#,
            d = dir.display()
        )
    };
    const PIPELINES: &str = r#"  pipelines:
    profiles: {receivers: [otlp], exporters: [file/direct, forward]}
    profiles/a: {receivers: [forward], exporters: [file/a]}
    profiles/b: {receivers: [forward], exporters: [forward/2]}
    profiles/c: {receivers: [forward/2], exporters: [file/c]}
"#;
    let requests: Vec<ExportProfilesServiceRequest> =
        ["otlp/minimal-request.bin", "otlp/two-resources-request.bin"]
            .iter()
            .map(|f| common::request(f))
            .chain(synth::service_requests(5, 3, 10).iter().map(request))
            .collect();
    let send = |port: u16| {
        let requests = requests.clone();
        async move {
            let mut c = client(port).await;
            for r in requests {
                c.export(r).await.unwrap();
            }
        }
    };

    let (c_dir, p_dir) = (out.path().join("otelcol"), out.path().join("profcol"));
    for d in [&c_dir, &p_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let (collector, _cfg_dir, ports) = otelcol::start_on_free_ports(&bin, 2, |p| {
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{}\"}}}}}}\n{}extensions:\n  health_check: {{endpoint: \"127.0.0.1:{}\"}}\nservice:\n  extensions: [health_check]\n  telemetry: {{metrics: {{level: none}}}}\n{PIPELINES}",
            p[0],
            graph(&c_dir),
            p[1]
        )
    })
    .await;
    send(ports[0]).await;
    collector.signal("TERM");
    let (code, logs) = collector.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "the Collector: {code:?}\n{logs}");

    let cfg = out.path().join("profcol.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\"}}}}}}\n{}service:\n  telemetry: {{metrics: {{level: none}}}}\n{PIPELINES}",
            graph(&p_dir)
        ),
    )
    .unwrap();
    let p = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    send(p.grpc_port()).await;
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "profcol: {code:?}\n{logs}");

    let sorted = |path: std::path::PathBuf| {
        let mut v: Vec<String> = profiles(&path).iter().map(|p| format!("{p:?}")).collect();
        v.sort();
        v
    };
    let direct = sorted(c_dir.join("direct.jsonl"));
    assert!(direct.len() >= requests.len(), "{} profiles", direct.len());
    for name in ["direct.jsonl", "a.jsonl", "c.jsonl"] {
        let (c, p) = (sorted(c_dir.join(name)), sorted(p_dir.join(name)));
        assert_eq!(c, direct, "{name}: the Collector forwards every profile");
        assert_eq!(p, c, "{name}");
    }
}
