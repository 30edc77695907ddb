//! The `file` exporter against the Collector's fileexporter v0.161.0: the
//! same exporters (zstd in both formats, group_by, rotation) get the same
//! requests in both; what each wrote has the same framing, the same files,
//! and reads back (with profcol's reader, as `profcol test` reads inputs)
//! to the same profiles.

use std::path::Path;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use profcol_exporters::file::{read_requests, ZSTD_MAGIC};
use profcol_model::proto::ProfilesData;
use profcol_model::ResolvedProfile;

use crate::common::{self, otelcol, profcol, Ports, Running};

/// The exporters under test, writing under `dir`, each with `extra` keys.
fn exporters(dir: &Path, extra: &str) -> String {
    format!(
        r#"exporters:
  file/json_zstd: {{path: "{d}/json.zst", compression: zstd{extra}}}
  file/proto_zstd: {{path: "{d}/proto.bin", format: proto, compression: zstd, compression_params: {{level: 6}}{extra}}}
  file/group: {{path: "{d}/group/*.jsonl", group_by: {{enabled: true, resource_attribute: service.name}}{extra}}}
  file/rotated: {{path: "{d}/rotated/out.bin", format: proto, rotation: {{max_megabytes: 1, max_backups: 2}}{extra}}}
"#,
        d = dir.display()
    )
}

/// profcol's exporters write in the order requests came, as the
/// Collector's (which has no queue) do.
const IN_ORDER: &str = ", sending_queue: {num_consumers: 1}";

const IDS: &str = "file/json_zstd, file/proto_zstd, file/group, file/rotated";

/// Requests small and large: three large ones, each over half of
/// `max_megabytes`, make the rotated file rotate twice.
fn requests() -> Vec<ExportProfilesServiceRequest> {
    let mut out = vec![
        common::request("otlp/minimal-request.bin"),
        common::request("otlp/two-resources-request.bin"),
    ];
    let big = profcol_model::synth::request(26_000, 2_600);
    let len = prost::Message::encoded_len(&big);
    assert!(len > 600 << 10 && len < 900 << 10, "{len} bytes");
    for _ in 0..3 {
        out.push(ExportProfilesServiceRequest {
            resource_profiles: big.resource_profiles.clone(),
            dictionary: big.dictionary.clone(),
        });
    }
    out
}

async fn send(port: u16, requests: &[ExportProfilesServiceRequest]) {
    let mut client = common::client(port).await;
    for r in requests {
        client.export(r.clone()).await.unwrap();
    }
}

/// Each record: 4 big-endian length bytes, then the record.
fn records(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (len, body) = rest.split_first_chunk::<4>().expect("a length prefix");
        let len = u32::from_be_bytes(*len) as usize;
        out.push(&body[..len]);
        rest = &body[len..];
    }
    out
}

/// What a user reads in a file: every profile resolved (string references
/// the Collector writes resolved first).
pub(crate) fn profiles(path: &Path) -> Vec<ResolvedProfile> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_requests(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .flat_map(|mut d: ProfilesData| {
            profcol_model::dictionary::resolve_references(&mut d);
            profcol_model::folded(&d)
        })
        .collect()
}

