use std::path::Path;
use std::sync::Arc;

use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_model::{BatchMeta, Origin};
use profcol_pipeline::component::{ExportError, Exporter, ExporterContext};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;
use profcol_pprof::decode_pprof;

use profcol_pipeline::runtime::create_exporter;

use super::*;

fn fixture(name: &str) -> ProfileBatch {
    let bytes = profcol_model::testing::fixture(&format!("otlp/{name}"));
    ProfileBatch::new(ProfilesData::decode(bytes.as_slice()).unwrap())
}

fn exporter(dir: &Path, tweak: impl FnOnce(&mut PprofExporterConfig)) -> PprofExporter {
    let mut cfg = PprofExporterConfig {
        directory: dir.to_string_lossy().into_owned(),
        ..Default::default()
    };
    tweak(&mut cfg);
    PprofExporter::new(cfg, "exporters::pprof").unwrap()
}

fn ctx() -> ExporterContext {
    ExporterContext {
        id: "pprof".into(),
        telemetry: Arc::new(Telemetry::new()),
        authenticators: Default::default(),
        budget: profcol_model::memory::MemoryBudget::new(1 << 30),
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn writes_a_gzip_pprof_file_named_by_the_template() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |_| {});
    e.start(&ctx()).await.unwrap();
    let mut batch = fixture("minimal-request.bin");
    batch.meta = BatchMeta {
        receiver: "sentry/mobile".into(),
        origin: Origin::Sentry {
            project_id: "42".into(),
            envelope_header: serde_json::json!({}),
        },
        ..Default::default()
    };
    assert_eq!(
        e.export(&Request::new(Arc::new(batch)), &ctx())
            .await
            .unwrap(),
        ExportOutcome::delivered()
    );

    // 1_700_000_000 s is 2023-11-14T22:13:20Z.
    assert_eq!(
        names(dir.path()),
        ["holdout-minimal-20231114T221320.000Z-cpu.pb.gz"]
    );
    let bytes = std::fs::read(
        dir.path()
            .join("holdout-minimal-20231114T221320.000Z-cpu.pb.gz"),
    )
    .unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip on disk");
    let p = decode_pprof(&bytes).unwrap();
    assert_eq!(p.sample.len(), 3);
    let comments: Vec<&str> = p
        .comment
        .iter()
        .map(|&c| p.string_table[c as usize].as_str())
        .collect();
    assert!(
        comments.contains(&"profcol: received by sentry/mobile"),
        "{comments:?}"
    );
    assert!(
        comments.contains(&"profcol: Sentry project 42"),
        "{comments:?}"
    );
    let stats = e.stats();
    assert_eq!(
        (stats.files_written, stats.bytes_written),
        (1, bytes.len() as u64)
    );
}

#[tokio::test]
async fn one_file_per_resource_and_collisions_get_a_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| {
        c.file_name = "{service.name}_{sample_type}.pb.gz".into()
    });
    e.export(
        &Request::new(Arc::new(fixture("two-resources-request.bin"))),
        &ctx(),
    )
    .await
    .unwrap();
    e.export(
        &Request::new(Arc::new(fixture("two-resources-request.bin"))),
        &ctx(),
    )
    .await
    .unwrap();
    assert_eq!(
        names(dir.path()),
        [
            "holdout-a_cpu-1.pb.gz",
            "holdout-a_cpu.pb.gz",
            "holdout-b_wall-1.pb.gz",
            "holdout-b_wall.pb.gz",
        ]
    );
}

/// The eBPF profiler sends no `service.name`, a resource per process: its
/// files are named as the semantic conventions have SDKs name such a
/// service, `unknown_service:` and `process.executable.name`, so the
/// processes' files tell apart.
#[tokio::test]
async fn a_process_without_service_name_is_named_by_its_executable() {
    let bytes =
        profcol_model::testing::fixture("otlp-revisions/ebpf-profiler-v0.0.202633/0002.binpb");
    let data = profcol_otlp::revisions::decode(&bytes.into()).unwrap().data;
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| c.file_name = "{service.name}.pb.gz".into());
    e.export(&Request::new(Arc::new(ProfileBatch::new(data))), &ctx())
        .await
        .unwrap();
    assert_eq!(
        names(dir.path()),
        [
            // Two processes of `burn` ran.
            "unknown_service_burn-1.pb.gz",
            "unknown_service_burn.pb.gz",
            "unknown_service_ebpf-profiler.pb.gz",
            "unknown_service_java.pb.gz",
            "unknown_service_profcol.pb.gz",
            "unknown_service_python3.11.pb.gz",
        ]
    );
}

