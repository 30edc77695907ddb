use super::*;
use profcol_model::proto::{
    KeyValueAndUnit, Profile, ProfilesData, ProfilesDictionary, ResourceProfiles, ScopeProfiles,
};
use profcol_pipeline::config::Kind as CKind;

fn create(yaml: &str) -> Result<Arc<SignalToMetrics>, String> {
    let cfg = ComponentConfig::from_yaml(CKind::Connector, "signaltometrics", yaml).unwrap();
    let c: Config = cfg.decode().map_err(|e| e.to_string())?;
    SignalToMetrics::new(&c, &cfg)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

fn s(v: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(v.into())),
    }
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(s(v)),
        ..Default::default()
    }
}

/// Two resources; the first with two profiles (`profile.foo` = a, b), the
/// second with one profile without attributes.
fn batch() -> ProfileBatch {
    let dict = ProfilesDictionary {
        string_table: vec!["".into(), "profile.foo".into()],
        attribute_table: vec![
            KeyValueAndUnit::default(),
            KeyValueAndUnit {
                key_strindex: 1,
                value: Some(s("a")),
                unit_strindex: 0,
            },
            KeyValueAndUnit {
                key_strindex: 1,
                value: Some(s("b")),
                unit_strindex: 0,
            },
        ],
        ..Default::default()
    };
    let profile = |attrs: Vec<i32>| Profile {
        attribute_indices: attrs,
        ..Default::default()
    };
    let resource = |attrs: Vec<KeyValue>, profiles: Vec<Profile>| ResourceProfiles {
        resource: Some(Resource {
            attributes: attrs,
            ..Default::default()
        }),
        scope_profiles: vec![ScopeProfiles {
            profiles,
            ..Default::default()
        }],
        ..Default::default()
    };
    ProfileBatch::new(ProfilesData {
        resource_profiles: vec![
            resource(
                vec![kv("service.name", "api"), kv("resource.foo", "x")],
                vec![profile(vec![1]), profile(vec![2]), profile(vec![1])],
            ),
            resource(vec![kv("service.name", "db")], vec![profile(vec![])]),
        ],
        dictionary: Some(dict),
    })
}

/// `points`, in an order that does not depend on the conversion's.
fn sorted_points(req: &ExportMetricsServiceRequest, name: &str) -> Vec<(Vec<KeyValue>, String)> {
    let mut out = points(req, name);
    out.sort_by_key(|p| format!("{p:?}"));
    out
}

fn points(req: &ExportMetricsServiceRequest, name: &str) -> Vec<(Vec<KeyValue>, String)> {
    let mut out = Vec::new();
    for rm in &req.resource_metrics {
        let res = &rm.resource.as_ref().unwrap().attributes;
        assert_eq!(rm.scope_metrics[0].scope.as_ref().unwrap().name, SCOPE_NAME);
        for m in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
            if m.name != name {
                continue;
            }
            let mut res: Vec<KeyValue> = res
                .iter()
                .filter(|kv| kv.key != INSTANCE_ID_KEY)
                .cloned()
                .collect();
            match m.data.as_ref().unwrap() {
                metric::Data::Sum(sum) => {
                    assert_eq!(sum.aggregation_temporality, DELTA);
                    for p in &sum.data_points {
                        assert_eq!(p.start_time_unix_nano, 0);
                        assert!(p.time_unix_nano > 0);
                        let mut attrs = res.clone();
                        attrs.extend(p.attributes.clone());
                        out.push((attrs, format!("{:?}", p.value.unwrap())));
                    }
                }
                metric::Data::Histogram(h) => {
                    for p in &h.data_points {
                        let mut attrs = res.clone();
                        attrs.extend(p.attributes.clone());
                        out.push((
                            attrs,
                            format!("count={} sum={:?} {:?}", p.count, p.sum, p.bucket_counts),
                        ));
                    }
                }
                metric::Data::Gauge(g) => {
                    for p in &g.data_points {
                        let mut attrs = res.clone();
                        attrs.extend(p.attributes.clone());
                        out.push((attrs, format!("{:?}", p.value.unwrap())));
                    }
                }
                _ => unreachable!(),
            }
            res.clear();
        }
    }
    out
}

