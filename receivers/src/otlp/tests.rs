use profcol_pipeline::config::{ComponentConfig, Kind};

use super::*;

fn decode(yaml: &str) -> Result<OtlpReceiverConfig, String> {
    let cfg =
        ComponentConfig::from_yaml(Kind::Receiver, "otlp", yaml).map_err(|e| e.to_string())?;
    let c: OtlpReceiverConfig = cfg.decode().map_err(|e| e.to_string())?;
    c.validate(&cfg).map_err(|e| e.to_string())?;
    Ok(c)
}

#[test]
fn empty_and_null_grpc_take_the_defaults() {
    for yaml in ["{}", "protocols:\n  grpc:\n", "protocols: {grpc: {}}"] {
        let c = decode(yaml).unwrap();
        assert_eq!(c.grpc(), Some(GrpcConfig::default()), "{yaml}");
        assert_eq!(c.grpc().unwrap().endpoint, "localhost:4317");
        assert_eq!(c.grpc().unwrap().max_recv_msg_size_mib, 64);
        assert_eq!(c.http(), None, "{yaml}");
    }
}

#[test]
fn a_protocol_is_on_when_its_key_is_present() {
    let c = decode("protocols: {http: }").unwrap();
    assert_eq!(c.grpc(), None, "http alone: no gRPC");
    assert_eq!(c.http(), Some(HttpConfig::default()));
    assert_eq!(c.http().unwrap().server.endpoint, "localhost:4318");
    assert_eq!(
        c.http().unwrap().profiles_url_path,
        "/v1development/profiles"
    );
    let c = decode("protocols: {grpc: , http: {endpoint: '127.0.0.1:5318'}}").unwrap();
    assert!(c.grpc().is_some() && c.http().is_some());
    let e =
        decode("protocols: {grpc: {endpoint: ':4317'}, http: {endpoint: ':4317'}}").unwrap_err();
    assert!(
        e.contains("protocols::http::endpoint: :4317 is also the gRPC endpoint"),
        "{e}"
    );
    let e = decode("protocols: {http: {cors: {allowed_origin: []}}}").unwrap_err();
    assert!(
        e.contains("protocols::http::cors: unknown field \"allowed_origin\""),
        "{e}"
    );
    let e = decode("protocols: {http: {profiles_url_path: v1/profiles}}").unwrap_err();
    assert!(e.contains("profiles_url_path: must start with '/'"), "{e}");
}

#[test]
fn exact_decode() {
    let c = decode("protocols:\n  grpc:\n    endpoint: localhost:5317\n    max_recv_msg_size_mib: 8\n    max_concurrent_streams: 16\n").unwrap();
    assert_eq!(
        c.grpc(),
        Some(GrpcConfig {
            endpoint: "localhost:5317".into(),
            max_recv_msg_size_mib: 8,
            max_concurrent_streams: 16,
            transport: "tcp".into(),
            ..GrpcConfig::default()
        })
    );
}

#[test]
fn the_collectors_keepalive_example_decodes() {
    // From the Collector's configgrpc README.
    let c = decode(
        "protocols:\n  grpc:\n    keepalive:\n      server_parameters:\n        max_connection_idle: 11s\n        max_connection_age: 12s\n        max_connection_age_grace: 13s\n        time: 30s\n        timeout: 5s\n      enforcement_policy:\n        min_time: 10s\n        permit_without_stream: true\n",
    )
    .unwrap();
    let s = c.grpc().unwrap().server_settings();
    assert_eq!(s.idle_timeout, Some(std::time::Duration::from_secs(11)));
    assert_eq!(
        s.max_connection_age,
        Some(std::time::Duration::from_secs(12))
    );
    assert_eq!(
        s.max_connection_age_grace,
        Some(std::time::Duration::from_secs(13))
    );
    assert_eq!(s.keepalive_time, Some(std::time::Duration::from_secs(30)));
    assert_eq!(s.keepalive_timeout, std::time::Duration::from_secs(5));
}

