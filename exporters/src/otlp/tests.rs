use tonic::Code;

use profcol_otlp::revisions::Revision;
use profcol_pipeline::component::ExportError;
use profcol_pipeline::config::{ComponentConfig, Duration, Kind};

use profcol_pipeline::runtime::create_exporter;

use super::*;

#[test]
fn empty_config_takes_the_collector_defaults() {
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "otlp", "{}").unwrap();
    let c: OtlpExporterConfig = cfg.decode().unwrap();
    assert_eq!(c, OtlpExporterConfig::default());
    assert_eq!(c.compression, Compression::Gzip);
    let with_endpoint =
        ComponentConfig::from_yaml(Kind::Exporter, "otlp", "endpoint: a:1").unwrap();
    let (_, s) = create_exporter(&*factory(), &with_endpoint).unwrap();
    assert_eq!(s.timeout, std::time::Duration::from_secs(5));
    let r = &s.retry_on_failure;
    assert!(r.enabled);
    assert_eq!(
        (
            r.initial_interval,
            r.max_interval,
            r.max_elapsed_time,
            r.multiplier
        ),
        (
            Duration::from_secs(5),
            Duration::from_secs(30),
            Duration::from_secs(300),
            1.5
        )
    );
    let q = &s.sending_queue;
    assert!(q.enabled && !q.block_on_overflow);
    assert_eq!((q.num_consumers, q.queue_size), (10, 1000));
    // An endpoint is required.
    assert_eq!(
        c.validate(&cfg).unwrap_err().to_string(),
        "exporters::otlp::endpoint: is required"
    );
}

#[test]
fn exact_decode() {
    let yaml = r#"
endpoint: gateway:4317
tls: {insecure: true}
headers: {x-scope-orgid: team-a}
compression: zstd
timeout: 250ms
retry_on_failure: {enabled: false, initial_interval: 1s, max_interval: 2s, max_elapsed_time: 0s, multiplier: 2}
sending_queue: {enabled: true, num_consumers: 2, queue_size: 50, block_on_overflow: true}
proto_revision: v1.9.0
"#;
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "otlp/gw", yaml).unwrap();
    let (_, settings) = create_exporter(&*factory(), &cfg).unwrap();
    let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
    let c: OtlpExporterConfig = rest.decode().unwrap();
    let want = OtlpExporterConfig {
        endpoint: "gateway:4317".into(),
        tls: TlsConfig {
            insecure: true,
            ..TlsConfig::default()
        },
        headers: [("x-scope-orgid".to_string(), "team-a".to_string())].into(),
        compression: Compression::Zstd,
        auth: None,
        proto_revision: Revision::V1_9_0,
        ..OtlpExporterConfig::default()
    };
    assert_eq!(c, want);
    assert!(c.plaintext());
    let want = ExporterSettings {
        timeout: std::time::Duration::from_millis(250),
        retry_on_failure: profcol_pipeline::config::RetrySettings {
            enabled: false,
            initial_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(2),
            max_elapsed_time: Duration::from_secs(0),
            multiplier: 2.0,
            ..Default::default()
        },
        sending_queue: profcol_pipeline::config::QueueSettings {
            enabled: true,
            num_consumers: 2,
            queue_size: 50,
            block_on_overflow: true,
            ..Default::default()
        },
    };
    assert_eq!(settings, want);
}

#[test]
fn proto_revision_names_a_revision_profcol_writes() {
    let decode = |yaml: &str| {
        let cfg = ComponentConfig::from_yaml(Kind::Exporter, "otlp/gw", yaml).unwrap();
        let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
        rest.decode::<OtlpExporterConfig>().unwrap()
    };
    assert_eq!(decode("endpoint: a:1").proto_revision, Revision::V1_10_0);
    for r in ["v1.7.0", "v1.8.0", "v1.9.0", "v1.10.0"] {
        let c = decode(&format!("endpoint: a:1\nproto_revision: {r}"));
        assert_eq!(c.proto_revision.as_str(), r);
    }
    let err = create_errors("endpoint: a:1\nproto_revision: v1.6.0").join("\n");
    assert!(
        err.contains("exporters::otlp/gw::proto_revision") && err.contains("v1.9.0"),
        "{err}"
    );
}