#[test]
fn the_collectors_profiles_sum_definitions() {
    // testdata/profiles/sum/config.yaml of the Collector v0.161.0.
    let c = create(
        r#"
profiles:
  - name: total.profiles.sum
    sum: {value: "1", monotonic: true}
  - name: total.profiles.resource.foo.sum
    include_resource_attributes: [{key: resource.foo}]
    sum: {value: "1", monotonic: true}
  - name: profiles.foo.sum
    attributes: [{key: profile.foo}]
    sum: {value: "1", monotonic: true}
  - name: with.default
    attributes: [{key: profile.foo, default_value: none}]
    sum: {value: "2.5"}
  - name: ignored.sum
    conditions: ['resource.attributes["404.attribute"] != nil']
    sum: {value: "2"}
  - name: either.condition
    conditions:
      - resource.attributes["404.attribute"] != nil
      - resource.attributes["resource.foo"] != nil
    sum: {value: "1"}
"#,
    )
    .unwrap();
    let req = c.convert(&batch()).unwrap();
    let api = [kv("service.name", "api"), kv("resource.foo", "x")];
    let db = [kv("service.name", "db")];
    let total = sorted_points(&req, "total.profiles.sum");
    assert_eq!(
        total,
        vec![
            (api.to_vec(), "AsInt(3)".to_string()),
            (db.to_vec(), "AsInt(1)".to_string())
        ]
    );
    // Only resource.foo kept: an include list, so the db resource, which
    // has none, counts with no resource attribute (as the Collector's
    // `FilterResourceAttributes`).
    assert_eq!(
        points(&req, "total.profiles.resource.foo.sum"),
        vec![
            (vec![kv("resource.foo", "x")], "AsInt(3)".to_string()),
            (vec![], "AsInt(1)".to_string())
        ]
    );
    let foo = points(&req, "profiles.foo.sum");
    assert_eq!(foo.len(), 2, "{foo:?}");
    assert!(foo.contains(&(
        [api.to_vec(), vec![kv("profile.foo", "a")]].concat(),
        "AsInt(2)".to_string()
    )));
    let dflt = points(&req, "with.default");
    assert!(dflt.contains(&(
        [db.to_vec(), vec![kv("profile.foo", "none")]].concat(),
        "AsDouble(2.5)".to_string()
    )));
    assert!(points(&req, "ignored.sum").is_empty());
    assert_eq!(
        points(&req, "either.condition"),
        vec![(api.to_vec(), "AsInt(3)".to_string())]
    );
    // Every resource carries the instance id.
    for rm in &req.resource_metrics {
        let attrs = &rm.resource.as_ref().unwrap().attributes;
        assert_eq!(attrs.last().unwrap().key, INSTANCE_ID_KEY);
    }
}

#[test]
fn histograms_count_into_their_buckets() {
    let c = create(
        r#"
profiles:
  - name: h
    include_resource_attributes: [{key: service.name}]
    histogram: {buckets: [1, 5], value: "3", count: "2"}
"#,
    )
    .unwrap();
    let req = c.convert(&batch()).unwrap();
    let got = sorted_points(&req, "h");
    assert_eq!(
        got,
        vec![
            (
                vec![kv("service.name", "api")],
                "count=6 sum=Some(18.0) [0, 6, 0]".to_string()
            ),
            (
                vec![kv("service.name", "db")],
                "count=2 sum=Some(6.0) [0, 2, 0]".to_string()
            ),
        ]
    );
}