#[test]
fn invalid_settings_name_their_key() {
    for (yaml, want) in [
        (
            "protocols: {grpc: {endpoint: nope}}",
            "receivers::otlp::protocols::grpc::endpoint: invalid endpoint \"nope\"",
        ),
        (
            "protocols: {grpc: {endpoint: \":99999\"}}",
            "receivers::otlp::protocols::grpc::endpoint: invalid endpoint \":99999\": bad port",
        ),
        (
            "protocols: {grpc: {max_recv_msg_size_mib: 0}}",
            "receivers::otlp::protocols::grpc::max_recv_msg_size_mib: must be between 1 and 4095",
        ),
        (
            "protocols: {grpc: {endpoint: a:1, max_recv_msg_sise_mib: 3}}",
            "receivers::otlp::protocols::grpc: unknown field",
        ),
        (
            "protocols: {grpc: {transport: unix}}",
            "receivers::otlp::protocols::grpc::transport: unsupported transport",
        ),
    ] {
        let err = decode(yaml).unwrap_err();
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

/// What `profcol validate` reports: every problem of the section, a key
/// that fails to decode together with the checks of the others.
#[test]
fn every_problem_is_reported_at_once() {
    let cfg = ComponentConfig::from_yaml(
        Kind::Receiver,
        "otlp",
        "protocols: {grpc: {endpoint: nope, max_recv_msg_size_mib: 0, max_concurrent_streams: -1}}\nrecord_to: ''",
    )
    .unwrap();
    let err = match OtlpReceiverFactory.create(&cfg) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted a bad config"),
    };
    assert_eq!(
        err,
        "receivers::otlp::protocols::grpc::max_concurrent_streams: invalid value: expected u32, got integer -1\n\
         receivers::otlp::protocols::grpc::endpoint: invalid endpoint \"nope\": expected host:port\n\
         receivers::otlp::protocols::grpc::max_recv_msg_size_mib: must be between 1 and 4095, got 0\n\
         receivers::otlp::record_to: must be a directory, not empty"
    );
}

/// The Collector's keys that change nothing for profiles load: gRPC-Go's
/// buffer sizes, the URL paths of the other signals (checked as the
/// Collector parses them). A unix socket is refused at `transport`, not
/// at the socket path.
#[test]
fn the_collectors_other_keys() {
    let c = decode(
        "protocols:\n  grpc: {read_buffer_size: 1024, write_buffer_size: 1024}\n  http: {traces_url_path: traces, metrics_url_path: /v2/metrics, logs_url_path: log/ingest}",
    )
    .unwrap();
    assert_eq!(c.grpc().unwrap().read_buffer_size, Some(1024));
    assert_eq!(
        c.http().unwrap().metrics_url_path.as_deref(),
        Some("/v2/metrics")
    );
    for (yaml, want) in [
        (
            "protocols: {http: {traces_url_path: ':invalid'}}",
            "receivers::otlp::protocols::http::traces_url_path: invalid HTTP URL path set for signal: missing protocol scheme",
        ),
        (
            "protocols: {grpc: {transport: unix, endpoint: /tmp/grpc_otlp.sock}, http: {transport: unix, endpoint: /tmp/http_otlp.sock}}",
            "receivers::otlp::protocols::grpc::transport: unsupported transport \"unix\": profcol listens on TCP only (host:port)\n\
             receivers::otlp::protocols::http::transport: unsupported transport \"unix\": profcol listens on TCP only (host:port)",
        ),
    ] {
        assert_eq!(decode(yaml).unwrap_err(), want, "{yaml}");
    }
}

#[test]
fn record_to_is_off_by_default_and_decodes() {
    let c = decode("{}").unwrap();
    assert_eq!((c.record_to.as_deref(), c.record_max_files), (None, 1000));
    let c = decode("record_to: /var/lib/profcol/otlp\nrecord_max_files: 0\n").unwrap();
    assert_eq!(
        (c.record_to.as_deref(), c.record_max_files),
        (Some("/var/lib/profcol/otlp"), 0)
    );
    let err = decode("record_to: \"\"\n").unwrap_err();
    assert!(
        err.contains("receivers::otlp::record_to: must be a directory"),
        "{err}"
    );
    let err = decode("record_max_files: -1\n").unwrap_err();
    assert!(err.contains("receivers::otlp"), "{err}");
}

mod record_to {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
    use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
    use prost::Message;
    use tokio_util::sync::CancellationToken;
    use tonic::codec::CompressionEncoding;

    use profcol_pipeline::component::ReceiverContext;
    use profcol_pipeline::config::{ComponentConfig, Kind};
    use profcol_pipeline::telemetry::Telemetry;

    fn fixture_request() -> ExportProfilesServiceRequest {
        let bytes = profcol_model::testing::fixture("otlp/minimal-request.bin");
        ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap()
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    async fn wait_for(path: &Path) {
        for _ in 0..500 {
            if path.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} was not written", path.display());
    }

    /// The receiver started from YAML, as the service starts it; a gzip
    /// request with metadata is recorded decompressed, secrets redacted.
    #[tokio::test]
    async fn accepted_requests_are_recorded_as_binpb_refused_ones_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let rec_dir = dir.path().join("captures/otlp");
        let port = free_port();
        let yaml = format!(
            "protocols: {{grpc: {{endpoint: \"127.0.0.1:{port}\"}}}}\nrecord_to: {}\n",
            rec_dir.display()
        );
        let cfg = ComponentConfig::from_yaml(Kind::Receiver, "otlp/prod", &yaml).unwrap();
        let receiver = super::super::factory().create(&cfg).unwrap();
        let telemetry = Arc::new(Telemetry::new());
        let (output, mut rx) =
            profcol_pipeline::testing::capture("otlp/prod", 8, 1 << 30, telemetry.clone());
        let shutdown = CancellationToken::new();
        let ctx = ReceiverContext {
            id: "otlp/prod".into(),
            output,
            shutdown: shutdown.clone(),
            telemetry,
            authenticators: Default::default(),
            storages: Default::default(),
        };
        let task = receiver.start(ctx).await.unwrap();
        assert!(rec_dir.is_dir(), "record_to is created at start");

        let mut client = ProfilesServiceClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .unwrap()
            .send_compressed(CompressionEncoding::Gzip);
        // Refused by validation: not recorded.
        let mut invalid = fixture_request();
        invalid.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 999;
        let status = client.export(invalid).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        // Broken indices may come from another revision of the proto: the
        // message says which one profcol read it as. Values that do not
        // match the timestamps cannot (and are not repaired).
        assert!(status.message().contains("v1.10.0"), "{status:?}");
        let mut mismatched = fixture_request();
        let s = &mut mismatched.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
        s.values = vec![1, 2];
        s.timestamps_unix_nano = vec![1, 2, 3];
        let status = client.export(mismatched).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().contains("samples[0]") && !status.message().contains("v1.10.0"),
            "{status:?}"
        );

        let sent = fixture_request();
        let mut req = tonic::Request::new(sent.clone());
        let md = req.metadata_mut();
        md.insert("authorization", "Bearer s3cr3t".parse().unwrap());
        md.insert("x-scope-orgid", "tenant-1".parse().unwrap());
        client.export(req).await.unwrap();
        assert!(rx.recv().await.is_some());

        wait_for(&rec_dir.join("0001.meta.json")).await;
        assert_eq!(
            std::fs::read(rec_dir.join("0001.binpb")).unwrap(),
            sent.encode_to_vec(),
            "the decompressed request, byte for byte"
        );
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(rec_dir.join("0001.meta.json")).unwrap())
                .unwrap();
        assert_eq!(meta["seq"], 1);
        assert_eq!(meta["method"], "POST");
        assert_eq!(
            meta["path"],
            "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
        );
        assert_eq!(meta["query"], "");
        assert_eq!(meta["receiver"], "otlp/prod");
        assert_eq!(meta["transport"], "grpc");
        assert_eq!(meta["body"], "0001.binpb");
        let headers: Vec<(String, String)> =
            serde_json::from_value(meta["headers"].clone()).unwrap();
        let get = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("authorization"), Some("REDACTED"), "{headers:?}");
        assert_eq!(get("x-scope-orgid"), Some("tenant-1"), "{headers:?}");
        assert_eq!(
            get("x-profcol-original-grpc-encoding"),
            Some("gzip"),
            "{headers:?}"
        );
        assert_eq!(get("grpc-encoding"), None, "{headers:?}");
        assert_eq!(get("content-length"), None, "{headers:?}");

        drop(client);
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&rec_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["0001.binpb", "0001.meta.json"]);
    }
}

