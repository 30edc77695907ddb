use std::fmt::Write as _;

use bytes::Bytes;
use prost::Message;
use prost_reflect::{Kind, MessageDescriptor};

use super::*;
use profcol_model::dictionary::Table;
use profcol_model::proto::{self, dictionary_of, ProfilesData};
use profcol_model::repair::repair;
use profcol_model::resolved::{resolve, Detail};
use profcol_model::testing::fixture;
use profcol_model::{profiles, validate, wire_check};

fn bytes(rel: &str) -> Bytes {
    Bytes::from(fixture(&format!("otlp-revisions/{rel}")))
}

fn encoded(data: &ProfilesData, revision: Revision) -> (Bytes, Lost) {
    let mut buf = Vec::new();
    let lost = encode_as(data, revision, &mut buf).unwrap();
    (Bytes::from(buf), lost)
}

/// What a reader of the data sees: the resolved view, and what it leaves
/// out that every revision carries: each profile's time, duration and id,
/// and the timestamps of each sample line.
fn meaning(d: &ProfilesData) -> String {
    let mut s = resolve(d, Detail::Full).to_text();
    for p in profiles(&d.resource_profiles) {
        let mut ts: Vec<u64> = p
            .samples
            .iter()
            .flat_map(|s| s.timestamps_unix_nano.iter().copied())
            .collect();
        ts.sort_unstable();
        writeln!(
            s,
            "time={} duration={} id={} timestamps={ts:?}",
            p.time_unix_nano,
            p.duration_nano,
            hex::encode(&p.profile_id)
        )
        .unwrap();
    }
    s
}

/// Every message the build maps to a v1.10.0 type is the same on the wire
/// in its revision: same numbers, types and cardinality; the common and
/// resource messages of older revisions are a subset of v1.10.0's.
#[test]
fn messages_shared_with_v1_10_are_the_same_on_the_wire() {
    fn same(old: &MessageDescriptor, new: &MessageDescriptor, subset: bool) {
        let name = old.full_name();
        for f in old.fields() {
            let g = new.get_field(f.number()).unwrap_or_else(|| {
                panic!("{name}.{} ({}) is not in v1.10.0", f.name(), f.number())
            });
            assert_eq!(
                (f.cardinality(), f.is_packed()),
                (g.cardinality(), g.is_packed()),
                "{name}.{}",
                f.name()
            );
            match (f.kind(), g.kind()) {
                (Kind::Message(a), Kind::Message(b)) => {
                    assert_eq!(a.full_name(), b.full_name(), "{name}.{}", f.name());
                }
                (a, b) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}.{}", f.name()),
            }
        }
        if !subset {
            assert_eq!(old.fields().len(), new.fields().len(), "{name}");
        }
    }
    let current = shape::pool(Revision::CURRENT);
    for (revision, shared) in [
        (Revision::V1_7_0, v1_7::wire::SHARED),
        (Revision::V1_8_0, v1_8::wire::SHARED),
        (Revision::V1_9_0, v1_9::wire::SHARED),
    ] {
        let pool = shape::pool(revision);
        for m in pool.all_messages() {
            let name = m.full_name();
            let profiles = m.package_name() == "opentelemetry.proto.profiles.v1development";
            if profiles && !shared.contains(&m.name()) {
                continue;
            }
            let new = current
                .get_message_by_name(name)
                .unwrap_or_else(|| panic!("{revision}: {name} is not in v1.10.0"));
            same(&m, &new, !profiles);
        }
    }
}