#[test]
fn errors_name_their_key_paths() {
    let err = create("profiles: [{sum: {value: '1'}}]").err().unwrap();
    assert!(
        err.contains(
            "connectors::signaltometrics::profiles::0::name: metric name must be provided"
        ),
        "{err}"
    );
    let err = create("profiles: [{name: a, sum: {value: '1 +'}}]")
        .err()
        .unwrap();
    assert!(
        err.contains("connectors::signaltometrics::profiles::0::sum::value: failed to parse OTTL value expression"),
        "{err}"
    );
    let err = create("profiles: [{name: a}]").err().unwrap();
    assert!(
        err.contains("exactly one of the metrics must be defined"),
        "{err}"
    );
    let err = create("profiles: [{name: a, sum: {value: '1'}, attributes: [{key: k, optional: true, default_value: x}]}]").err().unwrap();
    assert!(
        err.contains("profiles::0::attributes::0: only one of default_value or optional"),
        "{err}"
    );
    let err = create("profiles: [{name: a, exponential_histogram: {value: '1', max_size: 1}}]")
        .err()
        .unwrap();
    assert!(
        err.contains("profiles::0::exponential_histogram::max_size: invalid config: max size 1 is out of range [2, 16384]"),
        "{err}"
    );
    let err = create("spans: [{name: a, sum: {value: '1'}}]")
        .err()
        .unwrap();
    assert!(
        err.contains("connectors::signaltometrics::spans: profcol carries profiles only"),
        "{err}"
    );
    let err = create("profiles: [{name: a, sum: {value: '1'}, conditions: ['nope(']}]")
        .err()
        .unwrap();
    assert!(
        err.contains("profiles::0::conditions::0: failed to parse OTTL condition"),
        "{err}"
    );
}

/// `keys_expression` is checked as the Collector's `validateAttributeConfigs`
/// checks it, and a result that is no list of strings is an evaluation
/// error (a missing key list, nil, is none).
#[test]
fn keys_expression_is_checked_and_evaluated() {
    for (attrs, want) in [
        (
            "[{key: a, keys_expression: 'Split(\"a\", \",\")'}]",
            "attributes::0: exactly one of key or keys_expression must be set for attributes",
        ),
        (
            "[{optional: true}]",
            "attributes::0: exactly one of key or keys_expression must be set for attributes",
        ),
        (
            "[{keys_expression: 'Split('}]",
            "attributes::0::keys_expression: failed to parse keys_expression for attributes",
        ),
    ] {
        let err = create(&format!(
            "profiles: [{{name: a, sum: {{value: '1'}}, attributes: {attrs}}}]"
        ))
        .err()
        .unwrap();
        assert!(err.contains(want), "{attrs}: {err}");
    }
    let err = create("profiles: [{name: a, context: sample, sum: {value: sample.value}, attributes: [{keys_expression: 'Split(\"a\", \",\")'}]}]").err().unwrap();
    assert!(
        err.contains("keys_expression is not supported with context: sample"),
        "{err}"
    );
    let yaml = |expr: &str| {
        format!("error_mode: ignore\nprofiles:\n  - name: m\n    attributes: [{{keys_expression: '{expr}', default_value: none}}]\n    sum: {{value: '1'}}\n")
    };
    // Nil: no key, one point per resource.
    let req = create(&yaml("resource.attributes[\"nope\"]"))
        .unwrap()
        .convert(&batch())
        .unwrap();
    assert_eq!(points(&req, "m").len(), 2);
    // A key the profile lacks takes the default.
    let req = create(&yaml("Split(\"profile.foo,other\", \",\")"))
        .unwrap()
        .convert(&batch())
        .unwrap();
    assert!(points(&req, "m")
        .iter()
        .all(|(a, _)| a.contains(&kv("other", "none"))));
    // Not a list of strings: an error, so no point under ignore.
    let req = create(&yaml("resource.attributes[\"service.name\"]"))
        .unwrap()
        .convert(&batch());
    assert!(req.is_none_or(|r| points(&r, "m").is_empty()));
}

