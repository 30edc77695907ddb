use std::sync::Arc;

use bytes::Bytes;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::ExporterContext;
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;

use profcol_pipeline::runtime::create_exporter;

use super::rotate::{backup_name, Rotator};
use super::sink::{Sink, BUFFER_BYTES};
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
        budget: profcol_model::memory::MemoryBudget::new(1 << 30),
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

/// The Collector's fileexporter README and testdata configs load, with
/// its defaults; what it refuses is refused at the key.
#[test]
fn the_collectors_keys_and_defaults() {
    let c: FileExporterConfig = component("{path: p}").decode().unwrap();
    assert_eq!(c.rotation, None);
    assert_eq!(c.flush_interval(), std::time::Duration::from_secs(1));
    assert_eq!(c.zstd_level(), None);
    assert!(c.grouping().is_none());
    // `rotation:` alone turns rotation on with its defaults.
    let c: FileExporterConfig = component("{path: p, rotation: }").decode().unwrap();
    let r = c.rotation.unwrap();
    assert_eq!((r.max_backups, r.max_days, r.localtime), (100, 0, false));
    assert_eq!(r.max_bytes(), 100 * 1024 * 1024);
    let c: FileExporterConfig = component(
        "{path: p, rotation: {max_megabytes: 10, max_days: 3, max_backups: 3, localtime: true},
          format: proto, compression: zstd, compression_params: {level: 6}}",
    )
    .decode()
    .unwrap();
    let r = c.rotation.clone().unwrap();
    assert_eq!(
        (r.max_bytes(), r.max_days, r.max_backups, r.localtime),
        (10 << 20, 3, 3, true)
    );
    assert_eq!(c.zstd_level(), Some(6));
    // A bare number is nanoseconds, as Go reads it.
    let c: FileExporterConfig = component("{path: p, flush_interval: 5}").decode().unwrap();
    assert_eq!(c.flush_interval(), std::time::Duration::from_nanos(5));
    let c: FileExporterConfig = component("{path: 'g/*.json', group_by: {enabled: true}}")
        .decode()
        .unwrap();
    let g = c.grouping().unwrap();
    assert_eq!(
        (g.resource_attribute.as_str(), g.max_open_files),
        ("fileexporter.path_segment", 100)
    );
    for yaml in [
        "{path: p, flush_interval: 5s}",
        "{path: p, group_by: {enabled: false, resource_attribute: x}}",
        "{path: p, compression: ''}",
        "{path: p, compression: zstd, compression_params: {level: 99}}",
        "{path: p, rotation: {max_megabytes: 1234}}",
        "{path: 'g/*.json', group_by: {enabled: true, resource_attribute: dummy, max_open_files: 10}, rotation: }",
    ] {
        assert!(
            create_exporter(&*factory(), &component(yaml)).is_ok(),
            "{yaml}"
        );
    }
    for (yaml, want) in [
        ("{path: p, append: true, rotation: }", "exporters::file::rotation: append and rotation enabled at the same time is not supported"),
        ("{path: p, compression: gzip}", "exporters::file::compression: compression \"gzip\" is not supported (only zstd is)"),
        ("{path: g, group_by: {enabled: true}}", "exporters::file::path: path must contain exactly one * when group_by is enabled"),
        ("{path: 'g/*/*', group_by: {enabled: true}}", "exporters::file::path: path must contain exactly one * when group_by is enabled"),
        ("{path: '*/./g', group_by: {enabled: true}}", "exporters::file::path: path must not start with * when group_by is enabled"),
        ("{path: 'g/*', group_by: {enabled: true, resource_attribute: ''}}", "exporters::file::group_by::resource_attribute: resource_attribute must not be empty"),
        ("{path: 'g/*', group_by: {enabled: true, max_open_files: 0}}", "exporters::file::group_by::max_open_files: must be at least 1"),
        ("{path: p, rotation: {max_days: -1}}", "exporters::file::rotation::max_days"),
        ("{path: p, rotation: {max_size: 1}}", "exporters::file::rotation"),
        ("{path: p, flush_interval: -1s}", "exporters::file::flush_interval"),
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
    exp.shutdown().await;
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
        exp.shutdown().await;
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

// ---------------------------------------------------------------------------
// compression: zstd
// ---------------------------------------------------------------------------

/// Each record of `bytes`: 4 big-endian length bytes, then that many.
fn records(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (len, body) = rest.split_first_chunk::<4>().unwrap();
        let len = u32::from_be_bytes(*len) as usize;
        out.push(&body[..len]);
        rest = &body[len..];
    }
    out
}

