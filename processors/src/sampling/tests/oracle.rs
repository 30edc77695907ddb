//! `sampling` against a reference model written from its documentation
//! (docs/components/processor-sampling.md): the identity's bytes per mode,
//! FNV-1a 32 over the seed's 4 bytes (least significant first) then those
//! bytes, kept when `hash & 0x3FFF < uint32(float32(percentage) * 163.84)`;
//! what has no identity is dropped under `fail_closed` and kept otherwise;
//! profiles left without samples go, as does a batch left empty. Compared on
//! resolved content and on the drop counts.

use std::collections::BTreeMap;

use crate::oracle::{self, RProfile, RSample, V};

use super::*;

// ---- the model ----

fn fnv1a(bytes: &[u8], seed: u32) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in seed.to_le_bytes().iter().chain(bytes) {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

struct Model {
    pct: f32,
    seed: u32,
    mode: &'static str,
    fail_closed: bool,
}

impl Model {
    /// The identities the batch's decisions hash, in the mode.
    fn identities(&self, input: &[RProfile]) -> Vec<Vec<u8>> {
        input
            .iter()
            .flat_map(|p| match self.mode {
                "trace" => p
                    .samples
                    .iter()
                    .filter_map(|s| not_zero(&s.link.0).map(<[u8]>::to_vec))
                    .collect(),
                "session" => vec![session(p)],
                _ => not_zero(&p.profile_id)
                    .map(<[u8]>::to_vec)
                    .into_iter()
                    .collect(),
            })
            .collect()
    }

    fn keeps(&self, id: Option<&[u8]>) -> bool {
        match id {
            None => !self.fail_closed,
            Some(b) => (fnv1a(b, self.seed) & 0x3FFF) < (self.pct * 163.84f32) as u32,
        }
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    (s.len().is_multiple_of(2) && s.bytes().all(|c| c.is_ascii_hexdigit())).then(|| {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    })
}

/// The 16 bytes of a UUID written as 32 hex digits, with or without the
/// 8-4-4-4-12 hyphens.
fn uuid(s: &str) -> Option<Vec<u8>> {
    let plain = if s.len() == 36 {
        let parts: Vec<&str> = s.split('-').collect();
        let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        if lens != [8, 4, 4, 4, 12] {
            return None;
        }
        parts.concat()
    } else {
        s.to_owned()
    };
    hex(&plain).filter(|b| b.len() == 16)
}

fn text(v: &V) -> String {
    match v {
        V::Str(s) => s.clone(),
        V::Int(n) => n.to_string(),
        other => panic!("the generator makes no {other:?}"),
    }
}

fn not_zero(id: &[u8]) -> Option<&[u8]> {
    id.iter().any(|&b| b != 0).then_some(id)
}

fn session(p: &RProfile) -> Vec<u8> {
    let profiler = p
        .attributes
        .iter()
        .find(|a| a.key == "sentry.profiler_id")
        .map(|a| text(&a.value))
        .filter(|s| !s.is_empty());
    if let Some(id) = profiler {
        return uuid(&id).unwrap_or_else(|| id.into_bytes());
    }
    let attrs = &p.resource;
    if let Some((_, v)) = attrs.iter().find(|(k, _)| k == "service.instance.id") {
        return text(v).into_bytes();
    }
    let mut lines: Vec<String> = attrs
        .iter()
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect();
    lines.sort();
    lines.join("\n").into_bytes()
}

/// The profiles kept, and the observations dropped by reason.
fn model(input: &[RProfile], m: &Model) -> (Vec<RProfile>, BTreeMap<String, u64>) {
    let mut drops: BTreeMap<String, u64> = BTreeMap::new();
    let mut drop = |id: Option<&[u8]>, n: u64| {
        let reason = if id.is_some() {
            SAMPLED_OUT
        } else {
            MISSING_RANDOMNESS
        };
        *drops.entry(reason.into()).or_default() += n;
    };
    let mut out = Vec::new();
    for p in input {
        let samples: Vec<RSample> = match m.mode {
            "trace" => p
                .samples
                .iter()
                .filter(|s| {
                    let id = not_zero(&s.link.0);
                    let keep = m.keeps(id);
                    if !keep {
                        drop(id, s.observations());
                    }
                    keep
                })
                .cloned()
                .collect(),
            mode => {
                let bytes = if mode == "session" {
                    Some(session(p))
                } else {
                    not_zero(&p.profile_id).map(<[u8]>::to_vec)
                };
                if m.keeps(bytes.as_deref()) {
                    p.samples.clone()
                } else {
                    drop(
                        bytes.as_deref(),
                        p.samples.iter().map(RSample::observations).sum(),
                    );
                    Vec::new()
                }
            }
        };
        if !samples.is_empty() {
            out.push(RProfile {
                samples,
                ..p.clone()
            });
        }
    }
    drops.retain(|_, n| *n > 0);
    (out, drops)
}

// ---- the batches ----

/// The same UUID hyphenated, plain and in capitals (one session), another
/// one, text that is no UUID, and an empty id (no profiler id).
const SESSIONS: &[&str] = &[
    "0e7b5c3a-9d4f-4a61-8b2c-5f1e3d7a9c04",
    "0e7b5c3a9d4f4a618b2c5f1e3d7a9c04",
    "0E7B5C3A-9D4F-4A61-8B2C-5F1E3D7A9C04",
    "fe69b2d347794bdcbb69fc95fa89dc10",
    "not-a-uuid",
    "",
];

/// Resources: with an instance id, and with only other attributes, in two
/// orders that must hash the same.
fn resource(r: usize) -> Vec<(String, String)> {
    let pairs: &[(&str, &str)] = match r {
        0 => &[("service.instance.id", "instance-0"), ("host.name", "a")],
        1 => &[("host.name", "b"), ("service.instance.id", "instance-1")],
        2 => &[("service.name", "api"), ("host.name", "a"), ("zone", "z")],
        3 => &[("zone", "z"), ("host.name", "a"), ("service.name", "api")],
        4 => &[("service.name", "api")],
        _ => &[],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// (resource, profiler id, profile id byte (0: all zeros, 1: none),
/// [(trace, observations)]) per profile.
type Shape = (usize, Option<usize>, u8, Vec<(usize, usize)>);

fn arb_shapes() -> impl Strategy<Value = Vec<Shape>> {
    let profile = (
        0..6usize,
        prop::option::weighted(0.6, 0..SESSIONS.len()),
        prop_oneof![1 => 0..2u8, 3 => any::<u8>()],
        prop::collection::vec((0..TRACES.len(), 1..4usize), 1..12),
    );
    prop::collection::vec(profile, 1..6)
}

fn build_shapes(shapes: &[Shape]) -> ProfileBatch {
    let mut b = Build::default();
    for (k, (r, session, id, samples)) in shapes.iter().enumerate() {
        b.profile(&Spec {
            resource: resource(*r),
            profiler_id: session.map(|i| SESSIONS[i].to_owned()),
            profile_id: match id {
                0 => vec![0; 16],
                1 => Vec::new(),
                &n => vec![n; 16],
            },
            samples: samples
                .iter()
                .enumerate()
                .map(|(j, &(t, n))| sample(&format!("p{k}s{j}"), &hex16(TRACES[t]), n))
                .collect(),
        });
    }
    b.batch()
}

/// A percentage, or (`None`) one whose threshold is the bucket of an
/// identity of the batch, the edge of the comparison.
fn arb_percentage() -> impl Strategy<Value = Option<f32>> {
    prop_oneof![
        1 => Just(Some(0.0f32)),
        1 => Just(Some(100.0f32)),
        // Rounds to no bucket at all.
        1 => Just(Some(0.005f32)),
        6 => (0.0f32..100.0).prop_map(Some),
        3 => Just(None),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sampling_matches_the_reference_model(
        shapes in arb_shapes(),
        mode in 0..3usize,
        seed in prop_oneof![Just(0u32), any::<u32>()],
        pct in arb_percentage(),
        edge in any::<prop::sample::Index>(),
        fail_closed in any::<bool>(),
    ) {
        let mut batch = build_shapes(&shapes);
        let input = oracle::resolve(batch.data());
        let mut m = Model { pct: pct.unwrap_or(0.0), seed, mode: MODES[mode], fail_closed };
        if pct.is_none() {
            let ids = m.identities(&input);
            if !ids.is_empty() {
                let bucket = fnv1a(ids[edge.index(ids.len())].as_slice(), seed) & 0x3FFF;
                m.pct = (bucket as f32 + 0.5) / 163.84;
                prop_assume!((m.pct * 163.84f32) as u32 == bucket);
            }
        }
        let pct = m.pct;
        let yaml = format!(
            "sampling_percentage: {pct}\nmode: {}\nhash_seed: {seed}\nfail_closed: {fail_closed}",
            m.mode
        );
        let mut p = create(&yaml).unwrap();
        let (want, want_drops) = model(&input, &m);
        let (verdict, drops, _) = oracle::run(&mut *p, &mut batch);
        prop_assert_eq!(drops, want_drops);
        if want.is_empty() {
            prop_assert_eq!(verdict, Verdict::Drop);
            return Ok(());
        }
        prop_assert_eq!(verdict, Verdict::Keep);
        validate(batch.data()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = oracle::normalized(oracle::resolve(batch.data()));
        prop_assert_eq!(got, oracle::normalized(want));
    }
}
