//! `signaltometrics` beside the Collector v0.161.0's `signal_to_metrics`:
//! the same profiles and definitions make the same metric points (names,
//! types, attributes, values), each written by a `file` exporter.

use std::time::Duration;

use crate::common::{self, client, Ports};
use profcol_model::proto::metrics::{metric, ExportMetricsServiceRequest};
use profcol_model::proto::{ExportProfilesServiceRequest, ProfilesData};
use profcol_model::synth;

fn request(data: &ProfilesData) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles.clone(),
        dictionary: data.dictionary.clone(),
    }
}

const DEFINITIONS: &str = r#"
    profiles:
      - name: profiles.count
        description: Profiles received
        sum: {value: "1", monotonic: true}
      - name: profiles.by.service
        unit: "{profile}"
        include_resource_attributes: [{key: service.name}]
        attributes: [{key: thread.name, default_value: none}]
        sum: {value: "1"}
      - name: profiles.value
        include_resource_attributes: [{key: service.name}, {key: absent.key, optional: true}]
        histogram: {buckets: [1, 5, 10], value: "3", count: "2"}
      - name: profiles.expo
        include_resource_attributes: [{key: service.name}]
        exponential_histogram: {value: "3.5", count: "2", max_size: 4}
      - name: profiles.expo.default
        exponential_histogram: {value: "1000"}
      - name: profiles.duration
        unit: ns
        include_resource_attributes: [{key: absent.key, optional: true}]
        exponential_histogram: {value: "profile.duration_unix_nano", max_size: 3}
      - name: profiles.period
        histogram: {buckets: [1000, 10000000, 1000000000], value: "profile.period"}
      - name: profiles.duration.sum
        sum: {value: "profile.duration_unix_nano"}
      - name: profiles.gauge
        gauge: {value: "7"}
      - name: profiles.conditional
        conditions: ['resource.attributes["service.name"] != nil', 'resource.attributes["never"] != nil']
        sum: {value: "2.5"}
      - name: profiles.skipped
        conditions: ['resource.attributes["never"] != nil']
        sum: {value: "1"}
      - name: profiles.resource.include.absent
        include_resource_attributes: [{key: absent.key}, {key: service.name}]
        sum: {value: "1"}
      - name: profiles.keys.expression
        include_resource_attributes: [{keys_expression: 'Split("service.name,absent.key", ",")'}]
        attributes:
          - {key: thread.name, default_value: none}
          - {keys_expression: 'Split("thread.name,absent.key", ",")', optional: true}
          - {keys_expression: 'otelcol.client.metadata["x-dims"]', default_value: unset}
        sum: {value: "1"}
      - name: profiles.keys.nil
        attributes: [{keys_expression: 'otelcol.client.metadata["x-absent"]'}]
        sum: {value: "1"}
"#;