/// A Node wall upload (`samples/count` and `wall/nanoseconds` over the
/// same samples) is one file with both types by default, as pprof tools
/// and Pyroscope expect it (`-sample_index`); `merge_sample_types: false`
/// splits it.
#[tokio::test]
async fn one_upload_is_one_file_with_every_sample_type_by_default() {
    let body =
        profcol_model::testing::fixture("pyroscope/nodejs-pyroscope-0.6.4/default/0001.body.bin");
    let pprof = decode_pprof(&body).unwrap();
    let data = profcol_pprof::pprof_to_otlp(&pprof).unwrap();
    let batch = ProfileBatch::new(data);
    let dir = tempfile::tempdir().unwrap();
    let written = exporter(dir.path(), |_| {}).write_batch(&batch).unwrap();
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0].file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with("-samples+wall.pb.gz"), "{name}");
    let p = decode_pprof(&std::fs::read(&written[0]).unwrap()).unwrap();
    let types: Vec<&str> = p
        .sample_type
        .iter()
        .map(|t| p.string_table[t.r#type as usize].as_str())
        .collect();
    assert_eq!(types, ["samples", "wall"]);
    assert_eq!(p.sample.len(), pprof.sample.len());

    let split = tempfile::tempdir().unwrap();
    let written = exporter(split.path(), |c| c.merge_sample_types = false)
        .write_batch(&batch)
        .unwrap();
    assert_eq!(written.len(), 2, "{written:?}");
}

#[tokio::test]
async fn merge_sample_types_writes_one_file_for_go_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| {
        c.merge_sample_types = true;
        c.file_name = "{service.name}-{sample_type}-{profile_id}.pb.gz".into();
    });
    let written = e.write_batch(&fixture("go-cpu.otlp.bin")).unwrap();
    assert_eq!(written.len(), 1);
    let name = written[0].file_name().unwrap().to_str().unwrap();
    // No profile id in the data: a random one keeps names apart.
    assert!(
        name.starts_with("go-cpu-samples+cpu-")
            && name.len() == "go-cpu-samples+cpu-".len() + 32 + 6,
        "{name}"
    );
    let p = decode_pprof(&std::fs::read(&written[0]).unwrap()).unwrap();
    assert_eq!(p.sample_type.len(), 2);
}

#[tokio::test]
async fn retention_keeps_the_newest_files_and_nothing_else_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a profile").unwrap();
    let e = exporter(dir.path(), |c| {
        c.max_files = 2;
        c.file_name = "{profile_id}.pb.gz".into();
    });
    // Through `export`, as the runtime calls it, so the metrics are counted.
    let ctx = ctx();
    let mut written = Vec::new();
    for _ in 0..5 {
        let before: std::collections::HashSet<String> = names(dir.path()).into_iter().collect();
        e.export(
            &Request::new(Arc::new(fixture("minimal-request.bin"))),
            &ctx,
        )
        .await
        .unwrap();
        written.extend(
            names(dir.path())
                .into_iter()
                .filter(|n| !before.contains(n)),
        );
    }
    let mut expect = written[3..].to_vec();
    expect.push("notes.txt".into());
    expect.sort();
    assert_eq!(names(dir.path()), expect);
    assert_eq!(e.stats().files_removed, 3);
    assert_eq!(ctx.telemetry.exporter_events("pprof", "file_written"), 5);
    assert_eq!(
        ctx.telemetry
            .exporter_events("pprof", "file_removed_by_retention"),
        3
    );
    assert!(ctx.telemetry.encode_text().contains(
        "profcol_exporter_events_total{exporter=\"pprof\",event=\"file_removed_by_retention\"} 3"
    ));
}

