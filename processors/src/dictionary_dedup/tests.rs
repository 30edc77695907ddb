use proptest::prelude::*;
use prost::Message;

use profcol_model::dictionary::{mark, DictionaryBuilder, PerTable};
use profcol_model::proto::{
    any_value::Value, AnyValue, KeyValue, KeyValueAndUnit, Line, Location, Profile, ProfilesData,
    ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles,
};
use profcol_model::{resolve, validate, Detail, ProfileBatch};
use profcol_pipeline::component::{Processor, ProcessorStart};
use profcol_pipeline::config::{ComponentConfig, Kind, MetricsLevel};
use profcol_pipeline::telemetry::Telemetry;

use super::testdata::{self, full, run};
use super::*;
use crate::merge::{SampleMerger, Tables};

/// The processor as a collector with `service.telemetry.metrics.level`
/// at `level` starts it.
fn started(cfg: DictionaryDedupConfig, level: MetricsLevel) -> DictionaryDedup {
    let mut p = DictionaryDedup::new(cfg);
    let telemetry = std::sync::Arc::new(Telemetry::new());
    telemetry.set_metrics_level(level);
    p.start(&ProcessorStart {
        id: "dictionary_dedup",
        budget: &profcol_model::memory::MemoryBudget::new(usize::MAX),
        telemetry: &telemetry,
    });
    p
}

fn decode(yaml: &str) -> Result<DictionaryDedupConfig, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "dictionary_dedup", yaml)
        .map_err(|e| e.to_string())?;
    cfg.decode().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------- config

#[test]
fn empty_config_means_defaults() {
    assert_eq!(
        decode("{}").unwrap(),
        DictionaryDedupConfig {
            gc: true,
            merge_samples: true,
            resolve_references: true,
        }
    );
}

#[test]
fn config_decodes_every_key() {
    assert_eq!(
        decode("gc: false\nmerge_samples: false\nresolve_references: false\n").unwrap(),
        DictionaryDedupConfig {
            gc: false,
            merge_samples: false,
            resolve_references: false,
        }
    );
}

#[test]
fn invalid_config_names_the_key() {
    assert_eq!(
        decode("gc: sometimes\n").unwrap_err(),
        "processors::dictionary_dedup::gc: invalid type: expected a boolean, got string \"sometimes\""
    );
    assert_eq!(
        decode("merge_sample: true\n").unwrap_err(),
        "processors::dictionary_dedup: unknown field \"merge_sample\", \
         expected one of \"gc\", \"merge_samples\", \"resolve_references\""
    );
}

#[test]
fn factory_makes_the_processor_from_its_config() {
    let f = factory();
    assert_eq!(f.type_name(), "dictionary_dedup");
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "dictionary_dedup/x", "gc: 1\n").unwrap();
    assert!(f.create(&cfg).is_err());
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "dictionary_dedup/x", "{}").unwrap();
    let mut p = f.create(&cfg).unwrap();
    let mut batch = testdata::otlp_batch("go-cpu.otlp.bin");
    let view = full(batch.data());
    run(p.as_mut(), &mut batch);
    assert_eq!(full(batch.data()), view);
}

// ---------------------------------------------------------------- by hand

fn sample(stack: i32, attrs: &[i32], values: &[i64], ts: &[u64]) -> Sample {
    Sample {
        stack_index: stack,
        attribute_indices: attrs.to_vec(),
        link_index: 0,
        values: values.to_vec(),
        timestamps_unix_nano: ts.to_vec(),
    }
}

fn one_profile(dict: ProfilesDictionary, samples: Vec<Sample>) -> ProfilesData {
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    samples,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dict),
    }
}

fn samples(d: &ProfilesData) -> &[Sample] {
    &d.resource_profiles[0].scope_profiles[0].profiles[0].samples
}