#[test]
fn scheme_decides_tls_as_the_collector_does() {
    let tls = |ep: &str, insecure: bool| {
        let c = OtlpExporterConfig {
            endpoint: ep.into(),
            tls: TlsConfig {
                insecure,
                ..TlsConfig::default()
            },
            ..OtlpExporterConfig::default()
        };
        !c.plaintext()
    };
    assert!(tls("gw:4317", false));
    assert!(!tls("gw:4317", true));
    assert!(!tls("http://gw:4317", false));
    assert!(tls("https://gw:4317", true));
}

/// Endpoints as the Collector's `configgrpc` checks them at validate (its
/// `otlpexporter` testdata): a port is required and must be a number, a
/// `unix://` socket path must not be empty; gRPC's `dns:///` and
/// `passthrough:///` targets name a host:port.
#[test]
fn endpoints_are_checked_as_the_collector_checks_them() {
    for (endpoint, want) in [
        ("gw:4317", Ok("gw:4317")),
        ("https://gw:4317", Ok("gw:4317")),
        ("http://[::1]:4317/", Ok("[::1]:4317")),
        ("dns:///gw:4317", Ok("gw:4317")),
        ("dns://8.8.8.8/gw:4317", Ok("gw:4317")),
        ("passthrough:///10.0.0.1:4317", Ok("10.0.0.1:4317")),
        (
            "example.com",
            Err("address example.com: missing port in address (write host:port, e.g. example.com:4317)"),
        ),
        ("example.com:port", Err("invalid port \"port\"")),
        ("example.com:", Err("invalid port \"\"")),
        ("::1:4317", Err("address ::1:4317: too many colons in address")),
        ("unix://", Err("unix socket path cannot be empty")),
        (
            "unix:///run/otlp.sock",
            Err("unix sockets are not supported: profcol's otlp exporter dials TCP, give host:port"),
        ),
        ("xds:///gw", Err("unsupported scheme \"xds\" (use host:port, http://, https://, dns:/// or passthrough:///)")),
    ] {
        assert_eq!(dial_target(endpoint), want.map_err(str::to_owned), "{endpoint}");
    }
    // At the key path, once.
    assert_eq!(
        create_errors("endpoint: example.com:port"),
        ["exporters::otlp/gw::endpoint: invalid endpoint \"example.com:port\": invalid port \"port\""]
    );
}

/// `keepalive`, `balancer_name` and the buffer sizes, as `configgrpc`
/// names them: keepalive with its meaning and defaults, `round_robin` (the
/// default) and `pick_first` (also `""`, gRPC's own default), the buffer
/// sizes with no effect; another balancer is refused.
#[test]
fn the_collectors_grpc_client_keys() {
    let cfg = ComponentConfig::from_yaml(
        Kind::Exporter,
        "otlp",
        "endpoint: a:1\nbalancer_name: pick_first\nread_buffer_size: 123\nwrite_buffer_size: 345\nkeepalive: {time: 20s, timeout: 30s, permit_without_stream: true}",
    )
    .unwrap();
    let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
    let c: OtlpExporterConfig = rest.decode().unwrap();
    assert_eq!(
        c.keepalive,
        ClientKeepalive {
            time: Duration::from_secs(20),
            timeout: Duration::from_secs(30),
            permit_without_stream: true
        }
    );
    assert!(create_exporter(&*factory(), &cfg).is_ok());
    let k = OtlpExporterConfig::default().keepalive;
    assert_eq!(k.interval(), Some(std::time::Duration::from_secs(10)));
    let short = ClientKeepalive {
        time: Duration::from_secs(1),
        ..k.clone()
    };
    assert_eq!(short.interval(), Some(std::time::Duration::from_secs(10)));
    let off = ClientKeepalive {
        time: Duration::from_secs(0),
        ..k
    };
    assert_eq!(off.interval(), None);
    let balancer = |b: &str| {
        let yaml = format!("endpoint: a:1\nbalancer_name: {b}");
        let cfg = ComponentConfig::from_yaml(Kind::Exporter, "otlp", &yaml).unwrap();
        let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
        let c: OtlpExporterConfig = rest.decode().unwrap();
        assert!(create_exporter(&*factory(), &cfg).is_ok(), "{b}");
        c.round_robin()
    };
    assert!(balancer("round_robin") && OtlpExporterConfig::default().round_robin());
    assert!(!balancer("pick_first") && !balancer("''"));
    let errs = create_errors("endpoint: a:1\nbalancer_name: nope").join("\n");
    assert!(errs.contains("invalid balancer_name \"nope\""), "{errs}");
}

