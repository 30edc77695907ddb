//! The `attributes` processor through the binary: the Collector README's
//! example actions and its testdata's `include`, on profile attributes
//! that several profiles share in the dictionary.

use crate::common;

use std::time::Duration;

use common::{client, Ports, Sink};
use profcol_model::proto::{
    any_value::Value as A, data_into_request, request_into_data, AnyValue, KeyValue,
    KeyValueAndUnit, ProfilesData,
};
use profcol_model::{synth, validate, ProfileBatch};
use profcol_pipeline::runtime::RuntimeOptions;

/// The README's example (`processor/attributesprocessor/README.md`
/// v0.161.0, the block after "Default Values") and testdata's
/// `attributes/regexp` include, made a profiles pipeline.
fn config(sink: &Sink) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
        include_metadata: true
processors:
  attributes/example:
    actions:
      - key: db.table
        action: delete
      - key: redacted_span
        value: true
        action: upsert
      - key: copy_key
        from_attribute: key_original
        action: update
      - key: account_id
        value: 2245
        action: insert
      - key: account_password
        action: delete
      - key: account_email
        action: hash
      - key: http.status_code
        action: convert
        converted_type: int
      # Use default_value when source attribute doesn't exist
      - key: region
        from_attribute: cloud.region
        default_value: "us-east-1"
        action: insert
      # Use default_value when context value is not available
      - key: tenant_id
        from_context: "metadata.tenant"
        default_value: "default-tenant"
        action: upsert
  attributes/regexp:
    include:
      match_type: regexp
      services: ["auth.*"]
    actions:
      - key: password
        action: update
        value: "obfuscated"
      - key: token
        action: delete
exporters:
  otlp:
    endpoint: 127.0.0.1:{}
    tls:
      insecure: true
service:
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [attributes/example, attributes/regexp]
      exporters: [otlp]
"#,
        sink.addr.port()
    )
}

fn str_kv(k: &str, v: &str) -> (String, AnyValue) {
    (
        k.to_owned(),
        AnyValue {
            value: Some(A::StringValue(v.to_owned())),
        },
    )
}

/// Two resources (`synth-app`, `auth-service`), one profile each; both
/// profiles point at the same seven attribute entries.
fn input() -> ProfilesData {
    let mut data = synth::Config {
        samples: 200,
        stacks: 20,
        resources: 2,
        ..Default::default()
    }
    .build();
    let set_service = |kvs: &mut Vec<KeyValue>, name: &str| {
        let kv = kvs.iter_mut().find(|kv| kv.key == "service.name").unwrap();
        kv.value = Some(str_kv("", name).1);
    };
    set_service(
        &mut data.resource_profiles[1]
            .resource
            .as_mut()
            .unwrap()
            .attributes,
        "auth-service",
    );
    let d = data.dictionary.as_mut().unwrap();
    let mut indices = Vec::new();
    for (k, v) in [
        str_kv("db.table", "users"),
        str_kv("account_password", "hunter2"),
        str_kv("account_email", "a@b.c"),
        str_kv("http.status_code", "200"),
        str_kv("key_original", "orig"),
        str_kv("copy_key", "old"),
        str_kv("password", "secret"),
    ] {
        d.string_table.push(k);
        d.attribute_table.push(KeyValueAndUnit {
            key_strindex: d.string_table.len() as i32 - 1,
            value: Some(v),
            unit_strindex: 0,
        });
        indices.push(d.attribute_table.len() as i32 - 1);
    }
    for rp in &mut data.resource_profiles {
        rp.scope_profiles[0].profiles[0].attribute_indices = indices.clone();
    }
    validate(&data).unwrap();
    data
}

/// Each profile's attributes, `k=v` in order (ints as `Ni`).
fn profile_attrs(data: &ProfilesData) -> Vec<Vec<String>> {
    let d = data.dictionary.as_ref().unwrap();
    profcol_model::profiles(&data.resource_profiles)
        .map(|p| {
            p.attribute_indices
                .iter()
                .map(|&i| {
                    let a = &d.attribute_table[i as usize];
                    let k = &d.string_table[a.key_strindex as usize];
                    match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::StringValue(s)) => format!("{k}={s}"),
                        Some(A::IntValue(i)) => format!("{k}={i}i"),
                        Some(A::BoolValue(b)) => format!("{k}={b}"),
                        other => format!("{k}={other:?}"),
                    }
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn the_readme_actions_run_on_each_profiles_attributes() {
    let sink = Sink::start().await;
    let svc = profcol::app::start_str(&config(&sink), RuntimeOptions::default())
        .await
        .unwrap();
    let sent = input();
    let samples = ProfileBatch::new(sent.clone()).sample_count();
    let mut req = tonic::Request::new(data_into_request(sent));
    req.metadata_mut().insert("tenant", "acme".parse().unwrap());
    client(svc.grpc_port()).await.export(req).await.unwrap();
    let started = std::time::Instant::now();
    while sink.received().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nothing arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    svc.shutdown().await;

    let got = sink.received();
    assert_eq!(got.len(), 1);
    let got = request_into_data(got[0].clone());
    validate(&got).unwrap();
    assert_eq!(ProfileBatch::new(got.clone()).sample_count(), samples);
    // In the map's order: a delete moves the last entry into the hole
    // (`pcommon.Map.Remove`), insert and upsert append.
    let common = |password: &str| {
        [
            format!("password={password}"),
            "account_id=2245i".into(),
            // sha256("a@b.c"), as `sha256sum` gives it.
            "account_email=d648b243a3e817eaa3309e00e183483f2867baadf522099f0c2121770536b25a".into(),
            "http.status_code=200i".into(),
            "key_original=orig".into(),
            "copy_key=orig".into(),
            "redacted_span=true".into(),
            "region=us-east-1".into(),
            "tenant_id=acme".into(),
        ]
        .to_vec()
    };
    assert_eq!(
        profile_attrs(&got),
        [common("secret"), common("obfuscated")],
        "synth-app's profile keeps its password; auth-service's is obfuscated"
    );
}