#[test]
fn on_invalid_is_repair_by_default_and_decodes() {
    use crate::ingest::OnInvalid;
    assert_eq!(decode("{}").unwrap().on_invalid, OnInvalid::Repair);
    assert_eq!(
        decode("on_invalid: refuse\n").unwrap().on_invalid,
        OnInvalid::Refuse
    );
    let err = decode("on_invalid: fix\n").unwrap_err();
    assert!(
        err.contains("receivers::otlp::on_invalid") && err.contains("refuse"),
        "{err}"
    );
}

/// Requests of every revision and from real producers, through the ingest
/// path as the gRPC server hands them over.
mod revisions {
    use std::sync::Arc;

    use bytes::Bytes;
    use prost::Message;
    use tonic::Code;

    use profcol_model::dictionary::{visit, Table};
    use profcol_model::proto::{ProfilesData, Sample};
    use profcol_model::resolved::{resolve, Detail};
    use profcol_model::testing::fixture;
    use profcol_model::ProfileBatch;
    use profcol_pipeline::telemetry::Telemetry;
    use profcol_pipeline::testing::{capture, Capture};

    use crate::ingest::{Ingest, OnInvalid, Origin, Refusal};

    const ORIGIN: Origin = Origin {
        transport: "grpc",
        client: None,
        metadata: Vec::new(),
        resource: Vec::new(),
    };