#[test]
fn invalid_settings_name_their_key() {
    for (yaml, want) in [
        (
            "endpoint: a:1\ntimeout: 5 sec",
            "exporters::otlp/gw::timeout: invalid duration \"5 sec\"",
        ),
        (
            "endpoint: a:1\ncompression: lz4",
            "exporters::otlp/gw::compression: unsupported compression type \"lz4\": gRPC sends gzip, zstd, snappy or none",
        ),
        (
            "endpoint: a:1\ncompression: x-snappy-framed",
            "exporters::otlp/gw::compression: unsupported compression type \"x-snappy-framed\"",
        ),
        (
            "endpoint: a:1\ncompression: br",
            "exporters::otlp/gw::compression",
        ),
        (
            "endpoint: a:1\nretry_on_failure: {multiplier: 0.5}",
            "exporters::otlp/gw::retry_on_failure::multiplier: must be at least 1",
        ),
        (
            "endpoint: a:1\nsending_queue: {queue_size: 0}",
            "exporters::otlp/gw::sending_queue::queue_size: must be greater than 0",
        ),
        (
            "endpoint: a:1\nsending_queue: {sizer: items, storage: file_storage}",
            "exporters::otlp/gw::sending_queue::sizer: \"items\" is not supported with storage",
        ),
        (
            "endpoint: a:1\nheaders: {\"bad key\": v}",
            "exporters::otlp/gw::headers::bad key: invalid header name",
        ),
        (
            "endpoint: a:1\ntls: {cert_file: c.pem}",
            "exporters::otlp/gw::tls: cert_file and key_file must be set together",
        ),
    ] {
        let err = create_errors(yaml).join("\n");
        assert!(err.contains(want), "{yaml:?}: {err}");
    }
}

fn create_errors(yaml: &str) -> Vec<String> {
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "otlp/gw", yaml).unwrap();
    match create_exporter(&*factory(), &cfg) {
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
        Ok(_) => panic!("accepted {yaml}"),
    }
}

