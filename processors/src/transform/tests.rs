use profcol_model::proto::{
    any_value::Value as A, AnyValue, InstrumentationScope, KeyValue, KeyValueAndUnit, Profile,
    ProfilesData, ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles,
};
use profcol_model::testing::as_received;
use profcol_model::{synth, validate, BatchMeta, ProfileBatch};
use profcol_pipeline::component::{ProcessContext, Processor, Verdict};
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::*;

fn s(v: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(A::StringValue(v.into())),
    })
}

/// Two resources (`host` h1 and h2), each a scope with two profiles of
/// two samples; the profiles share `shared="abc"`, the first of each
/// scope also has `own="x-y-z"`.
pub(crate) fn batch() -> ProfileBatch {
    let strings: Vec<String> = ["", "shared", "own", "cpu", "nanoseconds"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let attrs = vec![
        KeyValueAndUnit::default(),
        KeyValueAndUnit {
            key_strindex: 1,
            value: s("abc"),
            unit_strindex: 0,
        },
        KeyValueAndUnit {
            key_strindex: 2,
            value: s("x-y-z"),
            unit_strindex: 0,
        },
    ];
    let profile = |period: i64, idx: Vec<i32>| Profile {
        profile_id: vec![period as u8; 16],
        period,
        duration_nano: 1000 * period as u64,
        attribute_indices: idx,
        samples: vec![
            Sample {
                values: vec![1],
                ..Default::default()
            };
            2
        ],
        ..Default::default()
    };
    let rp = |host: &str, base: i64| ResourceProfiles {
        resource: Some(Resource {
            attributes: vec![
                KeyValue {
                    key: "host".into(),
                    value: s(host),
                    ..Default::default()
                },
                KeyValue {
                    key: "service.name".into(),
                    value: s("svc"),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        scope_profiles: vec![ScopeProfiles {
            scope: Some(InstrumentationScope {
                name: format!("scope-{host}"),
                version: "1".into(),
                ..Default::default()
            }),
            profiles: vec![profile(base + 1, vec![1, 2]), profile(base + 2, vec![1])],
            schema_url: String::new(),
        }],
        schema_url: String::new(),
    };
    ProfileBatch::new(ProfilesData {
        resource_profiles: vec![rp("h1", 0), rp("h2", 10)],
        dictionary: Some(ProfilesDictionary {
            string_table: strings,
            attribute_table: attrs,
            ..Default::default()
        }),
    })
}

pub(crate) fn create(ty: &str, yaml: &str) -> Result<Box<dyn Processor>, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, ty, yaml).map_err(|e| e.to_string())?;
    let f = match ty.split('/').next() {
        Some("filter") => crate::filter::factory(),
        Some("resource") => crate::resource::factory(),
        Some("attributes") => crate::attributes::factory(),
        _ => factory(),
    };
    f.create(&cfg).map_err(|e| e.to_string())
}

pub(crate) fn run(
    p: &mut dyn Processor,
    b: &mut ProfileBatch,
) -> (Verdict, Vec<(&'static str, u64)>) {
    let mut ctx = ProcessContext::deferred("profiles", "x");
    let v = p.process(b, &mut ctx);
    (v, ctx.into_counts().drops)
}

/// A synthetic request held as a receiver holds it (checked on the wire,
/// not decoded) through `p`, beside the same request decoded: the two end
/// the same, and the first is still not decoded (its samples never were).
/// Returns it.
pub(crate) fn edited_as_bytes(p: &mut dyn Processor, meta: BatchMeta) -> ProfileBatch {
    let data = synth::Config {
        samples: 2_000,
        resources: 2,
        ..Default::default()
    }
    .build();
    let mut received = as_received(&data).with_meta(meta.clone());
    let bytes = received.plain_bytes().unwrap().clone();
    let mut decoded = ProfileBatch::decode(bytes.clone()).unwrap().with_meta(meta);
    assert_eq!(run(p, &mut received).0, Verdict::Keep);
    assert_eq!(run(p, &mut decoded).0, Verdict::Keep);
    assert!(
        !received.is_decoded(),
        "the resources were edited in the bytes"
    );
    assert_ne!(received.encoded(), Some(&bytes), "the resources changed");
    assert_eq!(received.sample_count(), decoded.sample_count());
    assert!(!received.is_decoded());
    assert_eq!(received.data(), decoded.data());
    received
}

/// Each profile's attributes as `k=v`, resolved.
pub(crate) fn profile_attrs(b: &ProfileBatch) -> Vec<Vec<String>> {
    let d = b.dictionary();
    profcol_model::profiles(&b.data().resource_profiles)
        .map(|p| {
            p.attribute_indices
                .iter()
                .map(|&i| {
                    let a = &d.attribute_table[i as usize];
                    let v = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::StringValue(s)) => s.clone(),
                        Some(A::IntValue(i)) => i.to_string(),
                        other => format!("{other:?}"),
                    };
                    format!("{}={v}", d.string_table[a.key_strindex as usize])
                })
                .collect()
        })
        .collect()
}

/// Each resource's attributes, `k=v` in order: strings bare, other
/// values in Rust's debug form.
pub(crate) fn resource_attrs(b: &ProfileBatch) -> Vec<Vec<String>> {
    b.data()
        .resource_profiles
        .iter()
        .map(|rp| {
            rp.resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .map(
                    |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::StringValue(s)) => format!("{}={s}", kv.key),
                        other => format!("{}={other:?}", kv.key),
                    },
                )
                .collect()
        })
        .collect()
}

