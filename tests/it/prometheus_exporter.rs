//! Profiles as metrics, end to end: signaltometrics (`context: sample`)
//! into the `prometheus` exporter, read back by the official Python
//! client's parser, and into the `otlphttp` exporter, read back by a
//! receiver made of the OpenTelemetry Python protos. Both give, per
//! service and leaf function, the sum of the sample values sent.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{client, profcol, Ports, Running};
use profcol_model::proto::{
    any_value, ExportProfilesServiceRequest, ProfilesData, ProfilesDictionary, Sample,
};
use profcol_model::synth;

type Totals = BTreeMap<(String, String), i64>;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/metrics_check.py")
}

fn leaf(dict: &ProfilesDictionary, s: &Sample) -> Option<String> {
    let stack = dict.stack_table.get(s.stack_index as usize)?;
    let loc = dict
        .location_table
        .get(*stack.location_indices.first()? as usize)?;
    let f = dict
        .function_table
        .get(loc.lines.first()?.function_index as usize)?;
    dict.string_table.get(f.name_strindex as usize).cloned()
}

/// The oracle: sample values summed per (service.name, leaf function).
fn expected(data: &[ProfilesData]) -> Totals {
    let mut out = Totals::new();
    for d in data {
        let dict = d.dictionary.as_ref().unwrap();
        for rp in &d.resource_profiles {
            let service = rp
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    any_value::Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                });
            let Some(service) = service else { continue };
            for sp in &rp.scope_profiles {
                for p in &sp.profiles {
                    for s in &p.samples {
                        let Some(f) = leaf(dict, s) else { continue };
                        *out.entry((service.clone(), f)).or_default() +=
                            s.values.iter().sum::<i64>();
                    }
                }
            }
        }
    }
    out
}

/// The samples of `/metrics`, parsed by prometheus_client's parser.
fn parse_prometheus(python: &Path, text: &str) -> Vec<serde_json::Value> {
    let mut child = Command::new(python)
        .arg(script())
        .arg("prom")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn prometheus_totals(samples: &[serde_json::Value]) -> Totals {
    let mut out = Totals::new();
    for s in samples {
        if s["name"] != "profile_cpu_time_nanoseconds_total" {
            continue;
        }
        assert_eq!(s["type"], "counter", "{s}");
        let l = &s["labels"];
        let key = (
            l["job"].as_str().unwrap().to_owned(),
            l["function_name"].as_str().unwrap().to_owned(),
        );
        let prev = out.insert(key, s["value"].as_f64().unwrap() as i64);
        assert!(prev.is_none(), "one series per service and function: {s}");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_by_service_and_function_reaches_prometheus_and_otlp_receivers() {
    let Some(python) = profcol_model::testing::python(&[
        "prometheus_client",
        "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2",
    ]) else {
        return;
    };
    let mut receiver = Command::new(&python)
        .arg(script())
        .arg("otlp-receiver")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(receiver.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let port = first["port"].as_u64().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("profcol.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
connectors:
  signaltometrics:
    profiles:
      - name: profile.cpu.time
        description: CPU time by service and leaf function
        unit: ns
        context: sample
        include_resource_attributes: [{{key: service.name}}]
        attributes: [{{key: function.name}}]
        sum: {{value: sample.value, monotonic: true}}
exporters:
  prometheus: {{endpoint: "127.0.0.1:0"}}
  otlphttp: {{endpoint: "http://127.0.0.1:{port}", compression: gzip}}
service:
  telemetry: {{metrics: {{level: none}}}}
  pipelines:
    profiles: {{receivers: [otlp], exporters: [signaltometrics]}}
    metrics: {{receivers: [signaltometrics], exporters: [prometheus, otlphttp]}}
"#
        ),
    )
    .unwrap();
    let p = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    let data = synth::service_requests(6, 3, 40);
    let want = expected(&data);
    assert!(want.len() > 10, "{want:?}");
    let mut c = client(p.grpc_port()).await;
    for d in &data {
        c.export(ExportProfilesServiceRequest {
            resource_profiles: d.resource_profiles.clone(),
            dictionary: d.dictionary.clone(),
        })
        .await
        .unwrap();
    }

    // The metrics follow the profiles' acceptance: scrape until the
    // counters have taken every request.
    let url = format!("http://{}/metrics", p.addr("exporters::prometheus"));
    let total: i64 = want.values().sum();
    let mut got = Totals::new();
    let mut text = String::new();
    for _ in 0..100 {
        text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        got = prometheus_totals(&parse_prometheus(&python, &text));
        if got.values().sum::<i64>() == total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(got, want, "{text}");
    assert!(
        text.contains("# TYPE profile_cpu_time_nanoseconds_total counter"),
        "{text}"
    );
    assert!(text.contains("target_info{"), "{text}");

    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "{code:?}\n{logs}");
    drop(receiver.stdin.take());
    let mut otlp = Totals::new();
    for line in lines {
        let point: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        assert_eq!(point["name"], "profile.cpu.time");
        assert_eq!(point["unit"], "ns");
        assert_eq!(point["monotonic"], true);
        // DELTA, as the Collector's signaltometrics sends.
        assert_eq!(point["temporality"], 1);
        let key = (
            point["resource"]["service.name"]
                .as_str()
                .unwrap()
                .to_owned(),
            point["attributes"]["function.name"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        *otlp.entry(key).or_default() += point["value"].as_i64().unwrap();
    }
    assert!(receiver.wait().unwrap().success());
    assert_eq!(otlp, want);
}