async fn started(yaml: &str) -> Arc<dyn Exporter> {
    let (exp, _) = create_exporter(&*factory(), &component(yaml)).unwrap();
    exp.start(&ctx()).await.unwrap();
    exp
}

/// As the Collector v0.161.0 frames it: each request compressed alone into
/// one zstd frame (with a checksum and its content size), after the
/// frame's length; JSON too, without its newline. Read back whole.
#[tokio::test]
async fn zstd_compresses_each_record_into_one_length_prefixed_frame() {
    let inputs = [
        batch("minimal-request.bin"),
        batch("two-resources-request.bin"),
    ];
    for format in ["json", "proto"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let exp = started(&format!(
            "{{path: {}, format: {format}, compression: zstd, compression_params: {{level: 6}}}}",
            path.display()
        ))
        .await;
        for b in &inputs {
            exp.export(&Request::new(b.clone()), &ctx()).await.unwrap();
        }
        exp.shutdown().await;
        let bytes = std::fs::read(&path).unwrap();
        let got = records(&bytes);
        assert_eq!(got.len(), inputs.len(), "{format}");
        for (frame, b) in got.iter().zip(&inputs) {
            assert!(frame.starts_with(&ZSTD_MAGIC), "{format}");
            assert_eq!(
                zstd::zstd_safe::find_frame_compressed_size(frame),
                Ok(frame.len()),
                "{format}: one frame per record"
            );
            assert_eq!(
                zstd::zstd_safe::get_frame_content_size(frame).ok(),
                Some(Some(frame_plain_len(frame)))
            );
            // Frame header descriptor: the content checksum flag.
            assert_ne!(frame[4] & 0b100, 0, "{format}: checksummed");
            let plain = zstd::stream::decode_all(*frame).unwrap();
            let want = match format {
                "json" => profcol_otlp::json::encode(b.data()),
                _ => b.encode_to_bytes().to_vec(),
            };
            assert_eq!(plain, want, "{format}");
        }
        let want: Vec<_> = inputs.iter().map(|b| b.data().clone()).collect();
        assert_eq!(read_requests(&bytes).unwrap(), want, "{format}");
    }
}

fn frame_plain_len(frame: &[u8]) -> u64 {
    zstd::stream::decode_all(frame).unwrap().len() as u64
}

/// A file compressed whole (the Collector's `nativeCompression` gate, or
/// `zstd` run on a JSON lines file) reads back too.
#[test]
fn a_whole_zstd_file_reads_back() {
    let data = batch("two-resources-request.bin").data().clone();
    let mut lines = profcol_otlp::json::encode(&data);
    lines.push(b'\n');
    lines.extend_from_slice(&lines.clone());
    let z = zstd::encode_all(lines.as_slice(), 3).unwrap();
    assert_eq!(read_requests(&z).unwrap(), vec![data.clone(), data]);
    assert!(read_requests(&z[..z.len() / 2]).is_err());
}

// ---------------------------------------------------------------------------
// flush_interval
// ---------------------------------------------------------------------------

/// Records reach the file once the flush interval passes, without another
/// export or shutdown.
#[tokio::test]
async fn records_reach_the_file_each_flush_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    let exp = started(&format!(
        "{{path: {}, flush_interval: 50ms}}",
        path.display()
    ))
    .await;
    exp.export(&Request::new(batch("minimal-request.bin")), &ctx())
        .await
        .unwrap();
    // Buffered (see below), then flushed by the interval alone.
    let started = std::time::Instant::now();
    while std::fs::metadata(&path).unwrap().len() == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "never flushed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        read_requests(&std::fs::read(&path).unwrap()).unwrap().len(),
        1
    );
    exp.shutdown().await;
}

