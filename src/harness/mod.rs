//! `profcol test FILE...`: runs pipeline configs on recorded payloads, in
//! process, with the real loader, receivers and processors, and checks what
//! each exporter was given.

mod expect;
pub mod flamegraph;
mod inputs;
mod patch;
mod sinks;
pub mod spec;
pub mod stacks;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use profcol_pipeline::runtime::{RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

use expect::{check, Received};
use inputs::Target;
use sinks::{Capture, SentrySink};
use spec::{ConfigSource, TestCase, TestFile};

/// Totals over every file run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
}

/// Runs every test of every file, printing one line per test and the
/// failures' details to `out`; with `flamegraphs`, a failing test's
/// exporters' flame graphs are written there.
pub async fn run_files(
    files: &[PathBuf],
    update: bool,
    flamegraphs: Option<&Path>,
    out: &mut dyn std::io::Write,
) -> Summary {
    let mut summary = Summary::default();
    for file in files {
        let parsed = std::fs::read_to_string(file)
            .with_context(|| format!("reading {}", file.display()))
            .and_then(|t| {
                serde_yaml_ng::from_str::<TestFile>(&t)
                    .with_context(|| format!("{}: not a valid test file", file.display()))
            });
        let tf = match parsed {
            Ok(tf) => tf,
            Err(e) => {
                let _ = writeln!(out, "{}: FAILED\n    {e:#}", file.display());
                summary.failed += 1;
                continue;
            }
        };
        let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        for case in &tf.tests {
            let result = match case.config.as_ref().or(tf.config.as_ref()) {
                Some(source) => run_case(case, source, &base, update, flamegraphs).await,
                None => Err(anyhow::anyhow!(
                    "no config: give the file or this test a `config`"
                )),
            };
            let (failures, updated, graphs) = match result {
                Ok(o) => o,
                Err(e) => (vec![format!("{e:#}")], Vec::new(), Vec::new()),
            };
            let status = if failures.is_empty() { "ok" } else { "FAILED" };
            let _ = writeln!(out, "{} :: {} ... {status}", file.display(), case.name);
            for u in updated {
                let _ = writeln!(out, "    updated snapshot {u}");
            }
            for g in graphs {
                let _ = writeln!(out, "    wrote flame graph {}", g.display());
            }
            for f in &failures {
                for (i, line) in f.lines().enumerate() {
                    let _ = writeln!(out, "{}{line}", if i == 0 { "    - " } else { "      " });
                }
            }
            if failures.is_empty() {
                summary.passed += 1;
            } else {
                summary.failed += 1;
            }
        }
    }
    let _ = writeln!(out, "{} passed, {} failed", summary.passed, summary.failed);
    summary
}

/// Failures, snapshots updated, flame graphs written.
type CaseOutcome = (Vec<String>, Vec<String>, Vec<PathBuf>);