#[test]
fn an_evaluation_error_follows_error_mode() {
    let yaml = |mode: &str| {
        format!("error_mode: {mode}\nprofiles:\n  - name: bad\n    sum: {{value: 'resource.attributes[\"service.name\"]'}}\n  - name: good\n    sum: {{value: '1'}}\n")
    };
    assert!(create(&yaml("propagate"))
        .unwrap()
        .convert(&batch())
        .is_none());
    let req = create(&yaml("ignore")).unwrap().convert(&batch()).unwrap();
    assert!(points(&req, "bad").is_empty());
    assert_eq!(points(&req, "good").len(), 2);
}

/// One resource, one profile of three samples: two on `work` (called
/// from `main`), one on `main`; the first on thread `t1`.
fn cpu_batch() -> ProfileBatch {
    use profcol_model::proto::{Function, Line, Location, Sample, Stack};
    let dict = ProfilesDictionary {
        string_table: ["", "main", "work", "thread.name", "t1"]
            .map(String::from)
            .to_vec(),
        function_table: vec![
            Function::default(),
            Function {
                name_strindex: 1,
                ..Default::default()
            },
            Function {
                name_strindex: 2,
                ..Default::default()
            },
        ],
        location_table: vec![
            Location::default(),
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
            Stack::default(),
            Stack {
                location_indices: vec![2, 1],
            },
            Stack {
                location_indices: vec![1],
            },
        ],
        attribute_table: vec![
            KeyValueAndUnit::default(),
            KeyValueAndUnit {
                key_strindex: 3,
                value: Some(s("t1")),
                unit_strindex: 0,
            },
        ],
        ..Default::default()
    };
    let sample = |stack_index, values: Vec<i64>, attribute_indices| Sample {
        stack_index,
        values,
        attribute_indices,
        ..Default::default()
    };
    ProfileBatch::new(ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "api")],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    samples: vec![
                        sample(1, vec![10, 5], vec![1]),
                        sample(2, vec![7], vec![]),
                        sample(1, vec![3], vec![]),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dict),
    })
}

#[test]
fn a_sample_context_sums_cpu_by_service_and_function() {
    let c = create(
        r#"
profiles:
  - name: cpu.time
    unit: ns
    context: sample
    include_resource_attributes: [{key: service.name}]
    attributes: [{key: function.name}, {key: thread.name, default_value: none}]
    sum: {value: sample.value, monotonic: true}
  - name: samples
    context: sample
    attributes: [{key: function.name}]
    sum: {value: "1"}
"#,
    )
    .unwrap();
    let req = c.convert(&cpu_batch()).unwrap();
    let api = kv("service.name", "api");
    let cpu = sorted_points(&req, "cpu.time");
    let point = |f: &str, t: &str, v: &str| {
        (
            vec![api.clone(), kv("function.name", f), kv("thread.name", t)],
            v.to_string(),
        )
    };
    assert_eq!(
        cpu,
        vec![
            point("main", "none", "AsInt(7)"),
            point("work", "none", "AsInt(3)"),
            point("work", "t1", "AsInt(15)"),
        ]
    );
    let n = sorted_points(&req, "samples");
    assert_eq!(
        n,
        vec![
            (
                vec![api.clone(), kv("function.name", "main")],
                "AsInt(1)".to_string()
            ),
            (
                vec![api.clone(), kv("function.name", "work")],
                "AsInt(2)".to_string()
            ),
        ]
    );
    let err = create("profiles: [{name: a, context: sample, gauge: {value: '1'}}]")
        .err()
        .unwrap();
    assert!(
        err.contains("profiles::0::context: context: sample is for sum metrics only"),
        "{err}"
    );
    let err = create("profiles: [{name: a, context: sample, sum: {value: 'profile.period'}}]")
        .err()
        .unwrap();
    assert!(
        err.contains("profiles::0::sum::value: with context: sample"),
        "{err}"
    );
}

fn overflow() -> KeyValue {
    KeyValue {
        key: OVERFLOW_KEY.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::BoolValue(true)),
        }),
        ..Default::default()
    }
}

