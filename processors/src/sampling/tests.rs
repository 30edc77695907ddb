use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;

use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value, AnyValue, KeyValue, Line, Link, Location, Profile, ProfilesData, Resource,
    ResourceProfiles, Sample, ScopeProfiles, ValueType,
};
use profcol_model::{resolve, validate, Detail, ProfileBatch};
use profcol_pipeline::component::{ProcessContext, Processor, Verdict};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;
use profcol_sentry::{chunk_to_otlp, parse_envelope, ReceiveOptions};

use super::*;

// ---- helpers ----

fn section(yaml: &str) -> Result<ComponentConfig, String> {
    ComponentConfig::from_yaml(Kind::Processor, "sampling", yaml).map_err(|e| e.to_string())
}

fn create(yaml: &str) -> Result<Box<dyn Processor>, String> {
    factory().create(&section(yaml)?).map_err(|e| e.to_string())
}

/// Runs `p` as the runtime does; returns the verdict and drops per reason.
pub(crate) fn run(
    p: &mut dyn Processor,
    batch: &mut ProfileBatch,
) -> (Verdict, BTreeMap<String, u64>) {
    let telemetry = Telemetry::new();
    let mut ctx = ProcessContext::new("test", "sampling", &telemetry);
    let v = p.process(batch, &mut ctx);
    let mut by_reason = BTreeMap::new();
    for line in telemetry.encode_text().lines() {
        let Some(rest) = line.strip_prefix("profcol_processor_dropped_profile_samples_total{")
        else {
            continue;
        };
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        let reason = labels
            .split("reason=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        *by_reason.entry(reason.to_owned()).or_default() += value.trim().parse::<u64>().unwrap();
    }
    assert_eq!(by_reason.values().sum::<u64>(), ctx.dropped_total());
    (v, by_reason)
}

pub(crate) fn drops(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn text(data: &ProfilesData) -> String {
    resolve(data, Detail::Names).to_text()
}

use profcol_model::testing::fixture;

fn sentry_fixture(rel: &str) -> ProfileBatch {
    let bytes = fixture(rel);
    let env = parse_envelope(&bytes).unwrap();
    let item = env
        .items
        .iter()
        .find(|i| i.item_type() == "profile_chunk")
        .unwrap();
    let c = chunk_to_otlp(item.payload, item.platform(), &ReceiveOptions::default()).unwrap();
    ProfileBatch::from_encoded(c.data.clone(), Bytes::from(c.data.encode_to_vec()))
}

pub(crate) fn hex16(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn str_value(s: &str) -> AnyValue {
    AnyValue {
        value: Some(Value::StringValue(s.to_owned())),
    }
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(str_value(value)),
        ..Default::default()
    }
}

/// One resource per profile; samples named by their stack (one frame).
#[derive(Default)]
struct Build {
    b: DictionaryBuilder,
    resources: Vec<ResourceProfiles>,
}

/// What a test profile is made of.
#[derive(Clone, Debug, Default)]
struct Spec {
    resource: Vec<(String, String)>,
    profiler_id: Option<String>,
    profile_id: Vec<u8>,
    /// (frame, trace id or empty for no link, observations)
    samples: Vec<(String, Vec<u8>, usize)>,
}

impl Build {
    fn profile(&mut self, spec: &Spec) -> &mut Self {
        let samples = spec
            .samples
            .iter()
            .map(|(frame, trace, n)| {
                let f = self.b.function_named(frame, "", "", 0);
                let loc = self.b.location(Location {
                    lines: vec![Line {
                        function_index: f,
                        line: 0,
                        column: 0,
                    }],
                    ..Default::default()
                });
                let link_index = if trace.is_empty() {
                    0
                } else {
                    self.b.link(Link {
                        trace_id: trace.clone(),
                        span_id: vec![7; 8],
                    })
                };
                Sample {
                    stack_index: self.b.stack(&[loc]),
                    link_index,
                    timestamps_unix_nano: (0..*n as u64).collect(),
                    ..Default::default()
                }
            })
            .collect();
        let attribute_indices = spec
            .profiler_id
            .iter()
            .map(|id| self.b.attribute_kv("sentry.profiler_id", str_value(id), ""))
            .collect();
        let (t, u) = (self.b.string("samples"), self.b.string("count"));
        self.resources.push(ResourceProfiles {
            resource: Some(Resource {
                attributes: spec.resource.iter().map(|(k, v)| kv(k, v)).collect(),
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    sample_type: Some(ValueType {
                        type_strindex: t,
                        unit_strindex: u,
                    }),
                    samples,
                    profile_id: spec.profile_id.clone(),
                    attribute_indices,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        self
    }

    fn batch(&mut self) -> ProfileBatch {
        let data = ProfilesData {
            resource_profiles: std::mem::take(&mut self.resources),
            dictionary: Some(std::mem::take(&mut self.b).finish()),
        };
        ProfileBatch::decode(Bytes::from(data.encode_to_vec())).unwrap()
    }
}

fn sample(frame: &str, trace: &[u8], n: usize) -> (String, Vec<u8>, usize) {
    (frame.to_owned(), trace.to_vec(), n)
}

/// Frames of the samples left, per profile.
pub(crate) fn frames(data: &ProfilesData) -> Vec<Vec<String>> {
    let lookup = profcol_model::dictionary::Lookup::of(data);
    data.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| {
            p.samples
                .iter()
                .map(|s| {
                    let loc = lookup.location(lookup.stack(s.stack_index).location_indices[0]);
                    lookup
                        .string(lookup.function(loc.lines[0].function_index).name_strindex)
                        .to_owned()
                })
                .collect()
        })
        .collect()
}

// Trace ids whose buckets under seed 0 are known (see `collector_vectors`).
pub(crate) const T1: &str = "0102030405060708090a0b0c0d0e0f10"; // bucket 6693
pub(crate) const T2: &str = "4bf92f3577b34da6a3ce929d0e0e4736"; // bucket 141
pub(crate) const T3: &str = "ffffffffffffffffffffffffffffffff"; // bucket 5445

// ---- the Collector's hash ----

#[test]
fn fnv1a_matches_the_published_test_vectors() {
    // FNV-1a 32 of "", "a" and "foobar" (draft-eastlake-fnv), reached
    // through compute_hash by writing the seed bytes as data: the hash of
    // seed bytes `b0 b1 b2 b3` followed by `rest` is FNV-1a of the whole.
    // "" cannot be reached that way, but four zero bytes is a known value.
    assert_eq!(compute_hash(b"", 0), 0x4b95_f515, "FNV-1a of 00 00 00 00");
    assert_eq!(
        compute_hash(b"ar", u32::from_le_bytes(*b"foob")),
        0xbf9c_f968,
        "FNV-1a(\"foobar\")"
    );
}

/// Vectors computed with Go's `hash/fnv` running the Collector's
/// `computeHash` and `i32tob` verbatim (copied from
/// `processor/probabilisticsamplerprocessor/fnvhasher.go`), and its
/// `uint32(pct * percentageScaleFactor)` on float32 percentages. One by
/// hand: seed 0 and no bytes is FNV-1a over `00 00 00 00`: starting from
/// 0x811c9dc5, each byte XORs 0 and multiplies by 0x01000193 mod 2^32,
/// giving 0x050c5d1f, 0x2a1ff5a9 (...) and finally 0x4b95f515, bucket
/// 0x4b95f515 & 0x3fff = 13589.
#[test]
fn collector_vectors() {
    let cases: &[(&str, u32, u32)] = &[
        (T1, 0, 0xdf24_1a25),
        (T1, 1, 0x0673_47d4),
        (T1, 22, 0xd863_b443),
        (T1, 0xdead_beef, 0x6bcb_41ab),
        (T2, 0, 0x3420_408d),
        (T2, 1, 0x5077_e6b8),
        (T2, 22, 0x5610_306b),
        (T2, 0xdead_beef, 0x5db6_50d3),
        (T3, 0, 0x291a_1545),
        (T3, 1, 0x914b_07f4),
        (T3, 22, 0x03b4_25b3),
        (T3, 0xdead_beef, 0xaa19_2d7b),
        ("", 0, 0x4b95_f515),
        ("", 1, 0xfb69_b604),
        ("", 22, 0xae01_6803),
        ("", 0xdead_beef, 0x9087_9fcb),
        // The 16 bytes of the Python fixture's profiler_id.
        ("fe69b2d347794bdcbb69fc95fa89dc10", 0, 0x5cdc_1c1e),
        ("fe69b2d347794bdcbb69fc95fa89dc10", 6, 0xfee4_4770),
    ];
    for &(id, seed, want) in cases {
        assert_eq!(compute_hash(&hex16(id), seed), want, "{id} seed {seed}");
    }
    assert_eq!(compute_hash(b"instance-a", 0), 0x6fa8_a0b4);
    assert_eq!(compute_hash(b"instance-b", 0), 0x72a8_a56d);

    let rates: &[(f32, u32)] = &[
        (0.0, 0),
        (0.001, 0),
        (0.006, 0),
        (0.01, 1),
        (1.0, 163),
        (10.0, 1638),
        (25.0, 4096),
        (33.3, 5455),
        (50.0, 8192),
        (66.66, 10921),
        (99.99, 16382),
        (100.0, 16384),
    ];
    for &(pct, want) in rates {
        assert_eq!(HashSampler::new(pct, 0).scaled_rate(), want, "{pct}%");
    }
    // Kept iff bucket < rate: T1 is in bucket 6693 under seed 0.
    assert!(
        !HashSampler::new(40.85, 0).keeps(&hex16(T1)),
        "6692 buckets"
    );
    assert!(HashSampler::new(40.86, 0).keeps(&hex16(T1)), "6694 buckets");
    assert_eq!(HashSampler::new(40.86, 0).scaled_rate(), 6694);
    assert!(!HashSampler::new(0.0, 0).keeps(b""));
    assert!(HashSampler::new(100.0, 7).keeps(&hex16(T3)));
}

// ---- config ----

#[test]
fn config_defaults_and_the_required_percentage() {
    let c: SamplingConfig = section("{}").unwrap().decode().unwrap();
    assert_eq!(c, SamplingConfig::default());
    assert_eq!(
        c,
        SamplingConfig {
            sampling_percentage: None,
            hash_seed: 0,
            mode: SamplingMode::Session,
            fail_closed: true,
        }
    );
    assert_eq!(
        create("{}").err().unwrap(),
        "processors::sampling::sampling_percentage: required: the percentage of profiles to keep, between 0 and 100"
    );
}

#[test]
fn config_decodes_exactly() {
    let c: SamplingConfig =
        section("sampling_percentage: 12.5\nhash_seed: 22\nmode: trace\nfail_closed: false")
            .unwrap()
            .decode()
            .unwrap();
    assert_eq!(
        c,
        SamplingConfig {
            sampling_percentage: Some(12.5),
            hash_seed: 22,
            mode: SamplingMode::Trace,
            fail_closed: false,
        }
    );
    let c: SamplingConfig = section("sampling_percentage: 10\nmode: profile")
        .unwrap()
        .decode()
        .unwrap();
    assert_eq!(
        (c.sampling_percentage, c.mode),
        (Some(10.0), SamplingMode::Profile)
    );
    assert!(create("sampling_percentage: 0").is_ok());
    assert!(create("sampling_percentage: 100").is_ok());
}

#[test]
fn invalid_values_are_reported_at_their_key_paths() {
    for (yaml, want) in [
        (
            "sampling_percentage: -1",
            "processors::sampling::sampling_percentage: must be between 0 and 100",
        ),
        (
            "sampling_percentage: 100.5",
            "processors::sampling::sampling_percentage: must be between 0 and 100",
        ),
        (
            "sampling_percentage: .nan",
            "processors::sampling::sampling_percentage: must be between 0 and 100",
        ),
        (
            "sampling_percentage: 10\nmode: span",
            r#"processors::sampling::mode: unknown value "span", expected one of "session", "profile", "trace""#,
        ),
        (
            "sampling_percentage: 10\nhash_seed: -3",
            "processors::sampling::hash_seed: invalid value: expected u32, got integer -3",
        ),
        (
            "sampling_percentage: 10\nhash_seed: 4294967296",
            "processors::sampling::hash_seed: invalid value: expected u32, got integer 4294967296",
        ),
        (
            "sampling_percentage: 10\nsampler_mode: hash_seed",
            r#"processors::sampling: unknown field "sampler_mode", expected one of "sampling_percentage", "hash_seed", "mode", "fail_closed""#,
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
        create("mode: span").err().unwrap(),
        "processors::sampling::mode: unknown value \"span\", expected one of \"session\", \"profile\", \"trace\"\n\
         processors::sampling::sampling_percentage: required: the percentage of profiles to keep, between 0 and 100"
    );
    assert_eq!(
        create("sampling_percentage: 101\nhash_seed: -1")
            .err()
            .unwrap(),
        "processors::sampling::hash_seed: invalid value: expected u32, got integer -1\n\
         processors::sampling::sampling_percentage: must be between 0 and 100"
    );
    // A percentage that does not decode is reported once, not again as missing.
    assert_eq!(
        create("sampling_percentage: lots").err().unwrap(),
        "processors::sampling::sampling_percentage: invalid type: expected f32, got string \"lots\""
    );
}

// ---- behaviour ----

pub(crate) fn linked_batch() -> ProfileBatch {
    let mut b = Build::default();
    b.profile(&Spec {
        samples: vec![
            sample("t1", &hex16(T1), 3),
            sample("t2", &hex16(T2), 2),
            sample("t3", &hex16(T3), 1),
            sample("unlinked", &[], 4),
            sample("zero", &[0; 16], 5),
        ],
        profile_id: vec![9; 16],
        ..Default::default()
    });
    b.batch()
}

#[test]
fn trace_mode_keeps_exactly_the_traces_the_collector_keeps() {
    // 40 % = 6553 buckets: T2 (141) and T3 (5445) in, T1 (6693) out.
    let mut batch = linked_batch();
    let mut p = create("sampling_percentage: 40\nmode: trace").unwrap();
    let (v, dropped) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(frames(batch.data()), vec![vec!["t2", "t3"]]);
    // Unlinked and all-zero trace ids have nothing to hash: fail_closed.
    assert_eq!(dropped, drops(&[(SAMPLED_OUT, 3), (MISSING_RANDOMNESS, 9)]));
    // The dropped samples' links and functions are garbage-collected.
    let dict = batch.data().dictionary.as_ref().unwrap();
    assert_eq!(dict.link_table.len(), 3);
    assert!(!dict
        .string_table
        .iter()
        .any(|s| s == "t1" || s == "unlinked"));
    validate(batch.data()).unwrap();

    let mut batch = linked_batch();
    let mut p = create("sampling_percentage: 40\nmode: trace\nfail_closed: false").unwrap();
    let (_, dropped) = run(&mut *p, &mut batch);
    assert_eq!(
        frames(batch.data()),
        vec![vec!["t2", "t3", "unlinked", "zero"]]
    );
    assert_eq!(dropped, drops(&[(SAMPLED_OUT, 3)]));

    // Another seed: T1 bucket 2004, T2 9912, T3 2036 under seed 1.
    let mut batch = linked_batch();
    let mut p =
        create("sampling_percentage: 15\nmode: trace\nhash_seed: 1\nfail_closed: false").unwrap();
    run(&mut *p, &mut batch);
    assert_eq!(
        frames(batch.data()),
        vec![vec!["t1", "t3", "unlinked", "zero"]]
    );
}

#[test]
fn percentages_0_and_100_drop_all_and_none() {
    for mode in ["session", "profile", "trace"] {
        let mut batch = linked_batch();
        let before = batch.sample_count();
        let (v, dropped) = run(
            &mut *create(&format!("sampling_percentage: 0\nmode: {mode}")).unwrap(),
            &mut batch,
        );
        assert_eq!(v, Verdict::Drop, "{mode}");
        assert_eq!(dropped.values().sum::<u64>(), before, "{mode}");

        let mut batch = linked_batch();
        let bytes = batch.encoded().cloned();
        let yaml = format!("sampling_percentage: 100\nmode: {mode}\nfail_closed: false");
        let (v, dropped) = run(&mut *create(&yaml).unwrap(), &mut batch);
        assert_eq!((v, dropped.len()), (Verdict::Keep, 0), "{mode}");
        assert_eq!(
            batch.encoded().cloned(),
            bytes,
            "{mode}: untouched batches keep their bytes"
        );
    }
    // Even at 100 %, trace mode with fail_closed keeps only linked samples.
    let mut batch = linked_batch();
    let (_, dropped) = run(
        &mut *create("sampling_percentage: 100\nmode: trace").unwrap(),
        &mut batch,
    );
    assert_eq!(dropped, drops(&[(MISSING_RANDOMNESS, 9)]));
    assert_eq!(frames(batch.data()), vec![vec!["t1", "t2", "t3"]]);
}

#[test]
fn session_mode_follows_the_sentry_profiler_id() {
    // The Python chunk's profiler_id is in bucket 7198 (seed 0), 1904 (seed 6).
    let cases = [
        ("50", "0", true),
        ("43.9", "0", false),
        ("12", "6", true),
        ("11.6", "6", false),
    ];
    for (pct, seed, kept) in cases {
        let mut batch = sentry_fixture("sentry-python/manual/0001.envelope");
        let before = batch.sample_count();
        let mut p = create(&format!("sampling_percentage: {pct}\nhash_seed: {seed}")).unwrap();
        let (v, dropped) = run(&mut *p, &mut batch);
        if kept {
            assert_eq!((v, dropped.len()), (Verdict::Keep, 0), "{pct} {seed}");
            assert!(batch.encoded().is_some());
        } else {
            assert_eq!(v, Verdict::Drop);
            assert_eq!(dropped, drops(&[(SAMPLED_OUT, before)]), "{pct} {seed}");
        }
    }

    // Hyphenated or not, the same UUID is the same session; chunks of one
    // session are decided alike whatever else they hold.
    let spec = |id: &str, frame: &str| Spec {
        profiler_id: Some(id.into()),
        resource: vec![("service.instance.id".into(), format!("i-{frame}"))],
        samples: vec![sample(frame, &[], 2)],
        ..Default::default()
    };
    for seed in 0..40 {
        let mut b = Build::default();
        b.profile(&spec("fe69b2d347794bdcbb69fc95fa89dc10", "a"));
        b.profile(&spec("fe69b2d3-4779-4bdc-bb69-fc95fa89dc10", "b"));
        b.profile(&spec("FE69B2D3-4779-4BDC-BB69-FC95FA89DC10", "c"));
        let mut batch = b.batch();
        let mut p = create(&format!("sampling_percentage: 50\nhash_seed: {seed}")).unwrap();
        let (v, dropped) = run(&mut *p, &mut batch);
        let all_or_nothing = (v == Verdict::Keep && dropped.is_empty())
            || (v == Verdict::Drop && dropped[SAMPLED_OUT] == 6);
        assert!(all_or_nothing, "seed {seed}: {v:?} {dropped:?}");
    }
}

#[test]
fn session_mode_falls_back_to_the_instance_then_the_resource() {
    // instance-a is in bucket 8372, instance-b in 9581 (seed 0); 55 % = 9011.
    let mut b = Build::default();
    for (instance, frame) in [("instance-a", "a"), ("instance-b", "b")] {
        b.profile(&Spec {
            resource: vec![
                ("service.name".into(), "api".into()),
                ("service.instance.id".into(), instance.into()),
            ],
            samples: vec![sample(frame, &[], 1)],
            ..Default::default()
        });
    }
    let mut batch = b.batch();
    let (_, dropped) = run(&mut *create("sampling_percentage: 55").unwrap(), &mut batch);
    assert_eq!(frames(batch.data()), vec![vec!["a"]]);
    assert_eq!(dropped, drops(&[(SAMPLED_OUT, 1)]));

    // Without an instance id the resource's attributes decide, in any order.
    for seed in 0..40 {
        let mut b = Build::default();
        let attrs = [
            ("service.name", "api"),
            ("host.name", "h1"),
            ("k8s.pod.name", "p"),
        ];
        for (k, order) in [[0, 1, 2], [2, 0, 1], [1, 2, 0]].iter().enumerate() {
            b.profile(&Spec {
                resource: order
                    .iter()
                    .map(|&i| (attrs[i].0.into(), attrs[i].1.into()))
                    .collect(),
                samples: vec![sample(&format!("f{k}"), &[], 1)],
                ..Default::default()
            });
        }
        let mut batch = b.batch();
        let (v, dropped) = run(
            &mut *create(&format!("sampling_percentage: 50\nhash_seed: {seed}")).unwrap(),
            &mut batch,
        );
        let all_or_nothing = (v == Verdict::Keep && dropped.is_empty()) || v == Verdict::Drop;
        assert!(all_or_nothing, "seed {seed}");
    }
}

#[test]
fn profile_mode_decides_by_profile_id() {
    let mut b = Build::default();
    for (id, frame) in [
        (hex16(T1), "t1"),
        (hex16(T2), "t2"),
        (vec![0; 16], "zero"),
        (vec![], "none"),
    ] {
        b.profile(&Spec {
            profile_id: id,
            samples: vec![sample(frame, &[], 2)],
            ..Default::default()
        });
    }
    let mut batch = b.batch();
    let (v, dropped) = run(
        &mut *create("sampling_percentage: 40\nmode: profile").unwrap(),
        &mut batch,
    );
    assert_eq!(v, Verdict::Keep);
    assert_eq!(frames(batch.data()), vec![vec!["t2"]]);
    assert_eq!(batch.profile_count(), 1);
    assert_eq!(dropped, drops(&[(SAMPLED_OUT, 2), (MISSING_RANDOMNESS, 4)]));
    validate(batch.data()).unwrap();
}

// ---- recorded payloads ----

#[test]
fn snapshot_otlp_two_resources_trace_mode_kept() {
    // The fixture's one link has trace id 0123...cdef, in bucket 8725 under
    // seed 0: 53.27 % (8727 buckets) keeps it, 53.25 % (8724) does not.
    let mut batch =
        ProfileBatch::decode(Bytes::from(fixture("otlp/two-resources-request.bin"))).unwrap();
    let mut p = create("sampling_percentage: 53.27\nmode: trace\nfail_closed: false").unwrap();
    let (v, dropped) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    assert!(batch.encoded().is_some());

    // Failing closed, only the linked sample is left.
    let mut batch =
        ProfileBatch::decode(Bytes::from(fixture("otlp/two-resources-request.bin"))).unwrap();
    let before = batch.sample_count();
    let mut p = create("sampling_percentage: 53.27\nmode: trace").unwrap();
    let (v, dropped) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(dropped.keys().collect::<Vec<_>>(), vec![MISSING_RANDOMNESS]);
    assert_eq!(before, batch.sample_count() + dropped[MISSING_RANDOMNESS]);
    assert_eq!(
        batch.profile_count(),
        1,
        "the other resource's only profile had no link"
    );
    validate(batch.data()).unwrap();
    insta::assert_snapshot!(format!("dropped: {dropped:?}\n{}", text(batch.data())));
}

#[test]
fn snapshot_otlp_two_resources_trace_mode_sampled_out() {
    let mut batch =
        ProfileBatch::decode(Bytes::from(fixture("otlp/two-resources-request.bin"))).unwrap();
    let before = batch.sample_count();
    let mut p = create("sampling_percentage: 53.25\nmode: trace\nfail_closed: false").unwrap();
    let (v, dropped) = run(&mut *p, &mut batch);
    assert_eq!(v, Verdict::Keep);
    assert_eq!(dropped.keys().collect::<Vec<_>>(), vec![SAMPLED_OUT]);
    assert_eq!(before, batch.sample_count() + dropped[SAMPLED_OUT]);
    assert!(
        batch.data().dictionary.as_ref().unwrap().link_table.len() <= 1,
        "the link is collected"
    );
    validate(batch.data()).unwrap();
    insta::assert_snapshot!(format!("dropped: {dropped:?}\n{}", text(batch.data())));
}

#[test]
fn snapshot_sentry_node_session_kept() {
    // profiler_id a82eef4b...e0e3: bucket 5546 under seed 0, 9404 under 42.
    let mut batch = sentry_fixture("sentry-node/manual/0001.envelope");
    let before = batch.sample_count();
    let (v, dropped) = run(
        &mut *create("sampling_percentage: 50\nhash_seed: 42").unwrap(),
        &mut batch,
    );
    assert_eq!(
        (v, dropped),
        (Verdict::Drop, drops(&[(SAMPLED_OUT, before)]))
    );

    let mut batch = sentry_fixture("sentry-node/manual/0001.envelope");
    let original = text(batch.data());
    let mut p = create("sampling_percentage: 50\nhash_seed: 0").unwrap();
    let (v, dropped) = run(&mut *p, &mut batch);
    assert_eq!((v, dropped.len()), (Verdict::Keep, 0));
    assert!(
        batch.encoded().is_some(),
        "kept whole: forwarded as received"
    );
    assert_eq!(text(batch.data()), original);
    insta::assert_snapshot!(text(batch.data()));
}

// ---- properties ----

const PROFILER_IDS: &[&str] = &[
    "fe69b2d347794bdcbb69fc95fa89dc10",
    "0e7b5c3a-9d4f-4a61-8b2c-5f1e3d7a9c04",
    "not-a-uuid",
];
const TRACES: &[&str] = &[
    "",
    T1,
    T2,
    T3,
    "00000000000000000000000000000000",
    "77777777777777777777777777777777",
];

type ProfileShape = (Option<usize>, Option<usize>, u8, Vec<(usize, usize)>);

/// (instance, profiler id, profile id byte, [(trace, observations)]) per profile.
fn arb_profiles() -> impl Strategy<Value = Vec<ProfileShape>> {
    let profile = (
        prop::option::of(0..3usize),
        prop::option::of(0..PROFILER_IDS.len()),
        any::<u8>(),
        prop::collection::vec((0..TRACES.len(), 1..4usize), 1..12),
    );
    prop::collection::vec(profile, 1..5)
}

fn build(profiles: &[ProfileShape]) -> ProfileBatch {
    let mut b = Build::default();
    for (k, (instance, profiler, id, samples)) in profiles.iter().enumerate() {
        b.profile(&Spec {
            resource: instance
                .map(|i| vec![("service.instance.id".to_owned(), format!("instance-{i}"))])
                .unwrap_or_else(|| vec![("service.name".to_owned(), "svc".to_owned())]),
            profiler_id: profiler.map(|i| PROFILER_IDS[i].to_owned()),
            profile_id: if *id == 0 { vec![0; 16] } else { vec![*id; 16] },
            samples: samples
                .iter()
                .enumerate()
                .map(|(j, &(t, n))| sample(&format!("p{k}s{j}"), &hex16(TRACES[t]), n))
                .collect(),
        });
    }
    b.batch()
}

/// The frames left, all profiles together.
fn kept(batch: &ProfileBatch, v: Verdict) -> std::collections::BTreeSet<String> {
    if v == Verdict::Drop {
        return Default::default();
    }
    frames(batch.data()).into_iter().flatten().collect()
}

const MODES: &[&str] = &["session", "profile", "trace"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn zero_drops_all_and_hundred_drops_none(profiles in arb_profiles(), mode in 0..3usize, seed in any::<u32>()) {
        let mut batch = build(&profiles);
        let before = batch.sample_count();
        let yaml = format!("sampling_percentage: 0\nmode: {}\nhash_seed: {seed}", MODES[mode]);
        let (v, dropped) = run(&mut *create(&yaml).unwrap(), &mut batch);
        prop_assert_eq!(v, Verdict::Drop);
        prop_assert_eq!(dropped.values().sum::<u64>(), before);

        let mut batch = build(&profiles);
        let bytes = batch.encoded().cloned();
        let yaml = format!("sampling_percentage: 100\nmode: {}\nhash_seed: {seed}\nfail_closed: false", MODES[mode]);
        let (v, dropped) = run(&mut *create(&yaml).unwrap(), &mut batch);
        prop_assert_eq!(v, Verdict::Keep);
        prop_assert!(dropped.is_empty());
        prop_assert_eq!(batch.encoded().cloned(), bytes);
    }

    #[test]
    fn instances_with_one_seed_agree_and_leave_valid_accounted_batches(
        profiles in arb_profiles(),
        mode in 0..3usize,
        seed in any::<u32>(),
        pct in 0.0f32..100.0,
        fail_closed in any::<bool>(),
    ) {
        let yaml = format!(
            "sampling_percentage: {pct}\nmode: {}\nhash_seed: {seed}\nfail_closed: {fail_closed}",
            MODES[mode]
        );
        let (mut a, mut b) = (create(&yaml).unwrap(), create(&yaml).unwrap());
        let mut batch = build(&profiles);
        let before = batch.sample_count();
        let (v, dropped) = run(&mut *a, &mut batch);
        let after = if v == Verdict::Drop { 0 } else { batch.sample_count() };
        prop_assert_eq!(before, after + dropped.values().sum::<u64>());
        if v == Verdict::Keep {
            prop_assert!(!batch.is_empty());
            validate(batch.data()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        let whole = kept(&batch, v);

        // Another instance, fed one profile per batch, keeps the same.
        let mut split = std::collections::BTreeSet::new();
        for (k, p) in profiles.iter().enumerate() {
            let mut one = build(std::slice::from_ref(p));
            let (v, _) = run(&mut *b, &mut one);
            // Frames are numbered by position: renumber to the profile's place.
            split.extend(kept(&one, v).into_iter().map(|f| f.replacen("p0", &format!("p{k}"), 1)));
        }
        prop_assert_eq!(&whole, &split);
    }

    #[test]
    fn a_higher_percentage_keeps_a_superset(profiles in arb_profiles(), mode in 0..3usize, seed in any::<u32>(), lo in 0.0f32..100.0, hi in 0.0f32..100.0) {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let run_at = |pct: f32| {
            let mut batch = build(&profiles);
            let yaml = format!("sampling_percentage: {pct}\nmode: {}\nhash_seed: {seed}", MODES[mode]);
            let (v, _) = run(&mut *create(&yaml).unwrap(), &mut batch);
            kept(&batch, v)
        };
        let (small, large) = (run_at(lo), run_at(hi));
        prop_assert!(small.is_subset(&large));
    }
}

mod oracle;