async fn run_case(
    case: &TestCase,
    source: &ConfigSource,
    base: &Path,
    update: bool,
    flamegraphs: Option<&Path>,
) -> anyhow::Result<CaseOutcome> {
    let mut yaml: serde_yaml_ng::Value = match source {
        ConfigSource::Path(p) => {
            let p = base.join(p);
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("reading config {}", p.display()))?;
            serde_yaml_ng::from_str(&text)
                .with_context(|| format!("config {}: not YAML", p.display()))?
        }
        ConfigSource::Inline(v) => v.clone(),
    };
    // Resolved before the config is patched, as the loader resolves them:
    // a `<<: *base` at the top holds the sections to patch.
    yaml.apply_merge().context("config: `<<` merge keys")?;
    let scratch = tempfile::tempdir().context("creating a scratch directory")?;
    let sentry_sink = SentrySink::start().await?;
    let patched = patch::patch(yaml, scratch.path(), sentry_sink.port)?;
    let text = serde_yaml_ng::to_string(&patched.yaml)?;
    let (cfg, mut graph) = crate::app::load_str(&text).map_err(|errs| {
        anyhow::anyhow!(
            "invalid configuration:\n{}",
            errs.0
                .iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;

    // Nothing but the receivers binds: no extensions, no metrics endpoint.
    graph.extensions.clear();
    graph.telemetry.metrics_address = None;
    let mut captured = BTreeMap::new();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    for node in &mut graph.exporters {
        let ty = node.id.ty.as_str();
        let batches: Arc<Mutex<Vec<_>>> = Arc::default();
        let keep_real = matches!(ty, "sentry" | "pprof");
        node.exporter = Arc::new(Capture {
            batches: batches.clone(),
            inner: keep_real.then(|| node.exporter.clone()),
            errors: errors.clone(),
            id: node.id.to_string(),
        });
        // One attempt, in order, and never dropped for a full queue.
        node.settings.retry_on_failure.enabled = false;
        node.settings.sending_queue.num_consumers = 1;
        node.settings.sending_queue.block_on_overflow = true;
        captured.insert(node.id.to_string(), (ty.to_owned(), batches));
    }
    let targets: BTreeMap<String, Target> = patched
        .receivers
        .into_iter()
        .map(|(id, t)| match t {
            Target::Sentry { port, .. } => {
                let key = cfg
                    .receivers
                    .iter()
                    .find(|(cid, _)| cid.to_string() == id)
                    .and_then(|(_, c)| first_key(&c.value));
                (id, Target::Sentry { port, key })
            }
            other => (id, other),
        })
        .collect();

    let svc =
        RunningService::start(graph, RuntimeOptions::default(), Arc::new(Telemetry::new())).await?;
    let mut failures = Vec::new();
    for (n, input) in case.inputs.iter().enumerate() {
        let what = format!("input {} ({})", n + 1, input.file.display());
        let Some(target) = targets.get(&input.receiver) else {
            failures.push(format!(
                "{what}: no receiver {:?} in a pipeline (known: {})",
                input.receiver,
                targets.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
            continue;
        };
        let sent = match inputs::load(&base.join(&input.file), input.format) {
            Ok(payload) => inputs::send(target, payload, &what).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            failures.push(format!("{e:#}"));
        }
    }
    // Shutdown drains every queue, so everything accepted has been exported.
    svc.shutdown().await;
    failures.extend(errors.lock().unwrap().drain(..));
    failures.extend(sentry_sink.errors.lock().unwrap().drain(..));

    // A snapshot is only rewritten from a run whose inputs all went in.
    let update = update && failures.is_empty();
    let mut updated = Vec::new();
    let mut graphs = Vec::new();
    for (id, want) in &case.expect {
        let Some((ty, batches)) = captured.get(id) else {
            failures.push(format!(
                "exporter {id}: not in any pipeline (exporters: {})",
                captured.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
            continue;
        };
        let got = Received {
            batches: batches.lock().unwrap().clone(),
            sentry_chunks: (ty == "sentry").then(|| sentry_sink.chunks()),
            pprof_files: (ty == "pprof")
                .then(|| count_files(&patch::pprof_dir(scratch.path(), id))),
        };
        let o = check(id, &got, want, base, update);
        if let (Some(dir), false) = (flamegraphs, o.failures.is_empty()) {
            let profiles: Vec<_> = got
                .batches
                .iter()
                .flat_map(|b| profcol_model::folded(b.data()))
                .collect();
            let expected = want
                .snapshot
                .as_ref()
                .and_then(|s| std::fs::read_to_string(base.join(s)).ok())
                .map(|t| flamegraph::stacks_of_snapshot(&t));
            let actual = flamegraph::stacks_of(&profiles);
            match flamegraph::write_case(dir, &case.name, id, &actual, expected.as_ref()) {
                Ok(paths) => graphs.extend(paths),
                Err(e) => failures.push(format!("flame graphs: {e:#}")),
            }
        }
        failures.extend(o.failures);
        updated.extend(o.updated);
    }
    Ok((failures, updated, graphs))
}

fn first_key(value: &figment::value::Value) -> Option<String> {
    value
        .find_ref("keys")?
        .as_array()?
        .first()?
        .as_str()
        .map(str::to_owned)
}

fn count_files(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count() as u64
        })
        .unwrap_or(0)
}