/// Names under `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_and_profcol_write_the_same_files() {
    let Some(bin) = otelcol::binary() else { return };
    let out = tempfile::tempdir().unwrap();
    let (c_dir, p_dir) = (out.path().join("otelcol"), out.path().join("profcol"));
    for d in [&c_dir, &p_dir] {
        // The Collector creates no directory for a plain path.
        std::fs::create_dir_all(d.join("rotated")).unwrap();
    }
    let requests = requests();

    let (collector, _cfg_dir, ports) = otelcol::start_on_free_ports(&bin, 2, |p| {
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:{}\"}}}}}}\n{}extensions:\n  health_check: {{endpoint: \"127.0.0.1:{}\"}}\nservice:\n  extensions: [health_check]\n  telemetry: {{metrics: {{level: none}}}}\n  pipelines:\n    profiles: {{receivers: [otlp], exporters: [{IDS}]}}\n",
            p[0],
            exporters(&c_dir, ""),
            p[1]
        )
    })
    .await;
    send(ports[0], &requests).await;
    collector.signal("TERM");
    let (code, logs) = collector.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "the Collector: {code:?}\n{logs}");

    let cfg = out.path().join("profcol.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers:\n  otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:0\"}}}}}}\n{}service:\n  pipelines:\n    profiles: {{receivers: [otlp], exporters: [{IDS}]}}\n",
            exporters(&p_dir, IN_ORDER)
        ),
    )
    .unwrap();
    let p = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    send(p.grpc_port(), &requests).await;
    p.signal("TERM");
    let (code, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(code.success(), "profcol: {code:?}\n{logs}");

    // zstd: one frame per request after its length, with the same frame
    // header flags (checksum, content size), in JSON as in protobuf.
    for name in ["json.zst", "proto.bin"] {
        let c = std::fs::read(c_dir.join(name)).unwrap();
        let p = std::fs::read(p_dir.join(name)).unwrap();
        let (cr, pr) = (records(&c), records(&p));
        assert_eq!(cr.len(), requests.len(), "{name}: the Collector's records");
        assert_eq!(pr.len(), requests.len(), "{name}: profcol's records");
        for (i, (c, p)) in cr.iter().zip(&pr).enumerate() {
            for (who, frame) in [("the Collector", c), ("profcol", p)] {
                assert!(frame.starts_with(&ZSTD_MAGIC), "{name} {i}: {who}");
                assert_eq!(
                    zstd::zstd_safe::find_frame_compressed_size(frame),
                    Ok(frame.len()),
                    "{name} {i}: {who}: one frame"
                );
                assert!(
                    matches!(zstd::zstd_safe::get_frame_content_size(frame), Ok(Some(_))),
                    "{name} {i}: {who}: content size"
                );
            }
            assert_eq!(c[4] & 0b100, p[4] & 0b100, "{name} {i}: the checksum flag");
            let first = |f: &[u8]| zstd::stream::decode_all(f).unwrap()[0];
            assert_eq!(
                first(c) == b'{',
                first(p) == b'{',
                "{name} {i}: JSON in both or neither"
            );
        }
        assert_eq!(
            profiles(&c_dir.join(name)),
            profiles(&p_dir.join(name)),
            "{name}"
        );
    }

    // group_by: the same files, each with the same resources and values.
    // The Collector v0.161.0 writes each group's resources without the
    // batch's dictionary (pprofile's `ResourceProfiles.CopyTo` into new
    // `Profiles`), so its stacks and sample types do not resolve; profcol
    // writes each group with the dictionary entries it uses, so its files
    // hold every profile as the whole batch does.
    let summary = |v: Vec<ResolvedProfile>| -> Vec<(Vec<String>, String, i64, i64)> {
        v.into_iter()
            .map(|p| (p.resource, p.scope, p.period, p.samples.values().sum()))
            .collect()
    };
    let groups = names(&c_dir.join("group"));
    assert_eq!(groups.len(), 4, "{groups:?}");
    assert_eq!(groups, names(&p_dir.join("group")));
    let mut from_groups = Vec::new();
    for g in &groups {
        let p = profiles(&p_dir.join("group").join(g));
        assert_eq!(
            summary(profiles(&c_dir.join("group").join(g))),
            summary(p.clone()),
            "group {g}"
        );
        from_groups.extend(p.iter().map(|p| format!("{p:?}")));
    }
    let mut whole: Vec<String> = profiles(&c_dir.join("json.zst"))
        .iter()
        .map(|p| format!("{p:?}"))
        .collect();
    whole.sort();
    from_groups.sort();
    assert_eq!(
        from_groups, whole,
        "profcol's group files hold every profile whole"
    );

    // rotation: the current file and two backups named by timberjack's
    // rule, holding the same requests in the same files.
    let (c_rot, p_rot) = (names(&c_dir.join("rotated")), names(&p_dir.join("rotated")));
    assert_eq!(c_rot.len(), 3, "{c_rot:?}");
    assert_eq!(p_rot.len(), 3, "{p_rot:?}");
    let pattern = |n: &str| {
        n == "out.bin"
            || (n.starts_with("out-")
                && n.ends_with("-size.bin")
                && n.len() == "out--size.bin".len() + 23)
    };
    for n in c_rot.iter().chain(&p_rot) {
        assert!(pattern(n), "{n}");
    }
    // Names sort by time: the backups, then the current file.
    let count = |dir: &Path, names: &[String]| -> Vec<usize> {
        names
            .iter()
            .map(|n| {
                read_requests(&std::fs::read(dir.join(n)).unwrap())
                    .unwrap()
                    .len()
            })
            .collect()
    };
    assert_eq!(
        count(&c_dir.join("rotated"), &c_rot),
        count(&p_dir.join("rotated"), &p_rot)
    );
}