/// Past `cardinality_limit` attribute sets (the overflow point one of
/// them), the rest goes to `otel.metric.overflow: true`, counted; the sum
/// over all points stays the sum of the samples.
#[test]
fn a_cardinality_limit_overflows_as_the_sdks_do_and_is_counted() {
    let c = create(
        r#"
profiles:
  - name: cpu.time
    context: sample
    include_resource_attributes: [{key: service.name}]
    attributes: [{key: function.name}, {key: thread.name, default_value: none}]
    sum: {value: sample.value}
    cardinality_limit: 2
  - name: profiles
    attributes: [{key: profile.foo, default_value: none}]
    sum: {value: "1"}
    cardinality_limit: 2
"#,
    )
    .unwrap();
    let telemetry = Arc::new(Telemetry::new());
    c.start("signaltometrics/cpu", &telemetry);
    let req = c.convert(&cpu_batch()).unwrap();
    let api = kv("service.name", "api");
    let cpu = sorted_points(&req, "cpu.time");
    // The first set seen (work, t1) keeps its point; the two others
    // overflow.
    assert_eq!(
        cpu,
        vec![
            (
                vec![
                    api.clone(),
                    kv("function.name", "work"),
                    kv("thread.name", "t1")
                ],
                "AsInt(15)".to_string()
            ),
            (vec![api.clone(), overflow()], "AsInt(10)".to_string()),
        ]
    );
    // Per profile (the Collector's context): a, b, and the db profile's
    // `none`; the limit spans resources, each resource its own overflow.
    let p = sorted_points(&c.convert(&batch()).unwrap(), "profiles");
    let api_res = vec![kv("service.name", "api"), kv("resource.foo", "x")];
    let with = |extra: KeyValue| {
        let mut v = api_res.clone();
        v.push(extra);
        v
    };
    assert_eq!(
        p,
        vec![
            (with(overflow()), "AsInt(1)".to_string()),
            (with(kv("profile.foo", "a")), "AsInt(2)".to_string()),
            (
                vec![kv("service.name", "db"), overflow()],
                "AsInt(1)".to_string()
            ),
        ]
    );
    let text = telemetry.encode_text();
    for want in [
        r#"otelcol_connector_signaltometrics_overflow_attribute_sets_total{connector="signaltometrics/cpu",metric="cpu.time",reason="cardinality_limit"} 2"#,
        r#"otelcol_connector_signaltometrics_overflow_attribute_sets_total{connector="signaltometrics/cpu",metric="profiles",reason="cardinality_limit"} 2"#,
    ] {
        assert!(text.contains(want), "{want}\nin\n{text}");
    }
}

/// `top_functions: 1`: the hottest function per resource keeps its
/// points; the others are summed into `function.name: (other)`.
#[test]
fn top_functions_keeps_the_hottest_and_sums_the_rest() {
    let c = create(
        r#"
profiles:
  - name: cpu.time
    context: sample
    include_resource_attributes: [{key: service.name}]
    attributes: [{key: function.name}, {key: thread.name, default_value: none}]
    sum: {value: sample.value}
    top_functions: 1
"#,
    )
    .unwrap();
    let telemetry = Arc::new(Telemetry::new());
    c.start("signaltometrics", &telemetry);
    let req = c.convert(&cpu_batch()).unwrap();
    let api = kv("service.name", "api");
    let cpu = sorted_points(&req, "cpu.time");
    // work: 15 + 3 = 18, main: 7.
    assert_eq!(
        cpu,
        vec![
            (
                vec![
                    api.clone(),
                    kv("function.name", "(other)"),
                    kv("thread.name", "none")
                ],
                "AsInt(7)".to_string()
            ),
            (
                vec![
                    api.clone(),
                    kv("function.name", "work"),
                    kv("thread.name", "none")
                ],
                "AsInt(3)".to_string()
            ),
            (
                vec![
                    api.clone(),
                    kv("function.name", "work"),
                    kv("thread.name", "t1")
                ],
                "AsInt(15)".to_string()
            ),
        ]
    );
    assert!(telemetry.encode_text().contains(
        r#"otelcol_connector_signaltometrics_overflow_attribute_sets_total{connector="signaltometrics",metric="cpu.time",reason="top_functions"} 1"#
    ));
    for (yaml, want) in [
        (
            "profiles: [{name: a, sum: {value: '1'}, top_functions: 3}]",
            "profiles::0::top_functions: needs context: sample and a function.name attribute",
        ),
        (
            "profiles: [{name: a, sum: {value: '1'}, cardinality_limit: 0}]",
            "profiles::0::cardinality_limit: must be at least 1",
        ),
    ] {
        let err = create(yaml).err().unwrap();
        assert!(err.contains(want), "{want}\nin\n{err}");
    }
}

