//! Each action on a plain map, as `attraction.AttrProc.Process` does it
//! (the cases of its `attraction_test.go`, and what the Collector v0.161.0
//! was seen to do).

use profcol_model::proto::{any_value::Value as A, AnyValue, KeyValue};
use profcol_model::BatchMeta;
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::*;

fn actions(yaml: &str) -> Result<Vec<Action>, String> {
    #[derive(serde::Deserialize)]
    struct C {
        actions: Vec<ActionConfig>,
    }
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "attributes", yaml)
        .map_err(|e| e.to_string())?;
    let (_, a) = cfg
        .decode_checked(|c: &C| compile(&c.actions, &cfg, "actions"))
        .map_err(|e| e.to_string())?;
    Ok(a)
}

fn kv(k: &str, v: A) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

fn s(v: &str) -> A {
    A::StringValue(v.into())
}

/// `k=v` in map order; strings bare, other values in Rust's debug form.
fn show(m: &[KeyValue]) -> Vec<String> {
    m.iter()
        .map(
            |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(A::StringValue(s)) => format!("{}={s}", kv.key),
                Some(A::IntValue(i)) => format!("{}={i}i", kv.key),
                Some(A::DoubleValue(d)) => format!("{}={d}f", kv.key),
                Some(A::BoolValue(b)) => format!("{}={b}", kv.key),
                other => format!("{}={other:?}", kv.key),
            },
        )
        .collect()
}

fn run(yaml: &str, mut m: Vec<KeyValue>, meta: &BatchMeta) -> Vec<String> {
    let a = actions(yaml).unwrap();
    apply_all(&a, &mut m, meta);
    show(&m)
}

fn base() -> Vec<KeyValue> {
    vec![
        kv("a", s("x")),
        kv("n", A::IntValue(7)),
        kv("url", s("http://example.com/path?q=1")),
    ]
}

#[test]
fn insert_only_where_the_key_is_absent() {
    let m = BatchMeta::default();
    assert_eq!(
        run(
            "actions: [{key: a, value: new, action: insert}, {key: b, value: 123, action: insert}]",
            base(),
            &m
        ),
        ["a=x", "n=7i", "url=http://example.com/path?q=1", "b=123i"]
    );
    // From another attribute: nothing when that one is absent.
    assert_eq!(
        run(
            "actions: [{key: c, from_attribute: a, action: insert}, {key: d, from_attribute: nope, action: insert}]",
            base(),
            &m
        ),
        ["a=x", "n=7i", "url=http://example.com/path?q=1", "c=x"]
    );
}

#[test]
fn update_only_where_the_key_is_present() {
    let m = BatchMeta::default();
    assert_eq!(
        run(
            "actions: [{key: a, value: true, action: update}, {key: b, value: 1.5, action: update}]",
            base(),
            &m
        ),
        ["a=true", "n=7i", "url=http://example.com/path?q=1"]
    );
}

#[test]
fn upsert_overwrites_in_place_or_appends() {
    let m = BatchMeta::default();
    assert_eq!(
        run(
            "actions: [{key: a, from_attribute: n, action: upsert}, {key: z, value: zz, action: upsert}]",
            base(),
            &m
        ),
        ["a=7i", "n=7i", "url=http://example.com/path?q=1", "z=zz"]
    );
}

#[test]
fn delete_by_key_swaps_the_last_entry_in_then_by_pattern() {
    let m = BatchMeta::default();
    // `pcommon.Map.Remove` moves the last entry into the hole.
    assert_eq!(
        run("actions: [{key: a, action: delete}]", base(), &m),
        ["url=http://example.com/path?q=1", "n=7i"]
    );
    assert_eq!(
        run(
            "actions: [{key: nope, pattern: '^[nu]', action: delete}]",
            base(),
            &m
        ),
        ["a=x"]
    );
}

#[test]
fn hash_is_sha256_hex_and_twice_when_key_and_pattern_both_match() {
    let m = BatchMeta::default();
    let once = run("actions: [{key: n, action: hash}]", base(), &m);
    // Observed on the Collector v0.161.0: 7 as 8 little-endian bytes.
    assert_eq!(
        once[1],
        format!("n={}", profcol_ottl::funcs::sha256_hex(&7i64.to_le_bytes()))
    );
    let twice = run(
        "actions: [{key: a, pattern: '^a$', action: hash}]",
        base(),
        &m,
    );
    let h1 = profcol_ottl::funcs::sha256_hex(b"x");
    assert_eq!(
        twice[0],
        format!("a={}", profcol_ottl::funcs::sha256_hex(h1.as_bytes()))
    );
}