#[tokio::test]
async fn retention_by_size_keeps_the_newest_that_fit() {
    let scratch = tempfile::tempdir().unwrap();
    let probe = exporter(scratch.path(), |_| {})
        .write_batch(&fixture("minimal-request.bin"))
        .unwrap();
    let size = std::fs::metadata(&probe[0]).unwrap().len();
    let mib = |bytes: f64| bytes / (1024.0 * 1024.0);

    // Room for two and a half files: two stay, the newest ones.
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| {
        c.max_total_size_mib = mib(size as f64 * 2.5)
    });
    let mut written = Vec::new();
    for _ in 0..4 {
        written.extend(e.write_batch(&fixture("minimal-request.bin")).unwrap());
    }
    let mut newest: Vec<String> = written[2..]
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    newest.sort();
    assert_eq!(names(dir.path()), newest);
    assert_eq!(
        (e.stats().files_removed, e.stats().bytes_removed),
        (2, 2 * size)
    );

    // Less room than one file: the newest file is still kept.
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| {
        c.max_total_size_mib = mib(size as f64 / 2.0)
    });
    for _ in 0..3 {
        let w = e.write_batch(&fixture("minimal-request.bin")).unwrap();
        assert_eq!(
            names(dir.path()),
            [w[0].file_name().unwrap().to_string_lossy()]
        );
    }
}

#[tokio::test]
async fn no_temporary_files_are_left_and_stale_ones_are_cleaned_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".profcol-0123.tmp"),
        "half a file from a crash",
    )
    .unwrap();
    let e = exporter(dir.path(), |_| {});
    e.start(&ctx()).await.unwrap();
    assert!(names(dir.path()).is_empty());
    for _ in 0..3 {
        e.export(
            &Request::new(Arc::new(fixture("two-resources-request.bin"))),
            &ctx(),
        )
        .await
        .unwrap();
    }
    let all = names(dir.path());
    assert_eq!(all.len(), 6);
    assert!(
        all.iter()
            .all(|n| n.ends_with(".pb.gz") && !n.starts_with('.')),
        "{all:?}"
    );
}

#[tokio::test]
async fn invalid_data_fails_permanently_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |_| {});
    let mut data = fixture("two-resources-request.bin").into_data();
    // The second resource's sample points past the stack table: the first
    // resource's file must not be published either.
    data.resource_profiles[1].scope_profiles[0].profiles[0].samples[0].stack_index = 1000;
    let err = e
        .export(&Request::new(Arc::new(ProfileBatch::new(data))), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ExportError::Permanent { message } if message.contains("stack index 1000")),
        "{err}"
    );
    assert!(names(dir.path()).is_empty());
}

#[tokio::test]
async fn a_path_below_a_regular_file_is_a_clear_permanent_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    let target = file.join("profiles");
    let e = exporter(&target, |_| {});
    // A parent that became a file after the exporter was created (creating
    // it refuses one that already is).
    std::fs::write(&file, "x").unwrap();
    let cfg = PprofExporterConfig {
        directory: target.to_string_lossy().into_owned(),
        ..Default::default()
    };
    assert!(PprofExporter::new(cfg, "exporters::pprof").is_err());
    let err = e
        .export(
            &Request::new(Arc::new(fixture("minimal-request.bin"))),
            &ctx(),
        )
        .await
        .unwrap_err();
    let ExportError::Permanent { message } = &err else {
        panic!("expected a permanent error, got {err:?}")
    };
    assert!(
        message.contains(&*target.to_string_lossy()) && message.contains("ot a directory"),
        "{message}"
    );
    // And start-up refuses it outright.
    assert!(e.start(&ctx()).await.is_err());
}

#[tokio::test]
async fn a_directory_root_cannot_write_to_is_a_permanent_error() {
    // Tests run as root, for whom file modes are no obstacle; sysfs refuses
    // new files even to root.
    let e = exporter(Path::new("/sys"), |_| {});
    let err = e
        .export(
            &Request::new(Arc::new(fixture("minimal-request.bin"))),
            &ctx(),
        )
        .await
        .unwrap_err();
    let ExportError::Permanent { message } = &err else {
        panic!("expected a permanent error, got {err:?}")
    };
    assert!(message.contains("/sys"), "{message}");
}

