use profcol_model::validate;
use profcol_pipeline::component::Verdict;

use crate::transform::tests::{batch, create, profile_attrs, run};

/// The batch's profiles, in order: h1's two (`shared`+`own`, `shared`),
/// then h2's two; all four point at the one `shared=abc` entry.
#[test]
fn actions_run_on_profile_attributes_through_the_dictionary() {
    let mut p = create(
        "attributes",
        r#"
include:
  match_type: strict
  resources: [{key: host, value: h1}]
actions:
  - {key: shared, value: changed, action: update}
  - {key: own, action: delete}
  - {key: added, value: 1, action: insert}
"#,
    )
    .unwrap();
    let mut b = batch();
    assert_eq!(run(&mut *p, &mut b), (Verdict::Keep, vec![]));
    validate(b.data()).unwrap();
    assert_eq!(
        profile_attrs(&b),
        [
            vec!["shared=changed", "added=1"],
            vec!["shared=changed", "added=1"],
            // h2's profiles still share the old entry, untouched.
            vec!["shared=abc", "own=x-y-z"],
            vec!["shared=abc"],
        ]
    );
    let ps: Vec<_> = profcol_model::profiles(&b.data().resource_profiles).collect();
    // One new entry per new value, shared by both profiles that got it.
    assert_eq!(ps[0].attribute_indices, ps[1].attribute_indices);
    assert_eq!(ps[2].attribute_indices, [1, 2]);
    assert_eq!(ps[3].attribute_indices, [1]);
    assert_eq!(b.dictionary().attribute_table.len(), 5);
}

#[test]
fn an_untouched_attribute_keeps_its_entry_and_unit() {
    let mut p = create(
        "attributes",
        "actions: [{key: shared, value: other, action: upsert}]",
    )
    .unwrap();
    let mut b = batch();
    // `own` carries a unit ("nanoseconds").
    b.data_mut().dictionary.as_mut().unwrap().attribute_table[2].unit_strindex = 4;
    run(&mut *p, &mut b);
    validate(b.data()).unwrap();
    let ps: Vec<_> = profcol_model::profiles(&b.data().resource_profiles).collect();
    assert_eq!(ps[0].attribute_indices[1], 2, "own keeps its entry");
    assert_eq!(b.dictionary().attribute_table[2].unit_strindex, 4);
    assert_eq!(profile_attrs(&b)[0], ["shared=other", "own=x-y-z"]);
    // Actions that change nothing leave every index as it was.
    let mut p = create("attributes", "actions: [{key: nope, action: delete}]").unwrap();
    let mut b = batch();
    run(&mut *p, &mut b);
    let ps: Vec<_> = profcol_model::profiles(&b.data().resource_profiles).collect();
    assert_eq!(ps[0].attribute_indices, [1, 2]);
    assert_eq!(b.dictionary().attribute_table.len(), 3);
}

/// Tags the profiles the config selects, by index in the batch.
fn selected(props: &str) -> Vec<usize> {
    let mut p = create(
        "attributes",
        &format!("{props}\nactions: [{{key: hit, value: y, action: insert}}]"),
    )
    .unwrap_or_else(|e| panic!("{props}: {e}"));
    let mut b = batch();
    run(&mut *p, &mut b);
    profile_attrs(&b)
        .iter()
        .enumerate()
        .filter(|(_, a)| a.iter().any(|kv| kv == "hit=y"))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn include_and_exclude_choose_profiles() {
    // No include/exclude: every profile.
    assert_eq!(selected(""), [0, 1, 2, 3]);
    // Services: the resource's service.name.
    assert_eq!(
        selected("include: {match_type: strict, services: [svc]}"),
        [0, 1, 2, 3]
    );
    assert_eq!(
        selected("include: {match_type: strict, services: [sv]}"),
        Vec::<usize>::new()
    );
    // regexp finds a match anywhere, as Go's MatchString.
    assert_eq!(
        selected("include: {match_type: regexp, services: [v]}"),
        [0, 1, 2, 3]
    );
    // A profile attribute present, or with a value; exclude after include.
    assert_eq!(
        selected("exclude: {match_type: strict, attributes: [{key: own}]}"),
        [1, 3]
    );
    assert_eq!(
        selected("include: {match_type: regexp, attributes: [{key: own, value: '^x-.-z$'}]}"),
        [0, 2]
    );
    assert_eq!(
        selected(
            "include: {match_type: regexp, libraries: [{name: 'scope-h[12]', version: '1'}]}\nexclude: {match_type: strict, resources: [{key: host, value: h2}], attributes: [{key: own}]}"
        ),
        [0, 1, 3]
    );
    // A version given must match; "" matches only an empty one.
    assert_eq!(
        selected("include: {match_type: strict, libraries: [{name: scope-h1, version: ''}]}"),
        Vec::<usize>::new()
    );
    assert_eq!(
        selected("include: {match_type: strict, libraries: [{name: scope-h1}]}"),
        [0, 1]
    );
    // Every attribute listed must match; strict compares types too.
    assert_eq!(
        selected("include: {match_type: strict, attributes: [{key: shared, value: abc}, {key: own, value: x-y-z}]}"),
        [0, 2]
    );
    assert_eq!(
        selected("include: {match_type: strict, resources: [{key: host, value: h1}, {key: service.name, value: 1}]}"),
        Vec::<usize>::new()
    );
}

#[test]
fn config_errors_at_their_key() {
    for (yaml, want) in [
        (
            "include: {match_type: regexp, span_names: [login]}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include::span_names: span_names is not valid for profiles",
        ),
        (
            "exclude: {match_type: strict, log_severity_number: {min: 9}, services: [a]}\nactions: [{key: a, action: delete}]",
            "processors::attributes::exclude::log_severity_number: log_severity_number is not valid",
        ),
        (
            "include: {services: [a]}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include::match_type: unrecognized match_type: ''",
        ),
        (
            "include: {match_type: exact, attributes: [{key: a}]}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include::match_type: unrecognized match_type: 'exact'",
        ),
        (
            "include: {match_type: strict}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include: at least one of",
        ),
        (
            "include: {match_type: regexp, attributes: [{key: a, value: 1}]}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include::attributes::0::value: match_type=regexp for \"a\" only supports Str, but found Int",
        ),
        (
            "include: {match_type: regexp, resources: [{key: ''}]}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include::resources::0::key: can't have empty key",
        ),
        (
            "include: {match_type: regexp, services: ['(']}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include::services: invalid regexp: unclosed group",
        ),
        (
            "include: {match_type: strict, services: [a], bogus: 1}\nactions: [{key: a, action: delete}]",
            "processors::attributes::include: unknown field \"bogus\"",
        ),
        ("actions: [{key: a}]", "processors::attributes::actions::0::action"),
        ("include: {match_type: strict, services: [a]}", "processors::attributes::actions: missing required field"),
    ] {
        let e = create("attributes", yaml)
            .err()
            .unwrap_or_else(|| panic!("{yaml} loaded"));
        assert!(e.contains(want), "{yaml}\nwant {want}\ngot {e}");
    }
    // A bad expression is told on one line, not drawn.
    let e = create(
        "attributes",
        "include: {match_type: regexp, services: ['(']}\nactions: [{key: a, action: delete}]",
    )
    .err()
    .unwrap();
    assert_eq!(e.lines().count(), 1, "{e}");
    // The Collector's cache settings load.
    create(
        "attributes",
        "include: {match_type: regexp, regexp: {cacheenabled: true, cachemaxnumentries: 10}, services: [a]}\nactions: [{key: a, action: delete}]",
    )
    .unwrap();
}
