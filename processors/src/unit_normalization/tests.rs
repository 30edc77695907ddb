use proptest::prelude::*;

use profcol_model::dictionary::{visit, DictionaryBuilder, Lookup, Table};
use profcol_model::proto::{
    any_value::Value, AnyValue, ArrayValue, KeyValueAndUnit, Line, Location, Profile, ProfilesData,
    ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};
use profcol_model::{resolve, validate, Detail, ProfileBatch};
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::units::{self, parse, Dimension, Unit};
use super::*;
use crate::dictionary_dedup::testdata::{self, full, run};

fn decode(yaml: &str) -> Result<UnitNormalizationConfig, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "unit_normalization", yaml)
        .map_err(|e| e.to_string())?;
    cfg.decode().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------- config

#[test]
fn empty_config_means_defaults() {
    assert_eq!(
        decode("{}").unwrap(),
        UnitNormalizationConfig {
            target: Target::Ucum,
            scale_to_base: false,
            samples_to_time: false,
        }
    );
}

#[test]
fn config_decodes_every_key() {
    assert_eq!(
        decode("target: pprof\nscale_to_base: true\nsamples_to_time: true\n").unwrap(),
        UnitNormalizationConfig {
            target: Target::Pprof,
            scale_to_base: true,
            samples_to_time: true,
        }
    );
    assert_eq!(decode("target: ucum\n").unwrap().target, Target::Ucum);
}

#[test]
fn invalid_config_names_the_key() {
    assert_eq!(
        decode("target: si\n").unwrap_err(),
        "processors::unit_normalization::target: unknown value \"si\", expected one of \"ucum\", \"pprof\""
    );
    assert_eq!(
        decode("scale_to_base: yes please\n").unwrap_err(),
        "processors::unit_normalization::scale_to_base: invalid type: expected a boolean, got string \"yes please\""
    );
    assert_eq!(
        decode("samples_to_cpu: true\n").unwrap_err(),
        "processors::unit_normalization: unknown field \"samples_to_cpu\", \
         expected one of \"target\", \"scale_to_base\", \"samples_to_time\""
    );
}

#[test]
fn factory_makes_the_processor_from_its_config() {
    let f = factory();
    assert_eq!(f.type_name(), "unit_normalization");
    let cfg =
        ComponentConfig::from_yaml(Kind::Processor, "unit_normalization", "target: si\n").unwrap();
    assert!(f.create(&cfg).is_err());
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "unit_normalization", "target: pprof\n")
        .unwrap();
    let mut p = f.create(&cfg).unwrap();
    let mut batch = ProfileBatch::new(profile_with("cpu", "ns", "cpu", "ns", 10, vec![]));
    run(p.as_mut(), &mut batch);
    assert_eq!(
        units_of(batch.data()),
        ["cpu/nanoseconds cpu/nanoseconds 10"]
    );
}

// ---------------------------------------------------------------- unit table

