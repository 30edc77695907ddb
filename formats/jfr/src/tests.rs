use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{Profile, ProfilesDictionary};
use profcol_model::testing::fixture;

use super::*;

const HOTLOOP: &str = "pyroscope/jfr/jdk-17.0.15-hotloop.jfr";

fn opts() -> Options {
    Options {
        sample_rate: 100,
        time_unix_nano: 1,
        duration_nano: 2,
    }
}

fn convert(
    jfr: &[u8],
    labels: Option<&LabelsSnapshot>,
) -> (Vec<Profile>, ProfilesDictionary, Stats) {
    let mut dict = DictionaryBuilder::new();
    let mut c = Converter::new(&mut dict, labels, opts());
    c.add(jfr).unwrap();
    let stats = c.stats;
    let p = c.finish(&[]);
    (p, dict.finish(), stats)
}

fn type_of(p: &Profile, d: &ProfilesDictionary) -> String {
    let t = p.sample_type.unwrap();
    format!(
        "{}:{}",
        d.string_table[t.type_strindex as usize], d.string_table[t.unit_strindex as usize]
    )
}

/// The leaf function of the sample with the most value, and its share.
fn top(p: &Profile, d: &ProfilesDictionary, self_only: bool) -> (String, f64) {
    let mut by: std::collections::HashMap<String, i64> = Default::default();
    let total: i64 = p.samples.iter().map(|s| s.values[0]).sum();
    for s in &p.samples {
        let locs = &d.stack_table[s.stack_index as usize].location_indices;
        let mut seen = std::collections::HashSet::new();
        for (i, l) in locs.iter().enumerate() {
            if self_only && i > 0 {
                break;
            }
            let f = d.location_table[*l as usize].lines[0].function_index;
            let name = d.string_table[d.function_table[f as usize].name_strindex as usize].clone();
            if seen.insert(name.clone()) {
                *by.entry(name).or_default() += s.values[0];
            }
        }
    }
    let (name, v) = by.into_iter().max_by_key(|(_, v)| *v).unwrap();
    (name, v as f64 / total as f64)
}

/// A JDK 17 recording of tests/pyroscope_java/HotLoop.java: the hot
/// method tops the CPU profile, the allocation site tops the
/// outside-TLAB bytes, the contended monitor and the park are there.
#[test]
fn a_jdk_recording_becomes_pyroscopes_profiles() {
    let jfr = fixture(HOTLOOP);
    let (profiles, d, stats) = convert(&jfr, None);
    let types: Vec<String> = profiles.iter().map(|p| type_of(p, &d)).collect();
    assert_eq!(
        types,
        [
            "cpu:nanoseconds",
            "alloc_in_new_tlab_objects:count",
            "alloc_in_new_tlab_bytes:bytes",
            "alloc_outside_tlab_objects:count",
            "alloc_outside_tlab_bytes:bytes",
            "contentions:count",
            "delay:nanoseconds",
            "contentions:count",
            "delay:nanoseconds",
        ]
    );
    let cpu = &profiles[0];
    let (leaf, share) = top(cpu, &d, true);
    assert_eq!(leaf, "HotLoop.burnTheCpu");
    assert!(share > 0.9, "{share}");
    // 75 samples of 10 ms each.
    let total: i64 = cpu.samples.iter().map(|s| s.values[0]).sum();
    assert_eq!(total, 75 * 10_000_000);
    assert_eq!(cpu.period, 10_000_000);
    let (site, _) = top(&profiles[4], &d, true);
    assert_eq!(site, "HotLoop.allocateBuffers");
    let objects: i64 = profiles[3].samples.iter().map(|s| s.values[0]).sum();
    let bytes: i64 = profiles[4].samples.iter().map(|s| s.values[0]).sum();
    assert_eq!(objects, 233);
    assert!(bytes >= 233 * 256 * 1024, "{bytes}");
    let (lock, _) = top(&profiles[5], &d, false);
    assert_eq!(lock, "HotLoop.main");
    let (park, _) = top(&profiles[8], &d, true);
    assert_eq!(park, "jdk/internal/misc/Unsafe.park");
    // Lines are kept: burnTheCpu's loop is on line 10.
    let f = d
        .function_table
        .iter()
        .position(|f| d.string_table[f.name_strindex as usize] == "HotLoop.burnTheCpu")
        .unwrap() as i32;
    assert!(d.location_table.iter().any(|l| l
        .lines
        .first()
        .is_some_and(|l| l.function_index == f && l.line == 10)));
    assert_eq!(stats.converted, 233 + 187 + 99 + 75 + 7);
    assert_eq!(stats.chunks, 1);
    assert!(stats.other > 0);
}

