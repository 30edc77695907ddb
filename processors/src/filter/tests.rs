use profcol_model::testing::as_received;
use profcol_model::validate;
use profcol_pipeline::component::Verdict;

use super::*;
use crate::transform::tests::{batch, create, profile_attrs, run};

fn periods(b: &ProfileBatch) -> Vec<i64> {
    profcol_model::profiles(&b.data().resource_profiles)
        .map(|p| p.period)
        .collect()
}

/// The Collector's README example, and the older keys it migrates from.
#[test]
fn drops_what_a_condition_matches() {
    for (yaml, left, dropped) in [
        ("error_mode: propagate\nprofile_conditions: [profile.duration_unix_nano > 3000]", vec![1, 2], 4),
        ("profile_conditions: ['resource.attributes[\"host\"] == \"h1\"']", vec![11, 12], 4),
        ("profile_conditions: ['scope.name == \"scope-h2\"', 'profile.period == 1']", vec![2], 6),
        ("profiles: {profile: ['attributes[\"own\"] == \"x-y-z\"']}", vec![2, 12], 4),
        ("profiles: {resource: ['attributes[\"host\"] == \"nomatch\"']}", vec![1, 2, 11, 12], 0),
        (
            "profile_conditions: [{context: profile, conditions: ['IsMatch(attributes[\"own\"], \"^x\")']}]",
            vec![2, 12],
            4,
        ),
    ] {
        let mut p = create("filter", yaml).unwrap();
        let mut b = batch();
        let (v, drops) = run(&mut *p, &mut b);
        assert_eq!(v, Verdict::Keep, "{yaml}");
        assert_eq!(periods(&b), left, "{yaml}");
        let want: Vec<(&str, u64)> = if dropped > 0 { vec![(FILTERED, dropped)] } else { vec![] };
        assert_eq!(drops, want, "{yaml}");
        validate(b.data()).unwrap();
    }
}

#[test]
fn everything_dropped_drops_the_batch() {
    let mut p = create(
        "filter",
        "profiles: {resource: ['attributes[\"service.name\"] == \"svc\"']}",
    )
    .unwrap();
    let mut b = batch();
    assert_eq!(run(&mut *p, &mut b), (Verdict::Drop, vec![(FILTERED, 8)]));
}

#[test]
fn a_failing_condition_follows_error_mode() {
    let cond = "profiles: {profile: ['ToUpperCase(attributes[\"own\"]) == \"X-Y-Z\"']}";
    let mut p = create("filter", cond).unwrap();
    let mut b = batch();
    // Where `own` is missing the condition fails: not matched, kept.
    assert_eq!(run(&mut *p, &mut b).1, vec![(FILTERED, 4)]);
    assert_eq!(periods(&b), vec![2, 12]);
    assert_eq!(profile_attrs(&b)[0], ["shared=abc"]);
    let mut p = create("filter", &format!("error_mode: propagate\n{cond}")).unwrap();
    let mut b = batch();
    assert_eq!(
        run(&mut *p, &mut b),
        (Verdict::Drop, vec![(CONDITION_ERROR, 8)])
    );
}

#[test]
fn config_errors() {
    for (yaml, want) in [
        (
            "profile_conditions: ['profile.period == 1']\nprofiles: {profile: ['period == 1']}",
            "at the same time",
        ),
        (
            "profile_conditions: ['period == 1']",
            "processors::filter::profile_conditions::0: ",
        ),
        (
            "profiles: {profile: ['set(attributes[\"a\"], 1)']}",
            "processors::filter::profiles::profile::0",
        ),
    ] {
        let e = create("filter", yaml)
            .err()
            .unwrap_or_else(|| panic!("{yaml}: no error"));
        assert!(e.contains(want), "{yaml}: {e}");
    }
}

#[test]
fn resource_conditions_filter_a_batch_held_as_received_without_decoding_it() {
    let mut p = create(
        "filter",
        "profiles: {resource: ['attributes[\"service.instance.id\"] == \"instance-0\"']}",
    )
    .unwrap();
    assert!(!p.decodes_batches());
    let data = profcol_model::synth::Config {
        samples: 2_000,
        resources: 2,
        ..Default::default()
    }
    .build();
    let gone = profcol_model::profile_sample_count(
        &data.resource_profiles[0].scope_profiles[0].profiles[0],
    );
    let mut received = as_received(&data);
    let mut decoded = ProfileBatch::decode(received.plain_bytes().unwrap().clone()).unwrap();
    assert_eq!(
        run(&mut *p, &mut received),
        (Verdict::Keep, vec![(FILTERED, gone)])
    );
    assert_eq!(
        run(&mut *p, &mut decoded),
        (Verdict::Keep, vec![(FILTERED, gone)])
    );
    assert!(!received.is_decoded());
    assert_eq!(
        (received.sample_count(), received.profile_count()),
        (2_000 - gone, 1)
    );
    assert!(!received.is_decoded());
    assert_eq!(received.data(), decoded.data());
    assert_eq!(received.data().resource_profiles.len(), 1);
    // Every resource matched: the batch goes.
    let mut p = create(
        "filter",
        "profiles: {resource: ['attributes[\"service.name\"] == \"synth-app\"']}",
    )
    .unwrap();
    let mut all = as_received(&data);
    assert_eq!(
        run(&mut *p, &mut all),
        (Verdict::Drop, vec![(FILTERED, 2_000)])
    );
}
