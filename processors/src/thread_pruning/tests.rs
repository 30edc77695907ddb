use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;

use profcol_model::dictionary::{gc, sample_total, DictionaryBuilder, Lookup};
use profcol_model::proto::{
    any_value::Value, AnyValue, KeyValue, KeyValueList, Line, Location, Profile, ProfilesData,
    Resource, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};
use profcol_model::{resolve, validate, Detail, ProfileBatch};
use profcol_pipeline::component::{ProcessContext, Processor, Verdict};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;
use profcol_sentry::{chunk_to_otlp, parse_envelope, ReceiveOptions};

use super::*;

// ---- helpers ----

fn section(yaml: &str) -> Result<ComponentConfig, String> {
    ComponentConfig::from_yaml(Kind::Processor, "thread_pruning", yaml).map_err(|e| e.to_string())
}

fn create(yaml: &str) -> Result<Box<dyn Processor>, String> {
    factory().create(&section(yaml)?).map_err(|e| e.to_string())
}

fn decode(yaml: &str) -> ThreadPruningConfig {
    section(yaml).unwrap().decode().unwrap()
}

/// Runs `p` on `batch` as the runtime does; returns the verdict and the
/// samples dropped per reason.
fn run(
    p: &mut dyn Processor,
    batch: &mut ProfileBatch,
) -> (Verdict, BTreeMap<String, u64>, Telemetry) {
    let telemetry = Telemetry::new();
    let mut ctx = ProcessContext::new("test", "thread_pruning", &telemetry);
    let v = p.process(batch, &mut ctx);
    let total = ctx.dropped_total();
    let by_reason = counters(
        &telemetry,
        "profcol_processor_dropped_profile_samples_total",
        "reason",
    );
    assert_eq!(by_reason.values().sum::<u64>(), total);
    (v, by_reason, telemetry)
}

/// `label value -> count` of one counter in the Prometheus text.
fn counters(t: &Telemetry, metric: &str, label: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in t.encode_text().lines() {
        let Some(rest) = line.strip_prefix(metric).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        let key = format!("{label}=\"");
        let v = labels
            .split(&key)
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        *out.entry(v.to_owned()).or_default() += value.trim().parse::<u64>().unwrap();
    }
    out
}