/// Shutdown writes what waits, however long the interval; the buffer never
/// holds more than [`BUFFER_BYTES`] in between.
#[tokio::test]
async fn shutdown_flushes_and_the_buffer_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let exp = started(&format!(
        "{{path: {}, format: proto, flush_interval: 1h}}",
        path.display()
    ))
    .await;
    let b = batch("two-resources-request.bin");
    let record = 4 + b.encode_to_bytes().len();
    let n = 3 * BUFFER_BYTES / record + 1;
    for _ in 0..n {
        exp.export(&Request::new(b.clone()), &ctx()).await.unwrap();
        let on_disk = std::fs::metadata(&path).unwrap().len() as usize;
        assert_eq!(on_disk % record, 0, "whole records only");
    }
    let on_disk = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(
        n * record - on_disk <= BUFFER_BYTES,
        "{} bytes waiting",
        n * record - on_disk
    );
    assert!(n * record > on_disk, "the last records wait");
    exp.shutdown().await;
    assert_eq!(
        read_requests(&std::fs::read(&path).unwrap()).unwrap().len(),
        n
    );
}

/// A record larger than the buffer goes straight to the file, after what
/// waited before it.
#[test]
fn a_large_record_is_written_through_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    let mut sink = Sink::open(&path, false, None).unwrap();
    sink.write(b"small\n").unwrap();
    let big = vec![b'x'; BUFFER_BYTES + 1];
    sink.write(&big).unwrap();
    assert_eq!(sink.buffered(), 0);
    let got = std::fs::read(&path).unwrap();
    assert_eq!(&got[..6], b"small\n");
    assert_eq!(got.len(), 6 + big.len());
}

// ---------------------------------------------------------------------------
// rotation
// ---------------------------------------------------------------------------

fn rotation(max_backups: u64, max_days: u64) -> Rotation {
    Rotation {
        max_megabytes: 0,
        max_days,
        max_backups,
        localtime: false,
    }
}

/// Names in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    n.sort();
    n
}

/// `data-2022-09-14T05-02-14.173-size.json`, as timberjack names it.
fn is_backup_of(name: &str, stem: &str, ext: &str) -> bool {
    let Some(mid) = name
        .strip_prefix(&format!("{stem}-"))
        .and_then(|r| r.strip_suffix(&format!("-size{ext}")))
    else {
        return false;
    };
    chrono::NaiveDateTime::parse_from_str(mid, "%Y-%m-%dT%H-%M-%S%.3f").is_ok() && mid.len() == 23
}

/// A record that would take the file past the limit goes to a new file;
/// the old one is renamed with the time and `-size` before the extension;
/// nothing is lost or split, and records keep their order (backups by name,
/// then the current file).
#[test]
fn size_rotation_names_backups_as_timberjack_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.json");
    let mut r = Rotator::with_max_bytes(path.clone(), &rotation(0, 0), 100);
    let records: Vec<Vec<u8>> = (0..20).map(|i| format!("{i:040}\n").into_bytes()).collect();
    for rec in &records {
        r.write(rec).unwrap();
    }
    r.close();
    let all = names(dir.path());
    // 41 bytes each, two per file of at most 100: ten files.
    assert_eq!(all.len(), 10, "{all:?}");
    let backups: Vec<&String> = all.iter().filter(|n| *n != "data.json").collect();
    assert!(
        backups.iter().all(|n| is_backup_of(n, "data", ".json")),
        "{backups:?}"
    );
    let mut got = Vec::new();
    for name in backups.iter().map(|s| s.as_str()).chain(["data.json"]) {
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        assert!(bytes.len() <= 100, "{name}");
        got.extend(bytes);
    }
    assert_eq!(got, records.concat());
}

/// `max_backups` keeps the newest; a record larger than the limit is
/// written alone in a file of its own instead of being refused.
#[test]
fn max_backups_keeps_the_newest_and_a_large_record_gets_its_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    let mut r = Rotator::with_max_bytes(path.clone(), &rotation(2, 0), 10);
    for i in 0..6u8 {
        r.write(&[b'0' + i; 8]).unwrap();
    }
    let all = names(dir.path());
    assert_eq!(all.len(), 3, "two backups and the file: {all:?}");
    assert_eq!(std::fs::read(&path).unwrap(), [b'5'; 8]);
    let kept: Vec<Vec<u8>> = all
        .iter()
        .filter(|n| *n != "out")
        .map(|n| std::fs::read(dir.path().join(n)).unwrap())
        .collect();
    assert_eq!(kept, [vec![b'3'; 8], vec![b'4'; 8]]);
    r.write(&[b'L'; 25]).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), [b'L'; 25]);
    r.write(b"next").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"next");
}