/// Sample attributes are matched by their key's string index: a key the
/// string table holds twice (producers do not always deduplicate) is read
/// at both.
#[test]
fn a_key_written_twice_in_the_string_table_is_read_at_both() {
    let mut b = cpu_batch();
    {
        let data = b.data_mut();
        let dict = data.dictionary.as_mut().unwrap();
        dict.string_table.push("thread.name".into());
        dict.attribute_table.push(KeyValueAndUnit {
            key_strindex: dict.string_table.len() as i32 - 1,
            value: Some(s("t2")),
            unit_strindex: 0,
        });
        let second = dict.attribute_table.len() as i32 - 1;
        data.resource_profiles[0].scope_profiles[0].profiles[0].samples[2].attribute_indices =
            vec![second];
    }
    let c = create(
        "profiles: [{name: cpu, context: sample, attributes: [{key: function.name}, {key: thread.name, default_value: none}], sum: {value: sample.value}}]",
    )
    .unwrap();
    let cpu = sorted_points(&c.convert(&b).unwrap(), "cpu");
    let point = |f: &str, t: &str, v: &str| {
        (
            vec![
                kv("service.name", "api"),
                kv("function.name", f),
                kv("thread.name", t),
            ],
            v.to_string(),
        )
    };
    assert_eq!(
        cpu,
        vec![
            point("main", "none", "AsInt(7)"),
            point("work", "t1", "AsInt(15)"),
            point("work", "t2", "AsInt(3)"),
        ]
    );
}

/// A definition of one attribute reads it through a table by stack or
/// attribute index, kept per profile: a sample without the attribute
/// takes its own profile's value, not one an earlier profile gave the same
/// (empty) index.
#[test]
fn one_attribute_definitions_read_each_profile_s_own_fallback() {
    let mut b = cpu_batch();
    {
        let data = b.data_mut();
        let dict = data.dictionary.as_mut().unwrap();
        for t in ["pa", "pb"] {
            dict.attribute_table.push(KeyValueAndUnit {
                key_strindex: 3,
                value: Some(s(t)),
                unit_strindex: 0,
            });
        }
        let profiles = &mut data.resource_profiles[0].scope_profiles[0].profiles;
        let mut second = profiles[0].clone();
        profiles[0].attribute_indices = vec![2];
        second.attribute_indices = vec![3];
        second.samples.iter_mut().for_each(|s| s.values = vec![100]);
        profiles.push(second);
    }
    let c = create(
        "profiles: [{name: by_thread, context: sample, attributes: [{key: thread.name}], sum: {value: sample.value}}, \
         {name: by_function, context: sample, attributes: [{key: function.name}], sum: {value: sample.value}}]",
    )
    .unwrap();
    let out = c.convert(&b).unwrap();
    let by_thread = sorted_points(&out, "by_thread");
    let point =
        |k: &str, v: &str, n: &str| (vec![kv("service.name", "api"), kv(k, v)], n.to_string());
    assert_eq!(
        by_thread,
        vec![
            point("thread.name", "pa", "AsInt(10)"),
            point("thread.name", "pb", "AsInt(200)"),
            point("thread.name", "t1", "AsInt(115)"),
        ]
    );
    let by_function = sorted_points(&out, "by_function");
    assert_eq!(
        by_function,
        vec![
            point("function.name", "main", "AsInt(107)"),
            point("function.name", "work", "AsInt(218)"),
        ]
    );
}