#[test]
fn context_ids_get_the_snapshots_labels() {
    // The hot loop's events carry no contextId: a snapshot changes nothing.
    let mut snap = LabelsSnapshot::default();
    snap.strings.insert(1, "region".into());
    snap.strings.insert(2, "eu".into());
    let mut ctx = labels::Context::default();
    ctx.labels.insert(1, 2);
    snap.contexts.insert(7, ctx);
    assert_eq!(snap.context(7), [("region", "eu")]);
    assert!(snap.context(8).is_empty());
    let bytes = prost::Message::encode_to_vec(&snap);
    assert_eq!(LabelsSnapshot::decode_bytes(&bytes).unwrap(), snap);
    assert!(LabelsSnapshot::decode_bytes(b"\x0a\xff").is_err());
}

#[test]
fn every_truncation_and_corruption_fails_cleanly() {
    let jfr = fixture(HOTLOOP);
    let mut dict = DictionaryBuilder::new();
    for cut in (0..jfr.len()).step_by(997) {
        let mut c = Converter::new(&mut dict, None, opts());
        assert!(c.add(&jfr[..cut]).is_err(), "cut at {cut}");
    }
    // Flipped bytes: an error or a profile, never a panic.
    let mut rng = 0x9e3779b97f4a7c15u64;
    for _ in 0..300 {
        let mut b = jfr.clone();
        for _ in 0..4 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng as usize) % b.len();
            b[i] ^= (rng >> 32) as u8 | 1;
        }
        let mut c = Converter::new(&mut dict, None, opts());
        let _ = c.add(&b);
    }
}

/// Counts that claim 2^31 items (pool entries, array elements, string
/// bytes) fail without allocating by the claim.
#[test]
fn hostile_counts_fail_without_allocating_them() {
    let jfr = fixture(HOTLOOP);
    let h = headers(&jfr).unwrap()[0];
    assert!(h.compressed);
    let big = [0xff, 0xff, 0xff, 0xff, 0x07];
    // The metadata's string count.
    let mut r = Reader::new(&jfr, true).at(h.metadata_offset as usize);
    for _ in 0..5 {
        r.long().unwrap();
    }
    let mut b = jfr[..r.pos].to_vec();
    b.extend_from_slice(&big);
    // Keep the claimed sizes: the rest of the chunk follows.
    let skip = {
        let mut r2 = Reader::new(&jfr, true).at(r.pos);
        r2.int().unwrap();
        r2.pos
    };
    b.extend_from_slice(&jfr[skip..]);
    let mut dict = DictionaryBuilder::new();
    let mut c = Converter::new(&mut dict, None, opts());
    let e = c.add(&b).unwrap_err().to_string();
    assert!(e.contains("count of 2147483647"), "{e}");
    // A chunk that claims more bytes than there are.
    let mut b = jfr.clone();
    b[8..16].copy_from_slice(&(1i64 << 40).to_be_bytes());
    let e = Converter::new(&mut dict, None, opts()).add(&b).unwrap_err();
    assert!(e.to_string().contains("claims"), "{e}");
    assert!(Converter::new(&mut dict, None, opts())
        .add(b"PK\x03\x04")
        .is_err());
}

/// One upload of the Pyroscope Java agent 2.9.2 (async-profiler's JFR,
/// JFR 2.0, itimer CPU and TLAB allocation events) with its labels part,
/// both inflated: the hot method and the allocation site on top, inside
/// the `handler=checkout` context of tests/pyroscope_java/AgentApp.java.
#[test]
fn an_async_profiler_recording_with_its_labels() {
    let jfr = fixture("pyroscope/jfr/agent-2.9.2-jdk-17.0.15.jfr");
    let snap =
        LabelsSnapshot::decode_bytes(&fixture("pyroscope/jfr/agent-2.9.2-jdk-17.0.15.labels.pb"))
            .unwrap();
    assert_eq!(headers(&jfr).unwrap()[0].minor, 0);
    let (profiles, d, stats) = convert(&jfr, Some(&snap));
    let types: Vec<String> = profiles.iter().map(|p| type_of(p, &d)).collect();
    assert_eq!(
        types,
        [
            "cpu:nanoseconds",
            "alloc_in_new_tlab_objects:count",
            "alloc_in_new_tlab_bytes:bytes"
        ]
    );
    // 6 of the upload's 18 samples: in its first second the JVM is
    // still compiling and loading classes.
    let (leaf, share) = top(&profiles[0], &d, true);
    assert_eq!(leaf, "AgentApp.burnTheCpu");
    assert!(share > 0.3, "{share}");
    assert_eq!(top(&profiles[2], &d, true).0, "AgentApp.allocateBuffers");
    // The hot samples carry the context's labels.
    let label = |s: &profcol_model::proto::Sample| {
        s.attribute_indices
            .iter()
            .map(|&a| {
                let a = &d.attribute_table[a as usize];
                let v = match &a.value.as_ref().unwrap().value {
                    Some(Value::StringValue(v)) => v.clone(),
                    _ => String::new(),
                };
                format!("{}={v}", d.string_table[a.key_strindex as usize])
            })
            .collect::<Vec<_>>()
    };
    let leaf = |s: &profcol_model::proto::Sample| {
        let l = d.stack_table[s.stack_index as usize].location_indices[0];
        let f = d.location_table[l as usize].lines[0].function_index;
        d.string_table[d.function_table[f as usize].name_strindex as usize].clone()
    };
    let hot: Vec<_> = profiles[0]
        .samples
        .iter()
        .filter(|s| leaf(s) == "AgentApp.burnTheCpu")
        .collect();
    assert!(!hot.is_empty());
    for s in hot {
        assert_eq!(label(s), ["handler=checkout"]);
    }
    assert_eq!(stats.converted, 18 + 43);
}

