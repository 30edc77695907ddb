//! profcol's OTTL processors (`transform`, `filter`, `resource`) against
//! the real Collector: the same config and the same requests through both
//! give the same resolved output. The corpus (tests/fixtures/ottl/cases.yaml)
//! holds the examples of the Collector's READMEs that apply to profiles and
//! cases for every editor and converter profcol has; a seeded generator adds
//! statements from a grammar subset (`OTTL_DIFF_SEED=<n>` picks another
//! seed). Each side runs once for all cases: one OTLP receiver fanning out
//! to one pipeline per case, each with its own file exporter. Configs the
//! Collector refuses at `validate` must be refused by profcol, and the other
//! way round; a case's `expect:` states where the two differ by design.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use common::seen::{all_seen, difference, seen, Seen};
use common::{otelcol, Ports, Running};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use serde_json::{json, Value};

/// What a case expects of the two.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// Both take it and give the same output.
    Same,
    /// Both refuse the config.
    RefusedByBoth,
    /// The Collector takes it, profcol refuses it when the config loads.
    RefusedByProfcol(String),
    /// Both run it; the outputs differ, by design.
    Differs(String),
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    /// `transform`, `filter` or `resource`.
    kind: String,
    config: Value,
    expect: Expect,
}

/// A case and its place in the run (its pipeline's number).
type Indexed<'a> = (usize, &'a Case);

impl Case {
    fn id(&self, i: usize) -> String {
        format!("{}/{i}", self.kind)
    }
}

/// `tests/fixtures/ottl/NAME`.
fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ottl")
        .join(name)
}

const KINDS: [&str; 3] = ["transform", "filter", "resource"];

/// The corpus; a malformed entry fails naming it.
fn corpus() -> Vec<Case> {
    let path = fixture("cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let entries: Vec<serde_yaml_ng::Value> =
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut names = BTreeSet::new();
    entries
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let e: Value = serde_json::to_value(e).unwrap();
            let name = e["name"]
                .as_str()
                .unwrap_or_else(|| panic!("cases.yaml entry {i}: no name"))
                .to_owned();
            assert!(names.insert(name.clone()), "cases.yaml: {name} twice");
            let kinds: Vec<&str> = KINDS
                .iter()
                .copied()
                .filter(|k| e.get(*k).is_some())
                .collect();
            assert_eq!(kinds.len(), 1, "{name}: one of {KINDS:?}");
            let expect = match &e["expect"] {
                Value::Null => Expect::Same,
                Value::Object(m) => match (m.get("refused"), m.get("differs")) {
                    (Some(w), None) if w == "both" => Expect::RefusedByBoth,
                    (Some(w), None) if w == "profcol" => Expect::RefusedByProfcol(
                        m.get("why")
                            .and_then(Value::as_str)
                            .unwrap_or_else(|| panic!("{name}: refused by profcol: say why"))
                            .to_owned(),
                    ),
                    (None, Some(Value::String(why))) => Expect::Differs(why.clone()),
                    _ => panic!("{name}: unknown expect {m:?}"),
                },
                other => panic!("{name}: unknown expect {other}"),
            };
            for key in e.as_object().unwrap().keys() {
                assert!(
                    ["name", "source", "expect"].contains(&key.as_str())
                        || KINDS.contains(&key.as_str()),
                    "{name}: unknown key {key}"
                );
            }
            Case {
                kind: kinds[0].to_owned(),
                config: e[kinds[0]].clone(),
                name,
                expect,
            }
        })
        .collect()
}

/// The requests both get: the synthetic one (attributes of every type on
/// resources, scopes and profiles, a unit, an entry two profiles share)
/// and recorded ones.
fn inputs() -> Vec<ExportProfilesServiceRequest> {
    let synthetic =
        profcol_otlp::json::decode(&std::fs::read(fixture("input.json")).unwrap()).unwrap();
    let mut out = vec![ExportProfilesServiceRequest {
        resource_profiles: synthetic.resource_profiles,
        dictionary: synthetic.dictionary,
    }];
    for rel in ["otlp/go-cpu.otlp.bin", "otlp/two-resources-request.bin"] {
        out.push(common::request(rel));
    }
    out
}