#[tokio::test]
async fn a_missing_directory_is_created_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b");
    // Creating the exporter (what `validate` does) already refuses it ...
    let cfg = PprofExporterConfig {
        directory: nested.to_string_lossy().into_owned(),
        create_directory: false,
        ..Default::default()
    };
    let err = PprofExporter::new(cfg, "exporters::pprof").err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "exporters::pprof::directory: {} does not exist and create_directory is false",
            nested.display()
        )
    );
    // ... and a directory removed after that fails export and start-up.
    std::fs::create_dir_all(&nested).unwrap();
    let e = exporter(&nested, |c| c.create_directory = false);
    std::fs::remove_dir(&nested).unwrap();
    let err = e
        .export(
            &Request::new(Arc::new(fixture("minimal-request.bin"))),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ExportError::Permanent { message } if message.contains("create_directory is false")),
        "{err}"
    );
    assert!(e.start(&ctx()).await.is_err());

    let e = exporter(&nested, |_| {});
    e.start(&ctx()).await.unwrap();
    e.export(
        &Request::new(Arc::new(fixture("minimal-request.bin"))),
        &ctx(),
    )
    .await
    .unwrap();
    assert_eq!(names(&nested).len(), 1);
}

#[test]
fn full_disks_and_io_errors_are_retried_permission_errors_are_not() {
    use std::io::Error;
    for (errno, retry) in [
        (28, true),  // ENOSPC
        (122, true), // EDQUOT
        (5, true),   // EIO
        (116, true), // ESTALE
        (13, false), // EACCES
        (1, false),  // EPERM
        (30, false), // EROFS
        (20, false), // ENOTDIR
        (36, false), // ENAMETOOLONG
    ] {
        assert_eq!(
            is_retryable(&Error::from_raw_os_error(errno)),
            retry,
            "errno {errno}"
        );
    }
    let e = files::export_error(
        "writing into",
        Path::new("/data"),
        &Error::from_raw_os_error(28),
    );
    assert!(
        matches!(&e, ExportError::Retryable { message, .. } if message.contains("/data") && message.contains("free space")),
        "{e}"
    );
}

#[test]
fn templates_parse_render_and_match() {
    let t = FileNameTemplate::parse(DEFAULT_FILE_NAME).unwrap();
    let v = NameValues {
        service_name: Some("checkout/api v2".into()),
        sample_type: "alloc_space+inuse_space".into(),
        profile_id: vec![0xab; 16],
        time_unix_nano: 1_795_318_731_827_876_192,
    };
    let name = t.render(&v, 0);
    assert_eq!(
        name,
        "checkout_api_v2-20261122T033851.827Z-alloc_space+inuse_space.pb.gz"
    );
    assert_eq!(
        t.render(&v, 3),
        "checkout_api_v2-20261122T033851.827Z-alloc_space+inuse_space-3.pb.gz"
    );
    assert!(t.matches(&name) && t.matches(&t.render(&v, 3)));
    assert!(!t.matches("notes.txt") && !t.matches(".profcol-1.tmp") && !t.matches("a-b.pb"));
    let unnamed = NameValues {
        service_name: Some("..".into()),
        ..v.clone()
    };
    assert!(t.render(&unnamed, 0).starts_with("_.-"));
    let none = NameValues {
        service_name: None,
        ..v
    };
    assert!(t.render(&none, 0).starts_with("unknown_service-"));

    for bad in [
        "",
        "dir/{time}.pb.gz",
        "{time",
        "{host}.pb.gz",
        "fixed.pb.gz",
        ".{time}",
        "{time}.tmp",
    ] {
        assert!(FileNameTemplate::parse(bad).is_err(), "{bad:?}");
    }
    // Adjacent placeholders still match without blowing up.
    let t = FileNameTemplate::parse("{time}{sample_type}{service.name}{profile_id}").unwrap();
    assert!(t.matches("abcd"));
    assert!(!t.matches("abc"));
}

