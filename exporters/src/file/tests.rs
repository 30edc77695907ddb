use std::sync::Arc;

use bytes::Bytes;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::ExporterContext;
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;

use profcol_pipeline::runtime::create_exporter;

use super::*;

fn component(yaml: &str) -> ComponentConfig {
    ComponentConfig::from_yaml(Kind::Exporter, "file", yaml).unwrap()
}

fn batch(name: &str) -> Arc<ProfileBatch> {
    let bytes = profcol_model::testing::fixture(&format!("otlp/{name}"));
    Arc::new(ProfileBatch::decode(Bytes::from(bytes)).unwrap())
}

fn ctx() -> ExporterContext {
    ExporterContext {
        id: "file".into(),
        telemetry: Arc::new(Telemetry::new()),
        authenticators: Default::default(),
    }
}

#[test]
fn config_defaults_and_errors() {
    let err = create_exporter(&*factory(), &component("{}"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("exporters::file::path: is required"), "{err}");
    let c: FileExporterConfig = component("{path: /tmp/x.jsonl}").decode().unwrap();
    assert_eq!(c.format, Format::Json);
    assert!(!c.append);
    let c: FileExporterConfig = component("{path: p, format: proto, append: true}")
        .decode()
        .unwrap();
    assert_eq!((c.format, c.append), (Format::Proto, true));
    let err = component("{path: p, formt: json}")
        .decode::<FileExporterConfig>()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("exporters::file") && err.contains("formt"),
        "{err}"
    );
    let err = component("{path: p, format: xml}")
        .decode::<FileExporterConfig>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("exporters::file::format"), "{err}");
}

/// The Collector's keys: `flush_interval` loads (every batch is written
/// through anyway), a disabled `group_by` is nothing; rotation, zstd and
/// an enabled `group_by` are refused, each with its reason.
#[test]
fn the_collectors_other_keys() {
    for yaml in [
        "{path: p, flush_interval: 5s}",
        "{path: p, flush_interval: 5}",
        "{path: p, group_by: {enabled: false, resource_attribute: x}}",
        "{path: p, compression: ''}",
    ] {
        assert!(
            create_exporter(&*factory(), &component(yaml)).is_ok(),
            "{yaml}"
        );
    }
    for (yaml, want) in [
        ("{path: p, rotation: }", "exporters::file::rotation: rotation is not supported: this exporter writes one file"),
        ("{path: p, rotation: {max_megabytes: 10}}", "exporters::file::rotation: rotation is not supported"),
        ("{path: p, compression: zstd, compression_params: {level: 6}}", "exporters::file::compression: zstd is not supported: this exporter writes plain records"),
        ("{path: p, compression: gzip}", "exporters::file::compression: compression is not supported"),
        ("{path: 'p/*.json', group_by: {enabled: true}}", "exporters::file::group_by: group_by is not supported: this exporter writes every batch to its one path"),
    ] {
        let err = create_exporter(&*factory(), &component(yaml))
            .err()
            .unwrap_or_else(|| panic!("accepted {yaml}"))
            .to_string();
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

#[test]
fn full_config_decodes() {
    let yaml = "{path: out/p.bin, format: proto, append: true, timeout: 2s,
        retry_on_failure: {enabled: true, initial_interval: 1s},
        sending_queue: {num_consumers: 2, queue_size: 50}}";
    let cfg = component(yaml);
    let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
    let c: FileExporterConfig = rest.decode().unwrap();
    assert_eq!(c.path, "out/p.bin");
    assert_eq!((c.format, c.append), (Format::Proto, true));
    let (_, s) = create_exporter(&*factory(), &cfg).unwrap();
    assert_eq!(s.timeout, std::time::Duration::from_secs(2));
    assert!(s.retry_on_failure.enabled);
    assert_eq!(s.retry_on_failure.initial_interval.get().as_secs(), 1);
    assert_eq!(
        (s.sending_queue.num_consumers, s.sending_queue.queue_size),
        (2, 50)
    );
    // The Collector's fileexporter does not retry by default.
    let (_, s) = create_exporter(&*factory(), &component("{path: p}")).unwrap();
    assert!(!s.retry_on_failure.enabled);
    let err = create_exporter(&*factory(), &component("{path: p, timeout: 0s}"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("exporters::file::timeout"), "{err}");
}

/// What start-up would refuse about `path`, `validate` (the factory)
/// reports too, together with the other problems of the section.
#[test]
fn an_unusable_path_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"kept").unwrap();
    for (yaml, want) in [
        (
            format!("{{path: {}, timeout: 0s}}", dir.path().display()),
            vec![
                format!(
                    "exporters::file::path: {} is a directory",
                    dir.path().display()
                ),
                "exporters::file::timeout: must be greater than 0".to_owned(),
            ],
        ),
        (
            format!("{{path: {}}}", file.join("x.jsonl").display()),
            vec![format!(
                "exporters::file::path: cannot use {}: Not a directory (os error 20)",
                file.join("x.jsonl").display()
            )],
        ),
    ] {
        let errs = match create_exporter(&*factory(), &component(&yaml)) {
            Err(e) => e.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
            Ok(_) => panic!("accepted {yaml}"),
        };
        assert_eq!(errs, want, "{yaml}");
    }
    // An existing file is checked without being truncated, and missing
    // parent directories are left for start-up to create.
    create_exporter(
        &*factory(),
        &component(&format!("{{path: {}}}", file.display())),
    )
    .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"kept");
    let nested = dir.path().join("a/b/x.jsonl");
    create_exporter(
        &*factory(),
        &component(&format!("{{path: {}}}", nested.display())),
    )
    .unwrap();
    assert!(!dir.path().join("a").exists());
}

