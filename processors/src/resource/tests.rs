use profcol_pipeline::component::Verdict;

use crate::transform::tests::{batch, create, edited_as_bytes, resource_attrs, run};

#[test]
fn actions_as_the_collector() {
    let mut p = create(
        "resource",
        r#"
attributes:
  - {key: n, value: 42, action: upsert}
  - {key: n2, from_attribute: n, action: insert}
  - {key: n, action: hash}
  - {key: host, action: HASH}
  - {key: service.name, pattern: "^(?P<svc>[a-z]+)$", action: extract}
  - {key: n2, converted_type: string, action: convert}
  - {key: missing, from_attribute: nope, default_value: dflt, action: insert}
  - {pattern: "^service", action: delete}
"#,
    )
    .unwrap();
    let mut b = batch();
    assert_eq!(run(&mut *p, &mut b).0, Verdict::Keep);
    assert_eq!(
        resource_attrs(&b)[0],
        [
            // Observed on the Collector v0.161.0: sha256 of "h1", and of 42 as 8 little-endian bytes.
            "host=33112ee14ee469c3eb52fe90322ec81dd404a0093d565a6d71ce77cbc8124e3b",
            "n=ed049108bc18f2c64369e8d0ea42850bdd1a7d1dd340cfde716315579702a76c",
            "n2=42",
            "svc=svc",
            "missing=dflt",
        ]
    );
}

#[test]
fn config_errors_at_their_key() {
    for (yaml, want) in [
        (
            "attributes: []",
            "processors::resource::attributes: missing required field",
        ),
        (
            "attributes: [{key: a, action: bogus}]",
            "attributes::0::action",
        ),
        (
            "attributes: [{key: a, action: insert}]",
            "attributes::0::value",
        ),
        (
            "attributes: [{key: a, pattern: '(x)', action: extract}]",
            "attributes::0::pattern",
        ),
    ] {
        let e = create("resource", yaml)
            .err()
            .unwrap_or_else(|| panic!("{yaml}"));
        assert!(e.contains(want), "{yaml}: {e}");
    }
}

#[test]
fn a_batch_held_as_received_is_edited_without_decoding_its_samples() {
    let mut p = create(
        "resource",
        "attributes: [{key: env, value: prod, action: upsert}, {key: service.name, action: delete}]",
    )
    .unwrap();
    for attrs in resource_attrs(&edited_as_bytes(&mut *p, Default::default())) {
        assert!(attrs.contains(&"env=prod".to_string()), "{attrs:?}");
        assert!(
            !attrs.iter().any(|a| a.starts_with("service.name=")),
            "{attrs:?}"
        );
    }
}