fn drops(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn text(data: &ProfilesData) -> String {
    resolve(data, Detail::Names).to_text()
}

use profcol_model::testing::fixture;

fn otlp_fixture(rel: &str) -> ProfileBatch {
    ProfileBatch::decode(Bytes::from(fixture(rel))).unwrap()
}

fn sentry_fixture(rel: &str) -> ProfileBatch {
    let bytes = fixture(rel);
    let env = parse_envelope(&bytes).unwrap();
    let item = env
        .items
        .iter()
        .find(|i| i.item_type() == "profile_chunk")
        .unwrap();
    let c = chunk_to_otlp(item.payload, item.platform(), &ReceiveOptions::default()).unwrap();
    ProfileBatch::new(c.data)
}

/// Hand-built profiles: stacks written root first (`main;work`), threads as
/// Sentry's conversion writes them.
#[derive(Default)]
struct Build {
    b: DictionaryBuilder,
    profiles: Vec<Profile>,
    samples: Vec<Sample>,
    attrs: Vec<i32>,
}

impl Build {
    fn stack(&mut self, frames: &str) -> i32 {
        let mut locs: Vec<i32> = frames
            .split(';')
            .filter(|f| !f.is_empty())
            .map(|f| self.location(f))
            .collect();
        locs.reverse();
        self.b.stack(&locs)
    }

    /// The location of a frame in function `name`.
    fn location(&mut self, name: &str) -> i32 {
        let function = self.b.function_named(name, "", "", 0);
        self.b.location(Location {
            lines: vec![Line {
                function_index: function,
                line: 0,
                column: 0,
            }],
            ..Default::default()
        })
    }

    fn thread(&mut self, id: Option<&str>, name: Option<&str>) -> Vec<i32> {
        let mut out = Vec::new();
        if let Some(id) = id {
            let value = match id.parse::<i64>() {
                Ok(n) => Value::IntValue(n),
                Err(_) => Value::StringValue(id.to_owned()),
            };
            out.push(
                self.b
                    .attribute_kv("thread.id", AnyValue { value: Some(value) }, ""),
            );
        }
        if let Some(name) = name {
            out.push(self.b.attribute_kv("thread.name", str_value(name), ""));
        }
        out
    }

    /// A sample at `n` timestamps.
    fn at(&mut self, frames: &str, id: Option<&str>, name: Option<&str>, n: usize) -> &mut Self {
        let (stack, attrs) = (self.stack(frames), self.thread(id, name));
        self.samples.push(Sample {
            stack_index: stack,
            attribute_indices: attrs,
            timestamps_unix_nano: (0..n as u64).map(|k| 1_000 + k).collect(),
            ..Default::default()
        });
        self
    }

    /// An aggregated sample.
    fn agg(&mut self, frames: &str, id: Option<&str>, name: Option<&str>, value: i64) -> &mut Self {
        let (stack, attrs) = (self.stack(frames), self.thread(id, name));
        self.samples.push(Sample {
            stack_index: stack,
            attribute_indices: attrs,
            values: vec![value],
            ..Default::default()
        });
        self
    }

    /// `sentry.thread_metadata` as the Sentry receiver writes it.
    fn table(&mut self, entries: &[(&str, Option<&str>)]) -> &mut Self {
        let values = entries
            .iter()
            .map(|(id, name)| KeyValue {
                key: id.to_string(),
                value: Some(AnyValue {
                    value: Some(Value::KvlistValue(KeyValueList {
                        values: name
                            .map(|n| KeyValue {
                                key: "name".into(),
                                value: Some(str_value(n)),
                                ..Default::default()
                            })
                            .into_iter()
                            .collect(),
                    })),
                }),
                ..Default::default()
            })
            .collect();
        let kv = AnyValue {
            value: Some(Value::KvlistValue(KeyValueList { values })),
        };
        let a = self.b.attribute_kv("sentry.thread_metadata", kv, "");
        self.attrs.push(a);
        self
    }

    /// Closes the current profile; the next samples go to a new one.
    fn profile(&mut self) -> &mut Self {
        let (t, u) = (self.b.string("samples"), self.b.string("count"));
        self.profiles.push(Profile {
            sample_type: Some(ValueType {
                type_strindex: t,
                unit_strindex: u,
            }),
            samples: std::mem::take(&mut self.samples),
            attribute_indices: std::mem::take(&mut self.attrs),
            profile_id: vec![1; 16],
            ..Default::default()
        });
        self
    }

    fn data(&mut self) -> ProfilesData {
        if !self.samples.is_empty() || !self.attrs.is_empty() {
            self.profile();
        }
        let b = std::mem::take(&mut self.b);
        ProfilesData {
            resource_profiles: std::mem::take(&mut self.profiles)
                .into_iter()
                .enumerate()
                .map(|(i, p)| ResourceProfiles {
                    resource: Some(Resource {
                        attributes: vec![KeyValue {
                            key: "service.name".into(),
                            value: Some(str_value(&format!("svc-{i}"))),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    scope_profiles: vec![ScopeProfiles {
                        profiles: vec![p],
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect(),
            dictionary: Some(b.finish()),
        }
    }

    /// The data encoded and decoded back: a batch as a receiver hands it on.
    fn batch(&mut self) -> ProfileBatch {
        ProfileBatch::decode(Bytes::from(self.data().encode_to_vec())).unwrap()
    }
}

fn str_value(s: &str) -> AnyValue {
    AnyValue {
        value: Some(Value::StringValue(s.to_owned())),
    }
}

/// Thread table of each profile: id -> name (`-` for none).
fn tables(data: &ProfilesData) -> Vec<Vec<(String, String)>> {
    let lookup = Lookup::of(data);
    data.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| {
            let Some(v) = lookup.attribute_value(&p.attribute_indices, "sentry.thread_metadata")
            else {
                return Vec::new();
            };
            let Some(Value::KvlistValue(list)) = &v.value else {
                panic!("thread table is not a kvlist")
            };
            list.values
                .iter()
                .map(|e| {
                    let name = match &e.value.as_ref().unwrap().value {
                        Some(Value::KvlistValue(f)) => f
                            .values
                            .iter()
                            .find(|f| f.key == "name")
                            .and_then(|f| match &f.value.as_ref()?.value {
                                Some(Value::StringValue(s)) => Some(s.clone()),
                                _ => None,
                            })
                            .unwrap_or_else(|| "-".into()),
                        _ => "-".into(),
                    };
                    (e.key.clone(), name)
                })
                .collect()
        })
        .collect()
}

fn strings(data: &ProfilesData) -> Vec<String> {
    data.dictionary.as_ref().unwrap().string_table.clone()
}

fn attribute_texts(data: &ProfilesData) -> Vec<String> {
    let lookup = Lookup::of(data);
    data.dictionary
        .as_ref()
        .unwrap()
        .attribute_table
        .iter()
        .map(|a| {
            let v = a
                .value
                .as_ref()
                .and_then(|v| lookup.str_value(v))
                .unwrap_or("");
            format!("{}={v}", lookup.string(a.key_strindex))
        })
        .collect()
}

// ---- config ----

#[test]
fn empty_section_decodes_to_defaults() {
    assert_eq!(decode("{}"), ThreadPruningConfig::default());
    let d = ThreadPruningConfig::default();
    assert!(d.drop_attributes.is_empty() && d.rename_threads.is_empty());
    assert!(d.drop_threads.is_empty() && d.keep_threads.is_empty());
    assert_eq!(d.min_samples_per_thread, 0);
    assert!(create("").is_ok(), "a bare `thread_pruning:` is valid");
}

#[test]
fn full_section_decodes_exactly() {
    let c = decode(
        r#"
drop_attributes: [thread.id]
rename_threads:
  - pattern: 'worker-\d+'
    replacement: 'worker-*'
  - pattern: '(\w+)-pool-\d+'
    replacement: '$${1}-pool'
drop_threads: ['sentry\.profiler\..*']
keep_threads: [MainThread, 'worker-.*']
min_samples_per_thread: 2
"#,
    );
    assert_eq!(
        c,
        ThreadPruningConfig {
            drop_attributes: vec!["thread.id".into()],
            rename_threads: vec![
                RenameRule {
                    pattern: r"worker-\d+".into(),
                    replacement: "worker-*".into()
                },
                RenameRule {
                    pattern: r"(\w+)-pool-\d+".into(),
                    replacement: "${1}-pool".into()
                },
            ],
            drop_threads: vec![r"sentry\.profiler\..*".into()],
            keep_threads: vec!["MainThread".into(), "worker-.*".into()],
            min_samples_per_thread: 2,
        }
    );
}

#[test]
fn invalid_values_are_reported_at_their_key_paths() {
    let err = create(
        r#"
drop_attributes: [""]
rename_threads:
  - pattern: 'worker-(\d+'
    replacement: x
  - pattern: '(?P<pool>\w+)-\d+'
    replacement: '$pool-$2'
drop_threads: [ok, '[unclosed']
keep_threads: ['*']
"#,
    )
    .err()
    .unwrap();
    assert_eq!(
        err,
        r#"processors::thread_pruning::drop_attributes::0: must not be empty
processors::thread_pruning::rename_threads::0::pattern: invalid regex `worker-(\d+`: unclosed group
processors::thread_pruning::rename_threads::1::replacement: refers to group "2", which the pattern does not have
processors::thread_pruning::drop_threads::1: invalid regex `[unclosed`: unclosed character class
processors::thread_pruning::keep_threads::0: invalid regex `*`: repetition operator missing expression"#
    );

    // `$$` is the config's own escape for `$`: `$$$$` reaches the regex as `$$`.
    let err =
        create("rename_threads: [{pattern: a, replacement: 'cost $$ ${env:UNSET_PROFCOL_VAR}'}]")
            .err()
            .unwrap();
    assert_eq!(
        err,
        "processors::thread_pruning::rename_threads::0::replacement: a `$` not followed by a group name in `cost $ ` (a literal `$` is `$$`)"
    );
    assert!(create("rename_threads: [{pattern: a, replacement: 'cost $$$$'}]").is_ok());
    for (yaml, want) in [
        (
            "rename_threads: [{pattern: a}]",
            r#"processors::thread_pruning::rename_threads::0: missing required field "replacement""#,
        ),
        (
            "min_samples_per_thread: -1",
            "processors::thread_pruning::min_samples_per_thread: invalid value: expected u64, got integer -1",
        ),
        (
            "drop_thread: [x]",
            r#"processors::thread_pruning: unknown field "drop_thread", expected one of "drop_attributes", "rename_threads", "drop_threads", "keep_threads", "min_samples_per_thread""#,
        ),
        (
            "drop_threads: worker",
            r#"processors::thread_pruning::drop_threads: invalid type: expected a sequence, got string "worker""#,
        ),
    ] {
        assert_eq!(create(yaml).err().unwrap(), want, "{yaml}");
    }
}

/// What `profcol validate` reports: a key that fails to decode does not
/// hide the checks of the others.
#[test]
fn every_problem_is_reported_at_once() {
    assert_eq!(
        create("min_samples_per_thread: -1\ndrop_threads: ['[unclosed']\ndrop_attributes: ['']")
            .err()
            .unwrap(),
        "processors::thread_pruning::min_samples_per_thread: invalid value: expected u64, got integer -1\n\
         processors::thread_pruning::drop_attributes::0: must not be empty\n\
         processors::thread_pruning::drop_threads::0: invalid regex `[unclosed`: unclosed character class"
    );
}

#[test]
fn rename_rules_apply_in_order_first_full_match_wins() {
    let c = ThreadPruningConfig {
        rename_threads: vec![
            RenameRule {
                pattern: r"(\w+)-(\d+)".into(),
                replacement: "$1-*".into(),
            },
            RenameRule {
                pattern: r"worker-\d+".into(),
                replacement: "never".into(),
            },
            RenameRule {
                pattern: "main".into(),
                replacement: "Main $$1".into(),
            },
        ],
        ..Default::default()
    };
    let rules = config::Rules::compile(&c, &section("{}").unwrap()).unwrap();
    assert_eq!(rules.renamed("worker-12").as_deref(), Some("worker-*"));
    assert_eq!(rules.renamed("main").as_deref(), Some("Main $1"));
    // Full match only: no rule matches part of a name.
    assert_eq!(rules.renamed("domain-main-x"), None);
    assert_eq!(rules.renamed("my worker-1"), None);
}

// ---- behaviour ----

#[test]
fn unreferenced_thread_metadata_is_removed_and_the_rest_untouched() {
    let mut b = Build::default();
    b.at("main;work", Some("1"), Some("MainThread"), 3)
        .at("main;idle", Some("7"), None, 2)
        .table(&[
            ("1", Some("MainThread")),
            ("7", Some("pool")),
            ("9", Some("gone")),
            ("12", None),
        ]);
    let mut batch = b.batch();
    let before = text(batch.data());
    let mut p = create("{}").unwrap();
    let (v, dropped, telemetry) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert!(dropped.is_empty());
    assert_eq!(
        tables(batch.data()),
        vec![vec![
            ("1".into(), "MainThread".into()),
            ("7".into(), "pool".into())
        ]]
    );
    assert_eq!(
        counters(&telemetry, "profcol_processor_events_total", "event"),
        drops(&[("thread_metadata_pruned", 2)])
    );
    // The samples are as they were; the old table's strings are gone.
    let after = text(batch.data());
    assert_eq!(
        before
            .lines()
            .filter(|l| !l.contains("attributes:"))
            .collect::<Vec<_>>(),
        after
            .lines()
            .filter(|l| !l.contains("attributes:"))
            .collect::<Vec<_>>()
    );
    validate(batch.data()).unwrap();
    assert_eq!(
        attribute_texts(batch.data())
            .iter()
            .filter(|a| a.starts_with("sentry.thread_metadata"))
            .count(),
        1
    );
}

#[test]
fn an_unchanged_batch_keeps_its_received_encoding() {
    let mut b = Build::default();
    b.at("main;work", Some("1"), Some("MainThread"), 3)
        .table(&[("1", Some("MainThread"))]);
    let mut batch = b.batch();
    let bytes = batch.encoded().cloned().unwrap();
    let mut p = create("rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]\nmin_samples_per_thread: 2")
        .unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    assert_eq!(
        batch.encoded(),
        Some(&bytes),
        "nothing changed, so the bytes must still be forwarded"
    );

    let mut synth = ProfileBatch::decode(Bytes::from(
        profcol_model::synth::request(2_000, 300).encode_to_vec(),
    ))
    .unwrap();
    let (v, _, _) = run(&mut *create("{}").unwrap(), &mut synth);
    assert_eq!(v, Verdict::Keep);
    assert!(synth.encoded().is_some());
}

#[test]
fn renamed_threads_merge_and_orphans_go() {
    let mut b = Build::default();
    b.at("main;work", None, Some("worker-1"), 2)
        .at("main;work", None, Some("worker-2"), 3)
        .at("main;work", None, Some("worker-*"), 1)
        .at("main;other", None, Some("worker-3"), 1)
        .agg("main;agg", None, Some("worker-1"), 10)
        .agg("main;agg", None, Some("worker-9"), 5)
        .at("main;work", None, Some("main"), 4);
    let mut batch = b.batch();
    let count = batch.sample_count();
    let mut p =
        create("rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    assert_eq!(
        batch.sample_count(),
        count,
        "merging keeps every observation"
    );
    let samples = &batch.data().resource_profiles[0].scope_profiles[0].profiles[0].samples;
    assert_eq!(
        samples.len(),
        4,
        "three worker samples on main;work became one"
    );
    assert_eq!(samples[0].timestamps_unix_nano.len(), 6);
    // Aggregated values are appended: still two observations, same total.
    assert_eq!(samples[2].values, vec![10, 5]);
    assert_eq!(sample_total(&samples[2]), 15);
    assert_eq!(
        text(batch.data()),
        "profile sample_type=samples/count period_type=- period=0
  resource: service.name=svc-0
  main;agg [thread.name=worker-*] 15
  main;other [thread.name=worker-*] 1
  main;work [thread.name=main] 4
  main;work [thread.name=worker-*] 6
"
    );
    let strings = strings(batch.data());
    assert!(
        !strings.iter().any(|s| s == "worker-1" || s == "worker-9"),
        "{strings:?}"
    );
    // The existing `worker-*` entry was reused rather than duplicated.
    assert_eq!(
        attribute_texts(batch.data())
            .iter()
            .filter(|a| *a == "thread.name=worker-*")
            .count(),
        1
    );
    validate(batch.data()).unwrap();
}

/// The entries a rename orphans go with the rewrite itself (not in a second
/// pass over the samples): the references outside the merged samples follow
/// the entries that moved, in a profile whose samples were not rewritten, in
/// the thread table a profile gets anew and in the dictionary; an entry that
/// something besides samples still names stays.
#[test]
fn entries_a_rename_orphans_go_and_every_other_reference_follows() {
    let mut b = Build::default();
    b.at("main;work", None, Some("worker-1"), 1)
        .at("main;work", None, Some("worker-2"), 1)
        .at("main;work", None, Some("worker-3"), 1)
        .profile()
        .at("main;other", Some("7"), Some("main"), 2)
        .at("main;other", Some("8"), Some("idle"), 1)
        .table(&[
            ("7", Some("main")),
            ("8", Some("idle")),
            ("9", Some("gone")),
        ]);
    let mut data = b.data();
    let find = |data: &ProfilesData, text: &str| {
        attribute_texts(data)
            .iter()
            .position(|a| a == text)
            .unwrap() as i32
    };
    // Besides samples, the first profile names worker-3 and a location
    // names worker-2.
    let (w2, w3) = (
        find(&data, "thread.name=worker-2"),
        find(&data, "thread.name=worker-3"),
    );
    data.resource_profiles[0].scope_profiles[0].profiles[0]
        .attribute_indices
        .push(w3);
    data.dictionary.as_mut().unwrap().location_table[1]
        .attribute_indices
        .push(w2);
    let mut batch = ProfileBatch::decode(Bytes::from(data.encode_to_vec())).unwrap();
    let mut p =
        create("rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    validate(batch.data()).unwrap();
    assert_eq!(
        text(batch.data()),
        "profile sample_type=samples/count period_type=- period=0
  resource: service.name=svc-0
  attributes: thread.name=worker-3
  main;work [thread.name=worker-*] 3
profile sample_type=samples/count period_type=- period=0
  resource: service.name=svc-1
  attributes: sentry.thread_metadata={7={name=main}, 8={name=idle}}
  main;other [thread.id=7, thread.name=main] 2
  main;other [thread.id=8, thread.name=idle] 1
"
    );
    let attrs = attribute_texts(batch.data());
    assert!(
        !attrs.iter().any(|a| a == "thread.name=worker-1"),
        "{attrs:?}"
    );
    let data = batch.data();
    let profile_attrs = |k: usize| {
        data.resource_profiles[k].scope_profiles[0].profiles[0]
            .attribute_indices
            .clone()
    };
    assert_eq!(profile_attrs(0), vec![find(data, "thread.name=worker-3")]);
    assert_eq!(
        data.dictionary.as_ref().unwrap().location_table[1].attribute_indices,
        vec![find(data, "thread.name=worker-2")]
    );
    // The second profile's table lost the thread no sample names: a new entry.
    assert_eq!(
        tables(data)[1],
        vec![("7".into(), "main".into()), ("8".into(), "idle".into())]
    );
}

/// Locations (and their functions) nothing refers to go only when the pass
/// removed a stack: otherwise they were orphans of the input, left to
/// dictionary_dedup rather than found by walking every stack.
#[test]
fn orphans_below_the_stacks_go_only_with_a_stack() {
    let build = || {
        let mut b = Build::default();
        b.at("main;work", None, Some("worker-1"), 1)
            .at("main;work", None, Some("worker-2"), 1)
            .at("main;gone", None, Some("gc-1"), 1);
        b.location("unused");
        b.batch()
    };
    let functions = |batch: &ProfileBatch| {
        let lookup = Lookup::of(batch.data());
        let d = lookup.dictionary();
        let names: Vec<String> = d
            .function_table
            .iter()
            .map(|f| lookup.string(f.name_strindex).to_owned())
            .collect();
        (names, d.location_table.len())
    };
    let mut batch = build();
    let mut p =
        create("rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]").unwrap();
    run(&mut *p, &mut batch);
    assert!(!strings(batch.data()).iter().any(|s| s == "worker-1"));
    assert_eq!(
        functions(&batch),
        (
            vec![
                "".into(),
                "main".into(),
                "work".into(),
                "gone".into(),
                "unused".into()
            ],
            5
        )
    );
    validate(batch.data()).unwrap();

    let mut batch = build();
    let mut p = create("drop_threads: ['gc-.*']").unwrap();
    run(&mut *p, &mut batch);
    assert_eq!(
        functions(&batch),
        (vec!["".into(), "main".into(), "work".into()], 3)
    );
    validate(batch.data()).unwrap();
}

#[test]
fn dropping_thread_id_merges_threads_and_empties_the_table() {
    let mut b = Build::default();
    b.at("main;work", Some("11"), Some("pool"), 2)
        .at("main;work", Some("12"), Some("pool"), 3)
        .at("main;work", Some("0x1f"), Some("pool"), 1)
        .table(&[
            ("11", Some("pool")),
            ("12", Some("pool")),
            ("0x1f", Some("pool")),
        ]);
    let mut batch = b.batch();
    let mut p = create("drop_attributes: [thread.id]").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    assert_eq!(
        text(batch.data()),
        "profile sample_type=samples/count period_type=- period=0
  resource: service.name=svc-0
  main;work [thread.name=pool] 6
"
    );
    assert_eq!(tables(batch.data()), vec![Vec::<(String, String)>::new()]);
    assert!(!attribute_texts(batch.data())
        .iter()
        .any(|a| a.starts_with("thread.id")));
    validate(batch.data()).unwrap();
}

#[test]
fn drop_and_keep_threads_match_whole_names() {
    let build = || {
        let mut b = Build::default();
        b.at("a", Some("1"), Some("main"), 2)
            .at("b", Some("2"), Some("domain-main"), 3)
            .at(
                "c",
                Some("3"),
                Some("sentry.profiler.ThreadContinuousScheduler"),
                4,
            )
            .at("d", Some("4"), None, 5)
            .agg("e", None, None, 100)
            .table(&[
                ("1", Some("main")),
                ("2", Some("domain-main")),
                ("3", Some("sentry.profiler.ThreadContinuousScheduler")),
            ]);
        b.batch()
    };
    let mut batch = build();
    let mut p = create("drop_threads: [main, 'sentry\\.profiler\\..*']").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(dropped, drops(&[(THREAD_DROPPED, 6)]));
    let lines: Vec<String> = text(batch.data())
        .lines()
        .skip(2)
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines,
        vec![
            "  attributes: sentry.thread_metadata={2={name=domain-main}}",
            "  b [thread.id=2, thread.name=domain-main] 3",
            "  d [thread.id=4] 5",
            "  e 100",
        ]
    );

    // keep_threads: only matching names survive; unnamed threads go too.
    let mut batch = build();
    let before = batch.sample_count();
    let mut p = create("keep_threads: ['.*main']").unwrap();
    let (_, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(dropped, drops(&[(THREAD_DROPPED, 4 + 5 + 1)]));
    assert_eq!(batch.sample_count() + 10, before);
    assert_eq!(
        tables(batch.data()),
        vec![vec![
            ("1".into(), "main".into()),
            ("2".into(), "domain-main".into())
        ]]
    );
    validate(batch.data()).unwrap();
}

#[test]
fn min_samples_per_thread_counts_non_idle_samples_like_relay() {
    let mut b = Build::default();
    // Thread 1: one non-idle sample and idle ones: dropped (Relay: <= 1).
    b.at("main;work", Some("1"), Some("lonely"), 1)
        .at("", Some("1"), Some("lonely"), 5)
        // Thread 2: two non-idle observations in one sample: kept.
        .at("main;work", Some("2"), Some("busy"), 2)
        // Thread 3: two samples of one observation each: kept.
        .at("main;a", Some("3"), None, 1)
        .at("main;b", Some("3"), None, 1)
        // No thread attributes: not a thread, left alone.
        .at("main;c", None, None, 1)
        .table(&[("1", Some("lonely")), ("2", Some("busy"))]);
    let mut batch = b.batch();
    let mut p = create("min_samples_per_thread: 2").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(dropped, drops(&[(MIN_SAMPLES_PER_THREAD, 6)]));
    assert_eq!(
        tables(batch.data()),
        vec![vec![("2".into(), "busy".into())]]
    );
    assert!(!text(batch.data()).contains("lonely"));
    validate(batch.data()).unwrap();
}

#[test]
fn filters_see_names_as_received_and_renames_apply_after() {
    let mut b = Build::default();
    b.at("a", Some("1"), Some("worker-1"), 1)
        .at("a", Some("2"), Some("worker-2"), 1)
        .at("a", Some("3"), Some("worker-3"), 2)
        .table(&[
            ("1", Some("worker-1")),
            ("2", Some("worker-2")),
            ("3", Some("worker-3")),
        ]);
    let mut batch = b.batch();
    // Counted per received thread: 1 and 2 have one sample each, although
    // they would share the renamed name `worker-*`.
    let mut p = create(
        "rename_threads: [{pattern: 'worker-(\\d+)', replacement: 'worker-*'}]\nmin_samples_per_thread: 2\ndrop_threads: [worker-2]",
    )
    .unwrap();
    let (_, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(
        dropped,
        drops(&[(THREAD_DROPPED, 1), (MIN_SAMPLES_PER_THREAD, 1)])
    );
    assert_eq!(
        tables(batch.data()),
        vec![vec![("3".into(), "worker-*".into())]]
    );
    assert_eq!(
        text(batch.data()).lines().last().unwrap(),
        "  a [thread.id=3, thread.name=worker-*] 2"
    );
}

#[test]
fn a_batch_left_without_samples_is_dropped_and_counted() {
    let mut b = Build::default();
    b.at("a", Some("1"), Some("sentry.profiler.X"), 3).profile();
    b.at("b", Some("1"), Some("sentry.profiler.X"), 2)
        .agg("c", None, Some("sentry.profiler.Y"), 9);
    let mut batch = b.batch();
    let before = batch.sample_count();
    let mut p = create("drop_threads: ['sentry\\.profiler\\..*']").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Drop);
    assert_eq!(dropped, drops(&[(THREAD_DROPPED, before)]));
    assert_eq!(before, 6);
}

#[test]
fn only_the_emptied_profile_goes_and_a_shared_table_is_not_edited_in_place() {
    let mut b = Build::default();
    // Both profiles carry the same table value, so they share one entry.
    b.at("a", Some("1"), Some("one"), 1)
        .table(&[("1", Some("one")), ("2", Some("two"))])
        .profile();
    b.at("b", Some("1"), Some("one"), 1)
        .at("b", Some("2"), Some("two"), 1)
        .table(&[("1", Some("one")), ("2", Some("two"))])
        .profile();
    b.at("c", Some("3"), Some("drop-me"), 1);
    let mut batch = b.batch();
    let mut p = create("drop_threads: [drop-me]").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(dropped, drops(&[(THREAD_DROPPED, 1)]));
    assert_eq!(batch.profile_count(), 2);
    assert_eq!(
        tables(batch.data()),
        vec![
            vec![("1".into(), "one".into())],
            vec![("1".into(), "one".into()), ("2".into(), "two".into())],
        ]
    );
    validate(batch.data()).unwrap();
}

// ---- recorded payloads ----

#[test]
fn snapshot_sentry_python_without_the_profilers_own_thread() {
    let mut batch = sentry_fixture("sentry-python/manual/0001.envelope");
    let before = batch.sample_count();
    let mut p = create(
        r#"
drop_threads: ['sentry\.profiler\..*']
rename_threads: [{pattern: 'Main(Thread)', replacement: 'main-$1'}]
min_samples_per_thread: 2
"#,
    )
    .unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(before, batch.sample_count() + dropped.values().sum::<u64>());
    assert!(dropped[THREAD_DROPPED] > 0);
    validate(batch.data()).unwrap();
    let tables = tables(batch.data());
    assert_eq!(
        tables,
        vec![vec![("139751172868992".into(), "main-Thread".into())]]
    );
    insta::assert_snapshot!(format!("dropped: {dropped:?}\n{}", text(batch.data())));
}

#[test]
fn snapshot_sentry_node_without_thread_ids() {
    let mut batch = sentry_fixture("sentry-node/manual/0001.envelope");
    let before = batch.sample_count();
    let mut p = create("drop_attributes: [thread.id]\nmin_samples_per_thread: 2").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(before, batch.sample_count() + dropped.values().sum::<u64>());
    validate(batch.data()).unwrap();
    assert!(!text(batch.data()).contains("thread.id"));
    insta::assert_snapshot!(format!("dropped: {dropped:?}\n{}", text(batch.data())));
}

#[test]
fn snapshot_otlp_two_resources_renamed() {
    let mut batch = otlp_fixture("otlp/two-resources-request.bin");
    let mut p =
        create("rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    validate(batch.data()).unwrap();
    insta::assert_snapshot!(text(batch.data()));
}

#[test]
fn snapshot_otlp_minimal_keep_main_only() {
    let mut batch = otlp_fixture("otlp/minimal-request.bin");
    let before = batch.sample_count();
    let mut p = create("keep_threads: [main]").unwrap();
    let (v, dropped, _) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(before, batch.sample_count() + dropped.values().sum::<u64>());
    validate(batch.data()).unwrap();
    insta::assert_snapshot!(format!("dropped: {dropped:?}\n{}", text(batch.data())));
}

// ---- properties ----

const THREADS: &[(Option<&str>, Option<&str>)] = &[
    (Some("1"), Some("MainThread")),
    (Some("2"), Some("worker-1")),
    (Some("3"), Some("worker-2")),
    (Some("4"), None),
    (Some("0x5"), Some("sentry.profiler.Scheduler")),
    (None, Some("worker-3")),
    (None, None),
];
const STACKS: &[&str] = &["", "main", "main;work", "main;work;leaf", "main;other"];
const CONFIGS: &[&str] = &[
    "{}",
    "drop_attributes: [thread.id]",
    "rename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]",
    "drop_threads: ['sentry\\.profiler\\..*', MainThread]",
    "keep_threads: ['worker-.*']",
    "min_samples_per_thread: 2",
    "min_samples_per_thread: 3\ndrop_attributes: [thread.name]",
    "rename_threads: [{pattern: '.*', replacement: 'all'}]\ndrop_attributes: [thread.id]\nmin_samples_per_thread: 2",
    "drop_threads: [MainThread]\nmin_samples_per_thread: 2",
    "drop_threads: [MainThread]\nrename_threads: [{pattern: 'worker-\\d+', replacement: 'worker-*'}]",
];

/// (stack, thread, aggregated?, observations) per sample, per profile.
fn arb_profiles() -> impl Strategy<Value = Vec<Vec<(usize, usize, bool, usize)>>> {
    let sample = (0..STACKS.len(), 0..THREADS.len(), any::<bool>(), 1..4usize);
    prop::collection::vec(prop::collection::vec(sample, 0..24), 1..4)
}

fn build(profiles: &[Vec<(usize, usize, bool, usize)>]) -> ProfileBatch {
    let mut b = Build::default();
    for samples in profiles {
        for &(stack, thread, aggregated, n) in samples {
            let (id, name) = THREADS[thread];
            if aggregated {
                b.agg(STACKS[stack], id, name, n as i64 * 10);
            } else {
                b.at(STACKS[stack], id, name, n);
            }
        }
        // Every profile describes every thread with an id, used or not.
        let table: Vec<(&str, Option<&str>)> = THREADS
            .iter()
            .filter_map(|(id, name)| Some(((*id)?, *name)))
            .collect();
        b.table(&table).profile();
    }
    b.batch()
}

fn profile_total(data: &ProfilesData) -> i64 {
    data.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .flat_map(|p| &p.samples)
        .map(sample_total)
        .sum()
}

/// Thread ids (as text) the samples of each profile name.
fn referenced_ids(data: &ProfilesData) -> Vec<std::collections::BTreeSet<String>> {
    let lookup = Lookup::of(data);
    data.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| {
            p.samples
                .iter()
                .filter_map(|s| lookup.attribute_value(&s.attribute_indices, "thread.id"))
                .map(|v| match &v.value {
                    Some(Value::IntValue(n)) => n.to_string(),
                    _ => lookup.str_value(v).unwrap().to_owned(),
                })
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn leaves_a_valid_batch_and_accounts_for_every_sample(profiles in arb_profiles(), which in 0..CONFIGS.len()) {
        let mut batch = build(&profiles);
        let orphans_before = gc(&mut batch.data().clone()).removed_total();
        // As a receiver decodes it: vectors with room to grow in place.
        let mut decoded = ProfileBatch::decode(Bytes::from(batch.data().encode_to_vec())).unwrap();
        let (before, total) = (batch.sample_count(), profile_total(batch.data()));
        let mut p = create(CONFIGS[which]).unwrap();
        let (v, dropped, _) = run(&mut *p, &mut batch);
        let (v_decoded, dropped_decoded, _) = run(&mut *p, &mut decoded);
        prop_assert_eq!((v, &dropped), (v_decoded, &dropped_decoded));
        prop_assert_eq!(text(batch.data()), text(decoded.data()));
        let after = if v == Verdict::Drop { 0 } else { batch.sample_count() };
        prop_assert_eq!(before, after + dropped.values().sum::<u64>());
        if v == Verdict::Drop {
            return Ok(());
        }
        prop_assert!(!batch.is_empty());
        validate(batch.data()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // What the pass orphans goes with it.
        if orphans_before == 0 {
            prop_assert_eq!(gc(&mut batch.data().clone()).removed_total(), 0);
        }
        if dropped.is_empty() {
            prop_assert_eq!(total, profile_total(batch.data()));
        }
        // The table names exactly the ids kept samples still carry.
        let referenced = referenced_ids(batch.data());
        for (table, ids) in tables(batch.data()).iter().zip(&referenced) {
            let keys: std::collections::BTreeSet<String> = table.iter().map(|(k, _)| k.clone()).collect();
            prop_assert!(keys.is_subset(ids), "{:?} not all in {:?}", keys, ids);
            let described: std::collections::BTreeSet<String> =
                THREADS.iter().filter_map(|(id, _)| Some((*id)?.to_string())).collect();
            prop_assert_eq!(&keys, &ids.intersection(&described).cloned().collect());
        }
        // A second pass finds nothing more to do.
        let once = text(batch.data());
        let (v2, dropped2, _) = run(&mut *p, &mut batch);
        prop_assert_eq!(v2, Verdict::Keep);
        prop_assert!(dropped2.is_empty());
        prop_assert_eq!(once, text(batch.data()));
    }
}

mod oracle;