/// The files of `tests/fixtures/otlp-revisions/EXPECTED.tsv`, each read as
/// the revision it lists.
#[test]
fn recorded_and_built_requests_are_read_as_the_expected_revision() {
    let table = String::from_utf8(fixture("otlp-revisions/EXPECTED.tsv")).unwrap();
    let mut n = 0;
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (file, expected) = (cols[0], cols[2]);
        let d = decode(&bytes(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(d.revision.as_str(), expected, "{file}");
        n += 1;
    }
    assert_eq!(n, 39);
}

/// The four hand-built fixtures hold one profile, each written with the
/// classes of its revision's published package: all read as the v1.10.0
/// one does.
#[test]
fn each_revision_of_the_shared_profile_reads_as_v1_10_does() {
    let current = decode(&bytes("python-proto-1.45.2/request.binpb")).unwrap();
    assert_eq!(current.revision, Revision::V1_10_0);
    assert!(current.findings.is_valid());
    let want = meaning(&current.data);
    assert!(
        want.contains("compute_hash<") && want.contains("thread.name=worker-1"),
        "{want}"
    );
    for (file, revision) in [
        ("python-proto-1.39.1/request.binpb", Revision::V1_7_0),
        ("python-protoc-v1.8.0/request.binpb", Revision::V1_8_0),
        ("python-proto-1.42.1/request.binpb", Revision::V1_9_0),
        (
            "python-proto-1.45.2/request-strindex.binpb",
            Revision::V1_10_0,
        ),
    ] {
        let d = decode(&bytes(file)).unwrap();
        assert_eq!(d.revision, revision, "{file}");
        assert!(d.findings.is_valid(), "{file}: {:?}", d.findings);
        assert_eq!(meaning(&d.data), want, "{file}");
    }
}

/// The shared fixtures: the OTLP ones, the pprof ones as profcol imports
/// them, and the synthetic request of the benches.
fn shared_fixtures() -> Vec<(String, ProfilesData)> {
    let mut all: Vec<(String, ProfilesData)> = [
        "otlp/minimal-request.bin",
        "otlp/two-resources-request.bin",
        "otlp/go-cpu.otlp.bin",
        "otlp-revisions/python-proto-1.45.2/request-strindex.binpb",
        "otlp-revisions/beacon-profiling-1.2.1/0001.binpb",
    ]
    .into_iter()
    .map(|f| {
        let d = ProfilesData::decode(fixture(f).as_slice()).unwrap();
        (f.to_owned(), d)
    })
    .collect();
    for f in ["pprof/dd-wall.pb.gz", "pprof/go-cpu.pb.gz"] {
        let p = profcol_pprof::decode_pprof(&fixture(f)).unwrap();
        let d = profcol_pprof::pprof_to_otlp(&p).unwrap();
        all.push((f.to_owned(), d));
    }
    all.push((
        "synth::request(500, 50)".to_owned(),
        profcol_model::synth::request(500, 50),
    ));
    all
}

/// The shared fixtures, written with each revision's generated types and
/// read back: the revision they were written in, the same meaning.
#[test]
fn every_fixture_written_in_every_revision_reads_back_the_same() {
    for (file, data) in shared_fixtures() {
        validate(&data).unwrap();
        let want = meaning(&data);
        for revision in Revision::ALL {
            let (b, lost) = encoded(&data, revision);
            let d = decode(&b).unwrap_or_else(|e| panic!("{file} as {revision}: {e}"));
            if d.revision != revision {
                // Bytes a newer revision reads too, with the same meaning
                // (see the module docs): the newest is taken.
                assert!(d.revision > revision, "{file} as {revision}");
                let own = read_as(revision, &b).unwrap();
                assert!(own.findings.is_valid() && own.unknown_fields == 0);
                assert_eq!(meaning(&own.data), want, "{file} as {revision}");
            }
            assert!(
                d.findings.is_valid(),
                "{file} as {revision}: {:?}",
                d.findings
            );
            // v1.7.0 keeps only the sum of a sample's values per
            // timestamp, which is all the view shows of them.
            if revision != Revision::V1_7_0 {
                assert!(lost.is_empty(), "{file} as {revision}: {lost:?}");
            }
            assert_eq!(meaning(&d.data), want, "{file} as {revision}");
        }
    }
}

/// opentelemetry-sdk-extension-profiling 0.63b4, the producer profcol used
/// to refuse: v1.9.0, four tables without their zero value at 0.
#[test]
fn the_v1_9_producer_without_zero_entries_is_read_and_repaired() {
    for file in ["0001.binpb", "0002.binpb"] {
        let b = bytes(&format!(
            "opentelemetry-sdk-extension-profiling-0.63b4/{file}"
        ));
        let mut d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_9_0);
        assert!(d.findings.consistent(), "{:?}", d.findings);
        let shifted = [
            Table::Location,
            Table::Function,
            Table::Attribute,
            Table::Stack,
        ];
        assert_eq!(d.findings.not_zero, shifted);
        // Its first sample names stack 0 and attributes 0 and 1: thread.id
        // and thread.name of the main thread.
        let first = profiles(&d.data.resource_profiles).next().unwrap().samples[0].clone();
        assert_eq!(
            (first.stack_index, first.attribute_indices),
            (0, vec![0, 1])
        );
        let before = profcol_model::ProfileBatch::new(d.data.clone()).sample_count();
        assert_eq!(repair(&mut d.data).shifted, shifted);
        validate(&d.data).unwrap();
        assert_eq!(
            profcol_model::ProfileBatch::new(d.data.clone()).sample_count(),
            before
        );
        let view = resolve(&d.data, Detail::Names).to_text();
        assert!(view.contains("thread.name=MainThread"), "{view}");
        // No sample lost its thread: each has the id and the name.
        let first = &profiles(&d.data.resource_profiles).next().unwrap().samples[0];
        let lookup = profcol_model::dictionary::Lookup::of(&d.data);
        let keys: Vec<&str> = first
            .attribute_indices
            .iter()
            .map(|&a| lookup.string(lookup.attribute(a).key_strindex))
            .collect();
        assert_eq!(keys, ["thread.id", "thread.name"]);
    }
}