/// Spellings real producers send, and the unit each means.
const SPELLINGS: &[(&str, &str, i64)] = &[
    // pprof (Go runtime, pprof's measurement package)
    ("nanoseconds", "ns", 1),
    ("microseconds", "us", 1_000),
    ("milliseconds", "ms", 1_000_000),
    ("seconds", "s", 1_000_000_000),
    ("bytes", "By", 1),
    ("count", "1", 1),
    ("kilobytes", "KiBy", 1024),
    ("megabytes", "MiBy", 1 << 20),
    ("gigabytes", "GiBy", 1 << 30),
    ("terabytes", "TiBy", 1 << 40),
    ("petabytes", "PiBy", 1 << 50),
    ("B", "By", 1),
    ("kB", "KiBy", 1024),
    ("KB", "KiBy", 1024),
    ("MB", "MiBy", 1 << 20),
    ("GB", "GiBy", 1 << 30),
    ("kbyte", "KiBy", 1024),
    ("μs", "us", 1_000),
    ("µs", "us", 1_000),
    ("sec", "s", 1_000_000_000),
    ("hrs", "h", 3_600_000_000_000),
    ("hour", "h", 3_600_000_000_000),
    ("minutes", "min", 60_000_000_000),
    ("days", "d", 86_400_000_000_000),
    ("weeks", "wk", 604_800_000_000_000),
    // Sentry (Relay's MetricUnit, SDK measurements)
    ("nanosecond", "ns", 1),
    ("microsecond", "us", 1_000),
    ("millisecond", "ms", 1_000_000),
    ("second", "s", 1_000_000_000),
    ("minute", "min", 60_000_000_000),
    ("day", "d", 86_400_000_000_000),
    ("week", "wk", 604_800_000_000_000),
    ("byte", "By", 1),
    ("kibibyte", "KiBy", 1024),
    ("mebibyte", "MiBy", 1 << 20),
    ("gibibyte", "GiBy", 1 << 30),
    ("tebibyte", "TiBy", 1 << 40),
    ("pebibyte", "PiBy", 1 << 50),
    ("percent", "%", 1),
    ("hertz", "Hz", 1),
    ("hz", "Hz", 1),
    ("none", "1", 1),
    // UCUM as OpenTelemetry writes it
    ("ns", "ns", 1),
    ("us", "us", 1_000),
    ("ms", "ms", 1_000_000),
    ("s", "s", 1_000_000_000),
    ("min", "min", 60_000_000_000),
    ("h", "h", 3_600_000_000_000),
    ("d", "d", 86_400_000_000_000),
    ("wk", "wk", 604_800_000_000_000),
    ("By", "By", 1),
    ("KiBy", "KiBy", 1024),
    ("MiBy", "MiBy", 1 << 20),
    ("GiBy", "GiBy", 1 << 30),
    ("TiBy", "TiBy", 1 << 40),
    ("PiBy", "PiBy", 1 << 50),
    ("kBy", "kBy", 1_000),
    ("MBy", "MBy", 1_000_000),
    ("GBy", "GBy", 1_000_000_000),
    ("1", "1", 1),
    ("%", "%", 1),
    ("Hz", "Hz", 1),
    ("kHz", "kHz", 1_000),
    ("MHz", "MHz", 1_000_000),
    ("GHz", "GHz", 1_000_000_000),
    ("{sample}", "1", 1),
    ("{samples}", "1", 1),
    ("{count}", "1", 1),
    // Case and plural variants
    ("Nanoseconds", "ns", 1),
    ("NS", "ns", 1),
    ("Bytes", "By", 1),
    ("counts", "1", 1),
    ("samples", "1", 1),
    ("Hertz", "Hz", 1),
    (" ms ", "ms", 1_000_000),
    ("kilohertz", "kHz", 1_000),
    ("megahertz", "MHz", 1_000_000),
    ("gigahertz", "GHz", 1_000_000_000),
];

#[test]
fn every_producer_spelling_is_recognized() {
    for &(spelling, ucum, factor) in SPELLINGS {
        let u = parse(spelling).unwrap_or_else(|| panic!("{spelling:?} not recognized"));
        assert_eq!((u.ucum, u.factor), (ucum, factor), "{spelling:?}");
    }
}

#[test]
fn every_table_spelling_parses_to_its_unit() {
    let mut n = 0;
    for (spelling, unit) in units::spellings() {
        assert_eq!(parse(spelling), Some(unit), "{spelling:?}");
        n += 1;
    }
    assert!(n >= 70, "{n} spellings");
}

#[test]
fn both_vocabularies_name_every_unit_recognizably() {
    for (_, u) in units::spellings() {
        for target in [Target::Ucum, Target::Pprof] {
            assert_eq!(
                parse(u.name(target)),
                Some(u),
                "{:?} in {target:?}",
                u.name(target)
            );
        }
        let base = u.base();
        assert_eq!((base.factor, base.dimension), (1, u.dimension));
    }
    let names = |t| {
        ["ns", "us", "ms", "s", "By", "KiBy", "MiBy", "1", "%", "Hz"]
            .map(|s| parse(s).unwrap().name(t))
    };
    assert_eq!(
        names(Target::Pprof),
        [
            "nanoseconds",
            "microseconds",
            "milliseconds",
            "seconds",
            "bytes",
            "kilobytes",
            "megabytes",
            "count",
            "percent",
            "hertz"
        ]
    );
    assert_eq!(
        names(Target::Ucum),
        ["ns", "us", "ms", "s", "By", "KiBy", "MiBy", "1", "%", "Hz"]
    );
}

#[test]
fn unknown_spellings_are_not_guessed() {
    for s in [
        "",
        "  ",
        "furlongs",
        "m",
        "bit",
        "ratio",
        "{thread}",
        "nanoseconds per op",
        "kby",
    ] {
        assert_eq!(parse(s), None, "{s:?}");
    }
    assert_eq!(parse("seconds").map(|u| u.dimension), Some(Dimension::Time));
}

// ---------------------------------------------------------------- by hand

fn int(i: i64) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(Value::IntValue(i)),
    })
}