    fn ingest(on_invalid: OnInvalid) -> (Ingest, Capture, Arc<Telemetry>) {
        let telemetry = Arc::new(Telemetry::new());
        let (output, rx) = capture("otlp", 16, 1 << 30, telemetry.clone());
        (
            Ingest::new("otlp".into(), output, telemetry.clone(), on_invalid),
            rx,
            telemetry,
        )
    }

    async fn send(i: &Ingest, bytes: Bytes) -> Result<(), Refusal> {
        let memory = i.output.budget().try_admit(bytes.len()).unwrap();
        i.otlp(bytes, None, memory, ORIGIN).await.map(|a| {
            assert!(a.partial.is_none(), "{:?}", a.partial);
        })
    }

    fn revision_fixture(rel: &str) -> Bytes {
        Bytes::from(fixture(&format!("otlp-revisions/{rel}")))
    }

    fn view(d: &ProfilesData) -> String {
        resolve(d, Detail::Full).to_text()
    }

    #[tokio::test]
    async fn every_revision_is_accepted_as_v1_10_and_counted_by_revision() {
        let (i, mut rx, telemetry) = ingest(OnInvalid::Refuse);
        let current = revision_fixture("python-proto-1.45.2/request.binpb");
        let want = view(&ProfilesData::decode(current.clone()).unwrap());
        for (file, revision) in [
            ("python-proto-1.39.1/request.binpb", "v1.7.0"),
            ("python-protoc-v1.8.0/request.binpb", "v1.8.0"),
            ("python-proto-1.42.1/request.binpb", "v1.9.0"),
            ("python-proto-1.45.2/request.binpb", "v1.10.0"),
        ] {
            let bytes = revision_fixture(file);
            send(&i, bytes.clone()).await.unwrap();
            let batch = rx.recv().await.unwrap();
            assert_eq!(view(batch.data()), want, "{file}");
            // Only v1.10.0 bytes pass through as they came.
            assert_eq!(
                batch.encoded(),
                (revision == "v1.10.0").then_some(&bytes),
                "{file}"
            );
            assert_eq!(telemetry.accepted_requests("otlp", revision), 1, "{file}");
        }
        assert_eq!(telemetry.accepted("otlp"), 4 * 3);
        assert!(telemetry.encode_text().contains(
            "profcol_receiver_accepted_requests_total{receiver=\"otlp\",transport=\"grpc\",otlp_proto_revision=\"v1.9.0\"} 1"
        ));
    }

    /// The profiler of the issue: v1.9.0 with real entries at index 0.
    #[tokio::test]
    async fn the_v1_9_producer_without_zero_entries_is_repaired_or_refused() {
        let bytes = revision_fixture("opentelemetry-sdk-extension-profiling-0.63b4/0001.binpb");
        let (i, _rx, telemetry) = ingest(OnInvalid::Refuse);
        let r = send(&i, bytes.clone()).await.unwrap_err();
        assert_eq!(r.code, Code::InvalidArgument);
        assert!(
            r.message
                .contains("location_table[0]: must be the zero value")
                && r.message.contains("read as opentelemetry-proto v1.9.0"),
            "{}",
            r.message
        );
        assert_eq!(telemetry.refused_for("otlp", "invalid"), 13);

        let (i, mut rx, telemetry) = ingest(OnInvalid::Repair);
        send(&i, bytes).await.unwrap();
        let batch = rx.recv().await.unwrap();
        profcol_model::validate(batch.data()).unwrap();
        assert_eq!(batch.sample_count(), 13);
        assert_eq!(telemetry.accepted("otlp"), 13);
        assert_eq!(telemetry.repairs("otlp", "index_0_real_entry"), 4);
        assert_eq!(telemetry.accepted_requests("otlp", "v1.9.0"), 1);
        let v = resolve(batch.data(), Detail::Names).to_text();
        assert!(
            v.contains("[thread.id=") && v.contains("thread.name=MainThread"),
            "{v}"
        );
    }