/// One process's config: `cases` as pipelines `profiles/<i>`, each
/// writing to `<dir>/<i>.json`. JSON is YAML, and keeps OTTL strings as
/// they are.
fn config(cases: &[Indexed], dir: &Path, head: Value) -> String {
    let mut cfg = head;
    for (i, c) in cases {
        let id = c.id(*i);
        cfg["processors"][&id] = c.config.clone();
        cfg["exporters"][format!("file/{i}")] =
            json!({"path": dir.join(format!("{i}.json")).display().to_string()});
        cfg["service"]["pipelines"][format!("profiles/{i}")] =
            json!({"receivers": ["otlp"], "processors": [id], "exporters": [format!("file/{i}")]});
    }
    serde_json::to_string_pretty(&cfg).unwrap()
}

fn collector_config(cases: &[Indexed], dir: &Path, ports: &[u16]) -> String {
    config(
        cases,
        dir,
        json!({
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": format!("127.0.0.1:{}", ports[0]), "include_metadata": true}}}},
            "processors": {}, "exporters": {},
            "extensions": {"health_check": {"endpoint": format!("127.0.0.1:{}", ports[1])}},
            "service": {
                "extensions": ["health_check"],
                "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "error"}},
                "pipelines": {},
            },
        }),
    )
}

fn profcol_config(cases: &[Indexed], dir: &Path) -> String {
    config(
        cases,
        dir,
        json!({
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": "127.0.0.1:0", "include_metadata": true}}}},
            "processors": {}, "exporters": {},
            "service": {
                "telemetry": {"metrics": {"address": "127.0.0.1:0"}},
                "pipelines": {},
            },
        }),
    )
}

/// What each case's file exporter wrote, resolved and sorted; a missing
/// file is an empty output. A line seen before (a statement that matched
/// nothing leaves its input as it was) is resolved once.
fn outputs(dir: &Path, cases: &[Indexed]) -> Vec<Vec<Seen>> {
    let mut resolved: HashMap<String, Vec<Seen>> = HashMap::new();
    cases
        .iter()
        .map(|(i, c)| {
            let text = std::fs::read_to_string(dir.join(format!("{i}.json"))).unwrap_or_default();
            let mut got = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                if !resolved.contains_key(line) {
                    let data = profcol_otlp::json::decode(line.as_bytes())
                        .unwrap_or_else(|e| panic!("{}: a line of {i}.json: {e}", c.name));
                    resolved.insert(line.to_owned(), seen(&data));
                }
                got.extend(resolved[line].iter().cloned());
            }
            got.sort();
            got
        })
        .collect()
}

/// Sends every request, with headers the `otelcol.client.metadata` cases
/// read (`x-multi` twice); an answer that is an error (a processor with
/// `error_mode: propagate` failed it) is expected of some cases.
async fn send(port: u16, requests: &[ExportProfilesServiceRequest]) {
    let mut client = common::client(port).await;
    for r in requests {
        let mut req = tonic::Request::new(r.clone());
        let md = req.metadata_mut();
        md.insert("x-tenant", "team-a".parse().unwrap());
        md.append("x-multi", "one".parse().unwrap());
        md.append("x-multi", "two".parse().unwrap());
        let _ = client.export(req).await;
    }
}

/// Stops `p` (SIGTERM: exporters flush and close their files), failing
/// with its logs if it does not exit cleanly.
async fn stop(p: Running, who: &str) {
    p.signal("TERM");
    let (status, logs) = p.wait(Duration::from_secs(30)).await;
    assert!(status.success(), "{who} exited with {status}:\n{logs}");
}