/// `max_days` removes backups whose name's time is older, whatever their
/// mtime; newer backups and other files stay.
#[test]
fn max_days_removes_backups_older_by_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.json");
    let old = backup_name(&path, "2001-02-03T04-05-06.789", "size");
    let recent_time = (chrono::Utc::now() - chrono::Duration::hours(24))
        .format("%Y-%m-%dT%H-%M-%S%.3f")
        .to_string();
    let recent = backup_name(&path, &recent_time, "time");
    let other = dir.path().join("data-notes.json");
    for f in [&old, &recent, &other] {
        std::fs::write(f, b"x").unwrap();
    }
    assert!(old.file_name().unwrap().to_str().unwrap() == "data-2001-02-03T04-05-06.789-size.json");
    // The first write cleans up, as timberjack's does.
    let mut r = Rotator::with_max_bytes(path.clone(), &rotation(0, 3), 1 << 20);
    r.write(b"{}\n").unwrap();
    assert!(!old.exists());
    assert!(recent.exists() && other.exists());
}

/// Backups lumberjack named (the Collector before v0.150) get `-size` at
/// start, so retention counts them.
#[test]
fn lumberjack_backups_are_renamed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.json");
    std::fs::write(dir.path().join("data-2025-01-02T15-04-05.000.json"), b"x").unwrap();
    std::fs::write(dir.path().join("data-notatime.json"), b"x").unwrap();
    Rotator::new(path, &rotation(100, 0))
        .migrate_legacy_backups()
        .unwrap();
    assert_eq!(
        names(dir.path()),
        [
            "data-2025-01-02T15-04-05.000-size.json",
            "data-notatime.json"
        ]
    );
}

/// Backup times in local time parse back to the same instant.
#[test]
fn localtime_names_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    let mut rot = rotation(1, 0);
    rot.localtime = true;
    let mut r = Rotator::with_max_bytes(path, &rot, 4);
    for _ in 0..4 {
        r.write(b"abcd").unwrap();
    }
    // With one backup kept, retention parsed every backup's time.
    assert_eq!(names(dir.path()).len(), 2);
}

/// With `rotation`, start keeps the file (timberjack appends to it) and
/// every record is written through, whatever `flush_interval`.
#[tokio::test]
async fn a_rotated_file_is_appended_and_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let b = batch("minimal-request.bin");
    for run in 1..=2 {
        let exp = started(&format!(
            "{{path: {}, format: proto, rotation: {{max_megabytes: 1}}, flush_interval: 1h}}",
            path.display()
        ))
        .await;
        exp.export(&Request::new(b.clone()), &ctx()).await.unwrap();
        // Before shutdown: nothing waits in memory, and the first run's
        // record is still there.
        let n = read_requests(&std::fs::read(&path).unwrap()).unwrap().len();
        exp.shutdown().await;
        assert_eq!(n, run);
    }
    assert_eq!(
        read_requests(&std::fs::read(&path).unwrap()).unwrap().len(),
        2
    );
}

/// Through the exporter, rotation by `max_megabytes`: every batch is in
/// one of the files.
#[tokio::test]
async fn max_megabytes_rotates_through_the_exporter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let exp = started(&format!(
        "{{path: {}, format: proto, rotation: {{max_megabytes: 1}}}}",
        path.display()
    ))
    .await;
    let big = Arc::new(ProfileBatch::new(profcol_model::synth::request(
        20_000, 2_000,
    )));
    let len = big.encode_to_bytes().len();
    assert!(len > 300 << 10 && len < 1 << 20, "{len}");
    let n = 2 * (1 << 20) / len + 1;
    for _ in 0..n {
        exp.export(&Request::new(big.clone()), &ctx())
            .await
            .unwrap();
    }
    exp.shutdown().await;
    let files = names(dir.path());
    assert!(files.len() >= 3, "{files:?}");
    let mut total = 0;
    for f in &files {
        let bytes = std::fs::read(dir.path().join(f)).unwrap();
        assert!(bytes.len() <= 1 << 20, "{f}");
        total += read_requests(&bytes).unwrap().len();
    }
    assert_eq!(total, n);
}

