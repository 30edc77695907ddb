use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::expand::{expand_str, Expanded, Resolved};
use super::yaml::parse_document;
use super::*;

/// A component config shaped like an OTLP exporter plus a receiver's
/// `protocols`, with the Collector's defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Sample {
    endpoint: String,
    port: u16,
    insecure: bool,
    ratio: f64,
    timeout: Duration,
    headers: BTreeMap<String, String>,
    tags: Vec<String>,
    retry_on_failure: RetrySettings,
    sending_queue: QueueSettings,
    protocols: Protocols,
    compression: Compression,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Compression {
    #[default]
    Gzip,
    Zstd,
    None,
}

impl Default for Sample {
    fn default() -> Self {
        Self {
            endpoint: "localhost:4317".into(),
            port: 4317,
            insecure: false,
            ratio: 1.0,
            timeout: Duration::from_secs(5),
            headers: BTreeMap::new(),
            tags: Vec::new(),
            retry_on_failure: RetrySettings::default(),
            sending_queue: QueueSettings::default(),
            protocols: Protocols::default(),
            compression: Compression::Gzip,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Protocols {
    grpc: Option<Grpc>,
    http: Option<Grpc>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Grpc {
    endpoint: String,
    max_recv_msg_size_mib: u64,
}

impl Default for Grpc {
    fn default() -> Self {
        Self {
            endpoint: "localhost:4317".into(),
            max_recv_msg_size_mib: 4,
        }
    }
}

fn exporter(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Exporter, "otlp/gw", yaml).expect("valid YAML")
}

fn decode_errors(yaml: &str) -> Vec<String> {
    match exporter(yaml).decode::<Sample>() {
        Ok(v) => panic!("expected errors for {yaml:?}, decoded {v:?}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

fn load_errors(yaml: &str) -> Vec<String> {
    match load_str(yaml) {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

/// A pipeline that passes, to which a test adds what it needs.
const MINIMAL: &str = "
receivers: {otlp: }
exporters: {debug: }
service:
  pipelines:
    profiles: {receivers: [otlp], exporters: [debug]}
";

#[test]
fn empty_and_null_sections_decode_to_defaults() {
    for yaml in ["{}", "", "~", "null"] {
        let cfg = exporter(yaml);
        assert_eq!(
            cfg.value,
            figment::value::Value::from(figment::value::Dict::new()),
            "{yaml:?}"
        );
        assert_eq!(
            cfg.decode::<Sample>().unwrap(),
            Sample::default(),
            "{yaml:?}"
        );
    }
    // `debug:` with nothing in a loaded config is the same.
    let config = load_str(MINIMAL).unwrap();
    let debug = &config.exporters[&ComponentId::parse("debug").unwrap()];
    assert_eq!(debug.decode::<Sample>().unwrap(), Sample::default());
    assert_eq!(debug.path(), "exporters::debug");
}

#[test]
fn null_nested_struct_is_its_default_and_null_option_is_none() {
    let got: Sample = exporter("retry_on_failure:\nprotocols: {grpc: }\ntags:\nheaders:")
        .decode()
        .unwrap();
    assert_eq!(got, Sample::default());
    assert_eq!(got.protocols.grpc, None);
}

#[test]
fn decodes_every_field_exactly() {
    let got: Sample = exporter(
        r#"
endpoint: gateway:4317
port: 4318
insecure: true
ratio: 0.25
timeout: 1m30s
headers: {authorization: "Bearer x", x-scope: team-a}
tags: [a, b]
retry_on_failure:
  enabled: false
  initial_interval: 250ms
  max_interval: 10s
  max_elapsed_time: 0
  multiplier: 2
  randomization_factor: 0
sending_queue: {enabled: true, num_consumers: 2, queue_size: 50, block_on_overflow: true}
protocols:
  grpc: {endpoint: "0.0.0.0:4317", max_recv_msg_size_mib: 16}
compression: zstd
"#,
    )
    .decode()
    .unwrap();
    assert_eq!(
        got,
        Sample {
            endpoint: "gateway:4317".into(),
            port: 4318,
            insecure: true,
            ratio: 0.25,
            timeout: Duration::from_secs(90),
            headers: BTreeMap::from([
                ("authorization".into(), "Bearer x".into()),
                ("x-scope".into(), "team-a".into()),
            ]),
            tags: vec!["a".into(), "b".into()],
            retry_on_failure: RetrySettings {
                enabled: false,
                initial_interval: Duration::from_millis(250),
                max_interval: Duration::from_secs(10),
                max_elapsed_time: Duration::default(),
                multiplier: 2.0,
                randomization_factor: 0.0,
            },
            sending_queue: QueueSettings {
                enabled: true,
                num_consumers: 2,
                queue_size: 50,
                sizer: Default::default(),
                block_on_overflow: true,
                storage: None,
            },
            protocols: Protocols {
                grpc: Some(Grpc {
                    endpoint: "0.0.0.0:4317".into(),
                    max_recv_msg_size_mib: 16,
                }),
                http: None,
            },
            compression: Compression::Zstd,
        }
    );
}

#[test]
fn decode_errors_have_key_paths() {
    let retry_fields = r#"expected one of "enabled", "initial_interval", "max_interval", "max_elapsed_time", "multiplier", "randomization_factor""#;
    let cases: Vec<(&str, String)> = vec![
        (
            "retry_on_failure: {max_intervall: 5s}",
            format!(r#"exporters::otlp/gw::retry_on_failure: unknown field "max_intervall", {retry_fields}"#),
        ),
        (
            "protocols: {grpc: {endpont: x}}",
            r#"exporters::otlp/gw::protocols::grpc: unknown field "endpont", expected one of "endpoint", "max_recv_msg_size_mib""#.into(),
        ),
        (
            "protocols: {grpc: {endpoint: 5}}",
            "exporters::otlp/gw::protocols::grpc::endpoint: invalid type: expected a string, got integer 5".into(),
        ),
        (
            "protocols: {grpcc: }",
            r#"exporters::otlp/gw::protocols: unknown field "grpcc", expected one of "grpc", "http""#.into(),
        ),
        (
            "endpointt: x",
            r#"exporters::otlp/gw: unknown field "endpointt", expected one of "endpoint", "port", "insecure", "ratio", "timeout", "headers", "tags", "retry_on_failure", "sending_queue", "protocols", "compression""#.into(),
        ),
        ("timeout: 5 sec", r#"exporters::otlp/gw::timeout: invalid duration "5 sec""#.into()),
        (
            "retry_on_failure: {initial_interval: soon}",
            r#"exporters::otlp/gw::retry_on_failure::initial_interval: invalid duration "soon""#.into(),
        ),
        (
            "port: 70000",
            "exporters::otlp/gw::port: invalid value: expected u16, got integer 70000".into(),
        ),
        (
            "port: '4317'",
            r#"exporters::otlp/gw::port: invalid type: expected u16, got string "4317""#.into(),
        ),
        (
            "insecure: yes",
            r#"exporters::otlp/gw::insecure: invalid type: expected a boolean, got string "yes""#.into(),
        ),
        (
            "tags: [a, {x: 1}]",
            "exporters::otlp/gw::tags::1: invalid type: expected a string, got a map".into(),
        ),
        (
            "headers: [a]",
            "exporters::otlp/gw::headers: invalid type: expected a map, got a list".into(),
        ),
        (
            "compression: zstdd",
            r#"exporters::otlp/gw::compression: unknown value "zstdd", expected one of "gzip", "zstd", "none""#.into(),
        ),
        (
            "sending_queue: 5",
            "exporters::otlp/gw::sending_queue: invalid type: expected a map, got integer 5".into(),
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(decode_errors(yaml), vec![want], "{yaml}");
    }
}

#[test]
fn every_bad_key_of_a_section_is_reported_at_once() {
    let errs = decode_errors(
        "timeout: 5 sec\nretry_on_failure: {max_intervall: 1s, multiplier: x}\nport: -1\nprotocols: {grpc: {endpont: a}}",
    );
    assert_eq!(
        errs,
        vec![
            r#"exporters::otlp/gw::port: invalid value: expected u16, got integer -1"#.to_owned(),
            r#"exporters::otlp/gw::protocols::grpc: unknown field "endpont", expected one of "endpoint", "max_recv_msg_size_mib""#.into(),
            r#"exporters::otlp/gw::retry_on_failure: unknown field "max_intervall", expected one of "enabled", "initial_interval", "max_interval", "max_elapsed_time", "multiplier", "randomization_factor""#.into(),
            r#"exporters::otlp/gw::retry_on_failure::multiplier: invalid type: expected f64, got string "x""#.into(),
            r#"exporters::otlp/gw::timeout: invalid duration "5 sec""#.into(),
        ]
    );
}

/// A component's own checks, as a factory runs them after decoding: every
/// problem is pushed at its key path, none returns early.
fn check_sample(cfg: &ComponentConfig, s: &Sample) -> Result<(), ConfigErrors> {
    let mut errs = ConfigErrors::default();
    if s.endpoint.is_empty() {
        errs.push(cfg.key_path("endpoint"), "is required");
    }
    if s.timeout.get().is_zero() {
        errs.push(cfg.key_path("timeout"), "must be greater than 0");
    }
    if s.ratio > 1.0 {
        errs.push(cfg.key_path("ratio"), "must be at most 1");
    }
    s.retry_on_failure
        .validate(&cfg.key_path("retry_on_failure"), &mut errs);
    errs.into_result(())
}

fn checked_errors(yaml: &str) -> Vec<String> {
    let cfg = exporter(yaml);
    match cfg.decode_checked(|s: &Sample| check_sample(&cfg, s)) {
        Ok((v, ())) => panic!("expected errors for {yaml:?}, decoded {v:?}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn decode_checked_runs_every_check_after_a_decode_error() {
    // The decode errors first, then what the checks found in the rest.
    assert_eq!(
        checked_errors(
            "compression: lz4\nendpoint: ''\nratio: 2\nretry_on_failure: {multiplier: 0.5}"
        ),
        vec![
            r#"exporters::otlp/gw::compression: unknown value "lz4", expected one of "gzip", "zstd", "none""#,
            "exporters::otlp/gw::endpoint: is required",
            "exporters::otlp/gw::ratio: must be at most 1",
            "exporters::otlp/gw::retry_on_failure::multiplier: must be at least 1, got 0.5",
        ]
    );
    // An unknown key does not hide the checks either.
    assert_eq!(
        checked_errors("endpointt: x\nendpoint: ''"),
        vec![
            r#"exporters::otlp/gw: unknown field "endpointt", expected one of "endpoint", "port", "insecure", "ratio", "timeout", "headers", "tags", "retry_on_failure", "sending_queue", "protocols", "compression""#,
            "exporters::otlp/gw::endpoint: is required",
        ]
    );
    // A key that failed to decode takes its default, and what the checks
    // say at or under it is not reported on top of the decode error.
    let cfg = exporter("endpoint: [a]\ntimeout: 0s\nretry_on_failure: 5");
    let err = cfg
        .decode_checked(|s: &Sample| {
            assert_eq!(s.endpoint, Sample::default().endpoint);
            let mut errs = check_sample(&cfg, s).err().unwrap_or_default();
            errs.push(cfg.key_path("endpoint"), "about the default");
            errs.push(
                cfg.key_path("retry_on_failure::multiplier"),
                "about the default",
            );
            errs.push(cfg.key_path("endpoint_name"), "elsewhere");
            errs.into_result(())
        })
        .unwrap_err();
    assert_eq!(
        err.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            "exporters::otlp/gw::endpoint: invalid type: expected a string, got a list",
            "exporters::otlp/gw::retry_on_failure: invalid type: expected a map, got integer 5",
            "exporters::otlp/gw::timeout: must be greater than 0",
            "exporters::otlp/gw::endpoint_name: elsewhere",
        ]
    );
    // Nothing wrong: the value and what the checks returned.
    let cfg = exporter("endpoint: gw:4317");
    let (s, ()) = cfg
        .decode_checked(|s: &Sample| check_sample(&cfg, s))
        .unwrap();
    assert_eq!(s.endpoint, "gw:4317");
    // A section that cannot be decoded at all skips the checks.
    let cfg = exporter("tags: [a, {x: 1}]\nendpoint: ''");
    let err = cfg
        .decode_checked(|_: &Sample| -> Result<(), ConfigErrors> {
            panic!("checked what did not decode")
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "exporters::otlp/gw::tags::1: invalid type: expected a string, got a map"
    );
}

#[test]
fn both_keeps_every_error_of_either_once() {
    let a: Result<u8, _> = Err(ConfigErrors::one("x::a", "bad"));
    let b: Result<u8, _> = Err(ConfigErrors(vec![
        ConfigError {
            path: "x::a".into(),
            message: "bad".into(),
        },
        ConfigError {
            path: "x::b".into(),
            message: "worse".into(),
        },
    ]));
    assert_eq!(
        ConfigErrors::both(a, b).unwrap_err().to_string(),
        "x::a: bad\nx::b: worse"
    );
    assert_eq!(
        ConfigErrors::both(Ok::<_, ConfigErrors>(1), Ok::<_, ConfigErrors>(2)),
        Ok((1, 2))
    );
    assert!(ConfigErrors::both(
        Ok::<_, ConfigErrors>(1),
        Err::<u8, _>(ConfigErrors::one("y", "z"))
    )
    .is_err());
    let e = ConfigErrors::one("exporters::otlp::tls::ca_file", "x");
    assert!(e.0[0].is_at_or_under("exporters::otlp::tls"));
    assert!(e.0[0].is_at_or_under("exporters::otlp::tls::ca_file"));
    assert!(!e.0[0].is_at_or_under("exporters::otlp::tl"));
}

#[test]
fn missing_required_field_is_reported_at_its_parent() {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        auth: Auth,
    }
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Auth {
        dsn: String,
    }
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "sentry", "auth: {}").unwrap();
    assert_eq!(
        cfg.decode::<Strict>().unwrap_err().to_string(),
        r#"exporters::sentry::auth: missing required field "dsn""#
    );
    // A wrongly typed required field is reported once, not again as missing.
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "sentry", "auth: {dsn: [x]}").unwrap();
    assert_eq!(
        cfg.decode::<Strict>().unwrap_err().to_string(),
        "exporters::sentry::auth::dsn: invalid type: expected a string, got a list"
    );
}

#[test]
fn from_yaml_checks_id_and_shape() {
    assert_eq!(
        ComponentConfig::from_yaml(Kind::Receiver, "otlp/", "{}")
            .unwrap_err()
            .to_string(),
        r#"receivers::otlp/: invalid component name "" in id "otlp/""#
    );
    assert_eq!(
        ComponentConfig::from_yaml(Kind::Receiver, "otlp", "[1]")
            .unwrap_err()
            .to_string(),
        "receivers::otlp: invalid type: expected a map, got a list"
    );
    assert_eq!(
        ComponentConfig::from_yaml(Kind::Exporter, "otlp", "headers: {a: '${file:/k}'}")
            .unwrap_err()
            .to_string(),
        r#"exporters::otlp::headers::a: unsupported scheme "file" in "${file:/k}": only env is supported"#
    );
    assert_eq!(
        ComponentConfig::from_yaml(Kind::Receiver, "otlp", "a: !secret x")
            .unwrap_err()
            .to_string(),
        "receivers::otlp::a: YAML tag !secret is not supported"
    );
}

#[test]
fn invalid_configs_report_every_error_with_its_path() {
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [otlp/missing]}}}".to_owned(),
            vec![r#"service::pipelines::profiles::exporters: references exporter "otlp/missing" which is not configured"#],
        ),
        (
            "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp, sentry], processors: [batch], exporters: [debug]}}}".to_owned(),
            vec![
                r#"service::pipelines::profiles::receivers: references receiver "sentry" which is not configured"#,
                r#"service::pipelines::profiles::processors: references processor "batch" which is not configured"#,
            ],
        ),
        (
            "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipelines: {profiles: {exporters: [debug]}, profiles/b: {receivers: [otlp]}}}".to_owned(),
            vec![
                "service::pipelines::profiles: must have at least one receiver",
                "service::pipelines::profiles/b: must have at least one exporter",
            ],
        ),
        (
            "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipelines: {traces: {receivers: [otlp], exporters: [debug]}}}".to_owned(),
            vec![r#"service::pipelines::traces: only profiles and metrics pipelines are supported, not "traces"; profcol carries profiles, and metrics made of them by connectors: name it profiles[/NAME] or metrics[/NAME] (see README: Collector compatibility)"#],
        ),
        (
            "receivers: {1otlp: , otlp/: }\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug, debug]}}}".to_owned(),
            vec![
                r#"receivers::1otlp: invalid component type "1otlp" in id "1otlp""#,
                r#"receivers::otlp/: invalid component name "" in id "otlp/""#,
                r#"service::pipelines::profiles::receivers: references receiver "otlp" which is not configured"#,
                r#"service::pipelines::profiles::exporters: exporter "debug" is listed more than once"#,
            ],
        ),
        (
            "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug/]}}}".to_owned(),
            vec![r#"service::pipelines::profiles::exporters: invalid component name "" in id "debug/""#],
        ),
        (
            format!("{MINIMAL}connectors: {{debug: }}"),
            vec![r#"connectors::debug: ambiguous ID: found both "debug" exporter and "debug" connector; rename one of them (e.g. the connector to "debug/connector")"#],
        ),
        (
            format!("{MINIMAL}  extensions: [health_check, zpages]\nextensions: {{health_check: }}"),
            vec![r#"service::extensions: references extension "zpages" which is not configured"#],
        ),
        (
            format!("{MINIMAL}  telemetry: {{logs: {{level: verbose}}, metrics: {{level: loud}}}}"),
            vec![
                r#"service::telemetry::logs::level: invalid level "verbose", expected one of debug, info, warn, error"#,
                r#"service::telemetry::metrics::level: invalid level "loud", expected one of none, basic, normal, detailed"#,
            ],
        ),
        (
            format!("{MINIMAL}  telemetry: {{metrics: {{adress: x}}, logs: {{encodng: json}}, tracs: {{}}}}"),
            vec![
                r#"service::telemetry::logs: unknown field "encodng", expected one of "level", "encoding", "sampling", "development", "output_paths", "error_output_paths", "disable_caller", "disable_stacktrace", "initial_fields", "processors""#,
                r#"service::telemetry::metrics: unknown field "adress", expected one of "level", "address", "readers", "views""#,
                r#"service::telemetry: unknown field "tracs", expected one of "metrics", "logs", "resource", "traces""#,
            ],
        ),
        (
            // As the Collector: no reader is an error unless metrics are off.
            format!("{MINIMAL}  telemetry: {{metrics: {{level: basic, readers: []}}}}"),
            vec!["service::telemetry::metrics::readers: collector telemetry metrics reader should exist when metric level is not none (set level: none to turn /metrics off)"],
        ),
        (
            // The Collector's own traces: a level is checked; processors
            // must be a list.
            format!("{MINIMAL}  telemetry: {{traces: {{level: loud, processors: {{batch: {{}}}}}}}}"),
            vec![
                r#"service::telemetry::traces::processors: invalid type: expected a sequence, got a map"#,
                r#"service::telemetry::traces::level: invalid level "loud", expected one of none, basic, normal, detailed"#,
            ],
        ),
        (
            // Logs go to stderr, with no fields of their own, unexported.
            format!("{MINIMAL}  telemetry: {{logs: {{output_paths: [stderr, /var/log/p.log], error_output_paths: [stdout], initial_fields: {{a: b}}, processors: [{{batch: {{}}}}]}}}}"),
            vec![
                "service::telemetry::logs::output_paths: only [stderr] is supported: profcol writes its logs to stderr (the Collector's default); redirect stderr to keep them elsewhere",
                "service::telemetry::logs::error_output_paths: only [stderr] is supported: profcol writes its logs to stderr (the Collector's default); redirect stderr to keep them elsewhere",
                "service::telemetry::logs::initial_fields: is not supported: profcol's log lines carry no fields of their own; add them where the logs are collected",
                "service::telemetry::logs::processors: is not supported: profcol does not export its logs; they go to stderr, to be collected from there",
            ],
        ),
        (
            format!("{MINIMAL}  telemetry: {{metrics: {{readers: [{{pull: {{exporter: {{prometheus: {{host: 0.0.0.0, prt: 1}}}}}}}}]}}}}"),
            vec![r#"service::telemetry::metrics::readers::0::pull::exporter::prometheus: unknown field "prt", expected one of "host", "port""#],
        ),
        (
            format!("{MINIMAL}  telemetry: {{metrics: {{address: 'metrics.internal:8888'}}}}"),
            vec![r#"service::telemetry::metrics::address: invalid address "metrics.internal:8888": host "metrics.internal" must be an IP address or localhost"#],
        ),
        (
            format!("{MINIMAL}  telemetry: {{metrics: {{readers: [{{periodic: {{interval: 1000}}}}]}}}}"),
            vec!["service::telemetry::metrics::readers::0::periodic: periodic readers are not supported; use a pull reader with a prometheus exporter"],
        ),
        (
            format!("{MINIMAL}  telemetry: {{metrics: {{address: ':1', readers: []}}}}"),
            vec!["service::telemetry::metrics: set either address or readers, not both"],
        ),
        (
            format!("{MINIMAL}exporter: {{otlp: }}"),
            vec![r#"unknown top-level key "exporter", expected one of "receivers", "processors", "exporters", "extensions", "connectors", "service""#],
        ),
        (
            format!("{MINIMAL}processors: [batch]"),
            vec!["processors: invalid type: expected a map, got a list"],
        ),
        (
            "receivers: {otlp: 5}\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}".to_owned(),
            vec!["receivers::otlp: invalid type: expected a map, got integer 5"],
        ),
        (
            "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipeline: {}}".to_owned(),
            vec![
                r#"service: unknown field "pipeline", expected one of "extensions", "pipelines", "telemetry""#,
                "service::pipelines: must have at least one profiles pipeline",
            ],
        ),
        (String::new(), vec!["service::pipelines: must have at least one profiles pipeline"]),
        (
            "receivers: {otlp: }\nexporters: {otlp: {endpoint: '${file:/etc/endpoint}', headers: {a: '${http://x}'}}}\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [otlp]}}}".to_owned(),
            vec![
                r#"exporters::otlp::endpoint: unsupported scheme "file" in "${file:/etc/endpoint}": only env is supported"#,
                r#"exporters::otlp::headers::a: unsupported scheme "http" in "${http://x}": only env is supported"#,
            ],
        ),
        (
            "- a\n- b".to_owned(),
            vec!["config: the top level must be a map, got a list"],
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!(load_errors(&yaml), want, "\n{yaml}");
    }
}

#[test]
fn loads_a_full_config() {
    let config = load_str(
        r#"
receivers:
  otlp:
    protocols: {grpc: }
  sentry/py: {endpoint: "0.0.0.0:8000"}
processors:
  dictionary_dedup:
exporters:
  otlp/gw: {endpoint: "gw:4317"}
  pprof:
extensions:
  health_check:
service:
  extensions: [health_check]
  pipelines:
    profiles:
      receivers: [otlp, sentry/py]
      processors: [dictionary_dedup]
      exporters: [otlp/gw]
    profiles/archive:
      receivers: [otlp]
      exporters: [pprof]
  telemetry:
    logs: {level: WARN}
    metrics: {address: "0.0.0.0:9999", level: detailed}
"#,
    )
    .unwrap();
    let id = |s: &str| ComponentId::parse(s).unwrap();
    assert_eq!(
        config.receivers.keys().cloned().collect::<Vec<_>>(),
        vec![id("otlp"), id("sentry/py")]
    );
    assert_eq!(config.service.extensions, vec![id("health_check")]);
    assert_eq!(
        config.service.pipelines["profiles"],
        PipelineConfig {
            signal: crate::config::Signal::Profiles,
            receivers: vec![id("otlp"), id("sentry/py")],
            processors: vec![id("dictionary_dedup")],
            exporters: vec![id("otlp/gw")],
        }
    );
    assert_eq!(
        config.service.pipelines["profiles/archive"].exporters,
        vec![id("pprof")]
    );
    assert_eq!(
        config.service.telemetry,
        TelemetryConfig {
            metrics_address: Some("0.0.0.0:9999".parse().unwrap()),
            metrics_level: MetricsLevel::Detailed,
            logs_level: "warn".into(),
            logs_encoding: crate::config::LogsEncoding::Console,
        }
    );
    let sentry = &config.receivers[&id("sentry/py")];
    assert_eq!(sentry.kind, Kind::Receiver);
    assert_eq!(
        sentry.key_path("endpoint"),
        "receivers::sentry/py::endpoint"
    );
    assert_eq!(config.components().count(), 6);
}

#[test]
fn telemetry_forms() {
    let telemetry = |t: &str| {
        load_str(&format!("{MINIMAL}  telemetry: {t}"))
            .unwrap()
            .service
            .telemetry
    };
    let addr = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
    assert_eq!(
        load_str(MINIMAL).unwrap().service.telemetry,
        TelemetryConfig::default()
    );
    assert_eq!(telemetry("{}").metrics_address, addr("127.0.0.1:8888"));
    assert_eq!(telemetry("{metrics: {level: none}}").metrics_address, None);
    assert_eq!(
        telemetry("{metrics: {level: None, address: '0.0.0.0:1'}}").metrics_address,
        None
    );
    assert_eq!(
        telemetry("{metrics: {level: basic}}").metrics_address,
        addr("127.0.0.1:8888")
    );
    assert_eq!(
        telemetry("{metrics: {address: ':9090'}}").metrics_address,
        addr("0.0.0.0:9090")
    );
    assert_eq!(
        telemetry("{metrics: {address: 'localhost:9090'}}").metrics_address,
        addr("127.0.0.1:9090")
    );
    assert_eq!(
        telemetry("{metrics: {address: '[::1]:9090'}}").metrics_address,
        addr("[::1]:9090")
    );
    assert_eq!(
        telemetry("{metrics: {readers: [{pull: {exporter: {prometheus: {host: '0.0.0.0', port: 9464}}}}]}}")
            .metrics_address,
        addr("0.0.0.0:9464")
    );
    assert_eq!(
        telemetry(
            "{metrics: {readers: [{pull: {exporter: {prometheus: {host: '::1', port: 9464}}}}]}}"
        )
        .metrics_address,
        addr("[::1]:9464")
    );
    assert_eq!(
        telemetry("{metrics: {readers: [{pull: {exporter: {prometheus: {port: 1234}}}}]}}")
            .metrics_address,
        addr("127.0.0.1:1234")
    );
    assert_eq!(
        telemetry("{metrics: {level: none, readers: []}}").metrics_address,
        None
    );
    // The Collector's keys with nothing to do here: its own resource and
    // traces, the default log outputs, caller and stack traces.
    let t = telemetry(
        "{resource: {attributes: [{name: foo, value: bar}], detection/development: {detectors: [{host: {}}]}}, \
         traces: {level: basic, propagators: [tracecontext], processors: [{batch: {exporter: {otlp: {endpoint: 'x:4317'}}}}]}, \
         logs: {output_paths: [stderr], error_output_paths: [stderr], disable_caller: true, disable_stacktrace: true}}",
    );
    assert_eq!(t, TelemetryConfig::default());
    assert_eq!(telemetry("{logs: {level: debug}}").logs_level, "debug");
    // The Collector's default level is normal; levels are case-insensitive.
    let level = |t: &str| telemetry(t).metrics_level;
    assert_eq!(level("{}"), MetricsLevel::Normal);
    assert_eq!(level("{metrics: {level: none}}"), MetricsLevel::None);
    assert_eq!(level("{metrics: {level: Basic}}"), MetricsLevel::Basic);
    assert_eq!(level("{metrics: {level: normal}}"), MetricsLevel::Normal);
    assert_eq!(
        level("{metrics: {level: DETAILED}}"),
        MetricsLevel::Detailed
    );
}

#[test]
fn check_types_lists_known_types() {
    let config = load_str(
        "receivers: {otlp: , foo/a: }\nexporters: {debug: }\nservice: {pipelines: {profiles: {receivers: [otlp, foo/a], exporters: [debug]}}}",
    )
    .unwrap();
    let known = |kind: Kind| match kind {
        Kind::Receiver => vec!["sentry", "otlp"],
        Kind::Exporter => vec!["otlp"],
        Kind::Processor | Kind::Extension | Kind::Connector => vec![],
    };
    assert_eq!(
        config.check_types(known).unwrap_err().to_string(),
        "receivers::foo/a: unknown receiver type \"foo\" (known: otlp, sentry)\n\
         exporters::debug: unknown exporter type \"debug\" (known: otlp)"
    );
    let all = |_: Kind| ["otlp", "foo", "debug"];
    assert!(config.check_types(all).is_ok());
}

fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[test]
fn expands_strings_like_the_collector() {
    let env = lookup(&[
        ("HOST", "gw"),
        ("PORT", "4317"),
        ("EMPTY", ""),
        ("DOLLAR", "a$$b${x}"),
    ]);
    let text = |s: &str| match expand_str(s, &env).unwrap() {
        Expanded::Text(t) => t,
        Expanded::Unchanged => s.to_owned(),
        Expanded::Whole(r) => panic!("{s:?} expanded whole to {r:?}"),
    };
    assert_eq!(text("http://${env:HOST}:${PORT}/v1"), "http://gw:4317/v1");
    assert_eq!(text("x${env:UNSET}y"), "xy");
    assert_eq!(text("${env:UNSET}${env:HOST}"), "gw");
    assert_eq!(text("${env:UNSET:-a:b}/${env:EMPTY:-dflt}"), "a:b/");
    assert_eq!(text("pa$$word"), "pa$word");
    assert_eq!(text("$$${env:HOST}"), "$gw");
    assert_eq!(text("$${env:HOST}"), "${env:HOST}");
    assert_eq!(text("cost: $5 and $HOST"), "cost: $5 and $HOST");
    assert_eq!(text("$"), "$");
    assert_eq!(text("${env:HOST"), "${env:HOST");
    // An expanded value is not scanned again.
    assert_eq!(text("<${env:DOLLAR}>"), "<a$$b${x}>");
    assert_eq!(expand_str("no dollar", &env).unwrap(), Expanded::Unchanged);

    let whole = |s: &str| expand_str(s, &env).unwrap();
    assert_eq!(
        whole("${env:PORT}"),
        Expanded::Whole(Resolved::Set("4317".into()))
    );
    assert_eq!(
        whole("${PORT}"),
        Expanded::Whole(Resolved::Set("4317".into()))
    );
    assert_eq!(
        whole("${env:UNSET:-9}"),
        Expanded::Whole(Resolved::Default("9".into()))
    );
    assert_eq!(
        whole("${env:EMPTY:-9}"),
        Expanded::Whole(Resolved::Set(String::new()))
    );
    assert_eq!(whole("${env:UNSET}"), Expanded::Whole(Resolved::Unset));

    let err = |s: &str| expand_str(s, &env).unwrap_err();
    assert_eq!(
        err("${file:/x}"),
        r#"unsupported scheme "file" in "${file:/x}": only env is supported"#
    );
    assert_eq!(
        err("${HOST:-x}"),
        r#"unsupported scheme "HOST" in "${HOST:-x}": only env is supported; did you mean "${env:HOST:-x}"?"#
    );
    assert_eq!(
        err("${env:hello.world}"),
        r#"environment variable "hello.world" has invalid name: must match [a-zA-Z_][a-zA-Z0-9_]*"#
    );
    assert_eq!(err("${:x}"), r#"invalid reference "${:x}""#);
    // A one-letter name is no scheme, and a default may hold a colon.
    assert_eq!(
        err("${X:-backend:4317}"),
        r#"invalid reference "${X:-backend:4317}"; did you mean "${env:X:-backend:4317}"?"#
    );
    assert_eq!(
        whole("${env:UNSET:-backend:4317}"),
        Expanded::Whole(Resolved::Default("backend:4317".into()))
    );
    assert_eq!(
        err("${env:${HOST}}"),
        r#"nested references are not supported in "${env:${HOST}""#
    );
}

#[test]
fn whole_references_are_typed_and_keep_their_text() {
    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Typed {
        port: u16,
        port_text: String,
        hex: u32,
        hex_text: String,
        ratio: f64,
        ratio_text: String,
        on: bool,
        on_text: String,
        unset_port: u16,
        unset_text: String,
        unset_opt: Option<String>,
        null_text: String,
        timeout: Duration,
        embedded: String,
    }
    let env = lookup(&[
        ("P", "4317"),
        ("H", "0x1F"),
        ("R", "1.50"),
        ("B", "True"),
        ("N", "null"),
        ("T", "5s"),
    ]);
    let yaml = "
receivers: {otlp: }
service: {pipelines: {profiles: {receivers: [otlp], exporters: [typed/a]}}}
exporters:
  typed/a:
    port: ${env:P}
    port_text: ${env:P}
    hex: ${env:H}
    hex_text: ${env:H}
    ratio: ${env:R}
    ratio_text: ${env:R}
    on: ${env:B}
    on_text: ${env:B}
    unset_port: ${env:UNSET_PORT}
    unset_text: ${env:UNSET_TEXT}
    unset_opt: ${env:UNSET_OPT}
    null_text: ${env:N}
    timeout: ${env:T}
    embedded: port ${env:P}
";
    let root = figment::Figment::from(YamlProvider::string("test", yaml))
        .extract::<figment::value::Value>()
        .unwrap();
    let config = super::load::from_root(root, &env).unwrap();
    let cfg = &config.exporters[&ComponentId::parse("typed/a").unwrap()];
    // The tree holds typed scalars, as the Collector's resolver does.
    assert_eq!(cfg.value.find_ref("port").unwrap().to_u128(), Some(4317));
    assert_eq!(cfg.value.find_ref("on").unwrap().to_bool(), Some(true));
    assert_eq!(
        cfg.value.find_ref("embedded").unwrap().as_str(),
        Some("port 4317")
    );
    assert_eq!(
        cfg.originals
            .get(&vec!["hex".to_owned()])
            .map(String::as_str),
        Some("0x1F")
    );

    assert_eq!(
        cfg.decode::<Typed>().unwrap(),
        Typed {
            port: 4317,
            port_text: "4317".into(),
            hex: 31,
            hex_text: "0x1F".into(),
            ratio: 1.5,
            ratio_text: "1.50".into(),
            on: true,
            on_text: "True".into(),
            unset_port: 0,
            unset_text: String::new(),
            unset_opt: None,
            null_text: "null".into(),
            timeout: Duration::from_secs(5),
            embedded: "port 4317".into(),
        }
    );
}

#[test]
fn unset_reference_keeps_the_default_of_a_typed_field() {
    // Real environment variables, with names no other test uses.
    std::env::set_var("PROFCOL_CFGTEST_PORT", "4318");
    std::env::set_var("PROFCOL_CFGTEST_HOST", "collector");
    std::env::remove_var("PROFCOL_CFGTEST_UNSET");
    let config = load_str(
        "
exporters:
  otlp:
    endpoint: ${env:PROFCOL_CFGTEST_HOST}:${PROFCOL_CFGTEST_PORT}
    port: ${env:PROFCOL_CFGTEST_UNSET}
    timeout: ${env:PROFCOL_CFGTEST_UNSET}
    insecure: ${env:PROFCOL_CFGTEST_UNSET:-true}
    headers: {a: '${env:PROFCOL_CFGTEST_UNSET}', b: $$secret}
receivers: {otlp: }
service:
  pipelines:
    profiles: {receivers: [otlp], exporters: [otlp]}
  telemetry:
    metrics:
      readers:
        - pull: {exporter: {prometheus: {host: localhost, port: '${env:PROFCOL_CFGTEST_PORT}'}}}
",
    )
    .unwrap();
    let otlp: Sample = config.exporters[&ComponentId::parse("otlp").unwrap()]
        .decode()
        .unwrap();
    assert_eq!(otlp.endpoint, "collector:4318");
    assert_eq!(otlp.port, Sample::default().port);
    assert_eq!(otlp.timeout, Sample::default().timeout);
    assert!(otlp.insecure);
    assert_eq!(
        otlp.headers,
        BTreeMap::from([("a".into(), String::new()), ("b".into(), "$secret".into())])
    );
    assert_eq!(
        config.service.telemetry.metrics_address,
        Some("127.0.0.1:4318".parse().unwrap())
    );
}

#[test]
fn bad_expansion_inside_a_list_names_the_index() {
    assert_eq!(
        load_errors(&format!("{MINIMAL}  extensions: [a, '${{env:bad-name}}']")),
        vec![
            r#"service::extensions::1: environment variable "bad-name" has invalid name: must match [a-zA-Z_][a-zA-Z0-9_]*"#,
            r#"service::extensions: references extension "a" which is not configured"#,
        ]
    );
}

#[test]
fn an_unquoted_reference_inside_a_flow_list_gets_a_hint() {
    let errs = load_errors("receivers:\n  sentry:\n    keys: [${env:KEY}]\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("line 3")
            && errs[0].contains(r#"quote a ${...} reference: "${env:NAME}""#),
        "{errs:?}"
    );
    // Quoted, or in a block list, it parses.
    for keys in ["[\"${env:KEY}\"]", "\n      - ${env:KEY}"] {
        let yaml = format!("receivers:\n  sentry:\n    keys: {keys}\n");
        assert!(parse_document(&yaml).is_ok(), "{keys}");
    }
    // Other syntax errors get no hint.
    let errs = load_errors("receivers: [a, b\n");
    assert!(!errs[0].contains("quote"), "{errs:?}");
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    path
}

#[test]
fn later_files_win_maps_merge_and_lists_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        &dir,
        "base.yaml",
        "
receivers: {otlp: }
processors: {dictionary_dedup: , sampling: }
exporters:
  otlp/gw:
    endpoint: gw:4317
    tags: [a, b, c]
    retry_on_failure: {enabled: false, max_interval: 10s}
service:
  pipelines:
    profiles: {receivers: [otlp], processors: [dictionary_dedup, sampling], exporters: [otlp/gw]}
  telemetry: {logs: {level: debug}}
",
    );
    let overlay = write(
        &dir,
        "overlay.yaml",
        "
exporters:
  otlp/gw:
    tags: [z]
    retry_on_failure: {max_interval: 20s}
  pprof: {}
service:
  pipelines:
    profiles: {processors: [sampling], exporters: [otlp/gw, pprof]}
",
    );
    let config = load(&[base.clone(), overlay]).unwrap();
    let id = |s: &str| ComponentId::parse(s).unwrap();
    let gw: Sample = config.exporters[&id("otlp/gw")].decode().unwrap();
    assert_eq!(gw.endpoint, "gw:4317");
    assert_eq!(gw.tags, vec!["z".to_owned()]);
    assert!(!gw.retry_on_failure.enabled);
    assert_eq!(gw.retry_on_failure.max_interval, Duration::from_secs(20));
    assert!(config.exporters.contains_key(&id("pprof")));
    let p = &config.service.pipelines["profiles"];
    assert_eq!(p.receivers, vec![id("otlp")]);
    assert_eq!(p.processors, vec![id("sampling")]);
    assert_eq!(p.exporters, vec![id("otlp/gw"), id("pprof")]);
    assert_eq!(config.service.telemetry.logs_level, "debug");

    // The base alone is a whole config too.
    let alone = load(&[base]).unwrap();
    assert_eq!(alone.service.pipelines["profiles"].processors.len(), 2);
}

#[test]
fn file_errors_name_the_file_and_are_all_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let broken = write(&dir, "broken.yaml", "receivers:\n  otlp: [\n");
    let dup = write(&dir, "dup.yaml", "receivers: {}\nreceivers: {}\n");
    let errs = load(&[missing.clone(), broken.clone(), dup.clone()]).unwrap_err();
    let msgs: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(
        msgs[0],
        format!(
            "cannot read config file {:?}: No such file or directory (os error 2)",
            missing.display().to_string()
        )
    );
    assert!(
        msgs[1].starts_with(&format!("config file {:?}: ", broken.display().to_string()))
            && msgs[1].contains("line 3 column 1"),
        "{}",
        msgs[1]
    );
    assert_eq!(
        msgs[2],
        format!(
            "config file {:?}: duplicate entry with key \"receivers\"",
            dup.display().to_string()
        )
    );
    assert_eq!(load(&[]).unwrap_err().to_string(), "no config file given");
}

#[test]
fn yaml_anchors_and_merge_keys_work() {
    let config = load_str(
        "
exporters:
  otlp/a: &common {endpoint: 'a:4317', timeout: 1s}
  otlp/b:
    <<: *common
    endpoint: 'b:4317'
receivers: {otlp: }
service: {pipelines: {profiles: {receivers: [otlp], exporters: [otlp/a, otlp/b]}}}
",
    )
    .unwrap();
    let b: Sample = config.exporters[&ComponentId::parse("otlp/b").unwrap()]
        .decode()
        .unwrap();
    assert_eq!(b.endpoint, "b:4317");
    assert_eq!(b.timeout, Duration::from_secs(1));
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let deep = format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let errs = parse_document(&deep).unwrap_err();
    assert!(
        errs[0].1.contains("nest deeper than 64 levels") && errs[0].1.starts_with("line 1:"),
        "{errs:?}"
    );
    // Brackets inside quotes and comments do not count; real nesting does.
    let fine = format!(
        "a: '{0}'\nb: \"{0}\\\"\"\n# {0}\nc: {1}1{2}\n",
        "[".repeat(200),
        "[".repeat(64),
        "]".repeat(64)
    );
    assert!(parse_document(&fine).is_ok(), "{:?}", parse_document(&fine));
    let too_deep = format!("c: {}1{}\n", "{a: ".repeat(65), "}".repeat(65));
    assert!(parse_document(&too_deep).is_err());
}

#[test]
fn consumers_are_bounded() {
    for (n, ok) in [
        (0, false),
        (1, true),
        (1024, true),
        (1025, false),
        (1_000_000, false),
    ] {
        let mut errs = ConfigErrors::default();
        QueueSettings {
            num_consumers: n,
            ..QueueSettings::default()
        }
        .validate("exporters::otlp::sending_queue", &mut errs);
        assert_eq!(errs.0.is_empty(), ok, "{n}: {errs}");
        if !ok {
            assert!(
                errs.to_string().contains(
                    "exporters::otlp::sending_queue::num_consumers: must be between 1 and 1024"
                ),
                "{errs}"
            );
        }
    }
}

#[test]
fn logs_encoding_json_and_the_collectors_other_log_keys() {
    let telemetry = |t: &str| {
        load_str(&format!("{MINIMAL}  telemetry: {{logs: {t}}}\n")).map(|c| c.service.telemetry)
    };
    assert_eq!(
        telemetry("{encoding: json}").unwrap().logs_encoding,
        crate::config::LogsEncoding::Json
    );
    assert_eq!(
        telemetry("{encoding: Console, development: true, sampling: {enabled: true, tick: 10s, initial: 10, thereafter: 100}}")
            .unwrap()
            .logs_encoding,
        crate::config::LogsEncoding::Console
    );
    assert_eq!(
        telemetry("{encoding: logfmt, sampling: {tick: soon}}")
            .unwrap_err()
            .to_string(),
        "service::telemetry::logs::sampling::tick: invalid duration \"soon\"\n\
         service::telemetry::logs::encoding: invalid encoding \"logfmt\", expected one of console, json"
    );
}

#[test]
fn collector_uris_and_set_read_as_the_collector_does() {
    use crate::config::Source;
    assert_eq!(Source::parse("c.yaml"), Ok(Source::File("c.yaml".into())));
    assert_eq!(
        Source::parse("file:/etc/c.yaml"),
        Ok(Source::File("/etc/c.yaml".into()))
    );
    // One letter before a colon is a Windows drive, not a scheme.
    assert_eq!(
        Source::parse("C:/c.yaml"),
        Ok(Source::File("C:/c.yaml".into()))
    );
    assert_eq!(
        Source::parse("env:CFG:-receivers: {}"),
        Ok(Source::Env {
            name: "CFG".into(),
            default: Some("receivers: {}".into())
        })
    );
    assert_eq!(
        Source::parse("yaml:exporters::debug::verbosity: basic"),
        Ok(Source::Yaml("exporters::debug::verbosity: basic".into()))
    );
    assert!(Source::parse("s3:bucket/c.yaml")
        .unwrap_err()
        .contains("unsupported scheme \"s3\""));
    assert_eq!(
        Source::set("processors.batch.timeout = 2s"),
        Ok(Source::Yaml("processors::batch::timeout: 2s".into()))
    );
    assert!(Source::set("nothing").is_err());

    // `::` keys reach down and merge into what is there.
    let (config, errs) = crate::config::load_sources_partial(&[
        Source::Yaml(MINIMAL.into()),
        Source::Yaml("exporters::debug::verbosity: basic".into()),
        Source::Yaml(
            "exporters::debug::verbosity: detailed\nexporters::otlp::endpoint: x:1".into(),
        ),
    ])
    .unwrap();
    assert!(errs.is_empty(), "{errs}");
    let debug = &config.exporters[&ComponentId::parse("debug").unwrap()];
    assert_eq!(
        debug
            .value
            .clone()
            .find("verbosity")
            .and_then(|v| v.into_string()),
        Some("detailed".into())
    );
    assert!(config
        .exporters
        .contains_key(&ComponentId::parse("otlp").unwrap()));
}

/// A config with `otlp` in two profiles pipelines and a metrics one,
/// its `sending_queue` given `extra`.
fn batching_config(queue: &str) -> String {
    format!(
        r#"
receivers: {{otlp: , otlp/b: {{protocols: {{grpc: {{endpoint: "localhost:4400"}}}}}}}}
connectors: {{signaltometrics: {{profiles: [{{name: n, sum: {{value: "1"}}}}]}}}}
exporters:
  otlp: {{endpoint: "gw:4317", sending_queue: {queue}}}
  debug:
service:
  pipelines:
    profiles: {{receivers: [otlp], exporters: [otlp, debug, signaltometrics]}}
    profiles/b: {{receivers: [otlp/b], exporters: [otlp]}}
    metrics: {{receivers: [signaltometrics], exporters: [otlp]}}
"#
    )
}

/// The Collector's docs batch in the exporter (`sending_queue: {batch:}`):
/// the profiles pipelines that list it send to a `forward` connector, and
/// one pipeline with a `batch` processor of the section's sizes exports to
/// it; metrics pipelines keep sending to it directly.
#[test]
fn exporter_side_batching_puts_a_batch_pipeline_in_front_of_the_exporter() {
    let config = load_str(&batching_config(
        "{queue_size: 50, batch: {flush_timeout: 1s, min_size: 100, max_size: 1000, partition: {metadata_keys: [X-Tenant], cache_size: 7}}}",
    ))
    .unwrap();
    let id = |s: &str| ComponentId::parse(s).unwrap();
    let connector = id("forward/sending_queue_batch_otlp");
    let batcher = id("batch/sending_queue_otlp");
    let pipelines = &config.service.pipelines;
    assert_eq!(
        pipelines["profiles"].exporters,
        [id("debug"), id("signaltometrics"), connector.clone()]
    );
    assert_eq!(
        pipelines["profiles/b"].exporters,
        std::slice::from_ref(&connector)
    );
    assert_eq!(pipelines["metrics"].exporters, [id("otlp")]);
    assert_eq!(
        pipelines["profiles/sending_queue_batch_otlp"],
        PipelineConfig {
            signal: Signal::Profiles,
            receivers: vec![connector.clone()],
            processors: vec![batcher.clone()],
            exporters: vec![id("otlp")],
        }
    );
    assert_eq!(config.connectors[&connector].id.ty, "forward");
    let batch: serde_json::Value = config.processors[&batcher].decode().unwrap();
    assert_eq!(
        batch,
        serde_json::json!({"timeout": "1s", "sizer": "items", "send_batch_size": 100, "send_batch_max_size": 1000,
            "metadata_keys": ["X-Tenant"], "metadata_cardinality_limit": 7})
    );
    // The exporter keeps its queue, without `batch`.
    let (_, keys) = config.exporters[&id("otlp")].split_off(&EXPORTER_SETTINGS_KEYS);
    let keys: ExporterSettingsKeys = keys.decode().unwrap();
    assert_eq!(keys.sending_queue.unwrap().queue_size, 50);

    // `batch:` with nothing is batching with exporterhelper's defaults.
    let config = load_str(&batching_config("{batch: }")).unwrap();
    let batch: serde_json::Value = config.processors[&batcher].decode().unwrap();
    assert_eq!(
        batch,
        serde_json::json!({"timeout": "200ms", "sizer": "items", "send_batch_size": 8192, "send_batch_max_size": 0,
            "metadata_keys": [], "metadata_cardinality_limit": 10000})
    );
    // A disabled queue does not batch (the Collector's batch is in it).
    let config = load_str(&batching_config("{enabled: false, batch: {}}")).unwrap();
    assert!(config.processors.is_empty());
    assert_eq!(
        config.service.pipelines["profiles/b"].exporters,
        [id("otlp")]
    );
}

/// `sizer: items` (samples) sizes a queue in memory, as the Collector's
/// docs pair it with batching; a persistent queue cannot count its items
/// at start, and says so at the key.
#[test]
fn an_items_queue_is_taken_in_memory_not_with_storage() {
    let decode = |yaml: &str| {
        let cfg = ComponentConfig::from_yaml(Kind::Exporter, "otlp", yaml).unwrap();
        let (_, keys) = cfg.split_off(&EXPORTER_SETTINGS_KEYS);
        let keys: ExporterSettingsKeys = keys.decode().unwrap();
        let q = keys.sending_queue.unwrap();
        let mut errs = ConfigErrors::default();
        q.validate("exporters::otlp::sending_queue", &mut errs);
        (q.sizer, errs.to_string())
    };
    assert_eq!(
        decode("sending_queue: {sizer: items}"),
        (Sizer::Items, String::new())
    );
    let (_, err) = decode("sending_queue: {sizer: items, storage: file_storage}");
    assert!(
        err.starts_with(
            "exporters::otlp::sending_queue::sizer: \"items\" is not supported with storage"
        ),
        "{err}"
    );
}

/// exporterhelper's checks, each at its key under `sending_queue::batch`.
#[test]
fn exporter_side_batching_errors_name_their_key() {
    let at = "exporters::otlp::sending_queue";
    for (queue, want) in [
        (
            "{batch: {flush_timeout: 0s}}",
            format!("{at}::batch::flush_timeout: must be positive"),
        ),
        (
            "{batch: {min_size: -1}}",
            format!("{at}::batch::min_size: must be non-negative"),
        ),
        (
            "{batch: {min_size: 10, max_size: 5}}",
            format!(
                "{at}::batch::max_size: max_size (5) must be greater or equal to min_size (10)"
            ),
        ),
        (
            "{sizer: requests, batch: {}}",
            format!(
                "{at}::batch::sizer: batch supports only items or bytes sizer, found \"requests\""
            ),
        ),
        (
            "{batch: {partition: {metadata_keys: [a, A]}}}",
            format!(
                "{at}::batch::partition::metadata_keys::1: duplicate entry in metadata_keys: \"a\""
            ),
        ),
        (
            "{batch: {partition: {cache_size: 0}}}",
            format!("{at}::batch::partition::cache_size: must be positive"),
        ),
        (
            "{batch: {partition: {idle_timeout: 0s}}}",
            format!("{at}::batch::partition::idle_timeout: must be positive"),
        ),
        (
            "{batch: {flush_timout: 1s}}",
            format!("{at}::batch: unknown field"),
        ),
    ] {
        let err = load_str(&batching_config(queue)).unwrap_err().to_string();
        assert!(err.contains(&want), "{queue}: {err}");
    }
    // The ids it takes are the config's own.
    let taken = batching_config("{batch: {}}").replace(
        "  debug:\n",
        "  debug:\nprocessors: {batch/sending_queue_otlp: }\n",
    );
    let err = load_str(&taken).unwrap_err().to_string();
    assert!(
        err.contains(&format!("{at}::batch: batching in front of the exporter takes the ids \"forward/sending_queue_batch_otlp\", \"batch/sending_queue_otlp\"")),
        "{err}"
    );
    // With an items sizer stated, a requests queue batches.
    load_str(&batching_config("{sizer: requests, batch: {sizer: items}}")).unwrap();
    // The batch counts bytes when it says so, or when the queue does and
    // it says nothing.
    for (queue, want) in [
        ("{batch: {sizer: bytes}}", "bytes"),
        ("{sizer: bytes, batch: {}}", "bytes"),
        ("{sizer: bytes, batch: {sizer: items}}", "items"),
    ] {
        let config = load_str(&batching_config(queue)).unwrap();
        let batcher = ComponentId::parse("batch/sending_queue_otlp").unwrap();
        let batch: serde_json::Value = config.processors[&batcher].decode().unwrap();
        assert_eq!(batch["sizer"], want, "{queue}");
    }
}