/// Two copies of the stack `main` under different indices, each used by a
/// sample, and an orphan string.
fn duplicated() -> ProfilesData {
    let dict = ProfilesDictionary {
        string_table: ["", "main", "orphan", "main"].map(String::from).to_vec(),
        function_table: vec![
            Default::default(),
            profcol_model::proto::Function {
                name_strindex: 1,
                ..Default::default()
            },
            profcol_model::proto::Function {
                name_strindex: 3,
                ..Default::default()
            },
        ],
        location_table: vec![
            Default::default(),
            Location {
                lines: vec![Line {
                    function_index: 1,
                    ..Default::default()
                }],
                ..Default::default()
            },
            Location {
                lines: vec![Line {
                    function_index: 2,
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
        stack_table: vec![
            Default::default(),
            profcol_model::proto::Stack {
                location_indices: vec![1],
            },
            profcol_model::proto::Stack {
                location_indices: vec![2],
            },
        ],
        ..Default::default()
    };
    one_profile(
        dict,
        vec![
            sample(1, &[], &[], &[10]),
            sample(2, &[], &[], &[20, 30]),
            sample(2, &[], &[5], &[]),
            sample(1, &[], &[7], &[]),
        ],
    )
}

#[test]
fn equal_entries_share_one_index_and_samples_of_one_identity_merge() {
    let mut d = duplicated();
    let out = dedup_data(&mut d, &DictionaryDedupConfig::default());
    let dict = d.dictionary.as_ref().unwrap();
    assert_eq!(dict.string_table, ["", "main"]);
    assert_eq!(dict.function_table.len(), 2);
    assert_eq!(dict.location_table.len(), 2);
    assert_eq!(dict.stack_table.len(), 2);
    // Observations are appended, never summed: the count stays 5.
    assert_eq!(
        samples(&d),
        [
            sample(1, &[], &[], &[10, 20, 30]),
            sample(1, &[], &[5, 7], &[]),
        ]
    );
    assert_eq!(out.samples_merged, 2);
    assert_eq!(out.entries_removed(), 5);
    assert!(out.changed);
    assert_eq!(validate(&d), Ok(()));
}

#[test]
fn gc_false_keeps_orphans_but_still_merges_duplicates() {
    let mut d = duplicated();
    let cfg = DictionaryDedupConfig {
        gc: false,
        merge_samples: false,
        ..Default::default()
    };
    dedup_data(&mut d, &cfg);
    let dict = d.dictionary.as_ref().unwrap();
    assert_eq!(dict.string_table, ["", "main", "orphan"]);
    assert_eq!(dict.stack_table.len(), 2);
    // Without merge_samples the four samples stay, now on one stack.
    assert_eq!(samples(&d).len(), 4);
    assert!(samples(&d).iter().all(|s| s.stack_index == 1));
}

#[test]
fn merging_keeps_shapes_apart_and_ignores_attribute_order() {
    let mut p = Profile {
        samples: vec![
            sample(1, &[1, 2], &[10], &[]),
            sample(1, &[2, 1], &[20], &[]),
            sample(1, &[1, 2], &[], &[5]),
            sample(1, &[1, 2], &[3], &[6]),
            sample(1, &[1], &[1], &[]),
            sample(1, &[2, 1], &[4], &[7]),
            sample(1, &[1, 2], &[], &[8]),
            // Invalid (no observation), left alone rather than merged.
            sample(1, &[1, 2], &[], &[]),
            sample(1, &[1, 2], &[], &[]),
        ],
        ..Default::default()
    };
    // Tables that hold every index used: the way real batches take.
    let tables = Tables {
        stacks: 2,
        attributes: 3,
        links: 1,
    };
    assert_eq!(SampleMerger::default().merge(&mut p, tables, &[], None), 3);
    assert_eq!(
        p.samples,
        [
            sample(1, &[1, 2], &[10, 20], &[]),
            sample(1, &[1, 2], &[], &[5, 8]),
            sample(1, &[1, 2], &[3, 4], &[6, 7]),
            sample(1, &[1], &[1], &[]),
            sample(1, &[1, 2], &[], &[]),
            sample(1, &[1, 2], &[], &[]),
        ]
    );
}

fn string_ref(i: i32) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(Value::StringValueStrindex(i)),
    })
}

#[test]
fn references_become_plain_attributes() {
    let mut b = DictionaryBuilder::new();
    let (key, value, stack) = (b.string("host"), b.string("db-1"), b.stack(&[]));
    let attr = b.attribute(KeyValueAndUnit {
        key_strindex: key,
        value: string_ref(value),
        unit_strindex: 0,
    });
    let mut d = one_profile(b.finish(), vec![sample(stack, &[attr], &[1], &[])]);
    d.resource_profiles[0].resource = Some(Resource {
        attributes: vec![KeyValue {
            key: String::new(),
            key_strindex: key,
            value: string_ref(value),
        }],
        ..Default::default()
    });
    let view = full(&d);

    let mut kept = d.clone();
    let cfg = DictionaryDedupConfig {
        resolve_references: false,
        ..Default::default()
    };
    assert_eq!(dedup_data(&mut kept, &cfg).references_resolved, 0);
    assert_eq!(full(&kept), view);
    assert_eq!(
        kept.resource_profiles[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes[0]
            .key_strindex,
        key
    );

    let out = dedup_data(&mut d, &DictionaryDedupConfig::default());
    assert_eq!(out.references_resolved, 3);
    assert_eq!(full(&d), view);
    let kv = &d.resource_profiles[0].resource.as_ref().unwrap().attributes[0];
    assert_eq!((kv.key.as_str(), kv.key_strindex), ("host", 0));
    assert_eq!(
        kv.value.as_ref().unwrap().value,
        Some(Value::StringValue("db-1".into()))
    );
    let dict = d.dictionary.as_ref().unwrap();
    // `db-1` was only referenced: resolved, it is an orphan and goes.
    assert_eq!(dict.string_table, ["", "host"]);
    assert_eq!(
        dict.attribute_table[1].value.as_ref().unwrap().value,
        Some(Value::StringValue("db-1".into()))
    );
}

// ---------------------------------------------------------------- batches

#[test]
fn an_already_deduplicated_batch_passes_through_with_its_bytes() {
    let mut first = testdata::otlp_batch("go-cpu.otlp.bin");
    dedup_batch(&mut first, &DictionaryDedupConfig::default());
    let bytes = first.encode_to_bytes();
    let mut again = ProfileBatch::decode(bytes.clone()).unwrap();
    let mut p = started(DictionaryDedupConfig::default(), MetricsLevel::Detailed);
    let (_, events) = run(&mut p, &mut again);
    assert_eq!(
        again.encoded(),
        Some(&bytes),
        "the received encoding is kept"
    );
    assert_eq!(events["bytes_before"], bytes.len() as u64);
    assert_eq!(events["bytes_after"], bytes.len() as u64);
    assert!(!events.contains_key("entries_removed"));
}

#[test]
fn detailed_metrics_report_bytes_before_and_after() {
    let d = duplicated();
    let before = d.encoded_len() as u64;
    let mut batch = ProfileBatch::new(d);
    let mut p = started(DictionaryDedupConfig::default(), MetricsLevel::Detailed);
    let (_, events) = run(&mut p, &mut batch);
    assert_eq!(events["bytes_before"], before);
    assert_eq!(events["bytes_after"], batch.data().encoded_len() as u64);
    assert!(events["bytes_after"] < before);
    assert_eq!(events["entries_removed"], 5);
    assert_eq!(events["samples_merged"], 2);
    assert!(batch.encoded().is_none());
}

#[test]
fn below_detailed_the_sizes_are_not_measured_and_the_rest_is_counted() {
    let mut measured = ProfileBatch::new(duplicated());
    let mut p = started(DictionaryDedupConfig::default(), MetricsLevel::Detailed);
    run(&mut p, &mut measured);
    for level in [MetricsLevel::Normal, MetricsLevel::None] {
        let mut batch = ProfileBatch::new(duplicated());
        let mut p = started(DictionaryDedupConfig::default(), level);
        let (_, events) = run(&mut p, &mut batch);
        assert!(!events.contains_key("bytes_before") && !events.contains_key("bytes_after"));
        assert_eq!(events["entries_removed"], 5);
        assert_eq!(events["samples_merged"], 2);
        assert_eq!(batch.data(), measured.data());
    }
}

fn sample_messages(d: &ProfilesData) -> usize {
    d.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| p.samples.len())
        .sum()
}

fn tables(lens: PerTable) -> String {
    format!(
        "strings={} mappings={} locations={} functions={} stacks={} attributes={} links={}",
        lens.strings,
        lens.mappings,
        lens.locations,
        lens.functions,
        lens.stacks,
        lens.attributes,
        lens.links
    )
}

/// Snapshot text: what the rebuild did, then the resolved view.
fn report(name: &str, mut batch: ProfileBatch) -> String {
    let view = full(batch.data());
    let samples = batch.sample_count();
    let (lens, messages, bytes) = (
        PerTable::lens(batch.dictionary()),
        sample_messages(batch.data()),
        batch.encoded_len(),
    );
    let mut p = DictionaryDedup::new(DictionaryDedupConfig::default());
    run(&mut p, &mut batch);
    assert_eq!(full(batch.data()), view, "{name}: the meaning changed");
    assert_eq!(batch.sample_count(), samples);
    let mut again = batch.data().clone();
    let second = dedup_data(&mut again, &DictionaryDedupConfig::default());
    assert!(!second.changed, "{name}: not idempotent");
    format!(
        "tables before: {}\ntables after:  {}\nsample messages: {} -> {} ({} observations)\nbytes: {} -> {}\n\n{}",
        tables(lens),
        tables(PerTable::lens(batch.dictionary())),
        messages,
        sample_messages(batch.data()),
        samples,
        bytes,
        batch.encoded_len(),
        resolve(batch.data(), Detail::Names).to_text()
    )
}

#[test]
fn recorded_otlp_requests_keep_their_meaning() {
    for name in testdata::OTLP_FIXTURES {
        let batch = testdata::otlp_batch(name);
        let received = batch.encoded_len();
        let mut b = batch.clone();
        dedup_batch(&mut b, &DictionaryDedupConfig::default());
        assert!(b.encoded_len() <= received, "{name}: grew");
        assert_eq!(validate(b.data()), Ok(()), "{name}");
    }
    insta::assert_snapshot!(
        "two_resources",
        report(
            "two-resources",
            testdata::otlp_batch("two-resources-request.bin")
        )
    );
    insta::assert_snapshot!(
        "go_cpu",
        report("go-cpu", testdata::otlp_batch("go-cpu.otlp.bin"))
    );
}

#[test]
fn a_converted_sentry_chunk_keeps_its_meaning() {
    let d = testdata::sentry_python();
    let before = d.encoded_len();
    let mut batch = ProfileBatch::new(d);
    let text = report("sentry-python", batch.clone());
    dedup_batch(&mut batch, &DictionaryDedupConfig::default());
    assert!(batch.encoded_len() <= before);
    insta::assert_snapshot!("sentry_python", text);
}

// ---------------------------------------------------------------- properties

fn has_references(d: &ProfilesData) -> bool {
    let mut resolved = d.clone();
    profcol_model::dictionary::resolve_references(&mut resolved) > 0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn dedup_keeps_the_view_and_never_grows(
        d in testdata::data(),
        gc in any::<bool>(),
        merge in any::<bool>(),
        resolve_refs in any::<bool>(),
    ) {
        prop_assert_eq!(validate(&d), Ok(()));
        let cfg = DictionaryDedupConfig { gc, merge_samples: merge, resolve_references: resolve_refs };
        let view = full(&d);
        let mut batch = ProfileBatch::new(d.clone());
        let mut p = started(cfg.clone(), MetricsLevel::Detailed);
        let (_, events) = run(&mut p, &mut batch);
        let out = batch.data();
        prop_assert_eq!(full(out), view);
        // Resolving a reference copies its string; everything else only
        // shrinks the encoding.
        let mut baseline = d.clone();
        if resolve_refs {
            profcol_model::dictionary::resolve_references(&mut baseline);
        }
        prop_assert!(out.encoded_len() <= baseline.encoded_len(),
            "{} > {}", out.encoded_len(), baseline.encoded_len());
        if !has_references(&d) || !resolve_refs {
            prop_assert!(out.encoded_len() <= d.encoded_len());
        }
        prop_assert_eq!(events["bytes_after"], out.encoded_len() as u64);
        if gc {
            prop_assert!(mark(out).all_live());
        }
        // Idempotent: a second pass finds nothing to do.
        let mut again = out.clone();
        let second = dedup_data(&mut again, &cfg);
        prop_assert!(!second.changed, "{:?}", second);
        prop_assert_eq!(&again, out);
    }
}

mod oracle;