/// One profile over a fresh dictionary; `samples` on stack 0.
fn profile_with(
    st: &str,
    su: &str,
    pt: &str,
    pu: &str,
    period: i64,
    samples: Vec<Sample>,
) -> ProfilesData {
    let mut b = DictionaryBuilder::new();
    let profile = Profile {
        sample_type: Some(ValueType {
            type_strindex: b.string(st),
            unit_strindex: b.string(su),
        }),
        period_type: Some(ValueType {
            type_strindex: b.string(pt),
            unit_strindex: b.string(pu),
        }),
        period,
        samples,
        ..Default::default()
    };
    ProfilesData {
        resource_profiles: vec![resource(vec![profile])],
        dictionary: Some(b.finish()),
    }
}

fn resource(profiles: Vec<Profile>) -> ResourceProfiles {
    ResourceProfiles {
        scope_profiles: vec![ScopeProfiles {
            profiles,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn sample(attrs: &[i32], values: &[i64], ts: &[u64]) -> Sample {
    Sample {
        attribute_indices: attrs.to_vec(),
        values: values.to_vec(),
        timestamps_unix_nano: ts.to_vec(),
        ..Default::default()
    }
}

fn profiles(d: &ProfilesData) -> impl Iterator<Item = &Profile> {
    d.resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
}

/// `type/unit type/unit period` per profile.
fn units_of(d: &ProfilesData) -> Vec<String> {
    let l = Lookup::of(d);
    let vt = |v: &Option<ValueType>| {
        v.map_or("-".to_owned(), |v| {
            format!(
                "{}/{}",
                l.string(v.type_strindex),
                l.string(v.unit_strindex)
            )
        })
    };
    profiles(d)
        .map(|p| format!("{} {} {}", vt(&p.sample_type), vt(&p.period_type), p.period))
        .collect()
}

fn opts(target: Target, scale_to_base: bool, samples_to_time: bool) -> Options {
    Options {
        target,
        scale_to_base,
        samples_to_time,
    }
}

#[test]
fn a_unit_used_only_as_a_unit_is_renamed_in_place() {
    let mut d = profile_with(
        "cpu",
        "nanoseconds",
        "cpu",
        "nanoseconds",
        10,
        vec![sample(&[], &[5], &[])],
    );
    let strings_before = d.dictionary.as_ref().unwrap().string_table.clone();
    let out = normalize(&mut d, &opts(Target::Ucum, false, false));
    assert_eq!(out.units_rewritten, 2);
    assert_eq!(units_of(&d), ["cpu/ns cpu/ns 10"]);
    let strings = &d.dictionary.as_ref().unwrap().string_table;
    assert_eq!(strings.len(), strings_before.len(), "no string added");
    let at = strings_before
        .iter()
        .position(|s| s == "nanoseconds")
        .unwrap();
    assert_eq!(strings[at], "ns");
}

#[test]
fn a_unit_string_used_elsewhere_is_left_for_its_other_uses() {
    // `seconds` is also a function name: that use must not change.
    let mut d = profile_with(
        "wall",
        "seconds",
        "wall",
        "seconds",
        1,
        vec![sample(&[], &[2], &[])],
    );
    let mut b = DictionaryBuilder::from_dictionary(d.dictionary.take().unwrap());
    let f = b.function_named("seconds", "", "", 0);
    let l = b.location(Location {
        lines: vec![Line {
            function_index: f,
            ..Default::default()
        }],
        ..Default::default()
    });
    let stack = b.stack(&[l]);
    d.dictionary = Some(b.finish());
    d.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = stack;
    normalize(&mut d, &opts(Target::Ucum, false, false));
    assert_eq!(units_of(&d), ["wall/s wall/s 1"]);
    let l = Lookup::of(&d);
    assert_eq!(l.string(l.function(f).name_strindex), "seconds");
    assert_eq!(validate(&d), Ok(()));
}

#[test]
fn two_spellings_of_one_unit_become_one_string_and_one_attribute() {
    let mut b = DictionaryBuilder::new();
    let attr = |b: &mut DictionaryBuilder, unit: &str| {
        let a = KeyValueAndUnit {
            key_strindex: b.string("wait"),
            value: int(5),
            unit_strindex: b.string(unit),
        };
        b.attribute(a)
    };
    let (a1, a2) = (attr(&mut b, "nanoseconds"), attr(&mut b, "nanosecond"));
    let unrelated = attr(&mut b, "furlongs");
    let profile = Profile {
        sample_type: Some(ValueType {
            type_strindex: b.string("samples"),
            unit_strindex: b.string("count"),
        }),
        samples: vec![
            sample(&[a1], &[1], &[]),
            sample(&[a2, unrelated], &[2], &[]),
        ],
        ..Default::default()
    };
    let mut d = ProfilesData {
        resource_profiles: vec![resource(vec![profile])],
        dictionary: Some(b.finish()),
    };
    let mut batch = ProfileBatch::new(d.clone());
    let mut p = UnitNormalization::new(&UnitNormalizationConfig::default());
    let (_, events) = run(&mut p, &mut batch);
    assert_eq!(events["unknown_unit"], 1);
    assert_eq!(events["unit_rewritten"], 3);

    normalize(&mut d, &opts(Target::Ucum, false, false));
    assert_eq!(&d, batch.data());
    let dict = d.dictionary.as_ref().unwrap();
    let l = Lookup::of(&d);
    let units: Vec<&str> = dict
        .attribute_table
        .iter()
        .map(|a| l.string(a.unit_strindex))
        .collect();
    assert_eq!(units, ["", "ns", "furlongs"]);
    let ns = dict.string_table.iter().filter(|s| *s == "ns").count();
    assert_eq!(ns, 1);
    assert!(!dict
        .string_table
        .iter()
        .any(|s| s == "nanosecond" || s == "nanoseconds"));
    let samples = &profiles(&d).next().unwrap().samples;
    assert_eq!(samples[0].attribute_indices, [1]);
    assert_eq!(samples[1].attribute_indices, [1, 2]);
    assert_eq!(units_of(&d), ["samples/1 - 0"]);
}

#[test]
fn unknown_units_pass_unchanged_and_are_counted() {
    let d = profile_with(
        "widgets",
        "furlongs",
        "",
        "",
        0,
        vec![sample(&[], &[3], &[])],
    );
    let mut batch = ProfileBatch::new(d.clone());
    let mut p = UnitNormalization::new(&UnitNormalizationConfig::default());
    let (_, events) = run(&mut p, &mut batch);
    assert_eq!(batch.data(), &d);
    assert_eq!(events.get("unknown_unit"), Some(&1));
    assert_eq!(events.get("unit_rewritten"), None);
}

#[test]
fn scaling_to_base_converts_values_period_and_numeric_attributes() {
    let mut d = profile_with(
        "wall",
        "milliseconds",
        "wall",
        "ms",
        10,
        vec![
            sample(&[], &[3, 4], &[1, 2]),
            sample(&[], &[], &[5, 6, 7]),
            sample(&[], &[9], &[]),
        ],
    );
    let mut b = DictionaryBuilder::from_dictionary(d.dictionary.take().unwrap());
    let mut attr = |key: &str, value: Option<AnyValue>, unit: &str| {
        let a = KeyValueAndUnit {
            key_strindex: b.string(key),
            value,
            unit_strindex: b.string(unit),
        };
        b.attribute(a)
    };
    let heap = attr("heap", int(2), "KiBy");
    let list = attr(
        "sizes",
        Some(AnyValue {
            value: Some(Value::ArrayValue(ArrayValue {
                values: vec![
                    int(1).unwrap(),
                    AnyValue {
                        value: Some(Value::DoubleValue(0.5)),
                    },
                ],
            })),
        }),
        "kilobytes",
    );
    let label = attr(
        "budget",
        Some(AnyValue {
            value: Some(Value::StringValue("ten".into())),
        }),
        "seconds",
    );
    d.dictionary = Some(b.finish());
    let p = &mut d.resource_profiles[0].scope_profiles[0].profiles[0];
    p.samples[0].attribute_indices = vec![heap, list, label];

    let out = normalize(&mut d, &opts(Target::Ucum, true, false));
    assert_eq!(out.profiles_scaled, 1);
    assert_eq!(out.attributes_scaled, 2);
    assert_eq!(units_of(&d), ["wall/ns wall/ns 10000000"]);
    let p = profiles(&d).next().unwrap();
    let values: Vec<&[i64]> = p.samples.iter().map(|s| s.values.as_slice()).collect();
    // A timestamp-only sample counts 1 ms per timestamp: 1 000 000 ns each.
    assert_eq!(
        values,
        [&[3_000_000, 4_000_000][..], &[1_000_000; 3], &[9_000_000]]
    );
    let text = resolve(&d, Detail::Names).to_text();
    assert!(
        text.contains("[budget=ten (s), heap=2048 (By), sizes=[1024, 512.0] (By)] 7000000"),
        "{text}"
    );
    assert_eq!(validate(&d), Ok(()));
}

#[test]
fn overflowing_values_saturate_and_are_counted() {
    let mut d = profile_with(
        "wall",
        "s",
        "",
        "",
        0,
        vec![sample(&[], &[i64::MAX / 2, 1], &[1, 2])],
    );
    let out = normalize(&mut d, &opts(Target::Ucum, true, false));
    assert_eq!(out.saturated, 1);
    let p = profiles(&d).next().unwrap();
    assert_eq!(p.samples[0].values, [i64::MAX, 1_000_000_000]);
}

#[test]
fn sample_counts_become_time_with_one_period_per_observation() {
    let samples = vec![
        sample(&[], &[], &[10, 20, 30]),
        sample(&[], &[2], &[]),
        sample(&[], &[1, 3], &[40, 50]),
    ];
    let mut d = profile_with("samples", "count", "cpu", "milliseconds", 10, samples);
    let count = ProfileBatch::new(d.clone()).sample_count();
    let out = normalize(&mut d, &opts(Target::Pprof, false, true));
    assert_eq!(out.profiles_to_time, 1);
    assert_eq!(units_of(&d), ["cpu/nanoseconds cpu/milliseconds 10"]);
    let p = profiles(&d).next().unwrap();
    let values: Vec<&[i64]> = p.samples.iter().map(|s| s.values.as_slice()).collect();
    assert_eq!(
        values,
        [
            &[10_000_000; 3][..],
            &[20_000_000],
            &[10_000_000, 30_000_000]
        ]
    );
    assert_eq!(p.samples[0].timestamps_unix_nano, [10, 20, 30]);
    assert_eq!(ProfileBatch::new(d.clone()).sample_count(), count);
    // The orphaned `samples` and `count` strings were collected.
    let strings = &d.dictionary.as_ref().unwrap().string_table;
    assert!(
        !strings.iter().any(|s| s == "samples" || s == "count"),
        "{strings:?}"
    );

    // Without a time period there is nothing to multiply by.
    let mut d = profile_with(
        "samples",
        "count",
        "events",
        "count",
        1,
        vec![sample(&[], &[1], &[])],
    );
    assert_eq!(
        normalize(&mut d, &opts(Target::Pprof, false, true)).profiles_to_time,
        0
    );
    assert_eq!(units_of(&d), ["samples/count events/count 1"]);
    // A nameless period type gives Pyroscope's `cpu`.
    let mut d = profile_with(
        "samples",
        "count",
        "",
        "ns",
        5,
        vec![sample(&[], &[], &[1])],
    );
    normalize(&mut d, &opts(Target::Ucum, false, true));
    assert_eq!(units_of(&d), ["cpu/ns /ns 5"]);
}

/// Sum of the values of the profiles whose sample type is `name` (ASCII
/// case aside) in a unit of `dimension`, in that dimension's base unit. A
/// timestamp-only sample is worth one unit per timestamp.
fn total(d: &ProfilesData, name: &str, dimension: Dimension) -> i64 {
    let l = Lookup::of(d);
    profiles(d)
        .filter_map(|p| {
            let st = p.sample_type?;
            let u = parse(l.string(st.unit_strindex)).filter(|u| u.dimension == dimension)?;
            l.string(st.type_strindex)
                .eq_ignore_ascii_case(name)
                .then_some((p, u))
        })
        .map(|(p, u)| {
            let values: i64 = p
                .samples
                .iter()
                .map(|s| match s.values.as_slice() {
                    [] => s.timestamps_unix_nano.len() as i64,
                    v => v.iter().sum(),
                })
                .sum();
            values * u.factor
        })
        .sum()
}

/// The recorded Go CPU profile: `samples`/`count` then `cpu`/`nanoseconds`
/// over the same 590 samples, in one scope.
fn go_cpu() -> ProfilesData {
    let d = testdata::otlp_batch("go-cpu.otlp.bin").into_data();
    assert_eq!(
        units_of(&d),
        [
            "samples/count cpu/nanoseconds 10000000",
            "cpu/nanoseconds cpu/nanoseconds 10000000"
        ]
    );
    d
}

#[test]
fn a_pprof_cpu_profile_keeps_its_cpu_time() {
    let d = go_cpu();
    // go-cpu.top.txt: Total samples = 5.90s, 590 samples of 10 ms.
    let cpu_ns = total(&d, "cpu", Dimension::Time);
    assert_eq!(cpu_ns, 5_900_000_000);
    assert_eq!(total(&d, "samples", Dimension::Count), 590);
    for target in [Target::Ucum, Target::Pprof] {
        for scale in [false, true] {
            let o = opts(target, scale, true);
            let mut batch = ProfileBatch::new(d.clone());
            let mut p = UnitNormalization { opts: o };
            let (_, events) = run(&mut p, &mut batch);
            let after = batch.data();
            // The count profile is the cpu profile's own observations: it
            // stays a count, and CPU time is counted once.
            assert_eq!(total(after, "cpu", Dimension::Time), cpu_ns, "{o:?}");
            assert_eq!(total(after, "samples", Dimension::Count), 590, "{o:?}");
            assert_eq!(events.get("profile_to_time_skipped"), Some(&1), "{o:?}");
            assert_eq!(events.get("profile_to_time"), None, "{o:?}");
            assert_eq!(
                after.resource_profiles[0].scope_profiles[0].profiles.len(),
                2
            );
            assert_eq!(validate(after), Ok(()));
        }
    }
    // Counted even when nothing else changes: the batch keeps its bytes.
    let mut batch = testdata::otlp_batch("go-cpu.otlp.bin");
    let out = normalize_batch(&mut batch, &opts(Target::Pprof, false, true));
    assert_eq!(out.to_time_skipped, 1);
    assert!(!out.changed);
    assert!(batch.encoded().is_some());
    // Without `samples_to_time` there is nothing to skip.
    let mut batch = testdata::otlp_batch("go-cpu.otlp.bin");
    let out = normalize_batch(&mut batch, &opts(Target::Ucum, false, false));
    assert_eq!(out.to_time_skipped, 0);
}

#[test]
fn a_count_profile_without_its_time_is_still_converted() {
    let o = opts(Target::Pprof, false, true);
    let converted = |mut d: ProfilesData| {
        let out = normalize(&mut d, &o);
        assert_eq!(validate(&d), Ok(()));
        (out.profiles_to_time, out.to_time_skipped, d)
    };

    // A sample count with a cpu period and nothing else in its scope (the
    // eBPF profiler, a Python or Node sampler): it is the only CPU time.
    let d = profile_with(
        "samples",
        "count",
        "cpu",
        "nanoseconds",
        10_000_000,
        vec![sample(&[], &[3], &[]), sample(&[], &[], &[7, 8])],
    );
    let (to_time, skipped, d) = converted(d);
    assert_eq!((to_time, skipped), (1, 0));
    assert_eq!(units_of(&d), ["cpu/nanoseconds cpu/nanoseconds 10000000"]);
    assert_eq!(total(&d, "cpu", Dimension::Time), 50_000_000);

    // The Go profile without its cpu/nanoseconds profile.
    let mut d = go_cpu();
    d.resource_profiles[0].scope_profiles[0].profiles.pop();
    let (to_time, skipped, d) = converted(d);
    assert_eq!((to_time, skipped), (1, 0));
    assert_eq!(total(&d, "cpu", Dimension::Time), 5_900_000_000);

    // A cpu profile of another window is another recording.
    let mut d = go_cpu();
    let cpu = &mut d.resource_profiles[0].scope_profiles[0].profiles[1];
    cpu.time_unix_nano += 60_000_000_000;
    let (to_time, skipped, _) = converted(d);
    assert_eq!((to_time, skipped), (1, 0));
    let mut d = go_cpu();
    d.resource_profiles[0].scope_profiles[0].profiles[1].duration_nano += 1;
    assert_eq!(converted(d).0, 1);

    // So is one in another scope (the processor does not compare samples).
    let mut d = go_cpu();
    let scope = &mut d.resource_profiles[0].scope_profiles;
    let mut other = scope[0].clone();
    other.profiles.remove(0);
    scope[0].profiles.pop();
    scope.push(other);
    let (to_time, skipped, d) = converted(d);
    assert_eq!((to_time, skipped), (1, 0));
    assert_eq!(total(&d, "cpu", Dimension::Time), 11_800_000_000);

    // A sibling that counts is not the time the conversion would make.
    let mut d = go_cpu();
    let mut b = DictionaryBuilder::from_dictionary(d.dictionary.take().unwrap());
    let count = b.string("count");
    d.dictionary = Some(b.finish());
    let cpu = &mut d.resource_profiles[0].scope_profiles[0].profiles[1];
    cpu.sample_type.as_mut().unwrap().unit_strindex = count;
    assert_eq!(converted(d).0, 1);
}

#[test]
fn a_time_sibling_is_recognized_by_name_unit_and_window() {
    // Two profiles of one recording, as a pprof import makes them.
    let pair = |count: (&str, &str), period: (&str, &str), time: (&str, &str)| {
        let mut b = DictionaryBuilder::new();
        let mut vt = |(t, u): (&str, &str)| {
            Some(ValueType {
                type_strindex: b.string(t),
                unit_strindex: b.string(u),
            })
        };
        let base = Profile {
            period_type: vt(period),
            period: 10,
            time_unix_nano: 1_700_000_000_000_000_000,
            duration_nano: 10_000_000_000,
            ..Default::default()
        };
        let profiles = vec![
            Profile {
                sample_type: vt(count),
                samples: vec![sample(&[], &[2], &[])],
                ..base.clone()
            },
            Profile {
                sample_type: vt(time),
                samples: vec![sample(&[], &[20], &[])],
                ..base
            },
        ];
        ProfilesData {
            resource_profiles: vec![resource(profiles)],
            dictionary: Some(b.finish()),
        }
    };
    let skipped = |mut d: ProfilesData| {
        let out = normalize(&mut d, &opts(Target::Ucum, true, true));
        assert_eq!(out.to_time_skipped + out.profiles_to_time, 1);
        out.to_time_skipped == 1
    };
    // Any spelling of a time unit, any case of the name.
    assert!(skipped(pair(
        ("samples", "count"),
        ("cpu", "ns"),
        ("cpu", "ms")
    )));
    assert!(skipped(pair(
        ("Sample", "{samples}"),
        ("wall", "us"),
        ("WALL", "nanosecond")
    )));
    // A nameless period type converts to `cpu`.
    assert!(skipped(pair(
        ("samples", "count"),
        ("", "ns"),
        ("cpu", "ns")
    )));
    // Another name is another measurement.
    assert!(!skipped(pair(
        ("samples", "count"),
        ("cpu", "ns"),
        ("wall", "ns")
    )));
    assert!(!skipped(pair(
        ("samples", "count"),
        ("wall", "ns"),
        ("cpu", "ns")
    )));
    assert!(!skipped(pair(
        ("samples", "count"),
        ("cpu", "ns"),
        ("cpu", "bytes")
    )));
}

#[test]
fn a_normalized_batch_passes_through_with_its_bytes() {
    let mut first = testdata::otlp_batch("go-cpu.otlp.bin");
    let o = opts(Target::Ucum, true, true);
    assert!(normalize_batch(&mut first, &o).changed);
    let bytes = first.encode_to_bytes();
    let mut again = ProfileBatch::decode(bytes.clone()).unwrap();
    let out = normalize_batch(&mut again, &o);
    assert!(!out.changed);
    assert_eq!(again.encoded(), Some(&bytes));
    // The pprof fixture is in pprof's vocabulary already.
    let mut go = testdata::otlp_batch("go-cpu.otlp.bin");
    assert!(!normalize_batch(&mut go, &opts(Target::Pprof, false, false)).changed);
    assert!(go.encoded().is_some());
}

// ---------------------------------------------------------------- fixtures

fn report(data: ProfilesData, o: Options) -> String {
    let before = units_of(&data);
    let mut batch = ProfileBatch::new(data);
    let mut p = UnitNormalization { opts: o };
    let (_, events) = run(&mut p, &mut batch);
    let events: Vec<String> = events.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "before: {}\nafter:  {}\nevents: {}\n\n{}",
        before.join(" | "),
        units_of(batch.data()).join(" | "),
        events.join(" "),
        resolve(batch.data(), Detail::Names).to_text()
    )
}

#[test]
fn recorded_pprof_conversion_in_ucum_with_base_values() {
    let d = testdata::otlp_batch("go-cpu.otlp.bin").into_data();
    insta::assert_snapshot!(
        "go_cpu_ucum_base",
        report(d, opts(Target::Ucum, true, false))
    );
}

#[test]
fn recorded_two_resources_in_ucum() {
    let d = testdata::otlp_batch("two-resources-request.bin").into_data();
    insta::assert_snapshot!(
        "two_resources_ucum",
        report(d, opts(Target::Ucum, true, false))
    );
}

#[test]
fn recorded_sentry_chunk_becomes_wall_time() {
    let d = testdata::sentry_python();
    let before = resolve(&d, Detail::Names);
    let period = profiles(&d).next().unwrap().period;
    assert!(period > 0);
    let mut after = d.clone();
    normalize(&mut after, &opts(Target::Ucum, false, true));
    // Same lines, each worth its number of observations times the period.
    let after_view = resolve(&after, Detail::Names);
    let (b, a) = (&before.profiles[0], &after_view.profiles[0]);
    assert_eq!(a.sample_type, "wall/ns");
    assert_eq!(
        b.samples.keys().collect::<Vec<_>>(),
        a.samples.keys().collect::<Vec<_>>()
    );
    for (line, total) in &b.samples {
        assert_eq!(a.samples[line], total * period, "{line}");
    }
    insta::assert_snapshot!(
        "sentry_python_to_time",
        report(d, opts(Target::Ucum, false, true))
    );
}

// ---------------------------------------------------------------- properties

/// A copy of `d` in which every use of a dictionary entry has an entry of its
/// own (nothing shared but the zero values): normalizing it needs no
/// repointing, interning or collection, so it is an independent reference
/// for the shared case.
fn explode(d: &ProfilesData) -> ProfilesData {
    struct Copier<'a> {
        src: Lookup<'a>,
        out: ProfilesDictionary,
    }
    fn push<T>(t: &mut Vec<T>, v: T) -> i32 {
        t.push(v);
        t.len() as i32 - 1
    }
    impl Copier<'_> {
        fn copy(&mut self, t: Table, i: i32) -> i32 {
            if i == 0 {
                return 0;
            }
            let src = self.src;
            match t {
                Table::String => push(&mut self.out.string_table, src.string(i).to_owned()),
                Table::Link => push(&mut self.out.link_table, src.link(i).clone()),
                Table::Attribute => {
                    let mut a = src.attribute(i).clone();
                    visit::attribute_mut(&mut a, &mut |t, j| *j = self.copy(t, *j));
                    push(&mut self.out.attribute_table, a)
                }
                Table::Mapping => {
                    let mut m = src.mapping(i).clone();
                    visit::mapping_mut(&mut m, &mut |t, j| *j = self.copy(t, *j));
                    push(&mut self.out.mapping_table, m)
                }
                Table::Function => {
                    let mut f = *src.function(i);
                    visit::function_mut(&mut f, &mut |t, j| *j = self.copy(t, *j));
                    push(&mut self.out.function_table, f)
                }
                Table::Location => {
                    let mut l = src.location(i).clone();
                    visit::location_mut(&mut l, &mut |t, j| *j = self.copy(t, *j));
                    push(&mut self.out.location_table, l)
                }
                Table::Stack => {
                    let mut s = src.stack(i).clone();
                    visit::stack_mut(&mut s, &mut |t, j| *j = self.copy(t, *j));
                    push(&mut self.out.stack_table, s)
                }
            }
        }
    }
    let mut c = Copier {
        src: Lookup::of(d),
        out: ProfilesDictionary {
            string_table: vec![String::new()],
            mapping_table: vec![Default::default()],
            location_table: vec![Default::default()],
            function_table: vec![Default::default()],
            link_table: vec![Default::default()],
            attribute_table: vec![Default::default()],
            stack_table: vec![Default::default()],
        },
    };
    let mut resources = d.resource_profiles.clone();
    visit::resources_mut(&mut resources, &mut |t, i| *i = c.copy(t, *i));
    ProfilesData {
        resource_profiles: resources,
        dictionary: Some(c.out),
    }
}

fn options() -> impl Strategy<Value = Options> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(pprof, scale, time)| Options {
        target: if pprof { Target::Pprof } else { Target::Ucum },
        scale_to_base: scale,
        samples_to_time: time,
    })
}