/// Each data point as text: metric, type, resource attributes (without
/// the instance id), point attributes, value; sorted.
fn points(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let req: ExportMetricsServiceRequest = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}: {e}\n{line}", path.display()));
        for rm in &req.resource_metrics {
            let mut res: Vec<String> = rm
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .filter(|kv| kv.key != "signal_to_metrics.service.instance.id")
                .map(|kv| format!("{}={:?}", kv.key, kv.value))
                .collect();
            res.sort();
            let ids = rm
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .filter(|kv| kv.key == "signal_to_metrics.service.instance.id")
                .count();
            assert_eq!(ids, 1, "{line}");
            for sm in &rm.scope_metrics {
                for m in &sm.metrics {
                    let head = format!("{} [{}] [{}] {:?}", m.name, m.description, m.unit, res);
                    let attrs = |a: &[profcol_model::proto::KeyValue]| {
                        let mut v: Vec<String> = a
                            .iter()
                            .map(|kv| format!("{}={:?}", kv.key, kv.value))
                            .collect();
                        v.sort();
                        v
                    };
                    match m.data.as_ref().unwrap() {
                        metric::Data::Sum(s) => {
                            for p in &s.data_points {
                                assert_eq!(p.start_time_unix_nano, 0);
                                out.push(format!(
                                    "{head} sum temporality={} monotonic={} {:?} {:?}",
                                    s.aggregation_temporality,
                                    s.is_monotonic,
                                    attrs(&p.attributes),
                                    p.value
                                ));
                            }
                        }
                        metric::Data::Gauge(g) => {
                            for p in &g.data_points {
                                out.push(format!(
                                    "{head} gauge {:?} {:?}",
                                    attrs(&p.attributes),
                                    p.value
                                ));
                            }
                        }
                        metric::Data::Histogram(h) => {
                            for p in &h.data_points {
                                out.push(format!(
                                    "{head} histogram temporality={} {:?} count={} sum={:?} {:?} {:?}",
                                    h.aggregation_temporality,
                                    attrs(&p.attributes),
                                    p.count,
                                    p.sum,
                                    p.bucket_counts,
                                    p.explicit_bounds
                                ));
                            }
                        }
                        metric::Data::ExponentialHistogram(h) => {
                            for p in &h.data_points {
                                out.push(format!(
                                    "{head} exponential temporality={} {:?} count={} sum={:?} scale={} zero={} min={:?} max={:?} +{:?} -{:?}",
                                    h.aggregation_temporality,
                                    attrs(&p.attributes),
                                    p.count,
                                    p.sum,
                                    p.scale,
                                    p.zero_count,
                                    p.min,
                                    p.max,
                                    p.positive,
                                    p.negative
                                ));
                            }
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_points_as_the_collectors_signal_to_metrics() {
    use crate::common::{otelcol, profcol, Running};

    let Some(bin) = otelcol::binary() else { return };
    let out = tempfile::tempdir().unwrap();
    let pipelines = "  pipelines:\n    profiles: {receivers: [otlp], exporters: [signal_to_metrics]}\n    metrics: {receivers: [signal_to_metrics], exporters: [file]}\n";
    let graph = |dir: &std::path::Path| {
        format!(
            "connectors:\n  signal_to_metrics:{DEFINITIONS}exporters:\n  file: {{path: \"{}/metrics.jsonl\"}}\n",
            dir.display()
        )
    };
    let requests: Vec<ExportProfilesServiceRequest> =
        ["otlp/minimal-request.bin", "otlp/two-resources-request.bin"]
            .iter()
            .map(|f| common::request(f))
            .chain(synth::service_requests(4, 3, 10).iter().map(request))
            .collect();
    let send = |port: u16| {
        let requests = requests.clone();
        async move {
            let mut c = client(port).await;
            for r in requests {
                // What the keys_expression over the metadata reads.
                let mut req = tonic::Request::new(r);
                req.metadata_mut()
                    .append("x-dims", "thread.name".parse().unwrap());
                req.metadata_mut()
                    .append("x-dims", "process.pid".parse().unwrap());
                c.export(req).await.unwrap();
            }
        }
    };
    let (c_dir, p_dir) = (out.path().join("otelcol"), out.path().join("profcol"));
    for d in [&c_dir, &p_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let (collector, _cfg_dir, ports) = otelcol::start_on_free_ports(&bin, 2, |p| {
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{}\", include_metadata: true}}}}}}\n{}extensions:\n  health_check: {{endpoint: \"127.0.0.1:{}\"}}\nservice:\n  extensions: [health_check]\n  telemetry: {{metrics: {{level: none}}}}\n{pipelines}",
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
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\", include_metadata: true}}}}}}\n{}service:\n  telemetry: {{metrics: {{level: none}}}}\n{pipelines}",
            graph(&p_dir)
        ),
    )
    .unwrap();
    let p = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    send(p.grpc_port()).await;
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "profcol: {code:?}\n{logs}");

    let c = points(&c_dir.join("metrics.jsonl"));
    let p = points(&p_dir.join("metrics.jsonl"));
    assert!(
        c.len() > requests.len(),
        "the Collector wrote {} points",
        c.len()
    );
    assert!(c.iter().any(|l| l.starts_with("profiles.value")), "{c:#?}");
    assert!(c.iter().any(|l| l.starts_with("profiles.expo")), "{c:#?}");
    // Durations of several sizes in one request make it downscale.
    assert!(
        c.iter()
            .any(|l| l.starts_with("profiles.duration ") && !l.contains("scale=20")),
        "{c:#?}"
    );
    assert!(
        c.iter().any(|l| l.starts_with("profiles.conditional")),
        "{c:#?}"
    );
    assert!(
        !c.iter().any(|l| l.starts_with("profiles.skipped")),
        "{c:#?}"
    );
    // An include list: a missing resource attribute is left out, the
    // point made all the same.
    assert!(
        c.iter()
            .any(|l| l.starts_with("profiles.resource.include.absent ")),
        "{c:#?}"
    );
    // keys_expression: the metadata's keys (a default for the absent
    // one), the last entry of a key winning; nil gives no key.
    assert!(
        c.iter().any(|l| l.starts_with("profiles.keys.expression ")
            && l.contains("process.pid=")
            && l.contains("unset")),
        "{c:#?}"
    );
    assert!(
        c.iter().any(|l| l.starts_with("profiles.keys.nil ")),
        "{c:#?}"
    );
    if p != c {
        let diff = similar::TextDiff::from_lines(&c.join("\n"), &p.join("\n"))
            .unified_diff()
            .header("otelcol", "profcol")
            .to_string();
        panic!("the points differ:\n{diff}");
    }
}