#[tokio::test]
async fn export_before_start_and_after_shutdown_is_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!("{{path: {}}}", dir.path().join("x").display());
    let (exp, _) = create_exporter(&*factory(), &component(&yaml)).unwrap();
    let err = exp
        .export(&Request::new(batch("minimal-request.bin")), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ExportError::Permanent { .. }), "{err:?}");
    exp.start(&ctx()).await.unwrap();
    exp.export(&Request::new(batch("minimal-request.bin")), &ctx())
        .await
        .unwrap();
    exp.shutdown().await;
    assert!(exp
        .export(&Request::new(batch("minimal-request.bin")), &ctx())
        .await
        .is_err());
    let data = std::fs::read(dir.path().join("x")).unwrap();
    assert_eq!(read_requests(&data).unwrap().len(), 1);
}

#[tokio::test]
async fn a_path_that_cannot_be_opened_fails_start() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!("{{path: {}}}", dir.path().join("file/out").display());
    let (exp, _) = create_exporter(&*factory(), &component(&yaml)).unwrap();
    // A parent that became a file after the config was checked (creating
    // the exporter refuses one that already is, see above).
    std::fs::write(dir.path().join("file"), b"").unwrap();
    assert!(create_exporter(&*factory(), &component(&yaml)).is_err());
    let err = exp.start(&ctx()).await.unwrap_err().to_string();
    assert!(err.contains("file exporter: opening"), "{err}");
}

async fn write_and_read(format: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/out");
    let yaml = format!("{{path: {}, format: {format}}}", path.display());
    let (exp, _) = create_exporter(&*factory(), &component(&yaml)).unwrap();
    let inputs = [
        batch("minimal-request.bin"),
        batch("two-resources-request.bin"),
    ];
    exp.start(&ctx()).await.unwrap();
    for b in &inputs {
        exp.export(&Request::new(b.clone()), &ctx()).await.unwrap();
    }
    let got = read_requests(&std::fs::read(&path).unwrap()).unwrap();
    let want: Vec<_> = inputs.iter().map(|b| b.data().clone()).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn json_lines_read_back_as_written() {
    write_and_read("json").await;
}

#[tokio::test]
async fn length_prefixed_proto_reads_back_as_written() {
    write_and_read("proto").await;
}

#[tokio::test]
async fn start_truncates_unless_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    for (append, want) in [(false, 1), (true, 2)] {
        let yaml = format!(
            "{{path: {}, format: proto, append: {append}}}",
            path.display()
        );
        let (exp, _) = create_exporter(&*factory(), &component(&yaml)).unwrap();
        exp.start(&ctx()).await.unwrap();
        exp.export(&Request::new(batch("minimal-request.bin")), &ctx())
            .await
            .unwrap();
        assert_eq!(
            read_requests(&std::fs::read(&path).unwrap()).unwrap().len(),
            want
        );
    }
}

#[test]
fn broken_files_are_errors() {
    assert!(read_requests(&[0, 0, 0, 9, 1])
        .unwrap_err()
        .contains("declares 9 bytes"));
    assert!(read_requests(b"{\"resourceProfiles\": [}\n")
        .unwrap_err()
        .starts_with("line 1"));
}