/// Every unit string in value types and attribute entries.
fn unit_strings(d: &ProfilesData) -> Vec<(bool, String)> {
    let l = Lookup::of(d);
    let mut out: Vec<(bool, String)> = profiles(d)
        .flat_map(|p| p.sample_type.iter().chain(&p.period_type))
        .map(|vt| (true, l.string(vt.unit_strindex).to_owned()))
        .collect();
    for a in &l.dictionary().attribute_table {
        let number =
            |v: &AnyValue| matches!(v.value, Some(Value::IntValue(_) | Value::DoubleValue(_)));
        let numeric = a.value.as_ref().is_some_and(|v| match &v.value {
            Some(Value::ArrayValue(list)) => list.values.iter().all(number),
            _ => number(v),
        });
        out.push((numeric, l.string(a.unit_strindex).to_owned()));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn shared_dictionaries_normalize_like_unshared_ones(d in testdata::data(), o in options()) {
        let exploded = explode(&d);
        prop_assert_eq!(validate(&exploded), Ok(()));
        prop_assert_eq!(full(&exploded), full(&d));

        let mut batch = ProfileBatch::new(d.clone());
        let mut p = UnitNormalization { opts: o };
        run(&mut p, &mut batch);
        prop_assert_eq!(validate(batch.data()), Ok(()));
        let mut reference = exploded;
        normalize(&mut reference, &o);
        prop_assert_eq!(validate(&reference), Ok(()));
        prop_assert_eq!(full(batch.data()), full(&reference));

        // Every known unit is now spelled in the target vocabulary, in base
        // units where values were scaled.
        for (scalable, s) in unit_strings(batch.data()) {
            if let Some(u) = units::parse(&s) {
                let want: Unit = if o.scale_to_base && scalable { u.base() } else { u };
                prop_assert_eq!(s.as_str(), want.name(o.target));
            }
        }
        // Nothing left to do the second time.
        let mut again = batch.data().clone();
        let second = normalize(&mut again, &o);
        prop_assert!(!second.changed, "{:?}", second);
    }
}

mod oracle;
