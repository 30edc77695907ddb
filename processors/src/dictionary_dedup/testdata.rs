//! Test data shared by this crate's processor tests: recorded fixtures, a
//! generator of valid but messy batches (duplicate and orphan entries,
//! reference-based attributes, every sample shape, unit spellings from
//! several producers), and a way to run a processor with real telemetry.

use proptest::prelude::*;

use profcol_model::proto::{
    any_value::Value, AnyValue, ArrayValue, Function, InstrumentationScope, KeyValue,
    KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesData, ProfilesDictionary,
    Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};
use profcol_model::{resolve, validate, Detail, ProfileBatch};
use profcol_pipeline::component::{ProcessContext, Processor, Verdict};
use profcol_pipeline::telemetry::Telemetry;
use profcol_sentry::{self as sentry, ReceiveOptions};

// ---------------------------------------------------------------- fixtures

pub(crate) use profcol_model::testing::fixture as fixture_bytes;

/// A recorded OTLP request (`tests/fixtures/otlp/NAME`), as received: the
/// batch keeps its bytes for pass-through.
pub(crate) fn otlp_batch(name: &str) -> ProfileBatch {
    ProfileBatch::decode(fixture_bytes(&format!("otlp/{name}")).into()).unwrap()
}

pub(crate) const OTLP_FIXTURES: &[&str] = &[
    "minimal-request.bin",
    "two-resources-request.bin",
    "go-cpu.otlp.bin",
];

/// The recorded sentry-python `profile_chunk`, converted as the Sentry
/// receiver does.
pub(crate) fn sentry_python() -> ProfilesData {
    let bytes = fixture_bytes("sentry-python/manual/0001.envelope");
    let env = sentry::parse_envelope(&bytes).unwrap();
    let item = env
        .items
        .iter()
        .find(|i| i.item_type() == "profile_chunk")
        .expect("a profile_chunk item");
    sentry::chunk_to_otlp(item.payload, item.platform(), &ReceiveOptions::default())
        .unwrap()
        .data
}

/// The resolved view with every frame detail: equal exactly when the
/// meaning is.
pub(crate) fn full(d: &ProfilesData) -> String {
    resolve(d, Detail::Full).to_text()
}

/// Runs `p` on `batch` and returns the verdict and the processor's event
/// counters from the metrics exposition (`event` -> count).
pub(crate) fn run(
    p: &mut dyn Processor,
    batch: &mut ProfileBatch,
) -> (Verdict, std::collections::BTreeMap<String, u64>) {
    let telemetry = Telemetry::new();
    let before = batch.sample_count();
    let mut ctx = ProcessContext::new("profiles", "proc", &telemetry);
    let verdict = p.process(batch, &mut ctx);
    assert_eq!(
        ctx.dropped_total(),
        0,
        "these processors never drop samples"
    );
    assert_eq!(
        batch.sample_count(),
        before,
        "the number of observations must not change"
    );
    assert_eq!(validate(batch.data()), Ok(()));
    let events = telemetry
        .encode_text()
        .lines()
        .filter(|l| l.starts_with("profcol_processor_events_total{"))
        .filter_map(|l| {
            let event = l.split("event=\"").nth(1)?.split('"').next()?.to_owned();
            let n = l.rsplit(' ').next()?.parse().ok()?;
            Some((event, n))
        })
        .collect();
    (verdict, events)
}

// ---------------------------------------------------------------- generator

/// A small pool, so equal strings (and through them equal entries) are
/// common. Holds unit spellings of pprof, Sentry and UCUM, and one unknown.
pub(crate) const WORDS: &[&str] = &[
    "main",
    "run",
    "a.rs",
    "thread.name",
    "worker-1",
    "cpu",
    "wall",
    "samples",
    "alloc_space",
    "nanoseconds",
    "ns",
    "ms",
    "microsecond",
    "seconds",
    "bytes",
    "KiBy",
    "kilobytes",
    "MB",
    "count",
    "1",
    "percent",
    "hz",
    "furlongs",
];

#[derive(Clone, Copy, Debug)]
struct Sizes {
    strings: usize,
    mappings: usize,
    functions: usize,
    locations: usize,
    stacks: usize,
    attributes: usize,
    links: usize,
}