/// What `profcol validate` reports: every problem of the section at its
/// key path, the decode errors, the checks and what building the client
/// finds (the TLS files) together.
#[test]
fn every_problem_is_reported_at_once() {
    // One header with a bad name and a bad value: both.
    assert_eq!(
        create_errors("endpoint: a:1\nheaders: {\"bad name\": \"värde\"}"),
        [
            "exporters::otlp/gw::headers::bad name: invalid header name: gRPC metadata names are letters, digits, '-', '_' and '.' (the Collector takes this one here and then fails every export)",
            "exporters::otlp/gw::headers::bad name: invalid header value: only printable ASCII is allowed",
        ]
    );
    // A non-ASCII value under a good name (tonic alone would take it).
    assert_eq!(
        create_errors("endpoint: a:1\nheaders: {x-team: \"é\", x-ok: \"a b\"}"),
        ["exporters::otlp/gw::headers::x-team: invalid header value: only printable ASCII is allowed"]
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = |name: &str| dir.path().join(name).display().to_string();
    let errs = create_errors(&format!(
        "endpoint: https://gw:4317\ncompression: lz4\ntimeout: 0s\n\
         tls: {{ca_file: {}, cert_file: {}, key_file: {}}}",
        missing("ca.pem"),
        missing("cert.pem"),
        missing("key.pem")
    ));
    assert_eq!(
        errs,
        [
            r#"exporters::otlp/gw::compression: unsupported compression type "lz4": gRPC sends gzip, zstd, snappy or none"#.to_owned(),
            format!("exporters::otlp/gw::tls::ca_file: cannot read {}: No such file or directory (os error 2)", missing("ca.pem")),
            format!("exporters::otlp/gw::tls::cert_file: cannot read {}: No such file or directory (os error 2)", missing("cert.pem")),
            format!("exporters::otlp/gw::tls::key_file: cannot read {}: No such file or directory (os error 2)", missing("key.pem")),
            "exporters::otlp/gw::timeout: must be greater than 0".to_owned(),
        ]
    );
    // A missing endpoint is reported once, though both the checks and the
    // client find it.
    assert_eq!(
        create_errors("sending_queue: {num_consumers: 0}"),
        [
            "exporters::otlp/gw::endpoint: is required",
            "exporters::otlp/gw::sending_queue::num_consumers: must be between 1 and 1024, got 0 (each consumer is a task with its own buffers)",
        ]
    );
    assert_eq!(
        create_errors("endpoint: 'gw:4317/a b'"),
        [
            r#"exporters::otlp/gw::endpoint: invalid endpoint "gw:4317/a b": invalid port "4317/a b""#
        ]
    );
}

/// The Collector's OTLP exporter retries exactly these codes.
#[test]
fn retryable_codes_match_the_collector() {
    let table = [
        (Code::Ok, false),
        (Code::Cancelled, true),
        (Code::Unknown, false),
        (Code::InvalidArgument, false),
        (Code::DeadlineExceeded, true),
        (Code::NotFound, false),
        (Code::AlreadyExists, false),
        (Code::PermissionDenied, false),
        (Code::ResourceExhausted, false),
        (Code::FailedPrecondition, false),
        (Code::Aborted, true),
        (Code::OutOfRange, true),
        (Code::Unimplemented, false),
        (Code::Internal, false),
        (Code::Unavailable, true),
        (Code::DataLoss, true),
        (Code::Unauthenticated, false),
    ];
    for (code, want) in table {
        assert_eq!(is_retryable(code, false), want, "{code:?}");
    }
    assert!(
        is_retryable(Code::ResourceExhausted, true),
        "with RetryInfo"
    );
}

/// A connection that broke under the call is UNAVAILABLE to the Collector
/// (retried); an UNKNOWN the peer answered is permanent.
#[test]
fn a_broken_connection_is_retried_an_unknown_answer_is_not() {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset");
    let broken = tonic::Status::from_error(Box::new(io));
    assert_eq!(broken.code(), Code::Unknown, "tonic's own code");
    assert_eq!(effective_code(&broken), Code::Unavailable);
    match classify(&broken) {
        ExportError::Retryable { message, .. } => {
            assert!(message.contains("connection reset"), "{message}")
        }
        e => panic!("{e:?}"),
    }
    let answered = tonic::Status::unknown("handler panicked");
    assert_eq!(effective_code(&answered), Code::Unknown);
    assert!(matches!(classify(&answered), ExportError::Permanent { .. }));
}

#[test]
fn retry_info_sets_the_delay() {
    use tonic_types::{ErrorDetails, StatusExt};
    let details = ErrorDetails::with_retry_info(Some(std::time::Duration::from_millis(1500)));
    let status = tonic::Status::with_error_details(Code::ResourceExhausted, "slow down", details);
    match classify(&status) {
        profcol_pipeline::component::ExportError::Retryable { retry_after, .. } => {
            assert_eq!(retry_after, Some(std::time::Duration::from_millis(1500)))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        classify(&tonic::Status::invalid_argument("x")),
        profcol_pipeline::component::ExportError::Permanent { .. }
    ));
}

#[test]
fn partial_success_counts_the_rejected_share() {
    use super::client::rejected_samples;
    // (profiles, samples) in the batch, rejected profiles -> samples
    assert_eq!(rejected_samples(&(2, 100), 0), 0);
    assert_eq!(rejected_samples(&(2, 100), 1), 50);
    assert_eq!(rejected_samples(&(2, 100), 2), 100);
    assert_eq!(rejected_samples(&(2, 100), 7), 100, "never more than sent");
    assert_eq!(rejected_samples(&(3, 100), 1), 33);
    assert_eq!(
        rejected_samples(&(2, 100), -1),
        0,
        "a negative count is none"
    );
    assert_eq!(rejected_samples(&(0, 0), 1), 0);
}