/// Whether `profcol validate` takes `config`, and what it printed.
fn profcol_validate(config: &Path) -> (bool, String) {
    let out = common::profcol()
        .args(["validate", "--config"])
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The ids of `cases` that a validate message names.
fn named(cases: &[Indexed], text: &str) -> BTreeSet<usize> {
    cases
        .iter()
        .filter(|(i, c)| {
            let id = c.id(*i);
            // `transform/1` must not match inside `transform/12`.
            text.match_indices(&id).any(|(at, _)| {
                !text[at + id.len()..]
                    .chars()
                    .next()
                    .is_some_and(|ch| ch.is_ascii_digit())
            })
        })
        .map(|(i, _)| *i)
        .collect()
}

/// Whether each side takes each case's config on its own:
/// `(collector, profcol)` per case, each with its message.
fn validate_each(
    bin: &Path,
    cases: &[Indexed],
    dir: &Path,
) -> Vec<((bool, String), (bool, String))> {
    std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|&(i, c)| {
                s.spawn(move || {
                    let one = [(i, c)];
                    let cpath = dir.join(format!("validate-collector-{i}.yaml"));
                    std::fs::write(&cpath, collector_config(&one, dir, &[1, 2])).unwrap();
                    let ppath = dir.join(format!("validate-profcol-{i}.yaml"));
                    std::fs::write(&ppath, profcol_config(&one, dir)).unwrap();
                    (otelcol::validate(bin, &cpath), profcol_validate(&ppath))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Both sides' outputs for `cases`, each side one process for all: the
/// Collector's and profcol's, per case in order. Cases either side refuses
/// at `validate` are left out of the run and returned instead: `(refused
/// by the Collector, refused by profcol)`, with the messages.
struct Run {
    collector: Vec<Vec<Seen>>,
    profcol: Vec<Vec<Seen>>,
    refused: (BTreeSet<usize>, BTreeSet<usize>),
    messages: (String, String),
}

async fn run(bin: &Path, cases: &[Indexed<'_>]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (cdir, pdir) = (dir.path().join("collector"), dir.path().join("profcol"));
    std::fs::create_dir_all(&cdir).unwrap();
    std::fs::create_dir_all(&pdir).unwrap();

    // Refusals first, all at once (both report every component's error).
    let cpath = dir.path().join("collector-validate.yaml");
    std::fs::write(&cpath, collector_config(cases, &cdir, &[1, 2])).unwrap();
    let ppath = dir.path().join("profcol-validate.yaml");
    std::fs::write(&ppath, profcol_config(cases, &pdir)).unwrap();
    let ((c_ok, c_msg), (p_ok, p_msg)) = std::thread::scope(|s| {
        let c = s.spawn(|| otelcol::validate(bin, &cpath));
        let p = profcol_validate(&ppath);
        (c.join().unwrap(), p)
    });
    let c_refused = if c_ok {
        BTreeSet::new()
    } else {
        named(cases, &c_msg)
    };
    let p_refused = if p_ok {
        BTreeSet::new()
    } else {
        named(cases, &p_msg)
    };
    assert!(
        c_ok || !c_refused.is_empty(),
        "the Collector refused the config, naming no case:\n{c_msg}"
    );
    assert!(
        p_ok || !p_refused.is_empty(),
        "profcol refused the config, naming no case:\n{p_msg}"
    );
    let runnable: Vec<Indexed> = cases
        .iter()
        .copied()
        .filter(|(i, _)| !c_refused.contains(i) && !p_refused.contains(i))
        .collect();
    let requests = inputs();

    let (collector, _cfg_dir, ports) =
        otelcol::start_on_free_ports(bin, 2, |ports| collector_config(&runnable, &cdir, ports))
            .await;
    let pcfg = dir.path().join("profcol.yaml");
    std::fs::write(&pcfg, profcol_config(&runnable, &pdir)).unwrap();
    let profcol = Running::ready(common::profcol().arg("--config").arg(&pcfg)).await;
    let pport = profcol.grpc_port();
    tokio::join!(send(ports[0], &requests), send(pport, &requests));
    tokio::join!(stop(collector, "the Collector"), stop(profcol, "profcol"));

    let (collector, profcol) = std::thread::scope(|s| {
        let c = s.spawn(|| outputs(&cdir, &runnable));
        let p = outputs(&pdir, &runnable);
        (c.join().unwrap(), p)
    });
    let (mut collector, mut profcol) = (collector.into_iter(), profcol.into_iter());
    let (mut c_out, mut p_out) = (Vec::new(), Vec::new());
    for (i, _) in cases {
        if runnable.iter().any(|(j, _)| j == i) {
            c_out.push(collector.next().unwrap());
            p_out.push(profcol.next().unwrap());
        } else {
            c_out.push(Vec::new());
            p_out.push(Vec::new());
        }
    }
    Run {
        collector: c_out,
        profcol: p_out,
        refused: (c_refused, p_refused),
        messages: (c_msg, p_msg),
    }
}

/// Every case of the corpus, as its `expect:` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_gives_what_the_collector_gives() {
    let Some(bin) = otelcol::binary() else { return };
    let started = Instant::now();
    let all = corpus();
    let (refused, ran): (Vec<Indexed>, Vec<Indexed>) =
        all.iter().enumerate().partition(|(_, c)| {
            matches!(
                c.expect,
                Expect::RefusedByBoth | Expect::RefusedByProfcol(_)
            )
        });

    let mut failures = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    for (&(_, c), ((c_ok, c_msg), (p_ok, p_msg))) in
        refused
            .iter()
            .zip(validate_each(&bin, &refused, dir.path()))
    {
        let want = match &c.expect {
            Expect::RefusedByBoth => (false, false),
            _ => (true, false),
        };
        if (c_ok, p_ok) != want {
            failures.push(format!(
                "{}: expected {:?}; the Collector {}, profcol {}\n  Collector: {}\n  profcol: {}",
                c.name,
                c.expect,
                if c_ok { "accepts" } else { "refuses" },
                if p_ok { "accepts" } else { "refuses" },
                c_msg.trim(),
                p_msg.trim()
            ));
        }
    }

    let r = run(&bin, &ran).await;
    for (k, (i, c)) in ran.iter().enumerate() {
        let (c_no, p_no) = (r.refused.0.contains(i), r.refused.1.contains(i));
        if c_no || p_no {
            failures.push(format!(
                "{}: refused by {}\n  Collector: {}\n  profcol: {}",
                c.name,
                match (c_no, p_no) {
                    (true, true) => "both (say expect: {refused: both})",
                    (true, false) => "the Collector only",
                    _ => "profcol only",
                },
                r.messages.0.trim(),
                r.messages.1.trim()
            ));
            continue;
        }
        let diff = difference(&r.collector[k], &r.profcol[k]);
        match (&c.expect, diff) {
            (Expect::Same, Some(d)) => failures.push(format!(
                "{}: profcol's output differs from the Collector's: {d}",
                c.name
            )),
            (Expect::Differs(why), None) => failures.push(format!(
                "{}: expected to differ ({why}), yet the outputs agree",
                c.name
            )),
            _ => {}
        }
    }
    // A case that drops everything in both would test nothing by accident:
    // the corpus as a whole must deliver.
    assert!(
        r.collector.iter().filter(|o| !o.is_empty()).count() > ran.len() / 2,
        "most cases delivered nothing"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!(
        "ottl_differential: {} cases ({} run, {} refused as expected) in {:?}",
        all.len(),
        ran.len(),
        refused.len(),
        started.elapsed()
    );
}

/// A small seeded generator (xorshift64*): the same seed, the same
/// statements.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const STR_PATHS: &[&str] = &[
    r#"profile.attributes["k"]"#,
    r#"profile.attributes["own2"]"#,
    r#"profile.attributes["shared"]"#,
    r#"profile.attributes["k2"]"#,
    r#"profile.attributes["s"]"#,
    r#"resource.attributes["service.name"]"#,
    r#"resource.attributes["host.name"]"#,
    r#"resource.attributes["str_num"]"#,
    "scope.name",
    "profile.sample_type.type",
];
const OTHER_PATHS: &[&str] = &[
    r#"profile.attributes["count"]"#,
    r#"profile.attributes["own1"]"#,
    r#"profile.attributes["ratio"]"#,
    r#"profile.attributes["flag"]"#,
    r#"profile.attributes["list"]"#,
    r#"profile.attributes["map"]"#,
    r#"profile.attributes["nope"]"#,
    r#"resource.attributes["n"]"#,
    r#"resource.attributes["d"]"#,
    r#"resource.attributes["b"]"#,
    "profile.period",
    "profile.duration_unix_nano",
];
const KEYS: &[&str] = &[
    "shared", "own1", "own2", "k", "s", "count", "ratio", "flag", "list", "map", "k2", "nope",
];
const REGEXES: &[&str] = &[
    r#""^x""#,
    r#""b""#,
    r#""[a-z]+""#,
    r#""\\d""#,
    r#"".*""#,
    r#""=""#,
];

impl Gen {
    /// A literal of any type.
    fn literal(&mut self) -> String {
        match self.below(7) {
            0 => self
                .pick(&[r#""x-y-z""#, r#""abc""#, r#""7""#, r#""""#, r#""Hello""#])
                .into(),
            1 => self.pick(&["0", "7", "10", "42"]).into(),
            2 => self.pick(&["0.25", "2.5", "7.0"]).into(),
            3 => self.pick(&["true", "false"]).into(),
            4 => "nil".into(),
            5 => r#"["a", "b"]"#.into(),
            _ => "0x0102".into(),
        }
    }

    /// A value: literal, path or converter, at most `depth` deep.
    fn value(&mut self, depth: u32) -> String {
        let n = if depth == 0 { 3 } else { 11 };
        match self.below(n) {
            0 => self.literal(),
            1 => self.pick(STR_PATHS).into(),
            2 => self.pick(OTHER_PATHS).into(),
            3 => format!(
                "Concat([{}, {}], {})",
                self.value(depth - 1),
                self.value(depth - 1),
                self.pick(&[r#""-""#, r#""""#])
            ),
            4 => format!("ToUpperCase({})", self.value(depth - 1)),
            5 => format!(
                "Substring({}, {}, {})",
                self.value(depth - 1),
                self.below(4),
                self.below(6)
            ),
            6 => format!("Len({})", self.value(depth - 1)),
            7 => format!("Int({})", self.value(depth - 1)),
            8 => format!("String({})", self.value(depth - 1)),
            9 => format!("IsMatch({}, {})", self.value(depth - 1), self.pick(REGEXES)),
            _ => format!(
                "{} {} {}",
                self.pick(&["profile.period", r#"profile.attributes["count"]"#, "7"]),
                self.pick(&["+", "-", "*"]),
                self.pick(&["1", "2.5", "profile.period"])
            ),
        }
    }

    /// A condition: comparisons joined with and/or/not.
    fn condition(&mut self, depth: u32) -> String {
        let n = if depth == 0 { 2 } else { 5 };
        match self.below(n) {
            0 => format!(
                "{} {} {}",
                self.value(1),
                self.pick(&["==", "!=", "<", "<=", ">", ">="]),
                self.value(1)
            ),
            1 => format!("IsMatch({}, {})", self.value(1), self.pick(REGEXES)),
            2 => format!(
                "{} and {}",
                self.condition(depth - 1),
                self.condition(depth - 1)
            ),
            3 => format!(
                "({} or {})",
                self.condition(depth - 1),
                self.condition(depth - 1)
            ),
            _ => format!("not {}", self.condition(depth - 1)),
        }
    }

    /// Up to `max` keys.
    fn keys(&mut self, max: usize) -> String {
        let n = self.below(max + 1);
        let ks: Vec<String> = (0..n).map(|_| format!("{:?}", self.pick(KEYS))).collect();
        format!("[{}]", ks.join(", "))
    }

    /// A statement: an editor and, half the time, a `where` clause.
    fn statement(&mut self) -> String {
        let target = self.pick(&[
            r#"profile.attributes["g"]"#,
            r#"profile.attributes["own2"]"#,
            r#"resource.attributes["g"]"#,
        ]);
        let editor = match self.below(7) {
            0 | 1 => format!("set({target}, {})", self.value(2)),
            2 => format!(
                "delete_key({}, {:?})",
                self.pick(&["profile.attributes", "resource.attributes"]),
                self.pick(KEYS)
            ),
            3 => format!("keep_keys(profile.attributes, {})", self.keys(3)),
            4 => {
                // The Collector refuses fewer than the priority keys.
                let n = self.below(4);
                format!("limit(profile.attributes, {n}, {})", self.keys(n))
            }
            5 => format!(
                "replace_pattern({}, {}, {})",
                self.pick(&[
                    r#"profile.attributes["k"]"#,
                    r#"profile.attributes["own2"]"#,
                    r#"resource.attributes["host.name"]"#
                ]),
                self.pick(REGEXES),
                self.pick(&[r#""X""#, r#""<$$0>""#, r#""""#])
            ),
            _ => format!(
                "set(profile.attributes[{:?}], {})",
                self.pick(KEYS),
                self.value(2)
            ),
        };
        if self.below(2) == 0 {
            format!("{editor} where {}", self.condition(2))
        } else {
            editor
        }
    }

    /// A case: a transform statement, or (one in four) a filter condition.
    fn case(&mut self, n: usize) -> Case {
        let (kind, config, text) = if self.below(4) == 0 {
            let c = self.condition(2);
            ("filter", json!({"profile_conditions": [c]}), c)
        } else {
            let s = self.statement();
            ("transform", json!({"profile_statements": [s]}), s)
        };
        Case {
            name: format!("generated {n}: {text}"),
            kind: kind.into(),
            config,
            expect: Expect::Same,
        }
    }
}

/// Generated statements and conditions: each side refuses the same ones,
/// and the rest give the same output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_statements_give_what_the_collector_gives() {
    let Some(bin) = otelcol::binary() else { return };
    let started = Instant::now();
    let seed: u64 = std::env::var("OTTL_DIFF_SEED")
        .ok()
        .map(|s| s.parse().expect("OTTL_DIFF_SEED: a number"))
        .unwrap_or(0x5eed_0f07_71d1_ff00);
    let mut gen = Gen(seed.max(1));
    let cases: Vec<Case> = (0..64).map(|n| gen.case(n)).collect();
    let indexed: Vec<Indexed> = cases.iter().enumerate().collect();
    let r = run(&bin, &indexed).await;

    let input = all_seen(&inputs());
    let mut failures = Vec::new();
    let mut changed = 0;
    for (i, c) in &indexed {
        changed += usize::from(!r.refused.0.contains(i) && r.collector[*i] != input);
        let (c_no, p_no) = (r.refused.0.contains(i), r.refused.1.contains(i));
        if c_no != p_no {
            failures.push(format!(
                "{} ({}): refused by {} only\n  Collector: {}\n  profcol: {}",
                c.name,
                c.kind,
                if c_no { "the Collector" } else { "profcol" },
                excerpt(&r.messages.0, &c.id(*i)),
                excerpt(&r.messages.1, &c.id(*i)),
            ));
        } else if let Some(d) = difference(&r.collector[*i], &r.profcol[*i]) {
            failures.push(format!("{} ({}): {d}", c.name, c.kind));
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed} (OTTL_DIFF_SEED={seed} reruns these):\n{}",
        failures.join("\n\n")
    );
    let refused = r.refused.0.len();
    assert!(
        refused < cases.len() / 3,
        "seed {seed}: {refused} of {} generated configs refused: the generator makes too few valid ones",
        cases.len()
    );
    // Statements that change nothing would agree vacuously.
    assert!(
        changed >= cases.len() / 6,
        "seed {seed}: only {changed} of {} generated configs changed the input",
        cases.len()
    );
    eprintln!(
        "ottl_differential: {} generated (seed {seed}): {changed} changed the input, {refused} refused by both; {:?}",
        cases.len(),
        started.elapsed()
    );
}

/// The lines of a validate message that name `id`, else that it does not.
fn excerpt(text: &str, id: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(id)).collect();
    if lines.is_empty() {
        format!("(takes {id})")
    } else {
        lines.join(" | ")
    }
}