// ---------------------------------------------------------------------------
// group_by
// ---------------------------------------------------------------------------

/// A batch of `values.len()` resources, each with one profile and the
/// attribute `attr` set to the value (`None`: not set).
fn grouped_batch(attr: &str, values: &[Option<&str>]) -> Arc<ProfileBatch> {
    use profcol_model::proto::{any_value::Value, AnyValue, KeyValue};
    let mut data = profcol_model::synth::Config {
        samples: 300,
        stacks: 50,
        functions: 40,
        resources: values.len(),
        ..Default::default()
    }
    .build();
    for (r, v) in data.resource_profiles.iter_mut().zip(values) {
        if let Some(v) = v {
            r.resource
                .get_or_insert_with(Default::default)
                .attributes
                .push(KeyValue {
                    key: attr.into(),
                    value: Some(AnyValue {
                        value: Some(Value::StringValue((*v).into())),
                    }),
                    ..Default::default()
                });
        }
    }
    Arc::new(ProfileBatch::new(data))
}

/// Each resource goes to the file its attribute names, with only the
/// dictionary entries it uses; resources without it are dropped and
/// counted.
#[tokio::test]
async fn group_by_writes_each_resource_to_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let exp = started(&format!(
        "{{path: '{}/g/*.json', group_by: {{enabled: true, resource_attribute: svc}}}}",
        dir.path().display()
    ))
    .await;
    let b = grouped_batch("svc", &[Some("a"), Some("b/c"), None, Some("a")]);
    let samples: Vec<u64> = b
        .data()
        .resource_profiles
        .iter()
        .map(|r| {
            r.scope_profiles
                .iter()
                .flat_map(|s| &s.profiles)
                .map(profile_sample_count)
                .sum()
        })
        .collect();
    let outcome = exp.export(&Request::new(b.clone()), &ctx()).await.unwrap();
    assert_eq!(outcome.dropped, vec![(MISSING_GROUP_ATTRIBUTE, samples[2])]);
    assert_eq!(outcome.rejected, 0);
    exp.shutdown().await;
    let read = |rel: &str| read_requests(&std::fs::read(dir.path().join(rel)).unwrap()).unwrap();
    let a = read("g/a.json");
    assert_eq!(a.len(), 1, "one record per file per batch");
    assert_eq!(a[0].resource_profiles.len(), 2);
    let bc = read("g/b/c.json");
    assert_eq!(bc[0].resource_profiles.len(), 1);
    for d in a.iter().chain(&bc) {
        profcol_model::validate(d).unwrap();
    }
    let total = |d: &[profcol_model::proto::ProfilesData]| -> u64 {
        d.iter()
            .flat_map(|d| profcol_model::profiles(&d.resource_profiles))
            .map(profile_sample_count)
            .sum()
    };
    assert_eq!(total(&a), samples[0] + samples[3]);
    assert_eq!(total(&bc), samples[1]);
}

/// The Collector's path sanitizing: a value cannot leave the part before
/// the `*`.
#[test]
fn group_by_paths_stay_under_the_prefix() {
    use super::group::full_path;
    for (prefix, segment, suffix, want) in [
        (
            "/data/",
            "../etc/my_config",
            ".json",
            "/data/etc/my_config.json",
        ),
        ("/data/", "../../x", ".json", "/data/x.json"),
        ("/data/", "./a/../b", ".json", "/data/b.json"),
        ("/data/", "a/b", "", "/data/a/b"),
        ("/data/f-", "../../x", ".json", "/data/f-/x.json"),
        ("g/", "/abs", ".json", "g/abs.json"),
    ] {
        assert_eq!(full_path(prefix, segment, suffix), want, "{segment}");
    }
}