/// Requests whose bytes two revisions read, built on purpose.
mod ambiguous {
    use super::*;

    fn request(samples: Vec<proto::Sample>) -> ProfilesData {
        ProfilesData {
            resource_profiles: vec![proto::ResourceProfiles {
                scope_profiles: vec![proto::ScopeProfiles {
                    profiles: vec![proto::Profile {
                        sample_type: Some(proto::ValueType {
                            type_strindex: 1,
                            unit_strindex: 2,
                        }),
                        samples,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(proto::ProfilesDictionary {
                string_table: ["", "samples", "count", "thread.name"]
                    .map(String::from)
                    .to_vec(),
                stack_table: vec![Default::default()],
                attribute_table: vec![
                    Default::default(),
                    proto::KeyValueAndUnit {
                        key_strindex: 3,
                        value: Some(proto::AnyValue {
                            value: Some(proto::any_value::Value::StringValue("a".into())),
                        }),
                        unit_strindex: 0,
                    },
                ],
                ..Default::default()
            }),
        }
    }

    fn sample(values: Vec<i64>, attrs: Vec<i32>, timestamps: Vec<u64>) -> proto::Sample {
        proto::Sample {
            values,
            attribute_indices: attrs,
            timestamps_unix_nano: timestamps,
            ..Default::default()
        }
    }

    #[test]
    fn v1_9_values_without_attributes_are_not_read_as_v1_10_attributes() {
        // v1.10.0 reads [5] as attribute_indices, out of range, and the
        // sample as empty: only v1.9.0 (and v1.8.0, the same) fits.
        let data = request(vec![sample(vec![5], vec![], vec![])]);
        let (b, _) = encoded(&data, Revision::V1_9_0);
        let as_current = read_as(Revision::V1_10_0, &b).unwrap();
        assert!(!as_current.findings.consistent());
        assert!(read_as(Revision::V1_8_0, &b).unwrap().findings.consistent());
        let d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_9_0, "the newest that fits");
        assert_eq!(meaning(&d.data), meaning(&data));
    }

    #[test]
    fn v1_10_attributes_as_many_as_timestamps_stay_attributes() {
        let data = request(vec![sample(vec![], vec![1], vec![7])]);
        let (b, _) = encoded(&data, Revision::V1_10_0);
        // v1.9.0 reads the attribute as a value of 1 for the timestamp.
        let as_v1_9 = read_as(Revision::V1_9_0, &b).unwrap();
        assert!(as_v1_9.findings.is_valid());
        assert_eq!(
            profiles(&as_v1_9.data.resource_profiles)
                .next()
                .unwrap()
                .samples[0]
                .values,
            [1]
        );
        let d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_10_0);
        assert_eq!(meaning(&d.data), meaning(&data));
    }

    #[test]
    fn timestamps_only_without_attributes_mean_the_same_in_three_revisions() {
        let data = request(vec![sample(vec![], vec![], vec![7, 8])]);
        let (b, _) = encoded(&data, Revision::V1_8_0);
        for r in [Revision::V1_10_0, Revision::V1_9_0, Revision::V1_8_0] {
            let d = read_as(r, &b).unwrap();
            assert!(d.findings.is_valid() && d.unknown_fields == 0, "{r}");
            assert_eq!(meaning(&d.data), meaning(&data), "{r}");
        }
        assert_eq!(decode(&b).unwrap().revision, Revision::V1_10_0);
    }

    #[test]
    fn a_v1_8_profile_is_told_by_the_fields_later_revisions_do_not_know() {
        let mut data = request(vec![sample(vec![], vec![], vec![7])]);
        profiles_mut_first(&mut data).attribute_indices = vec![1];
        let (b, _) = encoded(&data, Revision::V1_8_0);
        // Its attribute_indices (12) is unknown to v1.9.0 and v1.10.0,
        // which read it without the attribute.
        for r in [Revision::V1_10_0, Revision::V1_9_0] {
            let d = read_as(r, &b).unwrap();
            assert!(d.findings.is_valid(), "{r}");
            assert_eq!(d.unknown_fields, 1, "{r}");
        }
        let d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_8_0);
        assert_eq!(meaning(&d.data), meaning(&data));
        assert!(meaning(&d.data).contains("attributes: thread.name=a"));
    }

    fn profiles_mut_first(d: &mut ProfilesData) -> &mut proto::Profile {
        profcol_model::profiles_mut(&mut d.resource_profiles)
            .next()
            .unwrap()
    }

    #[test]
    fn a_profile_id_is_not_read_as_v1_8_comments() {
        let mut data = request(vec![sample(vec![3], vec![1], vec![])]);
        profiles_mut_first(&mut data).profile_id = (1..=16).collect();
        let (b, _) = encoded(&data, Revision::V1_9_0);
        let as_v1_8 = read_as(Revision::V1_8_0, &b).unwrap_err();
        assert!(as_v1_8.contains("comment_strindices"), "{as_v1_8}");
        assert_eq!(decode(&b).unwrap().revision, Revision::V1_9_0);
    }

    #[test]
    fn a_request_without_profiles_is_the_current_revision() {
        let data = ProfilesData {
            resource_profiles: vec![proto::ResourceProfiles::default()],
            dictionary: None,
        };
        let b = Bytes::from(data.encode_to_vec());
        for r in Revision::ALL {
            assert!(read_as(r, &b).unwrap().findings.is_valid(), "{r}");
        }
        assert_eq!(decode(&b).unwrap().revision, Revision::V1_10_0);
    }
}

mod v1_7_translation {
    use super::*;
    use v1_7::wire;

    fn request(profile: wire::Profile) -> ProfilesData {
        let d = wire::ProfilesData {
            resource_profiles: vec![wire::ResourceProfiles {
                scope_profiles: vec![wire::ScopeProfiles {
                    profiles: vec![profile],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(wire::ProfilesDictionary {
                string_table: ["", "cpu", "ns", "alloc", "bytes", "main"]
                    .map(String::from)
                    .to_vec(),
                function_table: vec![proto::Function {
                    name_strindex: 5,
                    ..Default::default()
                }],
                location_table: vec![wire::Location {
                    line: vec![proto::Line::default()],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let b = Bytes::from(d.encode_to_vec());
        let d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_7_0);
        assert!(d.findings.is_valid(), "{:?}", d.findings);
        d.data
    }

    fn value_type(t: i32, u: i32) -> wire::ValueType {
        wire::ValueType {
            type_strindex: t,
            unit_strindex: u,
            aggregation_temporality: 1,
        }
    }

    #[test]
    fn each_sample_type_becomes_a_profile() {
        let data = request(wire::Profile {
            sample_type: vec![value_type(1, 2), value_type(3, 4)],
            sample: vec![wire::Sample {
                locations_length: 1,
                value: vec![10, 2048],
                ..Default::default()
            }],
            location_indices: vec![0],
            profile_id: vec![7; 16],
            time_nanos: 5,
            ..Default::default()
        });
        let view = resolve(&data, Detail::Names).to_text();
        assert_eq!(
            view,
            "profile sample_type=cpu/ns period_type=- period=0\n  main 10\n\
             profile sample_type=alloc/bytes period_type=- period=0\n  main 2048\n"
        );
        let ps: Vec<_> = profiles(&data.resource_profiles).collect();
        assert_eq!(ps[0].profile_id, [7; 16], "the id stays with the first");
        assert!(ps[1].profile_id.is_empty());
        assert_eq!((ps[0].time_unix_nano, ps[1].time_unix_nano), (5, 5));
    }

    #[test]
    fn a_value_is_spread_over_its_timestamps() {
        let data = request(wire::Profile {
            sample_type: vec![value_type(1, 2)],
            sample: vec![
                wire::Sample {
                    locations_length: 1,
                    value: vec![11],
                    timestamps_unix_nano: vec![1, 2, 3],
                    ..Default::default()
                },
                wire::Sample {
                    value: vec![4],
                    timestamps_unix_nano: vec![9],
                    ..Default::default()
                },
            ],
            location_indices: vec![0],
            ..Default::default()
        });
        let p = profiles(&data.resource_profiles).next().unwrap();
        assert_eq!(p.samples[0].values, [4, 4, 3]);
        assert_eq!(p.samples[0].timestamps_unix_nano, [1, 2, 3]);
        assert_eq!(
            (
                p.samples[1].values.as_slice(),
                p.samples[1].timestamps_unix_nano.as_slice()
            ),
            (&[4][..], &[9][..])
        );
    }

    #[test]
    fn a_slice_outside_location_indices_is_refused() {
        let d = wire::ProfilesData {
            resource_profiles: vec![wire::ResourceProfiles {
                scope_profiles: vec![wire::ScopeProfiles {
                    profiles: vec![wire::Profile {
                        sample_type: vec![value_type(0, 0)],
                        sample: vec![wire::Sample {
                            locations_start_index: 1,
                            locations_length: 2,
                            value: vec![1],
                            ..Default::default()
                        }],
                        location_indices: vec![0, 0],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(wire::ProfilesDictionary {
                string_table: vec![String::new()],
                location_table: vec![wire::Location::default()],
                ..Default::default()
            }),
        };
        let e = read_as(Revision::V1_7_0, &Bytes::from(d.encode_to_vec())).unwrap_err();
        assert!(
            e.contains(
                "sample[0]: locations 1..+2 are not within the profile's 2 location_indices"
            ),
            "{e}"
        );
    }

    #[test]
    fn what_v1_7_cannot_hold_is_counted() {
        let mut data =
            ProfilesData::decode(fixture("otlp/minimal-request.bin").as_slice()).unwrap();
        let dict = data.dictionary.as_mut().unwrap();
        dict.string_table
            .extend(["k".to_owned(), "ms".to_owned(), "s".to_owned()]);
        let n = dict.string_table.len() as i32;
        for unit in [n - 2, n - 1] {
            dict.attribute_table.push(proto::KeyValueAndUnit {
                key_strindex: n - 3,
                value: None,
                unit_strindex: unit,
            });
        }
        let p = profcol_model::profiles_mut(&mut data.resource_profiles)
            .next()
            .unwrap();
        p.samples[0].timestamps_unix_nano = vec![1, 2];
        p.samples[0].values = vec![3, 4];
        let (b, lost) = encoded(&data, Revision::V1_7_0);
        assert_eq!(
            lost,
            Lost {
                summed_samples: 1,
                attribute_units: 1
            }
        );
        let d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_7_0);
        // The sum stays, spread over the timestamps again.
        let p = profiles(&d.data.resource_profiles).next().unwrap();
        assert_eq!(p.samples[0].values, [4, 3]);
        for r in [Revision::V1_8_0, Revision::V1_9_0, Revision::V1_10_0] {
            assert!(encoded(&data, r).1.is_empty(), "{r}");
        }
    }
}

#[test]
fn bytes_no_revision_reads_say_why_for_each() {
    let e = decode(&Bytes::from_static(&[0x0a, 0x02, 0x08, 0xff])).unwrap_err();
    assert_eq!(
        e.0.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        Revision::ALL
    );
    assert!(e.to_string().starts_with("as v1.10.0: "), "{e}");
}

#[test]
fn revisions_parse_from_their_names() {
    for r in Revision::ALL {
        assert_eq!(r.as_str().parse::<Revision>(), Ok(r));
        assert_eq!(r.as_str()[1..].parse::<Revision>(), Ok(r));
    }
    assert!("v1.6.0".parse::<Revision>().is_err());
}

/// async-profiler's OTLP dumps (Java API `dumpOtlp()`), 4.2 writing
/// v1.7.0, 4.3 and 4.4 v1.9.0, 4.5 v1.10.0, the files its agent writes,
/// 4.5's JFR converter's and what 4.6's agent POSTs: the recorded Java
/// stacks, root first, with each profile's own unit; a `threads` run names
/// a thread per sample.
#[test]
fn async_profiler_dumps_read_as_the_recorded_stacks() {
    let burn = "java/lang/Thread.run<|:0|";
    for (file, revision, units) in [
        (
            "async-profiler-4.2/cpu.binpb",
            Revision::V1_7_0,
            &["itimer/count", "itimer/ns"][..],
        ),
        (
            "async-profiler-4.2/wall.binpb",
            Revision::V1_7_0,
            &["wall/count", "wall/ns"],
        ),
        (
            "async-profiler-4.3/cpu.binpb",
            Revision::V1_9_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.3/wall.binpb",
            Revision::V1_9_0,
            &["wall/count"],
        ),
        (
            "async-profiler-4.3/cpu-threads.binpb",
            Revision::V1_9_0,
            &["itimer/count"],
        ),
        // Written as its agent writes `-o otlp -f FILE`: padded varints.
        (
            "async-profiler-4.2/cpu-file.binpb",
            Revision::V1_7_0,
            &["itimer/count", "itimer/ns"],
        ),
        (
            "async-profiler-4.3/cpu-file.binpb",
            Revision::V1_9_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.4/cpu.binpb",
            Revision::V1_9_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.4/wall.binpb",
            Revision::V1_9_0,
            &["wall/count"],
        ),
        (
            "async-profiler-4.4/cpu-threads.binpb",
            Revision::V1_9_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.4/cpu-file.binpb",
            Revision::V1_9_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.5/cpu.binpb",
            Revision::V1_10_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.5/wall.binpb",
            Revision::V1_10_0,
            &["wall/count"],
        ),
        (
            "async-profiler-4.5/cpu-total.binpb",
            Revision::V1_10_0,
            &["itimer/ns"],
        ),
        (
            "async-profiler-4.5/cpu-threads.binpb",
            Revision::V1_10_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.5/cpu-file.binpb",
            Revision::V1_10_0,
            &["itimer/count"],
        ),
        (
            "async-profiler-4.5/jfrconv-cpu.binpb",
            Revision::V1_10_0,
            &["cpu/count"],
        ),
        // Sent by 4.6's agent itself, one POST per `loop`.
        (
            "async-profiler-4.6/push-0001.binpb",
            Revision::V1_10_0,
            &["itimer/count"],
        ),
    ] {
        let mut d = decode(&bytes(file)).unwrap();
        assert_eq!(d.revision, revision, "{file}");
        repair(&mut d.data);
        validate(&d.data).unwrap_or_else(|e| panic!("{file}: {e}"));
        let text = resolve(&d.data, Detail::Full).to_text();
        for unit in units {
            assert!(
                text.contains(&format!("sample_type={unit} ")),
                "{file}: {text}"
            );
        }
        // Otlp.burn under its thread's run(), on both CPU workers' stacks.
        let burning = text
            .lines()
            .filter(|l| l.contains(burn) && l.contains(";Otlp.burn<"))
            .count();
        assert!(burning >= units.len(), "{file}: {text}");
        if file.ends_with("threads.binpb") {
            assert!(
                text.contains("[thread.name=[worker-1 tid="),
                "{file}: {text}"
            );
            assert!(
                text.contains("[thread.name=[allocator tid="),
                "{file}: {text}"
            );
        }
    }
}

/// async-profiler 4.2 with `threads` counts the thread's pseudo-frame in
/// every sample's `locations_length` without writing its location: the last
/// sample runs past the profile's indices, and the request is refused
/// saying where, not read with the stacks shifted.
#[test]
fn async_profiler_4_2_threads_dump_is_refused_saying_where() {
    let e = decode(&bytes("async-profiler-4.2/cpu-threads-invalid.binpb")).unwrap_err();
    let why = e.to_string();
    assert!(
        why.contains("as v1.7.0: resource_profiles[0].scope_profiles[0].profiles[0].sample[18]: locations 115..+17 are not within the profile's 131 location_indices"),
        "{why}"
    );
}

/// The eBPF profiler writes, as pdata does, the zero attribute entry with
/// an empty `value` present: the zero entry, not a real one. Its requests
/// are valid as sent (nothing to repair, the wire check and its one-pass
/// decode pass them as they are) and read as what it profiled.
#[test]
fn ebpf_profiler_requests_are_valid_as_sent() {
    for n in 1..=3 {
        let file = format!("ebpf-profiler-v0.0.202633/000{n}.binpb");
        let b = bytes(&file);
        let mut d = decode(&b).unwrap();
        assert_eq!(d.revision, Revision::V1_10_0, "{file}");
        assert!(d.findings.is_valid(), "{file}: {:?}", d.findings);
        assert!(wire_check::check(&b).is_some(), "{file}");
        assert!(wire_check::decode_clean(&b).is_some(), "{file}");
        assert!(repair(&mut d.data).is_empty(), "{file}");
    }
    let d = decode(&bytes("ebpf-profiler-v0.0.202633/0002.binpb")).unwrap();
    let text = resolve(&d.data, Detail::Names).to_text();
    for stack in [
        // CPython frames named by the profiler, above libpython's.
        ";<module>;outer;inner",
        // HotSpot's.
        ";void Busy.main(java.lang.String[]);long Busy.outer(long);long Busy.inner(long) [",
        // burn's native frames, unnamed: _start, libc, main, middle_work, leaf_hash.
        "  0x10f0;0x27304;0x27249;0x108d;0x1204;0x11e4 [cpu.logical_number=",
    ] {
        assert!(text.contains(stack), "{stack}: {text}");
    }
}

/// async-profiler 4.5 and 4.6 write the zero link as 16 and 8 zero bytes, which
/// pdata reads as its zero ids: valid as sent, and passed by the wire
/// check as received. Interning keeps a zero entry written so (and pdata's
/// zero attribute) at index 0: dedup neither adds an entry for it nor
/// moves what refers to it.
#[test]
fn zero_entries_written_otherwise_stay_the_zero_entry() {
    for file in [
        "async-profiler-4.5/cpu.binpb",
        "async-profiler-4.5/jfrconv-alloc-total-threads.binpb",
        "async-profiler-4.6/push-0002.binpb",
        "ebpf-profiler-v0.0.202633/0001.binpb",
    ] {
        let b = bytes(file);
        let mut d = decode(&b).unwrap();
        assert!(d.findings.is_valid(), "{file}: {:?}", d.findings);
        assert!(wire_check::check(&b).is_some(), "{file}");
        assert!(repair(&mut d.data).is_empty(), "{file}");
        let before = d.data.clone();
        profcol_model::dictionary::dedup(&mut d.data);
        let (old, new) = (dictionary_of(&before), dictionary_of(&d.data));
        assert_eq!(new.link_table.len(), old.link_table.len(), "{file}");
        assert_eq!(
            new.attribute_table.len(),
            old.attribute_table.len(),
            "{file}"
        );
        let samples = |d: &ProfilesData| -> Vec<(i32, Vec<i32>)> {
            let p = &d.resource_profiles[0].scope_profiles[0].profiles[0];
            p.samples
                .iter()
                .map(|s| (s.link_index, s.attribute_indices.clone()))
                .collect()
        };
        assert_eq!(samples(&d.data), samples(&before), "{file}");
    }
    let d = decode(&bytes(
        "async-profiler-4.5/jfrconv-alloc-total-threads.binpb",
    ))
    .unwrap();
    let text = resolve(&d.data, Detail::Full).to_text();
    assert!(text.contains("sample_type=allocations/bytes "), "{text}");
    assert!(text.contains("[thread.name=[allocator tid="), "{text}");
    assert!(!text.contains("trace_id="), "{text}");
}