    /// The eBPF profiler writes, as pdata does, the zero attribute's and
    /// link's empty fields: its requests are valid as sent, accepted under
    /// `on_invalid: refuse`, nothing repaired, and kept as received.
    #[tokio::test]
    async fn the_ebpf_profiler_is_accepted_as_sent() {
        for n in 1..=3 {
            let bytes = revision_fixture(&format!("ebpf-profiler-v0.0.202633/000{n}.binpb"));
            let (i, mut rx, telemetry) = ingest(OnInvalid::Refuse);
            send(&i, bytes.clone()).await.unwrap();
            let batch = rx.recv().await.unwrap();
            assert_eq!(batch.encoded(), Some(&bytes), "000{n}");
            assert!(batch.sample_count() > 0);
            assert_eq!(telemetry.repairs("otlp", "index_0_real_entry"), 0);
            assert_eq!(telemetry.accepted_requests("otlp", "v1.10.0"), 1);
        }
    }

    /// `meant` as a producer that does not reserve index 0 of these tables
    /// writes it: entry 0 gone, every reference one down.
    fn without_zero_entries(meant: &ProfilesData, tables: &[Table]) -> ProfilesData {
        let mut d = meant.clone();
        let mut down = |t: Table, i: &mut i32| {
            if tables.contains(&t) {
                *i -= 1;
            }
        };
        visit::resources_mut(&mut d.resource_profiles, &mut down);
        let dict = d.dictionary.as_mut().unwrap();
        dict.location_table
            .iter_mut()
            .for_each(|l| visit::location_mut(l, &mut down));
        dict.stack_table
            .iter_mut()
            .for_each(|s| visit::stack_mut(s, &mut down));
        dict.mapping_table
            .iter_mut()
            .for_each(|m| visit::mapping_mut(m, &mut down));
        for &t in tables {
            match t {
                Table::Location => drop(dict.location_table.remove(0)),
                Table::Function => drop(dict.function_table.remove(0)),
                Table::Attribute => drop(dict.attribute_table.remove(0)),
                Table::Stack => drop(dict.stack_table.remove(0)),
                _ => unreachable!(),
            }
        }
        d
    }

    #[tokio::test]
    async fn a_request_with_real_entries_at_0_and_bad_indices_is_read_as_meant() {
        let meant =
            ProfilesData::decode(revision_fixture("python-proto-1.45.2/request.binpb")).unwrap();
        let tables = [
            Table::Location,
            Table::Function,
            Table::Attribute,
            Table::Stack,
        ];
        let mut sent = without_zero_entries(&meant, &tables);
        // Two references past their tables and a sample with nothing in it.
        let p = &mut sent.resource_profiles[0].scope_profiles[0].profiles[0];
        p.samples[0].attribute_indices.push(99);
        p.samples.push(Sample {
            stack_index: 0,
            ..Default::default()
        });
        sent.dictionary.as_mut().unwrap().function_table[0].filename_strindex = 1000;
        let bytes = Bytes::from(sent.encode_to_vec());
        let dropped_file = {
            let mut m = meant.clone();
            m.dictionary.as_mut().unwrap().function_table[1].filename_strindex = 0;
            m
        };

        let (i, mut rx, telemetry) = ingest(OnInvalid::Repair);
        send(&i, bytes.clone()).await.unwrap();
        let batch = rx.recv().await.unwrap();
        assert_eq!(view(batch.data()), view(&dropped_file));
        for (kind, n) in [
            ("index_0_real_entry", 4),
            ("attribute_index_out_of_range", 1),
            ("string_index_out_of_range", 1),
            ("empty_sample", 1),
        ] {
            assert_eq!(telemetry.repairs("otlp", kind), n, "{kind}");
        }
        let n = ProfileBatch::new(meant).sample_count();
        assert_eq!(telemetry.accepted("otlp"), n);
        assert_eq!(telemetry.refused_for("otlp", "empty_sample"), 1);
        assert!(telemetry.encode_text().contains(
            "profcol_receiver_repairs_total{receiver=\"otlp\",kind=\"index_0_real_entry\"} 4"
        ));

        let (i, _rx, telemetry) = ingest(OnInvalid::Refuse);
        let r = send(&i, bytes).await.unwrap_err();
        assert!(
            r.message.contains("must be the zero value"),
            "{}",
            r.message
        );
        assert_eq!(telemetry.repairs("otlp", "index_0_real_entry"), 0);
    }

    #[test]
    fn each_producer_is_told_once_per_thing() {
        let told = crate::ingest::Told::default();
        assert!(told.first("api", "v1.9.0"));
        assert!(!told.first("api", "v1.9.0"));
        assert!(told.first("api", "empty_sample"));
        assert!(told.first("worker", "v1.9.0"));
    }
}
