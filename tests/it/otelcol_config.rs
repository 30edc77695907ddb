//! Collector configs and command lines as they are copied from the
//! Collector's documentation: `--config=file:`, `env:`, `yaml:`, `--set`,
//! the Collector's processors, and hints for what profcol lacks.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{client, profcol, Ports, Running, Sink};
use profcol_pipeline::model::synth;
use profcol_pipeline::proto::ExportProfilesServiceRequest;

/// The Collector's example gateway config, as copied (see its header).
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/otelcol/k8s-otel-collector-config.yaml")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// As copied, the config fails on exactly what profcol lacks, each with a
/// hint: the `zpages` extension and a pipeline of another signal. Its OTLP
/// receivers, `memory_limiter`, `batch` and `otlp` exporter all pass.
#[test]
fn the_collectors_example_config_fails_only_on_what_profcol_lacks() {
    let out = profcol()
        .arg("validate")
        .arg(format!("--config=file:{}", fixture().display()))
        .env("MY_POD_IP", "127.0.0.1")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("invalid configuration (2 errors):"), "{err}");
    assert!(
        err.contains(r#"extensions::zpages: unknown type "zpages"; profcol has no zpages extension (see docs/collector-compatibility.md)"#),
        "{err}"
    );
    assert!(
        err.contains(r#"service::pipelines::traces/1: only profiles and metrics pipelines are supported, not "traces"; profcol carries profiles, and metrics made of them by connectors: name it profiles[/NAME] or metrics[/NAME]"#),
        "{err}"
    );
}

/// The same config with the two changes its errors ask for (the pipeline
/// named `profiles/1`, no `zpages`), and the command line a Collector user
/// writes: it validates, starts, and sends what it receives through
/// `memory_limiter` and `batch` to its `otlp` exporter, merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collectors_example_config_runs_once_it_carries_profiles() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let edited = text
        .replace("    traces/1:\n", "    profiles/1:\n")
        .replace("extensions:\n  zpages: {}\n", "")
        .replace("  extensions: [zpages]\n", "");
    assert_ne!(edited, text);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, edited).unwrap();

    let out = profcol()
        .arg("validate")
        .arg(format!("--config=file:{}", path.display()))
        .env("MY_POD_IP", "127.0.0.1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let sink = Sink::start().await;
    let p = Running::ready(
        profcol()
            .arg(format!("--config=file:{}", path.display()))
            // The pod's address, as the Kubernetes example sets it.
            .env("MY_POD_IP", "127.0.0.1")
            .arg("--set=receivers.otlp.protocols.grpc.endpoint=127.0.0.1:0")
            .arg("--set=receivers::otlp::protocols::http::endpoint=127.0.0.1:0")
            .arg(format!(
                "--set=exporters.otlp.endpoint=http://127.0.0.1:{}",
                sink.addr.port()
            ))
            .arg("--set=service.telemetry.metrics.address=127.0.0.1:0")
            .arg("--set=service.telemetry.logs.encoding=json")
            .arg("--config=yaml:extensions::health_check::endpoint: 127.0.0.1:0")
            .arg("--config=yaml:service::extensions: [health_check]"),
    )
    .await;
    let grpc = p.grpc_port();

    let inputs = synth::service_requests(100, 10, 20);
    let mut c = client(grpc).await;
    for d in &inputs {
        // A busy machine may fill the pipeline for a moment; clients retry
        // UNAVAILABLE, as the Collector's exporters do.
        let mut tries = 0;
        loop {
            let sent = c
                .export(ExportProfilesServiceRequest {
                    resource_profiles: d.resource_profiles.clone(),
                    dictionary: d.dictionary.clone(),
                })
                .await;
            match sent {
                Ok(_) => break,
                Err(s) if s.code() == tonic::Code::Unavailable && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(s) => panic!("{s:?}"),
            }
        }
    }
    p.signal("TERM");
    let (status, logs) = p.wait(Duration::from_secs(20)).await;
    assert!(status.success(), "{logs}");
    assert_eq!(sink.samples(), 2000);
    // batch: default size 8192 samples, 200 ms: a few requests, not 100.
    assert!(sink.calls() <= 10, "{} requests", sink.calls());
    // service.telemetry.logs.encoding: json, one object a line.
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(
            v.get("level").is_some() && v.get("message").is_some(),
            "{l}"
        );
    }
    assert!(
        logs.contains("memory limit set by memory_limiter"),
        "limit_mib sizes the memory budget: {logs}"
    );
}

