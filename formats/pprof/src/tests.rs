use std::collections::BTreeSet;

use prost::Message;

use super::*;
use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, Line, Link, Location,
    Mapping, Profile, ProfilesData, Resource, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};

pub(super) use profcol_model::testing::fixture;

fn otlp_fixture(name: &str) -> ProfilesData {
    ProfilesData::decode(fixture(&format!("otlp/{name}")).as_slice()).unwrap()
}

fn s(p: &proto::Profile, i: i64) -> &str {
    &p.string_table[i as usize]
}

/// A resolved, id-free view of a pprof profile: one line per sample with its
/// values, its stack (leaf first; inlined frames joined with `+`) and its
/// labels sorted. Two profiles with the same view hold the same data.
pub(super) fn view(p: &proto::Profile) -> Vec<String> {
    let functions: std::collections::HashMap<u64, &proto::Function> =
        p.function.iter().map(|f| (f.id, f)).collect();
    let mappings: std::collections::HashMap<u64, &proto::Mapping> =
        p.mapping.iter().map(|m| (m.id, m)).collect();
    let locations: std::collections::HashMap<u64, &proto::Location> =
        p.location.iter().map(|l| (l.id, l)).collect();
    let mut out: Vec<String> = p
        .sample_type
        .iter()
        .map(|t| format!("type {}/{}", s(p, t.r#type), s(p, t.unit)))
        .collect();
    for sample in &p.sample {
        let stack: Vec<String> = sample
            .location_id
            .iter()
            .map(|id| {
                let l = locations[id];
                let lines: Vec<String> = l
                    .line
                    .iter()
                    .map(|ln| {
                        let f = functions[&ln.function_id];
                        format!("{}@{}:{}", s(p, f.name), s(p, f.filename), ln.line)
                    })
                    .collect();
                let m = mappings.get(&l.mapping_id).map_or(String::new(), |m| {
                    format!(
                        " [{} {:#x}-{:#x} {}]",
                        s(p, m.filename),
                        m.memory_start,
                        m.memory_limit,
                        s(p, m.build_id)
                    )
                });
                format!("{:#x} {}{m}", l.address, lines.join("+"))
            })
            .collect();
        let mut labels: Vec<String> = sample
            .label
            .iter()
            .map(|l| {
                if l.str != 0 {
                    format!("{}={}", s(p, l.key), s(p, l.str))
                } else {
                    format!("{}={}{}", s(p, l.key), l.num, s(p, l.num_unit))
                }
            })
            .collect();
        labels.sort();
        out.push(format!(
            "{:?} | {} | {}",
            sample.value,
            stack.join(" ; "),
            labels.join(",")
        ));
    }
    out
}

/// Same view, reporting the first difference rather than both profiles.
pub(super) fn assert_same(got: &proto::Profile, want: &proto::Profile) {
    let (g, w) = (view(got), view(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert_eq!(a, b, "line {i} differs");
    }
    assert_eq!(g.len(), w.len(), "number of lines");
}

fn one_file(data: &ProfilesData, opts: &ToPprofOptions) -> (PprofFile, proto::Profile) {
    let mut files = to_pprof(data, opts).unwrap();
    assert_eq!(
        files.len(),
        1,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    files.remove(0)
}

#[test]
fn minimal_request_becomes_a_pprof_with_one_based_ids() {
    let data = otlp_fixture("minimal-request.bin");
    let (file, p) = one_file(&data, &ToPprofOptions::default());
    assert_eq!(file.service_name.as_deref(), Some("holdout-minimal"));
    assert_eq!(file.sample_type_name(), "cpu");
    assert_eq!(file.otlp_samples, 3);
    assert_eq!(file.profile_id, (1..=16).collect::<Vec<u8>>());

    assert_eq!(p.string_table[0], "");
    assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
    assert_eq!(p.duration_nanos, 1_000_000_000);
    assert_eq!(p.period, 10_000_000);
    let pt = p.period_type.unwrap();
    assert_eq!((s(&p, pt.r#type), s(&p, pt.unit)), ("cpu", "nanoseconds"));
    // Ids are 1..=n in every table, and every reference resolves.
    let ids = |v: Vec<u64>| v == (1..=v.len() as u64).collect::<Vec<_>>();
    assert!(ids(p.location.iter().map(|l| l.id).collect()));
    assert!(ids(p.function.iter().map(|f| f.id).collect()));
    assert_eq!(p.location.len(), 3);
    assert_eq!(p.function.len(), 3);
    assert!(p.mapping.is_empty());

    assert_eq!(
        view(&p),
        [
            "type cpu/nanoseconds",
            "[30000000] | 0x0 leaf@leaf.go:7 ; 0x0 work@main.go:22 ; 0x0 main@main.go:12 | service.name=holdout-minimal",
            "[10000000] | 0x0 work@main.go:22 ; 0x0 main@main.go:12 | service.name=holdout-minimal",
            "[20000000] | 0x0 leaf@leaf.go:7 ; 0x0 work@main.go:22 ; 0x0 main@main.go:12 | service.name=holdout-minimal,thread.name=main",
        ]
    );
    let f = &p.function[0];
    assert_eq!(
        (s(&p, f.name), s(&p, f.system_name), f.start_line),
        ("leaf", "leaf", 5)
    );
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(&p, c)).collect();
    assert_eq!(
        comments,
        [
            "profcol: converted from OTLP profiles",
            "profcol: scope holdout 1"
        ]
    );
}

#[test]
fn resource_labels_follow_the_option() {
    let data = otlp_fixture("minimal-request.bin");
    let opts = ToPprofOptions {
        resource_attributes_as_labels: vec![],
        comments: vec!["received by otlp".into()],
        ..Default::default()
    };
    let (_, p) = one_file(&data, &opts);
    assert!(p.sample[0].label.is_empty());
    assert_eq!(s(&p, *p.comment.last().unwrap()), "received by otlp");
}

#[test]
fn each_resource_gets_its_own_file_with_links_and_timestamps() {
    let data = otlp_fixture("two-resources-request.bin");
    let files = to_pprof(&data, &ToPprofOptions::default()).unwrap();
    assert_eq!(files.len(), 2);
    let (a, pa) = &files[0];
    let (b, pb) = &files[1];
    assert_eq!(
        (a.service_name.as_deref(), a.resource),
        (Some("holdout-a"), 0)
    );
    assert_eq!(
        (b.service_name.as_deref(), b.resource),
        (Some("holdout-b"), 1)
    );

    // The linked sample carries the trace and span ids as hex labels.
    let v = view(pa);
    assert!(
        v[2].contains("trace_id=0123456789abcdef0123456789abcdef"),
        "{v:?}"
    );
    assert!(v[2].contains(",span_id=0123456789abcdef,"), "{v:?}");
    assert!(
        !v[1].contains("trace_id") && !v[1].contains("span_id"),
        "{v:?}"
    );

    // values [10ms, 10ms, 10ms] with three timestamps: one sample of 30ms.
    assert_eq!(pb.sample.len(), 1);
    assert_eq!(pb.sample[0].value, [30_000_000]);
    // The native frame keeps its mapping and address.
    let native = pb
        .location
        .iter()
        .chain(&pa.location)
        .find(|l| l.mapping_id != 0)
        .expect("a mapped location");
    assert_eq!(native.address, 4_198_964);
}

/// Builds a `ProfilesData` by hand for cases the fixtures do not cover.
struct Build {
    dict: DictionaryBuilder,
}

impl Build {
    fn new() -> Self {
        Self {
            dict: DictionaryBuilder::new(),
        }
    }

    fn vt(&mut self, t: &str, u: &str) -> Option<ValueType> {
        Some(ValueType {
            type_strindex: self.dict.string(t),
            unit_strindex: self.dict.string(u),
        })
    }

    fn frame(&mut self, name: &str, mapping: i32, lines: usize) -> i32 {
        let f = self.dict.function_named(name, name, "x.c", 1);
        let lines = (0..lines)
            .map(|i| Line {
                function_index: f,
                line: 10 + i as i64,
                column: 0,
            })
            .collect();
        self.dict.location(Location {
            mapping_index: mapping,
            address: 0x1000,
            lines,
            attribute_indices: vec![],
        })
    }

    fn profile(&mut self, t: &str, samples: Vec<Sample>) -> Profile {
        Profile {
            sample_type: self.vt(t, "count"),
            period_type: self.vt(t, "count"),
            period: 1,
            time_unix_nano: 1_000,
            duration_nano: 10,
            samples,
            ..Default::default()
        }
    }

    fn finish(self, profiles: Vec<Profile>) -> ProfilesData {
        ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![KeyValue {
                        key: "service.name".into(),
                        value: Some(AnyValue {
                            value: Some(Value::StringValue("svc".into())),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: None,
                    profiles,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
            dictionary: Some(self.dict.finish()),
        }
    }
}

fn sample(stack: i32, attrs: Vec<i32>, values: Vec<i64>, timestamps: usize) -> Sample {
    Sample {
        stack_index: stack,
        attribute_indices: attrs,
        link_index: 0,
        values,
        timestamps_unix_nano: (0..timestamps as u64).map(|t| 1_000 + t).collect(),
    }
}

#[test]
fn attributes_become_labels_with_units_and_mappings_keep_build_ids() {
    let mut b = Build::new();
    let build_id = b.dict.attribute_kv(
        "process.executable.build_id.gnu",
        AnyValue {
            value: Some(Value::StringValue("abc123".into())),
        },
        "",
    );
    let name = b.dict.string("/usr/lib/libc.so");
    let m = b.dict.mapping(Mapping {
        memory_start: 0x1000,
        memory_limit: 0x9000,
        file_offset: 0x200,
        filename_strindex: name,
        attribute_indices: vec![build_id],
    });
    let inlined = b.frame("memcpy", m, 2);
    let stack = b.dict.stack(&[inlined]);
    let bytes = b.dict.attribute_kv(
        "alloc",
        AnyValue {
            value: Some(Value::IntValue(512)),
        },
        "bytes",
    );
    let flag = b.dict.attribute_kv(
        "gc",
        AnyValue {
            value: Some(Value::BoolValue(true)),
        },
        "",
    );
    let list = b.dict.attribute_kv(
        "tags",
        AnyValue {
            value: Some(Value::ArrayValue(ArrayValue {
                values: vec![
                    AnyValue {
                        value: Some(Value::StringValue("a".into())),
                    },
                    AnyValue {
                        value: Some(Value::StringValue("b".into())),
                    },
                ],
            })),
        },
        "",
    );
    let samples = vec![
        sample(stack, vec![bytes, flag, list], vec![], 4),
        sample(stack, vec![], vec![2, 3], 2),
    ];
    let p = b.profile("alloc", samples);
    let data = b.finish(vec![p]);
    let (_, pp) = one_file(&data, &ToPprofOptions::default());

    // Timestamps only: one per event. Values: their sum.
    assert_eq!(pp.sample[0].value, [4]);
    assert_eq!(pp.sample[1].value, [5]);
    let v = view(&pp);
    assert!(
        v[1].ends_with("| alloc=512bytes,gc=true,service.name=svc,tags=a,tags=b"),
        "{v:?}"
    );
    assert!(
        v[1].contains("memcpy@x.c:10+memcpy@x.c:11 [/usr/lib/libc.so 0x1000-0x9000 abc123]"),
        "{v:?}"
    );

    let m = &pp.mapping[0];
    assert_eq!((m.id, m.file_offset), (1, 0x200));
    // No pprof flags in OTLP: inferred from the locations.
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers && m.has_inline_frames);
}

fn two_types(aligned: bool) -> ProfilesData {
    let mut b = Build::new();
    let f1 = b.frame("a", 0, 1);
    let f2 = b.frame("b", 0, 1);
    let s1 = b.dict.stack(&[f1]);
    let s2 = b.dict.stack(&[f2, f1]);
    let t = b.dict.attribute_kv(
        "thread.name",
        AnyValue {
            value: Some(Value::StringValue("main".into())),
        },
        "",
    );
    let counts = b.profile(
        "samples",
        vec![
            sample(s1, vec![t], vec![1], 0),
            sample(s2, vec![], vec![2], 0),
        ],
    );
    let second = if aligned { s2 } else { s1 };
    let mut cpu = b.profile(
        "cpu",
        vec![
            sample(s1, vec![t], vec![10], 0),
            sample(second, vec![], vec![20], 0),
        ],
    );
    cpu.time_unix_nano = 500;
    b.finish(vec![counts, cpu])
}

#[test]
fn sample_types_are_separate_files_unless_merged_and_lined_up() {
    let data = two_types(true);
    let files = to_pprof(&data, &ToPprofOptions::default()).unwrap();
    let names: Vec<String> = files.iter().map(|f| f.0.sample_type_name()).collect();
    assert_eq!(names, ["samples", "cpu"]);

    let merge = ToPprofOptions {
        merge_sample_types: true,
        ..Default::default()
    };
    let (file, p) = one_file(&data, &merge);
    assert_eq!(file.sample_type_name(), "samples+cpu");
    assert_eq!(file.otlp_samples, 4);
    assert_eq!(file.time_unix_nano, 500);
    assert_eq!(p.time_nanos, 500);
    // 500 + 10 .. 1000 + 10: the span of both profiles.
    assert_eq!(p.duration_nanos, 510);
    assert_eq!(
        view(&p),
        [
            "type samples/count",
            "type cpu/count",
            "[1, 10] | 0x1000 a@x.c:10 | service.name=svc,thread.name=main",
            "[2, 20] | 0x1000 b@x.c:10 ; 0x1000 a@x.c:10 | service.name=svc",
        ]
    );

    // Different stacks at one position: never summed into one sample.
    let files = to_pprof(&two_types(false), &merge).unwrap();
    assert_eq!(files.len(), 2);
}

#[test]
fn go_cpu_otlp_merges_back_into_two_sample_types() {
    let data = otlp_fixture("go-cpu.otlp.bin");
    let merge = ToPprofOptions {
        merge_sample_types: true,
        ..Default::default()
    };
    let (file, p) = one_file(&data, &merge);
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (s(&p, t.r#type), s(&p, t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(file.service_name.as_deref(), Some("go-cpu"));
    // Every sample is one 10ms tick per count, as Go's CPU profiler writes.
    assert!(p
        .sample
        .iter()
        .all(|s| s.value[1] == s.value[0] * 10_000_000));

    // The same samples as the recorded pprof file.
    let original = decode_pprof(&fixture("pprof/go-cpu.pb.gz")).unwrap();
    let no_resource_labels = ToPprofOptions {
        resource_attributes_as_labels: vec![],
        ..merge
    };
    assert_same(&one_file(&data, &no_resource_labels).1, &original);

    let separate = to_pprof(&data, &ToPprofOptions::default()).unwrap();
    assert_eq!(separate.len(), 2);
}

#[test]
fn invalid_indices_are_errors_not_panics() {
    let mut data = otlp_fixture("minimal-request.bin");
    data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 99;
    assert!(matches!(
        to_pprof(&data, &ToPprofOptions::default()),
        Err(PprofError::InvalidOtlp(_))
    ));

    let mut data = otlp_fixture("minimal-request.bin");
    data.dictionary.as_mut().unwrap().stack_table[1]
        .location_indices
        .push(1234);
    assert!(matches!(
        to_pprof(&data, &ToPprofOptions::default()),
        Err(PprofError::InvalidOtlp(_))
    ));

    let mut data = otlp_fixture("minimal-request.bin");
    data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].attribute_indices = vec![-1];
    assert!(matches!(
        to_pprof(&data, &ToPprofOptions::default()),
        Err(PprofError::InvalidOtlp(_))
    ));
}

/// A pprof profile written by hand with every field the import maps.
fn handmade_pprof() -> proto::Profile {
    let strings = [
        "",
        "cpu",
        "nanoseconds",
        "samples",
        "count",
        "main",
        "main.go",
        "/bin/app",
        "deadbeef",
        "worker",
        "bytes",
        "alloc",
        "trace_id",
        "0123456789abcdef0123456789abcdef",
        "span_id",
        "0011223344556677",
        "tag",
        "x",
        "y",
        "runtime\\..*",
        "first comment",
        "wall",
    ];
    let l = |key, str, num, num_unit| proto::Label {
        key,
        str,
        num,
        num_unit,
    };
    proto::Profile {
        sample_type: vec![
            proto::ValueType { r#type: 3, unit: 4 },
            proto::ValueType { r#type: 1, unit: 2 },
        ],
        sample: vec![
            proto::Sample {
                location_id: vec![20, 10],
                value: vec![1, 10],
                label: vec![
                    l(9, 5, 0, 0),
                    l(11, 0, 64, 10),
                    l(12, 13, 0, 0),
                    l(14, 15, 0, 0),
                ],
            },
            proto::Sample {
                location_id: vec![10],
                value: vec![2, 20],
                label: vec![l(16, 17, 0, 0), l(16, 18, 0, 0)],
            },
        ],
        mapping: vec![proto::Mapping {
            id: 7,
            memory_start: 0x400000,
            memory_limit: 0x500000,
            filename: 7,
            build_id: 8,
            has_functions: true,
            ..Default::default()
        }],
        location: vec![
            proto::Location {
                id: 10,
                mapping_id: 7,
                address: 0x401000,
                line: vec![proto::Line {
                    function_id: 3,
                    line: 5,
                    column: 2,
                }],
                is_folded: false,
            },
            proto::Location {
                id: 20,
                mapping_id: 7,
                address: 0x402000,
                line: vec![proto::Line {
                    function_id: 3,
                    line: 9,
                    column: 0,
                }],
                is_folded: true,
            },
        ],
        function: vec![proto::Function {
            id: 3,
            name: 5,
            system_name: 5,
            filename: 6,
            start_line: 1,
        }],
        string_table: strings.iter().map(|s| s.to_string()).collect(),
        drop_frames: 19,
        time_nanos: 123,
        duration_nanos: 456,
        period_type: Some(proto::ValueType { r#type: 1, unit: 2 }),
        period: 10,
        comment: vec![20],
        default_sample_type: 1,
        ..Default::default()
    }
}

fn attr_view(data: &ProfilesData, indices: &[i32]) -> BTreeSet<String> {
    let d = data.dictionary.as_ref().unwrap();
    indices
        .iter()
        .map(|&i| {
            let a = &d.attribute_table[i as usize];
            format!(
                "{}={:?}{}",
                d.string_table[a.key_strindex as usize],
                a.value.as_ref().unwrap().value.as_ref().unwrap(),
                d.string_table[a.unit_strindex as usize]
            )
        })
        .collect()
}

#[test]
fn pprof_imports_as_one_profile_per_sample_type() {
    let p = handmade_pprof();
    let data = pprof_to_otlp(&p).unwrap();
    let d = data.dictionary.as_ref().unwrap();
    let sp = &data.resource_profiles[0].scope_profiles[0];
    assert_eq!(sp.profiles.len(), 2);
    let scope = sp.scope.as_ref().unwrap();
    let scope_keys: Vec<&str> = scope.attributes.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(
        scope_keys,
        [keys::DEFAULT_SAMPLE_TYPE, keys::SAMPLE_TYPE_ORDER]
    );
    assert_eq!(
        scope.attributes[0].value.as_ref().unwrap().value,
        Some(Value::StringValue("cpu".into()))
    );

    let cpu = &sp.profiles[1];
    assert_eq!(
        d.string_table[cpu.sample_type.unwrap().type_strindex as usize],
        "cpu"
    );
    assert_eq!(
        (cpu.time_unix_nano, cpu.duration_nano, cpu.period),
        (123, 456, 10)
    );
    assert_eq!(
        cpu.samples.iter().map(|s| s.values[0]).collect::<Vec<_>>(),
        [10, 20]
    );
    assert_eq!(
        sp.profiles[0]
            .samples
            .iter()
            .map(|s| s.values[0])
            .collect::<Vec<_>>(),
        [1, 2]
    );

    let profile_attrs = attr_view(&data, &cpu.attribute_indices);
    assert!(
        profile_attrs.contains(r#"pprof.profile.drop_frames=StringValue("runtime\\..*")"#),
        "{profile_attrs:?}"
    );
    assert!(profile_attrs
        .iter()
        .any(|a| a.starts_with("pprof.profile.comment=ArrayValue") && a.contains("first comment")));

    // Labels: str, num with unit, trace/span pair as a Link, repeated key as an array.
    let s0 = &cpu.samples[0];
    assert_eq!(
        attr_view(&data, &s0.attribute_indices),
        BTreeSet::from([
            r#"worker=StringValue("main")"#.to_string(),
            "alloc=IntValue(64)bytes".to_string()
        ])
    );
    let link = &d.link_table[s0.link_index as usize];
    assert_eq!(
        hex::encode(&link.trace_id),
        "0123456789abcdef0123456789abcdef"
    );
    assert_eq!(hex::encode(&link.span_id), "0011223344556677");
    let s1 = &cpu.samples[1];
    let tags = attr_view(&data, &s1.attribute_indices);
    assert_eq!(tags.len(), 1);
    assert!(
        tags.iter().next().unwrap().starts_with("tag=ArrayValue"),
        "{tags:?}"
    );

    // Stack leaf first; ids became indices; folded flag and mapping attributes kept.
    let stack = &d.stack_table[s0.stack_index as usize];
    let leaf = &d.location_table[stack.location_indices[0] as usize];
    assert_eq!(leaf.address, 0x402000);
    assert!(attr_view(&data, &leaf.attribute_indices)
        .contains("pprof.location.is_folded=BoolValue(true)"));
    assert_eq!(
        (
            leaf.lines[0].line,
            d.location_table[stack.location_indices[1] as usize].lines[0].column
        ),
        (9, 2)
    );
    let m = &d.mapping_table[leaf.mapping_index as usize];
    assert_eq!(d.string_table[m.filename_strindex as usize], "/bin/app");
    let mattrs = attr_view(&data, &m.attribute_indices);
    assert!(
        mattrs.contains(r#"process.executable.build_id.gnu=StringValue("deadbeef")"#),
        "{mattrs:?}"
    );
    assert!(mattrs.contains("pprof.mapping.has_functions=BoolValue(true)"));
    assert!(mattrs.contains("pprof.mapping.has_filenames=BoolValue(false)"));
}

#[test]
fn pprof_round_trips_through_otlp() {
    let p = handmade_pprof();
    let data = pprof_to_otlp(&p).unwrap();
    let merge = ToPprofOptions {
        merge_sample_types: true,
        resource_attributes_as_labels: vec![],
        comments: vec![],
    };
    let (_, back) = one_file(&data, &merge);
    assert_eq!(view(&back), view(&p));
    assert_eq!(s(&back, back.default_sample_type), "cpu");
    assert_eq!(s(&back, back.drop_frames), "runtime\\..*");
    assert_eq!(back.keep_frames, 0);
    assert_eq!(
        (back.time_nanos, back.duration_nanos, back.period),
        (123, 456, 10)
    );
    assert_eq!(s(&back, back.comment[0]), "first comment");
    let m = &back.mapping[0];
    assert!(m.has_functions && !m.has_filenames && !m.has_line_numbers && !m.has_inline_frames);
    assert!(back
        .location
        .iter()
        .any(|l| l.is_folded && l.address == 0x402000));
    assert!(back
        .location
        .iter()
        .any(|l| !l.is_folded && l.line[0].column == 2));

    // Twice through: nothing accumulates (no repeated comment lines).
    let again = pprof_to_otlp(&back).unwrap();
    let (_, back2) = one_file(&again, &merge);
    assert_eq!(back2.comment.len(), back.comment.len());
    assert_eq!(view(&back2), view(&p));
}

#[test]
fn recorded_pprof_files_round_trip() {
    for name in ["go-cpu.pb.gz", "dd-wall.pb.gz"] {
        let original = decode_pprof(&fixture(&format!("pprof/{name}"))).unwrap();
        let data = pprof_to_otlp(&original).unwrap();
        let merge = ToPprofOptions {
            merge_sample_types: true,
            ..Default::default()
        };
        let (_, back) = one_file(&data, &merge);
        assert_same(&back, &original);
        assert!(!original.sample.is_empty());
    }
}

#[test]
fn invalid_pprof_is_refused() {
    let mut p = handmade_pprof();
    p.sample[0].location_id.push(999);
    assert!(
        matches!(pprof_to_otlp(&p), Err(PprofError::InvalidPprof(m)) if m.contains("location id 999"))
    );

    let mut p = handmade_pprof();
    p.sample[1].value.pop();
    assert!(matches!(
        pprof_to_otlp(&p),
        Err(PprofError::InvalidPprof(_))
    ));

    let mut p = handmade_pprof();
    p.function[0].name = 1000;
    assert!(matches!(
        pprof_to_otlp(&p),
        Err(PprofError::InvalidPprof(_))
    ));

    let mut p = handmade_pprof();
    p.location[1].id = 10;
    assert!(
        matches!(pprof_to_otlp(&p), Err(PprofError::InvalidPprof(m)) if m.contains("duplicate"))
    );
}

#[test]
fn decode_accepts_plain_and_gzip_and_bounds_gzip() {
    let gz = fixture("pprof/dd-wall.pb.gz");
    let from_gz = decode_pprof(&gz).unwrap();
    let plain = from_gz.encode_to_vec();
    assert_eq!(decode_pprof(&plain).unwrap(), from_gz);
    assert!(decode_pprof_limited(&gz, plain.len()).is_ok());
    assert!(matches!(
        decode_pprof_limited(&gz, plain.len() - 1),
        Err(PprofError::Gzip(_))
    ));
    assert!(decode_pprof(&gz[..gz.len() / 2]).is_err());
}

#[test]
fn gzip_output_is_a_valid_pprof_file() {
    let data = otlp_fixture("minimal-request.bin");
    let opts = ToPprofOptions::default();
    let file = &plan_files(&data, &opts).unwrap()[0];
    let gz = encode_pprof_gzip(&data, file, &opts).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let plain = write_pprof(&data, file, &opts, Vec::new()).unwrap();
    assert_eq!(
        decode_pprof(&gz).unwrap(),
        proto::Profile::decode(plain.as_slice()).unwrap()
    );
}

#[test]
fn large_profiles_stream_through_the_flush_buffer() {
    // Enough samples that output is handed over in several chunks.
    let mut b = Build::new();
    let frames: Vec<i32> = (0..50).map(|i| b.frame(&format!("f{i}"), 0, 1)).collect();
    let stacks: Vec<i32> = (0..50).map(|i| b.dict.stack(&frames[i..])).collect();
    let samples = (0..20_000)
        .map(|i| sample(stacks[i % 50], vec![], vec![i as i64], 0))
        .collect();
    let prof = b.profile("samples", samples);
    let data = b.finish(vec![prof]);
    let (_, p) = one_file(&data, &ToPprofOptions::default());
    assert_eq!(p.sample.len(), 20_000);
    assert_eq!(p.sample[19_999].value, [19_999]);
    assert_eq!(p.sample[7].location_id.len(), 43);
    assert_eq!(p.location.len(), 50);
}

#[test]
fn scope_default_sample_type_and_profile_attributes() {
    let mut b = Build::new();
    let f = b.frame("a", 0, 1);
    let st = b.dict.stack(&[f]);
    let keep = b.dict.attribute_kv(
        keys::KEEP_FRAMES,
        AnyValue {
            value: Some(Value::StringValue("main".into())),
        },
        "",
    );
    let env = b.dict.attribute_kv(
        "deployment.environment",
        AnyValue {
            value: Some(Value::StringValue("prod".into())),
        },
        "",
    );
    let mut p = b.profile("wall", vec![sample(st, vec![], vec![3], 0)]);
    p.attribute_indices = vec![keep, env];
    let mut data = b.finish(vec![p]);
    data.resource_profiles[0].scope_profiles[0].scope = Some(InstrumentationScope {
        name: "sentry".into(),
        attributes: vec![KeyValue {
            key: keys::DEFAULT_SAMPLE_TYPE.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue("wall".into())),
            }),
            ..Default::default()
        }],
        ..Default::default()
    });
    let (_, pp) = one_file(&data, &ToPprofOptions::default());
    assert_eq!(s(&pp, pp.keep_frames), "main");
    assert_eq!(s(&pp, pp.default_sample_type), "wall");
    // Profile attributes other than pprof.* label every sample.
    assert_eq!(
        view(&pp)[1],
        "[3] | 0x1000 a@x.c:10 | deployment.environment=prod,service.name=svc"
    );
    assert!(pp
        .comment
        .iter()
        .any(|&c| s(&pp, c) == "profcol: scope sentry"));
}

#[test]
fn a_link_without_ids_adds_no_labels() {
    let mut b = Build::new();
    let f = b.frame("a", 0, 1);
    let st = b.dict.stack(&[f]);
    let link = b.dict.link(Link {
        trace_id: vec![0; 16],
        span_id: vec![0; 8],
    });
    let mut smp = sample(st, vec![], vec![1], 0);
    smp.link_index = link;
    let p = b.profile("wall", vec![smp]);
    let data = b.finish(vec![p]);
    let (_, pp) = one_file(
        &data,
        &ToPprofOptions {
            resource_attributes_as_labels: vec![],
            ..Default::default()
        },
    );
    assert!(pp.sample[0].label.is_empty());
}

/// A Go heap profile as `runtime/pprof` writes it: four sample types, a
/// `space` period, `bytes` num labels without a unit (pprof infers it from
/// the key) next to one with `num_unit`, a repeated string label, several
/// mappings with their own `has_*` flags (libc unsymbolized, its frame an
/// address only, an unreferenced vdso), inlined frames, and a first sample
/// whose leaf is in libc rather than the main binary.
pub(super) fn go_heap_pprof() -> proto::Profile {
    let strings = [
        "",
        "alloc_objects",
        "count",
        "alloc_space",
        "bytes",
        "inuse_objects",
        "inuse_space",
        "space",
        "/srv/app/bin/server",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "[vdso]",
        "4f2b1c0d9e8a",
        "7c1e5a9b3d20",
        "main.alloc",
        "/srv/app/main.go",
        "main.main",
        "runtime.mallocgc",
        "/usr/lib/go/src/runtime/malloc.go",
        "object_size",
        "request",
        "GET /a",
        "GET /b",
    ];
    let l = |key, str, num, num_unit| proto::Label {
        key,
        str,
        num,
        num_unit,
    };
    let line = |function_id, line| proto::Line {
        function_id,
        line,
        column: 0,
    };
    let mapping = |id, start, limit, filename, build_id, symbolized| proto::Mapping {
        id,
        memory_start: start,
        memory_limit: limit,
        file_offset: 0,
        filename,
        build_id,
        has_functions: symbolized,
        has_filenames: symbolized,
        has_line_numbers: symbolized,
        has_inline_frames: symbolized,
    };
    let location = |id, mapping_id, address, line| proto::Location {
        id,
        mapping_id,
        address,
        line,
        is_folded: false,
    };
    let function = |id, name, filename, start_line| proto::Function {
        id,
        name,
        system_name: name,
        filename,
        start_line,
    };
    proto::Profile {
        sample_type: vec![
            proto::ValueType { r#type: 1, unit: 2 },
            proto::ValueType { r#type: 3, unit: 4 },
            proto::ValueType { r#type: 5, unit: 2 },
            proto::ValueType { r#type: 6, unit: 4 },
        ],
        sample: vec![
            proto::Sample {
                location_id: vec![1, 2, 3],
                value: vec![10, 1280, 2, 256],
                label: vec![l(4, 0, 128, 0), l(19, 20, 0, 0)],
            },
            proto::Sample {
                location_id: vec![2, 4],
                value: vec![5, 5120, 0, 0],
                label: vec![l(4, 0, 1024, 0), l(18, 0, 1024, 4)],
            },
            proto::Sample {
                location_id: vec![3],
                value: vec![1, 64, 1, 64],
                label: vec![l(19, 20, 0, 0), l(19, 21, 0, 0)],
            },
        ],
        mapping: vec![
            mapping(1, 0x400000, 0x800000, 8, 11, true),
            mapping(2, 0x7f00_0000_0000, 0x7f00_0020_0000, 9, 12, false),
            mapping(3, 0x7fff_0000_0000, 0x7fff_0000_2000, 10, 0, false),
        ],
        location: vec![
            location(1, 2, 0x7f00_0000_1234, vec![]),
            location(2, 1, 0x401000, vec![line(3, 900)]),
            location(3, 1, 0x402000, vec![line(1, 12), line(2, 30)]),
            location(4, 1, 0x403000, vec![line(2, 31)]),
        ],
        function: vec![
            function(1, 13, 14, 10),
            function(2, 15, 14, 25),
            function(3, 16, 17, 880),
        ],
        string_table: strings.iter().map(|s| s.to_string()).collect(),
        time_nanos: 1_795_318_731_000_000_000,
        period_type: Some(proto::ValueType { r#type: 7, unit: 4 }),
        period: 524_288,
        default_sample_type: 6,
        ..Default::default()
    }
}

#[test]
fn go_heap_profile_keeps_its_sample_types_mappings_and_num_labels() {
    let original = go_heap_pprof();
    let data = pprof_to_otlp(&original).unwrap();
    let sp = &data.resource_profiles[0].scope_profiles[0];
    assert_eq!(sp.profiles.len(), 4);
    let d = data.dictionary.as_ref().unwrap();
    // The unreferenced vdso mapping is imported too, in table order.
    let names: Vec<&str> = d.mapping_table[1..]
        .iter()
        .map(|m| d.string_table[m.filename_strindex as usize].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "/srv/app/bin/server",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "[vdso]"
        ]
    );
    let bytes_label = attr_view(&data, &sp.profiles[0].samples[1].attribute_indices);
    assert_eq!(
        bytes_label,
        BTreeSet::from([
            "bytes=IntValue(1024)".to_string(),
            "object_size=IntValue(1024)bytes".to_string()
        ])
    );

    // Merged: the original, mapping order and flags included.
    let merge = ToPprofOptions {
        merge_sample_types: true,
        resource_attributes_as_labels: vec![],
        comments: vec![],
    };
    let (file, back) = one_file(&data, &merge);
    assert_eq!(
        file.sample_type_name(),
        "alloc_objects+alloc_space+inuse_objects+inuse_space"
    );
    assert_same(&back, &original);
    assert_eq!(s(&back, back.default_sample_type), "inuse_space");
    let pt = back.period_type.unwrap();
    assert_eq!(
        (s(&back, pt.r#type), s(&back, pt.unit), back.period),
        ("space", "bytes", 524_288)
    );
    let mappings: Vec<(u64, &str, &str, [bool; 4])> = back
        .mapping
        .iter()
        .map(|m| {
            (
                m.id,
                s(&back, m.filename),
                s(&back, m.build_id),
                [
                    m.has_functions,
                    m.has_filenames,
                    m.has_line_numbers,
                    m.has_inline_frames,
                ],
            )
        })
        .collect();
    // Main binary first although the first sample's leaf is in libc; the
    // vdso no location uses is not written.
    assert_eq!(
        mappings,
        [
            (1, "/srv/app/bin/server", "4f2b1c0d9e8a", [true; 4]),
            (
                2,
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "7c1e5a9b3d20",
                [false; 4]
            ),
        ]
    );
    let leaf = back
        .location
        .iter()
        .find(|l| l.id == back.sample[0].location_id[0])
        .unwrap();
    assert!(leaf.line.is_empty() && leaf.address == 0x7f00_0000_1234 && leaf.mapping_id == 2);
    // num labels keep their (absent or explicit) unit.
    let units: Vec<(&str, i64, &str)> = back.sample[1]
        .label
        .iter()
        .map(|l| (s(&back, l.key), l.num, s(&back, l.num_unit)))
        .collect();
    assert_eq!(units, [("bytes", 1024, ""), ("object_size", 1024, "bytes")]);

    // Separate files by default, one per sample type; only the default
    // type's file names it.
    let files = to_pprof(&data, &ToPprofOptions::default()).unwrap();
    let types: Vec<(String, Vec<i64>, &str)> = files
        .iter()
        .map(|(f, p)| {
            (
                f.sample_type_name(),
                p.sample.iter().map(|s| s.value[0]).collect(),
                s(p, p.default_sample_type),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects".to_string(), vec![10, 5, 1], ""),
            ("alloc_space".to_string(), vec![1280, 5120, 64], ""),
            ("inuse_objects".to_string(), vec![2, 0, 1], ""),
            ("inuse_space".to_string(), vec![256, 0, 64], "inuse_space"),
        ]
    );
}

/// `go tool pprof -raw` of `p` (written uncompressed), which must open it;
/// `None` when `go` is not installed (see [`profcol_model::testing::go_available`]).
fn go_raw(p: &proto::Profile) -> Option<String> {
    if !profcol_model::testing::go_available() {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("profile.pb");
    std::fs::write(&path, p.encode_to_vec()).unwrap();
    Some(profcol_model::testing::go_tool_pprof(
        &["-raw"],
        &path,
        tmp.path(),
    ))
}

/// The function a location's first line names, which must exist.
fn function_of<'p>(p: &'p proto::Profile, loc: &proto::Location) -> &'p proto::Function {
    let id = loc.line[0].function_id;
    assert_ne!(id, 0, "a line with function_id 0: {loc:?}");
    p.function
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no function {id}"))
}

#[test]
fn a_line_without_a_function_gets_an_empty_function() {
    // OTLP function index 0 (the empty function) reaches the encoder from
    // pprof input with `function_id: 0` or an all-empty function (both
    // become dictionary index 0), and from OTLP or Sentry input whose frame
    // has a line but no name or file. Go's pprof refuses `function_id: 0`
    // ("location id: N has a line with nil function"): it gets a real id.
    let mut no_function = handmade_pprof();
    no_function.location[0].line[0].function_id = 0;
    let mut empty_function = handmade_pprof();
    empty_function.function.push(proto::Function {
        id: 4,
        ..Default::default()
    });
    empty_function.location[0].line[0].function_id = 4;
    for (what, p) in [
        ("function_id 0", no_function),
        ("empty function", empty_function),
    ] {
        let data = pprof_to_otlp(&p).unwrap();
        let merge = ToPprofOptions {
            merge_sample_types: true,
            ..Default::default()
        };
        let (_, back) = one_file(&data, &merge);
        let loc = back
            .location
            .iter()
            .find(|l| l.address == 0x401000)
            .unwrap();
        assert_eq!(loc.line[0].line, 5, "{what}");
        let f = function_of(&back, loc);
        assert_eq!((f.name, f.system_name, f.filename), (0, 0, 0), "{what}");
        let names: BTreeSet<&str> = back.function.iter().map(|f| s(&back, f.name)).collect();
        assert_eq!(names, BTreeSet::from(["", "main"]), "{what}");
        if let Some(raw) = go_raw(&back) {
            assert!(raw.contains("main main.go:9"), "{what}: {raw}");
        }
    }

    // OTLP: a location whose line uses function index 0.
    let mut b = Build::new();
    let named = b.frame("work", 0, 1);
    let unnamed = b.dict.location(Location {
        mapping_index: 0,
        address: 0x2000,
        lines: vec![Line {
            function_index: 0,
            line: 42,
            column: 0,
        }],
        attribute_indices: vec![],
    });
    let st = b.dict.stack(&[unnamed, named]);
    let p = b.profile("wall", vec![sample(st, vec![], vec![1], 0)]);
    let data = b.finish(vec![p]);
    profcol_model::validate::validate(&data).unwrap();
    let (_, pp) = one_file(&data, &ToPprofOptions::default());
    let leaf = pp
        .location
        .iter()
        .find(|l| l.id == pp.sample[0].location_id[0])
        .unwrap();
    assert_eq!(function_of(&pp, leaf).name, 0);
    assert_eq!(leaf.line[0].line, 42);
    if let Some(raw) = go_raw(&pp) {
        assert!(raw.contains("work x.c:10"), "{raw}");
    }
}

fn one_profile(dict: profcol_model::proto::ProfilesDictionary, profile: Profile) -> ProfilesData {
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: None,
            scope_profiles: vec![ScopeProfiles {
                scope: None,
                profiles: vec![profile],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dict),
    }
}

#[test]
fn index_0_of_an_empty_table_is_its_zero_value() {
    // What `validate` accepts, the encoder writes: index 0 is the null
    // reference, valid even into an empty table.
    let everything_empty = one_profile(
        profcol_model::proto::ProfilesDictionary::default(),
        Profile {
            attribute_indices: vec![0],
            samples: vec![Sample {
                stack_index: 0,
                attribute_indices: vec![0],
                link_index: 0,
                values: vec![5],
                timestamps_unix_nano: vec![],
            }],
            ..Default::default()
        },
    );
    profcol_model::validate::validate(&everything_empty).unwrap();
    let (file, p) = one_file(&everything_empty, &ToPprofOptions::default());
    assert_eq!(file.sample_types[0].r#type, "");
    assert_eq!(p.sample.len(), 1);
    assert_eq!(p.sample[0].value, [5]);
    assert!(p.sample[0].location_id.is_empty() && p.sample[0].label.is_empty());
    assert_eq!(p.sample_type.len(), 1);
    go_raw(&p);

    // Strings and stacks present; no functions, links, mappings or
    // attributes: a line naming function 0 and samples naming link 0.
    let dict = profcol_model::proto::ProfilesDictionary {
        string_table: ["", "cpu", "nanoseconds"].map(String::from).to_vec(),
        location_table: vec![
            Location::default(),
            Location {
                mapping_index: 0,
                address: 0x10,
                lines: vec![Line {
                    function_index: 0,
                    line: 7,
                    column: 0,
                }],
                attribute_indices: vec![0],
            },
        ],
        stack_table: vec![
            profcol_model::proto::Stack::default(),
            profcol_model::proto::Stack {
                location_indices: vec![1, 0],
            },
        ],
        ..Default::default()
    };
    let data = one_profile(
        dict,
        Profile {
            sample_type: Some(ValueType {
                type_strindex: 1,
                unit_strindex: 2,
            }),
            samples: vec![sample(1, vec![0], vec![3], 0), sample(0, vec![], vec![], 2)],
            ..Default::default()
        },
    );
    profcol_model::validate::validate(&data).unwrap();
    let (file, p) = one_file(&data, &ToPprofOptions::default());
    assert_eq!(file.sample_type_name(), "cpu");
    assert_eq!(
        p.sample.iter().map(|s| s.value[0]).collect::<Vec<_>>(),
        [3, 2]
    );
    assert_eq!(p.sample[0].location_id.len(), 2);
    assert_eq!(p.function.len(), 1);
    assert_eq!(p.function[0].name, 0);
    assert!(p.mapping.is_empty());
    if let Some(raw) = go_raw(&p) {
        assert!(raw.contains("cpu/nanoseconds"), "{raw}");
    }

    // Other indices into an empty table are still errors.
    let mut bad = data.clone();
    bad.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].link_index = 1;
    assert!(matches!(
        to_pprof(&bad, &ToPprofOptions::default()),
        Err(PprofError::InvalidOtlp(m)) if m.contains("link index 1")
    ));
    let mut bad = data;
    bad.dictionary.as_mut().unwrap().location_table[1].lines[0].function_index = 1;
    assert!(matches!(
        to_pprof(&bad, &ToPprofOptions::default()),
        Err(PprofError::InvalidOtlp(m)) if m.contains("function index 1")
    ));
}

#[test]
fn an_unknown_mapping_id_is_no_mapping() {
    // Go's parser reads a location's unknown mapping id as no mapping.
    let mut p = handmade_pprof();
    p.location[0].mapping_id = 99;
    let data = pprof_to_otlp(&p).unwrap();
    let d = data.dictionary.as_ref().unwrap();
    let loc = d
        .location_table
        .iter()
        .find(|l| l.address == 0x401000)
        .unwrap();
    assert_eq!(loc.mapping_index, 0);
    let merge = ToPprofOptions {
        merge_sample_types: true,
        ..Default::default()
    };
    let (_, back) = one_file(&data, &merge);
    let by_address = |a| back.location.iter().find(|l| l.address == a).unwrap();
    assert_eq!(by_address(0x401000).mapping_id, 0);
    assert_ne!(by_address(0x402000).mapping_id, 0);

    // Unknown function and location ids are still errors.
    let mut p = handmade_pprof();
    p.location[0].line[0].function_id = 99;
    assert!(
        matches!(pprof_to_otlp(&p), Err(PprofError::InvalidPprof(m)) if m.contains("function id 99"))
    );
    let mut p = handmade_pprof();
    p.sample[1].location_id = vec![99];
    assert!(
        matches!(pprof_to_otlp(&p), Err(PprofError::InvalidPprof(m)) if m.contains("location id 99"))
    );
}

#[test]
fn huge_sparse_ids_import_as_small_ones_do() {
    // Ids far above the table sizes take the hash-map path (a dense table
    // indexed by id would need terabytes).
    let big = 1u64 << 40;
    let mut p = handmade_pprof();
    for m in &mut p.mapping {
        m.id += big;
    }
    for l in &mut p.location {
        l.id += big + 1;
        l.mapping_id += big;
        for line in &mut l.line {
            line.function_id += big + 2;
        }
    }
    for f in &mut p.function {
        f.id += big + 2;
    }
    for smp in &mut p.sample {
        for id in &mut smp.location_id {
            *id += big + 1;
        }
    }
    assert_eq!(
        pprof_to_otlp(&p).unwrap(),
        pprof_to_otlp(&handmade_pprof()).unwrap()
    );

    let mut dup = p.clone();
    dup.location[1].id = dup.location[0].id;
    assert!(
        matches!(pprof_to_otlp(&dup), Err(PprofError::InvalidPprof(m)) if m.contains("duplicate location id"))
    );
    let mut unknown = p;
    unknown.sample[0].location_id[0] += 1 << 20;
    assert!(
        matches!(pprof_to_otlp(&unknown), Err(PprofError::InvalidPprof(m)) if m.contains("unknown location id"))
    );
}

#[test]
fn doc_url_survives_a_round_trip() {
    let mut p = handmade_pprof();
    p.string_table
        .push("https://example.com/profiles/cpu".into());
    p.doc_url = p.string_table.len() as i64 - 1;
    let data = pprof_to_otlp(&p).unwrap();
    for profile in &data.resource_profiles[0].scope_profiles[0].profiles {
        assert!(
            attr_view(&data, &profile.attribute_indices).contains(
                r#"pprof.profile.doc_url=StringValue("https://example.com/profiles/cpu")"#
            ),
            "{:?}",
            attr_view(&data, &profile.attribute_indices)
        );
    }
    let merge = ToPprofOptions {
        merge_sample_types: true,
        resource_attributes_as_labels: vec![],
        comments: vec![],
    };
    let (_, back) = one_file(&data, &merge);
    assert_eq!(s(&back, back.doc_url), "https://example.com/profiles/cpu");
    // Not a label.
    assert_eq!(view(&back), view(&p));
    // Separate files each keep it.
    for (_, f) in to_pprof(&data, &ToPprofOptions::default()).unwrap() {
        assert_eq!(s(&f, f.doc_url), "https://example.com/profiles/cpu");
    }
    // Field 15 on the wire, as in profile.proto.
    let bytes = proto::Profile {
        doc_url: 1,
        ..Default::default()
    }
    .encode_to_vec();
    assert_eq!(bytes, [15 << 3, 1]);
}

#[test]
fn profiles_of_one_resource_with_one_sample_type_share_a_file() {
    let mut b = Build::new();
    let fa = b.frame("a", 0, 1);
    let fb = b.frame("b", 0, 1);
    let sa = b.dict.stack(&[fa]);
    let sb = b.dict.stack(&[fb, fa]);
    let mut first = b.profile("cpu", vec![sample(sa, vec![], vec![1], 0)]);
    first.time_unix_nano = 2_000;
    let mut second = b.profile(
        "cpu",
        vec![
            sample(sb, vec![], vec![2], 0),
            sample(sa, vec![], vec![3], 0),
        ],
    );
    second.time_unix_nano = 1_000;
    let other = b.profile("alloc", vec![sample(sa, vec![], vec![9], 0)]);
    let data = b.finish(vec![first, other, second]);

    let files = to_pprof(&data, &ToPprofOptions::default()).unwrap();
    let names: Vec<String> = files.iter().map(|f| f.0.sample_type_name()).collect();
    assert_eq!(names, ["cpu", "alloc"]);
    let (file, p) = &files[0];
    assert_eq!(
        file.columns,
        [vec![
            ProfileRef {
                scope: 0,
                profile: 0
            },
            ProfileRef {
                scope: 0,
                profile: 2
            }
        ]]
    );
    assert_eq!(file.otlp_samples, 3);
    assert_eq!(file.time_unix_nano, 1_000);
    assert_eq!(p.time_nanos, 1_000);
    // 1000 .. 2000 + 10: the span of both profiles.
    assert_eq!(p.duration_nanos, 1_010);
    // Both profiles' samples, in order, in one file with one sample type.
    assert_eq!(
        view(p),
        [
            "type cpu/count",
            "[1] | 0x1000 a@x.c:10 | service.name=svc",
            "[2] | 0x1000 b@x.c:10 ; 0x1000 a@x.c:10 | service.name=svc",
            "[3] | 0x1000 a@x.c:10 | service.name=svc",
        ]
    );
}

#[test]
fn strings_that_are_not_utf8_are_decoded_lossily() {
    // Go writes the string table as bytes: a Latin-1 path is a valid pprof.
    let mut p = handmade_pprof();
    p.string_table[6] = "/src/cafXY.go".into();
    let mut bytes = p.encode_to_vec();
    let at = bytes.windows(2).position(|w| w == b"XY").unwrap();
    bytes[at..at + 2].copy_from_slice(&[0xe9, b'_']);
    assert!(proto::Profile::decode(bytes.as_slice()).is_err());

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    for input in [bytes.clone(), gz.finish().unwrap()] {
        let got = decode_pprof(&input).unwrap();
        assert_eq!(got.string_table[6], "/src/caf\u{fffd}_.go");
        let mut want = p.clone();
        want.string_table[6] = got.string_table[6].clone();
        assert_eq!(got, want);
    }
    // Anything else that does not decode is still an error.
    assert!(matches!(
        decode_pprof(&bytes[..at]),
        Err(PprofError::Decode(_))
    ));
}

#[test]
fn large_or_structured_profile_attributes_are_not_written_but_named() {
    let mut b = Build::new();
    let f = b.frame("a", 0, 1);
    let st = b.dict.stack(&[f]);
    let string = |s: &str| AnyValue {
        value: Some(Value::StringValue(s.into())),
    };
    let release = b.dict.attribute_kv("sentry.release", string("app@1.0"), "");
    let measurements = format!(r#"{{"cpu_usage":[{}]}}"#, "1.5,".repeat(100));
    let json = b
        .dict
        .attribute_kv("sentry.measurements", string(&measurements), "");
    let threads = b.dict.attribute_kv(
        "sentry.thread_metadata",
        AnyValue {
            value: Some(Value::KvlistValue(profcol_model::proto::KeyValueList {
                values: vec![KeyValue {
                    key: "1".into(),
                    value: Some(string("main")),
                    ..Default::default()
                }],
            })),
        },
        "",
    );
    let mut p = b.profile("wall", vec![sample(st, vec![], vec![3], 0)]);
    p.attribute_indices = vec![release, json, threads];
    let data = b.finish(vec![p]);
    let (_, pp) = one_file(&data, &ToPprofOptions::default());
    // A short scalar still labels every sample; the others do not.
    assert_eq!(
        view(&pp)[1],
        "[3] | 0x1000 a@x.c:10 | sentry.release=app@1.0,service.name=svc"
    );
    // Nor do they become kilobytes of comments a viewer prints atop every
    // report: one short line names them.
    let comments: Vec<&str> = pp.comment.iter().map(|&c| s(&pp, c)).collect();
    assert!(
        comments.contains(
            &format!(
                "profcol: profile attributes too large for labels, not written: \
             sentry.measurements ({} bytes), sentry.thread_metadata (8 bytes)",
                measurements.len()
            )
            .as_str()
        ),
        "{comments:?}"
    );
    assert!(comments.iter().all(|c| c.len() < 200), "{comments:?}");
}