#[test]
fn config_decodes_with_collector_names_and_reports_every_error() {
    let cfg = ComponentConfig::from_yaml(
        Kind::Exporter,
        "pprof/local",
        "directory: /tmp/x\nmax_files: 10\nmax_total_size_mib: 0.5\nmerge_sample_types: true\n\
         timeout: 2s\nretry_on_failure:\n  max_elapsed_time: 1m\nsending_queue:\n  queue_size: 5\n",
    )
    .unwrap();
    let (_, settings) = create_exporter(&*factory(), &cfg).unwrap();
    assert_eq!(settings.timeout, std::time::Duration::from_secs(2));
    assert_eq!(
        settings.retry_on_failure.max_elapsed_time.get(),
        std::time::Duration::from_secs(60)
    );
    assert_eq!(settings.sending_queue.queue_size, 5);
    let (rest, _) = cfg.split_off(&profcol_pipeline::config::EXPORTER_SETTINGS_KEYS);
    let c: PprofExporterConfig = rest.decode().unwrap();
    assert_eq!(c.max_total_bytes(), Some(512 * 1024));
    assert!(c.create_directory && c.merge_sample_types);
    assert_eq!(c.resource_attributes_as_labels, ["service.name"]);

    let bad = ComponentConfig::from_yaml(
        Kind::Exporter,
        "pprof",
        "file_name: \"{host}.pb.gz\"\ncompression_level: 12\n",
    )
    .unwrap();
    let errs = match create_exporter(&*factory(), &bad) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted a bad config"),
    };
    assert!(
        errs.contains("exporters::pprof::directory: is required"),
        "{errs}"
    );
    assert!(
        errs.contains("exporters::pprof::file_name: unknown placeholder {host}"),
        "{errs}"
    );
    assert!(
        errs.contains("exporters::pprof::compression_level"),
        "{errs}"
    );

    // What start-up would refuse about the directory, `validate` reports
    // too, together with the other problems.
    let file = tempfile::NamedTempFile::new().unwrap();
    for (yaml, want) in [
        (
            "directory: /proc/nope\ncreate_directory: false\ncompression_level: 10\n".to_owned(),
            vec![
                "exporters::pprof::compression_level: must be between 0 and 9, got 10".to_owned(),
                "exporters::pprof::directory: /proc/nope does not exist and create_directory is false".to_owned(),
            ],
        ),
        (
            format!("directory: {}\n", file.path().display()),
            vec![format!(
                "exporters::pprof::directory: {} exists but is not a directory",
                file.path().display()
            )],
        ),
        (
            format!("directory: {}\n", file.path().join("sub").display()),
            vec![format!(
                "exporters::pprof::directory: cannot use {}: Not a directory (os error 20)",
                file.path().join("sub").display()
            )],
        ),
    ] {
        let cfg = ComponentConfig::from_yaml(Kind::Exporter, "pprof", &yaml).unwrap();
        let errs = match create_exporter(&*factory(), &cfg) {
            Err(e) => e.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
            Ok(_) => panic!("accepted {yaml}"),
        };
        assert_eq!(errs, want, "{yaml}");
    }
    // A missing directory is fine when it may be created (at start-up:
    // creating the exporter leaves the file system alone).
    let missing = std::path::PathBuf::from(format!("{}.d/e", file.path().display()));
    let cfg = ComponentConfig::from_yaml(
        Kind::Exporter,
        "pprof",
        &format!("directory: {}\n", missing.display()),
    )
    .unwrap();
    assert!(create_exporter(&*factory(), &cfg).is_ok());
    assert!(!missing.parent().unwrap().exists());

    let typo = ComponentConfig::from_yaml(Kind::Exporter, "pprof", "directory: /x\nmax_file: 3\n")
        .unwrap();
    assert!(create_exporter(&*factory(), &typo).is_err());
    assert_eq!(factory().type_name(), "pprof");
}

/// `batch` with its resources' `host.name` set to `host`.
fn on_host(mut batch: ProfileBatch, host: &str) -> ProfileBatch {
    use profcol_model::proto::{any_value::Value, AnyValue, KeyValue};
    for rp in &mut batch.data_mut().resource_profiles {
        rp.resource
            .get_or_insert_with(Default::default)
            .attributes
            .push(KeyValue {
                key: "host.name".into(),
                value: Some(AnyValue {
                    value: Some(Value::StringValue(host.into())),
                }),
                ..Default::default()
            });
    }
    batch
}