/// `--config` as the Collector reads it: a bare path or `file:`, `env:` (a
/// whole document in a variable), `yaml:` (keys reaching down with `::`),
/// merged in order with every `--set` last.
#[test]
fn config_sources_merge_in_the_collectors_order() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.yaml");
    std::fs::write(
        &base,
        "receivers: {otlp: {protocols: {grpc: {endpoint: \"127.0.0.1:1\"}}}}\nexporters: {debug: {}}\nservice: {pipelines: {profiles: {receivers: [otlp], exporters: [debug]}}}\n",
    )
    .unwrap();
    let validate = |args: &[String], env: &[(&str, &str)]| {
        let mut c = profcol();
        c.arg("validate").args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let base_arg = format!("--config=file:{}", base.display());
    // A processor from an environment variable, another key from yaml:.
    let out = validate(
        &[
            base_arg.clone(),
            "--config=env:PROFCOL_EXTRA".into(),
            "--config=yaml:service::pipelines::profiles::processors: [batch]".into(),
        ],
        &[("PROFCOL_EXTRA", "processors:\n  batch:\n    timeout: 1s\n")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // --set comes after every --config, whatever the order on the line.
    let out = validate(
        &[
            base_arg.clone(),
            "--set=processors.batch.timeout=-1s".into(),
            "--config=yaml:processors: {batch: {timeout: 1s}}".into(),
            "--config=yaml:service::pipelines::profiles::processors: [batch]".into(),
        ],
        &[],
    );
    let err = stderr(&out);
    assert!(
        err.contains("processors::batch::timeout: invalid duration \"-1s\""),
        "{err}"
    );
    // A bare path is a file, as in the Collector.
    let out = validate(&["--config".into(), base.display().to_string()], &[]);
    assert!(out.status.success(), "{}", stderr(&out));

    // Usage errors (exit 2), each saying what is wrong.
    for (args, want) in [
        (
            vec![base_arg.clone(), "--set=processors.batch".into()],
            "--set processors.batch: missing equal sign",
        ),
        (
            vec!["--config=ftp:x.yaml".into()],
            "--config=ftp:x.yaml: unsupported scheme \"ftp\" (profcol reads file:, env: and yaml:)",
        ),
        (
            vec!["--config=https://example.com/c.yaml".into()],
            "profcol does not fetch configs over https",
        ),
    ] {
        let out = validate(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // An unset variable is named.
    let out = validate(&["--config=env:PROFCOL_NO_SUCH_VAR".into()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--config=env:PROFCOL_NO_SUCH_VAR: the environment variable PROFCOL_NO_SUCH_VAR is not set"),
        "{}",
        stderr(&out)
    );
}

/// `probabilistic_sampler` and `memory_limiter` as the Collector's docs
/// write them load; what profiles cannot do is refused at its key.
#[test]
fn the_collectors_processors_load_with_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    let write = |processors: &str, list: &str| {
        std::fs::write(
            &path,
            format!("receivers: {{otlp: {{protocols: {{grpc: {{endpoint: \"127.0.0.1:1\"}}}}}}}}\nprocessors:\n{processors}\nexporters: {{debug: {{}}}}\nservice: {{pipelines: {{profiles: {{receivers: [otlp], processors: [{list}], exporters: [debug]}}}}}}\n"),
        )
        .unwrap();
        profcol()
            .arg("validate")
            .arg(format!("--config={}", path.display()))
            .output()
            .unwrap()
    };
    // From the Collector's configuration page and READMEs.
    let out = write(
        "  memory_limiter:\n    check_interval: 1s\n    limit_percentage: 75\n    spike_limit_percentage: 15\n  probabilistic_sampler:\n    hash_seed: 22\n    sampling_percentage: 15\n  batch:\n    send_batch_size: 10000\n    timeout: 10s",
        "memory_limiter, probabilistic_sampler, batch",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = write(
        "  memory_limiter:\n    limit_mib: 100\n    spike_limit_mib: 200\n  probabilistic_sampler:\n    mode: proportional\n    sampling_percentage: 15\n  batch:\n    send_batch_size: 100\n  batch/2: {}\n  batch/3:\n    send_batch_size: 100\n    send_batch_max_size: 10",
        "memory_limiter, probabilistic_sampler, batch, batch/2",
    );
    let err = stderr(&out);
    for want in [
        "processors::memory_limiter::check_interval: 'check_interval' must be greater than zero",
        "processors::memory_limiter::spike_limit_mib: 'spike_limit_mib' must be smaller than 'limit_mib'",
        "processors::probabilistic_sampler::mode: \"proportional\" is not supported for profiles",
        "processors::batch/3::send_batch_max_size: send_batch_max_size must be greater or equal to send_batch_size",
        "service::pipelines::profiles::processors: at most one processor per pipeline may hold batches; \"batch\", \"batch/2\" all do",
    ] {
        assert!(err.contains(want), "{want}\nin\n{err}");
    }
}

// ---------------------------------------------------------------------------
// The same config in both: every Collector config profcol carries as a
// fixture goes through `otelcol validate` and `profcol validate`. They must
// agree, or the difference must be a row of the table in
// docs/collector-compatibility.md that says why.
// ---------------------------------------------------------------------------

/// Every Collector config carried as a fixture: the gateway example and the
/// README, docs and testdata examples (see their README.md).
fn collector_configs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otelcol");
    let mut out = vec![fixture()];
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("readme-examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    out.extend(examples);
    out
}

/// What the examples presume of the machine, set up under `dir`, and the
/// config pointed at it. Both validates check that a `file_storage`
/// directory exists, so the examples' directories are made under `dir` and
/// their paths rewritten to them; the one `file_storage` left at its
/// default directory (`/var/lib/otelcol/file_storage`, in
/// extension-file_storage-1) is given that directory, rewritten the same
/// way. Relative paths resolve in `dir`, where both run: `directory: .` is
/// `dir`, and the TLS and token files the examples name (`test.crt`,
/// `file-containing.token`) are not there, as they are not in the
/// Collector's own tests.
fn presumed(text: &str, dir: &std::path::Path) -> String {
    const DIRS: [&str; 3] = [
        "/var/lib/otelcol/file_storage",
        "/var/lib/otelcol/mydir",
        "/var/lib/storage/otc",
    ];
    // `file_storage:` with nothing under it: the next line is a sibling.
    let mut text = text.to_owned();
    if let Some(at) = text.find("\n  file_storage:\n") {
        let next = &text[at + "\n  file_storage:\n".len()..];
        if !next.starts_with("   ") {
            text.insert_str(
                at + "\n  file_storage:\n".len(),
                &format!("    directory: {}\n", DIRS[0]),
            );
        }
    }
    for d in DIRS {
        let made = dir.join(d.trim_start_matches('/'));
        std::fs::create_dir_all(&made).unwrap();
        text = text.replace(d, &made.display().to_string());
    }
    text
}

/// One row of the table: where it applies, to which keys, and what it says.
#[derive(Debug)]
struct Row {
    text: String,
    places: Vec<Place>,
    /// `None`: any key.
    keys: Option<Vec<RowKey>>,
    verdict: String,
}

/// A component kind and its types (`None`: every type of the kind), or a
/// config path (`service.telemetry.logs`).
#[derive(Debug)]
enum Place {
    Component(&'static str, Option<Vec<String>>),
    Path(Vec<String>),
}

/// `a.b` or `a.b: value`.
#[derive(Debug)]
struct RowKey {
    path: Vec<String>,
    value: Option<String>,
}

const SECTIONS: [(&str, &str); 5] = [
    ("receivers", "receiver"),
    ("processors", "processor"),
    ("exporters", "exporter"),
    ("extensions", "extension"),
    ("connectors", "connector"),
];

/// The backticked parts of a cell, and the text outside them.
fn ticks(cell: &str) -> (Vec<String>, String) {
    let mut inside = Vec::new();
    let mut outside = String::new();
    for (i, part) in cell.split('`').enumerate() {
        if i % 2 == 1 {
            inside.push(part.to_owned());
        } else {
            outside.push_str(part);
            outside.push(' ');
        }
    }
    (inside, outside)
}

fn kind_of(word: &str) -> Option<&'static str> {
    SECTIONS
        .iter()
        .find(|(plural, singular)| word == *plural || word == *singular)
        .map(|(_, singular)| *singular)
}

/// The table of docs/collector-compatibility.md, from the page's title to
/// the next heading.
fn compatibility_table() -> Vec<Row> {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/collector-compatibility.md"),
    )
    .unwrap();
    let start = page
        .find("# Collector compatibility\n")
        .expect("docs/collector-compatibility.md has its title");
    let section = &page[start..];
    let end = section[3..]
        .find("\n#")
        .map(|i| i + 3)
        .unwrap_or(section.len());
    let mut rows = Vec::new();
    for line in section[..end].lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a row of three cells: {line}");
        if cells[0] == "Collector" || cells[0].starts_with("---") {
            continue;
        }
        let verdict = cells[2].to_owned();
        assert!(
            ["supported", "accepted", "refused", "checked", "different meaning"]
                .iter()
                .any(|v| verdict.starts_with(v)),
            "the third cell starts with the verdict (supported, accepted, refused, checked, different meaning): {line}"
        );
        let mut places = Vec::new();
        for group in cells[0].split(';') {
            let (names, words) = ticks(group);
            let kinds: Vec<&'static str> = words
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter_map(kind_of)
                .collect();
            match (kinds.as_slice(), names.is_empty()) {
                ([], true) => {} // command line, config
                ([], false) => places.extend(
                    names
                        .iter()
                        .map(|n| Place::Path(n.split('.').map(str::to_owned).collect())),
                ),
                (kinds, true) => places.extend(kinds.iter().map(|k| Place::Component(k, None))),
                ([kind], false) => places.push(Place::Component(kind, Some(names))),
                _ => panic!("one kind to the types of a group: {line}"),
            }
        }
        let keys = if cells[1].starts_with("any") {
            None
        } else {
            Some(
                ticks(cells[1])
                    .0
                    .iter()
                    .map(|k| {
                        let (k, v) = match k.split_once(": ") {
                            Some((k, v)) => (k, Some(v.trim_end_matches("...").to_owned())),
                            None => (k.as_str(), None),
                        };
                        RowKey {
                            path: k
                                .trim_end_matches('*')
                                .trim_end_matches('.')
                                .split('.')
                                .map(str::to_owned)
                                .collect(),
                            value: v,
                        }
                    })
                    .collect(),
            )
        };
        rows.push(Row {
            text: line.to_owned(),
            places,
            keys,
            verdict,
        });
    }
    assert!(rows.len() > 40, "the table was not found whole: {rows:?}");
    rows
}

/// A problem one side reported: its key path (`exporters`, `otlp_grpc`,
/// `tls`, `ca_file`; a component id as its type) and what it said.
#[derive(Debug)]
struct Fault {
    path: Vec<String>,
    message: String,
}

/// A path's segments, each without its `/name`.
fn segments<'a>(path: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    path.into_iter()
        .map(|s| s.split('/').next().unwrap_or(s).trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// One error of `profcol validate`: `PATH: message`, with the field an
/// `unknown field "x"` names added to the path.
fn profcol_fault(line: &str) -> Fault {
    let (path, message) = line.trim().split_once(": ").unwrap_or(("", line));
    let mut path = segments(path.split("::"));
    if let Some(field) = message
        .strip_prefix("unknown field \"")
        .and_then(|m| m.split('"').next())
    {
        path.push(field.to_owned());
    }
    Fault {
        path,
        message: message.to_owned(),
    }
}

/// Every error `profcol validate` listed; one fault without a path for
/// output of another shape (a usage error, a crash).
fn profcol_faults(stderr: &str) -> Vec<Fault> {
    let Some((_, list)) = stderr.split_once(" errors):\n") else {
        return vec![Fault {
            path: vec![],
            message: stderr.to_owned(),
        }];
    };
    list.lines()
        .filter(|l| l.starts_with("  "))
        .map(profcol_fault)
        .collect()
}

/// The Collector's exporter types the test peer lacks (see
/// tests/otelcol/builder-config.yaml: a dependency of load_balancing
/// v0.161.0 is refused by the Go module proxy), so its complaint is
/// `unknown type`. v0.161.0's load_balancing declares no profiles (its
/// metadata.yaml: traces, metrics, logs), so in these profiles pipelines it
/// would refuse it as "telemetry type is not supported": that is the
/// complaint matched against the table.
const NOT_IN_PEER: [&str; 2] = ["load_balancing", "loadbalancing"];

/// Between the first `"` and the next.
fn quoted_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &text[text.find(marker)? + marker.len()..];
    rest.split('"').next()
}

/// Where `otelcol validate` failed and why, from its messages' shapes:
/// a pipeline it cannot build, an unknown type, keys it cannot decode, or
/// `Error: PATH: message`.
fn collector_fault(out: &str) -> Fault {
    let message = out.trim().to_owned();
    if let Some(id) = quoted_after(out, "failed to create \"") {
        let rest = &out[out.find("failed to create \"").unwrap() + 18 + id.len()..];
        let kind = rest
            .trim_start_matches('"')
            .split(',')
            .next()
            .unwrap_or("")
            .trim();
        let section = SECTIONS
            .iter()
            .find(|(_, s)| *s == kind)
            .map_or(kind, |(p, _)| p);
        return Fault {
            path: segments([section, id]),
            message,
        };
    }
    if let Some(ty) = quoted_after(out, "unknown type: \"") {
        // `'exporters' unknown type: "T" for id: ...`
        let section = out
            .lines()
            .find(|l| l.contains("unknown type: \""))
            .and_then(|l| l.strip_prefix('\''))
            .and_then(|l| l.split('\'').next())
            .unwrap_or("");
        let message = if NOT_IN_PEER.contains(&ty) {
            format!("{message}\n(not in the test peer; v0.161.0 would refuse it in a profiles pipeline: telemetry type is not supported)")
        } else {
            message
        };
        return Fault {
            path: segments([section, ty]),
            message,
        };
    }
    if let Some(keys) = out
        .split("has invalid keys: ")
        .nth(1)
        .and_then(|k| k.lines().next())
    {
        // `'receivers' error reading configuration for "otlp"`, then
        // `'protocols.http' decoding failed`..., down to the keys.
        let mut path = Vec::new();
        for line in out.lines() {
            let Some(name) = line.strip_prefix('\'').and_then(|l| l.split('\'').next()) else {
                continue;
            };
            // A Go type (`'configgrpc.ServerConfig' has invalid keys`) is
            // no key; a map's name (`'protocols'`) is.
            if !name.chars().any(|c| c.is_ascii_uppercase()) {
                path.extend(segments(name.split('.')));
            }
            if line.contains("has invalid keys") {
                break;
            }
            if let Some(id) = quoted_after(line, "error reading configuration for \"") {
                path.extend(segments([id]));
            }
        }
        path.extend(segments([keys.split(", ").next().unwrap_or(keys)]));
        return Fault { path, message };
    }
    if let Some(line) = out.lines().find_map(|l| l.strip_prefix("Error: ")) {
        if let Some((path, _)) = line.split_once(": ").filter(|(p, _)| p.contains("::")) {
            // Go struct names the Collector puts in its paths are no keys.
            let path = path
                .split("::")
                .filter(|s| !matches!(*s, "clientconfig" | "config" | "timeoutconfig"));
            return Fault {
                path: segments(path),
                message,
            };
        }
    }
    Fault {
        path: vec![],
        message,
    }
}

/// Which side refused: profcol a config the Collector took, or the
/// Collector one profcol took.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Refused {
    ByProfcol,
    ByCollector,
}

impl Row {
    /// Whether this row explains `fault`: its place and key, and a verdict
    /// that fits the side that refused, with a reason.
    fn explains(&self, fault: &Fault, by: Refused) -> bool {
        let verdict_fits = match by {
            Refused::ByProfcol => ["refused", "checked", "different meaning"]
                .iter()
                .any(|v| self.verdict.starts_with(v)),
            Refused::ByCollector => !self.verdict.starts_with("refused"),
        };
        // The reason: more than the verdict alone.
        let reasoned =
            self.verdict.contains(':') || self.verdict.contains('(') || self.verdict.contains(';');
        if !verdict_fits || !reasoned {
            return false;
        }
        self.places.iter().any(|place| {
            let Some(key) = place.key_of(&fault.path) else {
                return false;
            };
            let key_fits = match &self.keys {
                None => true,
                Some(keys) => keys.iter().any(|k| {
                    let at = key
                        .windows(k.path.len())
                        .any(|w| w.iter().zip(&k.path).all(|(a, b)| a == b));
                    at && k
                        .value
                        .as_ref()
                        .is_none_or(|v| fault.message.contains(v.as_str()))
                }),
            };
            // A complaint of the Collector's without a key is explained by
            // a row that quotes it.
            let quoted = by == Refused::ByCollector
                && self
                    .verdict
                    .split('"')
                    .skip(1)
                    .step_by(2)
                    .any(|q| q.len() > 8 && fault.message.contains(q));
            key_fits || quoted
        })
    }
}

impl Row {
    /// Rows naming types come before rows for a whole kind, and those
    /// before rows for any key.
    fn specificity(&self) -> (bool, bool) {
        let typed = self
            .places
            .iter()
            .any(|p| matches!(p, Place::Component(_, Some(_)) | Place::Path(_)));
        (typed, self.keys.is_some())
    }
}

impl Place {
    /// The key under this place of a fault at `path`, if it is here.
    fn key_of<'a>(&self, path: &'a [String]) -> Option<&'a [String]> {
        match self {
            Place::Component(kind, types) => {
                let (section, ty) = (path.first()?, path.get(1)?);
                let here = kind_of(section) == Some(*kind)
                    && types.as_ref().is_none_or(|t| t.contains(ty));
                here.then(|| &path[2..])
            }
            Place::Path(prefix) => path.starts_with(prefix).then(|| &path[prefix.len()..]),
        }
    }
}