/// The Collector's README example: the basic form, context inferred.
#[test]
fn readme_basic_config() {
    let mut p = create(
        "transform",
        r#"
error_mode: ignore
profile_statements:
  - keep_keys(resource.attributes, ["host.name"])
  - set(profile.attributes["tag"], "profile#23")
  - set(profile.original_payload_format, "json")
"#,
    )
    .unwrap();
    let mut b = batch();
    assert_eq!(run(&mut *p, &mut b), (Verdict::Keep, vec![]));
    assert_eq!(resource_attrs(&b), vec![Vec::<String>::new(), vec![]]);
    let a = profile_attrs(&b);
    assert_eq!(a[0], ["shared=abc", "own=x-y-z", "tag=profile#23"]);
    assert_eq!(a[1], ["shared=abc", "tag=profile#23"]);
    assert!(profcol_model::profiles(&b.data().resource_profiles)
        .all(|p| p.original_payload_format == "json"));
    validate(b.data()).unwrap();
}

#[test]
fn groups_with_context_conditions_and_error_modes() {
    let yaml = r#"
profile_statements:
  - context: resource
    statements:
      - set(attributes["env"], "prod") where attributes["host"] == "h2"
  - context: profile
    conditions:
      - period > 1
    statements:
      - set(attributes["up"], ToUpperCase(attributes["own"]))
      - set(attributes["period"], period)
"#;
    let mut p = create("transform", yaml).unwrap();
    let mut b = batch();
    let (v, drops) = run(&mut *p, &mut b);
    assert_eq!((v, drops), (Verdict::Keep, vec![]));
    assert_eq!(
        resource_attrs(&b)[1],
        ["host=h2", "service.name=svc", "env=prod"]
    );
    let a = profile_attrs(&b);
    assert_eq!(
        a[0],
        ["shared=abc", "own=x-y-z"],
        "period 1 fails the group's condition"
    );
    // ToUpperCase fails where `own` is missing (ignored), the next statement runs.
    assert_eq!(a[1], ["shared=abc", "period=2"]);
    assert_eq!(a[2], ["shared=abc", "own=x-y-z", "up=X-Y-Z", "period=11"]);

    // propagate: the batch is dropped and counted.
    let mut p = create("transform", &format!("error_mode: propagate\n{yaml}")).unwrap();
    let mut b = batch();
    assert_eq!(
        run(&mut *p, &mut b),
        (Verdict::Drop, vec![(STATEMENT_ERROR, 8)])
    );
}

#[test]
fn config_errors_name_key_and_column() {
    for (yaml, want) in [
        (
            "profile_statements: ['set(profile.attributes[\"a\"], Int(\"abc\"))']",
            "processors::transform::profile_statements::0: unable to parse OTTL statement",
        ),
        (
            "profile_statements: ['set(attributes[\"a\"], 1)']",
            "unable to infer context",
        ),
        (
            "profile_statements: [{context: profile, statements: ['set(foo, 1)']}]",
            "processors::transform::profile_statements::0::statements::0",
        ),
        (
            "profile_statements: [{context: span, statements: []}]",
            "profile_statements::0::context: unknown context",
        ),
        (
            "error_mode: loud",
            "processors::transform::error_mode: unknown error mode loud",
        ),
        (
            "profile_statements: ['set(profile.period, 1)', {context: profile, statements: []}]",
            "multiple configuration styles",
        ),
        ("profile_statements: [~]", "empty statement list items"),
    ] {
        let e = create("transform", yaml)
            .err()
            .unwrap_or_else(|| panic!("{yaml}: no error"));
        assert!(e.contains(want), "{yaml}: {e}");
    }
    let e = create(
        "transform",
        "profile_statements: ['set(profile.attributes[\"a\"], Int(\"abc\"))']",
    )
    .err()
    .unwrap();
    assert!(e.contains("column 34"), "{e}");
}

#[test]
fn resource_statements_edit_a_batch_held_as_received_without_decoding_it() {
    let mut p = create(
        "transform",
        r#"
profile_statements:
  - context: resource
    statements:
      - set(attributes["env"], "prod") where attributes["service.name"] != nil
      - set(schema_url, "https://opentelemetry.io/schemas/1.38.0")
  - statements: ['delete_key(resource.attributes, "host.name")']
"#,
    )
    .unwrap();
    assert!(!p.decodes_batches());
    let b = edited_as_bytes(&mut *p, Default::default());
    for attrs in resource_attrs(&b) {
        assert!(attrs.contains(&"env=prod".to_string()), "{attrs:?}");
        assert!(
            !attrs.iter().any(|a| a.starts_with("host.name=")),
            "{attrs:?}"
        );
    }
    for rp in &b.data().resource_profiles {
        assert_eq!(rp.schema_url, "https://opentelemetry.io/schemas/1.38.0");
    }
    // A statement that fails under `propagate` drops the batch all the same.
    let mut p = create(
        "transform",
        r#"
error_mode: propagate
profile_statements:
  - context: resource
    statements: ['set(attributes["up"], ToUpperCase(attributes["missing"]))']
"#,
    )
    .unwrap();
    let mut b = as_received(&synth::request(300, 20));
    assert_eq!(
        run(&mut *p, &mut b),
        (Verdict::Drop, vec![(STATEMENT_ERROR, 300)])
    );
    // A statement on profiles reads the messages.
    let q = create(
        "transform",
        r#"profile_statements: ['set(profile.attributes["a"], "b")']"#,
    )
    .unwrap();
    assert!(q.decodes_batches());
}