/// An upload of the agent 2.9.2 running tests/pyroscope_java/GeneratedApp.java:
/// the lambda's hidden class (`GeneratedApp$$Lambda$62.0x00007fd368085498`)
/// and the reflection accessor (`GeneratedMethodAccessor4`) are merged
/// into one function each as Pyroscope merges them, and the samples taken
/// inside the span set as otel-profiling-java sets it carry its id and
/// name beside the context's labels.
#[test]
fn generated_classes_merge_and_spans_label_their_samples() {
    let jfr = fixture("pyroscope/jfr/agent-2.9.2-jdk-17.0.15-generated.jfr");
    let snap = LabelsSnapshot::decode_bytes(&fixture(
        "pyroscope/jfr/agent-2.9.2-jdk-17.0.15-generated.labels.pb",
    ))
    .unwrap();
    let (profiles, d, _) = convert(&jfr, Some(&snap));
    let name =
        |f: &profcol_model::proto::Function| d.string_table[f.name_strindex as usize].clone();
    let names: Vec<String> = d.function_table.iter().map(name).collect();
    for want in [
        "GeneratedApp$$Lambda_.applyAsLong",
        "jdk/internal/reflect/GeneratedMethodAccessor_.invoke",
    ] {
        assert_eq!(
            names.iter().filter(|n| *n == want).count(),
            1,
            "{want}: {names:?}"
        );
    }
    // The raw names are in the file, and no function keeps one.
    assert!(jfr.windows(18).any(|w| w == b"GeneratedApp$$Lamb"));
    for n in &names {
        let numbered = n.contains("$$Lambda$")
            || n.strip_prefix("jdk/internal/reflect/GeneratedMethodAccessor")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
        assert!(!numbered, "{n}");
    }

    let stack_names = |s: &profcol_model::proto::Sample| -> Vec<String> {
        d.stack_table[s.stack_index as usize]
            .location_indices
            .iter()
            .map(|&l| {
                let f = d.location_table[l as usize].lines[0].function_index;
                name(&d.function_table[f as usize])
            })
            .collect()
    };
    let attrs = |s: &profcol_model::proto::Sample| -> Vec<String> {
        let mut v: Vec<String> = s
            .attribute_indices
            .iter()
            .map(|&a| {
                let a = &d.attribute_table[a as usize];
                let v = match &a.value.as_ref().unwrap().value {
                    Some(Value::StringValue(v)) => v.clone(),
                    _ => String::new(),
                };
                format!("{}={v}", d.string_table[a.key_strindex as usize])
            })
            .collect();
        v.sort();
        v
    };
    let cpu = &profiles[0];
    assert_eq!(type_of(cpu, &d), "cpu:nanoseconds");
    let (mut in_span, mut outside) = (0, 0);
    for s in &cpu.samples {
        let stack = stack_names(s);
        if stack.iter().any(|f| f == "GeneratedApp.lambda$main$0") {
            in_span += 1;
            assert_eq!(
                attrs(s),
                [
                    "handler=checkout",
                    "span_id=00f067aa0ba902b7",
                    "span_name=GET /checkout"
                ],
                "{stack:?}"
            );
        } else if stack.iter().any(|f| f == "GeneratedApp.spinReflectively") {
            outside += 1;
            assert!(attrs(s).is_empty(), "{stack:?}: {:?}", attrs(s));
        }
    }
    assert!(in_span > 0 && outside > 0, "{in_span} {outside}");
}