async fn export(e: &PprofExporter, batch: ProfileBatch) {
    e.export(&Request::new(Arc::new(batch)), &ctx())
        .await
        .unwrap();
}

#[tokio::test]
async fn aggregate_window_writes_one_file_per_service_with_the_dictionary_shared() {
    let dir = tempfile::tempdir().unwrap();
    let single = tempfile::tempdir().unwrap();
    exporter(single.path(), |c| {
        c.merge_sample_types = false;
        c.file_name = "{service.name}-{sample_type}.pb.gz".into()
    })
    .write_batch(&fixture("go-cpu.otlp.bin"))
    .unwrap();
    let once = decode_pprof(&std::fs::read(single.path().join("go-cpu-cpu.pb.gz")).unwrap());
    let e = exporter(dir.path(), |c| {
        c.aggregate_window = profcol_pipeline::config::Duration::from_secs(3600);
        c.merge_sample_types = false;
        c.file_name = "{service.name}-{sample_type}.pb.gz".into();
    });
    e.start(&ctx()).await.unwrap();
    // Two instances of one service, three batches, and another service.
    export(&e, on_host(fixture("go-cpu.otlp.bin"), "a")).await;
    export(&e, on_host(fixture("go-cpu.otlp.bin"), "b")).await;
    export(&e, on_host(fixture("go-cpu.otlp.bin"), "a")).await;
    export(&e, fixture("minimal-request.bin")).await;
    assert_eq!(
        names(dir.path()),
        [window::STAGING_DIR],
        "held until the window closes"
    );

    e.shutdown().await;
    let mut files = names(dir.path());
    files.retain(|n| n != window::STAGING_DIR);
    assert_eq!(
        files,
        [
            "go-cpu-cpu.pb.gz",
            "go-cpu-samples.pb.gz",
            "holdout-minimal-cpu.pb.gz"
        ]
    );
    assert_eq!(
        names(&dir.path().join(window::STAGING_DIR)),
        Vec::<String>::new()
    );

    let once = once.unwrap();
    let merged = decode_pprof(&std::fs::read(dir.path().join(&files[0])).unwrap()).unwrap();
    assert_eq!(merged.sample.len(), 3 * once.sample.len());
    let total = |p: &profcol_pprof::proto::Profile| -> i64 {
        p.sample.iter().map(|s| s.value.iter().sum::<i64>()).sum()
    };
    assert_eq!(total(&merged), 3 * total(&once));
    // Equal entries shared: three inputs, the locations and functions of one.
    assert_eq!(merged.location.len(), once.location.len());
    assert_eq!(merged.function.len(), once.function.len());
    // host.name differed between the instances, so no sample carries it.
    let strings = &merged.string_table;
    assert!(!strings.iter().any(|s| s == "host.name"), "{strings:?}");
}

#[tokio::test]
async fn staged_batches_survive_a_crash_and_are_written_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let window = |c: &mut PprofExporterConfig| {
        c.aggregate_window = profcol_pipeline::config::Duration::from_secs(3600)
    };
    let first = exporter(dir.path(), window);
    first.start(&ctx()).await.unwrap();
    export(&first, fixture("minimal-request.bin")).await;
    export(&first, fixture("minimal-request.bin")).await;
    // Killed: no shutdown.
    drop(first);
    assert_eq!(names(dir.path()), [window::STAGING_DIR]);

    let second = exporter(dir.path(), window);
    second.start(&ctx()).await.unwrap();
    let mut files = names(dir.path());
    files.retain(|n| n != window::STAGING_DIR);
    assert_eq!(files.len(), 1, "{files:?}");
    let p = decode_pprof(&std::fs::read(dir.path().join(&files[0])).unwrap()).unwrap();
    let one = samples_of(&fixture("minimal-request.bin"));
    assert_eq!(p.sample.len(), 2 * one);
    second.shutdown().await;
}

fn samples_of(batch: &ProfileBatch) -> usize {
    batch
        .data()
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| p.samples.len())
        .sum()
}