/// An index into a table of `len` entries (0, the null index, if empty).
fn idx(len: usize) -> BoxedStrategy<i32> {
    (0..len.max(1) as i32).boxed()
}

fn idx_list(len: usize, max: usize) -> BoxedStrategy<Vec<i32>> {
    prop::collection::vec(idx(len), 0..=max).boxed()
}

fn leaf_value(strings: usize) -> BoxedStrategy<AnyValue> {
    prop_oneof![
        prop::sample::select(WORDS).prop_map(|w| Value::StringValue(w.to_owned())),
        idx(strings).prop_map(Value::StringValueStrindex),
        (-3i64..1_000).prop_map(Value::IntValue),
        any::<bool>().prop_map(Value::BoolValue),
        prop::sample::select(vec![0.5f64, -2.0, 1e3]).prop_map(Value::DoubleValue),
        prop::collection::vec(any::<u8>(), 0..3).prop_map(Value::BytesValue),
    ]
    .prop_map(|v| AnyValue { value: Some(v) })
    .boxed()
}

fn key_value(strings: usize) -> BoxedStrategy<KeyValue> {
    (
        any::<bool>(),
        prop::sample::select(WORDS),
        idx(strings),
        leaf_value(strings),
    )
        .prop_map(move |(by_ref, word, k, value)| KeyValue {
            key: if by_ref && k != 0 {
                String::new()
            } else {
                word.to_owned()
            },
            key_strindex: if by_ref { k } else { 0 },
            value: Some(value),
        })
        .boxed()
}

fn any_value(strings: usize) -> BoxedStrategy<AnyValue> {
    prop_oneof![
        5 => leaf_value(strings),
        1 => prop::collection::vec(
            prop_oneof![(-3i64..100).prop_map(Value::IntValue), Just(Value::DoubleValue(2.5))]
                .prop_map(|v| AnyValue { value: Some(v) }),
            0..3,
        )
        .prop_map(|values| AnyValue { value: Some(Value::ArrayValue(ArrayValue { values })) }),
        1 => prop::collection::vec(leaf_value(strings), 0..3)
            .prop_map(|values| AnyValue { value: Some(Value::ArrayValue(ArrayValue { values })) }),
    ]
    .boxed()
}

fn with_zero<T: Default>(len: usize, rest: Vec<T>) -> Vec<T> {
    if len == 0 {
        return Vec::new();
    }
    std::iter::once(T::default()).chain(rest).collect()
}