/// Runs both validates on every Collector config carried as a fixture.
/// They agree, or each error of the side that refused is a row of the
/// table in docs/collector-compatibility.md that says why: profcol's every error
/// when only profcol refuses, the Collector's complaint (it reports the
/// first it meets) when only it does.
///
/// Where both refuse, that is enough. Most refuse for the same reason
/// (profcol at the key, the Collector often at the component); noticed
/// where the reasons differ:
/// - processor-batch-1: the Collector, batch/2 takes no profiles; profcol,
///   two batch processors in one pipeline.
/// - processor-probabilistic_sampler-testdata-1: the Collector, no profiles;
///   profcol, `mode: proportional`.
/// - exporter-loadbalancing-2/3/4, -testdata-1: the Collector, no
///   load_balancing in the test peer; profcol, what it refuses of each
///   (resolver k8s and aws_cloud_map, per-backend queues). -2 also lists
///   `file_storage` in service.extensions but configures `file_storage/otc`
///   (so in the README it was copied from).
/// - extension-health_check-testdata-5: the Collector, its v2 keys without
///   the feature gate; profcol, the v2 keys.
/// - service-telemetry-testdata-7: the Collector, views below level
///   detailed; profcol, views.
#[test]
fn the_collector_and_profcol_agree_on_every_collector_config() {
    let Some(bin) = common::otelcol::binary() else {
        return;
    };
    let table = compatibility_table();
    let configs = collector_configs();
    assert!(configs.len() > 90, "{} configs", configs.len());
    let mut missing = Vec::new();
    let mut explained = Vec::new();
    let mut both_refuse = Vec::new();
    for config in &configs {
        let name = config.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(&name);
        let text = std::fs::read_to_string(config).unwrap();
        std::fs::write(&path, presumed(&text, dir.path())).unwrap();
        // The pod's address, as the Kubernetes examples set it.
        let (otel_ok, otel_out) = common::otelcol::validate_with(&bin, &path, |c| {
            c.current_dir(dir.path()).env("MY_POD_IP", "127.0.0.1");
        });
        let out = profcol()
            .current_dir(dir.path())
            .env("MY_POD_IP", "127.0.0.1")
            .arg("validate")
            .arg(format!("--config=file:{}", path.display()))
            .output()
            .unwrap();
        let (prof_ok, prof_err) = (out.status.success(), stderr(&out));
        let (by, faults) = match (otel_ok, prof_ok) {
            (true, true) => continue,
            (false, false) => {
                both_refuse.push(name);
                continue;
            }
            (true, false) => (Refused::ByProfcol, profcol_faults(&prof_err)),
            (false, true) => (Refused::ByCollector, vec![collector_fault(&otel_out)]),
        };
        for fault in faults {
            // The most specific row that explains it: one naming the type
            // before one for every type of a kind.
            let row = table
                .iter()
                .filter(|r| r.explains(&fault, by))
                .max_by_key(|r| r.specificity());
            match row {
                Some(row) => explained.push(format!("{name}: {:?}\n  {}", fault.path, row.text)),
                None => missing.push(format!(
                    "{name}: only {} refuses it, and no row of the table in docs/collector-compatibility.md explains\n  at {:?}: {}\n\
                     (a row naming the kind and type, or the config path, and the key, whose third cell starts with {} and gives the reason)\n\
                     --- otelcol validate ({}):\n{}\n--- profcol validate ({}):\n{}",
                    if by == Refused::ByProfcol { "profcol" } else { "the Collector" },
                    fault.path,
                    fault.message,
                    if by == Refused::ByProfcol { "refused, checked or different meaning" } else { "supported or accepted" },
                    if otel_ok { "ok" } else { "failed" },
                    otel_out.trim(),
                    if prof_ok { "ok" } else { "failed" },
                    prof_err.trim(),
                )),
            }
        }
    }
    eprintln!("both refuse: {}", both_refuse.join(", "));
    eprintln!("differences the table explains:\n{}", explained.join("\n"));
    assert!(missing.is_empty(), "{}", missing.join("\n\n"));
}