#[test]
fn extract_puts_named_groups_and_leaves_the_source() {
    let m = BatchMeta::default();
    let mut attrs = base();
    attrs.push(kv("proto", s("old")));
    assert_eq!(
        run(
            r#"actions: [{key: url, pattern: '^(?P<proto>[a-z]+)://(?P<host>[^/]+)/(?P<path>[^?]*)', action: extract}]"#,
            attrs,
            &m
        ),
        [
            "a=x",
            "n=7i",
            "url=http://example.com/path?q=1",
            "proto=http",
            "host=example.com",
            "path=path"
        ]
    );
    // Not a string, or no match: nothing.
    assert_eq!(
        run(
            "actions: [{key: n, pattern: '(?P<d>[0-9])', action: extract}, {key: a, pattern: '(?P<d>[0-9])', action: extract}]",
            base(),
            &m
        ),
        ["a=x", "n=7i", "url=http://example.com/path?q=1"]
    );
}

#[test]
fn convert_changes_the_type_or_leaves_the_value() {
    let m = BatchMeta::default();
    let attrs = vec![
        kv("i", s("42")),
        kv("bad", s("4x")),
        kv("d", A::DoubleValue(2.75)),
        kv("b", A::BoolValue(true)),
    ];
    assert_eq!(
        run(
            "actions: [{key: i, action: convert, converted_type: int}, {key: bad, action: convert, converted_type: int}, {key: d, action: convert, converted_type: int}, {key: b, action: convert, converted_type: double}]",
            attrs.clone(),
            &m
        ),
        ["i=42i", "bad=4x", "d=2i", "b=1f"]
    );
    assert_eq!(
        run(
            "actions: [{key: d, action: convert, converted_type: string}]",
            attrs,
            &m
        )[2],
        "d=2.75"
    );
}

#[test]
fn from_context_reads_metadata_and_the_client_address_else_the_default() {
    let meta = BatchMeta {
        client_addr: Some("10.1.2.3:5555".parse().unwrap()),
        metadata: vec![
            ("tenant".into(), "t1".into()),
            ("tenant".into(), "t2".into()),
        ],
        ..Default::default()
    };
    assert_eq!(
        run(
            "actions: [{key: t, from_context: metadata.tenant, action: insert}, {key: ip, from_context: client.address, action: insert}, {key: r, from_context: metadata.region, default_value: us-east-1, action: upsert}, {key: u, from_context: auth.subject, action: insert}]",
            vec![],
            &meta
        ),
        ["t=t1;t2", "ip=10.1.2.3", "r=us-east-1"]
    );
}

#[test]
fn config_errors_name_the_action_and_field() {
    for (yaml, want) in [
        (
            "actions: []",
            "processors::attributes::actions: missing required field \"actions\"",
        ),
        ("actions: [{key: a, action: bogus}]", "actions::0::action"),
        (
            "actions: [{key: a, value: 1, from_attribute: b, action: insert}]",
            "actions::0::value",
        ),
        ("actions: [{action: delete}]", "actions::0::key"),
        (
            "actions: [{key: a, action: hash, value: 1}]",
            "actions::0::value",
        ),
        (
            "actions: [{key: a, action: delete, from_attribute: b}]",
            "actions::0::value",
        ),
        (
            "actions: [{key: a, pattern: '(', action: delete}]",
            "actions::0::pattern: error creating AttrProc. Field \"pattern\" has invalid pattern: unclosed group",
        ),
        (
            "actions: [{key: a, pattern: '(?P<x>a)(b)', action: extract}]",
            "actions::0::pattern",
        ),
        (
            "actions: [{key: a, action: convert, converted_type: bool}]",
            "actions::0::converted_type",
        ),
        (
            "actions: [{key: a, action: insert, value: 1, pattern: x}]",
            "actions::0::pattern",
        ),
    ] {
        let e = actions(yaml)
            .err()
            .unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains(want), "{yaml}: {e}");
    }
    // The Collector v0.161.0 takes (and ignores) `from_context` on these.
    actions("actions: [{key: a, action: hash, from_context: metadata.x}, {pattern: b, action: delete, from_context: metadata.x}]").unwrap();
}