fn dictionary(n: Sizes) -> BoxedStrategy<ProfilesDictionary> {
    let strings = prop::collection::vec(prop::sample::select(WORDS), n.strings - 1).prop_map(|w| {
        std::iter::once("")
            .chain(w)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    let mappings = prop::collection::vec(
        (0..3u64, idx(n.strings), idx_list(n.attributes, 1)).prop_map(|(k, f, a)| Mapping {
            memory_start: k * 0x1000,
            memory_limit: (k + 1) * 0x1000,
            file_offset: 0,
            filename_strindex: f,
            attribute_indices: a,
        }),
        n.mappings.saturating_sub(1),
    );
    let functions = prop::collection::vec(
        (idx(n.strings), idx(n.strings), idx(n.strings), 0..2i64).prop_map(|(a, b, c, l)| {
            Function {
                name_strindex: a,
                system_name_strindex: b,
                filename_strindex: c,
                start_line: l,
            }
        }),
        n.functions - 1,
    );
    let line = (idx(n.functions), 0..3i64).prop_map(|(f, line)| Line {
        function_index: f,
        line,
        column: 0,
    });
    let locations = prop::collection::vec(
        (
            idx(n.mappings),
            0..3u64,
            prop::collection::vec(line, 0..3),
            idx_list(n.attributes, 1),
        )
            .prop_map(|(m, a, lines, attrs)| Location {
                mapping_index: m,
                address: a * 0x10,
                lines,
                attribute_indices: attrs,
            }),
        n.locations - 1,
    );
    let stacks = prop::collection::vec(
        idx_list(n.locations, 3).prop_map(|l| Stack {
            location_indices: l,
        }),
        n.stacks - 1,
    );
    let attributes = prop::collection::vec(
        (
            idx(n.strings),
            any_value(n.strings),
            prop_oneof![Just(0), idx(n.strings)],
        )
            .prop_map(|(k, v, u)| KeyValueAndUnit {
                key_strindex: k,
                value: Some(v),
                unit_strindex: u,
            }),
        n.attributes.saturating_sub(1),
    );
    let links = prop::collection::vec(
        (0..2u8, 0..2u8).prop_map(|(t, s)| Link {
            trace_id: vec![t + 1; 16],
            span_id: vec![s + 1; 8],
        }),
        n.links.saturating_sub(1),
    );
    (
        strings, mappings, functions, locations, stacks, attributes, links,
    )
        .prop_map(move |(strings, m, f, l, s, a, k)| ProfilesDictionary {
            string_table: strings,
            mapping_table: with_zero(n.mappings, m),
            function_table: with_zero(n.functions, f),
            location_table: with_zero(n.locations, l),
            stack_table: with_zero(n.stacks, s),
            attribute_table: with_zero(n.attributes, a),
            link_table: with_zero(n.links, k),
        })
        .boxed()
}

fn sample(n: Sizes) -> BoxedStrategy<Sample> {
    // Few stacks and attributes, so samples of one identity are common.
    let shape = prop_oneof![
        (1..3usize).prop_map(|k| (vec![], (0..k as u64).map(|t| 100 + t).collect())),
        (1i64..50).prop_map(|v| (vec![v], vec![])),
        (1..3usize).prop_map(|k| (
            (1..=k as i64).collect(),
            (0..k as u64).map(|t| 7 + t).collect()
        )),
    ];
    (
        idx(n.stacks.min(3)),
        idx_list(n.attributes.min(3), 2),
        idx(n.links),
        shape,
    )
        .prop_map(
            |(stack_index, attribute_indices, link_index, (values, timestamps_unix_nano))| Sample {
                stack_index,
                attribute_indices,
                link_index,
                values,
                timestamps_unix_nano,
            },
        )
        .boxed()
}

fn value_type(strings: usize) -> BoxedStrategy<Option<ValueType>> {
    prop::option::weighted(
        0.9,
        (idx(strings), idx(strings)).prop_map(|(t, u)| ValueType {
            type_strindex: t,
            unit_strindex: u,
        }),
    )
    .boxed()
}

fn profile(n: Sizes) -> BoxedStrategy<Profile> {
    (
        value_type(n.strings),
        value_type(n.strings),
        0..3i64,
        idx_list(n.attributes, 2),
        prop::collection::vec(sample(n), 0..10),
    )
        .prop_map(
            |(sample_type, period_type, period, attribute_indices, samples)| Profile {
                sample_type,
                period_type,
                period: period * 10,
                attribute_indices,
                samples,
                time_unix_nano: 1,
                ..Default::default()
            },
        )
        .boxed()
}

fn resource(n: Sizes) -> BoxedStrategy<ResourceProfiles> {
    let attrs = move || prop::collection::vec(key_value(n.strings), 0..3);
    let scope =
        (attrs(), prop::collection::vec(profile(n), 0..3)).prop_map(|(attributes, profiles)| {
            ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "gen".to_owned(),
                    attributes,
                    ..Default::default()
                }),
                profiles,
                schema_url: String::new(),
            }
        });
    (attrs(), prop::collection::vec(scope, 1..3))
        .prop_map(|(attributes, scope_profiles)| ResourceProfiles {
            resource: Some(Resource {
                attributes,
                ..Default::default()
            }),
            scope_profiles,
            schema_url: String::new(),
        })
        .boxed()
}

/// Valid `ProfilesData` (it passes `validate`) with duplicates, orphans,
/// string references, every sample shape and assorted unit spellings.
pub(crate) fn data() -> impl Strategy<Value = ProfilesData> {
    (
        2..14usize,
        0..3usize,
        1..6usize,
        1..8usize,
        1..6usize,
        0..7usize,
        0..3usize,
    )
        .prop_map(|(s, m, f, l, st, a, k)| Sizes {
            strings: s,
            mappings: m,
            functions: f,
            locations: l,
            stacks: st,
            attributes: a,
            links: k,
        })
        .prop_flat_map(|n| (dictionary(n), prop::collection::vec(resource(n), 0..3)))
        .prop_map(|(d, resource_profiles)| ProfilesData {
            resource_profiles,
            dictionary: Some(d),
        })
}