/// The matching itself: the paths both sides' messages give, and a row
/// explaining only what it names, with a reason, for the side it fits.
#[test]
fn table_rows_match_errors_by_type_and_key() {
    let f = profcol_fault("  exporters::otlp_grpc/withauth::tls::ca_file: cannot read x: nope");
    assert_eq!(f.path, ["exporters", "otlp_grpc", "tls", "ca_file"]);
    let f =
        profcol_fault(r#"  extensions::health_check/1: unknown field "tls", expected one of "a""#);
    assert_eq!(f.path, ["extensions", "health_check", "tls"]);
    let f = profcol_fault(
        "  service::pipelines::traces/1: only profiles and metrics pipelines are supported",
    );
    assert_eq!(f.path, ["service", "pipelines", "traces"]);

    let f = collector_fault("Error: failed to build pipelines: failed to create \"batch/2\" processor, in pipeline \"profiles\": telemetry type is not supported\n");
    assert_eq!(f.path, ["processors", "batch"]);
    let f = collector_fault("Error: failed to get config: cannot unmarshal the configuration: decoding failed due to the following error(s):\n\n'exporters' unknown type: \"load_balancing\" for id: \"load_balancing/2\" (valid values: [otlp])\n");
    assert_eq!(f.path, ["exporters", "load_balancing"]);
    assert!(f.message.contains("telemetry type is not supported"));
    let f = collector_fault("Error: failed to get config: cannot unmarshal the configuration: decoding failed due to the following error(s):\n\n'service.telemetry.metrics' decoding failed due to the following error(s):\n\n'migration.MetricsConfigV030' has invalid keys: address\n");
    assert_eq!(f.path, ["service", "telemetry", "metrics", "address"]);
    let f = collector_fault("Error: failed to get config: cannot unmarshal the configuration: decoding failed due to the following error(s):\n\n'receivers' error reading configuration for \"otlp/2\": decoding failed due to the following error(s):\n\n'protocols' has invalid keys: htttp\n");
    assert_eq!(f.path, ["receivers", "otlp", "protocols", "htttp"]);
    let f = collector_fault("Error: exporters::otlp_grpc/missing_port::clientconfig: address example.com: missing port in address\n");
    assert_eq!(f.path, ["exporters", "otlp_grpc"]);

    let table = compatibility_table();
    let explains = |line: &str, by| {
        let f = profcol_fault(line);
        table.iter().any(|r| r.explains(&f, by))
    };
    for line in [
        "exporters::otlp_grpc::sending_queue::sizer: \"items\" is not supported with storage",
        "receivers::otlp::protocols::grpc::tls::cert_file: cannot read test.crt",
        "processors::probabilistic_sampler/2::mode: \"proportional\" is not supported for profiles",
        "exporters::file/3::encoding: unknown field `encoding`",
        "service::telemetry::metrics::readers::0::periodic: periodic readers are not supported",
        "extensions::zpages: unknown type \"zpages\"",
    ] {
        assert!(explains(line, Refused::ByProfcol), "{line}");
    }
    for line in [
        // Supported rows explain no refusal, a value must be the one named,
        // a key is not matched inside another, and a type must be listed.
        "exporters::otlp::endpoint: is required",
        "exporters::otlp::sending_queue::sizer: unknown value \"pages\"",
        "processors::probabilistic_sampler::mode: \"other\" is not supported",
        "exporters::file::compression: gzip is not supported",
        "exporters::debug::verbosity: unknown value \"loud\"",
        "extensions::sigv4auth::region: x",
    ] {
        assert!(!explains(line, Refused::ByProfcol), "{line}");
    }
    let f = collector_fault(
        "Error: receivers::otlp: must specify at least one protocol when using the OTLP receiver\n",
    );
    assert!(table.iter().any(|r| r.explains(&f, Refused::ByCollector)));
    let f = collector_fault("Error: receivers::otlp: something else entirely\n");
    assert!(!table.iter().any(|r| r.explains(&f, Refused::ByCollector)));
}