#[tokio::test]
async fn a_window_is_written_when_it_closes() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| {
        c.aggregate_window = profcol_pipeline::config::Duration::from_millis(200)
    });
    e.start(&ctx()).await.unwrap();
    export(&e, fixture("minimal-request.bin")).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while names(dir.path()).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            names(dir.path())
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(ctx().telemetry.exporter_events("pprof", "window_failed"), 0);
    e.shutdown().await;
}

#[tokio::test]
async fn aggregate_window_refuses_what_cannot_be_written_at_export() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), |c| {
        c.aggregate_window = profcol_pipeline::config::Duration::from_secs(60)
    });
    e.start(&ctx()).await.unwrap();
    let mut batch = fixture("two-resources-request.bin");
    batch.data_mut().resource_profiles[1].scope_profiles[0].profiles[0].samples[0].stack_index =
        1000;
    let err = e
        .export(&Request::new(Arc::new(batch)), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ExportError::Permanent { message } if message.contains("1000")),
        "{err}"
    );
    e.shutdown().await;
    assert_eq!(names(dir.path()), Vec::<String>::new(), "nothing staged");
}

/// A batch of six one-profile resources (instances of services a, a, a,
/// b, b, c): a file each by default; past `max_files_per_batch` the
/// instances of a service share a file; past it still, the last files are
/// left out and their samples reported dropped.
#[tokio::test]
async fn files_past_max_files_per_batch_fold_by_service_then_are_dropped_and_counted() {
    use profcol_model::proto::{any_value::Value, AnyValue, KeyValue};
    let one = fixture("minimal-request.bin");
    let template = &one.data().resource_profiles[0];
    let mut data = one.data().clone();
    data.resource_profiles = ["a", "a", "a", "b", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, service)| {
            let mut rp = template.clone();
            let s = |v: String| {
                Some(AnyValue {
                    value: Some(Value::StringValue(v)),
                })
            };
            let resource = rp.resource.get_or_insert_with(Default::default);
            resource.attributes = vec![
                KeyValue {
                    key: "service.name".into(),
                    value: s(service.to_string()),
                    ..Default::default()
                },
                KeyValue {
                    key: "host.name".into(),
                    value: s(format!("host-{i}")),
                    ..Default::default()
                },
            ];
            rp
        })
        .collect();
    let batch = ProfileBatch::new(data);
    let per_resource = batch.sample_count() / 6;
    assert!(per_resource > 0);
    let run = |max: usize| {
        let batch = batch.clone();
        async move {
            let dir = tempfile::tempdir().unwrap();
            let e = exporter(dir.path(), |c| c.max_files_per_batch = max);
            let ctx = ctx();
            e.start(&ctx).await.unwrap();
            let outcome = e
                .export(&Request::new(Arc::new(batch)), &ctx)
                .await
                .unwrap();
            let files: Vec<_> = names(dir.path())
                .into_iter()
                .filter(|n| n.ends_with(".pb.gz"))
                .collect();
            let over = ctx
                .telemetry
                .exporter_events("pprof", "file_over_batch_limit");
            (files, outcome, over)
        }
    };
    let (files, outcome, over) = run(1000).await;
    assert_eq!((files.len(), outcome.dropped_total(), over), (6, 0, 0));
    // Folded: one file per service, nothing lost.
    let (files, outcome, over) = run(3).await;
    assert_eq!((files.len(), outcome.dropped_total(), over), (3, 0, 0));
    assert!(
        files.iter().filter(|f| f.starts_with("a-")).count() == 1,
        "{files:?}"
    );
    // Still over: c's file is left out, its samples dropped.
    let (files, outcome, over) = run(2).await;
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|f| !f.starts_with("c-")), "{files:?}");
    assert_eq!(outcome.dropped, vec![(MAX_FILES_PER_BATCH, per_resource)]);
    assert_eq!(over, 1);
}

#[test]
fn max_files_per_batch_must_be_positive() {
    let c = PprofExporterConfig {
        directory: "/tmp/x".into(),
        max_files_per_batch: 0,
        ..Default::default()
    };
    let e = c.validate("exporters::pprof").unwrap_err().to_string();
    assert!(e.contains("exporters::pprof::max_files_per_batch"), "{e}");
}
