//! The `resourcedetection` processor through the binary: what
//! `OTEL_RESOURCE_ATTRIBUTES` of the collector's own process and the host
//! say lands on every resource it exports.

use crate::common;

use std::time::{Duration, Instant};

use common::{client, request, Ports, Running, Sink};
use profcol_model::proto::{any_value::Value as A, request_into_data};

fn config(sink: &Sink, processor: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
processors:
  resourcedetection:
{processor}
exporters:
  otlp:
    endpoint: 127.0.0.1:{}
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [resourcedetection]
      exporters: [otlp]
"#,
        sink.addr.port()
    )
}

/// Each exported resource's attributes, `k=v`.
async fn through(processor: &str, env: &str) -> Vec<Vec<String>> {
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profcol.yaml");
    std::fs::write(&path, config(&sink, processor)).unwrap();
    let p = Running::ready(
        common::profcol()
            .arg("--config")
            .arg(&path)
            .env("OTEL_RESOURCE_ATTRIBUTES", env),
    )
    .await;
    let sent = request("otlp/two-resources-request.bin");
    client(p.grpc_port()).await.export(sent).await.unwrap();
    let started = Instant::now();
    while sink.received().is_empty() {
        if started.elapsed() > Duration::from_secs(20) {
            p.fail("nothing arrived").await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = request_into_data(sink.received().remove(0));
    got.resource_profiles
        .iter()
        .map(|rp| {
            rp.resource
                .iter()
                .flat_map(|r| &r.attributes)
                .map(
                    |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::StringValue(s)) => format!("{}={s}", kv.key),
                        other => format!("{}={other:?}", kv.key),
                    },
                )
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn detected_attributes_land_on_every_resource() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let env = "service.name=from-env,deployment.environment.name=staging%20eu";
    let got = through("    detectors: [env, system]", env).await;
    assert_eq!(got.len(), 2, "{got:?}");
    for attrs in &got {
        for want in [
            "service.name=from-env".to_string(),
            "deployment.environment.name=staging eu".into(),
            format!("host.name={}", host.trim()),
            "os.type=linux".into(),
        ] {
            assert!(attrs.contains(&want), "{want} missing: {attrs:?}");
        }
        assert_eq!(
            attrs
                .iter()
                .filter(|a| a.starts_with("service.name="))
                .count(),
            1,
            "{attrs:?}"
        );
    }

    // `override: false` keeps what the sender said.
    let kept = through("    detectors: [env]\n    override: false", env).await;
    let sent = request_into_data(request("otlp/two-resources-request.bin"));
    let mut named = 0;
    for (attrs, rp) in kept.iter().zip(&sent.resource_profiles) {
        let own = rp
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref()?.value.as_ref());
        if let Some(A::StringValue(name)) = own {
            assert!(attrs.contains(&format!("service.name={name}")), "{attrs:?}");
            named += 1;
        }
        assert!(attrs.contains(&"deployment.environment.name=staging eu".to_string()));
    }
    assert!(
        named > 0,
        "the request names no service: the check above ran on nothing"
    );
}
