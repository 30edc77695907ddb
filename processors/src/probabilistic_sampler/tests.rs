use profcol_model::validate;
use profcol_pipeline::component::{Processor, Verdict};
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::*;
use crate::sampling::tests::{drops, frames, linked_batch, run};
use crate::sampling::{MISSING_RANDOMNESS, SAMPLED_OUT};

fn create(yaml: &str) -> Result<Box<dyn Processor>, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Processor, "probabilistic_sampler", yaml)
        .map_err(|e| e.to_string())?;
    factory().create(&cfg).map_err(|e| e.to_string())
}

/// The Collector's own README example (hash_seed: 22, 15 %) and the modes
/// it names decide like `sampling` in `trace` mode: the traces a Collector
/// in hash_seed mode keeps.
#[test]
fn hash_seed_mode_keeps_the_traces_the_collector_keeps() {
    // 40 % = 6553 buckets: T2 (141) and T3 (5445) in, T1 (6693) out.
    for yaml in [
        "sampling_percentage: 40",
        "sampling_percentage: 40\nmode: hash_seed",
        "sampling_percentage: 40\nmode: \"\"\nattribute_source: traceID\nsampling_precision: 14",
    ] {
        let mut batch = linked_batch();
        let (v, dropped) = run(&mut *create(yaml).unwrap(), &mut batch);
        assert_eq!(v, Verdict::Keep, "{yaml}");
        assert_eq!(frames(batch.data()), vec![vec!["t2", "t3"]], "{yaml}");
        // No link (or an all-zero trace id): no randomness; fail_closed.
        assert_eq!(
            dropped,
            drops(&[(SAMPLED_OUT, 3), (MISSING_RANDOMNESS, 9)]),
            "{yaml}"
        );
        validate(batch.data()).unwrap();
    }
    // Seed 1 at 15 %: T1 bucket 2004, T2 9912, T3 2036.
    let mut batch = linked_batch();
    let mut p = create("sampling_percentage: 15\nhash_seed: 1\nfail_closed: false").unwrap();
    let (_, dropped) = run(&mut *p, &mut batch);
    assert_eq!(
        frames(batch.data()),
        vec![vec!["t1", "t3", "unlinked", "zero"]]
    );
    assert_eq!(dropped, drops(&[(SAMPLED_OUT, 2)]));
}

#[test]
fn defaults_are_the_collectors_0_keeps_nothing_above_100_keeps_all() {
    // Default percentage 0: nothing kept (the Collector's default).
    let mut batch = linked_batch();
    let n = batch.sample_count();
    let (v, dropped) = run(&mut *create("{}").unwrap(), &mut batch);
    assert_eq!(v, Verdict::Drop);
    assert_eq!(dropped.values().sum::<u64>(), n);
    // 250 % means 100 %; fail_closed still drops what has no trace.
    let mut batch = linked_batch();
    let (_, dropped) = run(
        &mut *create("sampling_percentage: 250").unwrap(),
        &mut batch,
    );
    assert_eq!(frames(batch.data()), vec![vec!["t1", "t2", "t3"]]);
    assert_eq!(dropped, drops(&[(MISSING_RANDOMNESS, 9)]));
}

#[test]
fn what_profiles_cannot_do_is_refused_at_its_key() {
    let err = create(
        "sampling_percentage: -1\nmode: proportional\nsampling_precision: 15\n\
         attribute_source: record\nfrom_attribute: id\nsampling_priority: prio",
    )
    .err()
    .unwrap();
    let p = "processors::probabilistic_sampler";
    for want in [
        format!("{p}::sampling_percentage: sampling rate is negative: -1%"),
        format!("{p}::mode: \"proportional\" is not supported for profiles"),
        format!(
            "{p}::sampling_precision: sampling precision is out of range, should be 1 to 14: 15"
        ),
        format!("{p}::attribute_source: \"record\" applies to log records only"),
        format!("{p}::from_attribute: applies to log records only"),
        format!("{p}::sampling_priority: applies to log records only"),
    ] {
        assert!(err.contains(&want), "{want}\n in\n{err}");
    }
    assert_eq!(err.lines().count(), 6, "{err}");
    for (yaml, want) in [
        (
            "mode: equalizing",
            "::mode: \"equalizing\" is not supported for profiles",
        ),
        ("mode: fancy", "::mode: unsupported sampler mode \"fancy\""),
        (
            "sampling_precision: 0",
            "::sampling_precision: invalid sampling precision: 0",
        ),
        (
            "sampling_percentage: .nan",
            "::sampling_percentage: sampling rate is invalid",
        ),
        (
            "sampling_percentage: 1e-20",
            "::sampling_percentage: sampling rate is too small",
        ),
        (
            "attribute_source: span",
            "::attribute_source: invalid attribute source: span",
        ),
        ("samplingpercentage: 5", "unknown field"),
    ] {
        let err = create(yaml).err().unwrap();
        assert!(err.contains(want), "{yaml}: {err}");
    }
}