/// At most `max_open_files` are open; the least recently used is closed
/// (flushed) for another, and appended to when it opens again: nothing
/// written is lost.
#[tokio::test]
async fn group_by_closes_the_least_recently_used_file_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let exp = started(&format!(
        "{{path: '{}/*.bin', format: proto, flush_interval: 1h, group_by: {{enabled: true, max_open_files: 2}}}}",
        dir.path().display()
    ))
    .await;
    let attr = "fileexporter.path_segment";
    for v in ["a", "b", "c", "a", "b", "a"] {
        exp.export(&Request::new(grouped_batch(attr, &[Some(v)])), &ctx())
            .await
            .unwrap();
    }
    // "c" opened with a, b open: a (least recent) was closed, written.
    assert_eq!(
        read_requests(&std::fs::read(dir.path().join("a.bin")).unwrap())
            .unwrap()
            .len(),
        1
    );
    exp.shutdown().await;
    for (name, n) in [("a", 3), ("b", 2), ("c", 1)] {
        let got =
            read_requests(&std::fs::read(dir.path().join(format!("{name}.bin"))).unwrap()).unwrap();
        assert_eq!(got.len(), n, "{name}");
    }
}

#[test]
fn lru_keeps_at_most_max_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = super::group::Groups::new(&format!("{}/*", dir.path().display()), 3, false, None);
    for i in 0..10 {
        g.sink(&format!("{}", i % 5)).unwrap().write(b"x").unwrap();
        assert!(g.open_files() <= 3);
    }
    assert!(g.close_all().is_empty());
    for i in 0..5 {
        assert_eq!(
            std::fs::read(dir.path().join(i.to_string())).unwrap(),
            b"xx"
        );
    }
}

fn metrics_request(service: &str, points: usize) -> ExportMetricsServiceRequest {
    use profcol_model::proto::metrics::*;
    use profcol_model::proto::{AnyValue, KeyValue, Resource};
    let point = NumberDataPoint {
        value: Some(number_data_point::Value::AsDouble(1.5)),
        time_unix_nano: 1_700_000_000_000_000_000,
        ..Default::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(service.into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "g".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![point; points],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Metrics are written as the Collector's file exporter writes them: one
/// OTLP/JSON request a line (64-bit integers as strings), or length-
/// prefixed protobuf.
#[tokio::test]
async fn metrics_are_written_as_otlp_json_lines_or_proto() {
    use prost::Message;
    for format in ["json", "proto"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics");
        let yaml = format!("{{path: {}, format: {format}}}", path.display());
        let (exp, _) = create_exporter(&*factory(), &component(&yaml)).unwrap();
        assert!(exp.exports_metrics());
        let reqs = [metrics_request("a", 2), metrics_request("b", 1)];
        exp.start(&ctx()).await.unwrap();
        for r in &reqs {
            let outcome = exp.export_metrics(r, &ctx()).await.unwrap();
            assert_eq!(outcome, ExportOutcome::delivered());
        }
        exp.shutdown().await;
        let bytes = std::fs::read(&path).unwrap();
        let got: Vec<ExportMetricsServiceRequest> = if format == "json" {
            let text = String::from_utf8(bytes).unwrap();
            assert!(
                text.contains(r#""timeUnixNano":"1700000000000000000""#),
                "{text}"
            );
            assert!(text.contains(r#""resourceMetrics":"#), "{text}");
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        } else {
            let mut out = Vec::new();
            let mut rest = bytes.as_slice();
            while !rest.is_empty() {
                let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
                out.push(ExportMetricsServiceRequest::decode(&rest[4..4 + len]).unwrap());
                rest = &rest[4 + len..];
            }
            out
        };
        assert_eq!(got, reqs, "{format}");
    }
}

/// `group_by`: each resource's metrics go to the file its attribute
/// names; a resource without it is counted as rejected.
#[tokio::test]
async fn grouped_metrics_go_to_their_resources_files() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "{{path: {}/*.jsonl, group_by: {{enabled: true, resource_attribute: service.name}}}}",
        dir.path().display()
    );
    let (exp, _) = create_exporter(&*factory(), &component(&yaml)).unwrap();
    exp.start(&ctx()).await.unwrap();
    let mut req = metrics_request("a", 2);
    req.resource_metrics
        .extend(metrics_request("b", 1).resource_metrics);
    let mut lost = metrics_request("x", 4);
    lost.resource_metrics[0].resource = None;
    req.resource_metrics.extend(lost.resource_metrics);
    let outcome = exp.export_metrics(&req, &ctx()).await.unwrap();
    assert_eq!(outcome.rejected, 4);
    exp.shutdown().await;
    for (file, points) in [("a.jsonl", 2), ("b.jsonl", 1)] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let back: ExportMetricsServiceRequest = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(point_count(&back), points, "{file}");
    }
}
